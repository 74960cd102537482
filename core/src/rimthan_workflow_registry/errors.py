"""One exception hierarchy and one closed list of failure codes.

Every refusal Rimthan makes carries a code from :class:`FailureCode`; the code
is the stable, machine-readable part, the message the human-readable one. Like
python-tuf's ``exceptions`` module, callers catch the narrowest class they can
act on and everything else surfaces as a :class:`RegistryError`.

Hierarchy::

    RegistryError                     any domain refusal (code + message)
    ├── CatalogueError                a catalogue breaks an authoring rule
    ├── ReleaseVerificationError      a release on disk does not verify
    ├── TrustError                    a trust store / key file is unusable
    ├── KeyringError                  checkpoint HMAC keys are unusable
    └── WorkflowProtocolError         a tool call breaks the workflow protocol
        └── TokenError                a checkpoint / bundle token is refused
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Self, TypeVar

# What the unicode_escape codec writes for each control character (spelt out: that codec is imported on first use).
_SHORT_ESCAPES = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_CONTROLS_ESCAPED = {c: _SHORT_ESCAPES.get(c, f"\\x{c:02x}") for c in (*range(0x20), 0x7F)}
QUOTE_MAX_CHARS = 256  # a peer's text quoted in a refusal or a log line: a URL or a name fits, a flood does not


class FailureCode(StrEnum):
    """The closed list of failure codes. Documented in docs/failure-codes.md."""

    # --- release verification -------------------------------------------------
    RELEASE_NOT_FOUND = "release_not_found"
    MANIFEST_MISSING = "manifest_missing"
    MANIFEST_INVALID = "manifest_invalid"
    MANIFEST_NOT_CANONICAL = "manifest_not_canonical"
    MANIFEST_DUPLICATE_KEY = "manifest_duplicate_key"
    SIGNATURE_MISSING = "signature_missing"
    SIGNATURE_INVALID = "signature_invalid"
    SIGNATURE_UNTRUSTED = "signature_untrusted"
    SIGNATURE_THRESHOLD_NOT_MET = "signature_threshold_not_met"
    FILE_MISSING = "file_missing"
    FILE_UNLISTED = "file_unlisted"
    FILE_DIGEST_MISMATCH = "file_digest_mismatch"
    FILE_SIZE_MISMATCH = "file_size_mismatch"
    FILE_TYPE_FORBIDDEN = "file_type_forbidden"
    PATH_UNSAFE = "path_unsafe"
    CHECKSUMS_MISMATCH = "checksums_mismatch"
    SCOPE_MISMATCH = "scope_mismatch"
    RELEASE_EXISTS = "release_exists"
    DESTINATION_EXISTS = "destination_exists"
    ROLLBACK_REFUSED = "rollback_refused"
    # --- trust and keys -----------------------------------------------------------
    TRUST_STORE_INVALID = "trust_store_invalid"
    KEY_INVALID = "key_invalid"
    KEY_PATH_TRACKED = "key_path_tracked"
    KEY_FILE_EXPOSED = "key_file_exposed"
    # --- catalogue rules ----------------------------------------------------------
    CATALOGUE_INVALID = "catalogue_invalid"
    SCHEMA_INVALID = "schema_invalid"
    REFERENCE_UNRESOLVED = "reference_unresolved"
    ALIAS_COLLISION = "alias_collision"
    FIRST_STEP_NOT_SETUP = "first_step_not_setup"
    BRANCH_PREDICATE_INVALID = "branch_predicate_invalid"
    BRANCH_AMBIGUOUS = "branch_ambiguous"
    TERMINAL_UNREACHABLE = "terminal_unreachable"
    # --- workflow protocol --------------------------------------------------------
    INVALID_ARGUMENTS = "invalid_arguments"
    METHOD_NOT_FOUND = "method_not_found"
    WORKFLOW_NOT_FOUND = "workflow_not_found"
    CONFIRMED_STATE_INVALID = "confirmed_state_invalid"
    CONFIRMED_STATE_MISMATCH = "confirmed_state_mismatch"
    CONFIRMATION_REQUIRED = "confirmation_required"
    CONFIRMED_FIELD_MISSING = "confirmed_field_missing"
    HOST_ADAPTER_INCOMPATIBLE = "host_adapter_incompatible"
    HOST_CAPABILITY_MISSING = "host_capability_missing"
    VALIDATOR_CAPABILITY_MISSING = "validator_capability_missing"
    VALIDATOR_CAPABILITIES_MISMATCH = "validator_capabilities_mismatch"
    HOST_MISMATCH = "host_mismatch"
    CHECKPOINT_INVALID = "checkpoint_invalid"
    CHECKPOINT_KEY_UNKNOWN = "checkpoint_key_unknown"
    RUN_CHAIN_BROKEN = "run_chain_broken"
    RUN_POSITION_UNKNOWN = "run_position_unknown"
    RUN_BUSY = "run_busy"
    RUN_LOCK_LOST = "run_lock_lost"
    VERIFIER_LOST = "verifier_lost"
    PINNED_RELEASE_UNAVAILABLE = "pinned_release_unavailable"
    VALIDATION_BUNDLE_INVALID = "validation_bundle_invalid"
    STEP_NOT_GATED = "step_not_gated"
    BRANCH_NO_MATCH = "branch_no_match"
    # --- deterministic artifact validation ----------------------------------------
    REPOSITORY_POLICY_CONFLICT = "repository_policy_conflict"
    ARTIFACT_COUNT_MISMATCH = "artifact_count_mismatch"
    ARTIFACT_UNDECLARED = "artifact_undeclared"
    ARTIFACT_DUPLICATE = "artifact_duplicate"
    ARTIFACT_MISSING = "artifact_missing"
    ARTIFACT_TOO_LARGE = "artifact_too_large"
    ARTIFACTS_TOTAL_TOO_LARGE = "artifacts_total_too_large"
    MEDIA_TYPE_MISMATCH = "media_type_mismatch"
    JSON_PARSE_FAILED = "json_parse_failed"
    JSON_SCHEMA_FAILED = "json_schema_failed"
    INPUT_BINDING_MISMATCH = "input_binding_mismatch"
    WORKSPACE_MANIFEST_CONTRACT_MISMATCH = "workspace_manifest_contract_mismatch"
    OUTPUT_ATTESTATION_REQUIRED = "output_attestation_required"
    OUTPUT_ATTESTATION_MISMATCH = "output_attestation_mismatch"
    # --- semantic validation ------------------------------------------------------
    REPORT_SET_MISMATCH = "report_set_mismatch"
    REPORT_STALE = "report_stale"
    REPORT_HOST_MISMATCH = "report_host_mismatch"
    REPORT_CONTRADICTORY = "report_contradictory"
    # --- migration ----------------------------------------------------------------
    MIGRATION_UNAVAILABLE = "migration_unavailable"
    MIGRATION_SCOPE_MISMATCH = "migration_scope_mismatch"
    MIGRATION_NOT_NEWER = "migration_not_newer"
    MIGRATION_SAME_RELEASE = "migration_same_release"
    MIGRATION_CONFIRMATION_REQUIRED = "migration_confirmation_required"
    # --- OCI registry -------------------------------------------------------------
    OCI_REFERENCE_INVALID = "oci_reference_invalid"
    OCI_REGISTRY_ERROR = "oci_registry_error"
    OCI_ARTIFACT_INVALID = "oci_artifact_invalid"
    OCI_BLOB_MISMATCH = "oci_blob_mismatch"
    OCI_TAG_MISMATCH = "oci_tag_mismatch"
    OCI_TAG_EXISTS = "oci_tag_exists"
    OCI_UNAUTHORIZED = "oci_unauthorized"
    OCI_TLS_UNTRUSTED = "oci_tls_untrusted"
    # --- server -----------------------------------------------------------------
    REFRESH_REJECTED = "refresh_rejected"
    LISTEN_LIMIT_REACHED = "listen_limit_reached"
    INTERNAL_ERROR = "internal_error"
    # --- command line -------------------------------------------------------------
    USAGE = "usage"
    IO_ERROR = "io_error"
    INTERRUPTED = "interrupted"


class RegistryError(Exception):
    """Base of every domain refusal: a failure code, a message, optional context.

    ``path`` names the file (or JSON pointer) the refusal is about, so an
    operator can go straight to it. ``details`` is JSON-safe extra context.
    ``next_step`` is what to do when it depends on the situation rather than
    on the code alone (see :mod:`rimthan_workflow_registry.remediation`).
    ``also`` holds the further failures a check collected with this one (one
    per file, each with its own code, path, details and next step): a command
    line says each in turn.
    """

    def __init__(
        self,
        code: FailureCode,
        message: str,
        *,
        path: str | None = None,
        details: Mapping[str, Any] | None = None,
        next_step: str | None = None,
        also: Sequence[RegistryError] = (),
    ) -> None:
        self.code = FailureCode(code)
        self.next_step = next_step
        self.message = message
        self.path = path
        self.details = dict(details or {})
        self.also = tuple(also)
        super().__init__(self.one_line())

    @property
    def failures(self) -> tuple[RegistryError, ...]:
        """This failure and every one collected with it, in order."""
        return (self, *self.also)

    def with_also(self, also: Sequence[RegistryError]) -> Self:
        """This failure with ``also`` collected after it: how a check that found several raises them all."""
        return type(self)(
            self.code, self.message, path=self.path, details=self.details, next_step=self.next_step, also=also
        )

    def one_line(self) -> str:
        """``code: path: message`` - the form every CLI prints (see :func:`refusal_line`)."""
        return refusal_line(self.code, self.path, self.message)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form used in structured tool errors, a server's refusals and log lines.

        The failures collected with this one are each in ``details.also`` (code, message, path, details, and
        ``next`` when it has its own step): a server's refusal or log line says every one, as a command line
        does, within the refusal's closed shape.
        """
        out: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.path is not None:
            out["path"] = self.path
        details = {**self.details, "also": [_collected(other) for other in self.also]} if self.also else self.details
        if details:
            out["details"] = details
        return out


