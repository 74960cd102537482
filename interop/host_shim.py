"""A stdio shim between a host and the bridge: it keeps every line both ways, and can change the host's offer.

``python host_shim.py [--era REVISION] [--no-elicitation] LOG -- COMMAND...`` starts ``COMMAND`` (the bridge)
and passes every line both ways, keeping each in ``LOG`` (JSON lines: ``{"from": "host" | "bridge" | "shim",
"message": ...}``) for the check to read what was negotiated. Changed on the way, only when asked:

- ``--era REVISION``: the connection negotiates ``REVISION``. A request the host sends before ``initialize``
  (the 2026-07-28 era's ``server/discover`` probe) is answered "Method not found", as a server of an older
  revision answers it, and not passed on; an ``initialize`` offering a newer revision offers ``REVISION``
  instead (the bridge then answers ``REVISION``, as MCP's version negotiation says).
- ``--no-elicitation``: the ``initialize`` request's ``elicitation`` capability is taken out, so the bridge
  sees a client that cannot show a form (it then asks the model to ask the person, and records the facts as
  relayed by the model).

Interop only (interop/claude_run.py, interop/codex_run.py): no product knob chooses a host's revision or
capabilities; the shim stands in for a host that offers them itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

METHOD_NOT_FOUND = -32601


@dataclass(frozen=True)
class Offer:
    """How the shim changes what the host offers: the revision to negotiate ("": as offered), and whether the
    elicitation capability is taken out."""

    era: str = ""
    no_elicitation: bool = False


@dataclass(frozen=True)
class Passed:
    """What becomes of one line from the host: the line for the bridge ("": none), the shim's own answer to
    the host ("": none), and whether it was the initialize request."""

    line: str
    answer: str = ""
    initialize: bool = False


def from_host(line: str, offer: Offer, initialized: bool) -> Passed:
    """One line the host sent, as the shim passes it on (see module)."""
    try:
        message: Any = json.loads(line)
    except ValueError:
        return Passed(line)
    if not isinstance(message, dict):
        return Passed(line)
    params = message.get("params")
    if message.get("method") == "initialize" and isinstance(params, dict):
        offered = params.get("protocolVersion")
        if offer.era and isinstance(offered, str) and offered > offer.era:
            params["protocolVersion"] = offer.era
        capabilities = params.get("capabilities")
        if offer.no_elicitation and isinstance(capabilities, dict):
            capabilities.pop("elicitation", None)
        return Passed(json.dumps(message), initialize=True)
    if offer.era and not initialized and "method" in message and "id" in message:
        error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {message['method']}"}
        return Passed("", json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))
    return Passed(line)


def negotiated_in(lines: Sequence[str]) -> str:
    """The protocol version the bridge answered the host's ``initialize`` with, from the shim's log ("" if none)."""
    entries = [json.loads(line) for line in lines if line.strip()]
    messages = [(e.get("from"), e.get("message")) for e in entries if isinstance(e.get("message"), dict)]
    asked = {m.get("id") for who, m in messages if who == "host" and m.get("method") == "initialize"}
    for who, message in messages:
        result = message.get("result")
        if who == "bridge" and message.get("id") in asked and isinstance(result, dict):
            return str(result.get("protocolVersion", ""))
    return ""


class Shim:
    """The two pumps: the host's lines to the bridge (changed as :func:`from_host` says), the bridge's back."""

    def __init__(self, offer: Offer, log: IO[str], bridge: subprocess.Popen[str]) -> None:
        self.offer, self.log, self.bridge = offer, log, bridge
        self.lock = threading.Lock()

    def keep(self, who: str, line: str) -> None:
        try:
            entry = {"from": who, "message": json.loads(line)}
        except ValueError:
            entry = {"from": who, "raw": line}
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def to_host(self, line: str) -> None:
        with self.lock:
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
            sys.stdout.flush()

    def bridge_to_host(self) -> None:
        assert self.bridge.stdout is not None
        for line in self.bridge.stdout:
            self.keep("bridge", line)
            self.to_host(line)

    def host_to_bridge(self) -> None:
        assert self.bridge.stdin is not None
        initialized = False
        for line in sys.stdin:
            self.keep("host", line)
            passed = from_host(line, self.offer, initialized)
            initialized = initialized or passed.initialize
            if passed.answer:
                self.keep("shim", passed.answer)
                self.to_host(passed.answer)
            if passed.line:
                self.bridge.stdin.write(passed.line if passed.line.endswith("\n") else passed.line + "\n")
                self.bridge.stdin.flush()
        self.bridge.stdin.close()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--era", default="", help="the protocol revision the connection negotiates")
    parser.add_argument("--no-elicitation", action="store_true", help="take out the elicitation capability")
    parser.add_argument("log", help="the JSON-lines file every line is kept in")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and the bridge's command")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no bridge command after --")
    bridge = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    with open(options.log, "a", encoding="utf-8") as log:
        shim = Shim(Offer(options.era, options.no_elicitation), log, bridge)
        pump = threading.Thread(target=shim.bridge_to_host, daemon=True)
        pump.start()
        shim.host_to_bridge()
        code = bridge.wait()
        pump.join(timeout=5)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
