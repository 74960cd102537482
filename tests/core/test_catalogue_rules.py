"""Catalogue rules (ReleaseLoader._validate_workflow_catalogue and friends).

Each test copies the packaged research-decision@1.2.0 source, breaks exactly
one rule by editing its TOML or schema, and asserts the precise failure code
through the same loader the packager and the server use.
"""

from __future__ import annotations

import datetime
import json
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rimthan_workflow_registry.errors import CatalogueError, FailureCode
from rimthan_workflow_registry.limits import MAX_STEP_VALIDATORS
from rimthan_workflow_registry.release.catalogue import is_semver, semver_key
from rimthan_workflow_registry.release.loader import ReleaseLoader
from rimthan_workflow_registry.workflow_engine import resolve_branches, walked_steps

PACKAGED = Path(__file__).resolve().parents[2] / "catalogues" / "research-decision" / "1.2.0"
WORKFLOW = "workflows/research-decision.toml"


class SourceDir:
    """A catalogue source directory, read the way the loader reads one."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    dest = tmp_path / "source"
    shutil.copytree(PACKAGED, dest)
    return dest


def edit_toml(root: Path, rel: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = tomllib.loads((root / rel).read_text("utf-8"))
    change(data)
    (root / rel).write_text(tomli_w.dumps(data), "utf-8")


def step(data: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in data["steps"] if s["id"] == step_id)


def load_error(root: Path) -> CatalogueError:
    with pytest.raises(CatalogueError) as info:
        ReleaseLoader.load(SourceDir(root))
    return info.value


def test_packaged_catalogue_loads_with_compiled_schemas(source: Path) -> None:
    loaded = ReleaseLoader.load(SourceDir(source))
    workflow = loaded.catalogue.workflows[0]
    assert workflow.key == "research-decision@1.2.0"
    assert workflow.steps[0].id == "setup-workspace"
    assert workflow.confirmed_state_schema in loaded.schemas.validators


def _add_duplicate_workflow_alias(root: Path) -> None:
    shutil.copy(root / WORKFLOW, root / "workflows/other.toml")
    edit_toml(root, "workflows/other.toml", lambda d: d.update(id="other-workflow", entry_aliases=["research"]))
    edit_toml(root, "catalogue.toml", lambda d: d["workflows"].append("workflows/other.toml"))


def _alias_equals_other_id(root: Path) -> None:
    shutil.copy(root / WORKFLOW, root / "workflows/other.toml")
    edit_toml(
        root, "workflows/other.toml", lambda d: d.update(id="other-workflow", entry_aliases=["research-decision"])
    )
    edit_toml(root, "catalogue.toml", lambda d: d["workflows"].append("workflows/other.toml"))


def _same_id_other_owner(root: Path) -> None:
    shutil.copy(root / WORKFLOW, root / "workflows/other.toml")
    edit_toml(root, "workflows/other.toml", lambda d: d.update(version="1.2.1", owner="someone.else"))
    edit_toml(root, "catalogue.toml", lambda d: d["workflows"].append("workflows/other.toml"))


def _first_step_not_setup(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d.update(steps=[d["steps"][1], d["steps"][0], *d["steps"][2:]]))


def _unknown_next(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "interview").update(next="nowhere"))


def _unknown_validator(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "desk-research").update(validators=["ghost@1.0.0"]))


def _unknown_asset(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "setup-workspace")["host_assets"].append("ghost"))


def _unknown_adapter(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d["host_adapters"].append("ghost@9.9.9"))


def _missing_instruction_file(root: Path) -> None:
    (root / "assets/instructions/interview.md").unlink()


def _invalid_schema(root: Path) -> None:
    path = root / "schemas/evidence-log.schema.json"
    doc = json.loads(path.read_text())
    doc["type"] = "not-a-type"
    path.write_text(json.dumps(doc))


def _two_fields_in_branches(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["branches"][1]["when"].update(field="deadline"))


def _overlapping_branch_values(root: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        step(d, "select-route")["branches"][1]["when"] = {
            "field": "research_route",
            "one_of": ["user-interviews", "desk-research"],
        }

    edit_toml(root, WORKFLOW, change)


def _predicate_outside_vocabulary(root: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        step(d, "select-route")["branches"][0]["when"] = {"field": "research_route", "matches": "desk.*"}

    edit_toml(root, WORKFLOW, change)


def _branch_field_not_in_schema(root: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        s = step(d, "select-route")
        for b in s["branches"]:
            b["when"]["field"] = "undeclared_field"
        s["question"]["field"] = "undeclared_field"

    edit_toml(root, WORKFLOW, change)


def _cycle_without_exit(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "confirm-contract").update(next="interview"))


def _unreachable_step(root: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        extra = dict(step(d, "interview"), id="orphan")
        extra.pop("next")
        d["steps"].append(extra)

    edit_toml(root, WORKFLOW, change)


def _input_only_another_branch_produces(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "experiment").update(inputs=["findings"]))  # desk-research's


def _input_a_later_step_produces(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "interview").update(inputs=["findings"]))


def _unknown_key(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d.update(surprise=True))


def _output_path_escapes(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "desk-research")["outputs"][0].update(path="../outside.json"))


def _output_path(path: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        edit_toml(root, WORKFLOW, lambda d: step(d, "desk-research")["outputs"][0].update(path=path))

    return edit


def _adapter_path_with_newline(root: Path) -> None:
    edit_toml(root, "adapters/claude-code.toml", lambda d: d["paths"].update(skill=".claude/skills/{id}\n.md"))


def _adapter_path_absolute(root: Path) -> None:
    edit_toml(root, "adapters/claude-code.toml", lambda d: d["paths"].update(skill="/etc/{id}.md"))


def _json_output_without_schema(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "desk-research")["outputs"][0].pop("schema"))


def _duplicate_artifact_id(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "experiment")["outputs"][0].update(id="evidence-log"))


def _bad_version(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d.update(version="1.2"))


def _version_ends_in_newline(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d.update(version=d["version"] + "\n"))  # re's "$" takes "1.2.0\n"


def _id_ends_in_newline(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: d.update(id=d["id"] + "\n"))


def _one_of_not_a_list(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["branches"][1]["when"].update(one_of=3))


def _max_bytes_past_json_integers(root: Path) -> None:  # built and verified, then every start failed to serialise
    edit_toml(root, WORKFLOW, lambda d: step(d, "desk-research")["outputs"][0].update(max_bytes=2**53 + 1))


def _branch_equals_past_json_integers(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["branches"][0]["when"].update(equals=-(2**63)))


def _question_choice_inf(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["question"]["choices"].append(float("inf")))


def _question_choice_table(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["question"]["choices"].append({"route": "x"}))


def _question_choice_twice(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["question"]["choices"].append("experiment"))


def _question_without_choices(root: Path) -> None:
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["question"].pop("choices"))


def _toml_date(root: Path) -> None:
    edit_toml(
        root, WORKFLOW, lambda d: step(d, "select-route")["question"]["choices"].append(datetime.date(2026, 12, 5))
    )


def _integer_of_5000_digits(root: Path) -> None:  # tomllib's int() raised ValueError: a traceback from `build`
    path = root / "catalogue.toml"
    path.write_text(path.read_text("utf-8").replace("format = 1", "format = " + "1" * 5000, 1), "utf-8")


def _schema_ref(reference: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        path = root / "schemas/confirmed-state.schema.json"
        doc = json.loads(path.read_text())
        doc["properties"]["objective"] = {"$ref": reference}
        path.write_text(json.dumps(doc))

    return edit


STATE_SCHEMA = "schemas/confirmed-state.schema.json"


def edit_state_schema(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = root / STATE_SCHEMA
    doc = json.loads(path.read_text("utf-8"))
    change(doc)
    path.write_text(json.dumps(doc), "utf-8")


def _route_enum_takes(*routes: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["properties"]["research_route"]["enum"].extend(routes)


def _choice_no_branch_takes(root: Path) -> None:
    """The question offers "astrology" (the schema takes it), but no branch goes anywhere for it."""
    edit_state_schema(root, _route_enum_takes("astrology"))
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["question"]["choices"].append("astrology"))


def _choice_the_schema_refuses(root: Path) -> None:
    """The question offers "astrology" and a branch takes it, but the field's enum does not."""

    def change(d: dict[str, Any]) -> None:
        select = step(d, "select-route")
        select["question"]["choices"].append("astrology")
        select["branches"][1]["when"]["one_of"].append("astrology")

    edit_toml(root, WORKFLOW, change)


