"""Helpers for the bridge tests: start ``rimthan-host serve`` on built releases, drive it, audit its run logs.

The model stand-in itself is :class:`rimthan_host.standin.StandIn` (shared
with ``make agent-demo``); :func:`stand_in` points it at the packaged
catalogue examples.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from rimthan_host.tools import TOOLS

from support import garbling_verifier
from support.checked_client import CheckedClient
from support.processes import http_server_process, serve_options
from support.releases import packaged_source
from support.servers import ServerWorld, server_env

BIN = Path(sys.executable).parent
TOOL_NAMES = tuple(t.name for t in TOOLS)
# How a refusal of a step's files ends (its step id and a full stop follow): the call to make once they are fixed.
FIX_NEXT = "next: fix each file as said above, then call step_done again; the run waits at step"


def as_an_older_bridge_saved(project: Path, run: str) -> None:
    """Strip ``run``'s state file of what an older bridge did not keep: each step's result and its gated mark."""
    path = RunLog(project, run).state_path
    document = json.loads(path.read_text("ascii"))
    for entry in document["states"]:
        entry.pop("position", None)
        entry.pop("gated", None)
    path.write_text(json.dumps(document), "ascii")


def as_shown(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The content of a fact's form accepted as the bridge shows it: its own form (``value``: the field's choices or
    type) with the model's value, the default; a yes/no form with yes."""
    return {"value": properties["value"].get("default")} if "value" in properties else {"confirm": True}


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


def verifier_pids(state: Path) -> list[int]:
    """The running ``rimthan-mcp serve`` processes using ``state`` (the bridge's child), from /proc."""
    return running_pids("rimthan-mcp", state)


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


def stand_in(client: CheckedClient, project: Path, **kwargs: Any) -> StandIn:
    """The stand-in composing the packaged catalogue's example texts."""
    return StandIn(client, project, {v: packaged_source(v) / "examples" for v in ("1.2.0", "1.3.0")}, **kwargs)


def drive(world: ServerWorld, tmp_path: Path, script: Callable[[StandIn], Awaitable[None]]) -> tuple[StandIn, Path]:
    """Run ``script`` against a fresh bridge; check every reply the model got; return it and the state dir."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await script(model)
            return model

    model = anyio.run(go)
    check_replies(model)
    return model, state


def check_replies(model: StandIn) -> None:
    """Nothing opaque went either way, no reply holds a traceback, each reply's structured content carries its
    words (what a host handing its model only that part hands it), and every refusal names the next call."""
    assert model.leaks() == []
    for reply in model.received:
        assert "Traceback" not in reply.text and 'File "' not in reply.text, reply.text
        assert reply.data_text == reply.text, f"the structured content's words differ: {reply.data_text!r}"
        if reply.is_error:
            assert any(name in reply.text for name in TOOL_NAMES), reply.text


def refused(reply: Reply, *words: str) -> None:
    """``reply`` is an error whose text holds every one of ``words``."""
    assert reply.is_error, reply.text
    for word in words:
        assert word in reply.text, f"{word!r} not in: {reply.text}"


def no_run(reply: Reply, *words: str) -> None:
    """``reply`` is show_step's with no run: a state, not an error, whose text holds every one of ``words``."""
    assert not reply.is_error and reply.data["status"] == "no_run", reply.text
    for word in words:
        assert word in reply.text, f"{word!r} not in: {reply.text}"


def write_files(model: StandIn, reply: Reply, path: str | None = None, text: str | None = None) -> None:
    """The model writes the files ``reply`` names (or only ``path``): its composed text, or ``text``."""
    for name in reply.data["files"]:
        if path is None or name == path:
            target = model.project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(model.compose(name) if text is None else text, "utf-8")


async def at_desk_research_validators(model: StandIn) -> Reply:
    """A new run taken to desk-research's validators: its files written, step_done's reply naming them."""
    await model.follow(await model.start(), "", until_question=True)
    step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
    write_files(model, step)
    waiting = await model.call("step_done")
    assert waiting.data["status"] == "validators_pending", waiting.text
    return waiting


async def all_pass(model: StandIn, *validators: str) -> Reply:
    """A pass recorded for each of ``validators`` in turn, none refused; the last one's reply, which submits the
    step's round."""
    replies = [await model.call("record_verdict", {"validator": name, "verdict": "pass"}) for name in validators]
    assert all(not r.is_error for r in replies), [r.text for r in replies if r.is_error]
    assert "step submitted" in replies[-1].text, replies[-1].text
    return replies[-1]


def audited(project: Path, state: Path, run: str) -> dict[str, Any]:
    """The audit of ``run``'s log in ``project``, which must pass."""
    history = audit(project / ".rimthan" / "runs" / f"{run}.log", state)
    assert history["ok"] is True
    return history


def audited_only_run(project: Path, state: Path) -> dict[str, Any]:
    """The audit of the one run in ``project`` (there must be exactly one), which must pass."""
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    return audited(project, state, log.stem)


def running_pids(program: str, argument: Path) -> list[int]:
    """The running processes of ``program`` (a console script) with ``argument`` among their arguments, from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text("utf-8")
        except OSError:
            continue
        running = "\nState:\tZ" not in status
        if running and any(a.endswith(program.encode()) for a in argv) and str(argument).encode() in argv:
            pids.append(int(entry.name))
    return pids


@dataclass(frozen=True)
class GarbledBridge:
    """A bridge on a verifier URL served by the garbling verifier in front of a real one (``garbled_bridge``)."""

    params: StdioServerParameters
    project: Path
    state: Path
    switch: Path  # while it exists, the fault it names garbles each tool result (garbling_verifier.fault_of)


@contextmanager
def garbled_bridge(world: ServerWorld, tmp_path: Path) -> Iterator[GarbledBridge]:
    """A real ``rimthan-mcp serve --transport http``, the garbling verifier in front of it, and the parameters of
    a ``rimthan-host serve --verifier-url`` on the garbler for a fresh project under ``tmp_path``."""
    project, state, switch = tmp_path / "project", tmp_path / "state", tmp_path / "garble"
    project.mkdir()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(world, state), "--transport", "http"]
    garbler = [sys.executable, garbling_verifier.__file__]
    with (
        http_server_process([*verifier, "--port", "0"], env=server_env()) as real,
        http_server_process([*garbler, real.url, str(switch)], env=server_env()) as garbling,
    ):
        args = ["serve", "--project", str(project), "--verifier-url", garbling.url]
        yield GarbledBridge(StdioServerParameters(command=str(BIN / "rimthan-host"), args=args), project, state, switch)
