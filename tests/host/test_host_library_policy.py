"""The host library keeps to its repository policy for a step's files, as the bridge does, before a byte is written.

Found: the bridge checks each step's output paths against its HostProfile's
repository policy and its own files before the model is told to write them
(``repository_policy_conflict``), but a harness author's
:class:`~rimthan_host.session.HostSession` wrote a step's outputs wherever the
verifier named them (``write_output``) and read them back (``read_outputs``);
a real rimthan-mcp refuses such paths only at ``prepare``, once written. Now
both refuse first, with the bridge's code (in the library's words: the argument to change), nothing written
or read. Runs go through a real engine over a real signed release.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rimthan_host.harness import WorkflowHarness
from rimthan_host.protocol import SETUP_STEP, HostProfile
from rimthan_host.write_targets import StepFilesRefused
from rimthan_workflow_registry.errors import FailureCode
from support.engines import Engines, ExamplesScenario, TickingClock, make_engines, run

# Setup delivers into .claude and writes its manifest in .rimthan; the later steps write in research/, which this
# host's policy does not let it write.
HOST = HostProfile(writable_paths=(".claude/*", ".opencode/*", ".rimthan/*"))


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("hostpolicy"), TickingClock())


def _said(refused: StepFilesRefused, step: str) -> None:
    said = str(refused)
    assert refused.code is FailureCode.REPOSITORY_POLICY_CONFLICT
    assert said.startswith("Nothing was read, written or checked (repository_policy_conflict): the verifier names ")
    for name in ("experiment-report.md", "experiment-results.json"):  # the experiment step's two files
        assert f"\n- research/{name}: not writable under this session's repository policy\n" in said, said
    assert "at paths the host kit does not read or write:" in said and "bridge" not in said, said
    assert (
        "(the writable_paths and protected_paths of the HostProfile given as HostSession's host argument) does not "
        "let it write: allow those paths, or run a release whose steps write elsewhere."
    ) in said, said
    assert said.endswith(
        f"\nnext: the run waits at step {step}; once that is fixed, resume it from its log (a new HostSession's "
        "resume) and write the step's files again."
    ), said


def _refused_at_a_research_step(engines: Engines, name: str) -> tuple[WorkflowHarness, Path, StepFilesRefused]:
    """A scripted run under :data:`HOST`, driven until the library refuses a step's files."""
    project = engines.work / "projects" / name
    project.mkdir(parents=True)
    harness = WorkflowHarness(
        engines.call("1.3.0"), ExamplesScenario("experiment"), project_dir=project, host=HOST, clock=engines.clock
    )

    async def go() -> None:
        await harness.run(await harness.start("research", initial_version="1.3.0"))

    with pytest.raises(StepFilesRefused) as refused:
        run(go())
    return harness, project, refused.value


def test_a_harness_writes_no_step_file_its_policy_forbids(engines: Engines) -> None:
    harness, project, refused = _refused_at_a_research_step(engines, "harness")
    step = harness.session.step
    assert step is not None and step.id != SETUP_STEP and refused.step == step.id == "experiment"
    _said(refused, "experiment")
    assert (project / ".rimthan" / "workspace-manifest.json").is_file()  # setup was within the policy
    assert not (project / "research").exists()  # nothing written where the policy forbids


def test_a_session_reads_no_step_file_its_policy_forbids(engines: Engines) -> None:
    harness, project, _ = _refused_at_a_research_step(engines, "session")
    session = harness.session
    assert session.step is not None
    outputs = session.step.outputs
    for output in outputs:  # written by someone else (a model): the library neither reads nor attests them
        (project / output.path).parent.mkdir(parents=True, exist_ok=True)
        (project / output.path).write_text("mine\n", "utf-8")
    kept = dict(session.record.written)
    with pytest.raises(StepFilesRefused) as refused:
        session.read_outputs()
    _said(refused.value, "experiment")
    assert session.record.written == kept  # nothing attested
    assert all((project / o.path).read_text("utf-8") == "mine\n" for o in outputs)
