"""P6's load generator: MCP requests the SDK client sent once, replayed over keep-alive HTTP, like wrk or hey.

The SDK ``Client`` does far more work per call than a server does:
pydantic models of every JSON-RPC message and result, and a Python
``jsonschema`` check of every structured result against the tool's output
schema (ours declare one, the echo tool none). With 32 of them in one process
on a two-core machine the load generator, not the server, saturated a core,
and it spent more per call on our (schema-checked, larger) results than on
the echo's. So the throughput figure measured the client as much as the server.

Here the SDK client drives each server once (:func:`capture`): a real
2026-07-28 exchange (``server/discover``, then every recorded ``tools/call``),
with the SDK's full result checks, output schemas included. An ``httpx2``
request hook keeps the bytes and MCP headers the SDK sent for each call. Under
load, ``clients`` keep-alive connections (the standard library's
``http.client``, a quarter of ``httpx2``'s CPU per request; one thread per
connection, spread over worker processes) POST exactly those bytes again and
check every reply:

- HTTP 200 with a JSON body that is a JSON-RPC response to the request's id;
- a ``result`` (not an ``error``) whose ``isError`` is false;
- ``structuredContent.status`` is the one the SDK client saw on the checked
  pass (for the echo, the arguments' own, i.e. absent).

Each captured call also keeps the result the SDK client got, so the keyed
mirror (``mirror_server.py --results``) can answer ours' very requests with it.

A failing check ends the benchmark, so a refusing server cannot look fast.
Both servers get the same code, connection count, worker processes and checks.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPConnection
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

# Headers an HTTP client library sets on every request by itself; the rest of what the SDK sent is replayed as is.
_TRANSPORT_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding", "user-agent"})
_STOP = "stop"
_ROUND = "round"


@dataclass(frozen=True)
class WireCall:
    """One ``tools/call`` as the SDK client put it on the wire, and its checked reply's status and result.

    ``result`` is the ``CallToolResult`` the SDK client got, as compact JSON.
    """

    name: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    request_id: int | str
    status: Any
    result: str


@dataclass(frozen=True)
class RoundResult:
    """One round of one worker process: when it started and ended, each call's latency, its CPU seconds."""

    started: float
    ended: float
    latencies: list[float]
    cpu_s: float


async def capture(url: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[WireCall]:
    """Send ``calls`` once through the SDK client (every check it makes); the requests as they went out."""
    sent: list[httpx2.Request] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(request)

    wire: list[WireCall] = []
    async with (
        httpx2.AsyncClient(event_hooks={"request": [keep]}) as http,
        Client(streamable_http_client(url, http_client=http), mode="auto") as client,
    ):
        for name, arguments in calls:
            sent.clear()
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise RuntimeError(f"{url} refused {name} on the checked pass: {result.structured_content}")
            wire.append(_wire_call(name, sent, result))
    return wire


def _wire_call(name: str, sent: list[httpx2.Request], result: CallToolResult) -> WireCall:
    posts = [r for r in sent if r.headers.get("mcp-method") == "tools/call"]
    if len(posts) != 1:
        raise RuntimeError(f"expected one tools/call POST for {name}, saw {len(posts)}")
    request = posts[0]
    body = request.content
    headers = tuple((k, v) for k, v in request.headers.items() if k.lower() not in _TRANSPORT_HEADERS)
    status = (result.structured_content or {}).get("status")
    kept = result.model_dump_json(by_alias=True, exclude_none=True)
    return WireCall(name, headers, body, json.loads(body)["id"], status, kept)


def check_reply(call: WireCall, status_code: int, body: bytes) -> str | None:
    """Why the reply (``status_code``, ``body``) is not a successful answer to ``call`` (None when it is)."""
    if status_code != 200:
        return f"HTTP {status_code}"
    try:
        message = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(message, dict) or message.get("id") != call.request_id:
        return "not a JSON-RPC response to this request"
    result = message.get("result")
    if not isinstance(result, dict):
        return f"a JSON-RPC error: {message.get('error')}"
    if result.get("isError"):
        return f"a tool error: {result.get('structuredContent')}"
    status = (result.get("structuredContent") or {}).get("status")
    if status != call.status:
        return f"status {status!r}, the checked pass had {call.status!r}"
    return None


def _replay(http: HTTPConnection, path: str, wire: list[WireCall], latencies: list[float]) -> None:
    for call in wire:
        started = time.perf_counter()
        http.request("POST", path, body=call.body, headers=dict(call.headers))
        response = http.getresponse()
        problem = check_reply(call, response.status, response.read())
        latencies.append(time.perf_counter() - started)
        if problem:
            raise RuntimeError(f"{call.name} under load: {problem}")


def _worker(conn: Connection, url: str, wire: list[WireCall], clients: int) -> None:
    """One load process: ``clients`` keep-alive connections, each replaying ``wire`` in its own thread per round."""
    where = urlsplit(url)
    https = [HTTPConnection(where.hostname or "127.0.0.1", where.port) for _ in range(clients)]
    with ThreadPoolExecutor(max_workers=clients) as pool:
        conn.send("ready")
        while conn.recv() == _ROUND:
            for http in https:  # fresh connections each round, outside the timing: servers close idle ones
                http.close()
                http.connect()
            latencies: list[float] = []
            cpu, started = time.process_time(), time.perf_counter()
            futures = [pool.submit(_replay, http, where.path, wire, latencies) for http in https]
            failed = [str(f.exception()) for f in futures if f.exception() is not None]
            ended = time.perf_counter()
            conn.send(failed[0] if failed else RoundResult(started, ended, latencies, time.process_time() - cpu))
    for http in https:
        http.close()


class LoadGenerator:
    """``clients`` keep-alive connections to ``url`` over ``processes`` worker processes, replaying ``wire``."""

    def __init__(self, url: str, wire: list[WireCall], *, clients: int, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        shares = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        for share in shares:
            parent, child = context.Pipe()
            proc = context.Process(target=_worker, args=(child, url, wire, share), daemon=True)
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)

    def __enter__(self) -> LoadGenerator:
        for conn in self._conns:
            if conn.recv() != "ready":
                raise RuntimeError("a load worker did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        for conn in self._conns:
            conn.send(_STOP)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()

    def round(self) -> tuple[float, list[float], float]:
        """Every connection replays the wire once, all at once: wall seconds, latencies, workers' CPU seconds."""
        for conn in self._conns:
            conn.send(_ROUND)
        results = [conn.recv() for conn in self._conns]
        failed = [r for r in results if not isinstance(r, RoundResult)]
        if failed:
            raise RuntimeError(f"the load generator stopped: {failed[0]}")
        wall = max(r.ended for r in results) - min(r.started for r in results)
        return wall, [lat for r in results for lat in r.latencies], sum(r.cpu_s for r in results)
