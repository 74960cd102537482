"""The parts of ``make interop``'s whole run in ``claude -p`` that run without Claude Code.

interop/claude_run.py's model reads the bridge's kept replies (tests/host/data/bridge_replies.json) into the
move a model makes next, from the text or from the structured content, a failed round's repair included (the
file and line its finding names, then step_done with the step it names; without those words, no move), and a
refusal of the files' repair (the evidence log it first writes with a route its JSON Schema refuses, written again
with the value the refusal says was expected at the place it names);
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


# the verifier's refusal of the route the player first writes, as the bridge words it (a real run's reply)
ROUTE_REFUSED = "  - json_schema_failed at /route: artifact 'evidence-log': 'desk-research' was expected"
EXAMPLES = REPO_ROOT / "catalogues" / "research-decision" / "1.2.0"


def _refusal(finding: str = ROUTE_REFUSED) -> dict[str, Any]:
    """The kept refusal of the evidence log (its JSON unreadable), with ``finding`` in place of the kept one."""
    replies = json.loads(KEPT.read_text("utf-8"))["mistakes-repair-completion"]
    reply = next(r for r in replies if r["data"].get("status") == "deterministic_validation_failed")
    kept = next(line for line in str(reply["text"]).splitlines() if line.startswith("  - json_parse_failed"))
    return {**reply, "text": str(reply["text"]).replace(kept, finding)}


def _write(i: str, given: dict[str, Any]) -> list[dict[str, Any]]:
    """A Write call in the conversation and Claude Code's result for it."""
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "Write", "input": given}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "File written"}]},
    ]


def _after_refusal(player: Any, refusal: str, first: dict[str, Any], then: dict[str, Any] | None = None) -> Any:
    """The player's move after writing ``first``, step_done refused with ``refusal``, then (if given) ``then``."""
    tools = [{"name": n} for n in ("Write", "mcp__rimthan__start_run", "mcp__rimthan__step_done")]
    result = {"type": "tool_result", "tool_use_id": "s", "content": refusal, "is_error": True}
    messages = [
        *_write("w", first),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "s", "name": "mcp__rimthan__step_done"}]},
        {"role": "user", "content": [result]},
        *(_write("r", then) if then else []),
    ]
    return player({"tools": tools, "messages": messages})


def test_the_player_first_writes_the_evidence_log_with_the_one_value_its_schema_refuses(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    claude_run = interop["claude_run"]
    player = claude_run.RunPlayer(tmp_path, EXAMPLES / "examples")
    first = json.loads(player._first(claude_run.SLIPPED))
    schema = json.loads((EXAMPLES / "schemas" / "evidence-log.schema.json").read_text("utf-8"))
    wrong = [(list(e.absolute_path), e.message) for e in Draft202012Validator(schema).iter_errors(first)]
    assert wrong == [(["route"], "'desk-research' was expected")]  # the line the bridge words (ROUTE_REFUSED)
    assert player._first("research/findings.md") == player._compose("research/findings.md")  # only the log slips


def test_the_player_writes_a_refused_file_again_with_the_value_expected_then_calls_step_done(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    claude_run = interop["claude_run"]
    player = claude_run.RunPlayer(tmp_path, EXAMPLES / "examples")
    path = str(tmp_path / claude_run.SLIPPED)
    slipped = {"file_path": path, "content": player._first(claude_run.SLIPPED)}
    refusal = _refusal()
    for words in (refusal["text"], json.dumps(refusal["data"] | {"text": refusal["text"]})):  # text or structured
        write = _after_refusal(player, words, slipped)
        assert (write.name, write.input["file_path"]) == ("Write", path)
        assert json.loads(write.input["content"]) == json.loads(player._compose(claude_run.SLIPPED))
        done = _after_refusal(player, words, slipped, write.input)
        assert (done.name, done.input) == ("mcp__rimthan__step_done", {"step": "desk-research"})


def test_a_refusal_without_a_value_to_put_in_place_stops_the_player(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    """A refusal naming no place and value (a property missing), or a place the file the model wrote lacks."""
    claude_run = interop["claude_run"]
    player = claude_run.RunPlayer(tmp_path, EXAMPLES / "examples")
    slipped = {"file_path": str(tmp_path / claude_run.SLIPPED), "content": player._first(claude_run.SLIPPED)}
    missing = _refusal("  - json_schema_failed: artifact 'evidence-log': 'gaps' is a required property")
    said = _after_refusal(player, missing["text"], slipped)
    assert said.startswith("I stop here: a refusal with nothing to act on:")
    elsewhere = _refusal(ROUTE_REFUSED.replace("/route", "/no_such_place"))
    said = _after_refusal(player, elsewhere["text"], slipped)
    assert said.startswith(f"I stop here: {claude_run.SLIPPED} holds no place the refusal names:")
    unnamed = _refusal()["text"].replace("; the run waits at step desk-research.", ".")
    assert _after_refusal(player, unnamed, slipped).startswith("I stop here: a refusal with nothing to act on:")
