"""Every tool-schema bound on a value a catalogue declares has its catalogue rule: a catalogue that builds can run.

What a catalogue declares and a tool call carries (arguments a client must
send, or a result the output schema checks), with the bound the tool schemas
put on it (server/src/rimthan_workflow_mcp/schema_parts.py, contract_schemas.py,
tool_schemas.py; the figures are in rimthan_workflow_registry.limits):

- release id ``<name>@<version>``: ``NAME`` (MAX_NAME_CHARS) in every result's
  ``release``, in a bundle, in a migration request and preview;
- catalogue, workflow, validator and host adapter versions: ``VERSION``
  (MAX_VERSION_CHARS) in results, bundles, reports and the ``host`` object;
- workflow, validator and host adapter keys ``id@version``: ``NAME`` in a
  migration preview (``workflow``, ``invalidated_validators``,
  ``host_adapters``) and in findings (``validator``);
- the capabilities a host must send (the workflow's and its adapter's) and
  the validator capabilities (the validators' and the adapter's): one
  ``NAMES`` list each in ``host`` (MAX_LISTED_NAMES), as a migration
  preview's needs;
- the pinned host adapters: a ``NAMES`` list in a migration preview;
- the confirmed state's top-level fields: ``maxProperties`` MAX_CONFIRMED_FIELDS
  on ``state`` and ``confirmations``; each field name a ``NAME`` (a
  confirmation's key, a question's field, a preview's field);
- a question's choices and a branch's values: the state a client confirms
  the answer into (MAX_CONFIRMED_STATE_BYTES as canonical JSON, with the
  required fields at their least); the state schema's ``minProperties``
  (MAX_CONFIRMED_FIELDS), and the least state its ``required`` fields, or an
  optional field with them, take by ``minLength``/``minItems``;
- a step's outputs, validators and inputs: MAX_STEP_OUTPUTS artifacts and
  receipts, MAX_STEP_VALIDATORS reports and summaries, MAX_STEP_INPUTS input
  bindings; its declared sizes: MAX_STEP_ARTIFACT_BYTES (the last two kinds
  already had rules; tests/packager/test_packager_cli.py and
  tests/core/test_release_verify.py hold them, inputs are added here).

Already bounded where the catalogue is parsed, so not repeated here: ids,
aliases, step, asset and artifact ids, harness names (64 characters by
pattern), capabilities (64), output and install paths (1,024 characters, the
artifact ``path`` bound), media types (a closed list). The repository policy's
globs are the host's, not the catalogue's: any path a step writes is matched by
a short glob (``*`` crosses ``/``), so no catalogue forces more than the policy holds.

Each case edits a copy of the packaged 1.2.0 source to one past the bound
(refused by the real packager and, signed anyway, by the verifier, with the
same words naming the file and the key) and exactly to it (builds and
verifies); one catalogue at every bound at once runs to its end through the
real server over stdio with the SDK client, which checks every result against
the tool's output schema (a step of MAX_STEP_INPUTS inputs and reports from a
validator keyed with MAX_NAME_CHARS characters among them).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w
from click.testing import CliRunner, Result
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import HostProfile, client_caller
from rimthan_packager.cli import cli
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import CatalogueError
from rimthan_workflow_registry.limits import (
    MAX_CONFIRMED_FIELDS,
    MAX_CONFIRMED_STATE_BYTES,
    MAX_LISTED_NAMES,
    MAX_NAME_CHARS,
    MAX_STEP_INPUTS,
    MAX_STEP_OUTPUTS,
    MAX_VERSION_CHARS,
)
from rimthan_workflow_registry.protocol_names import (
    CONTINUE_WORKFLOW,
    PREPARE_STEP_VALIDATION,
    START_WORKFLOW,
    SUBMIT_STEP_VALIDATION,
)
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.engines import ExamplesScenario, examples
from support.processes import serve_module_args
from support.releases import KeyPair, build_release, make_keypair, packaged_source, resign_release, trust_dir
from support.servers import example_state, stdio_client_for

WORKFLOW = "workflows/research-decision.toml"
ADAPTER = "adapters/claude-code.toml"
STATE_SCHEMA = "schemas/confirmed-state.schema.json"
KEY_CHARS = MAX_NAME_CHARS - MAX_VERSION_CHARS - 1  # the id that makes ``id@version`` exactly MAX_NAME_CHARS


def version_of(chars: int) -> str:
    """A semantic version ``chars`` characters long."""
    return "1.0.0-" + "a" * (chars - 6)


def id_of(chars: int) -> str:
    return "w" * chars


def edit_toml(root: Path, rel: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = tomllib.loads((root / rel).read_text("utf-8"))
    change(data)
    (root / rel).write_text(tomli_w.dumps(data), "utf-8")


def edit_json(root: Path, rel: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((root / rel).read_text("utf-8"))
    change(data)
    (root / rel).write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def replace_in(root: Path, rel: str, old: str, new: str) -> None:
    """Every quoted ``old`` in ``rel`` becomes ``new`` (a key and the references to it)."""
    path = root / rel
    path.write_text(path.read_text("utf-8").replace(f'"{old}"', f'"{new}"'), "utf-8")


# --------------------------------------------------------------------------- edits: (catalogue root, size) -> None


def catalogue_version(root: Path, chars: int) -> None:
    replace_in(root, "catalogue.toml", "1.2.0", version_of(chars))


def release_id(root: Path, chars: int) -> None:
    """``<name>@<version>`` of ``chars`` characters, each part within its own bound."""
    replace_in(root, "catalogue.toml", "research-decision", id_of(64))
    catalogue_version(root, chars - 65)


def workflow_version(root: Path, chars: int) -> None:
    edit_toml(root, WORKFLOW, lambda data: data.update(version=version_of(chars)))


def workflow_key(root: Path, chars: int) -> None:
    edit_toml(root, WORKFLOW, lambda data: data.update(id=id_of(chars - 65), version=version_of(64)))


def validator_version(root: Path, chars: int, validator_id: str = "evidence-auditor") -> None:
    replace_in(root, WORKFLOW, f"{validator_id}@1.0.0", f"{validator_id}@{version_of(chars)}")

    def change(data: dict[str, Any]) -> None:
        data["validators"][0]["version"] = version_of(chars)

    edit_toml(root, WORKFLOW, change)


def validator_key(root: Path, chars: int) -> None:
    new_id = id_of(chars - 65)
    replace_in(root, WORKFLOW, "evidence-auditor@1.0.0", f"{new_id}@1.0.0")
    edit_toml(root, WORKFLOW, lambda data: data["validators"][0].update(id=new_id))
    validator_version(root, 64, new_id)


def adapter_version(root: Path, chars: int, adapter_id: str = "claude-code") -> None:
    replace_in(root, WORKFLOW, f"{adapter_id}@1.0.0", f"{adapter_id}@{version_of(chars)}")
    edit_toml(root, ADAPTER, lambda data: data.update(version=version_of(chars)))


def adapter_key(root: Path, chars: int) -> None:
    new_id = id_of(chars - 65)
    replace_in(root, WORKFLOW, "claude-code@1.0.0", f"{new_id}@1.0.0")
    edit_toml(root, ADAPTER, lambda data: data.update(id=new_id))
    adapter_version(root, 64, new_id)


CAPABILITIES = ["skills", "subagents", "workspace.write"]  # each packaged adapter's


def workflow_capabilities(root: Path, count: int) -> None:
    """The workflow requires ``count`` capabilities, the adapters' among them."""
    extra = [f"cap-{i}" for i in range(count - len(CAPABILITIES))]
    edit_toml(root, WORKFLOW, lambda data: data.update(required_capabilities=CAPABILITIES + extra))