def _branch_value_the_schema_refuses(root: Path) -> None:
    """A branch also takes "astrology", which no question offers and the field's enum refuses."""
    edit_toml(root, WORKFLOW, lambda d: step(d, "select-route")["branches"][1]["when"]["one_of"].append("astrology"))


def _route_pattern_by_reference(root: Path) -> None:
    """The field is a ``$ref`` to a definition whose pattern the choice "Experiment" breaks (so does its branch)."""

    def change(doc: dict[str, Any]) -> None:
        doc["$defs"] = {"route": {"type": "string", "pattern": "^[a-z-]+$"}}
        doc["properties"]["research_route"] = {"$ref": "#/$defs/route"}

    def rename(d: dict[str, Any]) -> None:
        select = step(d, "select-route")
        select["question"]["choices"] = ["desk-research", "user-interviews", "Experiment"]
        select["branches"][2]["when"] = {"field": "research_route", "equals": "Experiment"}

    edit_state_schema(root, change)
    edit_toml(root, WORKFLOW, rename)


def _too_many_validators(root: Path) -> None:
    """desk-research names MAX_STEP_VALIDATORS + 1 validators (copies of evidence-auditor under other ids)."""

    def change(data: dict[str, Any]) -> None:
        auditor = next(v for v in data["validators"] if v["id"] == "evidence-auditor")
        extra = [{**auditor, "id": f"auditor-{i}"} for i in range(MAX_STEP_VALIDATORS)]
        data["validators"] += extra
        step(data, "desk-research")["validators"] += [f"{v['id']}@{v['version']}" for v in extra]

    edit_toml(root, WORKFLOW, change)


