"""A complete harness on the host kit's library: one run of the research workflow, to ``completed``.

Run it from a project holding ``releases/``, ``keys/local/``, ``facts.json`` (the facts the decision owner
confirmed: the fields of the workflow's confirmed state) and ``owner.json`` (the owner's answers to anything
asked later, by field)::

    python harness.py /path/to/rimthan/catalogues/research-decision

The model is played by code: it writes each step's files from the worked examples of the run's version
(``<catalogues>/<version>/examples/``), a broken draft first (the verifier refuses it, the harness rewrites it),
and its validators pass each round but the first, whose first validator fails (the harness repairs and submits
again). Killed at any moment, it is started again and resumes the run from its log. A newer release published
into ``releases/`` is offered to the run when the verifier starts (``--migrate-to-newest``); the harness previews
it, asks the owner (``owner.json``) for each fact the target needs, and confirms. It never handles a checkpoint,
a digest or a bundle: the session carries them. It reads only typed results (``result.step.outputs``,
``result.question.field``, each failure's ``code``); a harness that needs the verifier's JSON reads ``result.wire``,
or a part's own ``wire`` (``result.step.wire``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_host import RunResult, StepOutput
from rimthan_host.protocol import HarnessError, ToolRefused, client_caller
from rimthan_host.runlog import RunLog, list_runs
from rimthan_host.session import HostSession

RUN = "run-1"
PROJECT = Path(".")
# The verifier, a child over stdio: it offers a newer release of the run's catalogue, logs only warnings (its JSON
# log lines go to this process's stderr), and is given the environment (the SDK passes only a few variables).
SERVE = ["serve", "--migrate-to-newest", "--log-level", "warning"]
VERIFIER = StdioServerParameters(command="rimthan-mcp", args=SERVE, env=dict(os.environ))


def owner(name: str) -> dict[str, Any]:
    """What the decision owner confirmed (``facts.json``) or answers when asked (``owner.json``)."""
    return dict(json.loads((PROJECT / name).read_text("utf-8")))


class Model:
    """The model, played by code: authors files and runs validators."""

    def __init__(self, catalogues: Path) -> None:
        self.catalogues = catalogues
        self.drafted: set[str] = set()
        self.failed_once = False

    def author(self, version: str, output: StepOutput) -> str:
        if output.path not in self.drafted:  # a first draft the verifier refuses
            self.drafted.add(output.path)
            return "{draft" if output.media_type == "application/json" else ""
        return (self.catalogues / version / "examples" / Path(output.path).name).read_text("utf-8")

    def review(self, instruction: str) -> tuple[str, list[dict[str, str]]]:
        """Run a validator (a subagent reading ``instruction`` and the step's files): its verdict and findings."""
        assert instruction  # (a real harness gives it to an isolated subagent)
        if not self.failed_once:
            self.failed_once = True
            return "fail", [{"severity": "error", "message": "the recommendation cites no evidence id"}]
        return "pass", []


async def work(session: HostSession, model: Model, result: RunResult) -> RunResult:
    """One move from where the run is."""
    if result.offered_release:
        return await migrate(session, result.offered_release)
    if result.question:
        field = result.question.field
        print(f"asked: {field}")
        return await session.advance({field: owner("owner.json")[field]})
    if result.step_id == "setup-workspace":
        files = [session.set_up_workspace()]
    elif result.step and result.step.outputs:
        files = [session.write_output(o, model.author(result.workflow_version, o)) for o in result.step.outputs]
    else:
        return await session.advance()  # an owner-facing step: the conversation happens, then the run moves on
    round_ = await session.prepare(files)
    if not round_.ready:
        print("refused: " + "; ".join(f"{f.code}: {f.message}" for f in round_.failures))
        return session.position  # the same step again: the model rewrites its files
    for key in round_.keys:
        outcome, findings = model.review(session.validator_instruction(key))
        session.verdict(key, outcome, findings)
    submitted = await session.submit()
    if submitted.status == "validation_failed":
        print("validators failed: " + "; ".join(f"{f.validator}: {f.message}" for f in submitted.findings))
    return submitted


async def migrate(session: HostSession, target: str) -> RunResult:
    """Preview the offered release, ask the owner for every fact it needs that the run lacks, and confirm."""
    values = dict(session.state.values)
    preview = await session.migrate(target, values, confirm=False)
    walked = ", ".join(w.step for w in preview.walked_again)
    print(f"offered {target}: walks again {walked}")
    needs = preview.migration.target_needs if preview.migration else ()
    answers = owner("owner.json")
    values.update({n.field: answers[n.field] for n in needs if not n.present and n.field in answers})
    migrated = await session.migrate(target, values, confirm=True)
    print(f"migrated to {migrated.release}")
    return migrated


async def main(catalogues: Path) -> str | None:
    """Drive the run to ``completed``; a refusal the harness cannot repair is returned as one line.

    Refusals are caught inside ``async with Client(...)``: what escapes it reaches the caller wrapped in the
    SDK's ``ExceptionGroup``, not as the ``HarnessError`` raised."""
    model = Model(catalogues)
    async with Client(VERIFIER) as client:
        with HostSession(client_caller(client), project_dir=PROJECT, run_log=RunLog(PROJECT, RUN)) as session:
            try:
                if RUN in list_runs(PROJECT):
                    result = await session.resume()
                else:
                    result = await session.start("research", owner("facts.json"))
                while result.status != "completed":
                    print(f"at {result.step_id} ({result.release})", flush=True)
                    result = await work(session, model, result)
            except (HarnessError, ToolRefused) as exc:
                return f"error: {exc}"
            print(f"completed on {result.release}")
            return None


if __name__ == "__main__":
    sys.exit(anyio.run(main, Path(sys.argv[1])))
