"""What a harness reads off the wire besides tool results: resource-read errors and refresh notifications.

A resource read the server refuses is a JSON-RPC error whose ``data`` carries the failure ``code`` and
``next`` (what to do: the same one remediation table tool refusals use); a refresh that changes the
resource listing sends ``notifications/resources/list_changed`` to a connected client (and
``notifications/prompts/list_changed`` when new runs start on another release), one that changes nothing sends
none; what the server declares is what it sends, in each protocol era, over stdio and HTTP. Each is checked
through the SDK client against a real ``rimthan-mcp serve`` process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.limits import LISTEN_STREAMS
from rimthan_workflow_registry.remediation import REMEDIATION
from support.checked_client import CheckedClient
from support.oci import push
from support.processes import WAIT_SECONDS, wait_for_line
from support.registry import LocalRegistry
from support.servers import (
    RIMTHAN_MCP,
    HttpServer,
    ServerWorld,
    http_client_for,
    http_server,
    serve_args,
    stdio_client_for,
)

LIST_CHANGED = "notifications/resources/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
BOTH_CHANGED = [LIST_CHANGED, PROMPTS_CHANGED]  # a new release new runs start on: its listing and its prompts
NEW_RUNS, RELEASE = "rimthan/new-runs", "rimthan/release"
LISTING_CHANGED_LOG = "resource listing changed"


def _hex(release: Path) -> str:
    return hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()


async def _refused(client: Any, uri: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    data = refused.value.data
    assert isinstance(data, dict) and data["uri"] == uri, data
    return data


def test_a_refused_resource_read_says_what_to_do_next(mcp_world: ServerWorld, tmp_path: Path) -> None:
    release = mcp_world.publish("1.2.0", tmp_path / "releases")
    args = serve_args(mcp_world, release, state_dir=tmp_path / "state")
    example = "examples/confirmed-state.json"  # read from disk when asked (the loader never reads it)
    served = f"rimthan://releases/{_hex(release)}/{example}"

    async def check() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            unheld = await _refused(client, f"rimthan://manifests/{'0' * 64}/manifest.json")
            assert unheld["code"] == "pinned_release_unavailable"
            assert unheld["next"] == REMEDIATION[FailureCode.PINNED_RELEASE_UNAVAILABLE]  # the one table
            for nothing in ("rimthan://releases/" + _hex(release) + "/no-such-file.md", "file:///etc/passwd"):
                unknown = await _refused(client, nothing)
                assert unknown["code"] == "invalid_arguments" and "resources/list" in unknown["next"], unknown
            with pytest.raises(MCPError) as no_prompt:
                await client.get_prompt("no-such-prompt")
            said = no_prompt.value.data
            assert said["code"] == "invalid_arguments" and "prompts/list" in said["next"], said
            on_disk = release / "catalogue" / example
            on_disk.write_text(on_disk.read_text("utf-8").replace("{", "{ ", 1), "utf-8")  # changed after signing
            changed = await _refused(client, served)
            code = FailureCode(changed["code"])
            assert code in (FailureCode.FILE_SIZE_MISMATCH, FailureCode.FILE_DIGEST_MISMATCH), changed
            assert changed == {"code": code.value, "uri": served, "next": REMEDIATION[code]}

    anyio.run(check)


def _server_pid(errlog: Path) -> int:
    match = wait_for_line(lambda: errlog.read_text("utf-8").splitlines(), r"refresh: kill -HUP (\d+)")
    return int(match.group(1))


def _refresh(errlog: Path, pid: int) -> None:
    seen = len(errlog.read_text("utf-8").splitlines())
    os.kill(pid, signal.SIGHUP)
    wait_for_line(lambda: errlog.read_text("utf-8").splitlines(), '"refresh done"', after=seen)


@dataclass
class Listening:
    """A client's resources and prompts list_changed notifications, as its message handler received them."""

    told: list[str] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, message: object) -> None:
        method = getattr(message, "method", None)
        if method in BOTH_CHANGED:
            self.told.append(method)
            if set(self.told) == set(BOTH_CHANGED):
                self.changed.set()

    def over_stdio(self, args: list[str], errlog: Path) -> CheckedClient:
        """A 2025-11-25 SDK client of ``serve`` (``args``) over stdio, its notifications heard here."""
        client = stdio_client_for(args, errlog.open("w"), mode="legacy")
        client.message_handler = self
        return client

    @staticmethod
    def declared(client: CheckedClient) -> None:
        """The server told ``client`` (connected) that it announces listing changes: what it sends, no more."""
        declares_what_it_sends(client)

    async def told_once(self) -> None:
        """Both notifications came (each once: asserted by the caller once the client is closed)."""
        with anyio.fail_after(WAIT_SECONDS):
            await self.changed.wait()