def _second_adapter(root: Path, **changes: str) -> None:
    """A copy of the claude-code adapter (``changes`` applied), in the catalogue and pinned by the workflow."""
    shutil.copy(root / "adapters/claude-code.toml", root / "adapters/claude-alt.toml")
    edit_toml(root, "adapters/claude-alt.toml", lambda d: d.update(changes))
    edit_toml(root, "catalogue.toml", lambda d: d["host_adapters"].append("adapters/claude-alt.toml"))
    edit_toml(root, WORKFLOW, lambda d: d["host_adapters"].append(f"{changes.get('id', 'claude-code')}@1.0.0"))


def _two_adapters_of_one_harness(root: Path) -> None:
    _second_adapter(root, id="claude-alt", title="Claude Code, again")


def _skill_installed_over_the_adapter(root: Path) -> None:
    """The skill takes the adapter's id and is installed by the adapter's own path template."""

    def rename(d: dict[str, Any]) -> None:
        next(a for a in d["assets"] if a["id"] == "research-decision")["id"] = "claude-code"
        setup = step(d, "setup-workspace")
        setup["host_assets"] = [a.replace("research-decision", "claude-code") for a in setup["host_assets"]]

    edit_toml(root, WORKFLOW, rename)
    edit_toml(root, "adapters/claude-code.toml", lambda d: d["paths"].update(skill=".claude/rimthan/{id}.md"))


