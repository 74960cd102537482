"""Helpers for the bridge tests: start ``rimthan-host serve`` on built releases, audit its run logs.

The model stand-in itself is :class:`rimthan_host.standin.StandIn` (shared
with ``make agent-demo``); :func:`stand_in` points it at the packaged
catalogue examples.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_host.standin import StandIn

from support.processes import serve_options
from support.releases import packaged_source
from support.servers import ServerWorld

BIN = Path(sys.executable).parent


def verifier_args(world: ServerWorld, state: Path) -> list[str]:
    """``rimthan-mcp serve``'s options for the verifier a bridge starts: 1.2.0, migration target 1.3.0."""
    return serve_options(
        world.built["1.2.0"], world.trust, state, log_level="warning", migration_target=world.built["1.3.0"]
    )


def bridge_params(project: Path, world: ServerWorld, state: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--", *verifier_args(world, state)],
    )


def example_text(version: str, path: str) -> str:
    """What the stand-in composes for ``path``: the catalogue's example with that file name."""
    return (packaged_source(version) / "examples" / Path(path).name).read_text("utf-8")


def audit(log: Path, state: Path) -> dict[str, Any]:
    """``rimthan-mcp audit`` on a run log, with the verifier's own checkpoint keys."""
    out = subprocess.run(
        [str(BIN / "rimthan-mcp"), "audit", str(log), "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    history: dict[str, Any] = json.loads(out.stdout)
    return history


def stand_in(client: Client, project: Path, **kwargs: Any) -> StandIn:
    """The stand-in composing the packaged catalogue's example texts."""
    return StandIn(client, project, {v: packaged_source(v) / "examples" for v in ("1.2.0", "1.3.0")}, **kwargs)
