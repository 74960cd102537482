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
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.bridge import bridge_params
from support.raw_stdio import RawStdio
from support.servers import ServerWorld, build_world

ANSWER_SECONDS = 60.0  # a hang guard only; the first answer waits for the bridge process to start


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


@contextmanager
def _asking(world: ServerWorld, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], RawStdio, dict[str, Any]]]:
    """A real bridge (stderr to ``tmp_path/stderr.txt``) whose ``start_run`` (id 1) waits on its first question."""
    (tmp_path / "project").mkdir()
    params = bridge_params(tmp_path / "project", world, tmp_path / "state")
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
            yield process, raw, asked
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


@pytest.mark.parametrize("result", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_elicitation_reply_is_refused_in_one_line_and_nothing_is_sent(
    world: ServerWorld, tmp_path: Path, result: str
) -> None:
    project = tmp_path / "project"
    with _asking(world, tmp_path) as (process, raw, asked):
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
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text("utf-8", errors="replace")


@pytest.mark.parametrize("code", [-32000, -32603])
def test_an_error_the_client_answers_with_is_said_as_its_answer_even_with_the_connection_closed_code(
    world: ServerWorld, tmp_path: Path, code: int
) -> None:
    """-32000 is also the code the end of input is refused with inside the bridge; a client's own error with it
    is still its answer (its message quoted), not a connection the client closed."""
    with _asking(world, tmp_path) as (_process, raw, asked):
        error = {"code": code, "message": "the user's window went away"}
        raw.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "error": error}) + "\n")
        answer = raw.call_answer(1, ANSWER_SECONDS)
        assert answer is not None, "the call that asked was never answered"
        text = answer["result"]["content"][0]["text"]
        assert "the client answered with an error: the user's window went away)" in text, text
        assert "closed its connection" not in text, text


@pytest.mark.parametrize("end", ["stdin closed", "SIGTERM"])
def test_the_end_of_input_while_a_question_waits_ends_the_call_at_once_and_the_bridge_exits(
    world: ServerWorld, tmp_path: Path, end: str
) -> None:
    """The end of input (stdin closed, or SIGTERM) held the bridge until the drain's deadline (10 s) for a reply
    that could never come, then cut the call off unanswered. Now the question is refused at once: the call that
    asked is answered with its refusal (nothing sent to the verifier) and the bridge exits 0, no call cut off."""
    project = tmp_path / "project"
    with _asking(world, tmp_path) as (process, raw, _asked):
        assert process.stdin is not None
        if end == "SIGTERM":  # (over pipes the input then ends once what the pipe holds is read)
            process.send_signal(signal.SIGTERM)
        else:
            process.stdin.close()
        answer = raw.call_answer(1, ANSWER_SECONDS)
        returncode = process.wait(timeout=120)  # a hang guard only
    stderr = (tmp_path / "stderr.txt").read_text("utf-8", errors="replace")
    assert answer is not None, f"the call that asked was never answered: {stderr[-2000:]}"
    text = answer["result"]["content"][0]["text"]
    head, *rest = text.split("\n")
    assert answer["result"]["isError"] and head.startswith("confirmation_required: "), text
    assert "closed its connection before the user answered the question about objective" in head, text
    assert rest and rest[-1].startswith("next: ") and "start_run" in rest[-1], text
    runs = project / ".rimthan" / "runs"
    assert not runs.exists() or not list(runs.iterdir())  # nothing was sent: no run started
    assert returncode == 0, stderr[-2000:]
    assert "unanswered at the deadline" not in stderr and "Traceback" not in stderr, stderr[-2000:]
    if end == "SIGTERM":
        assert "rimthan-host: stopped (SIGTERM): the calls in flight were answered" in stderr, stderr[-2000:]


def test_a_question_asked_after_the_input_ended_is_refused_at_once_too(world: ServerWorld, tmp_path: Path) -> None:
    """A call queued behind the one asking (calls run one at a time) asks its own question once the input has
    ended: that one is refused at once too, and both calls are answered (before, neither was: both were cut off
    at the drain's deadline)."""
    facts = {"objective": "Pick a queue", "decision_owner": "Ada"}
    second = {"name": "start_run", "arguments": {"workflow": "research", "facts": facts}}
    with _asking(world, tmp_path) as (process, raw, _asked):
        raw.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": second}) + "\n")
        assert process.stdin is not None
        process.stdin.close()
        lines = [json.loads(line) for line in iter(lambda: raw.next_line(ANSWER_SECONDS), None)]
        returncode = process.wait(timeout=120)  # a hang guard only
    stderr = (tmp_path / "stderr.txt").read_text("utf-8", errors="replace")
    answers = {a["id"]: a for a in lines if "method" not in a}
    assert sorted(answers) == [1, 2], lines
    for answer in answers.values():
        assert answer["result"]["isError"], answer
        text = answer["result"]["content"][0]["text"]
        assert text.startswith("confirmation_required: the client closed its connection before the user"), text
    assert returncode == 0, stderr[-2000:]
    assert "unanswered at the deadline" not in stderr and "Traceback" not in stderr, stderr[-2000:]
