"""docs/host-kit.md's ``.mcp.json`` is what ``claude mcp add --scope project`` writes.

``make interop`` runs the pinned Claude Code CLI and checks that it writes
``interop/claude_code.py``'s ``MCP_JSON`` (no account needed); this test keeps
the page's block the same, as the CLI lays it out (two-space indent), so a
reader who compares the file with the page finds every key.
"""

from __future__ import annotations

import importlib.util
import json
import re

from support.releases import REPO_ROOT


def _documented_block() -> str:
    page = (REPO_ROOT / "docs" / "host-kit.md").read_text("utf-8")
    found = re.search(r"\*\*Claude Code, `\.mcp\.json`\*\*.*?```json\n(.*?)\n```", page, re.S)
    assert found is not None, "docs/host-kit.md lost its Claude Code .mcp.json block"
    return found.group(1)


def test_the_documented_mcp_json_is_what_claude_mcp_add_writes() -> None:
    spec = importlib.util.spec_from_file_location("claude_code", REPO_ROOT / "interop" / "claude_code.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert _documented_block() == json.dumps(module.MCP_JSON, indent=2)
    server = module.MCP_JSON["mcpServers"]["rimthan"]
    assert server["type"] == "stdio" and server["env"] == {}  # what the CLI adds beyond command and args
