"""What a model in a host is told to do can be done there: no digest to compare, no tool that stops a run.

The bridge keeps every digest and token; the model and the validator subagents it starts see none. Released
validator texts (research-decision 1.2.0, 1.3.0) say check 1 compares each file's SHA-256 with "the given digest",
and their subagents to "compare with the digest you were given"; their confirm-contract step says to "stop the
run", though no tool of the bridge or of the verifier stops one. Released sources are never edited: research-decision
1.3.1 (its validators 1.1.1) says both truly, and for the released texts the bridge's note under a step that says to
stop the run says what stopping is (:data:`rimthan_host.words.STOP_NOTE`). Each source is built by the real
packager and signed with a real key; the real ``rimthan-host serve`` (its child the real verifier) is driven by the
scripted model through a real MCP client.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from rimthan_host.standin import Reply, StandIn
from rimthan_host.words import STOP_NOTE
from support.bridge import BIN, check_replies
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

NEW, RELEASED = "1.3.1", "1.3.0"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("truthful-words")
    key: KeyPair = make_keypair(root / "keys", "release-engineer")
    trust = trust_dir(root / "trust", key)
    return {v: (build_release(packaged_source(v), root / "built" / v, [key]), trust) for v in (NEW, RELEASED)}


def _run(served: tuple[Path, Path], project: Path, version: str, *, to_end: bool) -> StandIn:
    """A run of ``version`` through the bridge: to its end, or to the reply that shows confirm-contract."""
    project.mkdir()
    release, trust = served
    params = StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--",
              *serve_options(release, trust, project.parent / "state", log_level="warning")],
    )  # fmt: skip
    examples = {version: packaged_source(version) / "examples"}

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy") as client:
            model = StandIn(client, project, examples, version=version)
            started = await model.start()
            assert started.data["step"]["id"] == "interview", started.text
            done = await model.call("step_done", {"step": "interview"})
            assert done.data["step"]["id"] == "confirm-contract", done.text
            if to_end:
                finished = await model.follow(done, "desk-research")
                assert finished.data["status"] == "completed", finished.text
            return model

    model = anyio.run(go)
    check_replies(model)
    return model


def _showing(model: StandIn, step: str) -> Reply:
    return next(r for r in model.received if (r.data.get("step") or {}).get("id") == step)


def test_the_new_validators_and_subagents_ask_for_no_digest_the_model_never_sees(
    served: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    model = _run(served[NEW], tmp_path / "project", NEW, to_end=True)
    pending = [r for r in model.received if r.data.get("status") == "validators_pending"]
    said = "\n".join(r.text for r in pending)
    for name in ("evidence-auditor", "decision-critic"):
        assert f"Validator {name} (subagent {name}), version 1.1.1." in said, said
    for reply in pending:
        flat = " ".join(reply.text.split())  # (the instruction's lines wrapped as the source wraps them)
        assert "the given digest" not in flat and "if you were given its SHA-256 digest" in flat, reply.text
        assert "such as the host bridge, gives none: it checked the files itself" in flat, reply.text
    names = ("evidence-auditor", "decision-critic")
    subagents = [p for p in tmp_path.joinpath("project").rglob("*.md") if p.stem in names]
    assert subagents, "the bridge delivered no subagent file"
    for path in subagents:
        text = " ".join(path.read_text("utf-8").split())
        assert "compare with the digest you" not in text and "there is nothing to compare" in text, path


def test_the_new_confirm_contract_says_no_call_stops_a_run(
    served: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    reply = _showing(_run(served[NEW], tmp_path / "project", NEW, to_end=False), "confirm-contract")
    assert "stop the run" not in reply.text and "No call stops a run" in reply.text, reply.text
    assert STOP_NOTE not in reply.text  # the text says it truly: no note needed


def test_a_released_text_that_says_stop_the_run_gets_the_note_that_says_what_stopping_is(
    served: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    model = _run(served[RELEASED], tmp_path / "project", RELEASED, to_end=False)
    reply = _showing(model, "confirm-contract")
    assert "stop the run and tell them" in reply.text and STOP_NOTE in reply.text, reply.text
    assert "No tool stops a run" in STOP_NOTE and "new_run true" in STOP_NOTE and "step_done" in STOP_NOTE
    interview = _showing(model, "interview")
    assert STOP_NOTE not in interview.text  # only under a text that says to stop the run
