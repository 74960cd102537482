"""The edges of the stdio wire, as a client that is not the SDK's meets them: raw lines to ``rimthan-mcp serve``.

- A client that writes its requests and closes stdin gets an answer to every one of them, then the server
  exits 0. The SDK's dispatcher ends at end of input and cancels the handlers still running: the last request
  (its task not started yet) was dropped unanswered. Over pipes (the server's own reader) and with stdin a file
  (the SDK's reader), with calls on the loop and calls in worker threads, and an id used twice.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from rimthan_workflow_mcp.stdio_drain import draining
from rimthan_workflow_registry.protocol_names import (
    CONTINUE_WORKFLOW,
    PREPARE_STEP_VALIDATION,
    START_WORKFLOW,
    SUBMIT_STEP_VALIDATION,
)
from support.raw_stdio import RawStdio, initialize_lines
from support.servers import RIMTHAN_MCP, ServerWorld, build_world, serve_args, server_env

WAIT = 120.0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("wire-edges-world"))


def _command(world: ServerWorld, state: Path) -> list[str]:
    return [RIMTHAN_MCP, *serve_args(world, world.built["1.2.0"], state_dir=state)[2:]]


def _serve_over_pipes(world: ServerWorld, tmp_path: Path) -> subprocess.Popen[bytes]:
    command = _command(world, tmp_path / "state")
    pipe = subprocess.PIPE
    return subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=pipe, env=server_env())


def _requests() -> list[dict[str, Any]]:
    """20 requests: the four tools (on the loop), listings, and reads that run in a worker thread."""
    tools = (START_WORKFLOW, CONTINUE_WORKFLOW, PREPARE_STEP_VALIDATION, SUBMIT_STEP_VALIDATION)
    calls: list[tuple[str, dict[str, Any]]] = [("tools/call", {"name": t, "arguments": {"x": 1}}) for t in tools]
    calls += [
        ("tools/list", {}),
        ("prompts/list", {}),  # a worker thread
        ("resources/read", {"uri": "rimthan://releases/" + "0" * 64 + "/catalogue.toml"}),  # a worker thread
        ("resources/templates/list", {}),
        ("ping", {}),
    ]
    methods = (calls * 3)[:19]
    requests = [{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(methods, start=1)]
    return [*requests, {**requests[-1], "id": 19}]  # an id used twice while the first is in flight


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_every_request_read_before_stdin_closes_is_answered_then_exit_0(
    world: ServerWorld, tmp_path: Path, stdin_kind: str
) -> None:
    requests = _requests()
    wire = initialize_lines() + "".join(json.dumps(r) + "\n" for r in requests)
    command = _command(world, tmp_path / "state")
    if stdin_kind == "pipe":
        done = subprocess.run(command, input=wire.encode(), capture_output=True, timeout=WAIT, env=server_env())
    else:
        (tmp_path / "requests.jsonl").write_text(wire, encoding="utf-8")
        with (tmp_path / "requests.jsonl").open("rb") as stdin:
            done = subprocess.run(command, stdin=stdin, capture_output=True, timeout=WAIT, env=server_env())
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    answered = sorted(a["id"] for a in answers if a.get("id") != 0)
    assert answered == sorted(r["id"] for r in requests), done.stderr.decode()[-2000:]
    closed = [a for a in answers if a.get("error", {}).get("code") == types.CONNECTION_CLOSED]
    assert not closed, closed  # answered by its handler, not cancelled at the end of input
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _request(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


def _cancel(request_id: str) -> SessionMessage:
    params = {"requestId": request_id, "reason": "gone"}
    return SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params))


@pytest.mark.parametrize("answered", ["never", "cancelled"])
def test_the_end_of_input_waits_for_a_request_no_longer_than_the_deadline_and_not_for_a_cancelled_one(
    answered: str,
) -> None:
    """What the server does when a handler never answers: the end reaches the SDK at the deadline (a real
    handler then gets the SDK's Connection closed); a request the client cancelled is owed no answer."""

    async def run() -> tuple[list[SessionMessage | Exception], int]:
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](4)
        written, _ = anyio.create_memory_object_stream[SessionMessage](4)
        reader, _writer = draining(from_client, written, seconds=0.2 if answered == "never" else 3600)
        async with to_server:
            await to_server.send(_request(7))
            if answered == "cancelled":
                await to_server.send(_cancel("7"))  # a stringified id still names request 7
        with anyio.fail_after(WAIT):
            seen = [item async for item in reader]
        return seen, sum(reader.unanswered.ids.values())

    seen, left = anyio.run(run)
    assert len(seen) == (1 if answered == "never" else 2)
    assert left == (1 if answered == "never" else 0)


