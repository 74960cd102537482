"""Limits on untrusted structured input: one copy of each bound, checked without recursion.

Every JSON or TOML document Rimthan parses from outside (release manifests,
catalogue TOML and JSON Schemas, tool arguments, JSON artifacts) may be
hostile, even when a trusted key signed it. Python's parsers and everything
that walks their result (schema checks, RFC 8785 canonicalisation) recurse,
so a document nested a thousand levels deep would raise ``RecursionError``
instead of a refusal. These bounds are far above anything a real catalogue,
run or artifact needs and far below what recursion can survive; they are
listed, with their figures, in docs/security.md.

The sizes of what one tool call carries are bounded here too (tokens,
declared artifact sizes and counts, the confirmed state, validator reports),
and the HTTP request body bound is derived from them, so that a call a release
legitimately needs is taken on every transport (docs/server.md); the tool
input schemas bound every other part within ``REQUEST_REST_BYTES``.
"""

from __future__ import annotations

import datetime
import math
import re
import tomllib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from rimthan_workflow_registry.not_utf8 import NotUtf8

MAX_JSON_DEPTH = 64
"""Containers (objects and arrays) nested in any parsed JSON document: manifest, schemas, artifacts."""

MAX_TOML_DEPTH = 32
"""Tables and arrays nested in a catalogue TOML file (the catalogue format needs 4)."""

MAX_TRUST_FILE_BYTES = 64 * 1024
"""An operator's TOML trust file (a few ``[[keys]]`` tables; its tables/arrays nest at most ``MAX_TOML_DEPTH``)."""

MAX_ARGUMENT_DEPTH = 64
"""Containers nested in one tool call's arguments (a confirmed state's values included)."""

MAX_CATALOGUE_FILE_BYTES = 1024 * 1024
"""One catalogue TOML or JSON Schema file (instructions, assets and examples have no per-file bound of their own)."""

MAX_JSON_SAFE_INTEGER = 2**53 - 1
"""The largest integer JSON carries exactly (RFC 8785's domain, I-JSON's, RFC 7493): a TOML value past it is refused."""

CLOCK_SKEW_SECONDS = 2
"""How far past this server's clock a time in a call may lie: clocks of a fleet's replicas and of its hosts agree
within this (NTP does far better; times are whole seconds, so a host a moment ahead can round up to the next one).
A token whose ``iat`` is later than that is refused (``run.token_mac.check_issued_at``), and so is a confirmation
whose ``confirmed_at`` is (``run.confirmed_state``): a "yes" dated further ahead would be fresh for every later
checkpoint."""

# --------------------------------------------------------------------------- what one tool call may carry
# A release declares how large its artifacts may be; a client sends them, with a checkpoint token and the confirmed
# state, in one tool call. These bounds make every call a release can legitimately need fit what the HTTP transport
# takes (MAX_REQUEST_BODY_BYTES), so a transport never refuses what stdio would serve.

MAX_TOKEN_CHARS = 1024 * 1024
"""A checkpoint or bundle token (printable ASCII): each carries every receipt (~120 B), so thousands of gated steps."""

MAX_STEP_ARTIFACT_BYTES = 2 * 1024 * 1024
"""What one step's artifacts may total by declaration (UTF-8 bytes): an output's ``max_bytes``, a step's
``max_total_bytes`` (or, without it, the sum of its outputs' ``max_bytes``). Agent-written text files: 4x the
largest packaged catalogue's step (512 KiB), more than a model writes in one turn; a catalogue declaring more is
refused when it is built and when it is loaded."""

MAX_STEP_OUTPUTS = 16
"""The outputs one step may declare, and so the artifacts (and artifact receipts) one call carries: the packaged
catalogues' steps declare at most 2; a catalogue declaring more is refused when it is built and when it is loaded."""

MAX_STEP_VALIDATORS = 16
"""The validators one step may name, and so the reports one submit carries: the packaged catalogues' steps name at
most 1; a catalogue naming more is refused when it is built and when it is loaded."""

MAX_CONFIRMED_FIELDS = 64
"""The top-level fields of a confirmed state (and so its confirmations): the packaged catalogues' states have 9."""

MAX_STEP_INPUTS = 64
"""The earlier artifacts one step may read, and so the input bindings one prepare carries: the packaged catalogues'
steps read none; a catalogue declaring more is refused when it is built and when it is loaded."""

MAX_NAME_CHARS = 128
"""A name in a tool call's arguments or result, in characters: an id, an ``id@version`` key (workflow, validator,
host adapter), a release id ``<catalogue>@<version>``, a capability, a confirmed state's top-level field name. A
catalogue declaring a longer one is refused when it is built and when it is loaded."""