def capabilities_with_adapter(root: Path, count: int) -> None:
    """The workflow requires ``count - 1`` capabilities; its adapter adds ``skills``."""
    extra = [f"cap-{i}" for i in range(count - len(CAPABILITIES))]
    edit_toml(root, WORKFLOW, lambda data: data.update(required_capabilities=CAPABILITIES[1:] + extra))


def adapter_capabilities(root: Path, count: int) -> None:
    extra = [f"cap-{i}" for i in range(count - len(CAPABILITIES))]
    edit_toml(root, ADAPTER, lambda data: data.update(capabilities=CAPABILITIES + extra))


ISOLATED = "subagent.isolated-context"


def validator_capabilities(root: Path, count: int) -> None:
    extra = [f"vcap-{i}" for i in range(count - 1)]
    edit_toml(root, WORKFLOW, lambda data: data["validators"][0].update(required_capabilities=[ISOLATED, *extra]))


def adapter_validator_capabilities(root: Path, count: int) -> None:
    extra = [f"vcap-{i}" for i in range(count - 1)]
    edit_toml(root, ADAPTER, lambda data: data.update(validator_capabilities=[ISOLATED, *extra]))


def validator_capabilities_with_adapter(root: Path, count: int) -> None:
    """The validators require ``count - 1`` validator capabilities; the adapter adds one more."""
    validator_capabilities(root, count - 1)
    edit_toml(root, ADAPTER, lambda data: data.update(validator_capabilities=[ISOLATED, "vcap-adapter"]))


