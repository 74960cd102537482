"""A careless model: a step_done re-sent after the run moved on, facts far past their limits.

``step_done`` on an ungated step (interview, confirm-contract: the owner's)
advances the run; a model that re-sends its last call (a retry, a parallel
duplicate) used to finish the next step too, without the owner. With the step
it names (``step``, required where the step has no files), the bridge refuses one for a step already done. A real
``rimthan-host serve`` and its real verifier child; the log is audited after.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import audit, bridge_params, drive, example_text, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("repeated-world"))


def test_a_step_done_re_sent_after_the_run_moved_on_is_refused(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> str:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start()
            assert "call step_done with step interview" in started.text, started.text
            run = str(started.data["run"])
            done = await model.call("step_done", {"step": "interview"})
            assert done.data["step"]["id"] == "confirm-contract", done.text
            logged = RunLog(project, run).tokens()
            for _ in range(2):  # the same call again (a retry): the owner's confirm-contract is not finished by it
                again = await model.call("step_done", {"step": "interview"})
                assert again.is_error and again.data["step"]["id"] == "confirm-contract", again.text
                assert "step interview is not the step the run is at (step confirm-contract)" in again.text
            bare = await model.call("step_done")  # no step named: an ungated step does not move on a bare call
            assert bare.is_error and "needs step" in bare.text and bare.data["step"]["id"] == "confirm-contract"
            ahead = await model.call("step_done", {"step": "desk-research"})
            assert ahead.is_error and ahead.data["step"]["id"] == "confirm-contract", ahead.text
            assert RunLog(project, run).tokens() == logged  # nothing was sent
            confirmed = await model.call("step_done", {"step": "confirm-contract"})
            assert confirmed.data["step"]["id"] == "select-route", confirmed.text
            return run

    run = anyio.run(go)
    history = audit(RunLog(project, run).log_path, state)
    assert history["ok"] is True and history["steps"] == ["setup-workspace", "interview", "confirm-contract",
                                                           "select-route"]  # fmt: skip


def test_a_fact_far_past_its_schema_limit_is_refused_in_a_short_reply(world: ServerWorld, tmp_path: Path) -> None:
    """The verifier's schema message quoted the whole value: a 250 KB objective came back to the model whole."""
    facts = json.loads(example_text("1.2.0", "confirmed-state.json"))

    async def script(model: StandIn) -> None:
        for field, value in (("objective", "x" * 250_000), ("options", ["o" * 60_000] * 4)):
            refused = await model.call("start_run", {"workflow": "research", "facts": {**facts, field: value}})
            assert refused.is_error and "confirmed_state_invalid" in refused.text, refused.text[:500]
            assert f"at /{field}: " in refused.text and len(refused.text) < 2000, refused.text[:500]
            assert "chars, cut]" in refused.text and "rule (" in refused.text, refused.text
        assert (await model.start()).data["step"]["id"] == "interview"  # the facts as confirmed still start

    drive(world, tmp_path, script)
