"""The local MCP bridge server: the SDK's low-level server offering the model the bridge's tools.

``rimthan-host serve`` (:mod:`.serve`) runs it over stdio and connects it to
the verifier; split from the command line so ``rimthan-host --help`` imports
neither the MCP SDK nor the bridge.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.client.stdio import StdioServerParameters
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from rimthan_workflow_mcp.eras import negotiate_served_era
from rimthan_workflow_mcp.message_shape import top_level_response_id
from rimthan_workflow_mcp.stdio_guard import AnsweringStream
from rimthan_workflow_mcp.stdio_serve import serve_wire
from rimthan_workflow_registry.errors import quoted
from rimthan_workflow_registry.installed_version import installed_version
from rimthan_workflow_registry.limits import first_non_json_value

from .asking import Asker, InputNeeded, ReplyUnreadable, cannot_ask
from .audit_command import PROGRAM, audit_program
from .bridge import Bridge, Reply
from .bridge_core import verifier_refused
from .link import STOPPED, VerifierDown, VerifierLink, VerifierLost, VerifierNotUp
from .own_folder import unwritten_notes
from .protocol import HarnessError, HostProfile, ToolRefused
from .reconnect import logged_run, recover
from .roots import outside_roots
from .run_lock import RunBusy, RunLockLost
from .tools import INSTRUCTIONS, TOOLS, argument_problem, without_host_hints
from .verifier_replies import VerifierFailure, reply_for
from .words import answer_text, scrub, structured
from .workspace_lock import lost_words

_log = logging.getLogger(__name__)

SERVER_NAME = "rimthan-host"
# How long the bridge, once its client closed stdio, waits for a verifier still coming up to be up or refused.
SETTLE_SECONDS = 30.0
# How long a verifier has to answer once the bridge was stopped (SIGTERM, or its stdout closed); then the child is
# stopped as at every end: its stdin closed, SIGTERM after 2 s, SIGKILL 2 s later (the SDK's stdio client).
STOP_GRACE_SECONDS = 2.0


def _handlers(bridge: Bridge) -> dict[str, Callable[[Asker, dict[str, Any]], Awaitable[Reply]]]:
    return {
        "start_run": lambda a, x: bridge.start_run(
            a, str(x.get("workflow") or ""), dict(x.get("facts") or {}), new_run=x.get("new_run") is True
        ),
        "show_step": lambda a, x: bridge.show_step(),
        "answer_question": lambda a, x: bridge.answer_question(a, answer_text(x.get("answer")), x.get("field")),
        "step_done": lambda a, x: bridge.step_done(a, dict(x.get("facts") or {}), x.get("step")),
        "record_verdict": lambda a, x: bridge.record_verdict(
            str(x.get("validator") or ""), str(x.get("verdict") or ""), [str(f) for f in x.get("findings") or []]
        ),
        "migrate_run": lambda a, x: bridge.migrate_run(
            a, str(x.get("to_release") or "") or None, x.get("confirm") is True, dict(x.get("facts") or {})
        ),
        "resume_run": lambda a, x: bridge.resume_run(x.get("run")),
    }


def create_bridge_server(
    bridge: Bridge, link: VerifierLink | None = None, *, require_elicitation: bool = False
) -> Server[Any]:
    """The low-level MCP server over ``bridge`` (``link``: the verifier connection it may restart).

    With ``require_elicitation`` a call that would record a user's confirmation from a client that cannot ask the
    user (no elicitation declared) is refused before anything is sent (:func:`~rimthan_host.asking.cannot_ask`).

    Tool calls are handled one at a time: a client may send several at once (Claude Code does), and two moves
    of one run at once both went from the same checkpoint, forking its log; the second now sees where the
    first left the run.
    """
    handlers = _handlers(bridge)
    one_at_a_time = anyio.Lock()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        handler = handlers.get(params.name)
        if handler is None:
            words = f"Unknown tool {quoted(params.name)}; the tools are {', '.join(handlers)}."
            return _result(Reply(words, is_error=True))
        arguments = without_host_hints(params.arguments or {})
        problem = argument_problem(params.name, arguments)
        if problem is not None:
            return _result(await bridge.arguments_refused(params.name, arguments, problem))
        asker = Asker(ctx, params)
        cannot = cannot_ask(params.name, arguments) if require_elicitation and not asker.available else None
        if cannot is not None:
            data = {"status": "elicitation_required", "failures": [cannot.code.value]}
            return _result(Reply(cannot.words(), data, is_error=True))
        async with one_at_a_time:
            answer = await _move(bridge, link, params.name, lambda a: handler(a, arguments), asker)
        return answer if isinstance(answer, types.InputRequiredResult) else _result(answer)

    server: Server[Any] = Server(
        SERVER_NAME,
        version=installed_version(SERVER_NAME),  # the bridge is named as its distribution
        title="Rimthan host bridge",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME))
    server.middleware.append(negotiate_served_era)  # a batch-era offer answered with 2025-11-25, as the verifier
    return server


async def _move(
    bridge: Bridge,
    link: VerifierLink | None,
    tool: str,
    handler: Callable[[Asker], Awaitable[Reply]],
    asker: Asker,
) -> Reply | types.InputRequiredResult:
    """One tool call's answer, the only one in progress: the move, or why this bridge stopped moving its run."""
    if bridge.lock.lost():
        return _lock_lost(bridge)
    bridge.elicits = asker.available
    try:
        if link is not None:
            await link.rescan_if_asked()  # (after a pinned release was missing: the user may have put it back)
        answer = await _answer(bridge, tool, lambda: bridge.picked_up(tool, lambda: handler(asker)), link)
    except VerifierLost as exc:  # once per call: restart the child and resume, or say how to retry
        if link is None:  # only a link raises it
            raise
        lost = exc
        answer = await _answer(bridge, tool, lambda: recover(bridge, link, tool, lost), link)
    bridge.settle()
    return await _noted(bridge, tool, answer, asker)


