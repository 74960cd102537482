"""The parts of ``make interop``'s whole run in ``claude -p`` that run without Claude Code.

interop/claude_run.py's model reads the bridge's kept replies (tests/host/data/bridge_replies.json) into the
move a model makes next, from the text or from the structured content, a failed round's repair included (the
file and line its finding names, then step_done with the step it names; without those words, no move), and a
refusal of the files' repair: the evidence log it first writes breaks its JSON Schema where the kept
``json_schema_failed`` refusal says, and handed that refusal as an error result (text or structured content) it
writes the log again with the value the words give at the place they name, then calls step_done; an error result
it cannot act on (the kept unreadable-log refusal, a kept misplaced move, a refusal naming no step, a file it never
wrote) ends its turn. The tests talk to the player only as Claude Code does, through the requests it answers;
interop/model_standin.py answers a real
HTTP request on the Messages API with a streamed ``tool_use``; interop/claude_person.py, run as Claude Code runs
an ``Elicitation`` hook, accepts a form as offered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from support.raw_http import sse_events

REPO_ROOT = Path(__file__).resolve().parents[2]
KEPT = REPO_ROOT / "tests" / "host" / "data" / "bridge_replies.json"


@pytest.fixture(scope="module")
def interop() -> Iterator[dict[str, ModuleType]]:
    path = str(REPO_ROOT / "interop")
    sys.path.insert(0, path)  # the interop modules import their siblings, as make interop runs them
    try:
        import claude_run
        import claude_words
        import model_standin

        yield {"claude_run": claude_run, "claude_words": claude_words, "model_standin": model_standin}
    finally:
        sys.path.remove(path)


def _kept() -> list[dict[str, Any]]:
    return [r for r in json.loads(KEPT.read_text("utf-8"))["mistakes-repair-completion"] if not r["is_error"]]


def _move(seen: Any) -> object:
    """What the player acts on first: the end, a validator, a question, else the files to write and the step."""
    return seen.complete or seen.validators or seen.question or (seen.files, seen.step)


def _named(data: dict[str, Any]) -> object:
    """The move a reply's data names (what the player must find in its words)."""
    if data.get("status") == "completed":
        return True
    validators = data.get("validators") if data.get("status") == "validators_pending" else None
    question = (data.get("question") or {}).get("field")
    return (
        tuple(v["name"] for v in validators or [])
        or question
        or (tuple(data.get("files") or []), (data.get("step") or {}).get("id", ""))
    )


def test_each_kept_reply_asks_from_its_words_alone_the_move_its_data_names(interop: dict[str, ModuleType]) -> None:
    """The player reads only words: the text content, or the structured content's text field (what Claude Code
    hands its model on a 2026-07-28 connection); the structured content without that field gives it no move."""
    claude_run = interop["claude_run"]
    read, moves = claude_run.read_result, []
    for reply in _kept():
        if reply["data"].get("status") == "validation_failed":  # the step to call step_done with again
            assert read(reply["text"]).step == read(json.dumps(reply["data"])).step == reply["data"]["step"]["id"]
            continue
        from_text, from_data = read(reply["text"]), read(json.dumps(reply["data"]))
        assert _move(from_text) == _move(from_data) == _named(reply["data"]), reply["text"][:200]
        words_gone = {k: v for k, v in reply["data"].items() if k != interop["claude_words"].TEXT_FIELD}
        assert not read(json.dumps(words_gone)).complete and not read(json.dumps(words_gone)).step
        moves.append(from_text)
    assert moves[-1].complete
    assert ("evidence-auditor", "decision-critic") in [m.validators for m in moves]
    assert "research_route" in [m.question for m in moves]
    assert ("research/evidence-log.json", "research/findings.md") in [m.files for m in moves]


def test_the_player_writes_each_named_file_with_write_then_calls_step_done(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    claude_run = interop["claude_run"]
    reply = next(r for r in _kept() if r["data"].get("files") and r["data"].get("status") == "active")
    examples = REPO_ROOT / "catalogues" / "research-decision" / "1.2.0" / "examples"
    player = claude_run.RunPlayer(tmp_path, examples)
    tools = [{"name": n} for n in ("Write", "mcp__rimthan__start_run", "mcp__rimthan__step_done")]
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "mcp__rimthan__start_run"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": reply["text"]}]},
    ]
    moves = []
    for i in range(3):
        move = player({"tools": tools, "messages": messages})
        moves.append(move)
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"w{i}", "name": move.name, "input": move.input}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"w{i}", "content": "File created"}]},
        ]
    assert [m.name for m in moves] == ["Write", "Write", "mcp__rimthan__step_done"]
    assert [m.input["file_path"] for m in moves[:2]] == [str(tmp_path / f) for f in reply["data"]["files"]]
    assert moves[2].input == {"step": reply["data"]["step"]["id"]}