@pytest.mark.parametrize("closed", ["stdin", "stdout"])
def test_started_with_stdin_or_stdout_closed_it_is_refused_in_two_lines(
    world: ServerWorld, tmp_path: Path, closed: str
) -> None:
    """It stopped with internal_error ("report the logged details"): the SDK's stdio took a None sys.stdin."""
    redirect = "<&-" if closed == "stdin" else ">&-"
    command = ["sh", "-c", f'exec "$0" "$@" {redirect}', *_command(world, tmp_path / "state")]
    done = subprocess.run(command, capture_output=True, timeout=WAIT, env=server_env(), text=True)
    refusal = [line for line in done.stderr.splitlines() if line.startswith(("error:", "next:"))]
    assert refusal[0].startswith(f"error: io_error: {closed}: not open"), done.stderr[-2000:]
    assert refusal[1].startswith("next: start rimthan-mcp serve from an MCP host"), refusal
    assert (done.returncode, len(refusal)) == (1, 2), done.stderr[-2000:]


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_a_client_that_closes_its_end_of_stdout_stops_the_server_in_one_line(
    world: ServerWorld, tmp_path: Path, stdin_kind: str
) -> None:
    """It stopped with internal_error (a BrokenPipeError in the SDK's writer) and exit 1."""
    pings = "".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + "\n" for i in range(1, 200))
    (tmp_path / "requests.jsonl").write_text(initialize_lines() + pings, encoding="utf-8")
    with (tmp_path / "requests.jsonl").open("rb") as requests:
        process = subprocess.Popen(
            _command(world, tmp_path / "state"),
            stdin=subprocess.PIPE if stdin_kind == "pipe" else requests,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the client will read nothing more
        if process.stdin is not None:
            with suppress(BrokenPipeError):  # the server may have stopped already
                process.stdin.write(requests.read())
                process.stdin.flush()
        stderr = process.stderr.read().decode()
        if process.stdin is not None:
            with suppress(BrokenPipeError):
                process.stdin.close()
        assert process.wait(timeout=WAIT) == 0, stderr[-2000:]
    assert "rimthan-mcp: stopped: the client closed its end of stdout" in stderr, stderr[-2000:]
    assert "error:" not in stderr and "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.parametrize("when", ["answered", "just-sent"])
def test_sigterm_answers_the_calls_in_flight_then_exits_0(world: ServerWorld, tmp_path: Path, when: str) -> None:
    """SIGTERM (a host or service manager stopping the server) killed it at once (-15): now what it read is
    answered (never cancelled), every line it wrote is whole, it says why it stopped, and exits 0."""
    process = _serve_over_pipes(world, tmp_path)
    raw = RawStdio(process)
    raw.initialize(WAIT)  # the handler is in place before the first answer
    requests = _requests()
    raw.send("".join(json.dumps(r) + "\n" for r in requests))
    if when == "answered":
        assert raw.call_answer(requests[-1]["id"], WAIT) is not None
    assert process.stderr is not None and process.stdin is not None
    with ThreadPoolExecutor(1) as pool:  # stderr read aside; stdin stays open, so only SIGTERM can stop it
        stderr_read = pool.submit(process.stderr.read)
        process.send_signal(signal.SIGTERM)
        rest = [json.loads(line) for line in iter(lambda: raw.next_line(WAIT), None)]  # every line whole JSON
        process.wait(timeout=WAIT)
        stderr = stderr_read.result(timeout=WAIT)
    process.stdin.close()
    closed = [a for a in rest if a.get("error", {}).get("code") == types.CONNECTION_CLOSED]
    assert not closed, closed
    assert process.returncode == 0, stderr.decode()[-2000:]
    assert "rimthan-mcp: stopped (SIGTERM): the calls in flight were answered" in stderr.decode(), stderr[-2000:]
    assert b"Traceback" not in stderr


def _line(**fields: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **fields}) + "\n"


