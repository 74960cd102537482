"""The run side: signed run state and the deterministic checks of one step.

Modules, in the order a tool call uses them:

``tokens``
    ``CheckpointKeyring``: HMAC-signed JWTs with key ids, rotation and retirement.
``checkpoints``
    The checkpoint record (receipts, host binding, confirmed-state digest) and
    its issue/verify pair.
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

``__all__`` below is the public surface; anything not listed is internal.
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
from rimthan_workflow_registry.run.tokens import (
    BUNDLE_TYPE,
    CHECKPOINT_TYPE,
    MAX_TOKEN_CHARS,
    CheckpointKeyring,
    token_digest,
)

__all__ = [
    "BUNDLE_TYPE",
    "CHECKPOINT_TYPE",
    "MAX_TOKEN_CHARS",
    "ArtifactReceipt",
    "Checkpoint",
    "CheckpointKeyring",
    "HostBinding",
    "IssuedCheckpoint",
    "RunAuditError",
    "ValidatorReceipt",
    "audit_run",
    "describe",
    "issue_checkpoint",
    "token_digest",
    "verify_checkpoint",
    "read_log",
]
