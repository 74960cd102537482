"""Where an HTTP ``tools/call`` runs: small calls on the event loop, anything that could be long in a worker thread.

A real ``rimthan-mcp serve --transport http`` process at debug level logs
where it placed each call (``tool call placed``, ``runs_on``); the calls are
raw HTTP requests, so the test controls the body's length and framing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from rimthan_host.protocol import client_caller
from rimthan_workflow_mcp.call_placement import (
    ON_LOOP_MAX_BODY_BYTES,
    ON_LOOP_MAX_ESCAPES,
    ON_LOOP_MAX_VALUES,
    small_arguments,
)
from rimthan_workflow_registry.release.verified import CACHE_FILE_LIMIT
from support.checked_client import CheckedClient
from support.releases import build_release, packaged_source, resign_release
from support.servers import HttpServer, ServerWorld, build_world, harness, http_server, serve_args

START = "rimthan.start_workflow"
PROTOCOL = "2025-11-25"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("placement-world"))


@pytest.fixture(scope="module")
def server(world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    state = tmp_path_factory.mktemp("placement-state")
    with http_server(serve_args(world, world.built["1.2.0"], state_dir=state, extra=["--log-level", "debug"])) as s:
        yield s


@pytest.fixture(scope="module")
def start_arguments(server: HttpServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The arguments a host sends to start the packaged run (recorded from the SDK client's call)."""
    sent: list[dict[str, Any]] = []

    async def go() -> None:
        async with CheckedClient(server.url) as client:
            inner = client_caller(client)

            async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
                sent.append(arguments)
                return await inner(name, arguments)

            await harness(call, tmp_path_factory.mktemp("placement-project")).start("research", initial_version="1.2.0")

    anyio.run(go)
    return sent[0]


def _body(name: str, arguments: dict[str, Any], *, length: int | None = None) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )
    return (body + " " * ((length or 0) - len(body))).encode()  # trailing whitespace: the same JSON, a longer body


def _call(url: str, body: bytes, *, chunked: bool = False) -> dict[str, Any]:
    """POST one ``tools/call`` (``chunked``: no Content-Length, Transfer-Encoding: chunked); its result."""
    where = urlsplit(url)
    http = HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=120)
    headers = {"Content-Type": "application/json", "Accept": "application/json", "MCP-Protocol-Version": PROTOCOL}
    try:
        if chunked:
            http.request("POST", where.path, body=iter([body]), headers=headers, encode_chunked=True)
        else:
            http.request("POST", where.path, body=body, headers=headers)
        response = http.getresponse()
        assert response.status == 200
        result: dict[str, Any] = json.loads(response.read())["result"]
        return result
    finally:
        http.close()


def _placed(server: HttpServer, after: int) -> list[str]:
    """``runs_on`` of every ``tool call placed`` record the server logged from stderr line ``after`` on."""
    records = [json.loads(line) for line in server.lines[after:] if line.startswith("{")]
    return [r["runs_on"] for r in records if r.get("event") == "tool call placed"]


def _with_state(arguments: dict[str, Any], **values: Any) -> dict[str, Any]:
    confirmed = arguments["confirmed_state"]
    return {**arguments, "confirmed_state": {**confirmed, "state": {**confirmed["state"], **values}}}


def test_a_small_call_runs_on_the_loop_anything_unbounded_in_a_worker(
    server: HttpServer, start_arguments: dict[str, Any]
) -> None:
    small = _body(START, start_arguments)
    assert len(small) <= ON_LOOP_MAX_BODY_BYTES
    many_values = _with_state(start_arguments, options=[0] * ON_LOOP_MAX_VALUES)
    many_escapes = _with_state(start_arguments, objective='"' * (ON_LOOP_MAX_ESCAPES + 1))
    cases = [  # where it runs, the body, chunked?, the call's outcome
        ("loop", small, False, "active"),
        ("loop", _body(START, start_arguments, length=ON_LOOP_MAX_BODY_BYTES), False, "active"),
        ("worker", _body(START, start_arguments, length=ON_LOOP_MAX_BODY_BYTES + 1), False, "active"),
        ("worker", small, True, "active"),  # no Content-Length: no bound known
        ("worker", _body(START, many_values), False, "confirmed_state_invalid"),
        ("worker", _body(START, many_escapes), False, "confirmed_state_invalid"),
    ]
    for expected, body, chunked, outcome in cases:
        mark = len(server.lines)
        structured = _call(server.url, body, chunked=chunked)["structuredContent"]
        assert (structured.get("status") or structured["error"]["code"]) == outcome
        server.wait_for(r'"event": "tool call placed"', after=mark)
        assert _placed(server, mark) == [expected], (len(body), chunked)


