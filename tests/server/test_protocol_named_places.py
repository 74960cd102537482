"""Every function, method and module the four-tool workflow protocol names is where it puts it.

The protocol's text names these places (the engine ``calls _host_blockers``,
``_next_target evaluates ... resolve_branches``, ``_dispatch_migration calls
WorkflowEngineQueryModule.migrate_workflow``, ...). A split of a module by
responsibility may move helpers, never these: a reader of the protocol finds
each under the name and in the module it gives.
"""

from __future__ import annotations

import importlib

import pytest

# (module, attribute path) as the protocol names them.
NAMED_PLACES = [
    ("rimthan_workflow_mcp.server", "create_mcp_application"),
    ("rimthan_workflow_mcp.server", "_build_runtime_state"),
    ("rimthan_workflow_mcp.server", "_validate_instance"),
    ("rimthan_workflow_mcp.server", "_dispatch_tool"),
    ("rimthan_workflow_mcp.server", "_dispatch_migration"),
    ("rimthan_workflow_mcp.server", "domain_tool_error"),
    ("rimthan_workflow_mcp.tool_contracts", "workflow_engine_tool_contracts"),
    ("rimthan_workflow_mcp.provider", "ReleaseProvider.migration_target"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule.start_workflow"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule.continue_workflow"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule.migrate_workflow"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule.prepare_step_validation"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule.submit_step_validation"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule._host_blockers"),
    ("rimthan_workflow_mcp.workflow_engine", "WorkflowEngineQueryModule._next_target"),
    ("rimthan_workflow_registry.workflow_engine", "resolve_branches"),
    ("rimthan_workflow_registry.release.loader", "ReleaseLoader._validate_workflow_catalogue"),
    ("rimthan_workflow_registry.run.repository_policy", "conflict"),
]


@pytest.mark.parametrize(("module", "path"), NAMED_PLACES, ids=[f"{m}:{p}" for m, p in NAMED_PLACES])
def test_the_protocols_named_place_is_there(module: str, path: str) -> None:
    found: object = importlib.import_module(module)
    for part in path.split("."):
        assert hasattr(found, part), f"{module}.{path}: the protocol names it; {part!r} is missing"
        found = getattr(found, part)
    assert callable(found) or isinstance(found, property), f"{module}.{path} is not a function"
