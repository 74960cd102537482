"""When the link to the verifier connects anew: one rule (``VerifierLink._replaced``), on a call and on ``down()``.

Real ``rimthan-mcp`` verifiers under a real :class:`VerifierLink`: one over HTTP on a port it is restarted on
(``free_port``, as in ``tests/server/test_http_session_ids.py``), and children over stdio. A URL's connection let
go after a lost call is replaced on the next call and on ``down()``; a child that never came up is started again on
the next call; a child that was up and is gone is not replaced by a call: its loss is ``VerifierLost``, which the
bridge recovers from by restarting it (``reconnect.recover``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.link import VerifierLink, VerifierLost, VerifierNotUp
from rimthan_host.protocol import ToolRefused
from rimthan_workflow_registry.protocol_names import START_WORKFLOW
from support.bridge import verifier_pids
from support.listings import entered, http_verifier, verifier_argv
from support.processes import HttpServer, stop
from support.registry import free_port
from support.servers import ServerWorld, server_env


def _linked(target: str | StdioServerParameters, use: Callable[[VerifierLink], Awaitable[None]]) -> None:
    """``use`` a real link to ``target``, closed after."""

    async def go() -> None:
        async with anyio.create_task_group() as tasks:
            link = VerifierLink(target, tasks)
            try:
                await use(link)
            finally:
                link.close()

    anyio.run(go)


async def _asked(link: VerifierLink) -> bool:
    """Whether the verifier answered a call over the link's current connection (refused: no workflow named)."""
    with contextlib.suppress(ToolRefused):  # (refused: an answer all the same)
        await link.call(START_WORKFLOW, {})
    return True


def _child(world: ServerWorld, releases: Path, state: Path) -> StdioServerParameters:
    argv = verifier_argv(world, releases, state)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=server_env())


def test_a_url_connection_let_go_after_a_lost_call_is_replaced_on_the_next_call_and_on_down(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    releases, state, port = tmp_path / "releases", tmp_path / "state", free_port()
    mcp_world.publish("1.2.0", releases)

    async def started(stack: contextlib.ExitStack) -> HttpServer:
        return await entered(stack, http_verifier(mcp_world, releases, state, port=port))

    async def use(link: VerifierLink) -> None:
        assert await link.down(60) is not None  # (nothing listens on the port yet: the first connection failed)
        with contextlib.ExitStack() as stack:
            server = await started(stack)
            assert await link.down(60) is None  # (a URL's connection gone is replaced, with no call made)
            assert await _asked(link)
            for asked in ("call", "down"):
                await anyio.to_thread.run_sync(stop, server.process)
                with pytest.raises(VerifierLost):  # (a call on the verifier gone: the link lets the connection go)
                    await _asked(link)
                server = await started(stack)  # (on its port again)
                if asked == "call":
                    assert await _asked(link)  # on a new connection: the one let go is closed
                else:
                    assert await link.down(60) is None, "down() asked the connection let go"

    _linked(f"http://127.0.0.1:{port}/mcp", use)


def test_a_child_that_never_came_up_is_started_again_on_the_next_call(mcp_world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"

    async def use(link: VerifierLink) -> None:
        with pytest.raises(VerifierNotUp, match="no releases directory here"):  # (it exited at once)
            await _asked(link)
        mcp_world.publish("1.2.0", releases)
        assert await _asked(link)  # (a child started again, on the releases there now)
        assert len(verifier_pids(state)) == 1

    _linked(_child(mcp_world, releases, state), use)


def test_a_child_that_was_up_and_is_gone_is_not_replaced_by_a_call(mcp_world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    mcp_world.publish("1.2.0", releases)

    async def use(link: VerifierLink) -> None:
        assert await _asked(link)
        (pid,) = verifier_pids(state)
        os.kill(pid, signal.SIGKILL)
        for _ in range(2):  # (the call that lost it, then the next: no child started in its place)
            with pytest.raises(VerifierLost) as lost:
                await _asked(link)
            print("LOST", lost.value)
        assert verifier_pids(state) == []
        await link.restart()  # (what the bridge does on VerifierLost: reconnect.recover)
        assert await _asked(link) and len(verifier_pids(state)) == 1

    _linked(_child(mcp_world, releases, state), use)
