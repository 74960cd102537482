"""SIGTERM while a follower's sync hangs on its registry: the sync stops at once, the process exits 0.

Found: a follower (``serve --transport http --releases-from``) sent SIGTERM while its sync waited on a frozen
registry (its process stopped: SIGSTOP) exited only once the read timeout (30 s) ended the sync; one whose
registry dripped a blob a byte at a time waited for the request's deadline (two minutes), and could for the
sync's (ten): shutdown waited for the refresh thread, past a container's stop timeout. Now SIGTERM stops the
sync under way (its socket cut, its download removed), says so, and the server stops as it promises.

The registry stays frozen (or dripping) for the whole test: the old code could only exit after its read
timeout (or the request's deadline), long after the waits here, which the stop takes far less than.
"""

from __future__ import annotations

import ctypes
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from rimthan_workflow_mcp.follow import start_following
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_mcp.refresh_triggers import refresh_now
from rimthan_workflow_registry.release import load_trust
from rimthan_workflow_registry.release.oci_bounds import REQUEST_DEADLINE, REQUEST_TIMEOUT
from rimthan_workflow_registry.release.oci_stop import VERIFYING
from rimthan_workflow_registry.release.verified import READ_CHUNK
from rimthan_workflow_registry.run import CheckpointKeyring
from support.hostile_registry import BOUNDED_WAIT, HostileRegistry, forward, send_drip
from support.oci import push
from support.processes import wait_for_line
from support.registry import LocalRegistry
from support.releases import KeyPair, build_release, packaged_source

RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"
FROZEN_WAIT = REQUEST_TIMEOUT / 2  # the old code waited out the read timeout on the frozen registry
DRIP_WAIT = BOUNDED_WAIT  # the old code waited for the request's deadline on the drip
STOPPED = "rimthan-mcp: stopped: calls in flight were answered"
assert DRIP_WAIT < REQUEST_DEADLINE


@dataclass
class Front:
    """A loopback front of the real registry: it forwards every request until ``drip`` (a blob download is
    then answered a byte a second) and tells (``asked``) of each request once ``tell`` is set."""

    upstream: LocalRegistry
    front: HostileRegistry | None = None
    tell: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)
    drip: threading.Event = field(default_factory=threading.Event)

    def answer(self, handler: http.server.BaseHTTPRequestHandler, front: HostileRegistry) -> None:
        if self.tell.is_set():
            self.asked.set()
        if self.drip.is_set() and "/blobs/" in handler.path:
            send_drip(handler, front, every=1.0)
            return
        forward(handler, front, self.upstream.host)


@pytest.fixture
def front(hostile: Callable[..., HostileRegistry], registry: LocalRegistry) -> Front:
    made = Front(registry)
    made.front = hostile(made.answer)
    return made


@dataclass
class Following:
    """A follower process serving, its stderr log, and the releases directory as it held it then."""

    process: subprocess.Popen[bytes]
    ref: str
    log: Path
    releases: Path
    held: list[str]


@contextmanager
def _following(
    tmp_path: Path, registry: LocalRegistry, front: Front, release: Path, trust: Path, transport: str = "http"
) -> Iterator[Following]:
    """Push ``release``, start a follower of it through ``front`` (a sync every second), yield it once it serves
    (over stdio, its stdin a pipe the test closes)."""
    push(release, registry.ref("rimthan/stop"), trust)
    assert front.front is not None
    ref, log, releases = front.front.ref("rimthan/stop"), tmp_path / "follower-stderr.log", tmp_path / "releases"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [str(RIMTHAN_MCP), "serve", "--transport", transport, *(["--port", "0"] if transport == "http" else []),
             "--refresh-interval", "1", "--releases-from", ref, "--plain-http", "--releases-dir", str(releases),
             "--trust", str(trust), "--state-dir", str(tmp_path / "state")],
            stdin=subprocess.PIPE if transport == "stdio" else subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        wait_for_line(lambda: log.read_text("utf-8").splitlines(), '"event": "serving"')
        yield Following(process, ref, log, releases, sorted(os.listdir(releases)))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _events(log: Path, event: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in log.read_text("utf-8").splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == event]


