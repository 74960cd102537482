"""The real Claude Code CLI carries a whole run through the bridge: its own MCP client, its own ``Write`` tool.

``claude -p`` runs in a throwaway HOME and project (interop/claude_code.py's), the documented ``.mcp.json``
approved, with ``ANTHROPIC_BASE_URL`` pointing at the model stand-in (interop/model_standin.py) and a dummy
``ANTHROPIC_API_KEY`` (``-p`` takes the key from the environment without the approval an interactive session
asks for). ``ENABLE_TOOL_SEARCH=false`` keeps MCP tools in the request's ``tools`` rather than deferred behind
Claude Code's tool search; ``--permission-mode acceptEdits`` lets ``Write`` create files in the project, and
``--allowedTools mcp__rimthan`` lets the bridge's tools run, with no one to ask.

The stand-in plays the model (:class:`RunPlayer`): each request carries the conversation so far, and it reads the
last tool result the bridge gave back and decides the next call from its words alone, as a model must:
``WaitForMcpServers`` while the bridge's tools are not yet offered, ``start_run`` with the catalogue's example
facts, a ``Write`` of each file a step names (the catalogue's example texts), ``step_done`` with the step the reply
names, ``record_verdict`` for each validator it names (directly, no subagent), ``answer_question`` with the field it
names, until the reply says the run is complete. One round fails: the first validator named (the critic) reads
REPAIRED in the project and gives ``fail`` with a finding naming the file and a line to add while it lacks
REVIEW_LINE; the failed round's reply hands the finding and the step back, and the model rewrites the file with
``Write`` from those words (:func:`claude_words.repairs_asked`) and calls ``step_done`` again. Before that, one
refusal: the model first writes SLIPPED with SLIP, a route its JSON Schema (the const "desk-research") refuses; the
verifier refuses the file (``json_schema_failed``), and the bridge's reply names the file, the place (``at
/route``), the value expected there and "call step_done again; the run waits at step desk-research."; the model
writes the file again with ``Write``, that value in that place (:func:`claude_words.refusals_asked`), and calls
``step_done`` (the refusal is an error result: Claude Code hands the model its text, on either connection). The
check then looks from outside: Claude Code's exit and its ``Write`` results, the files in the project (the repaired
ones holding the line and the route), the one refusal the model read, the run's log (``rimthan-mcp audit``: one
failed round, then completed; a refused ``step_done`` issues no checkpoint, so the log has nothing of the refusal),
and no token, digest or attestation in any tool result the model got. How the model reads the words is
interop/claude_words.py.

Elicitation: Claude Code declares it, and ``-p``, with no one to show a form to, cancels each form unless an
``Elicitation`` hook answers it. So the run is done twice: without a hook, where the first fact's form of
``start_run`` is cancelled and the bridge starts no run and writes nothing (its reply, "The user dismissed the
request to confirm objective (cancel) ..."); and with interop/claude_person.py as the hook (``--settings``), the
person accepting each form as offered, where every fact ends up ``"user via elicitation"`` in the run's state.
On a 2026-07-28 connection Claude Code gives the model a result's structured content as JSON in place of its
text; the bridge puts its words in that too (its ``text`` field), and the player reads only words, whichever part
it was handed (:func:`claude_words.read_result`): the check then asserts the first step's instruction text and the "call
step_done" advice reached the model, and names the protocol version Claude Code's MCP log says it negotiated.
The whole run is done once more on a 2025-11-25 connection: the bridge behind interop/host_shim.py ``--era``,
which answers Claude Code's 2026-07-28 ``server/discover`` probe "Method not found", so Claude Code initializes
offering 2025-11-25; the check asserts the bridge answered that (the shim's log) and Claude Code's MCP log says it,
and that the same words reached the model (Claude Code 2.1.332 hands it the structured content there too).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_code import MCP_JSON, approve_project_servers, claude_binary, claude_env, make_project
from claude_words import (
    FAILED_ROUND,
    FILES_REFUSED,
    SCHEMA_FAILED,
    Repair,
    Seen,
    json_object,
    read_result,
    repaired_json,
    words_of,
)
from host_shim import negotiated_in
from model_standin import ToolUse, model_standin
from rimthan_host.standin import StandIn, opaque_in
from rimthan_workflow_registry.run import CONFIRMED_STATE_EXAMPLE

SERVER = "rimthan"
WAIT_TOOL = "WaitForMcpServers"
WAITS = 12  # WaitForMcpServers calls before the model gives up on the bridge (a slow start under load)
WRITE_TOOL = "Write"
ROUTE = "desk-research"
DONE = "The run is complete."
CLAUDE_RUN = ["--permission-mode", "acceptEdits", "--allowedTools", f"mcp__{SERVER}", "--output-format", "json"]
PROMPT = "Start a research run with the rimthan tools and carry it to its end."
RUN_ENV = {"ANTHROPIC_API_KEY": "stand-in", "ENABLE_TOOL_SEARCH": "false", "MCP_TIMEOUT": "60000"}
PERSON = Path(__file__).resolve().with_name("claude_person.py")
SHIM = Path(__file__).resolve().with_name("host_shim.py")
SHIM_LOG = "host-shim.jsonl"
OLDER_ERA = "2025-11-25"  # the revision the shim makes the connection negotiate
CANCELLED = "The user dismissed the request to confirm"
BY_ELICITATION = "user via elicitation"
TIMEOUT = 300
REPAIRED = "research/findings.md"  # the file the critic fails at first and the model repairs
REVIEW_LINE = "Each cited source was checked against the evidence log."  # the line the critic asks for
FIRST_STEP = "interview"  # the research workflow's first step, the one start_run's reply gives the model
STEP_DONE_ADVICE = f"call step_done with step {FIRST_STEP}."
SLIPPED = "research/evidence-log.json"  # the file the model first writes with a value its JSON Schema refuses
SLIP = ("route", "desk research")  # that value: the schema's route is the const "desk-research"
REFUSED_AT = f"  - {SCHEMA_FAILED} at /{SLIP[0]}: "  # the refusal's line the model repairs from

Check = Callable[[bool, str, str], bool]


@dataclass(frozen=True)
class Exchange:
    """One tool call of the conversation and the result the host sent back for it."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool


