"""A stand-in for a host's model API on a loopback port: it keeps each request's body and answers "ok".

Hosts other than Claude Code need an account only to reach their model; pointed at this endpoint instead
(``GOOGLE_GEMINI_BASE_URL`` for Gemini CLI, a ``model_providers`` entry for Codex CLI) they start the configured
MCP servers, list their tools and send them to "the model" as function declarations: the request a real model
would get, kept here for the checks to read. The reply ends the turn: Gemini's ``generateContent`` JSON (or its
``alt=sse`` stream) with one text part, or an OpenAI Responses event stream with one message; or, while
:attr:`ModelStandIn.gemini_calls` holds one, the Gemini reply is that function call (a tool call "the model"
makes), and the host's next request carries the tool's result. While :attr:`ModelStandIn.responses_turn` is set,
it is asked for each Responses API reply: a :class:`ToolUse` named ``<namespace>.<tool>`` is a ``function_call``
in that namespace (Codex's ``mcp__rimthan``), a text ends the turn.

Claude Code's side is the Anthropic Messages API (``ANTHROPIC_BASE_URL``, ``POST /v1/messages``): while
:attr:`ModelStandIn.anthropic_turn` is set, it is asked for each streamed request's reply, a :class:`ToolUse`
(one ``tool_use`` block, ``stop_reason`` ``tool_use``) or a text that ends the turn; the reply is the Messages
API's SSE stream (``message_start`` ... ``message_stop``), or one JSON message for a request that does not stream.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "ok"
_GEMINI_USAGE = {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
_MESSAGE = {"type": "message", "role": "assistant", "id": "msg-1", "content": [{"type": "output_text", "text": ANSWER}]}
_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
NAMESPACE_SEP = "."  # a ToolUse name "<namespace>.<tool>" is a Responses function call in that namespace


@dataclass(frozen=True)
class ToolUse:
    """One tool call "the model" makes in a Messages API reply."""

    name: str
    input: dict[str, Any]


AnthropicTurn = Callable[[dict[str, Any]], "ToolUse | str"]
ResponsesTurn = Callable[[dict[str, Any]], "ToolUse | str"]


@dataclass
class ModelStandIn:
    """The base URL to give a host, and every request body it sent (path, parsed JSON)."""

    url: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gemini_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (function, args), in turn
    anthropic_turn: AnthropicTurn | None = None  # decides each Messages API reply from the request
    responses_turn: ResponsesTurn | None = None  # decides each Responses API reply from the request

    def bodies(self, path_part: str) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path_part in path]


@contextmanager
def model_standin() -> Iterator[ModelStandIn]:
    """Serve on 127.0.0.1 (a free port) until the block ends."""
    kept = ModelStandIn("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            size = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(size) or b"{}")
            except ValueError:
                body = {}
            kept.requests.append((self.path, body if isinstance(body, dict) else {}))
            if "/v1/messages" in self.path:
                self._reply(*_messages_reply(kept, self.path, body if isinstance(body, dict) else {}))
                return
            if self.path.endswith("/responses"):
                self._reply(*_responses_reply(kept, body if isinstance(body, dict) else {}))
                return
            call = kept.gemini_calls.pop(0) if kept.gemini_calls and ":" in self.path else None
            self._reply(*_reply_for(self.path, call))

        def _reply(self, content_type: str, data: bytes) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    kept.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kept
    finally:
        server.shutdown()
        server.server_close()


def _responses_reply(kept: ModelStandIn, body: dict[str, Any]) -> tuple[str, bytes]:
    """A Responses API event stream: the turn's function call, or one message (``ok`` without a turn)."""
    said: ToolUse | str = kept.responses_turn(body) if kept.responses_turn is not None else ANSWER
    index = sum(1 for path, _ in kept.requests if path.endswith("/responses"))
    if isinstance(said, ToolUse):
        namespace, _, name = said.name.rpartition(NAMESPACE_SEP)
        item: dict[str, Any] = {
            "type": "function_call", "id": f"fc_{index:04d}", "call_id": f"call_{index:04d}", "name": name,
            "arguments": json.dumps(said.input), **({"namespace": namespace} if namespace else {}),
        }  # fmt: skip
    else:
        item = {**_MESSAGE, "id": f"msg-{index}", "content": [{"type": "output_text", "text": said}]}
    events = (
        {"type": "response.created", "response": {"id": f"resp-{index}"}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": f"resp-{index}", "usage": _USAGE}},
    )
    return "text/event-stream", "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _reply_for(path: str, call: tuple[str, dict[str, Any]] | None) -> tuple[str, bytes]:
    part = {"text": ANSWER} if call is None else {"functionCall": {"name": call[0], "args": call[1]}}
    reply = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _GEMINI_USAGE,
    }
    if "alt=sse" in path:
        return "text/event-stream", f"data: {json.dumps(reply)}\n\n".encode()
    return "application/json", json.dumps(reply).encode()


def _messages_reply(kept: ModelStandIn, path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    """A Messages API reply: the turn's tool call or text (``ok`` without a turn or for a side request)."""
    if "/count_tokens" in path:
        return "application/json", json.dumps({"input_tokens": 1}).encode()
    said: ToolUse | str = ANSWER
    if kept.anthropic_turn is not None and body.get("tools"):
        said = kept.anthropic_turn(body)
    index = sum(1 for path, _ in kept.requests if "/v1/messages" in path)
    if isinstance(said, ToolUse):
        block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{index:04d}", "name": said.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(said.input)}
        whole, stop = {**block, "input": said.input}, "tool_use"
    else:
        block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": said}
        whole, stop = {"type": "text", "text": said}, "end_turn"
    message = {"id": f"msg_{index:04d}", "type": "message", "role": "assistant", "model": body.get("model", "")}
    usage = {"input_tokens": 1, "output_tokens": 1}
    if not body.get("stream"):
        reply = {**message, "content": [whole], "stop_reason": stop, "stop_sequence": None, "usage": usage}
        return "application/json", json.dumps(reply).encode()
    events = (
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
        {"type": "message_stop"},
    )
    return "text/event-stream", "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
