"""What a release engineer meets in a catalogue source beside its definitions: the version a rebuild should
become, worked examples that no longer match their schemas, and schema files no workflow references.

Every test drives the installed ``rimthan-pack`` console script in a subprocess, on a source
``rimthan-pack init`` made (or a copy of a packaged catalogue) and real keys.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import anyio
import pytest
from rimthan_host import Question
from rimthan_host.harness import CatalogueExamples, HarnessError, RunResult, WorkflowHarness, client_caller
from rimthan_host.protocol import HostProfile
from rimthan_workflow_registry.limits import MAX_VERSION_CHARS
from support.pack_cli import BIN, asks_audience, init_scaffold, pack
from support.processes import stdio_client_process
from support.refusals import Refusal, refusal, refusals
from support.releases import KeyPair

PACKAGED = Path(__file__).resolve().parents[2] / "catalogues" / "research-decision"


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_scaffold(tmp_path_factory.mktemp("scaffold"))


def _at_version(scaffold: Path, tmp_path: Path, version: str) -> Path:
    """A copy of the scaffold in the version folder ``my-flow/<version>``, its catalogue.toml saying so."""
    source = tmp_path / "my-flow" / version
    shutil.copytree(scaffold, source)
    toml = source / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace('version = "0.1.0"', f'version = "{version}"', 1), "utf-8")
    return source


def _builds(source: Path, keypair: KeyPair, out: Path) -> str:
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 0, built.stderr
    return built.stderr


def _refused(source: Path, keypair: KeyPair, out: Path) -> Refusal:
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 1, built.stderr
    return refusal(built.stderr)


# --------------------------------------------------------------------------- the version a rebuild should become


# (the version built twice, the one the next step says to copy it to): by the one semantic-version rule
NEXT_VERSIONS = [
    ("2.0.0-rc.1", "2.0.0-rc.2"),
    ("1.0.0-beta", "1.0.0-beta.1"),
    ("1.0.0-rc.9.x", "1.0.0-rc.10"),
    ("0.3.0+build.7", "0.3.1"),
    ("1.0.0-alpha.1+nightly", "1.0.0-alpha.2"),
]


@pytest.mark.parametrize(("version", "bumped"), NEXT_VERSIONS)
def test_rebuilding_a_pre_release_says_to_copy_it_to_the_next_version_which_builds(
    scaffold: Path, keypair: KeyPair, tmp_path: Path, version: str, bumped: str
) -> None:
    """A pre-release's next step named NEW_VERSION (its own regex took only MAJOR.MINOR.PATCH); now the next one."""
    source, out = _at_version(scaffold, tmp_path, version), tmp_path / "rel"
    _builds(source, keypair, out)

    said = _refused(source, keypair, out)

    new = tmp_path / "my-flow" / bumped
    assert said.code == "release_exists"
    assert said.next == (
        f"releases are immutable: copy the source to a new version folder (cp -r {source} {new}), "
        f'set version = "{bumped}" under [catalogue] in its catalogue.toml, and build that'
    )
    copied = _at_version(scaffold, tmp_path, bumped)  # the step as written: a copy, its version set
    assert copied == new
    _builds(copied, keypair, out)
    assert sorted(p.name for p in out.iterdir()) == [f"my-flow-{v}" for v in sorted((version, bumped))]


AT_THE_BOUND = "1.0.0-" + "a" * (MAX_VERSION_CHARS - 8)  # with ".N" below, MAX_VERSION_CHARS long


def test_a_pre_release_at_the_version_bound_gets_a_next_version_build_takes_or_none_and_why(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """At 64 characters, -rc.9 bumped to -rc.10 is past the bound: the step named a version build refuses."""
    fits, past = f"{AT_THE_BOUND}.1", f"{AT_THE_BOUND}.9"
    assert len(fits) == len(past) == MAX_VERSION_CHARS
    out = tmp_path / "rel"
    source = _at_version(scaffold, tmp_path, past)
    _builds(source, keypair, out)

    said = _refused(source, keypair, out)

    assert said.code == "release_exists"
    assert said.next == (
        f"releases are immutable: copy the source to a new version folder named as a version above {past} and "
        f"set that version under [catalogue] in its catalogue.toml; none is suggested: the next version, "
        f"{AT_THE_BOUND}.10, is {MAX_VERSION_CHARS + 1} characters, past the {MAX_VERSION_CHARS} a version may "
        "have in a tool call (MAX_VERSION_CHARS), so choose a shorter one (1.0.0, the release it leads to, sorts "
        "above every pre-release of it)"
    )
    _builds(_at_version(scaffold, tmp_path, "1.0.0"), keypair, out)  # the hint builds
    source = _at_version(scaffold, tmp_path, fits)
    _builds(source, keypair, out)

    said = _refused(source, keypair, out)  # at the bound, a bump that keeps the length is still suggested

    assert f'set version = "{AT_THE_BOUND}.2"' in said.next
    _builds(_at_version(scaffold, tmp_path, f"{AT_THE_BOUND}.2"), keypair, out)


# --------------------------------------------------------------------------- worked examples


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), "utf-8")