@dataclass
class RunPlayer:
    """The model's side of a run: the next move from the request alone (the conversation is in it)."""

    project: Path
    examples: Path  # the catalogue's examples/: the facts to start with and each file's text
    bridge_results: list[str] = field(default_factory=list)  # every bridge result the model was sent, in order
    writes: list[Exchange] = field(default_factory=list)  # every Write call and its result
    stopped: str = ""  # why the player ended the turn before the run completed
    critic: bool = True  # the first validator named fails while REPAIRED lacks REVIEW_LINE (a repair round)
    slip: bool = True  # the first Write of SLIPPED holds SLIP, which the verifier refuses (a refusal repaired)

    def __call__(self, body: dict[str, Any]) -> ToolUse | str:
        tools = [str(t.get("name", "")) for t in body.get("tools", []) if isinstance(t, dict)]
        prefix = next((n[: -len("start_run")] for n in tools if n.startswith("mcp__") and n.endswith("start_run")), "")
        history = exchanges(body.get("messages", []))
        calls = [e for e in history if prefix and e.name.startswith(prefix)]
        self.bridge_results = [e.result for e in calls]
        self.writes = [e for e in history if e.name == WRITE_TOOL]
        if not prefix:
            waited = sum(e.name == WAIT_TOOL for e in history)
            return (
                ToolUse(WAIT_TOOL, {"servers": [SERVER]})
                if WAIT_TOOL in tools and waited < WAITS
                else self._stop(f"no {SERVER} tools offered: {', '.join(tools)}")
            )
        if not calls:
            state = json.loads((self.examples / CONFIRMED_STATE_EXAMPLE).read_text("utf-8"))
            return ToolUse(f"{prefix}start_run", {"workflow": "research", "facts": state})
        since = history[history.index(calls[-1]) + 1 :]
        first = next((v for e in calls for v in read_result(e.result).validators), "")
        written = [str(e.input.get("file_path")) for e in since if e.name == WRITE_TOOL]
        return self._next(prefix, calls[-1], written, first)

    def _next(self, prefix: str, last: Exchange, written: Sequence[str], first: str) -> ToolUse | str:
        seen = read_result(last.result)
        if seen.refused:
            return self._refused(prefix, seen, written, last.result)
        if last.is_error:
            return self._stop(f"{last.name} refused: {last.result[:300]}")
        if seen.complete:
            return DONE
        if seen.validators:
            return ToolUse(f"{prefix}record_verdict", self._verdict(seen.validators[0], first))
        if seen.question:
            return ToolUse(f"{prefix}answer_question", {"answer": ROUTE, "field": seen.question})
        if seen.failed and not seen.repairs:
            return self._stop(f"a failed round with no finding to act on: {last.result[:300]}")
        for repair in seen.repairs:
            if str(self.project / repair.path) not in written:
                return ToolUse(WRITE_TOOL, {"file_path": str(self.project / repair.path), "content": self._fix(repair)})
        for path in seen.files:
            if str(self.project / path) not in written:
                return ToolUse(WRITE_TOOL, {"file_path": str(self.project / path), "content": self._first(path)})
        if seen.step:
            return ToolUse(f"{prefix}step_done", {"step": seen.step})
        return self._stop(f"no move in: {last.result[:300]}")

    def _refused(self, prefix: str, seen: Seen, written: Sequence[str], result: str) -> ToolUse | str:
        """The verifier refused the step's files: each file a refusal names written again as the model wrote it,
        with the value the refusal expected in the place it names, then step_done with the step the words name."""
        if not seen.refusals or not seen.step:
            return self._stop(f"a refusal with nothing to act on: {result[:300]}")
        for path in dict.fromkeys(r.path for r in seen.refusals):
            if str(self.project / path) not in written:
                fixed = repaired_json(self._written(path), [r for r in seen.refusals if r.path == path])
                if not fixed:
                    return self._stop(f"{path} holds no place the refusal names: {result[:300]}")
                return ToolUse(WRITE_TOOL, {"file_path": str(self.project / path), "content": fixed})
        return ToolUse(f"{prefix}step_done", {"step": seen.step})

    def _first(self, path: str) -> str:
        """A step's file as the model first writes it: the catalogue's example, SLIPPED with SLIP in it once."""
        text = self._compose(path)
        if not self.slip or path != SLIPPED or self._written(path):
            return text
        return json.dumps({**json.loads(text), SLIP[0]: SLIP[1]}, indent=2) + "\n"

    def _written(self, path: str) -> str:
        """What the model last wrote at ``path`` with Write in this conversation ("" if nothing)."""
        mine = [e for e in self.writes if e.input.get("file_path") == str(self.project / path)]
        return str(mine[-1].input.get("content", "")) if mine else ""

    def _verdict(self, validator: str, first: str) -> dict[str, Any]:
        """The validator's verdict, as its subagent would give it: the critic (the first validator the run named)
        reads REPAIRED in the project and fails it, with a finding, while it lacks REVIEW_LINE."""
        target = self.project / REPAIRED
        lacking = not target.is_file() or REVIEW_LINE not in target.read_text("utf-8")
        if self.critic and validator == first and lacking:
            return {"validator": validator, "verdict": "fail", "findings": [critic_finding()]}
        return {"validator": validator, "verdict": "pass"}

    def _fix(self, repair: Repair) -> str:
        """The repaired file: its text as written before, and the line the finding asks for at its end."""
        return self._compose(repair.path).rstrip("\n") + f"\n\n{repair.line}\n"

    def _compose(self, path: str) -> str:
        return StandIn(None, self.project, {"1.2.0": self.examples}).compose(path)  # type: ignore[arg-type]

    def _stop(self, why: str) -> str:
        self.stopped = why
        return f"I stop here: {why}"


