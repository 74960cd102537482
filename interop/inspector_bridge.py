"""The MCP Inspector's CLI drives one whole run through the bridge, ``rimthan-host serve``, a process per call.

``--method tools/call`` starts the server, makes one call and exits, so every move is a new bridge (and a new
verifier child): the bridge picks the project's one unfinished run up from its log on each move, and a validation
round opened by one process is kept for the next. The Inspector declares neither elicitation nor roots, so the
model relays the user's confirmations. The scripted model (:class:`rimthan_host.standin.StandIn`) follows the
replies, fails one validator once and repairs; ``rimthan-mcp audit`` then verifies the log as one completed run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from rimthan_host.standin import StandIn

Check = Callable[[bool, str, str], object]


@dataclass
class InspectorCaller:
    """A client whose every call is one Inspector CLI run against ``rimthan-host serve`` in ``project``."""

    command: list[str]  # node and the Inspector's launcher, with --cli and the era
    project: Path
    env: dict[str, str]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> SimpleNamespace:
        cmd = [*self.command, "--format", "json", "--method", "tools/call", "--tool-name", name]
        cmd += ["--tool-args-json", json.dumps(arguments), "rimthan-host", "serve"]
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(cmd, cwd=self.project, env=self.env, capture_output=True, text=True, timeout=180)
        )
        result = json.loads(done.stdout)["result"] if done.returncode == 0 else {}
        content = [SimpleNamespace(text=c.get("text", "")) for c in result.get("content", [])]
        said = content or [SimpleNamespace(text=f"exit {done.returncode}: {done.stderr.strip()[-300:]}")]
        return SimpleNamespace(
            content=said, structured_content=result.get("structuredContent"), is_error=bool(result.get("isError", True))
        )


def run_inspector_bridge(
    command: list[str], env: dict[str, str], project: Path, world: tuple[Path, Path, Path], check: Check
) -> None:
    """A new ``project`` holding a release and its trust (``world``: those two and the console scripts' folder, as
    ``./releases`` and ``./keys/local``); one run through it."""
    release, trust, bin_dir = world
    shutil.copytree(release, project / "releases" / release.name, symlinks=True)
    shutil.copytree(trust, project / "keys" / "local")
    caller = InspectorCaller(command, project, {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"})
    model = StandIn(caller, project, {"1.2.0": release / "catalogue" / "examples"}, fail_once={"decision-critic"})  # type: ignore[arg-type]

    async def go() -> str:
        final = await model.follow(await model.start(), "desk-research")
        return str(final.data.get("status"))

    status = anyio.run(go)
    picked = sum("Picked up run" in r.text for r in model.received)
    where = f"inspector bridge {command[-1]}, a process per call"
    check(status == "completed" and model.leaks() == [], f"{where}: run completed", f"{status}, {model.calls} calls")
    check(picked == model.calls - 1, f"{where}: each new process picked the run up", f"{picked} of {model.calls - 1}")
    check(["decision-critic"] in model.rounds, f"{where}: a failed round repaired", str(model.rounds))
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    state = Path(env["HOME"]) / ".local" / "state" / "rimthan"  # (the Inspector passes its child HOME, not all)
    audit = [str(bin_dir / "rimthan-mcp"), "audit", str(log), "--state-dir", str(state), "--releases-dir", "releases"]
    done = subprocess.run([*audit, "--trust", "keys/local"], cwd=project, capture_output=True, text=True, check=False)
    ended = done.stdout.strip().splitlines()[-1:] or [done.stderr.strip()[-300:]]
    check(done.returncode == 0 and "outcome: completed" in done.stdout, f"{where}: audit verifies the log", ended[0])
