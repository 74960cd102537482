"""A release that fails a load's path checks several times is refused with every failure said, by the server too.

``RegistryError.also`` (one failure per file, the first raised) was said only by the command lines; the
server's ``to_dict`` dropped it, so a release listing three unsafe or hidden paths was logged and skipped as
the first alone, and the operator fixed one, restarted, and found the next. Real releases built by the real
packager, the files written in and re-signed with the real key, loaded by the installed ``rimthan-mcp``:
``check`` (each failure its two lines), and ``serve`` over a releases directory (a ``skipped`` line for each,
and each in the ``release not activated`` log line's ``details.also``; the start refusal when none verifies).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rimthan_workflow_registry.release import MANIFEST_NAME
from support.processes import http_server_process
from support.refusals import refusals
from support.releases import resign_release
from support.servers import RIMTHAN_MCP, ServerWorld, server_env

HIDDEN = "hidden files, hidden directories and __pycache__ are never part of a release"
LISTED = [  # in the order said: the unsafe path first, then the hidden ones in path order
    ("assets/back\\slash.md", "lists unsafe path 'assets/back\\\\slash.md': backslash in path"),
    (".DS_Store", f"lists path '.DS_Store': {HIDDEN}"),
    ("assets/.notes.md", f"lists path 'assets/.notes.md': {HIDDEN}"),
]
WAIT = 120.0


def _bad(world: ServerWorld, releases: Path, version: str) -> Path:
    release = world.publish(version, releases)

    def write(catalogue: Path) -> None:
        for name, _ in LISTED:
            (catalogue / name).write_bytes(b"signed in by other means\n")

    resign_release(release, [world.key], edit=write)
    return release


def _serve(world: ServerWorld, releases: Path, state: Path) -> list[str]:
    return [
        RIMTHAN_MCP,
        "serve",
        "--releases-dir",
        str(releases),
        "--trust",
        str(world.trust),
        "--state-dir",
        str(state),
    ]


def test_check_says_each_failure(mcp_world: ServerWorld, tmp_path: Path) -> None:
    release = _bad(mcp_world, tmp_path / "releases", "1.3.0")
    done = subprocess.run(
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)],
        capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 1
    assert [r.error for r in refusals(done.stderr)] == [
        f"error: path_unsafe: {release / MANIFEST_NAME}: {said}" for _, said in LISTED
    ], done.stderr


def test_serve_says_each_failure_of_a_skipped_release(mcp_world: ServerWorld, tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    mcp_world.publish("1.2.0", releases)
    bad = _bad(mcp_world, releases, "1.3.0")

    with http_server_process([*_serve(mcp_world, releases, tmp_path / "state"), "--port", "0",
                              "--transport", "http"], env=server_env()) as server:  # fmt: skip
        said = "".join(server.lines)
    skipped = [line for line in said.splitlines() if line.startswith(f"rimthan-mcp: skipped {bad}: ")]
    assert skipped == [f"rimthan-mcp: skipped {bad}: path_unsafe: {MANIFEST_NAME}: {s}" for _, s in LISTED], said
    (warned,) = [
        w
        for w in (json.loads(line) for line in said.splitlines() if line.startswith("{"))
        if w["event"] == "release not activated"
    ]
    error = warned["error"]
    assert (error["code"], error["message"], error["details"]["listed"]) == ("path_unsafe", LISTED[0][1], LISTED[0][0])
    assert [(e["code"], e["path"], e["message"], e["details"]) for e in error["details"]["also"]] == [
        ("path_unsafe", str(bad / MANIFEST_NAME), message, {"listed": name}) for name, message in LISTED[1:]
    ]


def test_serve_refusing_to_start_says_each_failure(mcp_world: ServerWorld, tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    _bad(mcp_world, releases, "1.2.0")
    done = subprocess.run(
        _serve(mcp_world, releases, tmp_path / "state"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    for _, message in LISTED:
        assert f"research-decision-1.2.0: path_unsafe: {MANIFEST_NAME}: {message}" in line, line
