"""The run side: signed run state and the deterministic checks of one step.

Modules, in the order a tool call uses them:

``tokens``
    ``CheckpointKeyring``: HMAC-signed JWS (unencoded JSON payload) with key ids, rotation and retirement;
    ``token_wire`` the token's characters (the claims' payload, the split, the header's members, the digest,
    unverified peeks); ``token_mac`` the MAC (PyJWT's HS256) and the claims of a token whose MAC verified,
    imported on a token's first use; ``key_file`` the checkpoint key file (its JSON document, read strictly,
    written whole with mode 0600, created once);
    ``issued_tokens`` the bounded cache of tokens this process issued, consulted once header and key id pass.
``checkpoints``
    The checkpoint record (receipts, host binding, confirmed-state digest) and
    its issue/verify pair; ``checkpoint_claims`` holds the closed shape of its
    claims (checked in C), ``receipts`` the receipt tables kept in the columns the token carries.
``confirmed_state``
    The client's confirmed-state projection, its RFC 8785 digest and the
    per-field confirmation rules.
``host_binding``
    Binding a host harness to a pinned host adapter and required capabilities
    (:func:`host_blockers`), and a later step's host against that binding (:func:`binding_drift`).
``repository_policy``
    ``repository_policy.conflict``: output paths against the host's policy (:func:`policy_refusal`: one path).
``artifact_checks`` / ``attestations``
    Declared artifact bytes (count, size, media type, schema) and the host's
    attestations of setup delivery and output readback.
``validation_bundle``
    The signed validation bundle and the validator-report rules.
``step_payload``
    What a step tells the harness (instructions, assets, validators).
``requirements``
    What a workflow needs from a run (fields, capabilities, adapters), said up front.
``example_layout``
    Where a catalogue's worked examples are and what each is called (the build's and a harness's one rule).
``catalogue_examples``
    A catalogue's worked examples checked at build with the run's own checks (build only).
``stray_example``
    A file of the examples folder no workflow takes (imported only when a build finds one).
``audit`` / ``run_ending``
    Offline audit of a run's checkpoint log; how the audited run ended, read from its pinned release.

``__all__`` below is the public surface (what the server's engine and CLI
use); anything not listed is internal. ``artifact_checks``, ``attestations``
and ``repository_policy`` are used as modules (``repository_policy.conflict``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rimthan_workflow_registry.lazy_exports import first_use_getattr

if TYPE_CHECKING:
    from rimthan_workflow_registry.limits import MAX_TOKEN_CHARS
    from rimthan_workflow_registry.run.audit import LoggedToken, RunAuditError, audit_run, describe, read_log
    from rimthan_workflow_registry.run.catalogue_examples import check_examples
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
        REMOVAL_DIGEST,
        ConfirmedState,
        changed_fields,
        require_confirmed,
        require_digest,
        schema_misfit,
        state_failures,
        unconfirmed_fields,
        validate_against_schema,
    )
    from rimthan_workflow_registry.run.example_layout import (
        ANSWERS_EXAMPLE,
        CONFIRMED_STATE_EXAMPLE,
        EXAMPLES_DIR,
        example_name,
        has_own_examples,
        recorded_answers,
        reserved_example,
        workflow_named,
    )
    from rimthan_workflow_registry.run.host_binding import (
        binding_drift,
        binding_for,
        bound_adapter,
        harness_adapter,
        host_blockers,
    )
    from rimthan_workflow_registry.run.repository_policy import policy_refusal
    from rimthan_workflow_registry.run.requirements import (
        available_suffix,
        available_workflows,
        describe_available,
        missing_fields,
        workflow_needs,
    )
    from rimthan_workflow_registry.run.run_ending import RunEnding, ending_of
    from rimthan_workflow_registry.run.step_payload import StepPayloads, build_step_payload, release_file_uri
    from rimthan_workflow_registry.run.token_wire import (
        peek_claims,
        peek_manifest_digest,
        token_digest,
    )
    from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE, CHECKPOINT_TYPE, CheckpointKeyring
    from rimthan_workflow_registry.run.validation_bundle import (
        ValidatorSummary,
        check_reports,
        check_reports_size,
        input_digest,
        issue_bundle,
        receipts_on_entry,
        reports_size_problem,
        step_validated,
        validator_summaries,
        verify_bundle,
    )

__all__ = [
    "LoggedToken",
    "reports_size_problem",
    "BUNDLE_TYPE",
    "CHECKPOINT_TYPE",
    "MAX_TOKEN_CHARS",
    "REMOVAL_DIGEST",
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
    "available_suffix",
    "available_workflows",
    "binding_drift",
    "binding_for",
    "bound_adapter",
    "build_step_payload",
    "changed_fields",
    "check_examples",
    "recorded_answers",
    "reserved_example",
    "example_name",
    "ANSWERS_EXAMPLE",
    "CONFIRMED_STATE_EXAMPLE",
    "EXAMPLES_DIR",
    "check_reports",
    "check_reports_size",
    "describe",
    "describe_available",
    "ending_of",
    "harness_adapter",
    "has_own_examples",
    "workflow_named",
    "host_blockers",
    "input_digest",
    "issue_bundle",
    "issue_checkpoint",
    "missing_fields",
    "peek_claims",
    "peek_manifest_digest",
    "policy_refusal",
    "read_log",
    "receipts_on_entry",
    "release_file_uri",
    "require_confirmed",
    "require_digest",
    "schema_misfit",
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

# Each public name is imported from its module on first use, so a server start that only lists tools
# does not import what tool calls use (checkpoints, bundles, host binding, audit), nor the CLI's
# ``keys`` commands the audit code.
_HOME = {
    "LoggedToken": "rimthan_workflow_registry.run.audit",
    "reports_size_problem": "rimthan_workflow_registry.run.validation_bundle",
    "ArtifactReceipt": "rimthan_workflow_registry.run.checkpoints",
    "BUNDLE_TYPE": "rimthan_workflow_registry.run.tokens",
    "CHECKPOINT_TYPE": "rimthan_workflow_registry.run.tokens",
    "Checkpoint": "rimthan_workflow_registry.run.checkpoints",
    "CheckpointKeyring": "rimthan_workflow_registry.run.tokens",
    "ConfirmedState": "rimthan_workflow_registry.run.confirmed_state",
    "HostBinding": "rimthan_workflow_registry.run.checkpoints",
    "IssuedCheckpoint": "rimthan_workflow_registry.run.checkpoints",
    "MAX_TOKEN_CHARS": "rimthan_workflow_registry.limits",
    "REMOVAL_DIGEST": "rimthan_workflow_registry.run.confirmed_state",
    "RunAuditError": "rimthan_workflow_registry.run.audit",
    "RunEnding": "rimthan_workflow_registry.run.run_ending",
    "StepPayloads": "rimthan_workflow_registry.run.step_payload",
    "ValidatorReceipt": "rimthan_workflow_registry.run.checkpoints",
    "ValidatorSummary": "rimthan_workflow_registry.run.validation_bundle",
    "audit_run": "rimthan_workflow_registry.run.audit",
    "available_suffix": "rimthan_workflow_registry.run.requirements",
    "available_workflows": "rimthan_workflow_registry.run.requirements",
    "binding_drift": "rimthan_workflow_registry.run.host_binding",
    "binding_for": "rimthan_workflow_registry.run.host_binding",
    "bound_adapter": "rimthan_workflow_registry.run.host_binding",
    "build_step_payload": "rimthan_workflow_registry.run.step_payload",
    "changed_fields": "rimthan_workflow_registry.run.confirmed_state",
    "check_examples": "rimthan_workflow_registry.run.catalogue_examples",
    "recorded_answers": "rimthan_workflow_registry.run.example_layout",
    "reserved_example": "rimthan_workflow_registry.run.example_layout",
    "example_name": "rimthan_workflow_registry.run.example_layout",
    "ANSWERS_EXAMPLE": "rimthan_workflow_registry.run.example_layout",
    "CONFIRMED_STATE_EXAMPLE": "rimthan_workflow_registry.run.example_layout",
    "EXAMPLES_DIR": "rimthan_workflow_registry.run.example_layout",
    "check_reports": "rimthan_workflow_registry.run.validation_bundle",
    "check_reports_size": "rimthan_workflow_registry.run.validation_bundle",
    "describe": "rimthan_workflow_registry.run.audit",
    "describe_available": "rimthan_workflow_registry.run.requirements",
    "ending_of": "rimthan_workflow_registry.run.run_ending",
    "harness_adapter": "rimthan_workflow_registry.run.host_binding",
    "has_own_examples": "rimthan_workflow_registry.run.example_layout",
    "workflow_named": "rimthan_workflow_registry.run.example_layout",
    "host_blockers": "rimthan_workflow_registry.run.host_binding",
    "input_digest": "rimthan_workflow_registry.run.validation_bundle",
    "issue_bundle": "rimthan_workflow_registry.run.validation_bundle",
    "issue_checkpoint": "rimthan_workflow_registry.run.checkpoints",
    "missing_fields": "rimthan_workflow_registry.run.requirements",
    "peek_claims": "rimthan_workflow_registry.run.token_wire",
    "peek_manifest_digest": "rimthan_workflow_registry.run.token_wire",
    "policy_refusal": "rimthan_workflow_registry.run.repository_policy",
    "read_log": "rimthan_workflow_registry.run.audit",
    "receipts_on_entry": "rimthan_workflow_registry.run.validation_bundle",
    "release_file_uri": "rimthan_workflow_registry.run.step_payload",
    "require_confirmed": "rimthan_workflow_registry.run.confirmed_state",
    "require_digest": "rimthan_workflow_registry.run.confirmed_state",
    "schema_misfit": "rimthan_workflow_registry.run.confirmed_state",
    "state_failures": "rimthan_workflow_registry.run.confirmed_state",
    "step_validated": "rimthan_workflow_registry.run.validation_bundle",
    "token_digest": "rimthan_workflow_registry.run.token_wire",
    "unconfirmed_fields": "rimthan_workflow_registry.run.confirmed_state",
    "validate_against_schema": "rimthan_workflow_registry.run.confirmed_state",
    "validator_summaries": "rimthan_workflow_registry.run.validation_bundle",
    "verify_bundle": "rimthan_workflow_registry.run.validation_bundle",
    "verify_checkpoint": "rimthan_workflow_registry.run.checkpoints",
    "workflow_needs": "rimthan_workflow_registry.run.requirements",
}


__getattr__ = first_use_getattr(__name__, _HOME, globals())