def test_a_long_call_in_a_worker_does_not_hold_up_a_small_call_on_the_loop(
    server: HttpServer, start_arguments: dict[str, Any]
) -> None:
    # Long: a confirmed state whose every option is refused, one schema error per item (hundreds of ms of CPU).
    long_arguments = _with_state(start_arguments, options=[{}] * 15_000)
    answered: list[str] = []
    results: dict[str, dict[str, Any]] = {}

    def send(label: str, body: bytes) -> None:
        results[label] = _call(server.url, body)
        answered.append(label)

    mark = len(server.lines)
    long_call = threading.Thread(target=send, args=("long", _body(START, long_arguments)))
    long_call.start()
    server.wait_for(r'"event": "tool call placed"', after=mark)  # the long call is in its worker now
    small_mark = len(server.lines)
    send("small", _body(START, start_arguments))
    long_call.join(timeout=120)
    assert answered == ["small", "long"]
    assert _placed(server, mark)[:1] == ["worker"] and _placed(server, small_mark)[:1] == ["loop"]
    assert results["small"]["structuredContent"]["status"] == "active"
    assert results["long"]["structuredContent"]["error"]["code"] == "confirmed_state_invalid"


def test_a_release_that_quotes_files_from_disk_serves_every_call_in_a_worker(
    world: ServerWorld, start_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """A release signed with an instruction past a catalogue file's bound (the build refuses one now; one signed
    before keeps loading, re-signed here) is quoted from disk, so every call is placed in a worker."""
    built = build_release(packaged_source("1.2.0"), tmp_path / "built", [world.key])
    instruction = "assets/instructions/setup-workspace.md"
    text = ""

    def grow(catalogue: Path) -> None:
        nonlocal text
        text = (
            (catalogue / instruction).read_text("utf-8") + "\n" + "A long setup note.\n" * (CACHE_FILE_LIMIT // 19 + 1)
        )
        (catalogue / instruction).write_text(text, "utf-8")

    resign_release(built, [world.key], edit=grow)
    release = built
    with http_server(serve_args(world, release, state_dir=tmp_path / "state", extra=["--log-level", "debug"])) as s:
        mark = len(s.lines)
        result = _call(s.url, _body(START, start_arguments))
        s.wait_for(r'"event": "tool call placed"', after=mark)
        assert _placed(s, mark) == ["worker"]
    step = result["structuredContent"]["step"]
    assert step["instruction"]["path"] == "assets/instructions/setup-workspace.md"
    assert step["instruction"]["text"] == text


# the arguments, a, its items: exactly the value bound
_VALUES_AT_BOUND: dict[str, list[Any]] = {"a": [[] for _ in range(ON_LOOP_MAX_VALUES - 2)]}


@pytest.mark.parametrize(
    ("arguments", "small"),
    [
        ({"a": '"' * ON_LOOP_MAX_ESCAPES}, True),  # \" adds 1 each: exactly the bound
        ({"a": '"' * ON_LOOP_MAX_ESCAPES, "b": ["x\\"]}, False),  # one more, in a nested string
        ({"\n" * (ON_LOOP_MAX_ESCAPES // 2): "\t" * (ON_LOOP_MAX_ESCAPES // 2)}, True),  # keys count too
        ({"\n" * (ON_LOOP_MAX_ESCAPES // 2): "\t" * (ON_LOOP_MAX_ESCAPES // 2 + 1)}, False),
        ({"a": [{"b": "\x01" * (ON_LOOP_MAX_ESCAPES // 5)}]}, True),  # \u0001 adds 5
        ({"a": [{"b": "\x01" * (ON_LOOP_MAX_ESCAPES // 5 + 1)}]}, False),
        ({"a": "é€" * ON_LOOP_MAX_ESCAPES}, True),  # non-ASCII is not escaped
    ],
)
def test_small_arguments_counts_every_escape_of_strings_and_keys(arguments: Any, small: bool) -> None:
    assert small_arguments(arguments) is small
    assert small_arguments(arguments, count_escapes=False) is True


def test_small_arguments_counts_every_value() -> None:
    one_more = {"a": [*_VALUES_AT_BOUND["a"], 1]}
    for escapes in (True, False):
        assert small_arguments(_VALUES_AT_BOUND, count_escapes=escapes) is True
        assert small_arguments(one_more, count_escapes=escapes) is False