MAX_VERSION_CHARS = 64
"""A version in a tool call's arguments or result, in characters (catalogue, workflow, validator, host adapter)."""

MAX_LISTED_NAMES = 32
"""The names one list of a host object or a migration preview holds: host capabilities, validator capabilities,
pinned host adapters (a harness has ~3 capabilities). A catalogue requiring more of a host, or pinning more adapters,
is refused when it is built and when it is loaded."""

MAX_CONFIRMED_STATE_BYTES = 256 * 1024
"""A confirmed state's values as RFC 8785 canonical JSON (what its digest covers), in bytes. The state holds the
facts a user confirmed (an objective, answers, choices), each of which the user read; long texts belong in
artifacts. A state past it is refused (``confirmed_state_invalid``) on every transport, before its schema is checked."""

JSON_BYTES_PER_STRING_BYTE = 6
"""The most bytes JSON text spends on one UTF-8 byte of a string: a control character as ``\\u00XX``. (Any other
character takes at most 6 bytes per its 1-4 UTF-8 bytes, escaped or not, including ``ensure_ascii`` encoders.)"""

JSON_BYTES_PER_TOKEN_CHAR = 2
"""The most bytes JSON text spends on one character of a token (printable ASCII; ``"`` and ``\\`` as two bytes)."""

MAX_VALIDATOR_REPORTS_BYTES = 256 * 1024
"""What a submit's validator reports may total as compact JSON text in UTF-8 (their RFC 8785 canonical length: a
report holds no numbers). A report is a verdict plus findings a model wrote, a sentence each: the packaged
validators' reports are a few KiB. A larger set is refused (``invalid_arguments``) on every transport, before the
bundle or any report is looked at (a JSON Schema cannot bound a sum over items)."""

MAX_FINDING_CHARS = 8192
"""One finding's message, in characters (a sentence or two; a subagent's whole answer pasted in is longer)."""

MAX_REPORT_FINDINGS = 256
"""The findings one validator report may list."""

JSON_BYTES_PER_STRING_CHAR = 2 * JSON_BYTES_PER_STRING_BYTE
"""The most bytes JSON text spends on one character of a string bounded by ``maxLength`` (which counts characters):
one outside the Basic Multilingual Plane written as two ``\\uXXXX`` escapes."""

MAX_REQUEST_ID_CHARS = 256
"""A request's ``id`` when it is a string, in characters (clients send a counter or a UUID: 36). A ``tools/call``
with a longer one is refused (JSON-RPC ``Invalid Request``) on every transport."""

MAX_REQUEST_META_BYTES = 8 * 1024
"""A request's ``_meta`` (a progress token; on 2026-07-28 the client's name and capabilities) as compact JSON in
UTF-8, in bytes: the SDK client's is a few hundred. A ``tools/call`` with a larger one is refused (JSON-RPC ``Invalid
params``) on every transport, before its arguments are looked at. At worst-case escaping (48 KiB) it fits what
``REQUEST_REST_BYTES`` leaves beside the largest arguments the schemas accept."""

REQUEST_FRAME_BYTES = 1024
"""The fixed parts of a ``tools/call`` request at worst-case escaping: ``jsonrpc``, ``method``, the tool's name (one
of four, at most 30 characters) and the keys around them."""

REQUEST_ENVELOPE_BYTES = (
    REQUEST_FRAME_BYTES
    + JSON_BYTES_PER_STRING_CHAR * MAX_REQUEST_ID_CHARS
    + 2
    + JSON_BYTES_PER_STRING_BYTE * MAX_REQUEST_META_BYTES
)
"""The JSON-RPC envelope around a tool call's arguments (``jsonrpc``, ``id``, ``method``, the tool's name, ``_meta``)
at its bounds and worst-case escaping (about 52 KiB): counted in ``REQUEST_REST_BYTES``."""

REQUEST_REST_BYTES = 1024 * 1024
"""Everything else a tool call's request carries besides tokens, confirmed states' values, artifact contents and
validator reports (the envelope, host, confirmations, input bindings, receipts, the bundle's parts), as each tool's
input schema bounds it at worst-case escaping: tests/server/test_call_sizes.py walks the served schemas and holds
every tool to it. A real one is a few KiB."""