def test_the_messages_api_stand_in_streams_the_turn_s_tool_use(interop: dict[str, ModuleType]) -> None:
    standin = interop["model_standin"]
    with standin.model_standin() as model:
        model.anthropic_turn = lambda body: standin.ToolUse("mcp__rimthan__show_step", {"n": len(body["tools"])})
        body = {"stream": True, "tools": [{"name": "x"}], "messages": []}
        events = sse_events(f"{model.url}/v1/messages?beta=true", body)
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    assert events[1]["content_block"]["name"] == "mcp__rimthan__show_step"
    assert json.loads(events[2]["delta"]["partial_json"]) == {"n": 1}
    assert events[4]["delta"]["stop_reason"] == "tool_use"


def test_the_person_hook_accepts_a_form_as_offered(tmp_path: Path) -> None:
    form = {
        "hook_event_name": "Elicitation",
        "mcp_server_name": "rimthan",
        "requested_schema": {
            "type": "object",
            "properties": {
                "value": {"type": "string", "default": "Should we?"},
                "confirm": {"type": "boolean"},
                "route": {"type": "string", "enum": ["desk-research", "experiment"]},
            },
        },
    }
    kept = tmp_path / "forms.jsonl"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "interop" / "claude_person.py"), str(kept)],
        input=json.dumps(form), capture_output=True, text=True, check=True,
    )  # fmt: skip
    said = json.loads(done.stdout)["hookSpecificOutput"]
    assert said == {
        "hookEventName": "Elicitation",
        "action": "accept",
        "content": {"value": "Should we?", "confirm": True, "route": "desk-research"},
    }
    assert json.loads(kept.read_text("utf-8")) == form


def _failed_reply(finding: str) -> str:
    """The kept failed round's words, with the critic's finding in place of the kept one."""
    reply = next(r for r in _kept() if r["data"].get("status") == "validation_failed")
    return str(reply["text"]).replace("The recommendation cites no source.", finding)


def _play(player: Any, results: list[tuple[str, str]]) -> Any:
    """The player's move after the bridge tool calls ``results`` (tool, result text), one per turn."""
    tools = [{"name": n} for n in ("Write", "mcp__rimthan__start_run", "mcp__rimthan__record_verdict")]
    messages: list[dict[str, Any]] = []
    for i, (tool, text) in enumerate(results):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": tool, "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}]},
        ]
    return player({"tools": tools, "messages": messages})


def test_the_critic_fails_the_first_validator_until_the_file_holds_the_line(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    claude_run = interop["claude_run"]
    pending = [r["text"] for r in _kept() if r["data"].get("status") == "validators_pending"]
    player = claude_run.RunPlayer(tmp_path, REPO_ROOT / "catalogues" / "research-decision" / "1.2.0" / "examples")
    first = _play(player, [("mcp__rimthan__step_done", pending[0])])
    assert first.name == "mcp__rimthan__record_verdict"
    finding = claude_run.critic_finding()
    assert first.input == {"validator": "evidence-auditor", "verdict": "fail", "findings": [finding]}
    other = _play(player, [("mcp__rimthan__step_done", pending[0]), ("mcp__rimthan__record_verdict", pending[1])])
    assert other.input == {"validator": "decision-critic", "verdict": "pass"}  # only the first validator criticises
    target = tmp_path / claude_run.REPAIRED
    target.parent.mkdir(parents=True)
    target.write_text(f"# Findings\n\n{claude_run.REVIEW_LINE}\n", "utf-8")
    again = _play(player, [("mcp__rimthan__step_done", pending[0])])
    assert again.input == {"validator": "evidence-auditor", "verdict": "pass"}


def test_the_player_repairs_the_file_a_finding_names_then_calls_step_done_with_the_step_named(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    claude_run = interop["claude_run"]
    player = claude_run.RunPlayer(tmp_path, REPO_ROOT / "catalogues" / "research-decision" / "1.2.0" / "examples")
    failed = _failed_reply(claude_run.critic_finding())
    write = _play(player, [("mcp__rimthan__record_verdict", failed)])
    assert write.name == "Write" and write.input["file_path"] == str(tmp_path / claude_run.REPAIRED)
    assert write.input["content"].rstrip().endswith(claude_run.REVIEW_LINE)
    assert write.input["content"].startswith(player._compose(claude_run.REPAIRED).rstrip())  # the text it wrote
    tools = [{"name": n} for n in ("Write", "mcp__rimthan__start_run")]
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "v", "name": "mcp__rimthan__record_verdict"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "v", "content": failed}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "w", "name": "Write", "input": write.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "w", "content": "File updated"}]},
    ]
    done = player({"tools": tools, "messages": messages})
    assert (done.name, done.input) == ("mcp__rimthan__step_done", {"step": "desk-research"})


