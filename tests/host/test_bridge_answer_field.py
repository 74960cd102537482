"""answer_question names the question answered (field): a re-sent answer never answers the next question.

A catalogue asking two questions in a row with the same choices (choose-pilot, then select-route). Without
elicitation the model relays the user's answer; an answer re-sent after the run moved on to the second question
- the first question's, again (a retried call, a repeated turn) - fits the second question's choices too.
Before, the bridge took it for the second question: the route was chosen without the owner.
Now it is refused with nothing recorded, as is an answer naming no field.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import audited_only_run, drive, refused
from support.releases import build_release, two_questions_source
from support.servers import ServerWorld, build_world


def test_an_answer_re_sent_after_the_run_moved_on_is_refused_not_taken_for_the_next_question(
    tmp_path: Path,
) -> None:
    world: ServerWorld = build_world(tmp_path / "world")
    built = build_release(two_questions_source(tmp_path), tmp_path / "built", [world.key])
    two = replace(world, built={**world.built, "1.2.0": built})

    async def script(model: StandIn) -> None:
        reply = await model.start()
        for step in ("interview", "confirm-contract", "choose-pilot"):
            assert reply.data["step"]["id"] == step, reply.text
            reply = await model.call("step_done", {"step": step})
        assert reply.data["question"]["field"] == "pilot_route", reply.text
        assert "call answer_question with their answer and field pilot_route" in reply.text, reply.text
        first = await model.call("answer_question", {"answer": "experiment", "field": "pilot_route"})
        assert first.data["step"]["id"] == "select-route", first.text
        first = await model.call("step_done", {"step": "select-route"})
        assert first.data["question"]["field"] == "research_route", first.text
        run = str(first.data["run"])
        logged = RunLog(model.project, run).tokens()

        again = await model.call("answer_question", {"answer": "experiment", "field": "pilot_route"})
        refused(again, "Nothing was recorded: field pilot_route is not the question the run waits on "
                "(research_route)", "call answer_question with field research_route")  # fmt: skip
        bare = await model.call("answer_question", {"answer": "experiment"})
        refused(bare, "answer_question with an answer needs field", "field research_route")
        empty = await model.call("answer_question", {"field": "research_route"})  # no answer: the question again
        refused(empty, "answer_question needs answer", "The run waits for the user's answer to: Which research",
                "desk-research, user-interviews, experiment", "answer_question with field research_route")  # fmt: skip
        assert empty.data["step"] == {"id": "select-route"} and empty.data["run"] == run, empty.data
        assert RunLog(model.project, run).tokens() == logged  # nothing was sent for any
        shown = await model.call("show_step")
        assert shown.data["question"]["field"] == "research_route", shown.text

        chosen = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert chosen.data["step"]["id"] == "desk-research", chosen.text
        assert (await model.follow(chosen, "desk-research")).data["status"] == "completed"

    model, state = drive(two, tmp_path, script)
    history = audited_only_run(model.project, state)
    assert history["steps"][-2:] == ["select-route", "desk-research"], history["steps"]


def test_a_step_waiting_for_its_question_names_answer_question_as_the_one_call(tmp_path: Path) -> None:
    """Once select-route's step_done has the workflow ask its question, the reply and show_step name only
    answer_question. Before, both also said "This step writes no files. When its work is done, call step_done with
    step select-route" above the question, and step_done's reply began "Step select-route done." while the run
    stayed there: a model taking the first call named got a refusal ("the step is waiting for an answer first")."""

    async def script(model: StandIn) -> None:
        reply = await model.start()
        for step in ("interview", "confirm-contract"):
            reply = await model.call("step_done", {"step": step})
        assert "call step_done with step select-route" in reply.text, reply.text  # (before the question is asked)
        asked = await model.call("step_done", {"step": "select-route"})
        shown = await model.call("show_step")
        for said in (asked, shown):
            assert said.data["question"]["field"] == "research_route", said.text
            assert "call answer_question with their answer and field research_route" in said.text, said.text
            assert "call step_done with step" not in said.text, said.text
            assert "waits for the user's answer to the question below" in said.text, said.text
        assert "Step select-route done." not in asked.text, asked.text
        assert asked.text.startswith("Step select-route now asks the user its question."), asked.text
        chosen = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert (await model.follow(chosen, "desk-research")).data["status"] == "completed"

    model, state = drive(build_world(tmp_path / "world"), tmp_path, script)
    audited_only_run(model.project, state)
