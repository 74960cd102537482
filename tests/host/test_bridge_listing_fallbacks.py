"""A verifier connection whose listing changes the bridge cannot follow keeps no listing: each reply reads it.

``test_bridge_offered_kept`` proves the kept listing on a 2026-07-28 connection whose listen stream is acknowledged.
Here every other case, through a real ``rimthan-host serve --verifier-url`` and the real ``rimthan-mcp`` over HTTP,
counting the verifier's ``resources listed`` records: a listen stream refused (the verifier's own bound on open
streams reached: ``listen_limit_reached``), or never acknowledged (``support.listen_proxy`` holds it: the bridge
gives up after ``ACK_SECONDS``); one lost once acknowledged (the verifier stopped, or killed, and started again on
its port), which the next reply opens again, the listing read once then and kept again; and a connection to a URL
that negotiated 2025-11-25 (the proxy refuses ``server/discover``), which keeps nothing even where the verifier
declares ``resources.listChanged`` (``--http-sessions``: the session's stream it is sent on can be lost unseen, as
when the verifier restarts). Each reply that names workflows here is a
``show_step`` with no run or a refused ``start_run``. Last, the one 2025-11-25 connection that is followed: the real
verifier as a child over stdio, under the bridge's own :class:`KeptListing`.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from rimthan_host.kept_listing import KeptListing
from rimthan_host.protocol import client_metas
from rimthan_workflow_registry.limits import LISTEN_STREAMS
from rimthan_workflow_registry.protocol_names import RELEASE_META
from support.bridge import verifier_pids
from support.checked_client import CheckedClient
from support.listen_proxy import HANDSHAKE_ONLY, UNACKNOWLEDGED
from support.listings import bridge_at, entered, http_verifier, listen_proxy, listings, text, until, verifier_argv
from support.processes import HttpServer
from support.registry import free_port
from support.servers import ServerWorld, server_env

SHOWN = "release research-decision@1.2.0"


@pytest.fixture(scope="module")
def verifier(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One stateless verifier over HTTP on 1.2.0, for the tests that publish nothing and restart nothing."""
    root = tmp_path_factory.mktemp("listing-fallbacks")
    mcp_world.publish("1.2.0", root / "releases")
    with http_verifier(mcp_world, root / "releases", root / "state") as server:
        yield server


async def _replies(client: CheckedClient, shown: str = SHOWN) -> None:
    """Two no-run ``show_step`` calls and a refused ``start_run``, each naming ``shown``."""
    for reply in (
        await client.call_tool("show_step", {}),
        await client.call_tool("show_step", {}),
        await client.call_tool("start_run", {"workflow": "nope", "facts": {}}),
    ):
        assert shown in text(reply), text(reply)


async def _listed(log: HttpServer | Path, count: int) -> None:
    """Wait until the verifier logged ``count`` listings, and no more: an HTTP one's stderr (copied by a thread), or
    the file a child's stderr goes to."""

    def lines() -> list[str]:
        return log.lines if isinstance(log, HttpServer) else log.read_text("utf-8").splitlines()

    async def seen() -> bool:
        return listings(lines()) >= count

    await until(seen)
    await anyio.sleep(0.5)  # (a listing past the count would be logged by now: the calls were answered)
    assert listings(lines()) == count, "\n".join(lines())


def test_a_refused_listen_stream_keeps_nothing(verifier: HttpServer, tmp_path: Path) -> None:
    async def go() -> None:
        async with CheckedClient(verifier.url) as holder, contextlib.AsyncExitStack() as streams:
            for _ in range(LISTEN_STREAMS):  # (every listen stream the verifier serves is open: the next is refused)
                await streams.enter_async_context(holder.listen(resources_list_changed=True))
            before = listings(verifier.lines)
            with (tmp_path / "err").open("w") as err:
                async with bridge_at(verifier.url, tmp_path, err) as bridge:
                    await _replies(bridge)
                    await _listed(verifier, before + 3)  # one listing each, not one kept
                    await streams.aclose()  # (a stream free now does not make the bridge's connection watched)
                    await _replies(bridge)
                    await _listed(verifier, before + 6)
        assert "listen stream refused" in verifier.stderr(), verifier.stderr()  # (the bridge's, as it connected)

    anyio.run(go)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_listen_stream_lost_once_acknowledged_is_opened_again_and_the_listing_kept_again(
    mcp_world: ServerWorld, tmp_path: Path, stop: signal.Signals
) -> None:
    """The verifier stopped (or killed) and started again on its port: the bridge's sessionless connection serves
    on, its listen stream is gone. The next reply that names workflows opens a new one and reads the listing once,
    kept again from then on; a release the restarted verifier activates (SIGHUP) is named on the next reply."""
    releases, state, port = tmp_path / "releases", tmp_path / "state", free_port()
    mcp_world.publish("1.2.0", releases)

    async def go() -> None:
        with contextlib.ExitStack() as stack, (tmp_path / "err").open("w") as err:
            first = await entered(stack, http_verifier(mcp_world, releases, state, port=port))
            async with bridge_at(first.url, tmp_path, err) as bridge:
                await _replies(bridge)
                await _listed(first, 1)  # (acknowledged: the listing is kept)
                first.process.send_signal(stop)
                await anyio.to_thread.run_sync(first.process.wait)
                second = await entered(stack, http_verifier(mcp_world, releases, state, port=port))

                async def read_again() -> bool:  # (the bridge learns of the lost stream a moment after it is lost)
                    await bridge.call_tool("show_step", {})
                    return listings(second.lines) > 0

                await until(read_again)
                await _replies(bridge)
                await _listed(second, 1)  # (read once after the loss, on a new listen stream: kept again)
                mcp_world.publish("1.3.0", releases)
                await anyio.to_thread.run_sync(second.refresh)

                async def named() -> bool:  # (the bridge is told a moment after the verifier activates it)
                    return "release research-decision@1.3.0" in text(await bridge.call_tool("show_step", {}))

                await until(named)
                await _replies(bridge, "release research-decision@1.3.0")
                await _listed(second, 2)

    anyio.run(go)


