"""``rimthan-mcp`` with a releases or state directory that fills or turns read-only (real tmpfs, bind mounts).

Found: a fleet follower whose releases directory turned read-only died at
its next refresh (the download directory's ``OSError`` escaped the follower
and stopped the server), and a full one was logged as the registry's fault
(``oci_registry_error``). A checkpoint key file that could not be written
was refused naming no file (or a temporary one). A first start on a full
state directory said to make it writable rather than to free space. Already
right, and kept so here: a refresh that cannot save the activation floor
does not activate, and the next one once there is space saves and activates.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.oci import push
from support.refusals import refusal
from support.registry import LocalRegistry
from support.small_disk import fill, read_only_view, set_read_only, small_tmpfs

RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"
WAIT = 90.0  # a safety net against a hung server only


@contextmanager
def serving(log: Path, *args: str | Path) -> Iterator[subprocess.Popen[bytes]]:
    """``rimthan-mcp serve --transport http`` refreshing every second, its stderr in ``log``."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [str(RIMTHAN_MCP), "serve", "--transport", "http", "--port", "0", "--refresh-interval", "1",
             *map(str, args)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            wait_for(log, "listening on", proc)
            yield proc
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], after: int = 0) -> str:
    """The first line of ``log`` past byte ``after`` holding ``text``, while the server keeps running."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = [line for line in log.read_text("utf-8")[after:].splitlines() if text in line]
        if found:
            return found[0]
        assert proc.poll() is None, log.read_text("utf-8")[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {log.read_text('utf-8')[-3000:]}")


def _size(log: Path) -> int:
    return len(log.read_text("utf-8"))


def test_a_follower_whose_releases_directory_turns_read_only_or_fills_keeps_serving_and_pulls_once_it_can(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref = registry.ref("rimthan/follow")
    push(packaged_releases["1.2.0"], ref + ":1.2.0", trust)
    log = tmp_path / "serve.log"
    with small_tmpfs(tmp_path / "disk", "4m") as disk, read_only_view(disk, tmp_path / "releases") as releases:
        set_read_only(releases, False)
        with serving(log, "--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                     "--state-dir", tmp_path / "state", "--log-level", "debug") as proc:  # fmt: skip
            set_read_only(releases, True)
            push(packaged_releases["1.3.0"], ref + ":1.3.0", trust)
            mark = _size(log)
            for _ in range(3):  # three refreshes, the server stays up (it used to die here)
                wait_for(log, '"pull still failing"', proc, mark)
                mark = _size(log)
            failed = [json.loads(line) for line in log.read_text("utf-8").splitlines() if "pull failed; will" in line]
            assert len(failed) == 1, failed  # one warning, not one per refresh (a long outage flooded the log)
            line = failed[0]
            assert line["level"] == "warning" and line["next"].endswith("read-only file system: choose a writable path")
            assert line["error"]["code"] == "io_error", line
            assert line["error"]["path"] == str(releases), line
            assert "Read-only file system" in line["error"]["message"], line
            done = json.loads(wait_for(log, '"refresh done"', proc, mark))  # the refresh says so, not "unchanged" only
            assert done["sync_failed"]["code"] == "io_error", done
            assert "Read-only file system" in done["sync_failed"]["message"] and done["sync_failed"]["since"], done
            set_read_only(releases, False)
            filler = fill(disk)
            mark = _size(log)
            line = json.loads(wait_for(log, '"pull failed; will retry"', proc, mark))
            assert line["error"]["code"] == "io_error", line
            assert "No space left on device" in line["error"]["message"], line
            assert sorted(p.name for p in releases.iterdir()) == ["fill", "research-decision-1.2.0"]
            filler.unlink()
            activated = json.loads(wait_for(log, '"active": "research-decision@1.3.0"', proc, mark))
            assert activated["event"] == "refresh done" and "sync_failed" not in activated, activated
            assert sorted(p.name for p in releases.iterdir()) == [
                "research-decision-1.2.0",
                "research-decision-1.3.0",
            ]


def test_a_refresh_that_cannot_save_the_floor_does_not_activate_and_the_next_one_with_space_does(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    shutil.copytree(packaged_releases["1.2.0"], releases / "research-decision-1.2.0")
    log = tmp_path / "serve.log"
    with small_tmpfs(tmp_path / "state", "1m") as state:
        with serving(log, "--releases-dir", releases, "--trust", trust, "--state-dir", state) as proc:
            filler = fill(state)
            shutil.copytree(packaged_releases["1.3.0"], releases / "research-decision-1.3.0")
            mark = _size(log)
            line = wait_for(log, "cannot record research-decision@1.3.0 in the activation floor", proc, mark)
            assert "No space left on device" in line and '"active": "research-decision@1.2.0"' in line, line
            filler.unlink()
            wait_for(log, '"active": "research-decision@1.3.0"', proc, mark)
        floor = json.loads((state / "activation-floor.json").read_text("utf-8"))
        (entry,) = floor["catalogues"].values()
        assert entry["version"] == "1.3.0", floor


def _healthz(log: Path) -> dict[str, Any]:
    """The replica's ``GET /healthz`` answer (its URL from the ``listening on`` line; 200 expected)."""
    said_on = "rimthan-mcp: listening on "
    (listening,) = [line for line in log.read_text("utf-8").splitlines() if line.startswith(said_on)]
    url = listening.removeprefix(said_on)
    with urllib.request.urlopen(url.replace("/mcp", "/healthz"), timeout=30) as answer:
        assert answer.status == 200
        said: dict[str, Any] = json.loads(answer.read())
        return said


