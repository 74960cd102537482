"""What the person is asked to confirm shows the value the bridge records, and no other.

The model writes a fact's value; the bridge asks the person (``elicitation/create``)
to confirm it, and records the confirmation as the user's. Two values that
differ must read differently: an option holding a newline and a dash must not
pass for two options, a right-to-left override or a zero-width character must
not hide what the text says. A real ``rimthan-host serve`` with its real
verifier child; the person declines, so nothing starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from rimthan_host.standin import StandIn
from support.bridge import bridge_params, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld

TWO = ["Keep self-hosted PostgreSQL\n- Migrate to Nimbus Managed PostgreSQL", "Migrate to Brindle Postgres Cloud"]
THREE = ["Keep self-hosted PostgreSQL", "Migrate to Nimbus Managed PostgreSQL", "Migrate to Brindle Postgres Cloud"]


def test_two_values_the_person_could_confuse_are_shown_apart(mcp_world: ServerWorld, tmp_path: Path) -> None:
    asked: list[str] = []
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    async def go() -> None:
        params = bridge_params(project, mcp_world, state)
        async with CheckedClient(params, mode="legacy", elicitation_callback=person) as client:
            model = stand_in(client, project)
            for facts in (
                {"options": TWO},
                {"options": THREE},
                {"objective": "Should we \u202eDELETE\u202c keep the \u200bdatabase?"},
                {"objective": "Should we\u00a0keep it?  "},
            ):
                # (every other fact too, after it: a start missing one asks the person nothing)
                reply = await model.start({**facts, **{k: v for k, v in _example(model).items() if k not in facts}})
                assert reply.is_error and reply.data["user"] == "decline", reply.text

    anyio.run(go)
    two, three, hidden, spaced = asked
    assert two != three
    assert three == "Confirm options for this run:\n" + "\n".join(f"- {o}" for o in THREE)  # plain text stays plain
    assert '- "Keep self-hosted PostgreSQL\\n- Migrate to Nimbus Managed PostgreSQL"' in two
    assert "\u202e" not in hidden and "\u200b" not in hidden and "\\u202e" in hidden and "\\u200b" in hidden
    assert 'The model passed:\n"Should we\\u00a0keep it?  "\n' in spaced, spaced  # (its own form: a text)


def _example(model: StandIn) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((model.examples[model.version] / "confirmed-state.json").read_text("utf-8"))
    return facts