def _stopped_by_sigterm(follower: subprocess.Popen[bytes], wait: float) -> int:
    follower.send_signal(signal.SIGTERM)
    return _ended(follower, wait)


def _ended(follower: subprocess.Popen[bytes], wait: float) -> int:
    try:
        return follower.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the follower did not stop within {wait:g} s: it waits for its registry")


def _stopped_the_sync(following: Following, status: int) -> None:
    """Exit 0 with the stopped line; the sync's stop said (the SIGTERM line names it); the releases as before."""
    text = following.log.read_text("utf-8")
    assert status == 0, text
    assert STOPPED in text, text
    assert [e["registry"] for e in _events(following.log, "sync stopped")] == [following.ref], text
    sigterm = _events(following.log, "SIGTERM: draining calls in flight, then stopping")
    assert [e["sync_stopped"] for e in sigterm] == [following.ref], text
    assert sorted(os.listdir(following.releases)) == following.held  # no download left, nothing moved in


@contextmanager
def _frozen(registry: LocalRegistry, front: Front) -> Iterator[None]:
    """The registry's process stopped (SIGSTOP) until the block ends; entered once a request reached it."""
    os.kill(registry.process.pid, signal.SIGSTOP)
    try:
        front.tell.set()
        assert front.asked.wait(BOUNDED_WAIT), "the follower's next sync never asked the registry"
        yield
    finally:
        os.kill(registry.process.pid, signal.SIGCONT)


def test_sigterm_stops_a_sync_waiting_on_a_frozen_registry(
    tmp_path: Path, registry: LocalRegistry, front: Front, packaged_releases: dict[str, Path], trust: Path
) -> None:
    release = packaged_releases["1.2.0"]
    with _following(tmp_path, registry, front, release, trust) as following, _frozen(registry, front):
        status = _stopped_by_sigterm(following.process, FROZEN_WAIT)
    _stopped_the_sync(following, status)


