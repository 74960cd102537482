"""The bridge's words say who confirms a fact: the model (a client without elicitation) or the bridge itself.

A client that declares elicitation (Claude Code does; ``rimthan-host serve --require-elicitation`` takes no other
for a confirmation) has the bridge put every fact, answer and migration to the user in the client's own form. Its
replies then never tell the model to read values back and get a yes itself, nor to wait for the user's agreement
before the call that asks them: the blocked start, a step's note, a step whose fields are missing, the offer of a
newer release and a migration's preview say the bridge asks. A client without elicitation keeps the words that
make the model ask. The real bridge over stdio with its real verifier child, a real SDK client at 2025-11-25
declaring ``roots`` and ``elicitation``, as Claude Code 2.1 does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.standin import Reply, StandIn
from rimthan_host.words import ASKED_IN_CLIENT, BRIDGE_NOTE, bridge_note
from support.bridge import as_shown, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

RELEASE = "research-decision@1.3.0"
START_FACTS = {"objective": "Should we move the Team plan to usage-based pricing?", "decision_owner": "VP Product"}
NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}
START_AGAIN = "Ask the user for what is missing and call start_run again with every fact"
AGREES = "Call migrate_run with confirm true once the user agrees."
BRIDGE_ASKS = (
    "Call migrate_run with confirm true if the user wants the newer release: the bridge puts this preview to them in "
    "their own client and migrates only if they confirm it there."
)


async def _person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user behind Claude Code: yes to each fact as the model passed it."""
    assert isinstance(params, types.ElicitRequestFormParams)
    return types.ElicitResult(action="accept", content=as_shown(params.requested_schema["properties"]))


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("elicitation-words-world"))


async def _walk(model: StandIn) -> dict[str, Reply]:
    """The replies whose words depend on who confirms: a start with no facts, the first step, and a migration's
    preview without and with the facts the newer release needs (a step whose fields are missing:
    ``test_bridge_interview_facts.py``)."""
    got = {"blocked": await model.call("start_run", {"workflow": "research", "facts": {}})}
    got["started"] = await model.start(START_FACTS)  # (the interview's fields still to confirm)
    got["needs"] = await model.call("migrate_run", {"to_release": RELEASE, "confirm": False})
    got["preview"] = await model.call("migrate_run", {"to_release": RELEASE, "confirm": False, "facts": NEW_FACTS})
    return got


def _replies(world: ServerWorld, tmp_path: Path, *, elicits: bool) -> dict[str, Reply]:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, world, state)
    if elicits:  # (with the flag: the mode in which no confirmation rests on the model's word)
        params = params.model_copy(update={"args": [params.args[0], "--require-elicitation", *params.args[1:]]})
    callbacks: dict[str, Any] = {"elicitation_callback": _person} if elicits else {}

    async def go() -> dict[str, Reply]:
        async with CheckedClient(params, mode="legacy", list_roots_callback=_roots, **callbacks) as client:
            model = stand_in(client, project)
            got = await _walk(model)
            check_replies(model)
            return got

    return anyio.run(go)


def test_a_client_that_elicits_is_told_the_bridge_asks_the_user(world: ServerWorld, tmp_path: Path) -> None:
    got = _replies(world, tmp_path, elicits=True)
    assert got["blocked"].data["status"] == "blocked", got["blocked"].text
    assert got["blocked"].text.endswith(f"{START_AGAIN}: {ASKED_IN_CLIENT}."), got["blocked"].text
    started = got["started"]
    assert not started.is_error and bridge_note(True) in started.text and BRIDGE_NOTE not in started.text
    assert "the read-back and the yes the text asks for" in started.text, started.text
    needs = got["needs"]
    assert needs.is_error and needs.text.endswith(f"as facts to migrate_run: {ASKED_IN_CLIENT}."), needs.text
    preview = got["preview"]
    assert preview.data["status"] == "preview" and preview.text.endswith(BRIDGE_ASKS), preview.text
    assert AGREES not in preview.text


def test_a_client_without_elicitation_is_told_to_ask_the_user(world: ServerWorld, tmp_path: Path) -> None:
    got = _replies(world, tmp_path, elicits=False)
    assert got["blocked"].text.endswith(f"{START_AGAIN}."), got["blocked"].text
    assert BRIDGE_NOTE in got["started"].text and ASKED_IN_CLIENT not in got["started"].text
    assert got["needs"].text.endswith("pass it as facts to migrate_run."), got["needs"].text
    assert got["preview"].text.endswith(AGREES), got["preview"].text