# an example slip: the file, the text replaced and its replacement, the code, the end of the error line
EXAMPLE_SLIPS = {
    "schema": (
        "summary.json",
        '"outcome": "Replace',
        '"result": "Replace',
        "json_schema_failed",
        "would be refused at prepare against schemas/summary.schema.json at JSON pointer '/': "
        "Additional properties are not allowed ('result' was unexpected) (1 more problem(s) after it)",
    ),
    "pointer": (
        "summary.json",
        '"Announce the change at the next meeting"',
        '""',
        "json_schema_failed",
        "would be refused at prepare against schemas/summary.schema.json at JSON pointer '/next_steps/0': "
        "'' should be non-empty",
    ),
    "not json": (
        "summary.json",
        '  "goal"',
        '  "goal": 1,\n  "goal"',
        "json_parse_failed",
        "would be refused at prepare: is not valid JSON: duplicate JSON key 'goal'",
    ),
    "state": (
        "confirmed-state.json",
        '"goal"',
        '"aim"',
        "confirmed_state_invalid",
        "the example does not satisfy the workflow's confirmed-state schema at JSON pointer '/': "
        "Additional properties are not allowed ('aim' was unexpected) (missing fields: goal) "
        "(schemas/confirmed-state.schema.json, workflow my-flow@0.1.0)",
    ),
}


@pytest.mark.parametrize("slip", sorted(EXAMPLE_SLIPS))
def test_an_example_a_run_would_refuse_is_refused_at_build_naming_the_file_and_pointer(
    scaffold: Path, keypair: KeyPair, tmp_path: Path, slip: str
) -> None:
    """An example that no longer matched its schema built, signed and shipped; found when a harness submitted it."""
    name, old, new, code, said_end = EXAMPLE_SLIPS[slip]
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    example = source / "examples" / name
    _edit(example, old, new)

    said = _refused(source, keypair, out)

    assert not out.exists()
    assert said.error.startswith(f"error: {code}: {example}: ")
    assert said.error.endswith(said_end)
    assert said.next.startswith(f"fix examples/{name}" if code != "json_parse_failed" else f"make examples/{name}")
    _edit(example, new, old)
    _builds(source, keypair, out)


