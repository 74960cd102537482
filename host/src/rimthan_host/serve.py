"""``rimthan-host serve``: the local MCP bridge for model-driven hosts (Claude Code, Claude Desktop, OpenCode).

A stdio MCP server built on the SDK's low-level server. It runs in the
user's project and talks to the verifier - a child ``rimthan-mcp serve``
over stdio (the default), or a URL over Streamable HTTP - and offers the
model the seven tools of :data:`TOOLS`, whose arguments are words and file
paths, never a token or a digest.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import click
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server

from .asking import Asker, InputNeeded
from .bridge import Bridge, Reply
from .protocol import HarnessError, HostProfile, ToolRefused, client_caller, client_reader

SERVER_NAME = "rimthan-host"
INSTRUCTIONS = (
    "Drives a Rimthan workflow run in this project. Call start_run (or resume_run), then follow each result's "
    "words: write the files it names with your own tools, call step_done, run each validator in its own subagent "
    "and pass its verdict with record_verdict, answer questions with answer_question."
)
_FACTS = {"type": "object", "description": "Decision facts the user confirmed: field name -> value."}
TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="start_run",
        description="Start a workflow run in this project with the facts the user confirmed.",
        input_schema={
            "type": "object",
            "properties": {
                "workflow": {"type": "string", "description": "Workflow name, e.g. research."},
                "facts": _FACTS,
            },
            "required": ["workflow", "facts"],
        },
    ),
    types.Tool(
        name="show_step",
        description="Show the current step: its instructions, the files to write, questions, validators.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="answer_question",
        description="Answer the question the run is waiting on (the user's answer).",
        input_schema={
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The user's choice."}},
        },
    ),
    types.Tool(
        name="step_done",
        description="The current step's work is done and its files are written; the bridge reads and checks them.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="record_verdict",
        description="Pass one validator's verdict after running it in its own subagent.",
        input_schema={
            "type": "object",
            "properties": {
                "validator": {"type": "string", "description": "Validator name, e.g. evidence-auditor."},
                "verdict": {"type": "string", "enum": ["pass", "fail"]},
                "findings": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What is wrong, one sentence each (required for fail).",
                },
            },
            "required": ["validator", "verdict"],
        },
    ),
    types.Tool(
        name="migrate_run",
        description="Preview (confirm false) or do (confirm true, once the user agreed) a move to a newer release.",
        input_schema={
            "type": "object",
            "properties": {
                "to_release": {"type": "string", "description": "Release id; default the one the bridge offered."},
                "confirm": {"type": "boolean"},
                "facts": {**_FACTS, "description": "New facts the newer release needs, confirmed by the user."},
            },
            "required": ["confirm"],
        },
    ),
    types.Tool(
        name="resume_run",
        description="Resume a run in this project from its log (e.g. after a restart).",
        input_schema={
            "type": "object",
            "properties": {"run": {"type": "string", "description": "Run id; default the latest unfinished."}},
        },
    ),
)


def _handlers(bridge: Bridge) -> dict[str, Callable[[Asker, dict[str, Any]], Awaitable[Reply]]]:
    return {
        "start_run": lambda a, x: bridge.start_run(a, str(x.get("workflow") or ""), dict(x.get("facts") or {})),
        "show_step": lambda a, x: bridge.show_step(),
        "answer_question": lambda a, x: bridge.answer_question(a, x.get("answer")),
        "step_done": lambda a, x: bridge.step_done(),
        "record_verdict": lambda a, x: bridge.record_verdict(
            str(x.get("validator") or ""), str(x.get("verdict") or ""), [str(f) for f in x.get("findings") or []]
        ),
        "migrate_run": lambda a, x: bridge.migrate_run(
            a, str(x.get("to_release") or "") or None, x.get("confirm") is True, dict(x.get("facts") or {})
        ),
        "resume_run": lambda a, x: bridge.resume_run(x.get("run")),
    }


def create_bridge_server(bridge: Bridge) -> Server[Any]:
    """The low-level MCP server over ``bridge``."""
    handlers = _handlers(bridge)

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        handler = handlers.get(params.name)
        if handler is None:
            return _result(Reply(f"Unknown tool {params.name}; the tools are {', '.join(handlers)}.", is_error=True))
        asker = Asker(ctx, params)
        bridge.elicits = asker.available
        try:
            reply = await handler(asker, dict(params.arguments or {}))
        except InputNeeded as needed:
            return needed.result
        except ToolRefused as exc:
            reply = Reply(f"The verifier refused: {exc.code}: {exc.error.get('message')}", {"refused": exc.code}, True)
        except HarnessError as exc:
            reply = Reply(str(exc), {}, True)
        return _result(reply)

    server: Server[Any] = Server(
        SERVER_NAME,
        title="Rimthan host bridge",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME))
    return server


def _result(reply: Reply) -> types.CallToolResult:
    from .words import scrub

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=scrub(reply.text))],
        structured_content=reply.data,
        is_error=reply.is_error,
    )


def verifier_target(url: str | None, verifier_args: tuple[str, ...]) -> str | StdioServerParameters:
    """The verifier to talk to: a Streamable HTTP URL, or ``rimthan-mcp serve ARGS`` as a child."""
    if url:
        return url
    sibling = Path(sys.executable).parent / "rimthan-mcp"
    command = str(sibling) if sibling.exists() else shutil.which("rimthan-mcp")
    if command is None:
        raise click.ClickException("rimthan-mcp is not installed here; install it or give --verifier-url")
    # The SDK passes a child only a few safe variables by default; the verifier needs the user's
    # environment (RIMTHAN_STATE_DIR, XDG_STATE_HOME) to find the same state directory.
    return StdioServerParameters(command=command, args=["serve", *verifier_args], env=dict(os.environ))


async def serve_bridge(project: Path, target: str | StdioServerParameters, host: HostProfile) -> None:
    """Serve the model at once; the verifier connects alongside, and tool calls wait until it is up."""
    ready = anyio.Event()
    verifier: dict[str, Any] = {}

    async def connect() -> None:
        try:
            async with Client(target, mode="auto") as client:
                verifier["call"] = client_caller(client)
                verifier["read"] = client_reader(client)
                ready.set()
                await anyio.sleep_forever()
        except Exception as exc:  # the SDK reports failures inside task groups as exception groups
            first: BaseException = exc
            while isinstance(first, BaseExceptionGroup) and first.exceptions:
                first = first.exceptions[0]
            verifier["error"] = f"the verifier is not reachable: {type(first).__name__}: {first}"
            ready.set()

    async def connected(use: str) -> Any:
        await ready.wait()
        if use not in verifier:
            raise HarnessError(str(verifier.get("error")) + " (check the flags after -- or --verifier-url)")
        return verifier[use]

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await (await connected("call"))(tool, arguments)
        return result

    async def read(uri: str) -> str:
        text: str = await (await connected("read"))(uri)
        return text

    app = create_bridge_server(Bridge(call, project_dir=project, host=host, read_resource=read))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(connect)
        async with stdio_server() as (read_stream, write_stream):
            await app.run(read_stream, write_stream, app.create_initialization_options())
        tasks.cancel_scope.cancel()


@click.group()
def main() -> None:
    """rimthan-host: the host kit's command line."""


@main.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="The project the model works in (files and .rimthan/runs/ live here).",
)
@click.option("--verifier-url", help="A running verifier's Streamable HTTP URL (default: start rimthan-mcp serve).")
@click.option("--harness", type=click.Choice(["claude-code", "opencode"]), default="claude-code", show_default=True)
@click.argument("verifier_args", nargs=-1, type=click.UNPROCESSED)
def serve(project: Path, verifier_url: str | None, harness: str, verifier_args: tuple[str, ...]) -> None:
    """Serve the bridge over stdio; VERIFIER_ARGS go to the child `rimthan-mcp serve` (after `--`)."""
    target = verifier_target(verifier_url, verifier_args)
    host = HostProfile(harness=harness, adapter_id=harness)
    try:
        anyio.run(serve_bridge, project.absolute(), target, host)
    except Exception as exc:  # the SDK reports failures inside task groups as exception groups
        first: BaseException = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        click.echo(f"rimthan-host: error: {type(first).__name__}: {first}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