def test_a_follower_restarted_on_a_full_state_directory_serves_the_floor_s_release_and_activates_once_it_can(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A replica serving 1.2.0 whose state directory filled, 1.3.0 pulled but not activated (the floor could not
    record it), was restarted: it refused to start (``io_error``, exit 1) although it held the release the floor
    records, so a rolling restart during a full disk took the replica out. It now serves that release, says once
    why 1.3.0 waits, and activates it at the first refresh with room."""
    ref = registry.ref("rimthan/full-state-restart")
    push(packaged_releases["1.2.0"], ref + ":1.2.0", trust)
    releases = tmp_path / "releases"
    follow = ("--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust)
    with small_tmpfs(tmp_path / "state", "1m") as state:
        with serving(tmp_path / "first.log", *follow, "--state-dir", state) as proc:
            filler = fill(state)
            push(packaged_releases["1.3.0"], ref + ":1.3.0", trust)
            wait_for(tmp_path / "first.log", "cannot record research-decision@1.3.0 in the activation floor", proc)
            _says_held_back(_healthz(tmp_path / "first.log"), state)
        log = tmp_path / "again.log"
        with serving(log, *follow, "--state-dir", state) as proc:
            _says_held_back(_healthz(log), state)
            lines = log.read_text("utf-8").splitlines()
            (waiting,) = [json.loads(line) for line in lines if '"release not activated"' in line]
            assert waiting["level"] == "warning" and waiting["path"] == str(releases / "research-decision-1.3.0")
            assert waiting["error"]["code"] == "io_error", waiting
            assert waiting["error"]["path"] == str(state / "activation-floor.json"), waiting
            assert "No space left on device" in waiting["error"]["message"], waiting
            mark = _size(log)
            filler.unlink()
            wait_for(log, '"active": "research-decision@1.3.0"', proc, mark)
            assert _healthz(log) == {"status": "serving", "active": ["research-decision@1.3.0"], "sync_failed": None}
        floor = json.loads((state / "activation-floor.json").read_text("utf-8"))
        (entry,) = floor["catalogues"].values()
        assert entry["version"] == "1.3.0", floor


def _says_held_back(said: dict[str, Any], state: Path) -> None:
    """/healthz of a replica serving 1.2.0 with 1.3.0 pulled but not recorded in the floor: it said only
    ``serving`` 1.2.0 and ``sync_failed: null``, so beside a replica serving 1.3.0 nothing told why."""
    assert said["status"] == "serving" and said["active"] == ["research-decision@1.2.0"], said
    assert said["sync_failed"] is None, said  # the sync is fine: the release is held, the floor refused it
    (held,) = said["not_activated"]
    assert held["release"] == "research-decision-1.3.0" and held["code"] == "io_error", said
    assert "No space left on device" in held["message"] and "not activated" in held["message"], said


def test_a_first_start_on_a_full_state_directory_refuses_in_one_line_saying_to_free_space(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        state = disk / "state"
        assert _mcp("keys", "rotate", "--state-dir", state).returncode == 0
        fill(disk)
        proc = _mcp("serve", "--release", packaged_releases["1.2.0"], "--trust", trust, "--state-dir", state)
        assert proc.returncode == 1
        said = refusal(proc.stderr)
        assert said.error.startswith(f"error: io_error: {state / 'activation-floor.json'}: cannot record"), said
        assert said.next == f"free disk space on the file system holding {state} and run again"


def test_keys_rotate_on_a_full_or_read_only_state_directory_names_the_key_file_and_keeps_it(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        state = disk / "state"
        created = _mcp("keys", "rotate", "--state-dir", state)
        assert created.returncode == 0, created.stderr
        keys = state / "checkpoint-keys.json"
        before = keys.read_bytes()
        filler = fill(disk)
        full = _mcp("keys", "rotate", "--state-dir", state)
        said = refusal(full.stderr)
        assert said.error == f"error: io_error: {keys}: No space left on device", said
        assert said.next == f"free disk space on the file system holding {keys} and run again"
        assert keys.read_bytes() == before and sorted(p.name for p in state.iterdir()) == [keys.name]
        filler.unlink()
        with read_only_view(state, tmp_path / "view") as view:
            read_only = _mcp("keys", "rotate", "--state-dir", view)
            said = refusal(read_only.stderr)
            assert said.error == f"error: io_error: {view / keys.name}: Read-only file system", said
            assert said.next == f"{view / keys.name} is on a read-only file system: choose a writable path"
        assert keys.read_bytes() == before


def test_serve_on_a_full_state_directory_starts_and_warns_that_the_schema_cache_was_not_saved(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The schema-check cache only saves time: a start it cannot be written for goes on, and says so once."""
    release = packaged_releases["1.2.0"]
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        state = disk / "state"
        first = _mcp("serve", "--release", release, "--trust", trust, "--state-dir", state)
        assert first.returncode == 0, first.stderr
        (state / "schema-checks.json").unlink()
        fill(disk)
        proc = _mcp("serve", "--release", release, "--trust", trust, "--state-dir", state)
        assert proc.returncode == 0, proc.stderr
        warned = [line for line in proc.stderr.splitlines() if "schema-check cache" in line]
        assert warned == [
            f"rimthan-mcp: warning: schema-check cache {state / 'schema-checks.json'}: No space left on device: "
            "not saved, so the next start checks the schemas again"
        ], proc.stderr


def _mcp(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RIMTHAN_MCP), *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )


def test_a_follower_starting_on_a_read_only_releases_directory_with_nothing_held_says_so(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The registry answered and the pull failed on the disk: the refusal said to build a release into the
    directory (release_not_found), which a read-only directory cannot take either."""
    ref = registry.ref("rimthan/read-only-start")
    push(packaged_releases["1.2.0"], ref, trust)
    (tmp_path / "empty").mkdir()
    with read_only_view(tmp_path / "empty", tmp_path / "releases") as releases:
        proc = _mcp("serve", "--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                    "--state-dir", tmp_path / "state")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    said = refusal(proc.stderr, allow_before=True)
    assert said.error.startswith(f"error: io_error: {releases}: nothing could be pulled from {ref} ("), said
    assert "Read-only file system" in said.error, said
    assert said.next.startswith(f"{releases} is on a read-only file system: choose a writable path"), said
