"""The parts of ``make interop``'s whole run in ``claude -p`` that run without Claude Code.

interop/claude_run.py's model reads the bridge's kept replies (tests/host/data/bridge_replies.json) into the
move a model makes next, from the text or from the structured content; interop/model_standin.py answers a real
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
from support.raw_http import sse_events

REPO_ROOT = Path(__file__).resolve().parents[2]
KEPT = REPO_ROOT / "tests" / "host" / "data" / "bridge_replies.json"


@pytest.fixture(scope="module")
def interop() -> Iterator[dict[str, ModuleType]]:
    path = str(REPO_ROOT / "interop")
    sys.path.insert(0, path)  # the interop modules import their siblings, as make interop runs them
    try:
        import claude_run
        import model_standin

        yield {"claude_run": claude_run, "model_standin": model_standin}
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
        if reply["data"].get("status") == "validation_failed":
            continue  # the player passes every validator: it never meets a failed round
        from_text, from_data = read(reply["text"]), read(json.dumps(reply["data"]))
        assert _move(from_text) == _move(from_data) == _named(reply["data"]), reply["text"][:200]
        words_gone = {k: v for k, v in reply["data"].items() if k != claude_run.TEXT_FIELD}
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
