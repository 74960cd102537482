"""The host kit's examples scenario (``CatalogueExamples``) on catalogues a harness author builds.

Each test builds a catalogue from ``rimthan-pack init``'s scaffold with the installed ``rimthan-pack``, signs it
with a real key, and drives it through the real ``rimthan-mcp`` server with ``WorkflowHarness``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import anyio
import pytest
from rimthan_host import Question, StepOutput
from rimthan_host.harness import (
    AuthorContext,
    CatalogueExamples,
    HarnessError,
    RunResult,
    WorkflowHarness,
    client_caller,
)
from rimthan_host.protocol import HostProfile
from support.pack_cli import BIN, asks_audience, edit_text, init_scaffold, pack
from support.processes import stdio_client_process
from support.refusals import refusal
from support.releases import KeyPair, trust_dir

HOST = HostProfile(writable_paths=(".claude/*", ".rimthan/*", "out/*"))


def _build(source: Path, keypair: KeyPair, out: Path) -> Path:
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 0, built.stderr
    return out / f"{source.parent.name}-{source.name}"


def _walk(release: Path, trust: Path, project: Path, workflow: str, version: str | None = None) -> RunResult:
    """A run of ``workflow`` (an id or an alias) on ``release``, scripted from the release's own examples."""
    args = ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(project / ".state")]

    async def walk() -> RunResult:
        with (project.parent / f"{project.name}.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                examples = CatalogueExamples({"0.1.0": release / "catalogue" / "examples"})
                with WorkflowHarness(client_caller(client), examples, project_dir=project, host=HOST) as harness:
                    return await harness.run(await harness.start(workflow, version))

    return anyio.run(walk)


def _starts_served(project: Path) -> list[dict[str, object]]:
    """The verifier's log records (``call served`` / ``call refused``) of the starts the run's harness sent."""
    lines = (project.parent / f"{project.name}.log").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [r for r in records if r.get("tool") == "rimthan.start_workflow"]


def test_a_start_by_alias_reads_the_examples_of_the_workflow_the_alias_names(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """``start("flow")`` looked for examples/flow/ (the alias), missed examples/my-flow/ and read examples/.

    The scenario resolves the alias to the workflow id from its catalogue's workflow files, with or without a
    version asked for.
    """
    source = init_scaffold(tmp_path)
    edit_text(source / "workflows" / "my-flow.toml", "entry_aliases = []", 'entry_aliases = ["flow"]')
    own = source / "examples" / "my-flow"
    own.mkdir()
    for name in ("confirmed-state.json", "summary.json"):
        shutil.move(source / "examples" / name, own / name)
    release = _build(source, keypair, tmp_path / "rel")

    for version in ("0.1.0", None):
        project = tmp_path / f"project-{version}"
        finished = _walk(release, trust, project, "flow", version)
        assert finished.status == "completed", finished
        assert finished.workflow == "my-flow"
        assert (project / "out" / "summary.json").read_bytes() == (own / "summary.json").read_bytes()


def test_a_start_with_a_version_is_one_start_call_to_the_verifier(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """Every ``harness.start`` sent a start with no facts first, to learn what an alias names: one extra verifier
    call per run, in the operator's log and in every benchmark. With a version, the start is the only call; without
    one, the no-facts start that asks the newest version is kept (one before the run's)."""
    source = init_scaffold(tmp_path)
    edit_text(source / "workflows" / "my-flow.toml", "entry_aliases = []", 'entry_aliases = ["flow"]')
    release = _build(source, keypair, tmp_path / "rel")

    for name in ("my-flow", "flow"):
        project = tmp_path / f"project-{name}"
        assert _walk(release, trust, project, name, "0.1.0").status == "completed"
        [start] = _starts_served(project)
        assert start["status"] == "active", start

    project = tmp_path / "project-newest"
    assert _walk(release, trust, project, "flow").status == "completed"
    assert [r["status"] for r in _starts_served(project)] == ["blocked", "active"]


def test_a_workflow_that_requires_no_facts_starts_with_a_version(keypair: KeyPair, trust: Path, tmp_path: Path) -> None:
    """The harness's start with no facts (sent before every start) really started a run of a workflow that requires
    no facts, and ``harness.start(name, version)`` failed ("did not name its workflow and version"): it starts."""
    source = init_scaffold(tmp_path)
    edit_text(source / "schemas" / "confirmed-state.schema.json", '"required": [\n    "goal"\n  ],', '"required": [],')
    release = _build(source, keypair, tmp_path / "rel")

    project = tmp_path / "project"
    finished = _walk(release, trust, project, "my-flow", "0.1.0")

    assert finished.status == "completed", finished
    assert [r["status"] for r in _starts_served(project)] == ["active"]


def test_a_workflow_that_requires_no_facts_starts_without_a_version(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """``harness.start(name)`` asks the verifier which version a start without one starts, by a start with no facts:
    for a workflow that requires none, that start is ``active``, not ``blocked``, and the harness refused with "a start
    of my-flow with no facts did not name its version" though the answer names it. It starts the version named."""
    source = init_scaffold(tmp_path)
    edit_text(source / "schemas" / "confirmed-state.schema.json", '"required": [\n    "goal"\n  ],', '"required": [],')
    release = _build(source, keypair, tmp_path / "rel")

    project = tmp_path / "project"
    finished = _walk(release, trust, project, "my-flow")

    assert finished.status == "completed" and finished.release == "my-flow@0.1.0", finished
    assert [r["status"] for r in _starts_served(project)] == ["active", "active"]


def test_the_scenario_reads_no_workflow_file_outside_its_catalogue(tmp_path: Path) -> None:
    """The scenario reads the workflow files ``catalogue.toml`` lists to resolve an alias: a path out of the
    catalogue is refused, naming it, not read."""
    source = init_scaffold(tmp_path)
    (tmp_path / "outside.toml").write_text((source / "workflows" / "my-flow.toml").read_text("utf-8"), "utf-8")
    edit_text(source / "catalogue.toml", '"workflows/my-flow.toml"', '"../../../outside.toml"')

    scenario = CatalogueExamples({"0.1.0": source / "examples"})

    with pytest.raises(HarnessError, match=r"names in .*catalogue\.toml lists '\.\./\.\./\.\./outside\.toml'"):
        scenario.initial_state("0.1.0", workflow="flow")


def test_examples_keyed_by_the_release_version_say_the_scenario_takes_workflow_versions(
    keypair: KeyPair, tmp_path: Path
) -> None:
    """A release bumped to 0.2.0 whose workflow stays at 0.1.0, its examples keyed by the release's version (what
    the guide's "each version's examples folder" read as): before, "no examples for workflow version '0.1.0'",
    naming neither the workflow, the version the scenario meant nor the versions it was given."""
    source = init_scaffold(tmp_path)
    bumped = tmp_path / "my-flow" / "0.2.0"
    shutil.copytree(source, bumped)
    edit_text(bumped / "catalogue.toml", 'version = "0.1.0"', 'version = "0.2.0"')
    release = _build(bumped, keypair, tmp_path / "rel")
    scenario = CatalogueExamples({"0.2.0": release / "catalogue" / "examples"})

    with pytest.raises(HarnessError) as refused:
        scenario.initial_state("0.1.0", workflow="my-flow")

    assert str(refused.value) == (
        "no examples for workflow my-flow at version '0.1.0': the scenario maps workflow versions (the version in "
        "workflows/my-flow.toml, which a release's own version need not equal) to examples folders, and it names "
        "'0.2.0'"
    )


@pytest.mark.parametrize("output", ["answers", "confirmed-state"])
def test_an_output_named_as_the_worked_examples_own_files_is_refused_at_build_and_by_the_scenario(
    keypair: KeyPair, tmp_path: Path, output: str
) -> None:
    """A JSON output ``answers`` (or ``confirmed-state``) has its example in answers.json, the owner's answers' file.

    The build checked that one file as the answers (or the state) and refused it for a reason that named neither
    the output nor the collision; a scenario given such a release would submit the answers as the artifact.
    """
    source = init_scaffold(tmp_path)
    flow = source / "workflows" / "my-flow.toml"
    edit_text(flow, 'id = "summary"', f'id = "{output}"')
    example = source / "examples" / f"{output}.json"
    if output == "answers":
        shutil.move(source / "examples" / "summary.json", example)
    else:
        (source / "examples" / "summary.json").unlink()

    built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "rel")

    assert built.returncode == 1, built.stderr
    said = refusal(built.stderr)
    assert said.error == (
        f"error: catalogue_invalid: {flow}: output {output!r} of step write-summary (workflow my-flow@0.1.0) would "
        f"have its worked example in examples/{output}.json, the file of the worked example's "
        f"{'answers' if output == 'answers' else 'confirmed state'}: one file cannot be both"
    )
    assert said.next == (
        f"rename output {output!r} in workflows/my-flow.toml to an id other than confirmed-state or answers (such "
        f"as {output}-record), and its example file with it"
    )
    assert not (tmp_path / "rel").exists()

    scenario = CatalogueExamples({"0.1.0": source / "examples"})  # (a release built before the rule)
    declared = StepOutput.of({"id": output, "media_type": "application/json", "path": f"out/{output}.json"})
    ctx = AuthorContext("0.1.0", "write-summary", declared, {}, 0, (), {}, "my-flow")
    with pytest.raises(HarnessError, match=f"output {output!r} has no worked example in .*: its example name is"):
        scenario.author(ctx)


def test_a_migration_keeps_every_answer_the_run_gave_not_only_research_route(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """``migration_state`` carried only ``research_route``: the owner's ``audience`` was dropped at a migration.

    The target state is the target version's worked-example facts and every value of the run they do not set.
    my-flow 0.1.0 and 0.2.0 both ask ``audience``; the run answers it (the caller's answer, not the example's),
    migrates at write-summary and keeps it.
    """
    first = init_scaffold(tmp_path)
    asks_audience(first)
    (first / "examples" / "answers.json").write_text('{"audience": "team"}\n', "utf-8")

    _, migrated, finished = _migrated_at_write_summary(first, _next_version(first), keypair, trust, tmp_path)

    assert migrated == {"goal": "Decide whether to keep the weekly status meeting", "audience": "board"}
    assert finished.status == "completed" and finished.release == "my-flow@0.2.0", finished


def _next_version(first: Path) -> Path:
    """A copy of the catalogue source ``first`` (my-flow 0.1.0) as my-flow 0.2.0, beside it."""
    second = first.parent / "0.2.0"
    shutil.copytree(first, second)
    for toml in (second / "catalogue.toml", second / "workflows" / "my-flow.toml"):
        edit_text(toml, 'version = "0.1.0"', 'version = "0.2.0"')
    return second


def _migrated_at_write_summary(
    first: Path, second: Path, keypair: KeyPair, trust: Path, tmp_path: Path
) -> tuple[RunResult, dict[str, object], RunResult]:
    """``first`` (0.1.0, asking ``audience``) served with ``second`` (0.2.0) as the migration target: a run answering
    ``audience`` (the caller's answer, not the example's), previewed and migrated at write-summary, then finished.
    The preview, the confirmed state after the migration and the finished run."""
    old, new = (_build(source, keypair, tmp_path / "rel") for source in (first, second))
    args = ["serve", "--release", str(old), "--migration-target", str(new), "--trust", str(trust)]
    args += ["--state-dir", str(tmp_path / "state")]
    examples = {"0.1.0": old / "catalogue" / "examples", "0.2.0": new / "catalogue" / "examples"}

    async def walk() -> tuple[RunResult, dict[str, object], RunResult]:
        with (tmp_path / "serve.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                scenario = CatalogueExamples(examples, answers={"audience": "board"})
                project = tmp_path / "project"
                with WorkflowHarness(client_caller(client), scenario, project_dir=project, host=HOST) as harness:
                    at = await harness.run(await harness.start("my-flow", "0.1.0"), until_step="write-summary")
                    assert harness.state.values["audience"] == "board"
                    preview = await harness.migrate(at, "my-flow@0.2.0", "0.2.0", confirm=False)
                    moved = await harness.migrate(at, "my-flow@0.2.0", "0.2.0", confirm=True)
                    assert moved.status == "active", moved
                    return preview, dict(harness.state.values), await harness.run(moved)

    return anyio.run(walk)


def _asks_route(source: Path) -> None:
    """The scaffold's plan step asks ``research_route`` (the field ``route`` answered), desk or interviews."""
    asks_audience(source)
    for path in (source / "workflows" / "my-flow.toml", source / "schemas" / "confirmed-state.schema.json"):
        text = path.read_text("utf-8").replace('"audience"', '"research_route"')
        path.write_text(text.replace('"team", "board"', '"desk", "interviews"'), "utf-8")


def _answered(release: Path, trust: Path, project: Path, scenario: CatalogueExamples) -> dict[str, object]:
    """The confirmed state a run of my-flow on ``release``, scripted by ``scenario``, completes with."""
    args = ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(project / ".state")]

    async def walk() -> dict[str, object]:
        with (project.parent / f"{project.name}.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                with WorkflowHarness(client_caller(client), scenario, project_dir=project, host=HOST) as harness:
                    done = await harness.run(await harness.start("my-flow", "0.1.0"))
                    assert done.status == "completed", done
                    return dict(harness.state.values)

    return anyio.run(walk)


def test_route_is_deprecated_for_answers_and_the_old_call_still_answers_research_route(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """``CatalogueExamples(examples, route)`` hard-coded one question field, ``research_route``, in the public API.

    ``answers=`` gives any question's answer by its field, and a scenario needs neither (the examples' own answers);
    the old call warns ``DeprecationWarning`` once and still answers ``research_route`` in a real run.
    """
    source = init_scaffold(tmp_path)
    _asks_route(source)
    release = _build(source, keypair, tmp_path / "rel")
    examples = {"0.1.0": release / "catalogue" / "examples"}

    with pytest.warns(DeprecationWarning, match=r"route=\.\.\.\) is deprecated: .*answers=") as said:
        old = CatalogueExamples(examples, "interviews")
    assert len(said) == 1
    assert _answered(release, trust, tmp_path / "old", old)["research_route"] == "interviews"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = CatalogueExamples(examples, answers={"research_route": "desk"})
        assert _answered(release, trust, tmp_path / "new", new)["research_route"] == "desk"
        with pytest.raises(HarnessError, match="no scripted answer for 'research_route'"):
            CatalogueExamples(examples).answer(Question.of({"field": "research_route"}), "0.1.0", workflow="my-flow")


def test_a_migration_sends_only_the_fields_the_target_state_has(keypair: KeyPair, trust: Path, tmp_path: Path) -> None:
    """``migration_state`` carried every run value: my-flow 0.1.0 asks ``audience``, 0.2.0 no longer has the field,
    so the verifier refused the migration (``confirmed_state_invalid``). The harness sends what the offer says the
    target needs (``target_needs.confirmed_state``) and the run migrates, without ``audience``, and completes.
    """
    first = init_scaffold(tmp_path)
    second = _next_version(first)
    asks_audience(first)

    preview, migrated, finished = _migrated_at_write_summary(first, second, keypair, trust, tmp_path)

    assert [f.code for f in preview.failures] == ["migration_confirmation_required"], preview
    assert migrated == {"goal": "Decide whether to keep the weekly status meeting"}
    assert finished.status == "completed" and finished.release == "my-flow@0.2.0", finished


def test_the_harness_guides_python_harness_runs_as_written(keypair: KeyPair, tmp_path: Path) -> None:
    """docs/harness-guide.md pointed a Python author at the kit but showed no harness: now it shows the smallest.

    Extracted from the guide and run as a script where the guide says: beside ``rel/`` (the scaffold built and
    signed with a real key) and ``trust/``, the verifier a real ``rimthan-mcp serve`` child.
    """
    doc = (Path(__file__).parents[2] / "docs" / "harness-guide.md").read_text("utf-8")
    (example,) = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    work = tmp_path / "work"
    work.mkdir()
    _build(init_scaffold(tmp_path), keypair, work / "rel")
    trust_dir(work / "trust", keypair)
    (work / "harness.py").write_text(example, "utf-8")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

    done = subprocess.run(
        [sys.executable, "harness.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "completed my-flow@0.1.0", done.stdout
    assert (work / "project" / "out" / "summary.json").is_file()


def test_the_scenario_reads_no_example_through_a_symbolic_link(keypair: KeyPair, trust: Path, tmp_path: Path) -> None:
    """``CatalogueExamples`` read its files by path: ``confirmed-state.json`` linked out of a release folder's copy was
    followed, and the facts read outside the release started the run; ``examples/my-flow/`` linked out was passed
    over unsaid (the shared examples scripted the run instead of the workflow's own). Each file is now reached
    through real folders (the host's walk, as the bridge reads a project): a link is refused, naming it, before any
    start is sent, and nothing outside is read."""
    release = _build(init_scaffold(tmp_path), keypair, tmp_path / "rel")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "confirmed-state.json").write_text('{"goal": "read from outside the release"}\n', "utf-8")
    (outside / "summary.json").write_text('{"from": "outside"}\n', "utf-8")

    linked_file = tmp_path / "copy-file"
    shutil.copytree(release, linked_file, symlinks=True)
    state = linked_file / "catalogue" / "examples" / "confirmed-state.json"
    state.unlink()
    state.symlink_to(outside / "confirmed-state.json")

    linked_folder = tmp_path / "copy-folder"
    shutil.copytree(release, linked_folder, symlinks=True)
    (linked_folder / "catalogue" / "examples" / "my-flow").symlink_to(outside, target_is_directory=True)

    args = ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(tmp_path / "state")]

    async def start(examples: Path) -> str:
        """What a run of my-flow scripted from ``examples`` is refused with (HarnessError)."""
        with (tmp_path / "serve.log").open("a") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                scenario = CatalogueExamples({"0.1.0": examples})
                project = tmp_path / f"project-{examples.parents[1].name}"
                with WorkflowHarness(client_caller(client), scenario, project_dir=project, host=HOST) as harness:
                    try:
                        await harness.run(await harness.start("my-flow", "0.1.0"))
                    except HarnessError as exc:
                        return str(exc)
                    return "run not refused"

    said = anyio.run(start, linked_file / "catalogue" / "examples")
    assert f"{linked_file}/catalogue/examples/confirmed-state.json: Symbolic link refused" in said, said
    said = anyio.run(start, linked_folder / "catalogue" / "examples")
    assert f"{linked_folder}/catalogue/examples/my-flow: Symbolic link refused" in said, said
    assert "rimthan.start_workflow" not in (tmp_path / "serve.log").read_text("utf-8")  # (refused before any start)