MAX_SAID_FAILURES = 20
"""At most this many failures a check collected are said, each its own (a listing of thousands is one mistake
made thousands of times, and every failure is said in a log line)."""


_Failure = TypeVar("_Failure", bound="RegistryError")


def collected(failures: Sequence[_Failure]) -> _Failure:
    """The first of ``failures`` (at least one) with the others, at most ``MAX_SAID_FAILURES`` in all, in ``also``."""
    first, rest = failures[0], failures[1:MAX_SAID_FAILURES]
    return first.with_also(rest) if rest else first


def relocated(error: _Failure, where: Callable[[str | None], str]) -> _Failure:
    """``error`` and each failure collected with it, naming the file ``where`` gives for its path (a catalogue
    path said as the source's or the release's file); code, message, details and next step kept."""
    also = [relocated(other, where) for other in error.also]
    return type(error)(
        error.code, error.message, path=where(error.path), details=error.details, next_step=error.next_step, also=also
    )


def _collected(error: RegistryError) -> dict[str, Any]:
    said = error.to_dict()
    return said if error.next_step is None else {**said, "next": error.next_step}


def refusal_line(code: FailureCode, path: str | None, message: str) -> str:
    """``code: path: message`` on one line, whatever the path or message holds (see :func:`single_line`)."""
    where = f"{path}: " if path else ""
    return single_line(f"{code.value}: {where}{message}")


