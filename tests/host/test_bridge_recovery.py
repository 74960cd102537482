"""The bridge gets out of every corner: a refused submit, a misplaced move, a failure mid-move.

Each test drives the real ``rimthan-host serve`` over stdio (the bridge starts
the real verifier as its child). Findings the verifier would refuse (too long,
too many, too much for one submit) are refused at record_verdict before
anything is sent; the verifier refuses a submit of verdicts for real (a bundle
whose signed token changed on the way), the project's run log is broken for
real (a directory where the log file must be); after each the stand-in
completes the run and ``rimthan-mcp audit`` verifies its log.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.bridge import Bridge
from rimthan_host.bridge_server import create_bridge_server
from rimthan_host.protocol import SUBMIT, HostProfile, client_caller, client_reader
from rimthan_host.standin import StandIn
from rimthan_workflow_registry.limits import MAX_FINDING_CHARS, MAX_REPORT_FINDINGS, MAX_VALIDATOR_REPORTS_BYTES
from support.bridge import (
    BIN,
    at_desk_research_validators,
    audited_only_run,
    check_replies,
    drive,
    no_run,
    refused,
    stand_in,
    verifier_args,
    write_files,
)
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

# One finding as a model might paste a subagent's whole answer: longer than a finding may be (MAX_FINDING_CHARS).
RAMBLING = "The recommendation cites no source. " * 300


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("recovery-world"))


def test_findings_the_verifier_would_refuse_are_refused_before_anything_is_sent(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Too long, too many, or too much for one submit: refused in words at record_verdict, nothing recorded."""

    async def script(model: StandIn) -> None:
        await at_desk_research_validators(model)
        blank = await model.call(
            "record_verdict", {"validator": "evidence-auditor", "verdict": "fail", "findings": [" "]}
        )
        refused(blank, "a fail verdict needs findings")
        retry = "Call record_verdict again for evidence-auditor with fewer, shorter findings: each problem once"
        for findings, why in [
            (
                [RAMBLING],
                f"finding 1 is {len(RAMBLING.strip())} characters, past the {MAX_FINDING_CHARS} a finding may hold",
            ),
            (["No source."] * (MAX_REPORT_FINDINGS + 1), f"past the {MAX_REPORT_FINDINGS} one verdict may carry"),
            ([RAMBLING[:MAX_FINDING_CHARS]] * 40, f"bytes as JSON, past the {MAX_VALIDATOR_REPORTS_BYTES} one submit"),
        ]:
            reply = await model.call(
                "record_verdict", {"validator": "evidence-auditor", "verdict": "fail", "findings": findings}
            )
            refused(reply, "Nothing was recorded: the verifier would refuse these findings (", why, retry)
            assert reply.data["validators"] == [
                {"name": "evidence-auditor", "subagent": "evidence-auditor"},
                {"name": "decision-critic", "subagent": "decision-critic"},
            ], reply.data
            assert RAMBLING[:200] not in reply.text  # which bound, not the finding echoed back
        recorded = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
        assert not recorded.is_error and recorded.data["validators"] == [
            {"name": "evidence-auditor", "subagent": "evidence-auditor"}
        ], recorded.text
        short = {
            "validator": "evidence-auditor",
            "verdict": "fail",
            "findings": ["The recommendation cites no source."],
        }
        failed = await model.call("record_verdict", short)
        assert failed.data["status"] == "validation_failed", failed.text
        assert "evidence-auditor: The recommendation cites no source." in failed.text
        final = await model.follow(failed, "desk-research")  # the repair round: only the failed validator
        assert final.data["status"] == "completed" and model.rounds == [["evidence-auditor"]]

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_misplaced_move_gets_one_short_line_and_the_next_call(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        prompt = at_question.data["question"]["prompt"]
        for tool, arguments in [("step_done", {}), ("record_verdict", {"validator": "x", "verdict": "pass"})]:
            short = await model.call(tool, arguments)
            refused(short, prompt, "desk-research, user-interviews, experiment", "call answer_question", "show_step")
            assert "Instructions for this step" not in short.text and "\n" not in short.text
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        files = ", ".join(step.data["files"])
        for tool, arguments in [("record_verdict", {"validator": "x", "verdict": "pass"}), ("answer_question", {})]:
            short = await model.call(tool, arguments)
            refused(short, "nothing was recorded", f"write {files}, then call step_done", "show_step repeats")
            assert "Instructions for this step" not in short.text and len(short.text) * 4 < len(step.text)
        write_files(model, step)
        pending = await model.call("step_done")
        short = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
        refused(short, "No question is waiting", "Waiting for a verdict: evidence-auditor (subagent", "record_verdict")
        assert "Instruction:" not in short.text
        assert (await model.follow(pending, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    audited_only_run(model.project, state)


IN_OPEN = 0x20  # <sys/inotify.h>: a watched file was opened


class _Opens:
    """The opens of ``paths``, as the kernel reports them (inotify ``IN_OPEN``)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        for path in paths:
            assert self.libc.inotify_add_watch(self.fd, os.fsencode(path), IN_OPEN) >= 0, path

    def count(self) -> int:
        """The opens reported since the last count (the watch closed after)."""
        data = b""
        try:
            while chunk := os.read(self.fd, 65536):
                data += chunk
        except BlockingIOError:
            pass
        os.close(self.fd)
        opens, at = 0, 0
        while at < len(data):
            _, mask, _, size = struct.unpack_from("iIII", data, at)
            opens, at = opens + bool(mask & IN_OPEN), at + 16 + size
        return opens


def test_a_misplaced_move_reads_none_of_the_step_s_files(world: ServerWorld, tmp_path: Path) -> None:
    """A misplaced move at a gated step says which of its files are unwritten: it read each of them in full to tell.
    It tells by what is at each path (its status, through the walk), opening none."""

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        files = [model.project / name for name in step.data["files"]]
        opens = _Opens(files)
        short = await model.call("answer_question", {})
        assert opens.count() == 0
        refused(short, f"This step's files are written ({', '.join(step.data['files'])}) but not checked yet")
        assert not at_question.is_error

    drive(world, tmp_path, script)


def test_a_failure_mid_move_is_one_sentence_and_the_run_resumes_once_fixed(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        log = model.project / ".rimthan" / "runs" / f"{run}.log"
        kept = log.with_name("kept.log.txt")
        log.rename(kept)
        log.mkdir()  # a directory where the log file must be: appending the next checkpoint fails
        broken = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        refused(broken, f"The bridge failed on answer_question (Is a directory: .rimthan/runs/{run}.log)",
                f"once that is fixed, call resume_run {run} to go on from the run log.")  # fmt: skip
        assert broken.text.count(".") <= 4 and "\n" not in broken.text and broken.data == {"status": "bridge_error"}
        no_run(
            await model.call("show_step"), "No run is active", f"resume_run with one of the unfinished runs here: {run}"
        )
        refused(await model.call("resume_run", {"run": run}), "The bridge failed on resume_run (Is a directory")
        log.rmdir()
        kept.rename(log)
        resumed = await model.call("resume_run", {"run": run})
        assert f"Resumed run {run}" in resumed.text and resumed.data["question"]["prompt"], resumed.text
        assert (await model.follow(resumed, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    history = audited_only_run(model.project, state)
    assert history["steps"][-1] == "desk-research"


def test_a_bundle_the_verifier_no_longer_accepts_starts_the_round_again(world: ServerWorld, tmp_path: Path) -> None:
    """The bridge in process, the verifier a real process; the first submit carries a bundle it no longer accepts."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *verifier_args(world, state)])
    spoiled: list[str] = []

    async def go() -> StandIn:
        async with CheckedClient(verifier, mode="legacy") as to_verifier:
            real = client_caller(to_verifier)

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                bundle = dict(arguments.get("validation_bundle") or {})
                if tool == SUBMIT and bundle["step_id"] == "desk-research" and not spoiled:  # its token, changed
                    token = str(bundle["validation_token"])
                    bundle["validation_token"] = token[:-1] + ("A" if token[-1] != "A" else "B")
                    spoiled.append(token)
                    arguments = {**arguments, "validation_bundle": bundle}
                return await real(tool, arguments)

            bridge = Bridge(call, project_dir=project, read_resource=client_reader(to_verifier))
            async with CheckedClient(create_bridge_server(bridge), mode="legacy") as client:
                model = stand_in(client, project)
                await model.follow(await model.start(), "", until_question=True)
                step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
                write_files(model, step)
                await model.call("step_done")
                await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
                again = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
                refused(again, "The verifier refused the step's verdicts (validation_bundle_invalid", "are discarded",
                        "The files are checked again.", "Now run each validator",
                        "Validator evidence-auditor (subagent evidence-auditor), version 1.0.0.")  # fmt: skip
                assert [v["name"] for v in again.data["validators"]] == ["evidence-auditor", "decision-critic"]
                final = await model.follow(await model.call("show_step"), "desk-research")
                assert final.data["status"] == "completed" and len(spoiled) == 1
                return model

    model = anyio.run(go)
    check_replies(model)
    assert audited_only_run(project, state)["steps"][-1] == "desk-research"


def test_a_repair_that_changes_a_file_is_judged_by_every_validator_again_as_the_words_say(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A pass holds only for the files its validator judged: after a fix, the one that passed runs again too.

    Before, the failed round's words, record_verdict's description and the plugin's skill all said "only the
    validators that failed run again", and the next round then asked for both.
    """

    async def script(model: StandIn) -> None:
        description = next(t.description for t in (await model.client.list_tools()).tools if t.name == "record_verdict")
        assert "only failed validators run again" not in (description or "")
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        await model.call("step_done", {"step": "desk-research"})
        await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
        failed = await model.call(
            "record_verdict", {"validator": "evidence-auditor", "verdict": "fail", "findings": ["E9 is cited twice."]}
        )
        assert "Only the validators that failed run again" not in failed.text, failed.text
        assert "once you change a file, every validator of the step runs again" in failed.text
        findings = model.project / "research" / "findings.md"
        findings.write_text(findings.read_text("utf-8") + "\nE9 is cited once.\n", "utf-8")  # the fix
        again = await model.call("step_done", {"step": "desk-research"})
        assert [v["name"] for v in again.data["validators"]] == ["evidence-auditor", "decision-critic"], again.text
        final = await model.follow(again, "desk-research")
        assert final.data["status"] == "completed"

    drive(world, tmp_path, script)


def test_a_setup_outside_the_bridges_own_policy_names_the_policy_and_the_run_and_writes_nothing(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A host whose policy protects where setup delivers (``.claude/*``): the bridge checks the paths against its
    own policy before it writes (the verifier would refuse them only once written), says it is its policy to
    change (not the verifier to check, as it first did), and sets the run aside: resume_run sets it up again."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *verifier_args(world, state)])
    host = HostProfile(writable_paths=(".rimthan/*", "research/*"), protected_paths=(".git/*", ".claude/*"))

    async def go() -> StandIn:
        async with CheckedClient(verifier, mode="legacy") as to_verifier:
            bridge = Bridge(client_caller(to_verifier), project_dir=project, host=host)
            async with CheckedClient(create_bridge_server(bridge), mode="legacy") as client:
                model = stand_in(client, project)
                setup = await model.start()
                run = str(setup.data["run"])
                refused(
                    setup,
                    "The workspace was not set up and nothing was written (repository_policy_conflict)",
                    "- .claude/agents/decision-critic.md: protected by this bridge's repository policy (.claude/*)",
                    "this bridge's repository policy (its HostProfile's writable_paths and protected_paths)",
                    f"resume_run {run}",
                )
                assert "check that the bridge's verifier" not in setup.text, setup.text
                assert not (project / ".claude").exists()
                no_run(await model.call("show_step"))  # no run is active: resume_run sets it up again
                retried = await model.call("resume_run", {"run": run})
                assert retried.is_error and "repository_policy_conflict" in retried.text, retried.text
                return model

    model = anyio.run(go)
    check_replies(model)
