"""What to do about each failure: one table beside the closed code list.

Both command-line tools (``rimthan-pack``, ``rimthan-mcp``) print a refusal as
``error: <code>: <file>: <message>`` then ``next: <what to do>``; the ``next``
line comes from here, so the advice for a code is written once and says what
fixes *that* failure. Where the right step depends on the situation (a build
that was discarded has no release to co-sign), the refusal carries its own
``next_step`` and that wins over the table. docs/failure-codes.md shows the
same text in its "what to do" column; a test keeps the two identical.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Mapping
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType

from rimthan_workflow_registry.errors import FailureCode, RegistryError

__all__ = [
    "FOR_A_HARNESS",
    "REMEDIATION",
    "ExitStatus",
    "harness_next_step",
    "io_next_step",
    "io_refusal",
    "local_io",
    "next_step",
]


class ExitStatus(IntEnum):
    """Exit statuses of both command-line tools (documented in docs/failure-codes.md)."""

    OK = 0
    REFUSED = 1
    USAGE = 2
    INTERRUPTED = 130  # 128 + SIGINT, the status a shell reports for Ctrl-C
    OUTPUT_CLOSED = 141  # 128 + SIGPIPE: stdout's reader went away (``... | head``), as a shell reports it


_C = FailureCode
_NEW_VERSION = "a release is never edited: to change it, edit its catalogue source and build a new version"
_TABLE: dict[FailureCode, str] = {
    # --- release verification
    _C.RELEASE_NOT_FOUND: "check the path: a release is a directory named NAME-VERSION, made by `rimthan-pack build`",
    _C.MANIFEST_MISSING: "the release is incomplete: build it again from its catalogue source "
    "(`rimthan-pack build SOURCE --key KEY`)",
    _C.MANIFEST_INVALID: "build the release again from its catalogue source; a manifest is never edited by hand",
    _C.MANIFEST_NOT_CANONICAL: "the manifest was re-serialised after signing: restore the signed copy or build again",
    _C.MANIFEST_DUPLICATE_KEY: "the manifest was edited after signing: restore the signed copy or build again",
    _C.SIGNATURE_MISSING: "sign it: `rimthan-pack sign RELEASE --key KEY`",
    _C.SIGNATURE_INVALID: "the manifest or a signature was altered: restore the release from a good copy, "
    "or delete the bad signatures/<keyid>.sig and have that key holder sign again",
    _C.SIGNATURE_UNTRUSTED: "pass the --trust that names the signer, or add the signer's .pub to the trust store "
    "(keys/README.md)",
    _C.SIGNATURE_THRESHOLD_NOT_MET: "collect co-signatures from more trusted key holders: "
    "`rimthan-pack sign RELEASE --key THEIR_KEY`",
    _C.FILE_MISSING: "a listed file was deleted: restore the release from a good copy or build it again",
    _C.FILE_UNLISTED: "delete the file the manifest does not list; a release holds exactly its listed files "
    f"({_NEW_VERSION})",
    _C.FILE_DIGEST_MISMATCH: "the file was changed after signing: restore the release from a good copy "
    f"({_NEW_VERSION})",
    _C.FILE_SIZE_MISMATCH: "the file was truncated or grown after signing: restore the release from a good copy "
    f"({_NEW_VERSION})",
    _C.FILE_TYPE_FORBIDDEN: "replace the link or special file with a regular file",
    _C.PATH_UNSAFE: "rename the file: relative, plain UTF-8 (NFC) names, no hidden files, no names "
    "differing only in case",
    _C.CHECKSUMS_MISMATCH: "SHA256SUMS was edited after signing: restore the release from a good copy",
    _C.SCOPE_MISMATCH: "use the release built for this scope, or pass the --scope/--profile the release declares",
    _C.RELEASE_EXISTS: "releases are immutable: bump version in catalogue.toml and build again",
    _C.DESTINATION_EXISTS: "pick a path that does not exist yet; keys, signatures and sources are never overwritten",
    _C.ROLLBACK_REFUSED: "publish a newer version, or lower the activation floor deliberately "
    "(`rimthan-mcp serve --lower-floor`)",
    # --- trust and keys
    _C.TRUST_STORE_INVALID: "point --trust at a directory of *.pub files or a TOML trust file (keys/README.md)",
    # a trusted public key; a private --key and checkpoint keys carry their own next step where they are read
    _C.KEY_INVALID: "replace or remove the named key in --trust: each trusted key is a PEM Ed25519 public key (the "
    "PREFIX.pub `rimthan-pack keygen --out PREFIX` wrote)",
    _C.KEY_PATH_TRACKED: "write private keys outside the repository or into a git-ignored directory "
    "such as private-keys/ (never a trust directory)",
    _C.KEY_FILE_EXPOSED: "make the key file readable and writable by its owner only (`chmod 600 FILE`), or have "
    "the owner of a secret mount drop others' access",
    # --- catalogue rules
    _C.CATALOGUE_INVALID: "fix the named TOML key in the catalogue source (docs/catalogue-format.md)",
    _C.SCHEMA_INVALID: "fix the JSON Schema at the reported pointer so it is valid Draft 2020-12",
    _C.REFERENCE_UNRESOLVED: "add the missing step, asset, schema, validator or adapter, or correct the reference",
    _C.ALIAS_COLLISION: "rename one workflow id or alias so each names one workflow of its owner",
    _C.FIRST_STEP_NOT_SETUP: "make setup-workspace, with its workspace manifest output, the first step",
    _C.BRANCH_PREDICATE_INVALID: (
        "use `equals` or `one_of` on a field declared in confirmed_state_schema; give every choice a branch, "
        "and make every value one the field's schema accepts"
    ),
    _C.BRANCH_AMBIGUOUS: "make the branches' value sets disjoint on one field",
    _C.TERMINAL_UNREACHABLE: "connect the named step: every step must be reachable and reach a terminal step",
    # --- workflow protocol
    _C.INVALID_ARGUMENTS: "fix the value at the reported field to match the tool's input schema",
    _C.METHOD_NOT_FOUND: "call one of the four rimthan.* tools listed by tools/list",
    _C.WORKFLOW_NOT_FOUND: "use a workflow id or alias the release lists (tools/list descriptions, resources)",
    _C.CONFIRMED_STATE_INVALID: "fix the value at the pointer to match the workflow's confirmed_state_schema "
    "(a state past its size bound: confirm short facts, keep long texts in files)",
    _C.CONFIRMED_STATE_MISMATCH: "send the last confirmed state exactly as the checkpoint bound it",
    _C.CONFIRMATION_REQUIRED: "ask the user and send their confirmation for the named field, dated when they gave it",
    _C.CONFIRMED_FIELD_MISSING: "ask the user for the missing field's value (`details.expects` is its schema) "
    "and confirm it",
    _C.HOST_ADAPTER_INCOMPATIBLE: "run with a host adapter version the workflow pins",
    _C.HOST_CAPABILITY_MISSING: "run on a host that has the named capability",
    _C.VALIDATOR_CAPABILITY_MISSING: "run on a host whose validators have the named capability",
    _C.VALIDATOR_CAPABILITIES_MISMATCH: "send the validator capabilities the run was started with",
    _C.HOST_MISMATCH: "continue the run from the host (harness, adapter and capabilities) that started it",
    _C.CHECKPOINT_INVALID: "send the checkpoint token exactly as the server issued it",
    _C.CHECKPOINT_KEY_UNKNOWN: "the key that signed this checkpoint is not held here, most likely because this "
    "server's checkpoint keys differ from the one that issued it (replicas each with their own "
    "STATE_DIR/checkpoint-keys.json, a state directory restored from an older backup, `keys rotate` on one "
    "replica): give every replica the same --checkpoint-keys FILE (or restore the state directory's "
    "checkpoint-keys.json) and restart it, route the run to a server holding that key, or start a new run",
    _C.RUN_CHAIN_BROKEN: "audit the complete log of one run: every checkpoint token, one per line, in issue order",
    _C.RUN_POSITION_UNKNOWN: "tell the owner which step the run stopped at and what it asked; restore the run's "
    "state file from a backup, or start a new run",
    _C.RUN_BUSY: "carry on in the process that holds the run, or stop it (or close its session) and start or resume "
    "the run again",
    _C.RUN_LOCK_LOST: "make sure no other process moves the run, then resume it in a new session",
    _C.VERIFIER_LOST: "make the call again if it still fits where the run is: the bridge restarted its verifier (or "
    "reconnected to the URL) and resumed the run from its log (a verifier at a URL that did not answer the new "
    "connection: once it runs again, resume the run)",
    _C.PINNED_RELEASE_UNAVAILABLE: "route the run to a server that holds its pinned release, "
    "or put that release back in the releases directory and refresh the server",
    _C.VALIDATION_BUNDLE_INVALID: "call rimthan.prepare_step_validation again and submit with the new bundle",
    _C.STEP_NOT_GATED: "the step has nothing to validate: call rimthan.continue_workflow",
    _C.BRANCH_NO_MATCH: "confirm one of the choices the step's question offers",
    # --- deterministic artifact validation
    _C.REPOSITORY_POLICY_CONFLICT: "write the output to a path the host's repository policy allows",
    _C.ARTIFACT_COUNT_MISMATCH: "send exactly one artifact per output the step declares",
    _C.ARTIFACT_UNDECLARED: "drop the artifact or use an output id the step declares",
    _C.ARTIFACT_DUPLICATE: "send each artifact id once",
    _C.ARTIFACT_MISSING: "produce and send the named declared output",
    _C.ARTIFACT_TOO_LARGE: "shrink the artifact below its max_bytes",
    _C.ARTIFACTS_TOTAL_TOO_LARGE: "shrink the step's artifacts below max_total_bytes",
    _C.MEDIA_TYPE_MISMATCH: "send the artifact with the media type the output declares",
    _C.JSON_PARSE_FAILED: "make the artifact valid JSON",
    _C.JSON_SCHEMA_FAILED: "fix the artifact at the reported pointer to match its output schema",
    _C.INPUT_BINDING_MISMATCH: "bind each step input once, to the digest of the receipt it comes from",
    _C.WORKSPACE_MANIFEST_CONTRACT_MISMATCH: "write the workspace manifest from the release's asset contract unchanged",
    _C.OUTPUT_ATTESTATION_REQUIRED: "read the written output back and attest its path, digest and size",
    _C.OUTPUT_ATTESTATION_MISMATCH: "write the output again and attest what is actually on disk",
    # --- semantic validation
    _C.REPORT_SET_MISMATCH: "send exactly one report per validator the bundle requires",
    _C.REPORT_STALE: "validate the bytes and instruction the current bundle binds, then submit again",
    _C.REPORT_HOST_MISMATCH: "have the run's own host (its harness and adapter) produce the reports",
    _C.REPORT_CONTRADICTORY: (
        "send the validator's verdict as it is: outcome fail with its error findings, or pass with warnings only"
    ),
    # --- migration
    _C.MIGRATION_UNAVAILABLE: "continue on the pinned release, or have the operator give the server a migration "
    "target (--release DIR --migration-target DIR, or --migrate-to-newest with a newer release)",
    _C.MIGRATION_SCOPE_MISMATCH: "migrate to the loaded migration target of the same scope",
    _C.MIGRATION_NOT_NEWER: "migrate only to a newer version of the workflow",
    _C.MIGRATION_SAME_RELEASE: "nothing to do: the run is already on the target release",
    _C.MIGRATION_CONFIRMATION_REQUIRED: "show the preview to the user and call again with confirm: true",
    # --- OCI registry
    _C.OCI_REFERENCE_INVALID: "write the reference as oci://HOST[:PORT]/REPOSITORY[:TAG] "
    "or oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST",
    _C.OCI_REGISTRY_ERROR: "check the registry address and tag, --plain-http for a registry without TLS, and "
    "credentials (Docker config file or RIMTHAN_REGISTRY_USERNAME/_USERNAME_FILE with _PASSWORD/_PASSWORD_FILE)",
    _C.OCI_ARTIFACT_INVALID: "nothing was installed; ask the publisher to push the release again with "
    "`rimthan-pack push`",
    _C.OCI_BLOB_MISMATCH: "the registry's storage was altered; nothing was installed: restore the registry and "
    "push the release again",
    _C.OCI_TAG_MISMATCH: "the tag was moved to another release; nothing was installed: re-point the tag with "
    "`rimthan-pack push`",
    _C.OCI_TAG_EXISTS: "publish a new version, or pass --replace-tag to move the tag (the old release stays "
    "addressable by digest)",
    _C.OCI_UNAUTHORIZED: "give credentials the registry accepts: a Docker config file (~/.docker/config.json or "
    "$DOCKER_CONFIG/config.json) or RIMTHAN_REGISTRY_USERNAME (or _USERNAME_FILE) with RIMTHAN_REGISTRY_PASSWORD "
    "(or _PASSWORD_FILE)",
    _C.OCI_TLS_UNTRUSTED: "trust the CA that issued the registry's certificate: set REQUESTS_CA_BUNDLE to a PEM "
    "file holding it (see docs/fleet.md)",
    # --- server
    _C.REFRESH_REJECTED: "nothing changed: the last verified release keeps serving; fix or remove the rejected release",
    _C.LISTEN_LIMIT_REACHED: "close a subscriptions/listen stream this client no longer needs (one per client "
    "tells it every change), or open it again later, when others have closed",
    _C.INTERNAL_ERROR: "rerun with --log-level debug and report the logged details",
    # --- command line
    _C.USAGE: "run the command with --help",
    _C.IO_ERROR: "check that the named path exists and that you may read and write it",
    _C.INTERRUPTED: "run the command again when you want it to finish",
}

REMEDIATION: Mapping[FailureCode, str] = MappingProxyType(_TABLE)
"""Failure code -> what to do next; covers every :class:`FailureCode`."""

FOR_A_HARNESS: Mapping[FailureCode, str] = MappingProxyType(
    {
        _C.INTERNAL_ERROR: "nothing in this call can fix it: report it to the operator with the time of the call "
        "(the server logged the details), then try the call again later",
    }
)
"""The few codes whose :data:`REMEDIATION` line is an operator's step a harness cannot take (rerun the server
with a flag): what a harness, reading a tool refusal or a JSON-RPC error's ``data``, can do instead. Every other
code's line suits both readers, so it is written once, in :data:`REMEDIATION`."""


