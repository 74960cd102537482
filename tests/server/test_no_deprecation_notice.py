"""A served verifier says no SDK deprecation notice: the logging capability it still serves is not news to an operator.

The SDK warns (``MCPDeprecationWarning``, a ``UserWarning``) where a server
declaring the logging capability is made and where a log notice is sent;
``call_notices`` ignores both in our modules. Before, a split of ``server.py``
kept the filter for the notices only, and every start printed the notice on
stderr (``make demo`` too). The real server process runs with every
``UserWarning`` an error, so any notice left would end its start.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from support.servers import ServerWorld, serve_args, stdio_client_for


def test_the_served_verifier_starts_and_lists_its_tools_with_no_warning(mcp_world: ServerWorld, tmp_path: Path) -> None:
    args = ["-W", "error::UserWarning", *serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")]
    errlog = tmp_path / "stderr.log"

    async def listed() -> list[str]:
        async with stdio_client_for(args, errlog.open("w")) as client:
            return sorted(t.name for t in (await client.list_tools()).tools)

    assert len(anyio.run(listed)) == 4
    assert "Warning" not in errlog.read_text("utf-8")
