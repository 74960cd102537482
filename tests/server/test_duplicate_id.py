"""A request line with its ``id`` given twice is answered for the id ``json.loads`` (and so the SDK) reads: the last.

The line scanner (``message_shape``) that finds the id of a line the SDK refused read the first ``id`` member, so
its refusal went to another id than the one the SDK would have answered. Raw lines through the pipes of the real
``rimthan-mcp serve`` and the real ``rimthan-host serve``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import mcp_types as types
import pytest
from rimthan_workflow_mcp.message_shape import NOT_A_MESSAGE, top_level_keys, top_level_request_id
from support.bridge import bridge_params
from support.raw_stdio import RawStdio, raw_stdio_server
from support.servers import ServerWorld

WAIT = 120.0
PING = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
DEEP = "[" * 300 + "]" * 300  # nesting past the SDK parser's bound: its line is refused as a Parse error
LINES: dict[str, tuple[str, int, int]] = {  # the line, the answer's error code and its id
    "not-a-message": ('{"jsonrpc":"1.0","id":7,"method":"tools/list","id":8}', types.INVALID_REQUEST, 8),
    "escaped-key": ('{"jsonrpc":"1.0","id":7,"method":"tools/list","\\u0069d":9}', types.INVALID_REQUEST, 9),
    "parse-error": (f'{{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{{"x":{DEEP}}},"id":8}}', -32700, 8),
}


@pytest.fixture(scope="module")
def host_raw(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """``rimthan-host serve`` (its verifier serving 1.2.0) over stdio pipes, initialised by hand."""
    root = tmp_path_factory.mktemp("host-raw")
    (root / "project").mkdir()
    params = bridge_params(root / "project", mcp_world, root / "state")
    with raw_stdio_server([params.command, *params.args], WAIT) as client:
        yield client


def _answered(raw: RawStdio, case: str) -> None:
    line, code, request_id = LINES[case]
    assert json.loads(line.replace(DEEP, "[]"))["id"] == request_id  # what json.loads reads
    raw.send(line + "\n" + json.dumps(PING) + "\n")
    first = raw.next_line(WAIT)
    assert first is not None, "no answer"
    answer = json.loads(first)
    assert answer["id"] == request_id and answer["error"]["code"] == code, answer
    if code == types.INVALID_REQUEST:
        assert answer["error"]["message"] == NOT_A_MESSAGE, answer
    assert raw.call_answer(99, WAIT) == {"jsonrpc": "2.0", "id": 99, "result": {}}


@pytest.mark.parametrize("case", list(LINES))
def test_the_verifier_answers_the_last_id(mcp_raw: RawStdio, case: str) -> None:
    _answered(mcp_raw, case)


@pytest.mark.parametrize("case", list(LINES))
def test_the_host_bridge_answers_the_last_id(host_raw: RawStdio, case: str) -> None:
    _answered(host_raw, case)


def test_the_keys_scanned_are_those_json_loads_reads() -> None:
    """Each key once, at its last member; escapes read; a cut line keeps the last id before the cut."""
    line = '{"jsonrpc":"2.0","id":1,"method":"a","params":{"id":5},"id":2,"\\u006dethod":"b"}'
    keys = top_level_keys(line)
    assert keys is not None and set(keys) == set(json.loads(line)) == {"jsonrpc", "id", "method", "params"}
    assert line[keys["id"] :].startswith(":2,") and line[keys["method"] :].startswith(':"b"')
    assert top_level_request_id(line) == 2
    assert top_level_request_id('{"jsonrpc":"2.0","id":1,"method":"a","id":3,"params":{"x', whole=False) == 3