async def _noted(
    bridge: Bridge, tool: str, answer: Reply | types.InputRequiredResult, asker: Asker
) -> Reply | types.InputRequiredResult:
    """``answer`` after the bridge's notes: the client's roots not holding the project (a run set up or resumed), and
    each ``.rimthan/.gitignore`` that could not be written (:func:`~rimthan_host.own_folder.unwritten_notes`, once)."""
    if not isinstance(answer, Reply):
        return answer
    if tool in ("start_run", "resume_run") and not answer.is_error:
        note = await outside_roots(asker, bridge.project_dir)
        if note is not None:
            answer = Reply(f"{note}\n{answer.text}", {**answer.data, "outside_roots": True}, answer.is_error)
    unwritten = unwritten_notes()
    if unwritten:
        data = {**answer.data, "gitignore_unwritten": True}
        answer = Reply("\n".join([*unwritten, answer.text]), data, answer.is_error)
    return answer


def _lock_lost(bridge: Bridge) -> Reply:
    """The project's lock file was deleted or replaced under this bridge: it lets go of its run and the lock."""
    run = logged_run(bridge)
    bridge.session = None  # resume_run picks the run up from its log, once the lock is this bridge's again
    bridge.lock.release()
    return Reply(lost_words(run), {"status": "workspace_lock_lost", "run": run}, is_error=True)


async def _answer(
    bridge: Bridge, tool: str, move: Callable[[], Awaitable[Reply]], link: VerifierLink | None = None
) -> Reply | types.InputRequiredResult:
    """The move's reply, or its failure in words (a lost verifier connection is left to the caller)."""
    try:
        return await move()
    except InputNeeded as needed:
        return needed.result
    except ReplyUnreadable as exc:  # (asked before any move: the run is where it was)
        return Reply(exc.words(tool), {"status": "reply_unreadable", "failures": [exc.code.value]}, True)
    except ToolRefused as exc:
        return await _refused(bridge, link, tool, exc)
    except RunBusy as busy:  # (another process moves the run this bridge tried to resume: nothing done)
        return Reply(str(busy), {"status": busy.code.value, "run": busy.run, "owner_pid": busy.owner.pid}, True)
    except RunLockLost as lost:  # (the run's lock file deleted or replaced: its session moves no more)
        bridge.session = None  # resume_run picks the run up from its log
        return Reply(str(lost), {"status": lost.code.value, "run": lost.run}, True)
    except VerifierNotUp as exc:
        said = (
            reply_for(bridge, link, VerifierFailure(exc.code, tool, exc.message, exc.details, exited=True))
            if exc.code
            else None
        )
        return said or Reply(str(exc), {"status": "refused"}, True)
    except HarnessError as exc:
        return Reply(str(exc), {"status": "refused"}, True)
    except VerifierLost:
        raise
    except Exception as exc:  # last guard: the model gets one sentence, the host's log gets the traceback
        _log.exception("%s failed", tool)
        return bridge.failed(tool, exc)


