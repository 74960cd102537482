"""``rimthan-host serve`` on the verifier's own stdio wire (``rimthan_workflow_mcp.stdio_pipes``), as the real process.

The bridge used the SDK's threaded stdio reader: its stdin thread cannot be
interrupted, so SIGTERM waited for the next line, for ever on a quiet
terminal; and a request whose id is neither a string nor an integer (the SDK
reads it as a notification) went unanswered when stdin was a file or a
terminal. Now it reads stdin on the event loop as the verifier does: SIGTERM
ends the input once what the client wrote before it is read, the bridge
answers what it read and stops as at the end of input (exit 0, its verifier
up), and a line with an unusable id is refused with ``Invalid Request``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from rimthan_host.bridge_server import STOP_GRACE_SECONDS
from support.bridge import bridge_params, verifier_pids
from support.raw_stdio import RawStdio, initialize_lines
from support.servers import ServerWorld, build_world

WAIT = 120.0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("bridge-wire-world"))


def _command(world: ServerWorld, tmp_path: Path) -> list[str]:
    (tmp_path / "project").mkdir(exist_ok=True)
    params = bridge_params(tmp_path / "project", world, tmp_path / "state")
    return [params.command, *params.args]


def _line(**fields: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **fields}) + "\n"


def _answers_from(fd: int, count: int) -> list[dict[str, Any]]:
    """The first ``count`` JSON-RPC answers on ``fd`` (a pipe, or a terminal's controller: echoed input skipped)."""
    seen, found = b"", list[dict[str, Any]]()
    deadline = time.monotonic() + WAIT
    while len(found) < count:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"no answer in {WAIT} s: {seen[-500:]!r}"
        seen += os.read(fd, 65536)
        lines = seen.decode("utf-8", "replace").replace("\r", "").split("\n")[:-1]  # whole lines only
        found = [json.loads(x) for x in lines if x.startswith('{"jsonrpc":"2.0","id"') and '"method"' not in x]
    return found[:count]


@contextmanager
def _bridge(command: list[str], stdin: int, stdout: int) -> Iterator[subprocess.Popen[bytes]]:
    """The real ``rimthan-host serve``, killed at the end if it is still running (a failing test)."""
    process = subprocess.Popen(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def _terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: its controller (the user's side) and the terminal a process is given."""
    controller, terminal = os.openpty()
    try:
        yield controller, terminal
    finally:
        os.close(controller)
        os.close(terminal)


def _ended(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The exit status and stderr of ``process``, which must end within ``WAIT`` seconds."""
    returncode = process.wait(timeout=WAIT)
    assert process.stderr is not None
    return returncode, process.stderr.read().decode("utf-8", "replace")


def _stopped_by_sigterm(returncode: int, stderr: str) -> None:
    assert returncode == 0, stderr[-2000:]
    assert "rimthan-host: stopped (SIGTERM): the calls in flight were answered" in stderr, stderr[-2000:]
    assert "error:" not in stderr and "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.parametrize("terminal_is", ["stdin", "stdout"])
def test_sigterm_stops_a_bridge_whose_stdin_or_stdout_is_a_terminal(
    world: ServerWorld, tmp_path: Path, terminal_is: str
) -> None:
    pipe = subprocess.PIPE
    with _terminal() as (controller, terminal):
        stdin, stdout = (terminal, pipe) if terminal_is == "stdin" else (pipe, terminal)
        with _bridge(_command(world, tmp_path), stdin, stdout) as process:
            wire = (initialize_lines() + _line(id=5, method="tools/list")).encode()
            if process.stdin is None:
                os.write(controller, wire)
            else:
                process.stdin.write(wire)
                process.stdin.flush()
            answers = _answers_from(process.stdout.fileno() if process.stdout else controller, count=2)
            assert [a["id"] for a in answers] == [0, 5], answers
            process.send_signal(signal.SIGTERM)
            ended = _ended(process)
    _stopped_by_sigterm(*ended)


def test_sigterm_over_pipes_answers_what_was_written_before_it_then_exits_0(world: ServerWorld, tmp_path: Path) -> None:
    """Pipes: SIGTERM killed the bridge at once (-15); now the calls written before it are answered first."""
    with _bridge(_command(world, tmp_path), subprocess.PIPE, subprocess.PIPE) as process:
        raw = RawStdio(process)
        raw.initialize(WAIT)
        assert raw.call(4, "show_step", "{}", WAIT) is not None  # the verifier is up
        process.send_signal(signal.SIGSTOP)  # a busy machine: the requests wait in the pipe when SIGTERM comes
        raw.send(_line(id=5, method="tools/list") + _line(id=6, method="ping"))
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGCONT)
        rest = [json.loads(line) for line in iter(lambda: raw.next_line(WAIT), None)]
        ended = _ended(process)
    assert sorted(a["id"] for a in rest) == [5, 6], rest
    _stopped_by_sigterm(*ended)


@pytest.mark.parametrize("stdin_kind", ["file", "terminal"])
def test_a_request_with_an_unusable_id_is_refused_from_a_file_or_a_terminal(
    world: ServerWorld, tmp_path: Path, stdin_kind: str
) -> None:
    """The SDK reads ``"id": [7]`` as a notification: the client waited for ever. Now it gets Invalid Request."""
    wire = initialize_lines() + _line(id=[7], method="tools/list") + _line(id=8, method="ping")
    if stdin_kind == "file":
        (tmp_path / "requests.jsonl").write_text(wire, encoding="utf-8")
        with (tmp_path / "requests.jsonl").open("rb") as stdin:
            done = subprocess.run(_command(world, tmp_path), stdin=stdin, capture_output=True, timeout=WAIT)
        assert done.returncode == 0, done.stderr[-2000:]
        answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
    else:
        with _terminal() as (controller, terminal), _bridge(_command(world, tmp_path), terminal, subprocess.PIPE) as p:
            os.write(controller, wire.encode())
            assert p.stdout is not None
            answers = _answers_from(p.stdout.fileno(), count=3)
    assert [a["id"] for a in answers] == [0, None, 8], answers
    assert answers[1]["error"]["code"] == types.INVALID_REQUEST, answers


@pytest.mark.parametrize("offered", ["2024-11-05", "2025-03-26"])
def test_an_initialize_offering_a_batch_era_is_answered_with_a_served_version(
    world: ServerWorld, tmp_path: Path, offered: str
) -> None:
    """The bridge answered such an offer with itself, then refused every batch the client was told it could send;
    as the verifier (tests/server/test_protocol_eras.py), it now answers 2025-11-25 and batches stay refused."""
    hello = {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]) + "\n"
    wire = _line(id=0, method="initialize", params=hello) + _line(method="notifications/initialized") + batch
    done = subprocess.run(
        _command(world, tmp_path), input=(wire + _line(id=8, method="ping")).encode(), capture_output=True, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [a["id"] for a in answers] == [0, None, 8], answers
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25", answers[0]
    assert answers[1]["error"]["code"] == types.INVALID_REQUEST, answers[1]


@pytest.mark.parametrize("sigterms", [1, 2], ids=["one SIGTERM", "a second SIGTERM during the drain"])
def test_a_call_still_unanswered_at_the_drain_deadline_is_cancelled_and_said_in_the_stop_line(
    world: ServerWorld, tmp_path: Path, sigterms: int
) -> None:
    """A call the drain cannot see answered (its verifier stopped) is answered ``Connection closed`` at the deadline,
    and the stop line counts it; a second SIGTERM while the drain waits neither kills the bridge nor cuts it short."""
    with _bridge(_command(world, tmp_path), subprocess.PIPE, subprocess.PIPE) as process:
        raw = RawStdio(process)
        raw.initialize(WAIT)
        assert raw.call(2, "show_step", "{}", WAIT) is not None  # the verifier is up
        children = verifier_pids(tmp_path / "state")
        assert children, "no verifier child"
        for pid in children:
            os.kill(pid, signal.SIGSTOP)  # the call below waits on it: still in flight at the drain's deadline
        try:
            facts = {"objective": "Pick a queue", "decision_owner": "Ada"}
            arguments = {"workflow": "research", "facts": facts}
            raw.send(_line(id=3, method="tools/call", params={"name": "start_run", "arguments": arguments}))
            process.send_signal(signal.SIGTERM)
            for _ in range(sigterms - 1):
                threading.Event().wait(1.0)  # (not coalesced with the first: the drain has begun)
                process.send_signal(signal.SIGTERM)
            answer = raw.call_answer(3, WAIT)
        finally:
            for pid in children:
                os.kill(pid, signal.SIGCONT)
        returncode, stderr = _ended(process)
    assert answer is not None and answer.get("error", {}).get("code") == types.CONNECTION_CLOSED, answer
    assert returncode == 0, stderr[-2000:]
    cut_off = "rimthan-host: stopped (SIGTERM): 1 call(s) in flight still unanswered after 10 s were cancelled"
    assert f"{cut_off} (answered Connection closed)" in stderr, stderr[-2000:]
    assert "error:" not in stderr and "Traceback" not in stderr, stderr[-2000:]


def test_sigterm_while_the_verifier_still_comes_up_stops_both_with_exit_0(world: ServerWorld, tmp_path: Path) -> None:
    """A verifier child still coming up when the bridge is stopped (a busy machine: here held stopped before it
    could import anything) refused nothing: the bridge says its stop line, stops the child and exits 0. Before, it
    exited 1 saying the verifier "never came up: it did not answer within 2 s" (the clean-clone CI of a loaded
    machine failed four SIGTERM tests on it)."""
    state = tmp_path / "state"
    with _bridge(_command(world, tmp_path), subprocess.PIPE, subprocess.PIPE) as process:
        children: list[int] = []
        try:
            while not children and process.poll() is None:  # (held within milliseconds of its start)
                children = verifier_pids(state)
            for pid in children:
                os.kill(pid, signal.SIGSTOP)
            RawStdio(process).initialize(WAIT)  # the bridge serves the model at once
            process.send_signal(signal.SIGTERM)
            ended = _ended(process)
        finally:
            for pid in children:
                with suppress(ProcessLookupError):  # (stopped with the bridge: gone)
                    os.kill(pid, signal.SIGCONT)
    assert children, "no verifier child"
    _stopped_by_sigterm(*ended)
    assert verifier_pids(state) == []  # stopped with the bridge, not left behind


@pytest.mark.parametrize(
    "ends", [("SIGTERM",), ("SIGTERM", "SIGTERM"), ("stdin", "SIGTERM")],
    ids=["one SIGTERM", "a second SIGTERM while it ends", "stdin closed, then SIGTERM"],
)  # fmt: skip
def test_sigterm_with_a_verifier_that_answers_nothing_stops_it_after_a_short_grace(
    world: ServerWorld, tmp_path: Path, ends: tuple[str, ...]
) -> None:
    """A verifier child that ignores SIGTERM and answers nothing (stopped): the bridge asks it for
    ``STOP_GRACE_SECONDS``, then its child is stopped (SIGTERM, then SIGKILL) and it exits 1 naming the grace.
    Before, it asked for 30 s (``SETTLE_SECONDS``, meant for a verifier still coming up) and said the verifier
    was gone "when the client closed stdio"; a SIGTERM meanwhile (a second one, or one while it waited 30 s
    for the verifier once stdin closed) killed it (143, no word), its child left stopped for ever."""
    state = tmp_path / "state"
    with _bridge(_command(world, tmp_path), subprocess.PIPE, subprocess.PIPE) as process:
        raw = RawStdio(process)
        raw.initialize(WAIT)
        start = json.dumps({"workflow": "research", "facts": {}})
        assert raw.call(2, "start_run", start, WAIT) is not None  # the verifier answered (blocked: no facts)
        children = verifier_pids(state)
        assert children, "no verifier child"
        try:
            for pid in children:
                os.kill(pid, signal.SIGSTOP)  # SIGTERM waits until it is continued; nothing is answered
            for i, end in enumerate(ends):
                if i:
                    threading.Event().wait(1.0)  # (not coalesced with the first: the bridge is ending)
                if end == "stdin":
                    assert process.stdin is not None
                    process.stdin.close()
                else:
                    process.send_signal(signal.SIGTERM)
            returncode, stderr = _ended(process)
        finally:
            for pid in verifier_pids(state):
                os.kill(pid, signal.SIGKILL)
    assert returncode == 1, stderr[-2000:]
    lines = stderr.splitlines()
    if ends[0] == "SIGTERM":
        assert "rimthan-host: stopped (SIGTERM): the calls in flight were answered" in lines, stderr[-2000:]
    gone = "error: internal_error: the verifier (rimthan-mcp serve, which the bridge starts) was gone when the bridge"
    assert f"{gone} was stopped: it did not answer within {STOP_GRACE_SECONDS:g} s" in lines, stderr[-2000:]
    assert lines[-1].startswith("next: ") and "Traceback" not in stderr, stderr[-2000:]
    assert verifier_pids(state) == []  # killed: not left behind, stopped
