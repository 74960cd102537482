"""The mirror: what a tool call costs when the server does none of our work but returns our exact result.

P3 and P3h compare each call with the SDK echo tool, whose reply is the
(small) arguments. A ``start_workflow`` result is about 25 KB: the protocol
has the step payload carry the instruction and the prompt, skill, subagent
and adapter assets inline, and every result travel twice, as canonical JSON
text and as ``structuredContent``, which the client checks against the tool's
output schema. Sending, parsing and checking those bytes costs the client and
the SDK's machinery however little the server does.

``python -m benchmarks.mirror_server --tools FILE`` is the SDK's low-level
``Server`` listing the tool definitions in ``FILE`` (our ``tools/list``: same
names, same input and output schemas) plus one more tool, ``mirror.load``,
which keeps the result it is given (``{"result": <CallToolResult as JSON>}``).
The next call of any listed tool returns that result unchanged, whatever its
arguments, and forgets it; a call with nothing loaded is a tool error. The
benchmark loads each of our results (untimed) and, after our next call,
times the same client making the same call with the same arguments (so the
load has not just warmed the mirror's request path): the same request and result
bytes, the same client-side output-schema check, the same transport and SDK
server machinery, and nothing of ours. It is served as ``rimthan-mcp`` serves:
stdio from the event loop (``stdio_pipes.py``), and no per-call header schema
walk over HTTP; flags are the echo server's (``--transport http --port 0``).

Under load (P6) nothing can be loaded before each call, so ``--results FILE``
starts it keyed instead: ``FILE`` maps each JSON-RPC request id (as JSON text,
so ``3`` and ``"3"`` stay apart) to the result to return for it, read and
checked once at start-up. P6 replays the same recorded requests, ids unique
within one capture, from every client. A keyed mirror does not list
``mirror.load``; a call whose id has no result is a tool error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from rimthan_workflow_mcp.stdio_pipes import pipe_wire

from .echo_server import serve, transport_parser

LOAD = "mirror.load"
_LOAD_TOOL = types.Tool(
    name=LOAD,
    description="Keep this result; the next call of a mirrored tool returns it unchanged.",
    input_schema={"type": "object", "properties": {"result": {"type": "object"}}, "required": ["result"]},
)


def _refusal(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def request_key(request_id: types.RequestId) -> str:
    """The key of a request id in a results file: its JSON text."""
    return json.dumps(request_id)


def create_mirror_server(
    tools: list[types.Tool], results: dict[str, types.CallToolResult] | None = None
) -> Server[Any]:
    """A server listing ``tools`` whose tools return the last loaded result, or with ``results`` the request's own.

    Without ``results`` it lists ``mirror.load`` too (the loaded mode); with
    them, each call returns ``results[request_key(id)]`` (the keyed mode).
    """
    listed = [*tools] if results is not None else [*tools, _LOAD_TOOL]
    names = {tool.name for tool in tools}
    loaded: list[types.CallToolResult] = []

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == LOAD and results is None:
            loaded[:] = [types.CallToolResult.model_validate((params.arguments or {})["result"])]
            return types.CallToolResult(content=[])
        if params.name not in names:
            return _refusal(f"no tool {params.name!r}")
        if results is not None:
            kept = None if ctx.request_id is None else results.get(request_key(ctx.request_id))
            return _refusal(f"no result kept for request id {ctx.request_id!r}") if kept is None else kept
        if not loaded:
            return _refusal(f"nothing loaded for {params.name!r}: call {LOAD} first")
        return loaded.pop()

    # None: no listed tool declares an ``Mcp-Param-*`` header (ours do not), so the SDK walks no schema per call.
    return Server(
        "mirror",
        version="1.0.0",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=lambda name: None,
    )


async def _serve_stdio_on_loop(app: Server[Any]) -> None:
    """stdio as ``rimthan-mcp`` serves it: the pipes watched by the event loop, no worker-thread hops."""
    async with pipe_wire() as wire, stdio_server(*(wire or (None, None))) as (read_stream, write_stream):
        await app.run(read_stream, write_stream, app.create_initialization_options())


def read_tools(path: Path) -> list[types.Tool]:
    """Tool definitions saved as a JSON list (``Tool.model_dump(mode="json", by_alias=True)`` each)."""
    return [types.Tool.model_validate(entry) for entry in json.loads(path.read_text("utf-8"))]


def write_tools(path: Path, tools: list[types.Tool]) -> None:
    """Save ``tools`` as :func:`read_tools` reads them."""
    path.write_text(json.dumps([_as_json(tool) for tool in tools]), "utf-8")


def read_results(path: Path) -> dict[str, types.CallToolResult]:
    """A keyed mirror's results: ``{request_key(id): <CallToolResult as JSON>}``, each checked once here."""
    kept = json.loads(path.read_text("utf-8"))
    return {key: types.CallToolResult.model_validate(result) for key, result in kept.items()}


def _as_json(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def main(argv: list[str] | None = None) -> int:
    parser = transport_parser("python -m benchmarks.mirror_server")
    parser.add_argument("--tools", type=Path, required=True, help="JSON list of the tool definitions to mirror")
    parser.add_argument("--results", type=Path, help="keyed mode: JSON object {request id as JSON: CallToolResult}")
    args = parser.parse_args(argv)
    results = read_results(args.results) if args.results else None
    return serve(create_mirror_server(read_tools(args.tools), results), args, stdio=_serve_stdio_on_loop)


if __name__ == "__main__":
    sys.exit(main())
