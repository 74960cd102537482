"""The names the four-tool workflow protocol fixes, defined once.

Server, host kit, tests and benchmarks all speak these exact strings to each
other; a second spelling anywhere would let the two ends drift apart, so
every one of them imports from here (the server re-exports the tool names
from ``tool_contracts``).
"""

from __future__ import annotations

START_WORKFLOW = "rimthan.start_workflow"
CONTINUE_WORKFLOW = "rimthan.continue_workflow"
PREPARE_STEP_VALIDATION = "rimthan.prepare_step_validation"
SUBMIT_STEP_VALIDATION = "rimthan.submit_step_validation"
TOOL_NAMES = (START_WORKFLOW, CONTINUE_WORKFLOW, PREPARE_STEP_VALIDATION, SUBMIT_STEP_VALIDATION)

# Every workflow starts here: the step that installs the host assets (catalogue rules enforce it).
SETUP_STEP_ID = "setup-workspace"

# The release profile the four tools are served under (a release's ``scope.profile``).
WORKFLOW_ENGINE_PROFILE = "workflow-engine"

# The claims a validation bundle binds (prepare_step_validation issues it, submit_step_validation takes it back).
BUNDLE_FIELDS = (
    "workflow",
    "release",
    "manifest_digest",
    "step_id",
    "checkpoint_digest",
    "artifacts",
    "validators",
    "issued_at",
    "key_id",
)

__all__ = [
    "BUNDLE_FIELDS",
    "CONTINUE_WORKFLOW",
    "PREPARE_STEP_VALIDATION",
    "SETUP_STEP_ID",
    "START_WORKFLOW",
    "SUBMIT_STEP_VALIDATION",
    "TOOL_NAMES",
    "WORKFLOW_ENGINE_PROFILE",
]
