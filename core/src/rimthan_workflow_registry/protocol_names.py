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

# A manifest resource's ``_meta`` keys in the verifier's resource listing: the release id (as results'
# ``release.id``), whether start_workflow starts new runs on that release, and the workflows it carries
# (``available_workflows``: id, owner, title, aliases, versions).
RELEASE_META = "rimthan/release"
NEW_RUNS_META = "rimthan/new-runs"
WORKFLOWS_META = "rimthan/workflows"

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
    "NEW_RUNS_META",
    "PREPARE_STEP_VALIDATION",
    "RELEASE_META",
    "SETUP_STEP_ID",
    "START_WORKFLOW",
    "SUBMIT_STEP_VALIDATION",
    "TOOL_NAMES",
    "WORKFLOWS_META",
    "WORKFLOW_ENGINE_PROFILE",
]