def test_an_example_past_its_outputs_max_bytes_is_refused(scaffold: Path, keypair: KeyPair, tmp_path: Path) -> None:
    """prepare refuses an artifact past max_bytes (artifact_too_large): so does the build, for its example."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    size = (source / "examples" / "summary.json").stat().st_size
    flow = source / "workflows" / "my-flow.toml"
    head, _, tail = flow.read_text("utf-8").rpartition("max_bytes = 65536")  # the summary's, the last output
    flow.write_text(f"{head}max_bytes = {size - 1}{tail}", "utf-8")

    said = _refused(source, keypair, out)

    assert said.error.startswith(f"error: artifact_too_large: {source / 'examples' / 'summary.json'}: ")
    assert said.error.endswith(f"would be refused at prepare: is {size} bytes; at most {size - 1}")


def _second_workflow(source: Path) -> None:
    """A second workflow in ``source``, second-flow, whose confirmed state is a ``topic`` (the first one's a goal)."""
    flow = (source / "workflows" / "my-flow.toml").read_text("utf-8")
    flow = flow.replace('id = "my-flow"', 'id = "second-flow"', 1).replace(
        "schemas/confirmed-state.schema.json", "schemas/second-state.schema.json", 1
    )
    (source / "workflows" / "second-flow.toml").write_text(flow, "utf-8")
    state = (source / "schemas" / "confirmed-state.schema.json").read_text("utf-8")
    (source / "schemas" / "second-state.schema.json").write_text(state.replace('"goal"', '"topic"'), "utf-8")
    _edit(
        source / "catalogue.toml",
        '"workflows/my-flow.toml",',
        '"workflows/my-flow.toml", "workflows/second-flow.toml",',
    )


def test_each_workflow_has_its_examples_in_a_folder_of_its_own(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """One examples/confirmed-state.json could not be an example for two workflows whose states differ.

    examples/ serves every workflow without a folder of its own (a one-workflow catalogue's layout, unchanged);
    examples/<workflow-id>/ holds that workflow's examples, each checked against that workflow's schemas.
    """
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    _second_workflow(source)
    flat = source / "examples" / "confirmed-state.json"

    said = _refused(source, keypair, out)

    assert said.error.startswith(f"error: confirmed_state_invalid: {flat}: ")
    assert said.error.endswith("(schemas/second-state.schema.json, workflow second-flow@0.1.0)")
    own = source / "examples" / "second-flow"
    own.mkdir()
    (own / "confirmed-state.json").write_text('{"topic": 7}\n', "utf-8")
    (own / "summary.json").write_text((source / "examples" / "summary.json").read_text("utf-8"), "utf-8")

    said = _refused(source, keypair, out)  # its own example, checked against its own schema

    assert said.error.startswith(f"error: confirmed_state_invalid: {own / 'confirmed-state.json'}: ")
    assert "at JSON pointer '/topic': 7 is not of type 'string'" in said.error
    (own / "confirmed-state.json").write_text('{"topic": "Weekly meetings"}\n', "utf-8")
    (own / "summary.json").write_text('{"goal": "x"}\n', "utf-8")

    said = _refused(source, keypair, out)  # the folder holds all of second-flow's examples: the flat one is not used

    assert said.error.startswith(f"error: json_schema_failed: {own / 'summary.json'}: ")
    (own / "summary.json").write_text((source / "examples" / "summary.json").read_text("utf-8"), "utf-8")
    _builds(source, keypair, out)


def test_the_host_kits_examples_scenario_reads_each_workflows_own_folder_through_the_real_server(
    scaffold: Path, keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """CatalogueExamples read examples/ for every workflow: second-flow started with my-flow's state and was refused.

    Given the catalogue's examples/ folder, it takes examples/<workflow-id>/ when that holds a file, else
    examples/ itself - the packager's rule - so one scenario drives both workflows of a built release.
    """
    source, releases = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    _second_workflow(source)
    own = source / "examples" / "second-flow"
    own.mkdir()
    (own / "confirmed-state.json").write_text('{"topic": "Weekly meetings"}\n', "utf-8")
    summary = (source / "examples" / "summary.json").read_text("utf-8")
    (own / "summary.json").write_text(summary.replace('"Announce the change', '"Tell the team', 1), "utf-8")
    assert (own / "summary.json").read_text("utf-8") != summary  # which folder a run's file came from shows
    _builds(source, keypair, releases)
    release = releases / "my-flow-0.1.0"
    args = ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(tmp_path / "state")]

    async def walk(workflow: str) -> RunResult:
        with (tmp_path / f"{workflow}.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                examples = CatalogueExamples({"0.1.0": release / "catalogue" / "examples"})
                host = HostProfile(writable_paths=(".claude/*", ".rimthan/*", "out/*"))
                project = tmp_path / workflow
                with WorkflowHarness(client_caller(client), examples, project_dir=project, host=host) as harness:
                    return await harness.run(await harness.start(workflow, "0.1.0"))

    for workflow, examples in (("my-flow", source / "examples"), ("second-flow", own)):
        finished = anyio.run(walk, workflow)
        assert finished.status == "completed", finished
        written = (tmp_path / workflow / "out" / "summary.json").read_text("utf-8")
        assert written == (examples / "summary.json").read_text("utf-8")


# --------------------------------------------------------------------------- schema files no workflow references


def _schema_copied_as_sumary(source: Path) -> Path:
    """The summary schema edited as a new, misspelt file (the workflow still names the old one); the schemas."""
    schemas = source / "schemas"
    shutil.copyfile(schemas / "summary.schema.json", schemas / "sumary.schema.json")
    return schemas


def test_a_schema_file_no_workflow_references_is_refused_naming_the_reference_it_likely_meant(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """The summary schema edited as a new file while the workflow still names the old one: runs check the old."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    schemas = _schema_copied_as_sumary(source)

    said = _refused(source, keypair, out)

    assert not out.exists()
    assert said.error == (
        f"error: catalogue_invalid: {schemas / 'sumary.schema.json'}: no workflow references this JSON Schema "
        "(closest referenced name: schemas/summary.schema.json), so it would ship, signed, and never check anything"
    )
    assert said.next == (
        "if the reference to schemas/summary.schema.json meant this file, change it to schemas/sumary.schema.json; "
        'otherwise delete it, or, to ship it on purpose, add a top-level "x-rimthan-unreferenced": "<why it ships>" '
        "to it"
    )
    (schemas / "sumary.schema.json").unlink()
    kept = '{"x-rimthan-unreferenced": "published for harness authors", "type": "object"}\n'
    (schemas / "notes.schema.json").write_text(kept, "utf-8")
    _builds(source, keypair, out)
    assert (out / "my-flow-0.1.0" / "catalogue" / "schemas" / "notes.schema.json").read_text("utf-8") == kept


def test_several_unreferenced_schema_files_are_one_failure_each_with_its_file_and_closest_name(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """They were listed in one error line ("; also ..."), one next step for all: now each is its own failure."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    schemas = _schema_copied_as_sumary(source)
    (schemas / "x.json").write_text('{"type": "object"}\n', "utf-8")

    built = pack("build", source, "--key", keypair.private_path, "--out", out)

    assert built.returncode == 1 and not out.exists()
    keep = 'delete it, or, to ship it on purpose, add a top-level "x-rimthan-unreferenced": "<why it ships>" to it'
    assert refusals(built.stderr) == [
        Refusal(
            f"error: catalogue_invalid: {schemas / 'sumary.schema.json'}: no workflow references this JSON Schema "
            "(closest referenced name: schemas/summary.schema.json), so it would ship, signed, and never check "
            "anything",
            "if the reference to schemas/summary.schema.json meant this file, change it to "
            f"schemas/sumary.schema.json; otherwise {keep}",
        ),
        Refusal(
            f"error: catalogue_invalid: {schemas / 'x.json'}: no workflow references this JSON Schema, "
            "so it would ship, signed, and never check anything",
            f"reference it from a workflow (confirmed_state_schema or an output's schema), {keep}",
        ),
    ]
    checked = pack("check", source, "--json", cwd=tmp_path)  # check says the same, and --json gives each failure
    assert checked.returncode == 1 and refusals(checked.stderr) == refusals(built.stderr)
    said = json.loads(checked.stdout)
    assert said["error"] == said["errors"][0]
    assert [(e["path"], e["details"]) for e in said["errors"]] == [
        (
            str(schemas / "sumary.schema.json"),
            {"schema": "schemas/sumary.schema.json", "closest_referenced": "schemas/summary.schema.json"},
        ),
        (
            str(schemas / "x.json"),
            {"schema": "schemas/x.json", "closest_referenced": None},
        ),
    ]


# --------------------------------------------------------------------------- rimthan-pack check


def test_check_makes_builds_checks_without_keys_and_writes_nothing(scaffold: Path, tmp_path: Path) -> None:
    """A release engineer checks a source (in CI, before a build with keys) and gets the build's own answer."""
    source = _at_version(scaffold, tmp_path, "0.1.0")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    checked = pack("check", source, cwd=tmp_path)

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == (
        f"checked my-flow@0.1.0 at {source}: 1 workflow(s), 2 worked example(s), 15 files; build would accept it\n"
    )
    as_json = pack("check", source, "--json", cwd=tmp_path)
    assert as_json.returncode == 0 and '"examples": 2' in as_json.stdout and '"ok": true' in as_json.stdout
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    _edit(source / "examples" / "summary.json", '"Announce the change at the next meeting"', '""')

    refused = pack("check", source, cwd=tmp_path)

    assert refused.returncode == 1
    said = refusal(refused.stderr)
    assert said.code == "json_schema_failed" and "at JSON pointer '/next_steps/0'" in said.error
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("version", ["1.2.0", "1.3.0"])
def test_each_packaged_catalogue_has_a_valid_example_for_every_output_of_each_workflow(
    version: str, tmp_path: Path
) -> None:
    """What the demo, the load test and the benchmarks submit is what a run accepts, output by output."""
    source = PACKAGED / version
    catalogue = tomllib.loads((source / "catalogue.toml").read_text("utf-8"))
    wanted = 0
    for listed in catalogue["workflows"]:
        workflow = tomllib.loads((source / listed).read_text("utf-8"))
        outputs = [o["id"] for s in workflow["steps"] for o in s.get("outputs", [])]
        wanted += 1 + len([o for o in outputs if o != "workspace-manifest"])  # and its confirmed state

    checked = pack("check", source, "--json", cwd=tmp_path)

    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["examples"] == wanted


# --------------------------------------------------------------------------- files in examples/ no workflow takes


def test_a_file_in_examples_no_workflow_takes_is_refused_naming_the_example_it_likely_meant(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """A misspelt example (or one with the wrong extension) was ignored: built, signed, shipped and never checked."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    examples = source / "examples"
    (examples / "summary.json").rename(examples / "sumary.json")

    said = _refused(source, keypair, out)

    assert not out.exists()
    assert said.error == (
        f"error: catalogue_invalid: {examples / 'sumary.json'}: no workflow takes this file as a worked example "
        "(closest example name: examples/summary.json), so it would ship, signed, and never be checked"
    )
    assert said.next == (
        "if it was meant as examples/summary.json, rename it to that; otherwise delete it (an example is "
        "confirmed-state.json, answers.json or <output-id>.json|.md, in examples/<workflow-id>/ or, for a "
        "workflow without a folder of its own, examples/)"
    )
    (examples / "sumary.json").rename(examples / "summary.json")
    (examples / "foo.json").write_text("{}\n", "utf-8")
    (examples / "summary.md").write_text("# Summary\n", "utf-8")  # the output is JSON

    built = pack("build", source, "--key", keypair.private_path, "--out", out)  # one failure per file

    each = refusals(built.stderr)
    assert built.returncode == 1
    assert [s.error.split(": ", 3)[2] for s in each] == [str(examples / "foo.json"), str(examples / "summary.md")]
    assert each[0].next.startswith("delete it (")
    assert each[1].error.endswith(
        "no workflow takes this file as a worked example (closest example name: examples/summary.json), so it "
        "would ship, signed, and never be checked"
    )
    assert each[1].next.startswith("if it was meant as examples/summary.json, rename it to that; otherwise delete it")
    checked = pack("check", source, cwd=tmp_path)  # check says what build says
    assert checked.returncode == 1 and refusals(checked.stderr) == each
    (examples / "foo.json").unlink()
    (examples / "summary.md").unlink()
    _builds(source, keypair, out)


@pytest.mark.parametrize("readme", ["README", "README.md", "readme.txt", "my-flow/README.md"])
def test_a_readme_in_examples_ships_signed_as_documentation_and_takes_no_examples(
    scaffold: Path, keypair: KeyPair, tmp_path: Path, readme: str
) -> None:
    """A README beside the examples was refused as a stray example; it is documentation, as anywhere in a source.

    One in examples/<workflow-id>/ does not give the workflow a folder of its own: its examples stay in examples/.
    """
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    (source / "examples" / readme).parent.mkdir(exist_ok=True)
    (source / "examples" / readme).write_text("# Worked examples\n\nOne fictional decision.\n", "utf-8")

    checked = pack("check", source, "--json", cwd=tmp_path)

    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["examples"] == 2  # the same examples, still checked
    _builds(source, keypair, out)
    release = out / "my-flow-0.1.0"
    assert f'"path":"examples/{readme}"' in (release / "manifest.json").read_text("utf-8")  # listed and signed
    assert pack("verify", release, "--trust", keypair.public_path.parent).returncode == 0


@pytest.mark.parametrize("name", ["Thumbs.db", "my-flow/desktop.ini"])
def test_a_file_browsers_file_in_examples_is_refused_saying_to_delete_it(
    scaffold: Path, keypair: KeyPair, tmp_path: Path, name: str
) -> None:
    """Thumbs.db or desktop.ini in examples/ was a stray example ("closest example name"); anywhere else it shipped,
    signed. Bytes nobody wrote for the release: refused wherever they are, as an editor's backup is (and macOS's
    .DS_Store, a hidden name)."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    (source / "examples" / name).parent.mkdir(exist_ok=True)
    (source / "examples" / name).write_bytes(b"\x00\x01 not written for the release")

    refused = _refused(source, keypair, out)

    assert refused.error.startswith(f"error: path_unsafe: {source / 'examples' / name}: "), refused
    assert refused.error.endswith("Thumbs.db or desktop.ini) would ship in the release"), refused
    assert refused.next.startswith("delete it, or move it out"), refused
    assert not out.exists()
    (source / "examples" / name).unlink()
    _builds(source, keypair, out)


def test_examples_a_workflow_with_a_folder_of_its_own_no_longer_takes_are_refused(
    scaffold: Path, keypair: KeyPair, tmp_path: Path
) -> None:
    """Examples moved to examples/<workflow-id>/ while copies stay in examples/, or a folder named after no workflow."""
    source, out = _at_version(scaffold, tmp_path, "0.1.0"), tmp_path / "rel"
    examples = source / "examples"
    shutil.copytree(examples, tmp_path / "flat")
    shutil.copytree(tmp_path / "flat", examples / "my-flow")  # every workflow has its own folder: examples/ unread

    built = pack("build", source, "--key", keypair.private_path, "--out", out)

    first, second = refusals(built.stderr)
    assert first.error.startswith(f"error: catalogue_invalid: {examples / 'confirmed-state.json'}: ")
    assert second.error.startswith(f"error: catalogue_invalid: {examples / 'summary.json'}: ")
    assert "(closest example name: examples/my-flow/summary.json)" in second.error
    (examples / "confirmed-state.json").unlink()
    (examples / "summary.json").unlink()
    (examples / "my-flow").rename(examples / "my-flw")

    built = pack("build", source, "--key", keypair.private_path, "--out", out)  # a folder named after no workflow

    said = refusals(built.stderr)  # its files are no one's examples
    assert said[0].error.startswith(f"error: catalogue_invalid: {examples / 'my-flw' / 'confirmed-state.json'}: ")
    (examples / "my-flw").rename(examples / "my-flow")
    _builds(source, keypair, out)


# --------------------------------------------------------------------------- answers a worked example records


def test_the_examples_scenario_answers_any_question_its_worked_example_records(
    scaffold: Path, keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """CatalogueExamples knew only research_route: a catalogue asking ``audience`` failed at its question.

    The worked example records the owner's answers in answers.json (checked at build: a question of the workflow,
    one of its choices); the scenario answers from it, and refuses, naming the file, a question it holds no answer
    for. Through the real server and a built, signed release.
    """
    source = _at_version(scaffold, tmp_path, "0.1.0")
    asks_audience(source)
    answers = source / "examples" / "answers.json"

    async def walk(release: Path, name: str) -> WorkflowHarness | HarnessError:
        args = ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(tmp_path / name)]
        with (tmp_path / f"{name}.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                examples = CatalogueExamples({"0.1.0": release / "catalogue" / "examples"})
                host = HostProfile(writable_paths=(".claude/*", ".rimthan/*", "out/*"))
                harness = WorkflowHarness(client_caller(client), examples, project_dir=tmp_path / name, host=host)
                with harness:
                    try:
                        await harness.run(await harness.start("my-flow", "0.1.0"))
                    except HarnessError as exc:  # (inside: the SDK's task group would wrap it)
                        return exc
                return harness

    _builds(source, keypair, tmp_path / "none")  # (answers are optional: a harness author may script them)
    none = anyio.run(walk, tmp_path / "none" / "my-flow-0.1.0", "none")
    examples = tmp_path / "none" / "my-flow-0.1.0" / "catalogue" / "examples"
    assert isinstance(none, HarnessError) and str(none) == (
        f"no scripted answer for 'audience': the worked examples in {examples} record none "
        "(add it to answers.json there, or give it in the scenario's answers)"
    )

    answers.write_text('{"audiance": "team"}\n', "utf-8")
    said = _refused(source, keypair, tmp_path / "typo")
    assert said.error == (
        f"error: catalogue_invalid: {answers}: 'audiance' is no question of workflow my-flow@0.1.0 "
        "(its questions: audience): a harness answering it would be refused"
    )
    answers.write_text('{"audience": "everyone"}\n', "utf-8")
    said = _refused(source, keypair, tmp_path / "choice")
    assert said.error.endswith(
        "'everyone' is not one of the choices of 'audience' (team, board): a harness answering it would be refused"
    )

    answers.write_text('{"audience": "board"}\n', "utf-8")
    _builds(source, keypair, tmp_path / "rel")
    harness = anyio.run(walk, tmp_path / "rel" / "my-flow-0.1.0", "answered")
    assert isinstance(harness, WorkflowHarness)
    assert harness.record.final is not None and harness.record.final["status"] == "completed"
    assert harness.state.values["audience"] == "board"
    scripted = CatalogueExamples({"0.1.0": tmp_path}, answers={"audience": "team"})
    assert (
        scripted.answer(Question.of({"field": "audience"}), "0.1.0", workflow="my-flow") == "team"
    )  # the caller's first