def _second_output_path(step_id: str, path: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        edit_toml(root, WORKFLOW, lambda d: step(d, step_id)["outputs"][-1].update(path=path))

    return edit


BROKEN: dict[str, tuple[Callable[[Path], None], FailureCode]] = {
    "alias collides with another workflow's alias": (_add_duplicate_workflow_alias, FailureCode.ALIAS_COLLISION),
    "alias equals another workflow's id": (_alias_equals_other_id, FailureCode.ALIAS_COLLISION),
    "workflow id claimed by two owners": (_same_id_other_owner, FailureCode.ALIAS_COLLISION),
    "first step is not setup-workspace": (_first_step_not_setup, FailureCode.FIRST_STEP_NOT_SETUP),
    "next names an unknown step": (_unknown_next, FailureCode.REFERENCE_UNRESOLVED),
    "step names an unknown validator": (_unknown_validator, FailureCode.REFERENCE_UNRESOLVED),
    "setup delivers an unknown asset": (_unknown_asset, FailureCode.REFERENCE_UNRESOLVED),
    "workflow pins an unknown adapter": (_unknown_adapter, FailureCode.REFERENCE_UNRESOLVED),
    "instruction file missing": (_missing_instruction_file, FailureCode.REFERENCE_UNRESOLVED),
    "schema fails check_schema": (_invalid_schema, FailureCode.SCHEMA_INVALID),
    "branches test two fields": (_two_fields_in_branches, FailureCode.BRANCH_AMBIGUOUS),
    "branch values overlap": (_overlapping_branch_values, FailureCode.BRANCH_AMBIGUOUS),
    "predicate outside the closed vocabulary": (_predicate_outside_vocabulary, FailureCode.BRANCH_PREDICATE_INVALID),
    "branch field not in confirmed-state schema": (_branch_field_not_in_schema, FailureCode.BRANCH_PREDICATE_INVALID),
    "cycle with no way to a terminal step": (_cycle_without_exit, FailureCode.TERMINAL_UNREACHABLE),
    "step unreachable from the start": (_unreachable_step, FailureCode.TERMINAL_UNREACHABLE),
    "step input only another branch produces": (_input_only_another_branch_produces, FailureCode.TERMINAL_UNREACHABLE),
    "step input only a later step produces": (_input_a_later_step_produces, FailureCode.TERMINAL_UNREACHABLE),
    "unknown key in a workflow": (_unknown_key, FailureCode.CATALOGUE_INVALID),
    "output path escapes the project": (_output_path_escapes, FailureCode.CATALOGUE_INVALID),
    "adapter install path is absolute": (_adapter_path_absolute, FailureCode.CATALOGUE_INVALID),
    "adapter install path holds a newline": (_adapter_path_with_newline, FailureCode.CATALOGUE_INVALID),
    "two pinned adapters of one harness": (_two_adapters_of_one_harness, FailureCode.CATALOGUE_INVALID),
    "an asset installed at the adapter's install path": (
        _skill_installed_over_the_adapter,
        FailureCode.CATALOGUE_INVALID,
    ),
    "two outputs of one step at one path": (
        _second_output_path("desk-research", "research/evidence-log.json"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "outputs of two steps at one path": (
        _second_output_path("experiment", "research/findings.md"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "two outputs at paths differing only in case": (
        _second_output_path("desk-research", "Research/Evidence-Log.json"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "an output under another output's file": (
        _second_output_path("desk-research", "research/evidence-log.json/findings.md"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "an output at an asset's install path": (
        _second_output_path("experiment", ".claude/agents/evidence-auditor.md"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "an output where the adapter installs a directory": (
        _second_output_path("experiment", ".opencode/skill"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "output file name longer than 255 bytes": (
        _output_path("research/" + "x" * 251 + ".json"),
        FailureCode.CATALOGUE_INVALID,
    ),
    "output path holds a NUL": (_output_path("research/evidence\x00.json"), FailureCode.CATALOGUE_INVALID),
    "output path is not NFC": (_output_path("research/e\u0301vidence.json"), FailureCode.CATALOGUE_INVALID),
    "JSON output without a schema": (_json_output_without_schema, FailureCode.CATALOGUE_INVALID),
    "artifact id produced by two steps": (_duplicate_artifact_id, FailureCode.CATALOGUE_INVALID),
    "workflow version is not semantic": (_bad_version, FailureCode.CATALOGUE_INVALID),
    "workflow version ends in a newline": (_version_ends_in_newline, FailureCode.CATALOGUE_INVALID),
    "workflow id ends in a newline": (_id_ends_in_newline, FailureCode.CATALOGUE_INVALID),
    "branch one_of is a number": (_one_of_not_a_list, FailureCode.BRANCH_PREDICATE_INVALID),
    "question offers a choice no branch takes": (_choice_no_branch_takes, FailureCode.BRANCH_PREDICATE_INVALID),
    "question choice the field's enum refuses": (_choice_the_schema_refuses, FailureCode.BRANCH_PREDICATE_INVALID),
    "branch value the field's enum refuses": (_branch_value_the_schema_refuses, FailureCode.BRANCH_PREDICATE_INVALID),
    "choice breaks a referenced pattern": (_route_pattern_by_reference, FailureCode.BRANCH_PREDICATE_INVALID),
    "max_bytes past 2**53 - 1": (_max_bytes_past_json_integers, FailureCode.CATALOGUE_INVALID),
    "a step names more validators than one submit carries": (_too_many_validators, FailureCode.CATALOGUE_INVALID),
    "branch equals an integer past 2**53 - 1": (_branch_equals_past_json_integers, FailureCode.CATALOGUE_INVALID),
    "question choice is inf": (_question_choice_inf, FailureCode.CATALOGUE_INVALID),
    "question choice is a table": (_question_choice_table, FailureCode.CATALOGUE_INVALID),
    "question lists a choice twice": (_question_choice_twice, FailureCode.CATALOGUE_INVALID),
    "question without choices": (_question_without_choices, FailureCode.CATALOGUE_INVALID),
    "TOML date as a choice": (_toml_date, FailureCode.CATALOGUE_INVALID),
    "integer of 5000 digits": (_integer_of_5000_digits, FailureCode.CATALOGUE_INVALID),
    "schema $ref to a URL": (_schema_ref("https://example.com/objective.json"), FailureCode.SCHEMA_INVALID),
    "schema $ref to another file": (_schema_ref("evidence-log.schema.json"), FailureCode.SCHEMA_INVALID),
    "schema $ref to a missing definition": (_schema_ref("#/$defs/objective"), FailureCode.SCHEMA_INVALID),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_catalogue_is_refused_with_precise_code(source: Path, case: str) -> None:
    breaker, code = BROKEN[case]
    breaker(source)
    error = load_error(source)
    assert error.code is code, error.one_line()
    assert error.path, "the refusal must name the file it is about"


def test_semantic_version_order_handles_multi_digit_and_prereleases() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.9.0",
        "1.10.0",
        "2.0.0",
    ]
    assert sorted(reversed(ordered), key=semver_key) == ordered
    with pytest.raises(ValueError):
        semver_key("1.2")
    assert is_semver("1.0.0") and not is_semver("1.0.0\n") and not is_semver("1\u0662.0.0")  # "\d" took it
    with pytest.raises(ValueError):
        semver_key("1.0.0\n")


def test_resolve_branches_none_one_many_missing(source: Path) -> None:
    loaded = ReleaseLoader.load(SourceDir(source))
    select = loaded.catalogue.workflows[0].step("select-route")
    assert select is not None
    assert resolve_branches(select, {}) is None
    assert resolve_branches(select, {"research_route": "experiment"}) == "experiment"
    assert resolve_branches(select, {"research_route": "user-interviews"}) == "user-interviews"
    from rimthan_workflow_registry.errors import WorkflowProtocolError

    with pytest.raises(WorkflowProtocolError) as none_match:
        resolve_branches(select, {"research_route": "astrology"})
    assert none_match.value.code is FailureCode.BRANCH_NO_MATCH
    # Build a step whose predicates overlap (authoring validation would refuse it) to
    # prove evaluation refuses two matches too.
    from dataclasses import replace

    from rimthan_workflow_registry.release.catalogue import Branch, Predicate

    overlapping = replace(
        select,
        branches=(
            Branch("desk-research", Predicate("research_route", "equals", ("experiment",))),
            Branch("experiment", Predicate("research_route", "one_of", ("experiment",))),
        ),
    )
    with pytest.raises(WorkflowProtocolError) as many:
        resolve_branches(overlapping, {"research_route": "experiment"})
    assert many.value.code is FailureCode.BRANCH_AMBIGUOUS
    # a boolean never matches an integer predicate value (True == 1 in Python)
    numeric = replace(select, branches=(Branch("experiment", Predicate("research_route", "equals", (1,))),))
    with pytest.raises(WorkflowProtocolError):
        resolve_branches(numeric, {"research_route": True})


def test_a_refused_choice_names_the_step_the_key_and_the_keyword(source: Path) -> None:
    _route_pattern_by_reference(source)
    error = load_error(source)
    assert error.path is not None and error.path.endswith(WORKFLOW)
    assert error.message.startswith("step select-route: question.choices[2] 'Experiment' is refused by")
    assert "'research_route' (pattern: 'Experiment' does not match '^[a-z-]+$')" in error.message


def test_choices_a_referenced_schema_accepts_load(source: Path) -> None:
    """The field's ``$ref`` is resolved in the schema it belongs to: values it accepts are not refused."""
    edit_state_schema(source, lambda doc: doc.update({"$defs": {"route": doc["properties"]["research_route"]}}))
    edit_state_schema(source, lambda doc: doc["properties"].update({"research_route": {"$ref": "#/$defs/route"}}))
    assert ReleaseLoader.load(SourceDir(source)).catalogue.workflows[0].step("select-route") is not None


def test_two_adapters_of_one_harness_are_both_named(source: Path) -> None:
    _two_adapters_of_one_harness(source)
    error = load_error(source)
    assert "claude-code@1.0.0 and claude-alt@1.0.0" in error.message, error.one_line()
    assert "'claude-code'" in error.message and error.path == WORKFLOW


def test_colliding_writes_are_both_named_with_where_they_come_from(source: Path) -> None:
    _skill_installed_over_the_adapter(source)
    message = load_error(source).message
    assert "skill asset claude-code (adapter claude-code@1.0.0) writes '.claude/rimthan/claude-code.md'" in message
    assert "adapter claude-code@1.0.0's instruction writes '.claude/rimthan/claude-code.md'" in message


def test_an_output_inside_another_names_the_file_it_would_need_as_a_directory(source: Path) -> None:
    _second_output_path("desk-research", "research/evidence-log.json/findings.md")(source)
    message = load_error(source).message
    assert "step desk-research output findings writes 'research/evidence-log.json/findings.md' inside" in message
    assert "'research/evidence-log.json', which step desk-research output evidence-log writes as a file" in message


def test_walked_steps_are_the_steps_themselves_in_order(source: Path) -> None:
    """The migration preview reads each walked step's outputs: it gets the steps, not ids to look up again."""
    workflow = ReleaseLoader.load(SourceDir(source)).catalogue.workflows[0]
    walked = walked_steps(workflow, "setup-workspace", "desk-research", {"research_route": "desk-research"})
    assert walked == tuple(
        workflow.step(s) for s in ("setup-workspace", "interview", "confirm-contract", "select-route")
    )
    assert walked_steps(workflow, "setup-workspace", "desk-research", {}) == ()  # no route confirmed: no path claimed