def test_the_end_of_stdin_stops_a_stdio_follower_s_sync_waiting_on_a_frozen_registry(
    tmp_path: Path, registry: LocalRegistry, front: Front, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """Over stdio the end of input stops the server: a sync under way is stopped, not waited for, as over HTTP."""
    release = packaged_releases["1.2.0"]
    with _following(tmp_path, registry, front, release, trust, "stdio") as following, _frozen(registry, front):
        assert following.process.stdin is not None
        following.process.stdin.close()
        status = _ended(following.process, FROZEN_WAIT)
    text = following.log.read_text("utf-8")
    assert status == 0, text
    assert [e["registry"] for e in _events(following.log, "sync stopped")] == [following.ref], text
    assert sorted(os.listdir(following.releases)) == following.held


def test_sigterm_stops_a_sync_downloading_a_dripping_blob_and_removes_the_download(
    tmp_path: Path, registry: LocalRegistry, front: Front, packaged_releases: dict[str, Path], trust: Path
) -> None:
    with _following(tmp_path, registry, front, packaged_releases["1.2.0"], trust) as following:
        front.drip.set()
        front.tell.set()
        push(packaged_releases["1.3.0"], registry.ref("rimthan/stop"), trust)  # the next sync pulls it: a drip
        wait_for_line(lambda: [p.name for p in following.releases.glob(".pull-*/*")], ".", timeout=BOUNDED_WAIT)
        status = _stopped_by_sigterm(following.process, DRIP_WAIT)
    _stopped_the_sync(following, status)


def test_a_stop_that_is_no_signal_stops_a_sync_waiting_on_a_frozen_registry(
    tmp_path: Path, registry: LocalRegistry, front: Front, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The HTTP transport ending another way than by a signal (uvicorn's own shutdown, an error ending its task
    group) cancels the refresh task: that stopped nothing, and the server waited for the sync (here the read
    timeout on a frozen registry). Now the cancelled refresh is the one stop (``stop_syncs``), as a signal's.

    The refresh runs as ``serve_http`` runs it (``refresh_now`` in a task group), on a real follower and provider;
    the task group is then cancelled, as ``serve_http`` does once uvicorn's ``serve`` returns."""
    push(packaged_releases["1.2.0"], registry.ref("rimthan/stop"), trust)
    assert front.front is not None
    releases, state = tmp_path / "releases", tmp_path / "state"
    follower = start_following(front.front.ref("rimthan/stop"), trust, releases, True, state)
    provider = ReleaseProvider.open_directory(
        releases, trust=load_trust(trust), keyring=CheckpointKeyring.generate(), state_dir=state
    )
    provider.before_refresh, provider.stop_syncs = follower.sync, follower.stop
    held, cancel = sorted(os.listdir(releases)), threading.Event()
    refreshed: list[object] = []

    async def serving() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _refreshed(provider, refreshed))
            await anyio.to_thread.run_sync(cancel.wait)
            tg.cancel_scope.cancel()  # what serve_http does once uvicorn's serve returns

    server = threading.Thread(target=anyio.run, args=(serving,), daemon=True)
    os.kill(registry.process.pid, signal.SIGSTOP)
    try:
        front.tell.set()
        server.start()
        assert front.asked.wait(BOUNDED_WAIT), "the refresh's sync never asked the registry"
        cancel.set()
        server.join(FROZEN_WAIT)
        stopped = not server.is_alive()
    finally:
        os.kill(registry.process.pid, signal.SIGCONT)
        server.join(BOUNDED_WAIT)
    assert stopped, f"the task group did not end within {FROZEN_WAIT:g} s: it waits for the sync"
    assert refreshed == [], refreshed  # cancelled: no refresh result
    assert follower.status().under_way is None
    assert sorted(os.listdir(releases)) == held


async def _refreshed(provider: ReleaseProvider, refreshed: list[object]) -> None:
    refreshed.append(await refresh_now(provider, "interval"))


BULK_FILES = 48  # a release of ~96 MB: files each read in several chunks, its descriptor open all the while
BULK_BYTES = 2 * READ_CHUNK  # (a file under READ_CHUNK is read at once, open for an instant)
STOP_BEFORE = BULK_FILES // 2  # the SIGTERM only while one of these is read: the rest are batches still to check
_PART = re.compile(r"/\.pull-[^/]+/(?:.+/)?bulk/part-(\d+)\.md")  # a file of the download directory
_LIBC = ctypes.CDLL(None, use_errno=True)


def _large_release(tmp_path: Path, keypair: KeyPair) -> Path:
    """research-decision 1.3.0 with ``BULK_FILES`` assets of ``BULK_BYTES`` each, signed by ``keypair``."""
    source = tmp_path / "large-source"
    shutil.copytree(packaged_source("1.3.0"), source)
    (bulk := source / "assets" / "bulk").mkdir()
    for index in range(BULK_FILES):
        (bulk / f"part-{index:03d}.md").write_bytes(b"# part\n" + os.urandom(BULK_BYTES // 2).hex().encode())
    return build_release(source, tmp_path / "large", [keypair])


def _verifying(pid: int, releases: Path) -> int | None:
    """The index of a bulk file ``pid`` holds open read-only in a download directory, or None: the verification
    reads it (the download opens its files to write), one file per batch (each over ``_HASH_BATCH_BYTES``)."""
    under = str(releases.resolve())
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text("ascii").split("flags:", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            continue  # closed meanwhile
        part = _PART.fullmatch(target.removeprefix(under)) if target.startswith(under + "/") else None
        if part is not None and int(flags, 8) & os.O_ACCMODE == os.O_RDONLY:
            return int(part.group(1))
    return None


def _all_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state ``T``): its descriptors can no longer change."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text("ascii").rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        if state != "T":
            return False
    return True


@contextmanager
def _polling(what: str) -> Iterator[Callable[[], None]]:
    """A poll's pause (1 ms) that fails the test once ``BOUNDED_WAIT`` has passed, saying ``what`` never came."""
    deadline = threading.Event()
    timer = threading.Timer(BOUNDED_WAIT, deadline.set)

    def pause() -> None:
        if deadline.wait(0.001):
            pytest.fail(f"{what} within {BOUNDED_WAIT:g} s")

    timer.start()
    try:
        yield pause
    finally:
        timer.cancel()


def _sigterm_while_verifying(follower: subprocess.Popen[bytes], releases: Path) -> int:
    """SIGTERM the follower at a moment made certain: frozen (SIGSTOP, every thread stopped) while it holds one of
    the first ``STOP_BEFORE`` bulk files of its download open to read, so batches remain to check after it. The
    signal goes to its main thread (``tgkill``), where the handler runs: a process's signal sent while it is
    stopped may be taken by any thread, and the main one would see it only at its next loop tick (0.1 s). Then
    SIGCONT: the handler runs as the main thread resumes, while the verification still has at least
    ``BULK_FILES - STOP_BEFORE`` files (~48 MiB) to read, each a batch that first checks the stop."""
    with _polling("the follower was never seen verifying the download") as pause:
        while follower.poll() is None:
            index = _verifying(follower.pid, releases)
            if index is not None and index < STOP_BEFORE and _signalled_frozen(follower.pid, releases):
                return _ended(follower, BOUNDED_WAIT)
            pause()
    pytest.fail(f"the follower exited ({follower.returncode}) before it was seen verifying the download")


def _signalled_frozen(pid: int, releases: Path) -> bool:
    """Freeze ``pid``; if it still reads one of the first ``STOP_BEFORE`` bulk files, SIGTERM it (True); resume it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        with _polling("the follower did not stop on SIGSTOP") as pause:
            while not _all_stopped(pid):
                pause()
        index = _verifying(pid, releases)
        if index is None or index >= STOP_BEFORE:
            return False  # it moved on before it stopped: poll again
        assert _LIBC.tgkill(pid, pid, signal.SIGTERM) == 0, os.strerror(ctypes.get_errno())
        return True
    finally:
        os.kill(pid, signal.SIGCONT)


def test_sigterm_while_a_large_release_is_verified_moves_nothing_in_and_activates_nothing(
    tmp_path: Path,
    registry: LocalRegistry,
    front: Front,
    packaged_releases: dict[str, Path],
    trust: Path,
    keypair: KeyPair,
) -> None:
    """SIGTERM while the follower verifies the download of a large release: the verification is abandoned between
    two batches of files (``oci_stop``), the download removed, nothing moved into place, nothing activated (the
    activation floor still 1.2.0), and the process exits 0.

    The moment is no guess against the clock: the follower is frozen (SIGSTOP) once seen holding an early file of
    the download open to read, signalled only if it still does, then resumed (:func:`_sigterm_while_verifying`),
    so the stop lands inside one batch with more to come. The old code ended the same way, only later (the
    verification read every file, then the pull saw the stop), so what tells them apart is the ``"sync stopped"``
    line: it says the verification was abandoned (``"abandoned"``), which only a stop seen between two batches
    of files raises."""
    large = _large_release(tmp_path, keypair)
    with _following(tmp_path, registry, front, packaged_releases["1.2.0"], trust) as following:
        push(large, registry.ref("rimthan/stop"), trust)  # the next sync pulls it
        status = _sigterm_while_verifying(following.process, following.releases)
    _stopped_the_sync(following, status)
    stops = _events(following.log, "sync stopped")
    assert [stop.get("abandoned") for stop in stops] == [VERIFYING], stops  # seen mid-verification, not after
    floor = (tmp_path / "state" / "activation-floor.json").read_text("utf-8")
    assert "1.2.0" in floor and "1.3.0" not in floor, floor
    assert not [e for e in _events(following.log, "pulled") if ":1.3.0@" in str(e["reference"])]