def pinned_adapters(root: Path, count: int) -> None:
    """The workflow pins ``count`` adapters (the two packaged ones and copies of claude-code, each its own harness)."""
    added = [f"adapters/extra-{i}.toml" for i in range(count - 2)]
    for i, rel in enumerate(added):
        data = tomllib.loads((root / ADAPTER).read_text("utf-8"))
        (root / rel).write_text(
            tomli_w.dumps({**data, "id": f"extra-{i}", "version": "1.0.0", "harness": f"extra-{i}"}), "utf-8"
        )
    edit_toml(root, "catalogue.toml", lambda data: data["host_adapters"].extend(added))
    pins = [f"extra-{i}@1.0.0" for i in range(count - 2)]
    edit_toml(root, WORKFLOW, lambda data: data["host_adapters"].extend(pins))


def state_fields(root: Path, count: int) -> None:
    """The confirmed-state schema names ``count`` top-level fields."""

    def change(schema: dict[str, Any]) -> None:
        extra = count - len(schema["properties"])
        schema["properties"].update({f"extra_{i}": {"type": "string", "maxLength": 64} for i in range(extra)})

    edit_json(root, STATE_SCHEMA, change)


def state_field_name(root: Path, chars: int) -> None:
    """One more optional top-level field, named with ``chars`` characters."""
    edit_json(root, STATE_SCHEMA, lambda schema: schema["properties"].update({"f" * chars: {"type": "boolean"}}))


def step_inputs(root: Path, count: int) -> None:
    """After desk-research, four steps write 16 outputs each, then a last step reads ``count`` artifacts and writes
    one more, judged by the first validator."""
    produced = [f"in-{k}-{j}" for k in range(4) for j in range(MAX_STEP_OUTPUTS)]
    reads = [*produced, "evidence-log", "findings"][:count]

    def change(data: dict[str, Any]) -> None:
        desk = next(s for s in data["steps"] if s["id"] == "desk-research")
        desk["next"] = "produce-0"
        common = {"title": "More", "instruction": desk["instruction"]}
        for k in range(4):
            outputs = [
                {"id": a, "path": f"research/{a}.md", "media_type": "text/markdown", "max_bytes": 1024}
                for a in produced[k * MAX_STEP_OUTPUTS : (k + 1) * MAX_STEP_OUTPUTS]
            ]
            nxt = f"produce-{k + 1}" if k < 3 else "read-all"
            data["steps"].append({"id": f"produce-{k}", **common, "next": nxt, "outputs": outputs})
        validator = data["validators"][0]
        summary = {"id": "summary", "path": "research/summary.md", "media_type": "text/markdown", "max_bytes": 1024}
        read_all = {"id": "read-all", **common, "inputs": reads, "outputs": [summary]}
        data["steps"].append({**read_all, "validators": [f"{validator['id']}@{validator['version']}"]})

    edit_toml(root, WORKFLOW, change)


