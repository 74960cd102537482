"""The floor for P3, P3h and P5: the SDK's low-level ``Server`` with one ``echo`` tool, nothing else.

It imports nothing of ours (P5 times its start); the mirror (``mirror_server.py``)
shares its command line and HTTP serving.

``python -m benchmarks.echo_server`` serves stdio; ``--transport http --port 0``
serves stateless Streamable HTTP with JSON responses on 127.0.0.1 (as
``rimthan-mcp serve --transport http`` does, under the same uvicorn settings,
with Nagle off as uvicorn's own socket binding would have it) and prints
``listening on <url>`` on stderr once it accepts connections.

The tool returns its arguments unchanged, as text and as structured content,
so echoing a recorded Rimthan call's arguments moves the same request bytes
through the same client, transport and SDK server machinery - and nothing of
ours.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

ECHO = "echo"
_TOOL = types.Tool(
    name=ECHO,
    description="Return the arguments unchanged.",
    input_schema={"type": "object", "additionalProperties": True},
)


def create_echo_server() -> Server[Any]:
    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_TOOL])

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(arguments))], structured_content=arguments, is_error=False
        )

    return Server("echo", version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def _serve_stdio(app: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await app.run(read_stream, write_stream, app.create_initialization_options())


async def _serve_http(app: Server[Any], port: int) -> None:
    # asyncio turns Nagle off only on sockets created with proto=IPPROTO_TCP (as uvicorn's own binding does);
    # a pre-bound socket(AF_INET, SOCK_STREAM) has proto 0, so set TCP_NODELAY here (accepted sockets inherit
    # it on Linux). Without it each response's header and body writes stall ~40 ms on delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    starlette_app = app.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host="127.0.0.1"
    )
    config = uvicorn.Config(
        starlette_app,
        log_config=None,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    print(f"{app.name}: listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def transport_parser(prog: str) -> argparse.ArgumentParser:
    """The command line every floor server shares: ``--transport stdio|http`` and ``--port``."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    return parser


def serve(
    app: Server[Any], args: argparse.Namespace, *, stdio: Callable[[Server[Any]], Awaitable[None]] = _serve_stdio
) -> int:
    """Serve ``app`` over the transport ``args`` chose (``stdio``, or stateless HTTP with JSON responses)."""
    if args.transport == "stdio":
        anyio.run(stdio, app)
    else:
        anyio.run(_serve_http, app, args.port)
    return 0


def main(argv: list[str] | None = None) -> int:
    return serve(create_echo_server(), transport_parser("python -m benchmarks.echo_server").parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
