"""A request's body is kept once: the stop's answer (outermost) and the shape answers inside it share one keeper.

Both need the first bytes of a POST's body (the request's id, should the stop cut the call off; the SDK's refusal
of a body of the wrong shape, replaced by ours). Each used to wrap ``receive`` with a keeper of its own, so every
call's body went through two wrappers and was kept twice.
"""

from __future__ import annotations

import anyio
from rimthan_workflow_mcp.http_shape import KeptBody, kept_body
from rimthan_workflow_mcp.http_stop import AnswerAtStop, CutOff
from starlette.types import Message, Receive, Scope, Send

BODY = b'{"jsonrpc":"2.0","id":"call-1","method":"tools/list"}'


def test_the_stop_s_answer_and_the_shape_answers_keep_one_body_between_them() -> None:
    seen: dict[str, object] = {}

    async def shape_answers(scope: Scope, receive: Receive, send: Send) -> None:
        kept, passed_on = kept_body(scope, receive)  # as http_bounds makes its ShapeAnswers
        seen["kept"], seen["not_wrapped_again"] = kept, passed_on is receive
        message = await passed_on()
        seen["read"] = message["body"]
        seen["head"] = kept.head()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def client() -> Message:
        return {"type": "http.request", "body": BODY, "more_body": False}

    sent: list[Message] = []

    async def reply(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "method": "POST", "headers": []}
    anyio.run(AnswerAtStop(shape_answers, CutOff()), scope, client, reply)
    assert isinstance(seen["kept"], KeptBody)
    assert seen["not_wrapped_again"] is True, "the shape answers wrapped the body a second time"
    assert seen["read"] == BODY and seen["head"] == BODY
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


def test_a_keeper_is_made_for_a_request_no_outer_wrapper_kept() -> None:
    async def client() -> Message:
        return {"type": "http.request", "body": BODY, "more_body": False}

    scope: Scope = {"type": "http"}
    kept, passed_on = kept_body(scope, client)
    assert passed_on is not client  # (this keeper wraps it)
    assert kept_body(scope, passed_on) == (kept, passed_on)
    assert anyio.run(passed_on)["body"] == BODY and kept.head() == BODY and kept.whole