def _call_bytes(*, tokens: int, states: int, artifacts: int, reports: int = 0) -> int:
    """The largest request body of a call carrying ``tokens`` tokens, ``states`` confirmed states, artifacts and
    validator reports (each 0 or 1)."""
    return (
        tokens * JSON_BYTES_PER_TOKEN_CHAR * MAX_TOKEN_CHARS
        + states * JSON_BYTES_PER_STRING_BYTE * MAX_CONFIRMED_STATE_BYTES
        + artifacts * JSON_BYTES_PER_STRING_BYTE * MAX_STEP_ARTIFACT_BYTES
        + reports * JSON_BYTES_PER_STRING_BYTE * MAX_VALIDATOR_REPORTS_BYTES
        + REQUEST_REST_BYTES
    )


MAX_REQUEST_BODY_BYTES = max(
    _call_bytes(tokens=1, states=1, artifacts=1),  # prepare_step_validation: a checkpoint, the state, the artifacts
    _call_bytes(tokens=1, states=3, artifacts=0),  # continue_workflow: the state, the next one and a migration's
    _call_bytes(tokens=2, states=1, artifacts=0, reports=1),  # submit_step_validation: checkpoint, bundle, reports
)
"""The largest HTTP request body a tool call can legitimately need (16.5 MiB), derived from the bounds above; the
HTTP transport refuses a larger one (HTTP 413, a JSON-RPC error) before reading past it, and stdio a longer line (in
characters) likewise. start_workflow carries one state, no token."""

MAX_REQUESTS_IN_FLIGHT = 128
"""HTTP requests being received or answered at once (4 x the 32 concurrent clients P6 measures); one more gets 503,
unread (``http_bounds``)."""

