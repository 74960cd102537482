"""A raw JSON-RPC POST to a server's Streamable HTTP endpoint: headers and bodies no SDK client would send."""

from __future__ import annotations

import http.client
import json
import urllib.parse
import urllib.request
from typing import Any

from support.processes import HttpServer

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def raw_post(
    server: HttpServer,
    body: str,
    version: str | None,
    content_type: str | None = "application/json",
    extra: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> tuple[int, dict[str, Any] | None]:
    """A raw POST (http.client adds no Content-Type of its own, as urllib does, and takes a Host given);
    ``version`` None sends no ``MCP-Protocol-Version`` header. The status and the JSON answer (None if empty)."""
    url = urllib.parse.urlsplit(server.url)
    headers = {**HEADERS, **({} if version is None else {"MCP-Protocol-Version": version}), **(extra or {})}
    del headers["Content-Type"]
    if content_type is not None:
        headers["Content-Type"] = content_type
    connection = http.client.HTTPConnection(url.netloc, timeout=timeout)
    try:
        connection.request("POST", url.path, body=body.encode(), headers=headers)
        response = connection.getresponse()
        status, text = response.status, response.read()
    finally:
        connection.close()
    return status, json.loads(text) if text else None


def sse_events(url: str, body: dict[str, Any], timeout: float = 30.0) -> list[dict[str, Any]]:
    """POST ``body`` as JSON to ``url`` (a loopback stand-in) and read its event stream: each ``data:`` line's JSON."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - loopback
        stream = answer.read().decode()
    return [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
