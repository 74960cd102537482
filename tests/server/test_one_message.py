"""A message that is not one JSON-RPC message MCP takes gets a one-line Invalid Request, on both transports.

A real ``rimthan-mcp serve`` over stdio (raw lines through pipes, and a file as stdin, read as a pipe is)
and over Streamable HTTP (raw POSTs, both protocol eras). Before: over stdio every one of these lines went
unanswered (the client waited for ever); over HTTP a batch got 400 with pydantic's report of many lines
(code -32602), and a request whose id is not a string or an integer got 202 and no body.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from rimthan_workflow_mcp.message_shape import BATCH_REFUSED, ID_UNUSABLE, NOT_A_MESSAGE
from support.processes import HttpServer
from support.raw_http import HEADERS, raw_post
from support.raw_stdio import RawStdio, initialize_lines
from support.servers import RIMTHAN_MCP, ServerWorld, serve_args, server_env

WAIT = 60.0
PING = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
# the line, the answer's message and id
CASES: dict[str, tuple[str, str, int | None]] = {
    "batch": (json.dumps([PING, {**PING, "id": 98}]), BATCH_REFUSED, None),
    "empty-batch": ("[]", BATCH_REFUSED, None),
    "id-object": ('{"jsonrpc":"2.0","id":{"n":1},"method":"tools/list"}', ID_UNUSABLE, None),
    "id-array": ('{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', ID_UNUSABLE, None),
    "id-float": ('{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', ID_UNUSABLE, None),
    "id-bool": ('{"jsonrpc":"2.0","id":true,"method":"tools/list"}', ID_UNUSABLE, None),
    "id-null": ('{"jsonrpc":"2.0","id":null,"method":"tools/list"}', ID_UNUSABLE, None),
    "a-number": ("5", NOT_A_MESSAGE, None),
    "jsonrpc-1.0": ('{"jsonrpc":"1.0","id":7,"method":"tools/list"}', NOT_A_MESSAGE, 7),
}


def _assert_refused(answer: dict[str, Any] | None, message: str, request_id: int | None) -> None:
    assert answer is not None, "no answer"
    assert answer == {"jsonrpc": "2.0", "id": request_id, "error": {"code": types.INVALID_REQUEST, "message": message}}
    assert "\n" not in message


@pytest.mark.parametrize("case", list(CASES))
def test_over_stdio_it_is_answered_and_the_next_request_served(mcp_raw: RawStdio, case: str) -> None:
    line, message, request_id = CASES[case]
    mcp_raw.send(line + "\n" + json.dumps(PING) + "\n")
    first = mcp_raw.next_line(WAIT)
    _assert_refused(json.loads(first) if first else None, message, request_id)
    assert mcp_raw.call_answer(99, WAIT) == {"jsonrpc": "2.0", "id": 99, "result": {}}


def _post(
    server: HttpServer,
    body: str,
    version: str,
    content_type: str | None = "application/json",
    extra: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any] | None]:
    return raw_post(server, body, version, content_type, extra, WAIT)


@pytest.mark.parametrize("case", list(CASES))
def test_over_http_it_gets_400_and_one_invalid_request_line_in_both_eras(mcp_http: HttpServer, case: str) -> None:
    line, message, request_id = CASES[case]
    status, answer = _post(mcp_http, line, "2025-11-25")
    assert status == 400, answer
    _assert_refused(answer, message, request_id)
    status, answer = _post(mcp_http, line, "2026-07-28")  # the SDK's own answer on this path: kept
    assert status == 400 and answer is not None, answer
    assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert "\n" not in answer["error"]["message"]


def test_over_http_notifications_and_responses_are_still_accepted(mcp_http: HttpServer) -> None:
    for body in ('{"jsonrpc":"2.0","method":"notifications/initialized"}', '{"jsonrpc":"2.0","id":4,"result":{}}'):
        assert _post(mcp_http, body, "2025-11-25") == (202, None), body


def test_with_stdin_a_file_every_line_is_answered_as_over_pipes(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A file as stdin (a recorded session replayed) was the SDK's own reader: a request whose id is neither a
    string nor an integer was read as a notification and never answered. Now a file is read as a pipe is."""
    requests = tmp_path / "requests.jsonl"
    lines = "".join(CASES[case][0] + "\n" for case in CASES)
    requests.write_text(initialize_lines() + lines + json.dumps(PING) + "\n", encoding="utf-8")
    command = [RIMTHAN_MCP, *serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")[2:]]
    with requests.open("rb") as stdin:
        done = subprocess.run(command, stdin=stdin, capture_output=True, timeout=WAIT, env=server_env())
    answers = [json.loads(line) for line in done.stdout.splitlines()][1:]
    assert len(answers) == len(CASES) + 1, answers
    for answer, (_, message, request_id) in zip(answers, CASES.values(), strict=False):
        _assert_refused(answer, message, request_id)
    assert answers[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert done.returncode == 0, done.stderr.decode()[-2000:]


MEDIA_TYPES: dict[str, tuple[str | None, int]] = {  # Content-Type, the status it gets
    "upper-case": ("APPLICATION/JSON", 200),  # media types compare without case (RFC 9110 8.3.1): was 415
    "charset": ("Application/Json; Charset=UTF-8", 200),
    "text-plain": ("text/plain", 415),  # was a bare text/plain 400, no JSON-RPC
    "missing": (None, 415),  # was a bare text/plain 400, no JSON-RPC
    "json-suffix": ("application/json-patch+json", 415),
}


# the 2026-07-28 path read an upper-case media type already: only its refusals changed
MEDIA_CASES = [
    (c, e) for c in MEDIA_TYPES for e in ("2025-11-25", "2026-07-28") if MEDIA_TYPES[c][1] != 200 or e < "2026"
]


@pytest.mark.parametrize(("case", "era"), MEDIA_CASES)
def test_over_http_the_media_type_is_json_without_regard_to_case_else_415_with_a_json_rpc_error(
    mcp_http: HttpServer, case: str, era: str
) -> None:
    content_type, expected = MEDIA_TYPES[case]
    status, answer = _post(mcp_http, json.dumps(PING), era, content_type)
    if expected == 200:
        assert (status, answer) == (200, {"jsonrpc": "2.0", "id": 99, "result": {}})
    else:
        assert status == 415 and answer is not None and answer["id"] is None, answer
        assert answer["error"]["code"] == types.INVALID_REQUEST, answer
        assert answer["error"]["message"].startswith(f"the request's Content-Type is {content_type or 'missing'} ")


@pytest.mark.parametrize(
    ("header", "value", "status", "words"),
    [
        ("Host", "evil.example", 421, "the request's Host is not one this server answers"),
        ("Origin", "http://evil.example", 403, "the request's Origin is not one this server answers"),
    ],
)
def test_over_http_a_host_or_origin_not_allowed_is_refused_with_a_json_rpc_error(
    mcp_http: HttpServer, header: str, value: str, status: int, words: str
) -> None:
    """The SDK's DNS-rebinding refusal was a bare text line with no Content-Type ("Invalid Host header")."""
    got, answer = _post(mcp_http, json.dumps(PING), "2025-11-25", extra={header: value})
    assert got == status and answer is not None, answer
    assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert answer["error"]["message"].startswith(words) and "\n" not in answer["error"]["message"], answer


def test_over_http_an_accept_without_json_is_refused_with_a_json_rpc_error_in_both_eras(mcp_http: HttpServer) -> None:
    """The 2026-07-28 path answered 406 with no body at all."""
    for era in ("2025-11-25", "2026-07-28"):
        status, answer = _post(mcp_http, json.dumps(PING), era, extra={"Accept": "text/html"})
        assert status == 406 and answer is not None, (era, answer)
        assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST, answer
        assert answer["error"]["message"].startswith("the request's Accept header does not take"), answer


@pytest.mark.parametrize(
    ("header", "first", "second"),
    [
        ("MCP-Protocol-Version", "2025-11-25", "2026-07-28"),  # was served as 2025-11-25: 200
        ("MCP-Protocol-Version", "2026-07-28", "2025-11-25"),  # was refused by the SDK (-32020), for the body's id
        ("Content-Type", "application/json", "text/plain"),  # was served as JSON: 200
        ("Mcp-Session-Id", "a", "b"),  # was served: 200
    ],
)
def test_over_http_a_header_sent_twice_that_readers_could_read_apart_is_refused_unread(
    mcp_http: HttpServer, header: str, first: str, second: str
) -> None:
    """A first-copy reader and a last-copy reader (the SDK's era routing, a proxy) disagreed on the request."""
    status, answer = _post_headers(mcp_http, [(header, first), (header, second)])
    assert status == 400 and answer["id"] is None, answer
    assert answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert answer["error"]["message"].startswith(f"the request has more than one {header.lower()} header"), answer


def test_over_http_of_two_headers_each_sent_twice_the_refusal_names_the_one_found_repeated_first(
    mcp_http: HttpServer,
) -> None:
    """The headers are read in one pass: the one named is the first whose second copy comes, as before."""
    sent = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Content-Type", "text/plain"),
    ]
    status, answer = _post_headers(mcp_http, sent)
    assert status == 400 and answer["id"] is None, answer
    assert answer["error"]["message"].startswith("the request has more than one mcp-protocol-version header"), answer


def _post_headers(server: HttpServer, last: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
    """A ping POSTed with the usual headers but those ``last`` names, then ``last`` in its order."""
    url = urllib.parse.urlsplit(server.url)
    body = json.dumps(PING).encode()
    connection = http.client.HTTPConnection(url.netloc, timeout=WAIT)
    names = {name.lower() for name, _ in last}
    try:
        connection.putrequest("POST", url.path)
        sent = {**HEADERS, "MCP-Protocol-Version": "2025-11-25", "Content-Length": str(len(body))}
        for name, value in [*((n, v) for n, v in sent.items() if n.lower() not in names), *last]:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize(
    "version",
    ["", "1999-01-01", "2025-11-25, 2026-07-28", "v" * 200],
    ids=["empty", "unknown", "two-joined", "long"],
)
def test_over_http_a_protocol_version_not_served_is_refused_naming_the_header_the_value_and_the_versions(
    mcp_http: HttpServer, version: str
) -> None:
    """The SDK sent an empty or unknown MCP-Protocol-Version down the 2026-07-28 path, which answered 400
    about a missing ``params._meta``, never saying the version was the trouble."""
    status, answer = _post(mcp_http, json.dumps(PING), version)
    assert status == 400 and answer is not None and answer["id"] is None, answer
    error = answer["error"]
    assert error["code"] == types.UNSUPPORTED_PROTOCOL_VERSION, answer
    served = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert error["data"] == {"supported": served, "requested": version[:80]}, answer  # echoed back bounded
    message = error["message"]
    assert message.startswith("the request's MCP-Protocol-Version header is "), message
    assert f"header is {repr(version[:80])[:-1] if version else 'empty'}" in message, message
    assert ", ".join(served) in message and "_meta" not in message, message
    status, answer = _post(mcp_http, json.dumps(PING), "2025-11-25")  # a version served still is
    assert status == 200, answer
