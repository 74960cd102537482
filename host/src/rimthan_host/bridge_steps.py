"""The bridge's step moves: the files checked, validator verdicts, the submitted round, answers.

The bridge reads the model's files back from disk and attests them, keeps the validation bundle, and
builds validator reports from the verdicts the model records: exact bytes never pass through the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from rimthan_workflow_registry.errors import quoted

from .asking import Ask, Asker
from .bridge_core import BridgeCore
from .confirmations import BY_ELICITATION, BY_MODEL
from .delivered import AssetClash, put_back_edited, restore_subagents, subagent_marks
from .facts import already_confirmed, record_facts
from .file_digests import check_named_files
from .kept_copies import refused_code
from .outputs import StepFiles, changed_files, read_step_files
from .protocol import (
    ToolRefused,
)
from .reports import refused_report, validator_key
from .result_parts import wires
from .results import RunResult
from .session import HostSession
from .step_replies import (
    Reply,
    files_refused,
    fix_files,
    misplaced,
    not_a_choice,
    reply,
    step_files_refused,
    validators_edited,
    validators_waiting,
)
from .unanswered import Unanswered
from .words import (
    choice_texts,
    refusal_reason,
)


class StepMoves(BridgeCore):
    """The moves of a step: step_done, record_verdict, answer_question."""

    async def step_done(self, asker: Asker, facts: Mapping[str, Any], done: str | None = None) -> Reply:
        """``done``: the step the model finished, if it says: another step's step_done (one re-sent after the
        run moved on) is refused, never taken for the current step (an ungated one would move without the owner)."""
        session = self._running()
        if isinstance(session, Reply):
            return session
        step = session.position.step_wire
        if done is not None and done != step.get("id"):
            head = f"Nothing was done: step {quoted(done)} is not the step the run is at (step {step.get('id')})"
            return misplaced(session, f"{head}; it is done already, or not reached yet.")
        if session.position.status == "input_required":
            return misplaced(session, "Nothing was done: the step is waiting for an answer first.")
        if done is None and not step.get("gated"):  # (it would move the run: a re-sent call must not move it twice)
            said = "Nothing was done: step_done on a step without files needs step, the id of the step you finished,"
            return misplaced(session, f"{said} so that a call re-sent after the run moved on is refused.")
        facts, known = already_confirmed(session, facts)
        found = read_step_files(session.files, step.get("outputs") or []) if facts and step.get("gated") else None
        missing = self._files_missing(session, found) if found is not None else None
        if missing is not None:  # (the person is asked to confirm the facts once the files can be checked)
            kept = f"The facts ({', '.join(sorted(facts))}) were not recorded or put to the user yet: pass them again"
            return replace(missing, text=f"{missing.text}\n{kept} with that step_done.")
        if facts or not step.get("gated"):  # facts go in with the same continue_workflow that moves an ungated step
            expects = await self._state_fields(session.position) if facts else {}
            moved = await record_facts(session, asker, facts, expects, self.held)
            if isinstance(moved, Reply):
                return moved
            if not step.get("gated"):
                return await self._go_on(moved[0], [*known, *moved[1], _step_done_words(step["id"], moved[0])])
            session.prepared = None  # the checkpoint changed: the files are checked afresh against it
        prepared = session.prepared
        if prepared is not None and prepared.pending:  # (the files read once: compared, then checked if changed)
            found = read_step_files(session.files, step.get("outputs") or [])
            if not found.changed(prepared.artifacts):
                lines = ["Nothing was done: the files were checked already and validators still wait for a verdict."]
                return validators_waiting(session, [*known, *lines], error=True)
        lines = ["The files changed since they were checked: checking them again."] if prepared else []
        return await self._check(session, [*known, *lines], found)

    def _files_missing(self, session: HostSession, found: StepFiles) -> Reply | None:
        """The refusal of a step whose files are not all there to be read (none written, a directory...), or None."""
        step = session.position.step_wire
        if not found.problems:
            return None
        lines = ["Nothing was checked yet:", *(f"- {p}" for p in found.problems), fix_files(step["id"])]
        return reply(lines, {"run": self.run_id, "status": "files_missing", "step": {"id": step["id"]}}, True)

    async def _check(self, session: HostSession, lines: list[str], found: StepFiles | None = None) -> Reply:
        """Read the step's files from disk, once (``found``: read already in this call), and have the verifier check
        them; then its validators, if any."""
        step = session.position.step_wire
        refused = step_files_refused(session, step, lines)
        if refused is not None:
            return refused
        found = found or read_step_files(session.files, step.get("outputs") or [])
        missing = self._files_missing(session, found)
        if missing is not None:
            return missing
        own = {o["id"] for o in step.get("outputs") or []}  # (earlier attempts of this step's files are no evidence)
        validated = {k: e for k, e in session.evidence.items() if k not in own}
        digests = check_named_files(session.files, step.get("outputs") or [], validated, found.read)
        if digests.problems:
            lines = ["Nothing was checked yet:", *(f"- {code.value}: {why}." for code, why in digests.problems)]
            lines.append(fix_files(step["id"]))
            data = {"run": self.run_id, "status": "files_refused", "step": {"id": step["id"]},
                    "failures": [code.value for code, _ in digests.problems]}  # fmt: skip
            return reply(lines, data, True)
        lines += [f"Filled in the SHA-256 of the file named in {f}, from the file on disk." for f in digests.filled]
        read = session.read_outputs({**found.read, **digests.rewritten})
        prepared_result = await session.prepare(read)
        unchanged = self.refused_files.note(self.run_id, step["id"], read, wires(prepared_result.failures))
        if not prepared_result.ready:
            copies = await self.replies.output_schemas(session, step, self._release_id())
            schemas = {p: s.path for p, s in copies.items() if s.path}
            return files_refused(
                session, prepared_result, lines, "\n".join([*unchanged, fix_files(step["id"])]), schemas
            )
        if not prepared_result.validators:
            return await self._submit(session, [*lines, f"Step {step['id']} checked."])
        subagents = [v.subagent for v in prepared_result.validators]
        try:
            restored = await self._put_back(session, partial(restore_subagents, session.files,
                                                             session.release_digest, subagents))  # fmt: skip
        except AssetClash as exc:
            return self._subagents_refused(session, exc)
        assert session.prepared is not None
        session.prepared.marks = subagent_marks(session.files, session.release_digest, subagents)  # (as named)
        session.save()  # (the round kept with its checkpoint's state, no verdict yet: a restarted bridge takes it back)
        lines += [r.line("this run's release") for r in restored]
        return validators_waiting(session, lines)

    def _subagents_refused(self, session: HostSession, exc: AssetClash) -> Reply:
        """The validators' subagent files cannot be made the release's: step_done checks the files, then them, again."""
        session.prepared = None
        session.save()  # (the round is gone: a resumed bridge does not take it back)
        data = {"run": self.run_id, "status": "workspace_refused", "step": {"id": session.position.step_id}}
        data.update(refused_code(exc))
        return reply([exc.bridge_words], data, True)

    async def _edited(self, session: HostSession, key: str) -> Reply | None:
        """The refusal of ``key``'s verdict if the subagent file of that validator, or of one with a verdict, is not
        the release's (changed after the validators were named): those verdicts are discarded, the files put back.
        A file written since it was named, though it holds the release's bytes again (edited, then changed back),
        is refused alike: its validator may have run from the edit. Else None."""
        prepared = session.prepared
        assert prepared is not None
        checked = [s for s in prepared.validators if validator_key(s) == key or validator_key(s) in prepared.verdicts]
        names = [s["subagent"] for s in checked]
        try:
            put = await self._put_back(session, partial(put_back_edited, session.files, session.release_digest, names))
        except AssetClash as exc:
            return self._subagents_refused(session, exc)
        now = subagent_marks(session.files, session.release_digest, names)
        put_back = {p.subagent for p in put}
        written = [n for n in names if n in prepared.marks and now[n] != prepared.marks[n] and n not in put_back]
        if not put and not written:
            return None
        prepared.marks.update(now)  # (the files as the validators to run again are named anew)
        again = [s for s in checked if s["subagent"] in put_back or s["subagent"] in written]
        for summary in again:
            prepared.verdicts.pop(validator_key(summary), None)
        session.save()  # (a resumed bridge must not take the discarded verdicts back)
        return validators_edited(session, put, again, [now[n][0] for n in written])

    async def record_verdict(self, validator: str, verdict: str, findings: Sequence[str]) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        prepared = session.prepared
        if prepared is None:
            return misplaced(session, "No validator is waiting for a verdict; nothing was recorded.")
        names = {s["validator_id"]: f"{s['validator_id']}@{s['version']}" for s in prepared.validators}
        name = validator.split("@")[0]
        key = names.get(name)
        if key is None or ("@" in validator and validator != key):  # (another version's verdict is not its)
            runs = f" (it runs {key})" if key is not None else ""
            lines = [f"Nothing was recorded: {quoted(validator)} is not a validator of this step{runs}."]
            return validators_waiting(session, lines, error=True)
        if key in prepared.verdicts:
            lines = [f"Nothing was recorded: {name} already has a verdict ({prepared.verdicts[key][0]}); it stands."]
            return validators_waiting(session, lines, error=True)
        edited = await self._edited(session, key)  # (the subagent that gave this verdict ran what the release gives)
        if edited is not None:
            return edited
        findings = [f.strip() for f in findings if f.strip()]
        if verdict == "fail" and not findings:
            lines = [
                f"Nothing was recorded: a fail verdict needs findings. Call record_verdict again for {name} with "
                'verdict "fail" and findings: what is wrong, one sentence each, as the subagent reported it.'
            ]
            return validators_waiting(session, lines, error=True)
        severity = "error" if verdict == "fail" else "warning"
        found = [{"severity": severity, "message": f} for f in findings]
        problem = session.verdict_problem(key, verdict, found)
        if problem is not None:
            lines = [
                f"Nothing was recorded: the verifier would refuse these findings ({problem}). Call record_verdict "
                f"again for {name} with fewer, shorter findings: each problem once, in a sentence or two."
            ]
            return validators_waiting(session, lines, error=True)
        session.verdict(key, verdict, found)
        if prepared.pending:
            return validators_waiting(session, [f"Recorded {verdict} for {name}."])
        changed = changed_files(session.files, prepared.artifacts)
        if changed:
            session.prepared = None
            session.save()
            lines = [
                f"{', '.join(changed)} changed after step_done: the verdicts were about the old content and are "
                "discarded. Call step_done to check the files as they are now; then run the validators again."
            ]
            return reply(lines, {"run": self.run_id, "status": "files_changed", "files": changed}, True)
        return await self._submit(session, [f"Recorded {verdict} for {name}; step submitted."])

    async def _submit(self, session: HostSession, lines: list[str]) -> Reply:
        """Submit the round; if the verifier refuses, discard what it refused so the model can redo it."""
        try:
            result = await session.submit()
        except ToolRefused as exc:
            return await self._submit_refused(session, exc)
        return await self._go_on(result, lines)

    async def _submit_refused(self, session: HostSession, exc: ToolRefused) -> Reply:
        prepared = session.prepared
        assert prepared is not None
        said = refusal_reason(exc.error)
        key = refused_report(exc.error, prepared.validators)
        if key is not None and key in prepared.verdicts:  # one report: only that verdict goes
            del prepared.verdicts[key]
            session.save()
            name = key.split("@")[0]
            lines = [f"The verifier refused the verdict of {name} ({said}). That verdict is discarded, the others "
                     f"stand: call record_verdict for {name} again, with findings the verifier accepts."]  # fmt: skip
            return validators_waiting(session, lines, error=True)
        session.prepared = None  # the round as a whole: check the files again, every validator runs again
        session.save()
        head = f"The verifier refused the step's verdicts ({said}); they are discarded."
        if prepared.validators:  # (a step without validators would only be refused again)
            try:
                checked = await self._check(session, [head, "The files are checked again."])
                return Reply(checked.text, checked.data, is_error=True)
            except ToolRefused as again:
                head += f" Checking the files again was refused too ({refusal_reason(again.error)})."
        lines = [head, "Call step_done to try again; show_step says where the run is."]
        return reply(lines, {"run": self.run_id, "status": "refused", "refused": exc.code}, True)

    async def answer_question(self, asker: Asker, answer: str | None, field: str | None = None) -> Reply:
        """``field``: the question answered; another field than the waiting question's (an answer re-sent after
        the run moved on) is refused, never taken for the next question. Needed for an answer the model relays."""
        session = self._running()
        if isinstance(session, Reply):
            return session
        position = session.position
        question = position.question.wire if position.question else None
        if position.status != "input_required" or not question:
            return misplaced(session, "No question is waiting; nothing was recorded.")
        if field is not None and field != question["field"]:
            waits = question["field"]
            head = f"Nothing was recorded: field {quoted(field)} is not the question the run waits on ({waits})"
            return misplaced(session, f"{head}; it was answered already, or not asked yet.")
        if field is None and answer is not None and not asker.available:
            said = "Nothing was recorded: answer_question with an answer needs field, the question's field,"
            return misplaced(session, f"{said} so that an answer re-sent after the run moved on is refused.")
        shown = choice_texts(question.get("choices") or ())  # (a number's or a boolean's choice as JSON: 5, true)
        if asker.available:
            ask = Ask(question["field"], question["prompt"], shown, answer)
            got = (await asker.ask([ask]))[question["field"]]
            if not got.confirmed:
                return _not_answered(self.run_id, str(position.step_id), question["field"], got.action)
            text, by = str(got.value), BY_ELICITATION
        elif answer is None:
            return misplaced(session, "Nothing was recorded: answer_question needs answer, the user's choice.")
        else:
            text, by = answer, BY_MODEL
        if shown and text not in shown:
            return not_a_choice(session, text, shown)
        value = question["choices"][shown.index(text)] if shown else text  # the choice itself, of its own type
        result = await session.advance({question["field"]: value}, by=by)
        return await self._go_on(result, [f"Recorded {question['field']} = {quoted(text)} ({by})."])


def _step_done_words(step: str, result: RunResult) -> str:
    """What an ungated step's step_done did: the step is done, or it now asks its question (the run stays there)."""
    if result.status == "input_required" and result.step_id == step:
        return f"Step {step} now asks the user its question."
    return f"Step {step} done."


def _not_answered(run: str, step: str, field: str, action: str) -> Reply:
    """The person declined or cancelled the question the bridge asked them: nothing recorded, the run stays.

    Declined: the person said no to it, so the model asks them in the conversation; cancelled: they dismissed it
    unanswered, so it is asked again; anything else (an accept that chose nothing) is said as not answered."""
    stays = f"the run stays at step {step}."
    ask_again = f"call answer_question with field {field} to ask them again."
    instead = (f"ask the user in the conversation what they want instead, then call answer_question with field {field} "
               "and their answer (they are asked to confirm it).")  # fmt: skip
    asked = Unanswered(f"the question about {field}", "answering it as asked", f"nothing was recorded; {stays}",
                       instead, ask_again)  # fmt: skip
    said = f"The user did not answer the question about {field} ({action}); nothing was recorded; {stays} "
    text = asked.words(action) or f"{said}Talk it through with the user, then {ask_again}"
    data = {"run": run, "status": "input_required", "user": action, "step": {"id": step}, "field": field}
    return Reply(text, data, is_error=True)
