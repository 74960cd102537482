"""research-decision 1.3.1: the interview moves on only once the options and success criteria are confirmed.

1.3.0's interview was ungated with nothing required, so a ``step_done`` with no facts moved the run to
confirm-contract with the options and success criteria never confirmed, though every later step works from
them (the evidence auditor expects one entry per confirmed option). 1.3.1's interview declares
``requires_confirmed = ["options", "success_criteria"]``: the verifier refuses to move it on without them,
``blocked`` with one ``confirmed_field_missing`` per missing field, the checkpoint unchanged; once they are
confirmed, a run through the bridge and one through the library each go on to completion. The 1.3.1 source
built by the real packager and signed with a real key, served by the real ``rimthan-mcp serve``, driven by
the real ``rimthan-host serve`` (the verifier its child) and, for the verifier's own answer, by a real MCP
client calling ``rimthan.continue_workflow``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, types
from rimthan_host.harness import CatalogueExamples, WorkflowHarness, client_caller
from rimthan_host.standin import StandIn
from rimthan_host.words import ASKED_IN_CLIENT
from support.bridge import BIN, as_shown, check_replies, refused
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir
from support.servers import stdio_client_for

VERSION = "1.3.1"
EXAMPLE = json.loads((packaged_source(VERSION) / "examples" / "confirmed-state.json").read_text("utf-8"))
FIRST = {k: EXAMPLE[k] for k in ("objective", "decision_owner", "risk_tolerance")}
REQUIRED = ("options", "success_criteria")


async def _person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user behind a client that elicits: yes to each fact as the model passed it."""
    assert isinstance(params, types.ElicitRequestFormParams)
    return types.ElicitResult(action="accept", content=as_shown(params.requested_schema["properties"]))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("interview-facts")
    key: KeyPair = make_keypair(root / "keys", "release-engineer")
    return build_release(packaged_source(VERSION), root / "built", [key]), trust_dir(root / "trust", key)


def _drive(served: tuple[Path, Path], tmp_path: Path, script: Any, *, elicits: bool = False) -> StandIn:
    """``script`` against the bridge; ``elicits``: started with --require-elicitation, its client eliciting."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    release, trust = served
    flag = ["--require-elicitation"] if elicits else []
    params = StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", *flag, "--project", str(project), "--",
              *serve_options(release, trust, state, log_level="warning")],
    )  # fmt: skip
    callbacks: dict[str, Any] = {"elicitation_callback": _person} if elicits else {}

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy", **callbacks) as client:
            model = StandIn(client, project, {VERSION: packaged_source(VERSION) / "examples"}, version=VERSION)
            await script(model)
            return model

    model = anyio.run(go)
    check_replies(model)
    return model


def test_step_done_at_the_interview_without_the_options_and_criteria_is_refused(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    async def script(model: StandIn) -> None:
        started = await model.call("start_run", {"workflow": "research", "facts": FIRST})
        assert started.data["step"]["id"] == "interview", started.text
        bare = await model.call("step_done", {"step": "interview"})
        refused(bare, *REQUIRED, "moves on only once", ", confirm each with them, then call step_done")
        assert bare.data["status"] == "facts_refused", bare.data
        assert bare.data["failures"] == ["confirmed_field_missing"] * len(REQUIRED), bare.data
        assert (await model.call("show_step")).data["step"]["id"] == "interview"
        partly = await model.call("step_done", {"step": "interview", "facts": {"options": EXAMPLE["options"]}})
        refused(partly, "success_criteria", "moves on only once", "were not recorded either")
        assert (await model.call("show_step")).data["step"]["id"] == "interview"
        facts = {k: EXAMPLE[k] for k in REQUIRED}
        done = await model.call("step_done", {"step": "interview", "facts": facts})
        assert done.data["step"]["id"] == "confirm-contract", done.text
        finished = await model.follow(done, "desk-research")  # once confirmed, the run goes on to its end
        assert finished.data["status"] == "completed", finished.text

    _drive(served, tmp_path, script)


class _WithoutInterviewFacts(CatalogueExamples):
    """The worked examples, started with the facts the interview confirms left out."""

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        return {k: v for k, v in super().initial_state(workflow_version, workflow=workflow).items() if k in FIRST}


def test_a_client_that_elicits_is_told_the_bridge_confirms_the_missing_fields(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    """With elicitation (the bridge started with --require-elicitation) the bridge asks the user to confirm each
    fact: the refusal tells the model to ask for the fields, not to read them back for a yes itself."""

    async def script(model: StandIn) -> None:
        started = await model.call("start_run", {"workflow": "research", "facts": FIRST})
        assert started.data["step"]["id"] == "interview", started.text
        bare = await model.call("step_done", {"step": "interview"})
        refused(bare, *REQUIRED, "moves on only once", f"every fact in facts: {ASKED_IN_CLIENT}.")
        assert "confirm each with them" not in bare.text, bare.text
        assert bare.data["failures"] == ["confirmed_field_missing"] * len(REQUIRED), bare.data

    _drive(served, tmp_path, script, elicits=True)


def test_the_verifier_refuses_it_with_confirmed_field_missing(served: tuple[Path, Path], tmp_path: Path) -> None:
    release, trust = served
    args = [str(BIN / "rimthan-mcp"), "serve", *serve_options(release, trust, tmp_path / "state")]

    async def go() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            examples = _WithoutInterviewFacts(
                {VERSION: packaged_source(VERSION) / "examples"}, answers={"research_route": "desk-research"}
            )
            run = WorkflowHarness(client_caller(client), examples, project_dir=tmp_path / "run")
            at = await run.run(await run.start("research", initial_version=VERSION), until_step="interview")
            checkpoint = run.session.checkpoint
            refused = await run.session.advance()
            assert refused.status == "blocked" and run.session.checkpoint == checkpoint, refused
            assert [(f.code, f.pointer) for f in refused.failures] == [
                ("confirmed_field_missing", f"/{name}") for name in REQUIRED
            ]
            assert all(f.wire["details"]["expects"]["type"] == "array" for f in refused.failures)
            partly = await run.session.advance({"options": EXAMPLE["options"]})
            assert [(f.code, f.pointer) for f in partly.failures] == [("confirmed_field_missing", "/success_criteria")]
            moved = await run.session.advance({k: EXAMPLE[k] for k in REQUIRED})
            assert (moved.status, moved.step_id) == ("active", "confirm-contract"), moved
            assert at.step_id == "interview"
            finished = await run.run(moved)  # once confirmed, the library's run goes on to its end
            assert (finished.status, finished.release) == ("completed", f"research-decision@{VERSION}"), finished

    anyio.run(go)