LEAST_STATE = {"objective": "x", "decision_owner": "x"}  # the packaged state schema's required fields, at their least
ROUTE = "research_route"


def least_state_bytes(**fields: Any) -> int:
    """The canonical bytes of the least state the packaged schema accepts, holding ``fields`` too."""
    return len(canonical_bytes({**LEAST_STATE, **fields}))


def route_of(size: int) -> str:
    """A research route whose least confirmed state is ``size`` bytes as canonical JSON."""
    return "r" * (size - least_state_bytes(research_route=""))


def select_route(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def on_step(data: dict[str, Any]) -> None:
        change(next(s for s in data["steps"] if s["id"] == "select-route"))

    return on_step


def accept_route(root: Path, route: str) -> None:
    """The state schema's ``research_route`` enum takes ``route`` too (a value it refuses cannot be confirmed)."""
    edit_json(root, STATE_SCHEMA, lambda schema: schema["properties"]["research_route"]["enum"].append(route))


def question_choice(root: Path, size: int) -> None:
    """select-route offers a fourth route, its least state ``size`` bytes (a branch goes there, the schema takes it)."""
    route = route_of(size)
    accept_route(root, route)

    def change(step: dict[str, Any]) -> None:
        step["question"]["choices"].append(route)
        step["branches"][1]["when"]["one_of"].append(route)

    edit_toml(root, WORKFLOW, select_route(change))


def branch_value(root: Path, size: int) -> None:
    """A branch of select-route also takes a route no question offers (the schema takes it), its least state
    ``size`` bytes."""
    route = route_of(size)
    accept_route(root, route)
    edit_toml(root, WORKFLOW, select_route(lambda step: step["branches"][1]["when"]["one_of"].append(route)))


def state_min_properties(root: Path, count: int) -> None:
    edit_json(root, STATE_SCHEMA, lambda schema: schema.update(minProperties=count))


def required_min_length(root: Path, size: int) -> None:
    """The required ``objective`` is at least so long that the least state is ``size`` bytes.

    The state then has room for no other field: the schema keeps the required
    fields only and the workflow goes to desk-research without its question.
    """

    def change(schema: dict[str, Any]) -> None:
        schema["properties"] = {name: schema["properties"][name] for name in LEAST_STATE}
        objective = schema["properties"]["objective"]
        objective.pop("maxLength")
        objective["minLength"] = size - least_state_bytes(objective="")

    def one_route(data: dict[str, Any]) -> None:
        data["steps"] = [s for s in data["steps"] if s["id"] not in ("user-interviews", "experiment")]
        step = next(s for s in data["steps"] if s["id"] == "select-route")
        del step["question"], step["branches"]
        step["next"] = "desk-research"

    edit_json(root, STATE_SCHEMA, change)
    edit_toml(root, WORKFLOW, one_route)
    for dropped in ("experiment-results", "interview-synthesis"):  # the schemas only the dropped routes used
        (root / "schemas" / f"{dropped}.schema.json").unlink()
    for example in (
        "experiment-report.md",
        "experiment-results.json",
        "interview-report.md",
        "interview-synthesis.json",
    ):
        (root / "examples" / example).unlink(missing_ok=True)  # the worked examples of their outputs too


def optional_min_items(root: Path, count: int) -> None:
    """The optional ``options`` lists at least ``count`` items (each a string of one character or more)."""

    def change(schema: dict[str, Any]) -> None:
        options = schema["properties"]["options"]
        options.pop("maxItems")
        options["minItems"] = count

    edit_json(root, STATE_SCHEMA, change)


def most_options() -> int:
    """The most one-character options a state of MAX_CONFIRMED_STATE_BYTES holds beside the least required fields."""
    count = (MAX_CONFIRMED_STATE_BYTES - least_state_bytes(options=[]) + 1) // 4
    assert least_state_bytes(options=["x"] * count) <= MAX_CONFIRMED_STATE_BYTES
    assert least_state_bytes(options=["x"] * (count + 1)) > MAX_CONFIRMED_STATE_BYTES
    return count


@dataclass(frozen=True)
class Bound:
    edit: Callable[[Path, int], None]
    bound: int
    file: str
    says: str  # the key the refusal names (a part of its message)
    past: int | None = None  # the size refused, when not bound + 1


BOUNDS: dict[str, Bound] = {
    "catalogue version": Bound(catalogue_version, MAX_VERSION_CHARS, "catalogue.toml", "[catalogue].version is 65"),
    "release id": Bound(release_id, MAX_NAME_CHARS, "catalogue.toml", "release id 'wwww"),
    "workflow version": Bound(workflow_version, MAX_VERSION_CHARS, WORKFLOW, "version is 65 characters"),
    "workflow key": Bound(workflow_key, MAX_NAME_CHARS, WORKFLOW, "workflow 'wwww"),
    "validator version": Bound(validator_version, MAX_VERSION_CHARS, WORKFLOW, "validators[0].version is 65"),
    "validator key": Bound(validator_key, MAX_NAME_CHARS, WORKFLOW, "validators[0] 'wwww"),
    "host adapter version": Bound(adapter_version, MAX_VERSION_CHARS, ADAPTER, "version is 65 characters"),
    "host adapter key": Bound(adapter_key, MAX_NAME_CHARS, ADAPTER, "host adapter 'wwww"),
    "workflow required_capabilities": Bound(
        workflow_capabilities, MAX_LISTED_NAMES, WORKFLOW, "required_capabilities makes 33 names"
    ),
    "workflow and adapter capabilities together": Bound(
        capabilities_with_adapter,
        MAX_LISTED_NAMES,
        WORKFLOW,
        "required_capabilities with host adapter claude-code@1.0.0's capabilities makes 33 names",
    ),
    "adapter capabilities": Bound(adapter_capabilities, MAX_LISTED_NAMES, ADAPTER, "capabilities makes 33 names"),
    "adapter validator_capabilities": Bound(
        adapter_validator_capabilities, MAX_LISTED_NAMES, ADAPTER, "validator_capabilities makes 33 names"
    ),
    "validator required_capabilities": Bound(
        validator_capabilities, MAX_LISTED_NAMES, WORKFLOW, "validators[0].required_capabilities makes 33 names"
    ),
    "validator and adapter validator capabilities together": Bound(
        validator_capabilities_with_adapter,
        MAX_LISTED_NAMES,
        WORKFLOW,
        "host adapter claude-code@1.0.0's validator_capabilities makes 33 names",
    ),
    "pinned host adapters": Bound(pinned_adapters, MAX_LISTED_NAMES, WORKFLOW, "host_adapters makes 33 names"),
    "confirmed-state fields": Bound(state_fields, MAX_CONFIRMED_FIELDS, STATE_SCHEMA, "name 65 top-level fields"),
    "confirmed-state field name": Bound(state_field_name, MAX_NAME_CHARS, STATE_SCHEMA, "is 129 characters"),
    "empty confirmed-state field name": Bound(state_field_name, 1, STATE_SCHEMA, "'' is 0 characters", past=0),
    "step inputs": Bound(step_inputs, MAX_STEP_INPUTS, WORKFLOW, "step read-all: it declares 65 inputs"),
    "question choice": Bound(
        question_choice, MAX_CONFIRMED_STATE_BYTES, WORKFLOW, "step select-route: question.choices[3] 'rrrr"
    ),
    "branch value": Bound(
        branch_value, MAX_CONFIRMED_STATE_BYTES, WORKFLOW, "step select-route: branches[1].when.one_of"
    ),
    "confirmed-state minProperties": Bound(
        state_min_properties, MAX_CONFIRMED_FIELDS, STATE_SCHEMA, "minProperties = 65 is past the 64"
    ),
    "required field minLength": Bound(
        required_min_length, MAX_CONFIRMED_STATE_BYTES, STATE_SCHEMA, "required fields take at least 262145 bytes"
    ),
    "optional field minItems": Bound(
        optional_min_items, most_options(), STATE_SCHEMA, "a state holding top-level field 'options' takes at least"
    ),
}


def pack(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def source_with(tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.2.0"), source)
    edit(source)
    return source


@pytest.fixture(scope="module")
def good_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KeyPair]:
    root = tmp_path_factory.mktemp("good")
    key = make_keypair(root / "keys", "release-engineer")
    return build_release(packaged_source("1.2.0"), root / "built", [key]), key


@pytest.mark.parametrize("case", list(BOUNDS))
def test_a_catalogue_past_a_tool_schema_bound_is_refused_at_build_and_at_load(
    tmp_path: Path, keypair: KeyPair, good_release: tuple[Path, KeyPair], case: str
) -> None:
    """It used to build and sign, then fail every run it started (invalid_arguments, or a refused result)."""
    bound = BOUNDS[case]
    past = bound.bound + 1 if bound.past is None else bound.past
    source = source_with(tmp_path, lambda root: bound.edit(root, past))
    built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "out")
    assert built.exit_code == 1, f"built: {built.output}"
    line = built.stderr.splitlines()[0]
    assert line.startswith(f"error: catalogue_invalid: {source / bound.file}: "), line
    assert bound.says in line, line
    assert "Traceback" not in built.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

    release, key = good_release
    signed = tmp_path / release.name
    shutil.copytree(release, signed)
    resign_release(signed, [key], edit=lambda catalogue: bound.edit(catalogue, past))
    with pytest.raises(CatalogueError) as info:
        verify_release(signed, load_trust(trust_dir(tmp_path / "trust", key)))
    assert info.value.path == str(signed / "catalogue" / bound.file), info.value.one_line()
    assert line.endswith(f": {info.value.message}"), (line, info.value.one_line())


@pytest.mark.parametrize("case", [c for c, b in BOUNDS.items() if b.past is None])
def test_a_catalogue_exactly_at_a_tool_schema_bound_builds_and_verifies(
    tmp_path: Path, keypair: KeyPair, trust: Path, case: str
) -> None:
    bound = BOUNDS[case]
    source = source_with(tmp_path, lambda root: bound.edit(root, bound.bound))
    # a state at a bound of the schema is not the packaged example's, which build checks: this source has none
    (source / "examples" / "confirmed-state.json").unlink()
    built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "out", "--json")
    assert built.exit_code == 0, built.output
    verified = pack("verify", json.loads(built.stdout)["release"], "--trust", trust)
    assert verified.exit_code == 0, verified.output


