"""A project that is a git repository: the bridge's own folder, ``.rimthan``, stays out of git.

The real ``rimthan-host serve`` (its real verifier as its child) in a real
``git`` repository. ``.rimthan`` holds run logs with checkpoint tokens, the
confirmed state, lock files and the bridge's kept copies: before, all of it
showed as untracked, so a model's ``git add -A`` committed lock files and run
tokens, and ``git stash -u`` took the run log away (the run was lost). The
bridge now writes ``.rimthan/.gitignore`` (``*``) as it writes there, never
over a file the user put at that name.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from rimthan_host.own_folder import IGNORE_NAME, IGNORE_TEXT, TMP_SUFFIX
from support.bridge import audited_only_run, bridge_params, check_replies, example_text, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

_IDENTITY = ("-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("git-world"))


def _git(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *_IDENTITY, *args], cwd=project, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def _repository(project: Path) -> None:
    """A git repository with one commit (``git stash`` needs one)."""
    project.mkdir()
    _git(project, "init", "-q")
    (project / "README.md").write_text("A project.\n", "utf-8")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "first")


def test_run_files_stay_out_of_git_and_a_stash_keeps_the_run(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _repository(project)

    async def first() -> str:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "", until_question=True)
            check_replies(model)
            return str(at_question.data["run"])

    run = anyio.run(first)
    assert (project / ".rimthan" / "runs" / f"{run}.log").is_file()
    untracked = _git(project, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert untracked and not [line for line in untracked if ".rimthan" in line], untracked  # (.claude/...: theirs)
    _git(project, "add", "-A")
    assert not [name for name in _git(project, "diff", "--cached", "--name-only").splitlines() if ".rimthan" in name]
    _git(project, "reset", "-q")
    _git(project, "stash", "-u")
    assert (project / ".rimthan" / "runs" / f"{run}.log").is_file()  # before: stashed away with the rest

    async def second() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run", {"run": run})
            assert not resumed.is_error and resumed.data["step"]["id"] == "select-route", resumed.text
            assert (project / ".claude" / "skills" / "research-decision" / "SKILL.md").is_file()  # (put back)
            done = await model.follow(resumed, "desk-research")
            assert done.data["status"] == "completed", done.text
            check_replies(model)

    anyio.run(second)
    assert audited_only_run(project, state)["ok"] is True
    assert not [line for line in _git(project, "status", "--porcelain").splitlines() if ".rimthan" in line]


def test_an_older_bridges_folder_gets_one_and_the_users_own_is_kept(world: ServerWorld, tmp_path: Path) -> None:
    """A ``.rimthan`` an older bridge made (no ``.gitignore``) gets one as the bridge next writes there; a user who
    keeps some of ``.rimthan`` in git (its run logs, say) writes their own rules, never replaced."""
    project, state = tmp_path / "project", tmp_path / "state"
    _repository(project)
    (project / ".rimthan" / "runs").mkdir(parents=True)
    ignore = project / ".rimthan" / ".gitignore"

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start()
            assert not started.is_error, started.text
            assert ignore.read_bytes() == IGNORE_TEXT
            assert not [line for line in _git(project, "status", "--porcelain").splitlines() if ".rimthan" in line]
            ignore.write_text("*.lock\n", "utf-8")
            facts = json.loads(example_text("1.2.0", "confirmed-state.json"))
            again = await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
            assert not again.is_error and again.data["run"] != started.data["run"], again.text

    anyio.run(go)
    assert ignore.read_text("utf-8") == "*.lock\n"
    untracked = _git(project, "status", "--porcelain", "--untracked-files=all")
    assert ".rimthan/runs/" in untracked and ".rimthan/bridge.lock" not in untracked, untracked


@contextlib.contextmanager
def _no_new_names(folder: Path) -> Iterator[None]:
    """``folder`` made immutable (``chattr +i``, root's): no name can be added to it, while the files and the folders
    in it stay writable; undone after. Skipped where the file system or the user cannot."""
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False, timeout=30)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not available here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True, timeout=30)


def _log_lines(project: Path) -> int:
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    return len(log.read_text("utf-8").splitlines())


def test_a_gitignore_that_cannot_be_written_never_stops_a_move(world: ServerWorld, tmp_path: Path) -> None:
    """The run's log matters more than the ignore file: with no name addable to ``.rimthan`` (its ``.gitignore``
    gone), the moves are still recorded in ``.rimthan/runs``; the ignore file is written once it can be. Before,
    writing it failed every walk into ``.rimthan``, so no checkpoint could be appended. The first reply after it
    failed says so, once (before, nothing did: the project's ``git add -A`` committed run tokens unsaid)."""
    project, state = tmp_path / "project", tmp_path / "state"
    _repository(project)
    ignore = project / ".rimthan" / IGNORE_NAME

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start()
            assert not started.is_error, started.text
            ignore.unlink()
            logged = _log_lines(project)
            with _no_new_names(project / ".rimthan"):
                seen = len(model.received)
                at_question = await model.follow(started, "", until_question=True)
                assert not at_question.is_error, at_question.text
                assert _log_lines(project) > logged
                assert not ignore.exists()
            replies = model.received[seen:]
            noted = [r for r in replies if f"could not write {ignore} (" in r.text]
            assert len(replies) > 1 and len(noted) == 1, [r.text for r in replies]
            assert noted[0].text.startswith("Note: ") and "add .rimthan/ to the project's .gitignore" in noted[0].text
            assert noted[0].data["gitignore_unwritten"] is True and not noted[0].is_error, noted[0].text
            answered = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
            assert not answered.is_error, answered.text
            assert ignore.read_bytes() == IGNORE_TEXT
            check_replies(model)

    anyio.run(go)
    assert audited_only_run(project, state)["ok"] is True


def test_what_a_kill_left_while_writing_the_gitignore_is_removed(world: ServerWorld, tmp_path: Path) -> None:
    """A bridge killed while writing ``.rimthan/.gitignore`` leaves its name of its own there
    (``.gitignore.<pid>.<16 hex>.rimthan-tmp``); the next bridge that writes the ignore file removes it (a live
    process's is kept). Before, it stayed, untracked in the project's git."""
    project, state = tmp_path / "project", tmp_path / "state"
    _repository(project)
    own = project / ".rimthan"
    own.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    left = own / f"{IGNORE_NAME}.{gone.stdout.strip()}.{'0' * 16}{TMP_SUFFIX}"
    left = left.with_name("." + left.name)
    live = left.with_name(f".{IGNORE_NAME}.{os.getpid()}.{'1' * 16}{TMP_SUFFIX}")
    left.write_bytes(IGNORE_TEXT[:10])
    live.write_bytes(b"")

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            started = await stand_in(client, project).start()
            assert not started.is_error, started.text

    anyio.run(go)
    assert (own / IGNORE_NAME).read_bytes() == IGNORE_TEXT
    assert not left.exists() and live.exists()
