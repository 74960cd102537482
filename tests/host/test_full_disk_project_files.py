"""The files the bridge writes into a project survive a full disk and a kill (a real tmpfs, a real SIGKILL).

Found: ``ProjectFiles.write`` truncated the file in place, then wrote it. A
full disk or a kill during setup left an empty or partial file at an asset's
path, which the next setup refused as "the user's own": the user had to move
it by hand. Now a file is written at a temporary name beside it, fsynced and
renamed over it: the asset's path holds the old file or none, the model is
told to have the user free space (or, after a kill, to resume), and the same
run then sets up and completes, its log audited.

Each test drives the real ``rimthan-host serve`` over stdio with the real
verifier as its child; the small disk is a tmpfs mounted at the project's
``.claude`` (root only: it skips otherwise, and fails under ``CI=true``), the
kill is ``strace`` delivering SIGKILL as the bridge writes the asset's bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.delivered import RECORD_PATH, Record, save_record
from rimthan_host.project_files import ProjectFiles
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from rimthan_host.words import failed_words
from rimthan_workflow_registry.release.catalogue_rules import MAX_SEGMENT_BYTES
from support.bridge import audited, audited_only_run, bridge_params, check_replies, refused, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world
from support.small_disk import fill, small_tmpfs

ASSETS = (
    ".claude/commands/research-brief.md",
    ".claude/skills/research-decision/SKILL.md",
    ".claude/agents/evidence-auditor.md",
    ".claude/agents/decision-critic.md",
)
MANIFEST = ".rimthan/workspace-manifest.json"
AGENT = ".claude/agents/evidence-auditor.md"  # the third asset the setup delivers
TEMPORARY = ".rimthan-tmp"  # a file is written at ".<name>" + this beside it, then renamed (docs/host-kit.md)
KILLED_SECONDS = 120  # far past a start_run; reached only if the client never hears that the bridge died


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("full-disk-setup-world"))


def run_bridge(params: StdioServerParameters, project: Path, script: Callable[[StandIn], Awaitable[None]]) -> StandIn:
    """Drive one bridge process with ``script``; every reply the model got is checked."""

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            await script(model)
            return model

    model = anyio.run(go)
    check_replies(model)
    return model


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if not p.is_dir())


def test_setup_on_a_full_disk_leaves_no_partial_asset_and_resumes_once_there_is_room(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    with small_tmpfs(project / ".claude", "64k") as claude:
        for asset in ASSETS:
            (project / asset).parent.mkdir(parents=True, exist_ok=True)  # the user's .claude already has them
        filler = fill(claude)

        async def script(model: StandIn) -> None:
            broken = await model.start()
            (log,) = (project / ".rimthan" / "runs").glob("*.log")  # the run started; its setup failed
            run = log.stem
            assert files_under(claude) == ["fill"]  # no asset, no temporary file: nothing half-written
            refused(broken, "The bridge failed on start_run (No space left on device: .claude/",
                    "the disk holding the project is full or read-only: ask the user to free space on it",
                    f"then call resume_run {run} to go on from the run log")  # fmt: skip
            filler.unlink()  # the user frees space
            resumed = await model.call("resume_run", {"run": run})
            assert not resumed.is_error, resumed.text
            assert (await model.follow(resumed, "desk-research")).data["status"] == "completed"

        model = run_bridge(bridge_params(project, world, state), project, script)
        assert all((project / a).exists() for a in ASSETS) and not any(TEMPORARY in f for f in files_under(claude))
    assert audited_only_run(model.project, state)["ok"] is True


def killed_writing(params: StdioServerParameters, *paths: Path) -> StdioServerParameters:
    """``params`` run under strace, which kills the bridge (SIGKILL) on its first write to one of ``paths``."""
    strace = shutil.which("strace")
    if strace is None:
        message = "strace is needed to kill the bridge at a write"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    watched = [arg for path in paths for arg in ("-P", str(path))]
    kill = ["-f", "-qq", "-o", "/dev/null", "-e", "trace=write", "-e", "inject=write:signal=KILL", *watched]
    return StdioServerParameters(command=strace, args=[*kill, "--", params.command, *params.args])


def test_a_bridge_killed_as_it_writes_an_asset_leaves_the_path_free_and_the_run_resumes(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    target = project / AGENT
    temporary = target.with_name(f".{target.name}{TEMPORARY}")
    started: list[str] = []

    async def killed(model: StandIn) -> None:
        with anyio.fail_after(KILLED_SECONDS), contextlib.suppress(Exception):  # the connection ends as it dies
            await model.start()
        started.extend(p.stem for p in (project / ".rimthan" / "runs").glob("*.log"))

    params = bridge_params(project, world, state)
    with contextlib.suppress(Exception):  # leaving the client of a killed bridge may raise too
        run_bridge(killed_writing(params, target, temporary), project, killed)
    (run,) = started
    assert all((project / a).exists() for a in ASSETS[:2])  # delivered before the kill
    left, killed_at_temporary = target.exists(), temporary.exists()

    async def resumed(model: StandIn) -> None:
        again = await model.call("resume_run", {"run": run})
        assert not again.is_error, again.text
        assert not left, "the kill left a file at the asset's path"
        assert killed_at_temporary  # (the kill came as the bridge wrote the asset's bytes)
        assert (await model.follow(again, "desk-research")).data["status"] == "completed"
        assert not temporary.exists()  # the next write took the temporary file the kill left

    model = run_bridge(params, project, resumed)
    assert AGENT in ProjectFiles(project).read_back(RECORD_PATH, max_bytes=1 << 20).decode("utf-8")
    assert audited(model.project, state, run)["ok"] is True


def test_a_file_replaced_on_a_full_disk_keeps_its_old_bytes_and_a_state_or_record_their_old_text(
    tmp_path: Path,
) -> None:
    """Each writer into the project on a disk with no room: the old file is there whole, no temporary file is
    left, the error names the file; once there is room, the same write succeeds."""
    with small_tmpfs(tmp_path / "project", "64k") as project:
        files, log = ProjectFiles(project), RunLog(project, "run-full")
        files.write("manifest", MANIFEST, "application/json", "{}\n")
        log.save_state("token-1", {"fact": "x"}, logged=None)
        save_record(files, Record({AGENT: "0" * 64}))
        kept = {p: p.read_bytes() for p in (project / MANIFEST, log.state_path, project / RECORD_PATH)}
        filler = fill(project)
        writes: list[tuple[Path, Callable[[], object]]] = [
            (project / MANIFEST, lambda: files.write("manifest", MANIFEST, "application/json", "{}\n" * 3000)),
            (log.state_path, lambda: log.save_state("token-2", {"fact": "y" * 8000}, logged="token-1")),
            (project / RECORD_PATH, lambda: save_record(files, Record({AGENT: "1" * 64}))),
        ]
        for target, write in writes:
            with pytest.raises(OSError) as raised:
                write()
            assert target.read_bytes() == kept[target]
            assert [p.name for p in target.parent.iterdir() if "tmp" in p.name] == []
            assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(target))
            name = target.relative_to(project)
            assert f"(No space left on device: {name}); the disk holding the project is full" in failed_words(
                "step_done", raised.value, project, "run-full"
            )
        filler.unlink()
        for target, write in writes:
            write()
            assert target.read_bytes() != kept[target]


def test_a_file_replaced_keeps_its_permission_bits_and_a_name_at_the_longest_is_written(tmp_path: Path) -> None:
    """The rename puts a new file at the path: it gets the old one's permission bits; a name of
    MAX_SEGMENT_BYTES (what a catalogue may declare) takes no longer temporary name than a file system holds."""
    files = ProjectFiles(tmp_path)
    files.write("agent", AGENT, "text/markdown", "first\n")
    (tmp_path / AGENT).chmod(0o600)
    assert files.write("agent", AGENT, "text/markdown", "second\n").write == "replaced"
    assert stat.S_IMODE((tmp_path / AGENT).stat().st_mode) == 0o600
    longest = "n" * (MAX_SEGMENT_BYTES - 3) + ".md"
    for text in ("first\n", "second\n"):
        assert files.write("long", f"out/{longest}", "text/markdown", text).text == text
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [longest]
