"""The verifier's side as the host sees it: tool names, the call seam, refusals, the host profile.

Everything in the kit talks to the verifier through a :data:`ToolCaller` -
``(tool name, arguments) -> structured result`` - so one host session runs
over stdio, Streamable HTTP, an in-process SDK session or straight into an
engine module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
from rimthan_workflow_registry import protocol_names
from rimthan_workflow_registry.errors import FailureCode, quoted

from .result_parts import Failure
from .result_shape import shape_problem

# The protocol's names, defined once in the core; short aliases for the kit.
START = protocol_names.START_WORKFLOW
CONTINUE = protocol_names.CONTINUE_WORKFLOW
PREPARE = protocol_names.PREPARE_STEP_VALIDATION
SUBMIT = protocol_names.SUBMIT_STEP_VALIDATION
SETUP_STEP = protocol_names.SETUP_STEP_ID

ToolCaller = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
# Reads one of the verifier's resources (a verified release's file, by the URI a step names) as text.
ResourceReader = Callable[[str], Awaitable[str]]
MetaLister = Callable[[], Awaitable[list[dict[str, Any]]]]
"""The ``_meta`` of each resource the verifier lists (:func:`client_metas`)."""
LISTING_PAGES = 1000
"""Pages of the verifier's resource listing read at most, each page's cursor the one before named: every page is
read (a manifest on a late page is read too), and a listing still going past this, or naming a cursor twice, is
:class:`ListingUnbounded` (a paginator that never ends cannot hold a call). The bridge reads it once per
connection and change (:mod:`.kept_listing`), so the bound is for a listing that does not end, not for cost."""

T = TypeVar("T")
# What a call on a dead connection raises, below the SDK's own "Connection closed" error.
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
# How Streamable HTTP says a session is gone (HTTP 404): the server restarted, or another replica answered the call.
# The server's answer, and the SDK client's own when the 404 carries no JSON-RPC error.
_SESSION_GONE = ("Session not found", "Session terminated")


class ToolRefused(Exception):
    """A tool answered with a structured error (``isError``)."""

    def __init__(self, tool: str, error: Mapping[str, Any]) -> None:
        self.tool = tool
        self.error = dict(error)
        self.code = str(error.get("code"))
        super().__init__(f"{tool} refused: {self.code}: {error.get('message')}")


class HarnessError(Exception):
    """The run cannot go on as asked (blocked, a refused file, or a failure the host cannot repair)."""


class ListingUnbounded(HarnessError):
    """The verifier's resource listing did not end within :data:`LISTING_PAGES` pages, or named a cursor twice."""


class NotAProtocolResult(Exception):
    """The verifier answered a call with something no rimthan-mcp result is: nothing of it is used.

    Not a refusal (the verifier refused nothing) nor a :class:`HarnessError`:
    the bridge treats it as a failure mid-move and goes on from the run log.
    """

    def __init__(self, tool: str, what: str) -> None:
        super().__init__(
            f"the verifier answered something that is not a protocol result: {tool} gave {what}; "
            "check --verifier-url points at rimthan-mcp"
        )


class MoveNotRecorded(Exception):
    """The verifier made a move, but writing it to the run files failed (``cause``): the move does not count.

    The session did not move with it (:meth:`~rimthan_host.session.HostSession.call`):
    it stays at the run log's last checkpoint, which the verifier still takes,
    so the run goes on from there once the files can be written.
    """

    def __init__(self, tool: str, cause: OSError) -> None:
        super().__init__(
            f"the verifier made the {tool} move, but the run files could not record it ({cause}); "
            "the run stays at its last logged checkpoint"
        )
        self.tool = tool
        self.cause = cause


class VerifierLost(Exception):
    """The connection to the verifier went away during a call (:func:`client_caller`, :func:`client_reader`).

    ``code``: ``verifier_lost``, whether the call met a closed connection or the verifier died while it waited
    for the answer (the SDK's ``Connection closed`` error).

    The move was not made or not received: open a new connection and resume the run from its log
    (:meth:`~rimthan_host.session.HostSession.resume`), as :class:`~rimthan_host.link.VerifierLink` does.
    """

    code = FailureCode.VERIFIER_LOST  # (the closed list's: docs/failure-codes.md)


def client_caller(client: Any) -> ToolCaller:
    """A :data:`ToolCaller` over an SDK ``Client`` or ``ClientSession`` (anything with ``call_tool``)."""

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await connected(client.call_tool(name, arguments))
        said = " ".join(str(getattr(c, "text", "")) for c in result.content).strip() or str(result)
        return protocol_result(name, result.structured_content, is_error=bool(result.is_error), said=said)

    return call


async def connected(request: Awaitable[T]) -> T:
    """Await one request to the verifier; :class:`VerifierLost` if its connection is gone (not the SDK's error)."""
    try:
        return await request
    except MCPError as exc:
        if exc.error.code == INVALID_REQUEST and exc.error.message.startswith(_SESSION_GONE):
            raise VerifierLost(
                "the verifier holds no MCP session for this connection any more (it restarted, or another replica "
                f"answered: {exc.error.message})"
            ) from exc
        if exc.error.code != CONNECTION_CLOSED:
            raise
        raise VerifierLost("the connection to the verifier closed") from exc
    except _GONE as exc:
        raise VerifierLost(f"the connection to the verifier is gone ({type(exc).__name__})") from exc


