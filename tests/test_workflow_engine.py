"""The four-tool workflow protocol, tested as the protocol file names it.

Section A (engine, in-process over real signed releases) and section B (the
same protocol through the real MCP server over stdio and HTTP) share the
fixtures in conftest.py.
"""

from __future__ import annotations

# ============================================================================ A: engine

# ============================================================================ B: MCP server