def declares_what_it_sends(client: CheckedClient) -> None:
    """Resources and prompts list changes declared (a client may rely on them); tool list changes not (the four
    tools never change, nothing is ever sent), nor resource subscriptions (every resource is immutable)."""
    caps = client.server_capabilities
    assert caps.resources is not None and caps.resources.list_changed is True, caps
    assert caps.prompts is not None and caps.prompts.list_changed is True, caps
    assert caps.tools is not None and not caps.tools.list_changed, caps
    assert not caps.resources.subscribe, caps


def declares_none(client: CheckedClient) -> None:
    """A connection no server notification can reach: no list change declared."""
    caps = client.server_capabilities
    assert caps.resources is not None and caps.prompts is not None and caps.tools is not None, caps
    assert not (caps.resources.list_changed or caps.prompts.list_changed or caps.tools.list_changed), caps


def _serving_1_2_0(world: ServerWorld, tmp_path: Path, *extra: str) -> tuple[Path, list[str]]:
    """A releases directory holding 1.2.0, and the server arguments that serve it (plus ``extra``)."""
    releases = tmp_path / "releases"
    old = world.publish("1.2.0", releases)
    return releases, serve_args(world, old, state_dir=tmp_path / "state", releases_dir=releases, extra=extra)


def test_a_refresh_that_changes_the_listing_notifies_the_client_and_one_that_does_not_stays_quiet(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    releases, args = _serving_1_2_0(mcp_world, tmp_path)
    errlog = tmp_path / "stderr.log"
    listening = Listening()

    async def check() -> None:
        async with listening.over_stdio(args, errlog) as client:
            listening.declared(client)
            before = {r.uri for r in (await client.list_resources()).resources}
            pid = await anyio.to_thread.run_sync(_server_pid, errlog)
            await anyio.to_thread.run_sync(_refresh, errlog, pid)  # nothing new in the releases directory
            mcp_world.publish("1.3.0", releases)
            await anyio.to_thread.run_sync(_refresh, errlog, pid)  # 1.3.0 is held from now on
            await listening.told_once()
            after = {r.uri for r in (await client.list_resources()).resources}
            assert f"rimthan://manifests/{_hex(releases / mcp_world.built['1.3.0'].name)}/manifest.json" in after
            assert after > before
        # the unchanged refresh logged no change and sent nothing: one change, one notification
        assert len(re.findall(LISTING_CHANGED_LOG, errlog.read_text("utf-8"))) == 1
        assert listening.told == BOTH_CHANGED

    anyio.run(check)


def test_a_follower_s_interval_sync_that_pulls_a_new_release_notifies_the_client(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """No SIGHUP: the ``--refresh-interval`` scan syncs the followed registry; only the scan that finds 1.3.0 tells."""
    ref = registry.ref("rimthan/told")
    push(packaged_releases["1.2.0"], ref, trust)
    args = ["-m", "rimthan_workflow_mcp", "serve", "--releases-from", ref, "--plain-http", "--trust", str(trust)]
    args += ["--releases-dir", str(tmp_path / "releases"), "--state-dir", str(tmp_path / "state")]
    args += ["--refresh-interval", "1", "--log-level", "info"]  # a follower's floor: each refresh syncs
    errlog = tmp_path / "stderr.log"
    listening = Listening()

    async def check() -> None:
        async with listening.over_stdio(args, errlog) as client:
            listening.declared(client)
            push(packaged_releases["1.3.0"], ref, trust)  # a publish; the server's scans pull it in
            await listening.told_once()
            assert any(r.uri.startswith("rimthan://manifests/") and (r.meta or {}).get(NEW_RUNS) and "1.3.0" in
                       (r.meta or {}).get(RELEASE, "") for r in (await client.list_resources()).resources)  # fmt: skip
        assert len(re.findall(LISTING_CHANGED_LOG, errlog.read_text("utf-8"))) == 1  # the other scans: nothing
        assert listening.told == BOTH_CHANGED

    anyio.run(check)


def test_a_2026_client_over_stdio_is_told_on_its_listen_stream(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """2026-07-28 has no initialized session: a client opens ``subscriptions/listen`` and the change comes there."""
    releases, args = _serving_1_2_0(mcp_world, tmp_path)
    errlog = tmp_path / "stderr.log"

    async def check() -> None:
        async with stdio_client_for(args, errlog.open("w"), mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            declares_what_it_sends(client)
            pid = await anyio.to_thread.run_sync(_server_pid, errlog)
            told = await _told_on_listen_stream(client, lambda: _refresh(errlog, pid), releases, mcp_world)
            assert sorted(type(event).__name__ for event in told) == ["PromptsListChanged", "ResourcesListChanged"]
            listed = {r.uri for r in (await client.list_resources()).resources}
            assert f"rimthan://manifests/{_hex(releases / mcp_world.built['1.3.0'].name)}/manifest.json" in listed
        said = errlog.read_text("utf-8")
        assert "answering the requests read so far" not in said  # the listen stream never held the exit back

    anyio.run(check)


async def _told_on_listen_stream(
    client: CheckedClient, refresh: Any, releases: Path, world: ServerWorld
) -> list[object]:
    """Open a listen stream asking for every list change, publish 1.3.0, refresh: the two events it carries.

    Tool list changes are asked for too: the acknowledgment does not honor them (none is ever sent)."""
    async with client.listen(tools_list_changed=True, resources_list_changed=True, prompts_list_changed=True) as sub:
        assert sub.honored is not None and not sub.honored.tools_list_changed, sub.honored
        assert sub.honored.resources_list_changed and sub.honored.prompts_list_changed, sub.honored
        world.publish("1.3.0", releases)
        await anyio.to_thread.run_sync(refresh)
        with anyio.fail_after(WAIT_SECONDS):
            return [await anext(sub), await anext(sub)]  # new runs start on 1.3.0: prompts too


def test_a_listen_stream_open_at_the_end_of_input_does_not_hold_the_exit_back(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """A listen request is a stream, answered only when it ends: not a call the end of input waits for."""
    _, args = _serving_1_2_0(mcp_world, tmp_path)
    errlog = tmp_path / "stderr.log"
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    listen = {"notifications": {"resourcesListChanged": True}, "_meta": envelope}
    with errlog.open("w") as err:
        server = subprocess.Popen(
            [RIMTHAN_MCP, *args[2:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": listen}))
        server.stdin.write("\n")
        server.stdin.flush()
        ack = json.loads(server.stdout.readline())
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        server.stdin.close()  # the client goes away with its listen stream open
        server.stdout.read()
        assert server.wait(timeout=WAIT_SECONDS) == 0
    assert "answering the requests read so far" not in errlog.read_text("utf-8")


def test_over_http_a_session_is_told_of_a_refresh_that_changes_the_listing_and_stateless_declares_none(
    mcp_world: ServerWorld, mcp_http: HttpServer, tmp_path: Path
) -> None:
    releases, args = _serving_1_2_0(mcp_world, tmp_path, "--http-sessions")
    listening = Listening()
    with http_server(args) as server:

        async def check() -> None:
            async with http_client_for(mcp_http.url, mode="legacy") as stateless:  # no notification reaches it
                declares_none(stateless)
            client = http_client_for(server.url, mode="legacy")
            client.message_handler = listening
            async with client:
                listening.declared(client)
                mcp_world.publish("1.3.0", releases)
                await anyio.to_thread.run_sync(server.refresh)
                await listening.told_once()

        anyio.run(check)
    assert len(re.findall(LISTING_CHANGED_LOG, server.stderr())) == 1
    assert listening.told == BOTH_CHANGED


def test_a_2026_client_over_stateless_http_is_told_on_its_listen_stream_which_sigterm_ends_gracefully(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The listen response is an SSE stream the SDK serves over HTTP even with JSON answers; SIGTERM ends it with
    its final result (the client's loop ends), not by dropping it once the drain gave up."""
    releases, args = _serving_1_2_0(mcp_world, tmp_path)
    with http_server(args) as server:

        async def check() -> None:
            async with http_client_for(server.url) as client:
                assert client.protocol_version == "2026-07-28"
                declares_what_it_sends(client)
                told = await _told_on_listen_stream(client, server.refresh, releases, mcp_world)
                assert sorted(type(e).__name__ for e in told) == ["PromptsListChanged", "ResourcesListChanged"]
                async with client.listen(resources_list_changed=True) as sub:
                    server.process.terminate()
                    with anyio.fail_after(WAIT_SECONDS):
                        assert [event async for event in sub] == []  # ended gracefully: no SubscriptionLost

        anyio.run(check)
        assert server.process.wait(timeout=WAIT_SECONDS) == 0
    assert len(re.findall(LISTING_CHANGED_LOG, server.stderr())) == 1


def test_over_http_listen_streams_past_their_bound_are_refused_and_calls_keep_their_slots(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """Each open listen stream holds an in-flight slot: at most ``LISTEN_STREAMS`` (half), so a call still gets in."""
    _, args = _serving_1_2_0(mcp_world, tmp_path)
    with http_server(args) as server:

        async def check() -> None:
            async with http_client_for(server.url) as client, contextlib.AsyncExitStack() as streams:
                for _ in range(LISTEN_STREAMS):
                    await streams.enter_async_context(client.listen(resources_list_changed=True))
                with pytest.raises(MCPError) as refused:
                    async with client.listen(resources_list_changed=True):
                        pass
                code = FailureCode.LISTEN_LIMIT_REACHED
                assert refused.value.message.startswith(f"{code.value}: {LISTEN_STREAMS} listen streams are open")
                assert refused.value.data == {"code": code.value, "next": REMEDIATION[code]}, refused.value.data
                assert len((await client.list_tools()).tools) == 4  # a call is still served beside them

        anyio.run(check)
