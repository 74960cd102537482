"""A fact's own form finds the field's schema as the release names it: the workflow's ``confirmed_state_schema``.

A real MCP client declaring elicitation drives the real bridge (``rimthan-host serve``) and its verifier, on a real
release of a scaffolded catalogue whose confirmed-state schema has an optional ``team_size`` (2 or 5) and whose
``plan`` step writes a file checked against that same schema. Before, mid-run the schema was the one file the step
lists beside its instruction, assets, validators and output schemas: a step whose output schema is the
confirmed-state schema left none, so ``team_size`` was put as a yes/no; at ``start_run`` only a required field had
a schema (the no-facts start's ``expects``), so an optional one given at the start was a yes/no too.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w
from mcp import types
from mcp.client.stdio import StdioServerParameters
from rimthan_host.runlog import RunLog
from support.bridge import BIN, as_shown, check_replies, stand_in
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import build_release, make_keypair, scaffold_source, trust_dir

GOAL = "Decide whether to keep the weekly status meeting"
SCHEMA = "schemas/confirmed-state.schema.json"


def _source(root: Path) -> Path:
    """The scaffolded catalogue: an optional integer ``team_size`` of choices 2 and 5; ``plan`` writes
    ``research/plan.json``, checked against the confirmed-state schema itself."""
    source = scaffold_source(root / "fact-schema")
    schema = json.loads((source / SCHEMA).read_text("utf-8"))
    schema["properties"]["team_size"] = {"type": "integer", "enum": [2, 5], "description": "People on the team."}
    (source / SCHEMA).write_text(json.dumps(schema, indent=2), "utf-8")
    path = source / "workflows/demo.toml"
    workflow = tomllib.loads(path.read_text("utf-8"))
    plan = next(s for s in workflow["steps"] if s["id"] == "plan")
    output = {"id": "plan", "path": "research/plan.json", "media_type": "application/json", "schema": SCHEMA}
    plan["outputs"] = [{**output, "max_bytes": 4096}]
    path.write_text(tomli_w.dumps(workflow), "utf-8")
    return source


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fact-schema")
    key = make_keypair(root / "keys", "release-engineer")
    return build_release(_source(root), root / "releases", [key]), trust_dir(root / "trust", key)


class Person:
    """Keeps each fact's form (field -> its ``properties``) and picks 2 for ``team_size`` where offered a value."""

    def __init__(self) -> None:
        self.forms: dict[str, dict[str, Any]] = {}

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        properties: dict[str, Any] = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        field = params.message.split()[1]
        self.forms[field] = properties
        own = field == "team_size" and "value" in properties  # (a yes/no form takes no value)
        picked: dict[str, Any] = {"value": "2"} if own else as_shown(properties)
        return types.ElicitResult(action="accept", content=picked)


def _drive(release: tuple[Path, Path], tmp_path: Path, mode: str, mid_run: bool) -> tuple[Person, dict[str, Any]]:
    """Start ``demo`` (with ``team_size`` 5 unless ``mid_run``), else pass it with ``plan``'s step_done."""
    project = tmp_path / "project"
    project.mkdir()
    options = serve_options(release[0], release[1], tmp_path / "state", log_level="warning")
    args = ["serve", "--project", str(project), "--", *options]
    params = StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)
    person = Person()

    async def go() -> str:
        async with CheckedClient(params, mode=mode, elicitation_callback=person) as client:
            model = stand_in(client, project)
            facts: dict[str, Any] = {"goal": GOAL} if mid_run else {"goal": GOAL, "team_size": 5}
            started = await model.call("start_run", {"workflow": "demo", "facts": facts})
            assert started.data["step"]["id"] == "plan", started.text
            if mid_run:
                (project / "research").mkdir()
                (project / "research/plan.json").write_text(json.dumps({"goal": GOAL}), "utf-8")
                done = await model.call("step_done", {"step": "plan", "facts": {"team_size": 5}})
                assert done.data["step"]["id"] == "write-summary", done.text
            check_replies(model)
            return str(started.data["run"])

    run = anyio.run(go)
    return person, RunLog(project, run).load_state()["confirmed_state"]["state"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_mid_run_a_fact_offers_its_choices_though_a_step_output_shares_the_state_schema(
    release: tuple[Path, Path], tmp_path: Path, mode: str
) -> None:
    """Before, the step listed no file left over once its output schema was ruled out: a yes/no form, 5 kept."""
    person, state = _drive(release, tmp_path, mode, mid_run=True)
    form = person.forms["team_size"]
    assert "value" in form and form["value"]["enum"] == ["2", "5"] and form["value"]["default"] == "5", form
    assert state["team_size"] == 2


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_at_start_an_optional_fact_offers_its_choices(release: tuple[Path, Path], tmp_path: Path, mode: str) -> None:
    """Before, only a required field (``goal``) had its own form at start: ``team_size`` was a yes/no, 5 kept."""
    person, state = _drive(release, tmp_path, mode, mid_run=False)
    assert person.forms["goal"]["value"]["type"] == "string", person.forms["goal"]
    form = person.forms["team_size"]
    assert "value" in form and form["value"]["enum"] == ["2", "5"] and form["value"]["default"] == "5", form
    assert state["team_size"] == 2 and state["goal"] == GOAL
