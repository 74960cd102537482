"""The person at Claude Code, as its ``Elicitation`` hook: every form the bridge puts to them is accepted as offered.

``claude -p`` has no one to show an MCP server's form to and cancels it unless an ``Elicitation`` hook answers.
interop/claude_run.py registers this script as that hook (``--settings``): it reads the hook's input (the
server, its message, the form's ``requested_schema``) from stdin, keeps it as one JSON line in the file named by
its argument, and answers ``accept`` with each field of the form filled as offered: its default (the value the
model passed), else yes for a yes/no box, else the first choice.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def answer(schema: dict[str, Any]) -> dict[str, Any]:
    """The form's content, each field as offered."""
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        if "default" in field:
            content[name] = field["default"]
        elif field.get("type") == "boolean":
            content[name] = True
        elif field.get("enum"):
            content[name] = field["enum"][0]
    return content


def main() -> int:
    asked = json.loads(sys.stdin.read() or "{}")
    with open(sys.argv[1], "a", encoding="utf-8") as kept:
        kept.write(json.dumps(asked) + "\n")
    content = answer(asked.get("requested_schema") or {})
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": content}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