def single_line(text: str) -> str:
    """``text`` with C0 controls and DEL written as escapes (a newline as ``\\n``).

    A refusal quotes names it was given (a file named ``<id>.sig`` and a newline, say); escaped, such a name
    can neither break the refusal across lines nor pass for a line of its own.
    """
    # C0 controls and DEL are Unicode "Other": printable text holds none (a check in C, without translate's
    # lookup per character: every string of every log record passes here).
    return text if text.isprintable() else text.translate(_CONTROLS_ESCAPED)


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON-like: mappings, lists, tuples, scalars) with ``change`` applied to every string in it, each
    key too (as ``str``): one walk for a log record bounded by :func:`quoted` and a reply scrubbed of tokens."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {change(str(k)): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, change) for v in value]
    return value


def quoted(value: object, limit: int = QUOTE_MAX_CHARS) -> str:
    """``str(value)`` as :func:`single_line` writes it, cut after ``limit`` characters with a marker.

    For text a peer chose (a registry's header, a client's Host, a tool name): the refusal or log line
    quoting it stays one line of bounded length, and says how much was left out.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isprintable():  # nothing to escape or cut (most text: checked in C)
        return text
    escaped = single_line(text[: limit + 1])
    if len(text) <= limit and len(escaped) <= limit:
        return escaped
    return f"{escaped[:limit]}...[{len(text)} chars, cut]"


class CatalogueError(RegistryError):
    """A catalogue source or release breaks an authoring rule."""


class ReleaseVerificationError(RegistryError):
    """A release directory failed verification; nothing from it may be used."""


class TrustError(RegistryError):
    """A trust store or key file cannot be used."""


class KeyringError(RegistryError):
    """Checkpoint HMAC key material cannot be used."""


class WorkflowProtocolError(RegistryError):
    """A tool call breaks the four-tool workflow protocol."""


class TokenError(WorkflowProtocolError):
    """A checkpoint token or validation-bundle token is refused."""


def closest_name(key: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``key`` most likely misspells (``None`` if none is close)."""
    import difflib  # only a refusal's hint needs it, never a command that succeeds

    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.75)
    return close[0] if close else None


def shell_word(value: object) -> str:
    """``str(value)`` quoted as one shell word, for a command line a next step gives (``mv OLD NEW``)."""
    import shlex  # only a refusal's next step needs it, never a command that succeeds

    return shlex.quote(str(value))