# --------------------------------------------------------------------------- every bound at once, run over stdio

LONG_FIELD = "f" * MAX_NAME_CHARS


def at_every_bound(root: Path) -> None:
    """Release id, workflow, validator and adapter keys of MAX_NAME_CHARS with versions of MAX_VERSION_CHARS (the
    catalogue's own is MAX_VERSION_CHARS - 1), MAX_LISTED_NAMES capabilities, validator capabilities and pinned
    adapters, MAX_CONFIRMED_FIELDS state fields (one named with MAX_NAME_CHARS), a step reading MAX_STEP_INPUTS
    artifacts and validated by the validator keyed with MAX_NAME_CHARS."""
    release_id(root, MAX_NAME_CHARS)
    workflow_key(root, MAX_NAME_CHARS)
    validator_key(root, MAX_NAME_CHARS)
    pinned_adapters(root, MAX_LISTED_NAMES)
    adapter_key(root, MAX_NAME_CHARS)
    workflow_capabilities(root, MAX_LISTED_NAMES)
    validator_capabilities(root, MAX_LISTED_NAMES)
    state_fields(root, MAX_CONFIRMED_FIELDS - 1)
    state_field_name(root, MAX_NAME_CHARS)
    step_inputs(root, MAX_STEP_INPUTS)


