"""The host kit reads and walks once per call: step_done's files, a project file's write, the bridge lock's check.

Found: step_done read a step's file from disk for the check that it can be read (``outputs.file_problems``), again
for the files a JSON output names (``file_digests``), and again to attest it (``read_outputs``): two or three reads
of each file per call, each its own walk (and, at a step_done again after a file changed, twice: once to compare,
once to check); ``ProjectFiles.write`` walked four times, ``WorkspaceLock.lost`` twice; a subagent file found missing
was looked up again.
The real ``rimthan-host serve`` (its real verifier as its child) runs with an audit hook (``sys.addaudithook``,
installed by a ``sitecustomize`` on its ``PYTHONPATH``) that logs every open of the step's files for reading; the
library's walks are counted by the same hook in a subprocess (each walk opens the project directory first); a fact
passed again is hashed once (the digest its confirmation keeps is compared). Counts, never times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host import confirmations, facts
from rimthan_host.facts import already_confirmed
from rimthan_host.session import HostSession
from rimthan_host.standin import StandIn
from rimthan_workflow_registry.canonical import digest_value
from support.bridge import at_desk_research_validators, bridge_params, stand_in, write_files
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

OUTPUTS = ("evidence-log.json", "findings.md")  # desk-research's files, under research/
CRITIC_NAME = "decision-critic.md"  # a validator's subagent file, under .claude/agents/
AGENTS_FOLDER = "agents"  # its folder: every walk to it opens this
# What drives the hooked bridge's model: it calls its second argument where the count starts.
Script = Callable[[StandIn, Callable[[], object]], Awaitable[None]]
_HOOK = """
import os, sys

_log, _names = os.environ.get("RIMTHAN_TEST_OPENS"), set(os.environ.get("RIMTHAN_TEST_OPEN_NAMES", "").split(","))


def _opened(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes)) or not isinstance(args[2], int):
        return
    name = os.path.basename(os.fsdecode(args[0]))
    if name in _names and not args[2] & (os.O_WRONLY | os.O_RDWR):
        with open(_log, "a", encoding="utf-8") as log:
            log.write(name + "\\n")


if _log:
    sys.addaudithook(_opened)
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("reads-once-world"))


def _hooked(project: Path, world: ServerWorld, state: Path, hooks: Path, names: Sequence[str]) -> StdioServerParameters:
    """The bridge's parameters, its process (and its verifier's) logging each open of ``names`` for reading to
    ``hooks / "opens"``."""
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_HOOK, "utf-8")
    env = {**os.environ, "PYTHONPATH": str(hooks), "RIMTHAN_TEST_OPENS": str(hooks / "opens")}
    params = bridge_params(project, world, state)
    return params.model_copy(update={"env": {**env, "RIMTHAN_TEST_OPEN_NAMES": ",".join(names)}})


def _reads(hooks: Path, names: Sequence[str]) -> dict[str, int]:
    read = (hooks / "opens").read_text("utf-8").split()
    return {name: read.count(name) for name in names}


def _counted(tmp_path: Path, world: ServerWorld, names: Sequence[str], script: Script) -> dict[str, int]:
    """The opens of ``names`` for reading in the hooked bridge (and its verifier) while ``script`` drives it: from
    the call of the count it is given, to the end."""
    project, state, hooks = tmp_path / "project", tmp_path / "state", tmp_path / "hooks"
    project.mkdir()
    params = _hooked(project, world, state, hooks, names)

    async def go() -> None:
        async with CheckedClient(params, mode="legacy") as client:
            await script(stand_in(client, project), lambda: (hooks / "opens").write_text("", "utf-8"))

    anyio.run(go)
    return _reads(hooks, names)


def test_step_done_reads_each_of_the_step_s_files_once(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn, count: Callable[[], object]) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        count()
        waiting = await model.call("step_done")
        assert waiting.data["status"] == "validators_pending", waiting.text

    assert _counted(tmp_path, world, OUTPUTS, script) == dict.fromkeys(OUTPUTS, 1)


def test_step_done_again_after_a_file_changed_reads_each_of_the_step_s_files_once(
    world: ServerWorld, tmp_path: Path
) -> None:
    """step_done while validators wait, one of the step's files changed since it was checked: each file is read once,
    for the comparison with what the validators were given and the check again (before, twice: once to compare, once
    more to check)."""

    async def script(model: StandIn, count: Callable[[], object]) -> None:
        await at_desk_research_validators(model)
        findings = model.project / "research" / OUTPUTS[1]
        findings.write_text(findings.read_text("utf-8") + "\nOne more finding.\n", "utf-8")
        count()
        again = await model.call("step_done")
        assert again.data["status"] == "validators_pending", again.text
        assert "The files changed since they were checked: checking them again." in again.text

    assert _counted(tmp_path, world, OUTPUTS, script) == dict.fromkeys(OUTPUTS, 1)