async def _refused(bridge: Bridge, link: VerifierLink | None, tool: str, exc: ToolRefused) -> Reply:
    """The verifier's refusal of the call: the bridge's own words for its code, else the verifier's (a start's
    ``workflow_not_found`` is said by :meth:`Bridge.start_run`, naming the workflows the model can start)."""
    message = str(exc.error.get("message") or "")
    own = reply_for(bridge, link, VerifierFailure(exc.code, tool, message, exc.error.get("details")))
    return own if own is not None else verifier_refused(tool, exc.code, message)


def _result(reply: Reply) -> types.CallToolResult:
    """The reply's words as its text content and again in its structured content, with its data: a host hands
    its model one part or the other (Claude Code on a 2026-07-28 connection the structured content alone)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=scrub(reply.text))],
        structured_content=structured(reply.text, reply.data),
        is_error=reply.is_error,
    )


class BridgeLines(AnsweringStream):
    """The bridge's stdin: a tool call the SDK's parser refuses is read by Python's, a reply ends its question.

    The SDK's parser refuses lone surrogate escapes and nesting past ~200
    levels, and the SDK drops such a line unanswered (the client waits for
    ever). Python's parser reads both, so such a ``tools/call`` reaches the
    argument check, which refuses it naming the path. Only one whose every
    part but its arguments is plain JSON (what the reply echoes: the id, the
    tool's name). A refused reply to the bridge's own request (an
    elicitation) reaches that request as an error, so it ends instead of
    waiting for ever. Any other line is answered with a Parse error for its
    id (:class:`AnsweringStream`).
    """

    def reread(self, raw: str) -> SessionMessage | None:
        reply_to = top_level_response_id(raw)
        if reply_to is not None:  # the client's reply to our elicitation: it ends that question, unanswered
            return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=reply_to, error=_UNREADABLE_REPLY))
        try:
            value = json.loads(raw)
            if not _plain_tool_call(value):
                return None
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(value, by_name=False))
        except (RecursionError, ValueError):  # not JSON, an integer too long, or not JSON-RPC (ValidationError)
            return None

    def reshape(self, exc: Exception) -> SessionMessage | None:
        """A reply to the bridge's request whose ``result`` is no object ends that question as unreadable too."""
        reply_to = _reply_id(exc)
        if reply_to is None:
            return None
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=reply_to, error=_MALFORMED_REPLY))


def _reply_id(exc: Exception) -> int | str | None:
    """The id of the JSON-RPC response the SDK refused for its shape (``exc``), None if it was no response."""
    if not isinstance(exc, ValidationError):
        return None
    for error in exc.errors():
        value = error.get("input")
        if isinstance(value, dict) and "method" not in value and ({"result", "error"} & set(value)):
            reply_to = value.get("id")
            if isinstance(reply_to, (int, str)) and not isinstance(reply_to, bool):
                return reply_to
    return None


_MALFORMED_REPLY = types.ErrorData(code=types.INVALID_PARAMS, message="the client's reply is no JSON-RPC result object")
# What a pending request of the bridge's (an elicitation) gets when the client's reply is a line no parser reads:
# without it the request, which has no time limit (a person may take long to answer), waited for ever.
_UNREADABLE_REPLY = types.ErrorData(code=types.PARSE_ERROR, message="the client's reply could not be parsed")


