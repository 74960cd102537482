"""The parts of ``make interop``'s Codex CLI results check and its host shim that run without the host CLIs.

interop/codex_run.py reads what Codex hands its model from a Responses API request (``function_call_output``
items, ``Wall time ... Output:`` and the result's structured content) and plays the model's two calls;
interop/model_standin.py answers a real HTTP request on the Responses API with a namespaced function call;
interop/host_shim.py, in front of a real ``rimthan-host serve``, makes the connection negotiate 2025-11-25.
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
RIMTHAN_HOST = str(Path(sys.executable).with_name("rimthan-host"))


@pytest.fixture(scope="module")
def interop() -> Iterator[dict[str, ModuleType]]:
    path = str(REPO_ROOT / "interop")
    sys.path.insert(0, path)  # the interop modules import their siblings, as make interop runs them
    try:
        import claude_run
        import codex_run
        import host_shim
        import model_standin

        yield {"claude_run": claude_run, "codex_run": codex_run, "host_shim": host_shim, "standin": model_standin}
    finally:
        sys.path.remove(path)


def _kept() -> list[dict[str, Any]]:
    return list(json.loads(KEPT.read_text("utf-8"))["mistakes-repair-completion"])


def _codex_input(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Responses API request's input as Codex 0.171 sends it: each call, then its output (the structured
    content as JSON after Codex's head), the first as a string, the rest as ``input_text`` parts."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": []}]
    for i, reply in enumerate(replies):
        output = f"Wall time: 0.{i}040 seconds\nOutput:\n{json.dumps(reply['data'], separators=(',', ':'))}"
        items += [
            {"type": "function_call", "name": "show_step", "namespace": "mcp__rimthan", "arguments": "{}",
             "call_id": f"call_{i}"},
            {"type": "function_call_output", "call_id": f"call_{i}",
             "output": output if i == 0 else [{"type": "input_text", "text": output}]},
        ]  # fmt: skip
    return items


def test_codex_s_outputs_are_read_into_the_bridge_s_words(interop: dict[str, ModuleType]) -> None:
    """Codex hands the model the structured content as JSON; the words read from it are the reply's text."""
    codex_run, words_of = interop["codex_run"], interop["claude_run"].words_of
    replies = _kept()
    seen = codex_run.codex_exchanges(_codex_input(replies))
    assert [e.name for e in seen] == ["show_step"] * len(replies)
    assert [words_of(e.result) for e in seen] == [r["text"] for r in replies]
    assert {codex_run.form_of(e.result) for e in seen} == {"structured"}
    assert codex_run.form_of("No run is active. Call start_run.") == "text"
    assert codex_run.handed([{"type": "input_text", "text": "Wall time: 1.5 seconds\nOutput:\nplain"}]) == "plain"


def test_the_codex_player_starts_a_run_then_shows_its_step_then_ends_the_turn(interop: dict[str, ModuleType]) -> None:
    codex_run = interop["codex_run"]
    player = codex_run.CodexPlayer({"objective": "Should we?"})
    replies = _kept()[:2]
    moves = [player({"input": _codex_input(replies[:n])}) for n in range(3)]
    assert [(m.name, m.input) for m in moves[:2]] == [
        ("mcp__rimthan.start_run", {"workflow": "research", "facts": {"objective": "Should we?"}}),
        ("mcp__rimthan.show_step", {}),
    ]
    assert moves[2] == "ok"
    assert interop["claude_run"].words_of(player.result("show_step")) == replies[0]["text"]


def test_the_responses_stand_in_streams_the_turn_s_namespaced_function_call(interop: dict[str, ModuleType]) -> None:
    standin = interop["standin"]
    with standin.model_standin() as model:
        model.responses_turn = lambda body: standin.ToolUse("mcp__rimthan.show_step", {"n": len(body["input"])})
        events = sse_events(f"{model.url}/v1/responses", {"stream": True, "input": [{"type": "message"}]})
    assert [e["type"] for e in events] == ["response.created", "response.output_item.done", "response.completed"]
    item = events[1]["item"]
    assert (item["type"], item["namespace"], item["name"]) == ("function_call", "mcp__rimthan", "show_step")
    assert json.loads(item["arguments"]) == {"n": 1}


def test_the_shim_refuses_a_discovery_probe_and_lowers_the_offer_only_when_asked(
    interop: dict[str, ModuleType],
) -> None:
    shim = interop["host_shim"]
    offer = shim.Offer("2025-11-25", no_elicitation=True)
    probe = json.dumps({"jsonrpc": "2.0", "id": "p", "method": "server/discover", "params": {}})
    refused = shim.from_host(probe, offer, initialized=False)
    assert refused.line == "" and json.loads(refused.answer)["error"]["code"] == shim.METHOD_NOT_FOUND
    assert shim.from_host(probe, shim.Offer(), initialized=False).line == probe
    params = {"protocolVersion": "2026-07-28", "capabilities": {"roots": {}, "elicitation": {"form": {}}}}
    init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    passed = shim.from_host(init, offer, initialized=False)
    assert passed.initialize and json.loads(passed.line)["params"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {}},
    }
    assert json.loads(shim.from_host(init, shim.Offer(), initialized=False).line)["params"] == params
    assert shim.from_host("not json", offer, initialized=True).line == "not json"


def test_the_shim_in_front_of_the_bridge_makes_the_connection_negotiate_2025_11_25(
    interop: dict[str, ModuleType], tmp_path: Path
) -> None:
    """A real ``rimthan-host serve`` behind the shim: the host's 2026-07-28 probe (which the bridge itself
    answers) is refused, its initialize offering 2026-07-28 is answered 2025-11-25, and the shim's log says so."""
    shim, log = interop["host_shim"], tmp_path / "shim.jsonl"
    era = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {"_meta": era}},
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2026-07-28", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "test", "version": "0"}}},
    ]  # fmt: skip
    command = [sys.executable, str(REPO_ROOT / "interop" / "host_shim.py"), "--era", "2025-11-25", str(log)]
    done = subprocess.run(
        [*command, "--", RIMTHAN_HOST, "serve"], input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert answers["probe"]["error"]["code"] == shim.METHOD_NOT_FOUND
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25"
    assert shim.negotiated_in(log.read_text("utf-8").splitlines()) == "2025-11-25"
