"""A malformed reply to the bridge's elicitation ends the question with a one-line refusal, the run where it was.

A client may answer ``elicitation/create`` with a result of the wrong shape,
an action other than accept, decline or cancel, or content the requested
schema refuses (``confirm`` a string, an answer not among the choices). Each
must end the wait - the call that asked answered, with a code and what to do
- and nothing be sent to the verifier. A real ``rimthan-host serve`` and its
real verifier child, driven over raw stdio by a client that writes such replies.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.bridge import bridge_params
from support.raw_stdio import RawStdio
from support.servers import ServerWorld, build_world

ANSWER_SECONDS = 20.0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("elicit-replies-world"))


MALFORMED = {
    # The SDK's parser refuses a lone surrogate escape and dropped the line: the question waited for ever.
    "a reply no parser reads": '{"action":"accept","content":{"confirm":true,"note":"\\ud800"}}',
    "a result that is no object": "5",
    "an action not accept, decline or cancel": '{"action":"maybe","content":{"confirm":true}}',
    "content that is no object": '{"action":"accept","content":"yes"}',
    "content failing the schema": '{"action":"accept","content":{"confirm":"yes"}}',
    "an accept without content": '{"action":"accept"}',
}


@pytest.mark.parametrize("result", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_elicitation_reply_is_refused_in_one_line_and_nothing_is_sent(
    world: ServerWorld, tmp_path: Path, result: str
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, world, state)
    with (tmp_path / "stderr.txt").open("wb") as errlog:
        process = subprocess.Popen(
            [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog
        )
        try:
            raw = RawStdio(process)
            raw.initialize(ANSWER_SECONDS, capabilities={"elicitation": {"form": {}}})
            facts = json.dumps({"objective": "Pick a queue", "decision_owner": "Ada"})
            raw.send(f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"start_run",'
                     f'"arguments":{{"workflow":"research","facts":{facts}}}}}}}\n')  # fmt: skip
            asked = json.loads(raw.next_line(ANSWER_SECONDS) or b"{}")
            assert asked.get("method") == "elicitation/create", asked
            raw.send(f'{{"jsonrpc":"2.0","id":{json.dumps(asked["id"])},"result":{result}}}\n')
            answer = raw.call_answer(1, ANSWER_SECONDS)
            assert answer is not None, "the call that asked was never answered"
            text = answer["result"]["content"][0]["text"]
            assert answer["result"]["isError"], text
            head, *rest = text.split("\n")
            assert "confirmation_required" in head and "could not be read" in head, text
            assert rest and rest[-1].startswith("next: ") and "start_run" in rest[-1], text
            assert answer["result"]["structuredContent"]["status"] == "reply_unreadable", answer
            runs = project / ".rimthan" / "runs"
            assert not runs.exists() or not list(runs.iterdir())  # nothing was sent: no run started
            after = raw.call(2, "show_step", "{}", ANSWER_SECONDS)
            assert after is not None and "No run is active" in after["result"]["content"][0]["text"]
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text("utf-8", errors="replace")
