"""A verifier at a URL that is not quite rimthan-mcp: a real one behind it, its answers garbled on demand.

``python garbling_verifier.py UPSTREAM_URL SWITCH_FILE`` serves Streamable HTTP
on a free port (it logs ``listening on <url>``) and passes every call to the
real ``rimthan-mcp`` at ``UPSTREAM_URL``. While ``SWITCH_FILE`` exists, each
tool result is replaced by the fault the file names (:data:`FAULTS`): what a
server that is not rimthan-mcp, or a broken proxy, might answer. Its tools
declare no output schema - a server that is not rimthan-mcp declares none of
rimthan's - so what a client makes of a result is its own check.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server


def _without_status(result: types.CallToolResult) -> types.CallToolResult:
    content = {k: v for k, v in (result.structured_content or {}).items() if k != "status"}
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")], structured_content=content)


def _error_not_an_object(result: types.CallToolResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="boom")], structured_content={"error": "boom"}, is_error=True
    )


def _error_in_text_only(result: types.CallToolResult) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="Error: boom")], is_error=True)


def _setup_step(result: types.CallToolResult) -> dict[str, Any] | None:
    """The setup step a result shows (its structured content's, changed in place), or None."""
    step = (result.structured_content or {}).get("step")
    return step if isinstance(step, dict) and step.get("id") == "setup-workspace" else None


def _setup_path(part: str, key: str) -> Callable[[str], Callable[[types.CallToolResult], types.CallToolResult]]:
    """A fault setting the ``key`` of the setup step's first entry of ``part`` to a path (texts and digests kept:
    they still agree)."""

    def at(path: str) -> Callable[[types.CallToolResult], types.CallToolResult]:
        def fault(result: types.CallToolResult) -> types.CallToolResult:
            step = _setup_step(result)
            if step is not None:
                step[part][0][key] = path
            return result

        return fault

    return at


def _token_in_words(result: types.CallToolResult) -> types.CallToolResult:
    """The result's own checkpoint token and a digest written into the words a step and a question show."""
    content = result.structured_content or {}
    token = str(content.get("checkpoint") or "")
    said = f"{token} sha256:{'ab' * 32}"
    step, question = content.get("step"), content.get("question")
    for part, key in ((step, "title"), ((step or {}).get("instruction"), "text"), (question, "prompt")):
        if isinstance(part, dict) and isinstance(part.get(key), str):
            part[key] = f"{part[key]} {said}"
    return result


def _big_asset(result: types.CallToolResult) -> types.CallToolResult:
    """The setup step's first asset 2 MiB long (its digest made to agree): past any catalogue file."""
    step = _setup_step(result)
    if step is not None:
        text = "x" * (2 << 20)
        step["host_assets"][0].update(text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
    return result


def _files_refused(result: types.CallToolResult) -> types.CallToolResult:
    """A round the verifier would take (``ready_for_semantic_validation``) refused instead: the first artifact the
    step declares (the setup step's: the workspace manifest) fails a check the bridge does not make itself."""
    content = result.structured_content or {}
    if content.get("status") != "ready_for_semantic_validation":
        return result
    failure = {"code": "json_schema_failed", "message": "not the manifest this verifier expects",
               "artifact_id": "workspace-manifest"}  # fmt: skip
    refused = {k: v for k, v in content.items() if k not in ("validation_bundle", "validators")}
    refused.update(status="deterministic_validation_failed", failures=[failure])
    return types.CallToolResult(content=[types.TextContent(type="text", text="refused")], structured_content=refused)


FAULTS: dict[str, Callable[[types.CallToolResult], types.CallToolResult]] = {
    "files-refused": _files_refused,
    "big-asset": _big_asset,
    "token-in-words": _token_in_words,
    "no-status": _without_status,
    "error-not-an-object": _error_not_an_object,
    "error-in-text-only": _error_in_text_only,
}


def _set(where: str) -> Callable[[types.CallToolResult], types.CallToolResult]:
    """``<pointer>=<JSON>``: the value at that JSON pointer of a result that has it (its parent) set to the JSON."""
    pointer, _, raw = where.partition("=")
    *parents, last = pointer.split("/")[1:]

    def fault(result: types.CallToolResult) -> types.CallToolResult:
        node: Any = result.structured_content or {}
        for part in parents:
            node = node[int(part)] if isinstance(node, list) and part.isdigit() else node.get(part, None)
            if not isinstance(node, dict | list):
                return result
        if isinstance(node, list):
            node[int(last)] = json.loads(raw)
        else:
            node[last] = json.loads(raw)
        return result

    return fault


BIG_RESOURCE = "big-resource"  # each resource read answered with a JSON Schema of 2 MiB (tool results kept)
ALTERED_FILE = "altered-file"  # each release file read answered with one line more (manifests, tool results kept)
NO_FILE = "no-file"  # each release file read answered with no contents (manifests, tool results kept)
RELEASE_FILES = "rimthan://releases/"
# Faults with a path: "asset-at:<path>", "manifest-at:<path>", "set:<pointer>=<JSON>".
PATH_FAULTS: dict[str, Callable[[str], Callable[[types.CallToolResult], types.CallToolResult]]] = {
    "asset-at": _setup_path("host_assets", "install_path"),  # the first asset installed there
    "manifest-at": _setup_path("outputs", "path"),  # the workspace manifest declared there
    "set": _set,
}


def fault_of(name: str) -> Callable[[types.CallToolResult], types.CallToolResult]:
    """The fault the switch file names: one of :data:`FAULTS`, or ``<kind>:<path>`` of :data:`PATH_FAULTS`."""
    kind, colon, path = name.partition(":")
    return PATH_FAULTS[kind](path) if colon else FAULTS.get(name, lambda result: result)  # (resource faults)


def _server(upstream: Client, switch: Path) -> Server[Any]:
    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed = await upstream.list_tools()
        return types.ListToolsResult(tools=[t.model_copy(update={"output_schema": None}) for t in listed.tools])

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await upstream.call_tool(params.name, dict(params.arguments or {}))
        fault = switch.read_text("utf-8").strip() if switch.exists() else None
        return fault_of(fault)(result) if fault else result

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        read = await upstream.read_resource(params.uri)
        fault = switch.read_text("utf-8").strip() if switch.exists() else None
        if fault == BIG_RESOURCE:
            big = json.dumps({"type": "object", "description": "x" * (2 << 20)})
            return types.ReadResourceResult(contents=[c.model_copy(update={"text": big}) for c in read.contents])
        if fault == NO_FILE and str(params.uri).startswith(RELEASE_FILES):
            return types.ReadResourceResult(contents=[])
        if fault == ALTERED_FILE and str(params.uri).startswith(RELEASE_FILES):
            altered = [c.model_copy(update={"text": f"{getattr(c, 'text', '')}\nAltered.\n"}) for c in read.contents]
            return types.ReadResourceResult(contents=altered)
        return read

    return Server(
        "garbling-verifier", on_list_tools=on_list_tools, on_call_tool=on_call_tool, on_read_resource=on_read_resource
    )


async def serve(upstream_url: str, switch: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    async with Client(upstream_url, mode="auto") as upstream:
        app = _server(upstream, switch).streamable_http_app(stateless_http=True, json_response=True)
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on"))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        print(f"garbling-verifier: listening on {url}", file=sys.stderr, flush=True)
        await server.serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1], Path(sys.argv[2]))