def _plain_tool_call(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("method") != "tools/call" or not isinstance(value.get("params"), dict):
        return False
    params = {k: v for k, v in value["params"].items() if k != "arguments"}
    return first_non_json_value({**value, "params": params}) is None


def verifier_target(url: str | None, verifier_args: tuple[str, ...], project: Path) -> str | StdioServerParameters:
    """The verifier to talk to: a Streamable HTTP URL, or ``rimthan-mcp serve ARGS`` as a child run in ``project``.

    The child's working directory is the project, so its defaults (``./releases``, ``./keys/local``) and
    relative paths after ``--`` are the project's, wherever the bridge itself was started.
    """
    if url:
        return url
    sibling = Path(sys.executable).parent / "rimthan-mcp"
    command = str(sibling) if sibling.exists() else shutil.which("rimthan-mcp")
    if command is None:  # the serve command says it as an io_error, naming what to do
        raise FileNotFoundError(errno.ENOENT, "not installed beside rimthan-host nor on PATH", "rimthan-mcp")
    # The SDK passes a child only a few safe variables by default; the verifier needs the user's
    # environment (RIMTHAN_STATE_DIR, XDG_STATE_HOME) to find the same state directory.
    return StdioServerParameters(command=command, args=["serve", *verifier_args], env=dict(os.environ), cwd=project)


@dataclass(frozen=True)
class BridgeStopped:
    """How serving ended: why, when not at the end of input (SIGTERM, stdout closed); the verifier, if not up."""

    stopped: str | None
    down: VerifierDown | None


async def serve_bridge(
    project: Path, target: str | StdioServerParameters, host: HostProfile, *, require_elicitation: bool = False
) -> BridgeStopped:
    """Serve the model at once; the verifier connects alongside, and tool calls wait until it is up.

    Served on the verifier's stdio wire (``rimthan_workflow_mcp.stdio_serve``): SIGTERM is answered as the
    end of input, even with a terminal as stdin or stdout; every request read is answered. Once serving
    ends, whether the verifier is up (else why not: the command exits non-zero); once stopped, a verifier
    that does not answer within ``STOP_GRACE_SECONDS`` is not up, and is stopped (killed if it must be).
    ``require_elicitation``: as :func:`create_bridge_server` takes it (``--require-elicitation``).
    """
    with ExitStack() as ending:
        async with anyio.create_task_group() as tasks:
            link = VerifierLink(target, tasks)
            args = None if isinstance(target, str) else target.args[1:]  # (after "serve")
            program = PROGRAM if isinstance(target, str) else audit_program(target.command, shutil.which(PROGRAM))
            bridge = Bridge(
                link.call, project_dir=project, host=host, read_resource=link.read, verifier_args=args,
                verifier_program=program, list_metas=link.metas,
            )  # fmt: skip
            server = create_bridge_server(bridge, link, require_elicitation=require_elicitation)
            stopped = await serve_wire(server, BridgeLines)
            sigterms = ending.enter_context(_sigterms())  # held until the child is stopped: tasks' end
            down = await _settled(link, stopped, sigterms)
            tasks.cancel_scope.cancel()
    return BridgeStopped(stopped, down)


def _sigterms() -> AbstractContextManager[AsyncIterator[int] | None]:
    """SIGTERM, once serving ended, as signals to read, not the default action: that killed the bridge at once
    (143, no word) and left a child that answers nothing running (stopped, hung) in its own session."""
    if not hasattr(signal, "SIGTERM") or sys.platform == "win32":
        return nullcontext(None)
    return anyio.open_signal_receiver(signal.SIGTERM)


async def _settled(link: VerifierLink, stopped: str | None, sigterms: AsyncIterator[int] | None) -> VerifierDown | None:
    """Whether the verifier is up once serving ended (:meth:`VerifierLink.down`): after a stop within
    ``STOP_GRACE_SECONDS``; at the end of input within ``SETTLE_SECONDS``, which a SIGTERM cuts to the grace."""
    if stopped is not None:
        return await link.down(STOP_GRACE_SECONDS, STOPPED)
    if sigterms is None:
        return await link.down(SETTLE_SECONDS)
    async with anyio.create_task_group() as settling:

        async def cut_short() -> None:
            async for _ in sigterms:
                settling.cancel_scope.cancel()

        settling.start_soon(cut_short)
        down = await link.down(SETTLE_SECONDS)
        settling.cancel_scope.cancel()
        return down
    return await link.down(STOP_GRACE_SECONDS, STOPPED)  # (a SIGTERM cut the wait short)