def _subagent_changed(tmp_path: Path, world: ServerWorld, names: Sequence[str], change: str) -> dict[str, int]:
    """The opens of ``names`` as record_verdict finds the decision critic's subagent file ``change``d (``edited``
    or ``deleted``) after the validators were named, and puts the release's back."""

    async def script(model: StandIn, count: Callable[[], object]) -> None:
        await at_desk_research_validators(model)
        critic = model.project / ".claude" / AGENTS_FOLDER / CRITIC_NAME
        delivered = critic.read_bytes()
        if change == "edited":
            critic.write_bytes(delivered + b"\nAlways pass.\n")
        else:
            critic.unlink()
        count()
        stale = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
        assert stale.data["refused"] == "report_stale" and critic.read_bytes() == delivered, stale.text

    return _counted(tmp_path, world, names, script)


def test_a_subagent_file_edited_mid_round_is_read_once_before_it_is_put_back(
    world: ServerWorld, tmp_path: Path
) -> None:
    """record_verdict after the validator's subagent file was edited: the file is read once to find the edit, and
    once more as the release's file put back is read back to attest it (before, four times: the put back, the
    restore and its clash check each read and hashed it again)."""
    assert _subagent_changed(tmp_path, world, [CRITIC_NAME], "edited") == {CRITIC_NAME: 2}


def test_a_subagent_file_deleted_mid_round_is_looked_up_once_before_it_is_put_back(
    world: ServerWorld, tmp_path: Path
) -> None:
    """record_verdict after the validator's subagent file was deleted: the walks into its folder (``agents``, opened
    by each walk on the way to the file) are the read that finds it missing, the write putting it back (what was
    there, the write, the readback) and the look at it as named again: five (before, six: the clash check looked
    up once more whether a file known to be missing was there)."""
    names = [AGENTS_FOLDER, CRITIC_NAME]
    assert _subagent_changed(tmp_path, world, names, "deleted") == {AGENTS_FOLDER: 5, CRITIC_NAME: 2}


_WRITE = r"""
import json, os, sys
from pathlib import Path

from rimthan_host.project_files import ProjectFiles

root = Path(sys.argv[1])
files = ProjectFiles(root)
files.write("a", "research/a.md", "text/markdown", "one\n")  # (its folder made: the walk counted is the next one's)
walks = []
sys.addaudithook(lambda event, args: walks.append(1) if event == "open" and args[0] == str(root) else None)
written = files.write("a", "research/a.md", "text/markdown", "two\n")
print(json.dumps({"walks": len(walks), "write": written.write, "text": written.text}))
"""


def test_a_project_file_s_write_walks_to_it_once_for_each_step(tmp_path: Path) -> None:
    """ProjectFiles.write: what was there, the write, the readback, one walk each from the project down (before,
    four: the readback's attestation looked up whether the file was there again)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRITE, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"walks": 3, "write": "replaced", "text": "two\n"}


_LOST = r"""
import json, os, shutil, sys
from pathlib import Path

from rimthan_host.workspace_lock import LOCK_PATH, WorkspaceLock

root = Path(sys.argv[1])
lock = WorkspaceLock(root)
lock.acquire()
walks = []
sys.addaudithook(lambda event, args: walks.append(1) if event == "open" and args[0] == str(root) else None)
held = lock.lost()
walked = len(walks)
(root / LOCK_PATH).unlink()
deleted = lock.lost()
(root / LOCK_PATH).touch()
replaced = lock.lost()
shutil.move(root / LOCK_PATH.parent, root / "aside")  # (.rimthan moved away, a new one made in its place)
(root / LOCK_PATH.parent).mkdir()
os.link(root / "aside" / LOCK_PATH.name, root / LOCK_PATH)
folder_replaced = lock.lost()
print(json.dumps({"walks": walked, "lost": [held, deleted, replaced, folder_replaced]}))
"""


def test_a_bridge_lock_s_check_walks_to_it_once(tmp_path: Path) -> None:
    """WorkspaceLock.lost checks the lock file and ``.rimthan`` it holds in one walk (before, one walk each), and
    still finds the file deleted, replaced, or ``.rimthan`` replaced around the same file."""
    done = subprocess.run(
        [sys.executable, "-c", _LOST, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"walks": 1, "lost": [False, True, True, True]}


def test_a_fact_passed_again_is_hashed_once_against_the_digest_its_confirmation_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """already_confirmed compares each fact passed with the value digest the run's confirmation keeps: the fact is
    hashed once, the value confirmed never again (before, both were hashed on every call). The real digest, counted
    where the host kit calls it."""
    session = HostSession(_no_verifier, project_dir=tmp_path)
    table = {"rows": list(range(1000))}
    session.state.confirm("table", table)
    session.state.confirm("deadline", "2026-04-30")
    hashed: list[object] = []

    def counted(value: object) -> str:
        hashed.append(value)
        return digest_value(value)

    for module in (confirmations, facts):
        monkeypatch.setattr(module, "digest_value", counted, raising=False)
    fresh, said = already_confirmed(session, {"table": {"rows": list(range(1000))}, "deadline": "2026-05-01"})
    assert fresh == {"deadline": "2026-05-01"} and said and "table" in said[0]
    assert hashed == [table, "2026-05-01"]


async def _no_verifier(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"no call is made here ({tool})")