@pytest.mark.parametrize("then", ["stdin-open", "stdin-closed"])
def test_sigterm_answers_what_was_written_before_it_duplicates_and_errors_included(
    world: ServerWorld, tmp_path: Path, then: str
) -> None:
    """Requests written just before SIGTERM (still in the pipe, not read yet) were dropped unanswered while the
    server said the calls in flight were answered: the drain counted only what it had read. Now the input ends
    once what the pipe held at the signal is read, and every request in it is answered: an id used twice, a
    request answered with an error, one refused for its id; a notification is owed nothing."""
    process = _serve_over_pipes(world, tmp_path)
    raw = RawStdio(process)
    raw.initialize(WAIT)
    process.send_signal(signal.SIGSTOP)  # a busy machine: the requests wait in the pipe when SIGTERM comes
    raw.send(
        _line(id=5, method="ping")
        + _line(id=5, method="prompts/list")  # a worker thread, same id
        + _line(method="notifications/progress", params={"progressToken": 1, "progress": 1})
        + _line(id=6, method="no/such/method")  # answered with an error
        + _line(id=[7], method="ping")  # refused: the id is neither a string nor an integer
        + _line(id=8, method="tools/list")
    )
    assert process.stderr is not None and process.stdin is not None
    with ThreadPoolExecutor(1) as pool:
        stderr_read = pool.submit(process.stderr.read)
        process.send_signal(signal.SIGTERM)
        if then == "stdin-closed":
            process.stdin.close()
        process.send_signal(signal.SIGCONT)
        rest = [json.loads(line) for line in iter(lambda: raw.next_line(WAIT), None)]
        process.wait(timeout=WAIT)
        stderr = stderr_read.result(timeout=WAIT).decode()
    with suppress(BrokenPipeError):
        process.stdin.close()
    assert sorted(str(a["id"]) for a in rest) == ["5", "5", "6", "8", "None"], rest
    assert [a["error"]["code"] for a in rest if a["id"] is None] == [types.INVALID_REQUEST]
    assert not [a for a in rest if a.get("error", {}).get("code") == types.CONNECTION_CLOSED], rest
    assert process.returncode == 0, stderr[-2000:]
    assert "rimthan-mcp: stopped (SIGTERM): the calls in flight were answered" in stderr, stderr[-2000:]


@pytest.mark.parametrize("terminal_is", ["stdin", "stdout"])
def test_sigterm_stops_a_server_whose_stdin_or_stdout_is_a_terminal(
    world: ServerWorld, tmp_path: Path, terminal_is: str
) -> None:
    """With a terminal as stdin or stdout both streams went to the SDK's threaded path, whose stdin reader thread
    cannot be interrupted: after SIGTERM the server waited for the next line, for ever on a quiet terminal or
    pipe. Now stdin is read on the event loop in both cases, and the server answers and stops."""
    controller, terminal = os.openpty()
    try:
        pipe = subprocess.PIPE
        process = subprocess.Popen(
            _command(world, tmp_path / "state"),
            stdin=terminal if terminal_is == "stdin" else pipe,
            stdout=terminal if terminal_is == "stdout" else pipe,
            stderr=pipe,
            env=server_env(),
        )
        wire = initialize_lines() + _line(id=5, method="ping")
        if terminal_is == "stdin":
            os.write(controller, wire.encode())
        else:
            assert process.stdin is not None
            process.stdin.write(wire.encode())
            process.stdin.flush()
        answers = _lines_from(process.stdout.fileno() if process.stdout else controller, count=2)
        assert [json.loads(a)["id"] for a in answers] == [0, 5], answers
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=WAIT)  # the old code never ended: TimeoutExpired
        assert process.stderr is not None
        stderr = process.stderr.read().decode()
        assert returncode == 0, stderr[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
        os.close(terminal)
    assert "rimthan-mcp: stopped (SIGTERM): the calls in flight were answered" in stderr, stderr[-2000:]


def _lines_from(fd: int, count: int) -> list[str]:
    """The first ``count`` JSON lines from ``fd`` (a pipe, or a terminal's controller: echoed input skipped)."""
    seen, found = b"", list[str]()
    while len(found) < count:
        ready, _, _ = select.select([fd], [], [], WAIT)
        assert ready, f"no answer in {WAIT} s: {seen[-500:]!r}"
        seen += os.read(fd, 65536)
        found = [
            line for line in seen.decode().splitlines() if line.startswith('{"jsonrpc":"2.0","id"') and "result" in line
        ]
    return found[:count]


def test_two_waiters_on_the_answers_both_wake_when_the_last_is_written() -> None:
    """The end of input and SIGTERM can both wait for the answers. Each waiter replaced the shared event with
    its own, so an answer woke only the last one: the first waited until its deadline (DRAIN_SECONDS)."""

    async def run() -> list[int]:
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](4)
        written, _kept = anyio.create_memory_object_stream[SessionMessage](4)
        reader, writer = draining(from_client, written, seconds=3600)
        await to_server.send(_request(7))
        assert isinstance(await reader.receive(), SessionMessage)
        left: list[int] = []

        async def wait() -> None:
            left.append(await reader.unanswered.settled(3600))

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                await writer.send(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=7, result={})))
        return left

    assert anyio.run(run) == [0, 0]