def test_a_listen_stream_not_acknowledged_in_time_keeps_nothing(verifier: HttpServer, tmp_path: Path) -> None:
    async def go() -> None:
        with contextlib.ExitStack() as stack, (tmp_path / "err").open("w") as err:
            proxy = await entered(stack, listen_proxy(verifier.url, UNACKNOWLEDGED))
            before = listings(verifier.lines)
            async with bridge_at(proxy.url, tmp_path, err) as bridge:
                await _replies(bridge)  # (the first one once the bridge gave up waiting: ACK_SECONDS)
                await _listed(verifier, before + 3)
            assert "subscriptions/listen held" in proxy.stderr(), proxy.stderr()

    anyio.run(go)


async def _changed(
    how: str, mcp_world: ServerWorld, server: HttpServer, releases: Path, state: Path, stack: contextlib.ExitStack
) -> HttpServer:
    """1.3.0 published and ``server`` told: SIGHUP (``refreshed``), or stopped and started again on its port
    (``restarted``: a 2025-11-25 session's notification stream is lost, unseen by the client). The verifier now."""
    mcp_world.publish("1.3.0", releases)
    if how == "refreshed":
        await anyio.to_thread.run_sync(server.refresh)
        return server
    server.process.terminate()
    await anyio.to_thread.run_sync(server.process.wait)
    return await entered(stack, http_verifier(mcp_world, releases, state, port=urlsplit(server.url).port or 0))


@pytest.mark.parametrize(
    ("extra", "how"),
    [((), "refreshed"), (("--http-sessions",), "refreshed"), (("--http-sessions",), "restarted")],
    ids=["stateless-refreshed", "sessions-refreshed", "sessions-restarted"],
)
def test_a_handshake_era_connection_over_http_keeps_nothing(
    mcp_world: ServerWorld, tmp_path: Path, extra: tuple[str, ...], how: str
) -> None:
    """A bridge whose verifier connection over HTTP negotiated 2025-11-25 reads the listing for each reply, so the
    release a refresh or a restart brings is named on the very next one. With sessions the verifier declares
    ``resources.listChanged``, but the stream it sends it on can be lost without the client being told."""
    releases, state = tmp_path / "releases", tmp_path / "state"
    mcp_world.publish("1.2.0", releases)

    async def go() -> None:
        with contextlib.ExitStack() as stack, (tmp_path / "err").open("w") as err:
            server = await entered(stack, http_verifier(mcp_world, releases, state, extra=extra))
            proxy = await entered(stack, listen_proxy(server.url, HANDSHAKE_ONLY))
            async with bridge_at(proxy.url, tmp_path, err) as bridge:
                await _replies(bridge)
                assert "server/discover refused" in proxy.stderr(), proxy.stderr()  # (it fell back to initialize)
                await _listed(server, 3)
                now = await _changed(how, mcp_world, server, releases, state, stack)
                before = listings(now.lines)
                await _replies(bridge, "release research-decision@1.3.0")
                await _listed(now, before + 3)

    anyio.run(go)


def test_a_handshake_era_stdio_connection_follows_list_changed(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """The real verifier as a child over stdio, connected at 2025-11-25 (as to a verifier serving only that era): it
    declares ``resources.listChanged`` and sends it on the connection itself, so the listing is kept until it comes."""
    releases, state, errlog = tmp_path / "releases", tmp_path / "state", tmp_path / "err"
    mcp_world.publish("1.2.0", releases)
    argv = verifier_argv(mcp_world, releases, state)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_env())

    def releases_named(metas: list[dict[str, Any]]) -> set[str]:
        return {str(meta[RELEASE_META]) for meta in metas if RELEASE_META in meta}

    async def go() -> None:
        listing = KeptListing(over_url=False)
        with errlog.open("w") as err:
            client = CheckedClient(stdio_client(params, errlog=err), mode="legacy", message_handler=listing.on_message)
            async with client, anyio.create_task_group() as watching:
                await watching.start(listing.watch, client)
                assert client.protocol_version == "2025-11-25" and listing.watched
                fetch = client_metas(client)
                for _ in range(3):
                    assert releases_named(await listing.read(fetch)) == {"research-decision@1.2.0"}
                await _listed(errlog, 1)
                mcp_world.publish("1.3.0", releases)
                (pid,) = verifier_pids(state)
                os.kill(pid, signal.SIGHUP)

                async def told() -> bool:
                    return "research-decision@1.3.0" in releases_named(await listing.read(fetch))

                await until(told)
                await listing.read(fetch)
                await _listed(errlog, 2)  # (read once more after the change, then kept)
                watching.cancel_scope.cancel()

    anyio.run(go)