def exchanges(messages: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """Every tool call in the conversation, paired with its result, in order."""
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    out: list[Exchange] = []
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                uses[str(block.get("id"))] = (str(block.get("name")), dict(block.get("input") or {}))
            elif block.get("type") == "tool_result":
                name, given = uses.get(str(block.get("tool_use_id")), ("", {}))
                out.append(Exchange(name, given, _result_text(block.get("content")), bool(block.get("is_error"))))
    return out


def critic_finding() -> str:
    """The critic's finding: the file it judged and the line that would fix it, in one sentence."""
    return f'{REPAIRED} never says how its sources were checked: add the line "{REVIEW_LINE}" at its end.'


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


@dataclass(frozen=True)
class ClaudeRun:
    """One ``claude -p`` session through the bridge: how it ended, what the model saw, where it ran."""

    done: subprocess.CompletedProcess[str]
    player: RunPlayer
    project: Path
    home: Path
    forms: list[dict[str, Any]]  # every form the Elicitation hook answered (none without the hook)


def run_claude_run(modules: Path, work: Path, release: Path, trust: Path, bin_dir: Path, check: Check) -> None:
    where = "claude -p (its MCP client, the model a stand-in)"
    alone = claude_p(modules, work / "claude-run-no-hook", (release, trust, bin_dir), person=False)
    refused = (alone.player.bridge_results or [""])[0]
    check(
        CANCELLED in refused and not (alone.project / ".rimthan" / "runs").exists() and alone.done.returncode == 0,
        f"{where}, no Elicitation hook: the bridge's form for a start_run fact is cancelled; the run does not "
        "start, nothing written",
        refused.splitlines()[0][:200] if refused else alone.player.stopped or _tail(alone.done),
    )
    run = claude_p(modules, work / "claude-run", (release, trust, bin_dir), person=True)
    where = "claude -p (its MCP client and Write tool, the model a stand-in, the person an Elicitation hook)"
    said, results = json_object(run.done.stdout), run.player.bridge_results
    structured = sum(bool(json_object(r)) for r in results)
    check(
        run.done.returncode == 0 and said.get("result") == DONE and not run.player.stopped,
        f"{where}: the run reaches its end",
        run.player.stopped
        or f"{len(results)} bridge calls ({structured} results as structured JSON), {len(run.forms)} forms answered",
    )
    by = confirmed_by(run.project)
    check(
        bool(by) and set(by.values()) == {BY_ELICITATION} and len(run.forms) >= len(by),
        f"{where}: every fact is put to the person in a form and recorded as {BY_ELICITATION!r} (the run's state)",
        f"{len(by)} facts, {len(run.forms)} forms answered: {sorted(set(by.values()))}",
    )
    check(
        bool(run.player.writes) and not any(e.is_error for e in run.player.writes),
        f"{where}: each file a step names is written with Claude Code's own {WRITE_TOOL} (acceptEdits)",
        "; ".join(e.result[:80] for e in run.player.writes[:3]),
    )
    _words_reached(run, release, check, where)
    _repaired(run, check, where)
    _refusal_repaired(run, check, where)
    leaks = [hit for i, text in enumerate(run.player.bridge_results) for hit in opaque_in(text, f"result[{i}]")]
    check(not leaks, f"{where}: no token, digest or attestation in any tool result the model got", "; ".join(leaks[:3]))
    _outside(run.project, run.home, bin_dir, check, where)
    _older_era(modules, work, (release, trust, bin_dir), check)


def _older_era(modules: Path, work: Path, world: tuple[Path, Path, Path], check: Check) -> None:
    """The whole run again with the bridge behind interop/host_shim.py ``--era``: a 2025-11-25 connection."""
    run = claude_p(modules, work / f"claude-run-{OLDER_ERA}", world, person=True, era=OLDER_ERA)
    where = f"claude -p on a {OLDER_ERA} connection (the bridge behind interop/host_shim.py)"
    log = run.project.parent / SHIM_LOG
    shim = negotiated_in(log.read_text("utf-8").splitlines()) if log.is_file() else ""
    results = run.player.bridge_results
    structured = sum(bool(json_object(r)) for r in results)
    check(
        run.done.returncode == 0 and not run.player.stopped and shim == negotiated(run.home) == OLDER_ERA,
        f"{where}: the run reaches its end; the bridge answered initialize with {OLDER_ERA}, and Claude Code's "
        "MCP log says it negotiated that",
        run.player.stopped
        or f"bridge {shim or 'none'}, Claude Code {negotiated(run.home) or 'none'}; {len(results)} bridge calls "
        f"({structured} results as structured JSON)",
    )
    _words_reached(run, world[0], check, where)
    _refusal_repaired(run, check, where)
    leaks = [hit for i, text in enumerate(results) for hit in opaque_in(text, f"result[{i}]")]
    check(not leaks, f"{where}: no token, digest or attestation in any tool result the model got", "; ".join(leaks[:3]))


def _words_reached(run: ClaudeRun, release: Path, check: Check, where: str) -> None:
    """The start_run result the model got holds the first step's instruction text and the step_done advice."""
    phrase = first_instruction(release, FIRST_STEP)
    started = next((r for r in run.player.bridge_results if "Started run" in words_of(r)), "")
    words = words_of(started)
    check(
        phrase in words and STEP_DONE_ADVICE in words,
        f"{where}: the model reads the first step's instruction text and {STEP_DONE_ADVICE!r} in the start_run "
        "result it got",
        f"protocol {negotiated(run.home) or 'unknown'}; {'structured content' if json_object(started) else 'text'} "
        f"handed to the model: {started[:160]!r}",
    )


def first_instruction(release: Path, step: str) -> str:
    """The first line of a step's instruction text in the release (its heading left out)."""
    instruction = (release / "catalogue" / "assets" / "instructions" / f"{step}.md").read_text("utf-8")
    return next(line for line in instruction.splitlines() if line.strip() and not line.startswith("#"))


def _repaired(run: ClaudeRun, check: Check, where: str) -> None:
    """The critic's fail came back in words that named the finding and the step; the model rewrote the file with
    Write and called step_done again; the file in the project holds the repair."""
    failed = [words_of(r) for r in run.player.bridge_results if FAILED_ROUND in words_of(r)]
    rewrites = [e for e in run.player.writes if REVIEW_LINE in str(e.input.get("content"))]
    target = run.project / REPAIRED
    check(
        len(failed) == 1 and critic_finding() in failed[0] and len(rewrites) == 1 and not rewrites[0].is_error
        and target.is_file() and REVIEW_LINE in target.read_text("utf-8"),
        f"{where}: a validator's fail verdict comes back with its finding; the model rewrites {REPAIRED} with "
        f"{WRITE_TOOL}, calls step_done again and the validators pass",
        f"{len(failed)} failed round(s) the model read, {len(rewrites)} repair write(s): "
        + "; ".join(e.result[:80] for e in rewrites[:1]),
    )  # fmt: skip


def _refusal_repaired(run: ClaudeRun, check: Check, where: str) -> None:
    """The verifier's refusal of SLIPPED came back in words naming the file, the place, the value expected there and
    the call to make; the model wrote the file again with Write, that place fixed, and called step_done again."""
    handed = [r for r in run.player.bridge_results if FILES_REFUSED in words_of(r)]
    refusals = [words_of(r) for r in handed]
    said = refusals[0] if len(refusals) == 1 else ""
    lines = said.splitlines()
    named = [i for i, line in enumerate(lines) if line.startswith(f"{SLIPPED} (its JSON Schema: ")]
    told = bool(named) and lines[named[0] + 1].startswith(REFUSED_AT) and "'desk-research' was expected" in said
    told = told and lines[named[0]].endswith("; read it and match it):")  # (the schema copy the words name)
    writes = [json_object(str(e.input.get("content"))) for e in run.player.writes if e.input.get("file_path")
              == str(run.project / SLIPPED) and not e.is_error]  # fmt: skip
    on_disk = json_object((run.project / SLIPPED).read_text("utf-8")) if (run.project / SLIPPED).is_file() else {}
    check(
        told and "call step_done again; the run waits at step desk-research." in said
        and [w.get(SLIP[0]) for w in writes] == [SLIP[1], "desk-research"] and on_disk.get(SLIP[0]) == "desk-research",
        f"{where}: the verifier refuses {SLIPPED} ({SCHEMA_FAILED}); the one refusal the model reads names the file, "
        f"the place and the value expected; the model writes the file again with {WRITE_TOOL} and calls step_done",
        f"{len(refusals)} refusal(s) the model read (as {', '.join(_part(r) for r in handed) or 'none'}), "
        f"{len(writes)} write(s) of {SLIPPED}: "
        + (said.replace(chr(10), " | ")[:240] if said else "none"),
    )  # fmt: skip


def _part(result: str) -> str:
    """Which part of a tool result Claude Code handed the model: the structured content (as JSON) or the text."""
    return "structured content" if json_object(result) else "text"


def negotiated(home: Path) -> str:
    """The protocol version Claude Code's MCP log for the bridge says it connected on ("" if none says)."""
    for log in sorted(home.glob(f".cache/claude-cli-nodejs/*/mcp-logs-{SERVER}/*")):
        found = re.findall(r'negotiatedProtocolVersion\\?":\s*\\?"([0-9-]+)', log.read_text("utf-8", "replace"))
        if found:
            return str(found[-1])
    return ""


def claude_p(modules: Path, work: Path, world: tuple[Path, Path, Path], *, person: bool, era: str = "") -> ClaudeRun:
    """``claude -p`` in a new HOME and project, the stand-in playing the model (and the hook the person); with
    ``era``, the bridge behind interop/host_shim.py, so the connection negotiates that revision."""
    release, trust, bin_dir = world
    home, project = work / "home", make_project(work, release, trust)
    home.mkdir()
    (project / ".mcp.json").write_text(json.dumps(shimmed(era, work / SHIM_LOG) if era else MCP_JSON), "utf-8")
    approve_project_servers(home, project, [SERVER])
    forms, settings = work / "forms.jsonl", work / "settings.json"
    hook = {"type": "command", "command": sys.executable, "args": [str(PERSON), str(forms)]}
    settings.write_text(json.dumps({"hooks": {"Elicitation": [{"hooks": [hook]}]}} if person else {}), "utf-8")
    player = RunPlayer(project, release / "catalogue" / "examples")
    with model_standin() as model:
        model.anthropic_turn = player
        env = {**claude_env(home, bin_dir), **RUN_ENV, "ANTHROPIC_BASE_URL": model.url}
        command = [str(claude_binary(modules)), "-p", PROMPT, *CLAUDE_RUN, "--settings", str(settings)]
        done = subprocess.run(
            command, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=TIMEOUT, check=False,
        )  # fmt: skip
    asked = forms.read_text("utf-8").splitlines() if forms.is_file() else []
    return ClaudeRun(done, player, project, home, [json.loads(line) for line in asked])


def shimmed(era: str, log: Path) -> dict[str, Any]:
    """The documented ``.mcp.json``, its bridge started behind interop/host_shim.py with ``--era``."""
    entry: dict[str, Any] = dict(MCP_JSON["mcpServers"][SERVER])
    shim = [str(SHIM), "--era", era, str(log), "--", str(entry["command"]), *entry["args"]]
    return {"mcpServers": {SERVER: {**entry, "command": sys.executable, "args": shim}}}


def _outside(project: Path, home: Path, bin_dir: Path, check: Check, where: str) -> None:
    files = [project / "research" / name for name in ("evidence-log.json", "findings.md")]
    check(all(f.is_file() for f in files), f"{where}: the step's files, written by Claude Code's Write, are there", "")
    logs = sorted((project / ".rimthan" / "runs").glob("*.log"))
    state = home / ".local" / "state" / "rimthan"
    audit = [str(bin_dir / "rimthan-mcp"), "audit", *(str(p) for p in logs[:1]), "--state-dir", str(state)]
    done = subprocess.run(
        [*audit, "--releases-dir", "releases", "--trust", "keys/local"], cwd=project, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    ended = done.stdout.strip().splitlines()[-1:] or [done.stderr.strip()[-300:]]
    check(
        len(logs) == 1 and done.returncode == 0 and "outcome: completed" in done.stdout,
        f"{where}: rimthan-mcp audit verifies the run's log as completed",
        ended[0],
    )
    rounds = re.findall(r"\d+ failed validation round\(s\): [^;\n]*", done.stdout)
    check(
        len(rounds) == 1
        and rounds[0].startswith("1 failed validation round(s): desk-research (line ")
        and "outcome: completed" in done.stdout,
        f"{where}: the audit shows the failed round and the run completed after it (the refused step_done issued "
        "no checkpoint: the audit has nothing of it)",
        rounds[0] if rounds else "no failed validation round in the audit",
    )


def confirmed_by(project: Path) -> dict[str, str]:
    """Each fact of the project's one run and how it was confirmed, from the run's state file."""
    found = sorted((project / ".rimthan" / "runs").glob("*.json"))
    states = json_object(found[0].read_text("utf-8")).get("states", []) if len(found) == 1 else []
    last = states[-1] if states and isinstance(states[-1], dict) else {}
    confirmations = (last.get("confirmed_state") or {}).get("confirmations") or {}
    return {name: str(c.get("confirmed_by")) for name, c in confirmations.items() if isinstance(c, dict)}


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}: {(done.stdout.strip() + ' ' + done.stderr.strip())[-200:]}"