def test_without_the_repair_words_the_player_stops(interop: dict[str, ModuleType], tmp_path: Path) -> None:
    """A failed round that does not name the step, or a finding on a file the step does not write: no move."""
    claude_run = interop["claude_run"]
    player = claude_run.RunPlayer(tmp_path, REPO_ROOT / "catalogues" / "research-decision" / "1.2.0" / "examples")
    unnamed = _failed_reply(claude_run.critic_finding()).replace("; the run waits at step desk-research.", ".")
    assert claude_run.read_result(unnamed).step == ""
    write = _play(player, [("mcp__rimthan__record_verdict", unnamed)])
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "v", "name": "mcp__rimthan__record_verdict"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "v", "content": unnamed}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "w", "name": "Write", "input": write.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "w", "content": "File updated"}]},
    ]
    said = player({"tools": [{"name": "Write"}, {"name": "mcp__rimthan__start_run"}], "messages": messages})
    assert said.startswith("I stop here: no move in:")  # no step_done without the step named
    elsewhere = _failed_reply(claude_run.critic_finding().replace(claude_run.REPAIRED, "research/other.md"))
    assert claude_run.read_result(elsewhere).repairs == ()
    said = _play(player, [("mcp__rimthan__record_verdict", elsewhere)])
    assert said.startswith("I stop here: a failed round with no finding to act on:")


EXAMPLES = REPO_ROOT / "catalogues" / "research-decision" / "1.2.0"
LOG = "research/evidence-log.json"  # the file the desk-research step names first
STEP_DONE = "mcp__rimthan__step_done"


def _kept_reply(status: str, failures: tuple[str, ...] = ()) -> dict[str, Any]:
    """The first kept reply (errors included) with ``status`` (and, if given, those failures)."""
    replies = json.loads(KEPT.read_text("utf-8"))["mistakes-repair-completion"]
    return next(
        r for r in replies
        if r["data"].get("status") == status and (not failures or tuple(r["data"]["failures"]) == failures)
    )  # fmt: skip


def _at_desk_research() -> str:
    """The kept reply handing the model the desk-research step's files to write."""
    replies = json.loads(KEPT.read_text("utf-8"))["mistakes-repair-completion"]
    return str(next(r for r in replies if LOG in (r["data"].get("files") or []))["text"])


def _handed(reply: dict[str, Any], form: str) -> str:
    """A kept reply as Claude Code hands it to the model: its text, or its structured content as JSON."""
    return str(reply["text"]) if form == "text" else json.dumps(reply["data"])


class _Talk:
    """A conversation with the player: each move it makes answered with a result, as Claude Code answers it."""

    def __init__(self, player: Any, started: str) -> None:
        self.player, self.messages = player, list[dict[str, Any]]()
        self.answer("mcp__rimthan__start_run", {}, started)

    def answer(self, name: str, given: dict[str, Any], result: str, is_error: bool = False) -> None:
        i = f"t{len(self.messages)}"
        self.messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": name, "input": given}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": result,
                                          "is_error": is_error}]},
        ]  # fmt: skip

    def move(self) -> Any:
        """The player's next move: (tool, input) for a call, else the words it ended its turn with."""
        tools = [{"name": n} for n in ("Write", "mcp__rimthan__start_run", STEP_DONE)]
        said = self.player({"tools": tools, "messages": self.messages})
        return said if isinstance(said, str) else (said.name, said.input)

    def play(self, result: str = "File created", is_error: bool = False) -> Any:
        """The player's next move, answered with ``result``."""
        said = self.move()
        assert not isinstance(said, str), said
        name, given = said
        self.answer(name, given, result, is_error)
        return said