def protocol_result(tool: str, payload: Any, *, is_error: bool, said: str = "") -> dict[str, Any]:
    """A tool result's structured content; :class:`ToolRefused` for a refusal.

    Checked before anything reads it, fail-closed: a result without a string
    ``status`` or with a part of another type than the kit reads it as
    (:func:`~rimthan_host.result_shape.shape_problem`), or a refusal whose ``error`` is not an object with a string
    ``code`` and ``message``, is :class:`NotAProtocolResult`; so is a refusal
    with no structured ``error`` at all (what it ``said`` in text is quoted,
    cut): every refusal the verifier makes carries one of the closed list's
    codes, so a refusal without one is not the verifier's.
    """
    if payload is not None and not isinstance(payload, dict):
        raise NotAProtocolResult(tool, f"structured content that is not an object ({type(payload).__name__})")
    if is_error:
        error: Any = (payload or {}).get("error")
        problem = _error_problem(error) if error is not None else f"is missing (it said {quoted(said)!r})"
        if problem is not None:
            raise NotAProtocolResult(tool, f"a refusal whose error {problem}")
        raise ToolRefused(tool, error)
    if payload is None:
        raise NotAProtocolResult(tool, "no structured content")
    if not isinstance(payload.get("status"), str):
        what = "a result without a status" if "status" not in payload else "a status that is not a string"
        raise NotAProtocolResult(tool, what)
    problem = shape_problem(payload)
    if problem is not None:
        raise NotAProtocolResult(tool, f"a result whose {problem}")
    return payload


def _error_problem(error: Any) -> str | None:
    """What makes a refusal's ``error`` no protocol error, or None."""
    if not isinstance(error, dict):
        return f"is not an object ({type(error).__name__})"
    missing = [key for key in ("code", "message") if not isinstance(error.get(key), str)]
    return f"has no string {' or '.join(missing)}" if missing else None


def client_reader(client: Any) -> ResourceReader:
    """A :data:`ResourceReader` over an SDK ``Client`` (anything with ``read_resource``)."""

    async def read(uri: str) -> str:
        result = await connected(client.read_resource(uri))
        texts = [c.text for c in result.contents if isinstance(getattr(c, "text", None), str)]
        if not texts:
            raise HarnessError(f"the verifier returned no text for {uri}")
        return str(texts[0])

    return read


def client_metas(client: Any) -> MetaLister:
    """A :data:`MetaLister` over an SDK ``Client`` (anything with ``list_resources``), :data:`LISTING_PAGES` at most."""

    async def metas() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(LISTING_PAGES):
            page = await connected(client.list_resources(cursor=cursor, cache_mode="refresh"))
            out += [dict(r.meta) for r in page.resources if isinstance(getattr(r, "meta", None), dict)]
            cursor = page.next_cursor
            if not cursor:
                return out
            if cursor in seen:
                raise ListingUnbounded(f"the verifier's resource listing named the cursor {quoted(cursor)} twice")
            seen.add(cursor)
        raise ListingUnbounded(f"the verifier's resource listing goes on past {LISTING_PAGES} pages")

    return metas


@dataclass(frozen=True)
class HostProfile:
    """What the host tells the verifier about itself (the ``host`` argument)."""

    harness: str = "claude-code"
    adapter_id: str = "claude-code"
    adapter_version: str = "1.0.0"
    capabilities: tuple[str, ...] = ("skills", "subagents", "workspace.write")
    validator_capabilities: tuple[str, ...] = ("subagent.isolated-context",)
    writable_paths: tuple[str, ...] = (".claude/*", ".opencode/*", ".rimthan/*", "research/*")
    protected_paths: tuple[str, ...] = (".git/*",)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostProfile:
        """The profile a ``host`` argument describes (the inverse of :meth:`to_json`)."""
        policy = data["repository_policy"]
        return cls(
            harness=data["harness"],
            adapter_id=data["adapter"]["id"],
            adapter_version=data["adapter"]["version"],
            capabilities=tuple(data["capabilities"]),
            validator_capabilities=tuple(data["validator_capabilities"]),
            writable_paths=tuple(policy["writable_paths"]),
            protected_paths=tuple(policy["protected_paths"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "adapter": {"id": self.adapter_id, "version": self.adapter_version},
            "capabilities": sorted(self.capabilities),
            "validator_capabilities": sorted(self.validator_capabilities),
            "repository_policy": {
                "writable_paths": list(self.writable_paths),
                "protected_paths": list(self.protected_paths),
            },
        }


def failure_lines(failures: Sequence[Failure], message: str) -> str:
    """A result's failures as one line (``code: message; ...``); its ``message`` when it has none."""
    return "; ".join(f"{f.code}: {f.message}" for f in failures) or message
