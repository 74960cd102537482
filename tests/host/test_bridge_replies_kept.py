"""Every reply the bridge gives in complete runs of the packaged catalogue is kept, field for field.

The real ``rimthan-host serve`` over stdio (its real verifier as its child),
driven by the stand-in: a start refused for a missing fact, facts refused
mid-run, misplaced moves, a file the verifier refuses (unreadable, then a value
its JSON Schema does not allow), a repair round, a
question, the migration offer, preview and move from 1.2.0 to 1.3.0, runs
completed on both versions, a resume. Each reply's text, structured content (its
words first, then its data) and error flag
is compared with ``data/bridge_replies.json`` after the run's id and the
temporary paths are replaced by placeholders: the bridge turns the verifier's
typed results into its replies, and a change there must not change a reply.
A deliberate change of the bridge's words regenerates the file:
``RIMTHAN_KEEP_REPLIES=1 .venv/bin/python -m pytest tests/host/test_bridge_replies_kept.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.standin import StandIn
from support.bridge import BIN, drive, example_text, write_files
from support.servers import ServerWorld, build_world

KEPT = Path(__file__).parent / "data" / "bridge_replies.json"
KEEP_THEM = (
    "a deliberate change of words: RIMTHAN_KEEP_REPLIES=1 .venv/bin/python -m pytest"
    " tests/host/test_bridge_replies_kept.py rewrites data/bridge_replies.json (read its diff)"
)
NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("kept-world"))


async def _mistakes_repair_and_completion(model: StandIn) -> None:
    example = json.loads(example_text("1.2.0", "confirmed-state.json"))
    first = {k: example[k] for k in ("objective", "decision_owner")}
    await model.call("show_step")
    await model.call("start_run", {"workflow": "research", "facts": {}})
    started = await model.start(first)
    await model.call("step_done", {"step": "interview", "facts": {"deadline": "next spring"}})
    await model.call("step_done", {"step": "interview", "facts": {"no_such_field": 1}})
    await model.call("step_done", {"step": "confirm-contract"})
    await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
    await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
    rest = {k: v for k, v in example.items() if k not in first}
    interviewed = await model.call("step_done", {"step": "interview", "facts": rest})
    at_question = await model.follow(interviewed, "", until_question=True)
    await model.call("answer_question", {"answer": "no-such-route", "field": "research_route"})
    routed = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
    write_files(model, routed, text="{not json")
    await model.call("step_done", {"step": routed.data["step"]["id"]})
    log = routed.data["files"][0]  # its route slipped: the refusal interop/claude_run.py's model repairs
    write_files(model, routed, log, json.dumps({**json.loads(model.compose(log)), "route": "desk research"}))
    await model.call("step_done", {"step": routed.data["step"]["id"]})
    await model.call("show_step")
    model.fail_once = {"decision-critic"}
    done = await model.follow(await model.call("show_step"), "desk-research")
    await model.call("step_done", {"step": "interview"})
    await model.call("resume_run", {"run": started.data["run"]})
    assert done.data["status"] == "completed" and at_question.data["question"], done.text


async def _migration(model: StandIn) -> None:
    at_question = await model.follow(await model.start(), "desk-research", until_question=True)
    await model.call("migrate_run", {"confirm": False})
    await model.call("migrate_run", {"to_release": "research-decision@9.9.9", "confirm": False})
    await model.call("migrate_run", {"confirm": False, "facts": NEW_FACTS})
    moved = await model.call("migrate_run", {"confirm": True, "facts": NEW_FACTS})
    model.version = "1.3.0"
    done = await model.follow(moved, "user-interviews")
    assert done.data["status"] == "completed" and at_question.data["migration"], done.text


SCRIPTS = {"mistakes-repair-completion": _mistakes_repair_and_completion, "migration": _migration}


def _plain(value: Any, swaps: dict[str, str]) -> Any:
    """``value`` with each key of ``swaps`` (a run id, a temporary path) replaced by its placeholder."""
    text = json.dumps(value, sort_keys=True)
    for old, new in swaps.items():
        text = text.replace(json.dumps(old)[1:-1], new)
    return json.loads(text)


def _replies(model: StandIn, places: dict[Path, str]) -> list[dict[str, Any]]:
    runs = dict.fromkeys(m for r in model.received for m in re.findall(r"\brun-[0-9a-f]{8}\b", r.text + str(r.data)))
    swaps = {str(path): name for path, name in places.items()} | {run: f"<run{i}>" for i, run in enumerate(runs)}
    return [_plain({"text": r.text, "data": r.structured(), "is_error": r.is_error}, swaps) for r in model.received]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_bridge_replies_are_kept(
    world: ServerWorld, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the bridge's PATH holds the verifier it starts, so the audit command it names is rimthan-mcp, here or not)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    model, _ = drive(world, tmp_path, SCRIPTS[name])
    got = _replies(model, {tmp_path: "<tmp>", world.root: "<world>"})
    kept = json.loads(KEPT.read_text("utf-8")) if KEPT.exists() else {}
    if os.environ.get("RIMTHAN_KEEP_REPLIES") == "1":
        kept[name] = got
        KEPT.write_text(json.dumps(kept, indent=1, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
    assert len(got) == len(kept[name]), f"the {name} run gave {len(got)} replies, {len(kept[name])} kept; {KEEP_THEM}"
    for i, (reply, was) in enumerate(zip(got, kept[name], strict=True)):
        assert reply == was, f"reply {i} of {name} changed; {KEEP_THEM}"
