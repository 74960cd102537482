"""The last migration offer a run saw is kept in its saved state, so a resumed run asks the verifier once.

A run pinned to 1.2.0 is set aside at ``interview`` (no files: a resume shows it again from its saved
result, with no call). The operator installs 1.3.0; the user asks to migrate to it by name. With no offer of
1.3.0 known, the bridge first asks the verifier for a preview carrying no values (a probe, to learn what 1.3.0
needs), then for the preview itself. The offer so learned was kept only in memory: the next bridge resuming
the run knew none and probed again. Counted here in the verifier's own log (``call served`` records, passed
through the bridge's stderr).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.bridge import BIN
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world, example_state

NEWER = "research-decision@1.3.0"
CONTINUE = "rimthan.continue_workflow"


def _project(tmp_path: Path) -> tuple[ServerWorld, Path, StdioServerParameters]:
    """A project serving its ./releases (1.2.0 published) through a bridge whose verifier logs each call."""
    world = build_world(tmp_path / "world")
    project = tmp_path / "project"
    world.publish("1.2.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RIMTHAN_STATE_DIR": str(tmp_path)}
    args = ["serve", "--", "--migrate-to-newest", "--log-level", "info"]
    return world, project, StdioServerParameters(command=str(BIN / "rimthan-host"), args=args, cwd=project, env=env)


def _text(reply: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in reply.content)


def _served(errlog: Path) -> list[dict[str, Any]]:
    """The verifier's ``call served`` and ``call refused`` records, from the bridge's stderr."""
    records = []
    for line in errlog.read_text("utf-8").splitlines():
        text = line.removeprefix("rimthan-mcp: ")
        if text.startswith("{"):
            records.append(json.loads(text))
    return [r for r in records if r.get("event") in ("call served", "call refused")]


def test_a_resumed_run_keeps_the_offer_it_saw_and_asks_the_verifier_once(tmp_path: Path) -> None:
    world, project, params = _project(tmp_path)

    async def session(script: Any, errlog: Path) -> Any:
        with errlog.open("w") as err:
            async with CheckedClient(stdio_client(params, errlog=err)) as client:
                return await script(client)

    async def started(client: CheckedClient) -> Any:
        return await client.call_tool("start_run", {"workflow": "research", "facts": example_state("1.2.0")})

    async def named(client: CheckedClient) -> Any:
        await client.call_tool("resume_run", {})
        return await client.call_tool("migrate_run", {"confirm": False, "to_release": NEWER})

    anyio.run(session, started, tmp_path / "start.log")
    world.publish("1.3.0", project / "releases")
    first = anyio.run(session, named, tmp_path / "first.log")
    second = anyio.run(session, named, tmp_path / "second.log")
    for reply in (first, second):
        assert reply.structured_content["status"] == "preview", reply.content
        assert reply.structured_content["to_release"] == NEWER, reply.content
    assert _text(first) == _text(second)
    # each resume first asks whether the verifier takes the run's last checkpoint (test_bridge_other_keys); then
    # the first bridge knew no offer of 1.3.0: a probe, then the preview; the second kept the offer the run saw
    assert [r["tool"] for r in _served(tmp_path / "first.log")] == [CONTINUE, CONTINUE, CONTINUE]
    assert [r["tool"] for r in _served(tmp_path / "second.log")] == [CONTINUE, CONTINUE]
