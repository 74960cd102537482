"""The bridge resumes only from run files it could have written: none another user owns or others can write.

Its delivery record likewise: the paths it names are where the bridge writes the assets it kept.

A run's state file keeps what the verifier cannot check for the bridge (the
step result shown again on a resume without asking it, the files the run
validated). One that another local user wrote, or may write, is refused by
a real ``rimthan-host serve`` with the file and the reason named, nothing
sent; once it is the bridge user's again, the run resumes and completes.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from support.bridge import audited, bridge_params, check_replies, refused, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld

NOBODY = 65534


def test_run_files_another_user_wrote_or_can_write_are_refused(mcp_world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, mcp_world, state)

    async def first() -> str:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            return str((await model.follow(await model.start(), "experiment", until_question=True)).data["run"])

    run = anyio.run(first)
    runs = project / ".rimthan" / "runs"
    state_file, log, record = runs / f"{run}.json", runs / f"{run}.log", project / ".rimthan" / "delivered.json"
    writable = "A file of the bridge's that other users can write"
    owned = "A file of the bridge's that another user owns"
    tampered = [(state_file, "0666", f"{writable} (mode 0666)"), (log, "0646", f"{writable} (mode 0646)")]
    tampered.append((record, "0666", f"{writable} (mode 0666)"))  # (its paths are where the bridge writes assets)
    if os.geteuid() == 0:
        tampered.append((state_file, "nobody", f"{owned} (uid {NOBODY})"))

    async def second() -> None:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            for path, change, said in tampered:
                kept = path.read_bytes()
                os.chown(path, NOBODY, -1) if change == "nobody" else path.chmod(int(change, 8))
                reply = await model.call("resume_run", {"run": run})
                then = f"resume_run {run}" if path != record else "resume_run"
                refused(reply, said, str(path.relative_to(project)), then)
                assert path.read_bytes() == kept
                os.chown(path, os.geteuid(), -1) if change == "nobody" else path.chmod(0o644)
            resumed = await model.call("resume_run", {"run": run})
            assert f"Resumed run {run}" in resumed.text, resumed.text
            assert (await model.follow(resumed, "experiment")).data["status"] == "completed"
            check_replies(model)

    anyio.run(second)
    assert audited(project, state, run)["steps"][-1] == "experiment"