LISTEN_STREAMS = MAX_REQUESTS_IN_FLIGHT // 2
"""2026-07-28 ``subscriptions/listen`` streams served at once (``list_changed.ListingListen``): over HTTP each holds a
slot in flight while open, so calls keep the other half. Here, not in ``http_bounds``: a stdio server bounds them
too, and imports nothing of the HTTP transport."""


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests dicts/lists deeper than ``limit`` (the top container is depth 1).

    Iterative, so it answers for any depth the parser could build; it walks
    one nesting level at a time (every container of a level, then those they
    hold: no depth carried per node, half the time of a stack of pairs on a
    tool call's arguments) and stops at the first level past the limit. A
    plain loop per level, not a comprehension per container: a comprehension
    is a function call in CPython 3.11, which made this check twice as slow
    on a tool call's arguments (every ``tools/call`` pays it).
    """
    level: list[Any] = [value] if isinstance(value, _CONTAINERS) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        keep = below.append
        for node in level:
            for child in node.values() if isinstance(node, dict) else node:
                if isinstance(child, _CONTAINERS):
                    keep(child)
        level = below
        depth += 1
    return False


_CONTAINERS = (dict, list)


def too_deep_message(what: str, limit: int) -> str:
    return f"{what} nests objects/arrays deeper than {limit} levels"


TomlRefusal = Callable[[str, str | None], Exception]
"""Makes a refusal from a message and, for an unreadable file, the next step naming where to fix it (else ``None``)."""


def parse_bounded_toml(data: bytes, refuse: TomlRefusal, *, unreadable: str, name: str) -> dict[str, Any]:
    """UTF-8 TOML nested at most ``MAX_TOML_DEPTH``, else ``refuse(message, next_step)`` is raised (never
    ``RecursionError``).

    ``unreadable`` starts the message for bytes that are not UTF-8 TOML; for
    those the next step names the file (``name``) and the line and column to
    fix (no key can be named: the file has none yet). The size bound is the
    caller's. Every value must also be one JSON can carry
    (:func:`first_non_json_value`): what a catalogue says reaches tool results
    and checkpoints as RFC 8785 JSON, so a value with no JSON form would build
    and verify, then fail every call.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from rimthan_workflow_registry.not_utf8 import not_utf8_at  # only for a file that is not UTF-8

        bad = not_utf8_at(data, exc.start)
        raise refuse(f"{unreadable}: {bad} is not UTF-8", save_as_utf8_step(name, bad)) from None
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise refuse(too_deep_message("the TOML", MAX_TOML_DEPTH), None) from None
    except tomllib.TOMLDecodeError as exc:
        raise refuse(f"{unreadable}: {exc}", _toml_syntax_next_step(name, text, str(exc))) from None
    except ValueError as exc:  # tomllib reads integers of any length, up to the interpreter's digit limit
        raise refuse(
            f"{unreadable}: {str(exc).split(';')[0]}",
            f"fix the TOML syntax in {name}: write each integer with at most {len(str(MAX_JSON_SAFE_INTEGER))} "
            "digits (JSON carries integers up to 2**53 - 1 exactly)",
        ) from None
    if depth_exceeds(value, MAX_TOML_DEPTH):
        raise refuse(too_deep_message("the TOML", MAX_TOML_DEPTH), None)
    problem = first_non_json_value(value)
    if problem is not None:
        raise refuse(problem, None)
    return value


# Compiled on first use (re keeps it): only a TOML syntax error needs it, and a build parses none.
_TOML_AT = r"\(at line (\d+), column (\d+)\)$"


def _toml_syntax_next_step(name: str, text: str, error: str) -> str:
    """Where to fix a TOML syntax error: the line and column tomllib reports (at its message's end on Python 3.11),
    or, for one it reports "at end of document", the file's last line (or an opening left unclosed above it)."""
    found = re.search(_TOML_AT, error)
    if found is not None:
        return f"fix the TOML syntax in {name} at line {found[1]}, column {found[2]}"
    last = text.rstrip().count("\n") + 1
    return (
        f"fix the TOML syntax in {name} at its end (line {last}), or where a string, array or inline table "
        "left open above it begins"
    )


def first_not_utf8(data: bytes) -> NotUtf8 | None:
    """Where ``data``'s first byte that is not UTF-8 is (``None`` if it is all UTF-8)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from rimthan_workflow_registry.not_utf8 import not_utf8_at  # only for a file that is not UTF-8

        return not_utf8_at(data, exc.start)
    return None


def save_as_utf8_step(name: str, bad: NotUtf8) -> str:
    """The next step for a text file ``name`` that is not UTF-8 at ``bad``: where it is, and how to fix it."""
    return (
        f"save {name} as UTF-8 (the editor's encoding setting, or iconv -f ITS_ENCODING -t UTF-8): {bad} is not UTF-8"
    )


def first_non_json_value(value: Any) -> str | None:
    """What is wrong with the first value in ``value`` that has no exact JSON form (``None`` if all have one).

    TOML has integers of any size, ``inf`` and ``nan``, and dates and times;
    Python's JSON parser (and a tool call's arguments) has integers of any
    size, ``NaN``, ``Infinity`` and lone surrogates (``"\\ud800"``, in a string
    or a key). JSON as Rimthan writes it (RFC 8785, UTF-8) has integers up to
    ``MAX_JSON_SAFE_INTEGER`` in magnitude, finite numbers, no dates and only
    Unicode scalar values. Iterative, so any depth is answered; the message
    names the value's path and never holds the lone surrogate itself.
    """
    stack: list[tuple[_Trail, Any]] = [(None, value)]
    while stack:
        trail, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and _LONE_SURROGATE.search(key):
                    where = _path((trail, key, False))
                    return f"the key {where} holds a lone surrogate, which UTF-8 and JSON text cannot carry"
                stack.append(((trail, key, False), child))
        elif isinstance(node, list):
            stack.extend(((trail, index, True), child) for index, child in enumerate(node))
        elif isinstance(node, str) and _LONE_SURROGATE.search(node):
            return f"{_path(trail)} holds a lone surrogate, which UTF-8 and JSON text cannot carry"
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_JSON_SAFE_INTEGER:
            shown = str(node) if abs(node) < 10**30 else f"an integer of {len(str(abs(node)))} digits"
            return f"{_path(trail)} = {shown} is past what JSON carries exactly (at most 2**53 - 1 in magnitude)"
        elif isinstance(node, float) and not math.isfinite(node):
            return f"{_path(trail)} = {node} is not a finite number (JSON has no inf or nan)"
        elif isinstance(node, datetime.date | datetime.time):
            return f"{_path(trail)} is a TOML date or time, which JSON has no form for: write it as a quoted string"
    return None


# Where a value sits, from the root: (the parent's trail, a key or list index, whether it is an index).
# The walk links these instead of building every value's path text; only a value found wrong has its path
# written out (0.45 ms of a 1 MiB build went to paths never shown).
_Trail: TypeAlias = "tuple[_Trail, Any, bool] | None"


def _path(trail: _Trail) -> str:
    """A trail as a message names it: ``key.key[index]``, keys shown as :func:`_shown` does."""
    steps: list[tuple[Any, bool]] = []
    while trail is not None:
        trail, step, is_index = trail
        steps.append((step, is_index))
    where = ""
    for step, is_index in reversed(steps):
        if is_index:
            where += f"[{step}]"
        elif where:
            where += f".{_shown(step)}"
        else:
            where = _shown(step)
    return where


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str holds one only unpaired (a parser joins a pair)


def _shown(key: Any) -> str:
    """A key as a path shows it: a lone surrogate as its escape, so the message itself is UTF-8."""
    return str(key).encode("utf-8", "backslashreplace").decode("utf-8")
