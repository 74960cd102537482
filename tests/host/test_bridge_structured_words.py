"""Every result of the bridge carries its words in its structured content too, whichever part a host hands its model.

The pinned Claude Code CLI, on a 2026-07-28 connection, gives its model only a result's structured content (as
JSON), not its text content (``make interop``, interop/claude_run.py). Before, the bridge's structured content was
a small data object (``{"run", "status", "step", "files"}``), so a model there never read the step's instructions,
the files to write or what to call next. Now the structured content's first field, ``text``
(:data:`rimthan_host.words.TEXT_FIELD`), is the reply's text, word for word (scrubbed like it), the data after it.
The real ``rimthan-host serve`` over stdio (its verifier its child, serving a release built by the real packager
and signed with a real key), a real SDK client in both protocol eras whose elicitation callback plays the person.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.standin import StandIn
from rimthan_host.words import TEXT_FIELD
from support.bridge import as_shown, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.releases import packaged_source
from support.servers import ServerWorld, build_world

INSTRUCTION = (packaged_source("1.2.0") / "assets" / "instructions" / "interview.md").read_text("utf-8")
FIRST_LINE = next(line for line in INSTRUCTION.splitlines() if line.strip() and not line.startswith("#"))


async def _accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person: accepts each form as shown, desk-research to the route question."""
    assert isinstance(params, types.ElicitRequestFormParams)
    properties: dict[str, Any] = params.requested_schema["properties"]
    if "answer" in properties:
        return types.ElicitResult(action="accept", content={"answer": "desk-research"})
    return types.ElicitResult(action="accept", content=as_shown(properties))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("structured-words-world"))


def _drive(world: ServerWorld, tmp_path: Path, mode: str) -> StandIn:
    project = tmp_path / "project"
    project.mkdir()

    async def go() -> StandIn:
        params = bridge_params(project, world, tmp_path / "state")
        async with CheckedClient(params, mode=mode, elicitation_callback=_accept) as client:
            model = stand_in(client, project)
            await model.call("show_step", {"unknown": 1})  # a refusal
            started = await model.start()
            await model.follow(started, "desk-research")
            return model

    model = anyio.run(go)
    check_replies(model)
    return model


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_each_result_s_structured_content_holds_its_words_first(world: ServerWorld, tmp_path: Path, mode: str) -> None:
    model = _drive(world, tmp_path, mode)
    assert model.received[-1].data["status"] == "completed", model.received[-1].text
    for reply in model.received:
        structured = reply.structured()
        assert list(structured)[0] == TEXT_FIELD and structured[TEXT_FIELD] == reply.text, json.dumps(structured)
        assert "status" in reply.data, structured  # the data still follows the words
    refusal, started = model.received[0].structured(), model.received[1].structured()
    assert model.received[0].is_error and "unknown argument unknown" in refusal[TEXT_FIELD], refusal
    assert "Call show_step again" in refusal[TEXT_FIELD], refusal
    # before: {"files": [], "run": ..., "status": "advanced", "step": {"id": "interview", ...}} and no words
    assert "Instructions for this step:" in started[TEXT_FIELD] and FIRST_LINE in started[TEXT_FIELD], started
    assert "call step_done with step interview." in started[TEXT_FIELD], started
