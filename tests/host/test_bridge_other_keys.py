"""A bridge whose verifier holds other checkpoint keys than a run was made with refuses to resume it, and says why.

The verifier the bridge starts keeps its checkpoint keys in its state directory (``--state-dir``, else
``RIMTHAN_STATE_DIR``, else under ``HOME``). A bridge started again with another one (a host passing another
``HOME``, an ``.mcp.json`` without the ``env`` the run was made with) has a verifier that refuses every token of
the run. Before, ``resume_run`` said "Resumed run ... from its log." and showed the step from the saved state,
and the first move then failed ("The verifier refused: checkpoint_key_unknown ... fix what it names and call
step_done again"), which no fix the model could make cures. Now the resume asks the verifier for the run's last
checkpoint first and is refused in plain words: what happened, and to start the bridge with the state directory
the run was made with. Real bridge and verifier processes, a real SDK client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from support.bridge import bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

NOT_RESUMED = "was not resumed (checkpoint_key_unknown): the verifier this bridge started refuses the run's last"
NEXT = "next: tell the user to start the bridge again with the state directory run {run} was made with"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("other-keys-world"))


def _params(project: Path, world: ServerWorld, where: Path, how: str) -> StdioServerParameters:
    """The bridge on ``project`` whose verifier's state directory is ``where`` (``--state-dir``) or under it
    (``HOME``: serve's default, ``~/.local/state/rimthan``)."""
    params = bridge_params(project, world, where)
    if how == "--state-dir":
        return params
    args = list(params.args)
    at = args.index("--state-dir")
    del args[at : at + 2]
    return StdioServerParameters(command=params.command, args=args, env={"HOME": str(where)})


async def _moves(params: StdioServerParameters, project: Path, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async with CheckedClient(params, mode="legacy") as client:
        model = stand_in(client, project)
        replies = [await model.call(name, arguments) for name, arguments in calls]
        check_replies(model)
        return replies


@pytest.mark.parametrize("how", ["--state-dir", "HOME"])
def test_a_bridge_with_other_checkpoint_keys_does_not_claim_a_resume(
    world: ServerWorld, tmp_path: Path, how: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    made, other = _params(project, world, tmp_path / "made", how), _params(project, world, tmp_path / "other", how)

    async def go() -> tuple[str, list[Any], list[Any]]:
        async with CheckedClient(made, mode="legacy") as client:
            started = await stand_in(client, project).start()
            assert started.data["step"]["id"] == "interview", started.text
        run = str(started.data["run"])
        # before: "Resumed run ... from its log.", then step_done "The verifier refused: checkpoint_key_unknown"
        refused = await _moves(other, project, ("resume_run", {}), ("step_done", {"step": "interview"}))
        picked = await _moves(other, project, ("show_step", {}))  # (the pick-up on a new process's first move)
        again = await _moves(made, project, ("resume_run", {}), ("step_done", {"step": "interview"}))
        return run, [*refused, *picked], again

    run, refusals, again = anyio.run(go)
    assert len(list(tmp_path.rglob("checkpoint-keys.json"))) == 2  # (one state directory each, where ``how`` says)
    for reply in refusals:
        assert reply.is_error and f"Run {run} {NOT_RESUMED}" in reply.text, reply.text
        assert NEXT.format(run=run) in reply.text and "Resumed" not in reply.text, reply.text
        assert reply.data == {"run": run, "status": "resume_refused", "code": "checkpoint_key_unknown"}, reply.data
    # nothing was recorded: with the keys the run was made with it goes on from where it was
    assert f"Resumed run {run} from its log." in again[0].text and not again[0].is_error, again[0].text
    assert not again[1].is_error and again[1].data["step"]["id"] != "interview", again[1].text


def test_a_gated_step_asked_of_a_verifier_with_other_keys_is_refused_the_same_way(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A gated step is not shown from a saved result: the resume asks the verifier for it. Before, its refusal was
    the verifier's own ("The verifier refused: checkpoint_key_unknown ... Nothing changed; fix what it names and
    call resume_run again.", no word of the state directory); now it reads as the ungated step's."""
    project = tmp_path / "project"
    project.mkdir()
    made, other = (
        _params(project, world, tmp_path / "made", "--state-dir"),
        _params(project, world, tmp_path / "other", "--state-dir"),
    )

    async def go() -> tuple[str, Any]:
        async with CheckedClient(made, mode="legacy") as client:
            model = stand_in(client, project)
            await model.follow(await model.start(), "", until_question=True)
            step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
            assert step.data["step"]["id"] == "desk-research" and step.data["step"].get("gated"), step.text
        (refused,) = await _moves(other, project, ("resume_run", {}))
        return str(step.data["run"]), refused

    run, refused = anyio.run(go)
    assert refused.is_error and f"Run {run} {NOT_RESUMED}" in refused.text, refused.text
    assert refused.data == {"run": run, "status": "resume_refused", "code": "checkpoint_key_unknown"}, refused.data