def _to_step_done(talk: _Talk) -> tuple[Any, Any]:
    """The player's moves at the desk-research step the kept reply hands it: its Writes, then step_done."""
    log, notes = talk.play(), talk.play()
    assert talk.move() == (STEP_DONE, {"step": "desk-research"})
    return log, notes


def test_the_player_first_writes_the_evidence_log_with_the_one_value_the_kept_refusal_names(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    """Its first Write of the log breaks its JSON Schema at one place, as the bridge's kept refusal words it."""
    talk = _Talk(interop["claude_run"].RunPlayer(tmp_path, EXAMPLES / "examples"), _at_desk_research())
    log, notes = _to_step_done(talk)
    assert (log[0], log[1]["file_path"]) == ("Write", str(tmp_path / LOG))
    schema = json.loads((EXAMPLES / "schemas" / "evidence-log.schema.json").read_text("utf-8"))
    wrong = Draft202012Validator(schema).iter_errors(json.loads(log[1]["content"]))
    refused = [f"  - json_schema_failed at /{'/'.join(map(str, e.absolute_path))}: artifact 'evidence-log': "
               f"{e.message}" for e in wrong]  # fmt: skip
    kept = _kept_reply("deterministic_validation_failed", ("json_schema_failed",))["text"]
    assert refused == [line for line in kept.splitlines() if line.startswith("  - ")]
    assert notes[1]["content"] == (EXAMPLES / "examples" / "findings.md").read_text("utf-8")  # only the log slips


@pytest.mark.parametrize("form", ["text", "structured content"])
def test_the_player_writes_a_refused_file_again_with_the_value_expected_then_calls_step_done(
    interop: dict[str, ModuleType], tmp_path: Path, form: str
) -> None:
    """The bridge's kept json_schema_failed refusal, handed as an error result (its text, or its structured content
    on a 2026-07-28 connection): the player writes the file the words name again, the value they say was expected
    at the place they name and nothing else changed, then calls step_done with the step they name."""
    talk = _Talk(interop["claude_run"].RunPlayer(tmp_path, EXAMPLES / "examples"), _at_desk_research())
    log, _ = _to_step_done(talk)
    refusal = _kept_reply("deterministic_validation_failed", ("json_schema_failed",))
    talk.answer(STEP_DONE, {"step": "desk-research"}, _handed(refusal, form), is_error=True)
    again = talk.play("File written")
    assert (again[0], again[1]["file_path"]) == ("Write", log[1]["file_path"])
    was, now = json.loads(log[1]["content"]), json.loads(again[1]["content"])
    assert [k for k in now if now[k] != was.get(k)] == ["route"] and now.keys() == was.keys()
    assert f"at /route: artifact 'evidence-log': '{now['route']}' was expected" in refusal["text"]
    assert talk.move() == (STEP_DONE, {"step": "desk-research"})


def test_the_player_stops_on_an_error_result_it_cannot_act_on(interop: dict[str, ModuleType], tmp_path: Path) -> None:
    """Where the kept json_schema_failed refusal has the player write the log again, each error result it cannot act
    on ends its turn: the kept refusal of an unreadable log (no value to put in place), a kept misplaced move, the
    refusal without its last line (no step named), the refusal of a file it never wrote in the conversation."""
    claude_run = interop["claude_run"]
    refusal = str(_kept_reply("deterministic_validation_failed", ("json_schema_failed",))["text"])
    unreadable = str(_kept_reply("deterministic_validation_failed", ("json_parse_failed",))["text"])
    misplaced = str(_kept_reply("move_refused")["text"])
    unnamed = refusal.rsplit("\n", 1)[0]
    assert "json_parse_failed" in unreadable and "step desk-research" not in unnamed
    started = str(_at_desk_research())
    for result, acts in [(refusal, True), (unreadable, False), (misplaced, False), (unnamed, False)]:
        talk = _Talk(claude_run.RunPlayer(tmp_path, EXAMPLES / "examples"), started)
        _to_step_done(talk)
        talk.answer(STEP_DONE, {"step": "desk-research"}, result, is_error=True)
        said = talk.move()
        assert (said[0] == "Write") if acts else str(said).startswith("I stop here: "), (result[:200], said)
    never = _Talk(claude_run.RunPlayer(tmp_path, EXAMPLES / "examples"), started)
    never.answer(STEP_DONE, {"step": "desk-research"}, refusal, is_error=True)
    assert str(never.move()).startswith("I stop here: ")
