"""The run side: signed run state and the deterministic checks of one step.

Modules, in the order a tool call uses them:

``tokens``
    ``CheckpointKeyring``: HMAC-signed JWS (unencoded JSON payload) with key ids, rotation and retirement.
``checkpoints``
    The checkpoint record (receipts, host binding, confirmed-state digest) and
    its issue/verify pair; ``checkpoint_claims`` holds the closed shape of its
    claims (checked in C), ``receipts`` the receipt tables kept in the columns the token carries.
``confirmed_state``
    The client's confirmed-state projection, its RFC 8785 digest and the
    per-field confirmation rules.
``host_binding``
    Binding a host harness to a pinned host adapter and required capabilities
    (``host_blockers``).
``repository_policy``
    ``repository_policy.conflict``: output paths against the host's policy.
``artifact_checks`` / ``attestations``
    Declared artifact bytes (count, size, media type, schema) and the host's
    attestations of setup delivery and output readback.
``validation_bundle``
    The signed validation bundle and the validator-report rules.
``step_payload``
    What a step tells the harness (instructions, assets, validators).
``audit``
    Offline audit of a run's checkpoint log.

``__all__`` below is the public surface (what the server's engine and CLI
use); anything not listed is internal. ``artifact_checks``, ``attestations``
and ``repository_policy`` are used as modules (``repository_policy.conflict``).
"""

from rimthan_workflow_registry.run.audit import RunAuditError, audit_run, describe, read_log
from rimthan_workflow_registry.run.checkpoints import (
    ArtifactReceipt,
    Checkpoint,
    HostBinding,
    IssuedCheckpoint,
    ValidatorReceipt,
    issue_checkpoint,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.confirmed_state import (
    ConfirmedState,
    changed_fields,
    require_confirmed,
    require_digest,
    state_failures,
    unconfirmed_fields,
    validate_against_schema,
)
from rimthan_workflow_registry.run.host_binding import binding_for, bound_adapter, host_blockers
from rimthan_workflow_registry.run.requirements import (
    available_workflows,
    describe_available,
    missing_fields,
    workflow_needs,
)
from rimthan_workflow_registry.run.run_ending import RunEnding, run_ending
from rimthan_workflow_registry.run.step_payload import StepPayloads, build_step_payload, release_file_uri
from rimthan_workflow_registry.run.tokens import (
    BUNDLE_TYPE,
    CHECKPOINT_TYPE,
    MAX_TOKEN_CHARS,
    CheckpointKeyring,
    peek_claims,
    peek_manifest_digest,
    token_digest,
)
from rimthan_workflow_registry.run.validation_bundle import (
    BUNDLE_FIELDS,
    ValidatorSummary,
    check_reports,
    input_digest,
    issue_bundle,
    receipts_on_entry,
    step_validated,
    validator_summaries,
    verify_bundle,
)

__all__ = [
    "BUNDLE_FIELDS",
    "BUNDLE_TYPE",
    "CHECKPOINT_TYPE",
    "MAX_TOKEN_CHARS",
    "ArtifactReceipt",
    "Checkpoint",
    "CheckpointKeyring",
    "ConfirmedState",
    "HostBinding",
    "IssuedCheckpoint",
    "RunAuditError",
    "RunEnding",
    "StepPayloads",
    "ValidatorReceipt",
    "ValidatorSummary",
    "audit_run",
    "available_workflows",
    "binding_for",
    "bound_adapter",
    "build_step_payload",
    "changed_fields",
    "check_reports",
    "describe",
    "describe_available",
    "host_blockers",
    "input_digest",
    "issue_bundle",
    "issue_checkpoint",
    "missing_fields",
    "peek_claims",
    "peek_manifest_digest",
    "read_log",
    "receipts_on_entry",
    "release_file_uri",
    "require_confirmed",
    "require_digest",
    "run_ending",
    "state_failures",
    "step_validated",
    "token_digest",
    "unconfirmed_fields",
    "validate_against_schema",
    "validator_summaries",
    "verify_bundle",
    "verify_checkpoint",
    "workflow_needs",
]
