"""``rimthan-host serve``'s exit status says whether its verifier was up, in the verifier's own words.

Run through the installed console scripts, the bridge starting the real
``rimthan-mcp serve`` as its child. Before, the bridge exited 0 whenever its
client closed stdio: a child that refused its flags (an operator's typo in a
host config), found no releases, or was killed made a bridge that seemed to
work. Now, once stdio closes, the bridge waits for a verifier still coming up
and pings one that is up; if it is not up, the last two lines on stderr are a
refusal with the child's own code and words (after the child's own lines),
and the exit status is non-zero: 2 for flags the child refused, else 1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.bridge import bridge_params, verifier_pids
from support.raw_stdio import RawStdio
from support.refusals import Refusal, refusal
from support.servers import ServerWorld, build_world

RIMTHAN_HOST = str(Path(sys.executable).with_name("rimthan-host"))
ANSWER_SECONDS = 30.0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("exits-world"))


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rimthan-host serve ARGS`` whose client closes stdio at once (no stdin at all)."""
    return subprocess.run(
        [RIMTHAN_HOST, "serve", *args], capture_output=True, text=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL
    )


def _refused(done: subprocess.CompletedProcess[str], status: int, code: str) -> Refusal:
    assert done.returncode == status and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    said = refusal(done.stderr, allow_before=True)  # the child's own lines come first
    assert said.code == code, done.stderr
    return said


def test_flags_the_child_refuses_are_exit_2_in_its_own_words(tmp_path: Path) -> None:
    done = _serve("--", "--bogus", cwd=tmp_path)
    said = _refused(done, 2, "usage")
    assert "error: usage: No such option '--bogus'" in done.stderr.splitlines()[0], done.stderr  # the child's own
    assert said.error.startswith(
        "error: usage: the verifier (rimthan-mcp serve, which the bridge starts) exited: No such option '--bogus'"
    ), said
    assert said.next.startswith("run 'rimthan-mcp serve --help'; fix the flags after -- of rimthan-host serve"), said
    assert not (tmp_path / ".rimthan").exists()


def test_a_child_with_no_releases_is_exit_1_naming_what_to_build(tmp_path: Path) -> None:
    said = _refused(_serve(cwd=tmp_path), 1, "release_not_found")
    assert "exited: releases: no releases directory here; build a release" in said.error, said
    assert said.next.endswith("; fix what it names, then start rimthan-host serve again"), said


def test_a_child_refusal_naming_a_long_path_is_said_whole(tmp_path: Path) -> None:
    """The bridge read its child's stderr 1,024 bytes at a time: an ``error:`` line naming a deep path was cut, and
    the refusal ended mid-path without the child's advice. It reads whole lines (bounded) now."""
    deep = "/".join(["d" * 200] * 6)  # 1,205 characters: a deep but ordinary path
    said = _refused(_serve("--", "--releases-dir", deep, cwd=tmp_path), 1, "release_not_found")
    assert f"exited: {deep}: no releases directory here" in said.error, said
    assert said.error.endswith("`make demo` builds ./releases)"), said


def test_a_child_refusal_over_16_kib_is_said_as_its_error_cut_and_its_next_step_as_the_next_step(
    tmp_path: Path,
) -> None:
    """An ``error:`` line past the bound the bridge reads whole was passed over: its ``next:`` line became the
    message (``internal_error: ... exited: next: check ...``) under the bridge's generic next step. Now the error
    is its start, cut with a marker, under the child's own code, and the child's advice is the next step."""
    deep = "/".join(["d" * 200] * 100)  # 20,099 characters: the child's error: line is over 16 KiB
    done = _serve("--", "--releases-dir", deep, cwd=tmp_path)
    said = _refused(done, 1, "io_error")
    assert any(len(line) > 16 * 1024 and line.startswith("error: io_error: ") for line in done.stderr.splitlines())
    assert said.error.startswith(
        f"error: io_error: the verifier (rimthan-mcp serve, which the bridge starts) exited: {deep[:900]}"
    ), said.error[:300]
    assert said.error.endswith(" [... cut: the line is over 16 KiB; it is whole above]"), said.error[-300:]
    assert len(said.error) < 2048, len(said.error)
    assert said.next == "check that the named path exists and that you may read and write it; fix what it names, " \
        "then start rimthan-host serve again", said.next  # fmt: skip


def test_an_unreachable_verifier_url_is_exit_1(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    said = _refused(_serve("--verifier-url", url, cwd=tmp_path), 1, "io_error")
    assert said.error.startswith(f"error: io_error: the verifier at {url} never came up: "), said
    assert "start rimthan-host serve again" in said.next


def test_a_verifier_that_came_up_is_exit_0(world: ServerWorld, tmp_path: Path) -> None:
    params = bridge_params(tmp_path, world, tmp_path / "state")
    done = subprocess.run(
        [params.command, *params.args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0 and "error:" not in done.stderr and done.stdout == "", done.stderr


def test_a_verifier_killed_after_the_last_call_is_exit_1(world: ServerWorld, tmp_path: Path) -> None:
    """The child answered a call, then died; the client closes stdio without another call."""
    state = tmp_path / "state"
    params = bridge_params(tmp_path, world, state)
    process = subprocess.Popen(
        [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        raw = RawStdio(process)
        raw.initialize(ANSWER_SECONDS)
        answer = raw.call(1, "start_run", json.dumps({"workflow": "no-such-workflow", "facts": {}}), ANSWER_SECONDS)
        assert answer is not None and "workflow_not_found" in json.dumps(answer), answer  # the verifier answered
        (child,) = verifier_pids(state)
        os.kill(child, signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)  # closes stdin
    finally:
        process.kill()
    text = stderr.decode("utf-8", "replace")
    assert process.returncode == 1, text
    said = refusal(text, allow_before=True)
    assert said.error.startswith(
        "error: internal_error: the verifier (rimthan-mcp serve, which the bridge starts) was gone when the client "
        "closed stdio: "
    ), said