def full_state(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for every top-level field the schema names."""
    values = {**example_state("1.2.0"), "research_route": "desk-research", LONG_FIELD: True}
    values.update({name: "x" for name in schema["properties"] if name.startswith("extra_")})
    assert len(values) == len(schema["properties"]) == MAX_CONFIRMED_FIELDS
    return values


class EveryBoundUser(ExamplesScenario):
    """Confirms the state at every bound, takes desk research, and writes the shipped examples or a line each."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__("desk-research")
        self.state = state

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        return dict(self.state)

    def author(self, ctx: Any) -> str:
        if ctx.step_id == "desk-research":
            return examples("1.2.0")(ctx.output.id, ctx.output.media_type)
        return f"# {ctx.output.id}\n"


def test_a_catalogue_at_every_bound_runs_to_the_end_over_stdio(tmp_path: Path, keypair: KeyPair, trust: Path) -> None:
    """Every step through the real server: the 128-character validator key reported on, 64 inputs bound."""
    source = source_with(tmp_path, at_every_bound)
    release = build_release(source, tmp_path / "built", [keypair])
    schema = json.loads((source / STATE_SCHEMA).read_text("utf-8"))
    host = HostProfile(
        adapter_id=id_of(KEY_CHARS),
        adapter_version=version_of(MAX_VERSION_CHARS),
        capabilities=tuple(tomllib.loads((source / WORKFLOW).read_text("utf-8"))["required_capabilities"]),
        validator_capabilities=(ISOLATED, *(f"vcap-{i}" for i in range(MAX_LISTED_NAMES - 1))),
    )
    args = serve_module_args(release, trust, tmp_path / "state")
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    async def run() -> RunResult:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            through = client_caller(client)  # the SDK checks every result against the tool's output schema

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await through(tool, arguments)
                calls.append((tool, arguments, result))
                return result

            project = tmp_path / "project"
            project.mkdir()
            harness = WorkflowHarness(call, EveryBoundUser(full_state(schema)), project_dir=project, host=host)
            return await harness.run(await harness.start("research"))

    finished = anyio.run(run)
    assert finished.status == "completed", finished
    started = calls[0][2]
    assert len(started["release"]["id"]) == MAX_NAME_CHARS
    assert len(started["workflow"]["version"]) == MAX_VERSION_CHARS
    assert {tool for tool, _, _ in calls} == {
        START_WORKFLOW,
        CONTINUE_WORKFLOW,
        PREPARE_STEP_VALIDATION,
        SUBMIT_STEP_VALIDATION,
    }
    submits = {a["validation_bundle"]["step_id"]: a for t, a, _ in calls if t == SUBMIT_STEP_VALIDATION}
    assert list(submits)[-6:] == ["desk-research", *(f"produce-{k}" for k in range(4)), "read-all"], list(submits)
    (read_all,) = [
        a for t, a, r in calls if t == PREPARE_STEP_VALIDATION and r["validation_bundle"]["step_id"] == "read-all"
    ]
    assert len(read_all["inputs"]) == MAX_STEP_INPUTS
    long_key = f"{id_of(KEY_CHARS)}@{version_of(MAX_VERSION_CHARS)}"
    assert len(long_key) == MAX_NAME_CHARS
    for step, keys in (("desk-research", {long_key, "decision-critic@1.0.0"}), ("read-all", {long_key})):
        assert {f"{r['validator_id']}@{r['version']}" for r in submits[step]["reports"]} == keys, step