def next_step(error: RegistryError) -> str:
    """The ``next:`` line for a refusal: its situation-specific step, else the code's remediation."""
    return error.next_step or REMEDIATION[error.code]


def harness_next_step(error: RegistryError) -> str:
    """The ``next`` a harness reads (a tool refusal, a resource or prompt error): the refusal's own step, else
    the code's :data:`FOR_A_HARNESS` line where it has one, else its :data:`REMEDIATION` line."""
    return error.next_step or FOR_A_HARNESS.get(error.code) or REMEDIATION[error.code]


FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""The OS refusals that say what to do whatever the file was for: free space, or a writable file system."""


def io_next_step(exc: OSError, where: str | None = None, *, otherwise: str | None = None) -> str:
    """What to do about an OS refusal, by what the OS said (not one line for all); ``where``: the path to name.

    ``otherwise`` is the caller's own step, for when it knows better than the
    errno what the file was for; a full or read-only file system
    (:data:`FULL_OR_READ_ONLY`) is said as such whatever the file was for.
    """
    if otherwise is not None and exc.errno not in FULL_OR_READ_ONLY:
        return otherwise
    if where is None:
        where = exc.filename if isinstance(exc.filename, str) else "the named path"
    by_errno = {
        errno.ENOENT: f"check the path: {where} does not exist",
        errno.EACCES: f"give this user access to {where}, or choose another path",
        errno.EPERM: f"give this user access to {where}, or choose another path",
        errno.ENOTDIR: f"a part of {where} is a regular file where a directory is expected: move it or pick "
        "another path",
        errno.EISDIR: f"{where} is a directory where a file is expected: pick a file",
        errno.ENOSPC: f"free disk space on the file system holding {where} and run again",
        errno.EDQUOT: f"free disk space on the file system holding {where} (a disk quota is full) and run again",
        errno.EROFS: f"{where} is on a read-only file system: choose a writable path",
    }
    return by_errno.get(exc.errno or 0, REMEDIATION[FailureCode.IO_ERROR])


def io_refusal(exc: OSError, where: str, doing: str) -> RegistryError:
    """``io_error`` for a local read or write that failed while ``doing``, naming ``where`` (a write on a full
    disk names no file: the OS error's own name, if any, is in the message), with the errno's next step."""
    named = f" ({exc.filename})" if isinstance(exc.filename, str) and exc.filename != where else ""
    return RegistryError(
        FailureCode.IO_ERROR,
        f"{doing}: {exc.strerror or exc}{named}",
        path=where,
        next_step=io_next_step(exc, where),
    )


@contextlib.contextmanager
def local_io(where: Path | str, doing: str) -> Iterator[None]:
    """A local file system's refusal (full, read-only, no access) while ``doing``: :func:`io_refusal` at ``where``."""
    try:
        yield
    except OSError as exc:
        raise io_refusal(exc, str(where), doing) from None
