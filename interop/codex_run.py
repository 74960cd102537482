"""What the real Codex CLI hands its model from the bridge's tool results: ``codex exec`` calls ``start_run`` and
``show_step``, the model a stand-in on the Responses API (interop/model_standin.py).

The stand-in plays the model (:class:`CodexPlayer`): its replies are function calls in the ``mcp__rimthan``
namespace, ``start_run`` with the catalogue's example facts and then ``show_step``; each request after one carries
Codex's ``function_call_output`` for it, which is what the model reads (:func:`codex_exchanges`). Codex 0.171
writes a result as ``Wall time: <s> seconds\\nOutput:\\n`` and the result's structured content as JSON (the text
content not at all): the bridge's words reach the model in that content's ``text`` field.

``codex exec`` needs the bridge's tools approved (``mcp_servers.rimthan.default_tools_approval_mode="approve"``,
else each call fails "MCP tool call requires approval, but approval policy is never"), and it declares
elicitation but declines every form (no one to show it to): the run is done twice.

1. As configured: ``start_run`` is declined at its first fact's form and starts no run; the model reads the
   bridge's words for that ("The user declined the request to confirm objective ...") and for ``show_step``
   ("No run is active").
2. The bridge behind interop/host_shim.py ``--no-elicitation``, as for a client that cannot show a form: the run
   starts (the facts as relayed by the model), and the model reads the first step's instruction text and
   "call step_done with step interview." in the ``start_run`` and the ``show_step`` results.

Neither time does any token, digest or attestation reach the model.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_run import FIRST_STEP, STEP_DONE_ADVICE, Exchange, first_instruction
from claude_words import words_of
from model_standin import NAMESPACE_SEP, ModelStandIn, ToolUse
from rimthan_host.standin import opaque_in
from rimthan_workflow_registry.run import CONFIRMED_STATE_EXAMPLE

NAMESPACE = "mcp__rimthan"
APPROVE = 'mcp_servers.rimthan.default_tools_approval_mode="approve"'
SHIM = Path(__file__).resolve().with_name("host_shim.py")
PROMPT = "Start a research run with the rimthan tools and show me its step."
DECLINED = "The user declined the request to confirm objective"
NO_RUN = "No run is active. Call start_run"
_WALL_TIME = re.compile(r"\AWall time: [0-9.]+ seconds\nOutput:\n")

Check = Callable[[bool, str, str], bool]
Codex = Callable[..., Any]  # other_hosts' runner: codex(*args, extra_env=...) -> CompletedProcess


@dataclass
class CodexPlayer:
    """The model's side: ``start_run`` with the example facts, then ``show_step``, then an answer ending the turn;
    :attr:`exchanges` holds every call and the output Codex sent back for it, from the latest request."""

    facts: dict[str, Any]
    exchanges: list[Exchange] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> ToolUse | str:
        items = body.get("input")
        self.exchanges = codex_exchanges(items if isinstance(items, list) else [])
        moves = (
            ToolUse(f"{NAMESPACE}{NAMESPACE_SEP}start_run", {"workflow": "research", "facts": self.facts}),
            ToolUse(f"{NAMESPACE}{NAMESPACE_SEP}show_step", {}),
        )
        return moves[len(self.exchanges)] if len(self.exchanges) < len(moves) else "ok"

    def result(self, tool: str) -> str:
        """What the model was handed for the first call of ``tool`` ("" if none)."""
        return next((e.result for e in self.exchanges if e.name == tool), "")


def codex_exchanges(items: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """Every function call in a Responses API request's input, paired with its output, in order; a call's name
    is its tool's (its namespace left off), its result what the model reads (:func:`handed`)."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    out: list[Exchange] = []
    for item in items:
        if item.get("type") == "function_call":
            try:
                given = json.loads(str(item.get("arguments") or "{}"))
            except ValueError:
                given = {}
            calls[str(item.get("call_id"))] = (str(item.get("name")), given if isinstance(given, dict) else {})
        elif item.get("type") == "function_call_output":
            name, given = calls.get(str(item.get("call_id")), ("", {}))
            out.append(Exchange(name, given, handed(item.get("output")), False))
    return out


def handed(output: object) -> str:
    """A ``function_call_output``'s output (a string, or a list of ``input_text`` parts) without Codex's
    ``Wall time ... Output:`` head: the tool's result as the model reads it."""
    parts = output if isinstance(output, list) else [{"type": "input_text", "text": output}]
    text = "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "input_text")
    return _WALL_TIME.sub("", text, count=1)


def form_of(result: str) -> str:
    """``structured`` when the model was handed the result's structured content as JSON, else ``text``."""
    try:
        return "structured" if isinstance(json.loads(result), dict) else "text"
    except ValueError:
        return "text"


def run_codex_results(
    codex: Codex, model: ModelStandIn, overrides: Sequence[str], world: tuple[Path, Path], check: Check
) -> None:
    """The two ``codex exec`` sessions (see module), in the project the documented add line configured."""
    release, project = world
    facts = json.loads((release / "catalogue" / "examples" / CONFIRMED_STATE_EXAMPLE).read_text("utf-8"))
    where = "codex exec (its MCP client, the model a stand-in)"
    asked = _session(codex, model, [*overrides, "-c", APPROVE], facts)
    declined, shown = asked.result("start_run"), asked.result("show_step")
    check(
        DECLINED in words_of(declined) and NO_RUN in words_of(shown) and not (project / ".rimthan" / "runs").exists(),
        f"{where}: codex exec declines the bridge's form; the model reads the bridge's words for start_run (declined, "
        "no run started) and show_step",
        f"{form_of(declined)} handed to the model: {declined[:160]!r}",
    )
    shim = ["-c", f"mcp_servers.rimthan.command={json.dumps(sys.executable)}", "-c", _shim_args(project)]
    relayed = _session(codex, model, [*overrides, "-c", APPROVE, *shim], facts)
    phrase = first_instruction(release, FIRST_STEP)
    started, step = relayed.result("start_run"), relayed.result("show_step")
    check(
        all(phrase in words_of(r) and STEP_DONE_ADVICE in words_of(r) for r in (started, step)),
        f"{where}, the bridge seeing no elicitation (interop/host_shim.py): the model reads the first step's "
        f"instruction text and {STEP_DONE_ADVICE!r} in the start_run and show_step results",
        f"{form_of(started)} handed to the model: {started[:160]!r}",
    )
    results = [e.result for e in (*asked.exchanges, *relayed.exchanges)]
    leaks = [hit for i, text in enumerate(results) for hit in opaque_in(text, f"result[{i}]")]
    check(
        len(results) == 4 and not leaks,
        f"{where}: no token, digest or attestation in any tool result the model got",
        "; ".join(leaks[:3]) or f"{len(results)} results, all {sorted({form_of(r) for r in results})}",
    )


def _session(codex: Codex, model: ModelStandIn, overrides: Sequence[str], facts: dict[str, Any]) -> CodexPlayer:
    player = CodexPlayer(facts)
    model.responses_turn = player
    try:
        codex("exec", "--skip-git-repo-check", *overrides, PROMPT, extra_env={"STANDIN_KEY": "stand-in"})
    finally:
        model.responses_turn = None
    return player


def _shim_args(project: Path) -> str:
    """The bridge's args behind the shim: ``host_shim.py --no-elicitation <log> -- rimthan-host serve``."""
    log = project.parent / "codex-host-shim.jsonl"
    args = [str(SHIM), "--no-elicitation", str(log), "--", "rimthan-host", "serve"]
    return f"mcp_servers.rimthan.args={json.dumps(args)}"
