"""An operator's ordinary days, lived through the installed ``rimthan-mcp`` and ``rimthan-pack``.

Each test sets up real release directories (built and signed with a real key,
published by copying, some corrupted on disk), starts the real console script,
and talks to it with the MCP SDK client, the way an operator and a host would.
"""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from rimthan_host.harness import ConfirmedStateBook, HostProfile, RunResult, client_caller
from support.checked_client import CheckedClient
from support.processes import http_server_process
from support.servers import (
    FLIPPED_FILE,
    RIMTHAN_MCP,
    RIMTHAN_PACK,
    ServerWorld,
    build_world,
    flip_byte,
    harness,
    http_client_for,
    server_env,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("operator-days"))


def _serve(world: ServerWorld, releases: Path, state: Path, *extra: str) -> list[str]:
    return ["serve", "--releases-dir", str(releases), "--trust", str(world.trust), "--state-dir", str(state), *extra]


HTTP_ON_A_FREE_PORT = ("--transport", "http", "--port", "0")


def console_server(args: list[str], transport: tuple[str, ...] = HTTP_ON_A_FREE_PORT) -> Any:
    """The installed ``rimthan-mcp`` serving HTTP (a context manager yielding the running server)."""
    return http_server_process([RIMTHAN_MCP, *args, *transport], env=server_env())


def _refused(args: list[str], **kwargs: Any) -> str:
    """Run ``rimthan-mcp`` expecting a refusal at start: exit 1, the ``error:`` and ``next:`` lines (joined)."""
    done = subprocess.run([RIMTHAN_MCP, *args], capture_output=True, text=True, timeout=60, env=server_env(), **kwargs)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(lines) == 2 and lines[1].startswith("next: "), done.stderr
    return " ".join(lines)


async def _start(url: str, project: Path) -> RunResult:
    async with http_client_for(url) as client:
        return await harness(client_caller(client), project).start("research", initial_version="1.3.0")


# --------------------------------------------------------------------------- one bad publish


def test_a_corrupt_newest_release_is_skipped_at_start_and_the_last_good_one_serves(
    world: ServerWorld, tmp_path: Path
) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    world.publish("1.2.0", releases)
    flip_byte(world.publish("1.3.0", releases))  # the bad publish, found at the next restart

    with console_server(_serve(world, releases, state)) as server:
        said = server.stderr()

        async def start() -> RunResult:
            async with http_client_for(server.url) as client:
                return await harness(client_caller(client), tmp_path / "p").start("research", initial_version="1.2.0")

        started = anyio.run(start)
    skipped = f"rimthan-mcp: skipped {releases / 'research-decision-1.3.0'}: file_digest_mismatch: "
    assert skipped + f"{FLIPPED_FILE}: " in said, said  # the file that failed, not only its release
    assert "rimthan-mcp: release research-decision@1.2.0 " in said and "[active]" in said
    assert started.release == "research-decision@1.2.0"
    warned = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    assert any(
        w["event"] == "release not activated" and w["error"]["code"] == "file_digest_mismatch" for w in warned
    ), said


def test_start_refuses_only_when_no_release_verifies_and_respects_the_floor(world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    flip_byte(world.publish("1.2.0", releases))
    line = _refused(_serve(world, releases, state))
    assert line.startswith("error: file_digest_mismatch: ") and "research-decision-1.2.0" in line
    assert "no release of research-decision verifies" in line
    assert f"research-decision-1.2.0: file_digest_mismatch: {FLIPPED_FILE}: " in line

    # 1.3.0 served once raised the floor; now 1.3.0 is corrupt and only 1.2.0 verifies: no silent rollback
    shutil.rmtree(releases)
    world.publish("1.3.0", releases)
    with console_server(_serve(world, releases, state)):
        pass
    shutil.rmtree(releases)
    world.publish("1.2.0", releases)
    flip_byte(world.publish("1.3.0", releases))
    line = _refused(_serve(world, releases, state))
    assert line.startswith("error: file_digest_mismatch: "), line
    assert "research-decision-1.2.0: rollback_refused" in line


# --------------------------------------------------------------------------- several catalogues


def _build_other_catalogue(world: ServerWorld, tmp_path: Path, releases: Path) -> None:
    source = tmp_path / "catalogues" / "other"
    subprocess.run([RIMTHAN_PACK, "init", str(source)], check=True, capture_output=True, timeout=60)
    subprocess.run(
        [RIMTHAN_PACK, "build", str(source), "--key", str(world.key.private_path), "--out", str(releases)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def test_a_second_catalogue_in_releases_is_served_alongside_the_first(world: ServerWorld, tmp_path: Path) -> None:
    """The default ``rimthan-mcp serve`` (what .mcp.json runs) in a project whose releases/ holds two catalogues."""
    project = tmp_path / "project"
    releases = project / "releases"
    world.publish("1.2.0", releases)
    world.publish("1.3.0", releases)
    _build_other_catalogue(world, tmp_path, releases)
    shutil.copytree(world.trust, project / "keys" / "local")
    params = StdioServerParameters(
        command=RIMTHAN_MCP, args=["serve"], cwd=project, env={**server_env(), "RIMTHAN_STATE_DIR": str(tmp_path / "s")}
    )

    async def session() -> dict[str, Any]:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with CheckedClient(stdio_client(params, errlog=errlog)) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                prompts = {p.name for p in (await client.list_prompts()).prompts}
                resources = {str(r.name) for r in (await client.list_resources()).resources}
                research = await harness(client_caller(client), tmp_path / "p").start(
                    "research", initial_version="1.3.0"
                )
                book = ConfirmedStateBook()
                book.confirm("goal", "summarise the week")
                other = await client.call_tool(
                    "rimthan.start_workflow",
                    {"workflow": "other", "confirmed_state": book.projection(), "host": HostProfile().to_json()},
                )
                unknown = await client.call_tool(
                    "rimthan.start_workflow",
                    {
                        "workflow": "nowhere",
                        "confirmed_state": {"state": {}, "confirmations": {}},
                        "host": HostProfile().to_json(),
                    },
                )
        return {
            "tools": tools,
            "prompts": prompts,
            "resources": resources,
            "research": research,
            "other": other,
            "unknown": unknown,
        }

    seen = anyio.run(session)
    said = (tmp_path / "stderr.log").read_text("utf-8")
    assert "rimthan-mcp: release other@0.1.0 " in said and "rimthan-mcp: release research-decision@1.3.0 " in said
    assert len(seen["tools"]) == 4
    assert "brief" in seen["prompts"] and len(seen["prompts"]) > 1
    assert {"other@0.1.0 manifest", "research-decision@1.3.0 manifest"} <= seen["resources"]
    assert seen["research"].release == "research-decision@1.3.0"
    other = seen["other"].structured_content
    assert not seen["other"].is_error and other["release"]["id"] == "other@0.1.0", other
    error = seen["unknown"].structured_content["error"]
    assert error["code"] == "workflow_not_found" and "other@0.1.0" in error["message"], error
    offered = {(a["id"], a["release"]) for a in error["details"]["available"]}
    assert offered == {("other", "other@0.1.0"), ("research-decision", "research-decision@1.3.0")}, error


def test_with_migrate_to_newest_a_run_moves_to_its_catalogues_newer_release_after_refresh(
    world: ServerWorld, tmp_path: Path
) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    world.publish("1.2.0", releases)
    args = _serve(world, releases, state, "--migrate-to-newest")
    with console_server(args) as server:
        assert "per catalogue, its newest verified release" in server.stderr()

        async def day() -> tuple[RunResult, dict[str, Any], RunResult]:
            async with http_client_for(server.url) as client:
                run = harness(client_caller(client), tmp_path / "p")
                started = await run.start("research", initial_version="1.2.0")
                world.publish("1.3.0", releases)
                seen = len(server.lines)
                server.process.send_signal(signal.SIGHUP)
                server.wait_for(r'"activated": \["research-decision@1.3.0"\]', after=seen)
                # the client learns the target from an ordinary continue, as with --migration-target
                offered = await client.call_tool(
                    "rimthan.continue_workflow",
                    {"checkpoint": started.wire["checkpoint"], "confirmed_state": run.state.projection()},
                )
                preview = await run.migrate(started, "research-decision@1.3.0", "1.3.0", confirm=False)
                assert offered.structured_content is not None
                return started, offered.structured_content, preview

        started, offered, preview = anyio.run(day)
    assert started.release == "research-decision@1.2.0"
    assert offered["migration"] is not None, offered
    assert (offered["migration"]["to"]["release"], offered["migration"]["confirmed"]) == (
        "research-decision@1.3.0",
        False,
    )
    assert preview.wire["migration"]["to"]["release"] == "research-decision@1.3.0", preview


def test_migrate_to_newest_and_migration_target_belong_to_different_modes(world: ServerWorld, tmp_path: Path) -> None:
    done = subprocess.run(
        [RIMTHAN_MCP, "serve", "--migration-target", str(world.built["1.3.0"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--migration-target needs --release" in done.stderr


# --------------------------------------------------------------------------- HTTP behind a load balancer

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ALL_INTERFACES = ("--transport", "http", "--host", "0.0.0.0", "--port", "0")


def _post(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(INITIALIZE).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_http_on_all_interfaces_answers_the_hosts_the_operator_names(world: ServerWorld, tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    world.publish("1.3.0", releases)
    allowed = ("--allowed-host", "mcp.internal.example", "--allowed-host", "LB.example:8443")  # names ignore case
    args = _serve(world, releases, tmp_path / "state", *allowed)
    with console_server(args, ALL_INTERFACES) as server:
        port = urlsplit(server.url).port
        local = f"http://127.0.0.1:{port}/mcp"
        statuses = {
            host: _post(local, {"Host": host})
            for host in (
                f"127.0.0.1:{port}",
                f"localhost:{port}",
                "mcp.internal.example",
                "mcp.internal.example:443",
                "lb.example:8443",
                "lb.example:9999",
                f"evil.example:{port}",
                "MCP.Internal.Example",
                f"LOCALHOST:{port}",
            )
        }
        origin_ok = _post(local, {"Host": "mcp.internal.example", "Origin": "https://MCP.internal.example"})
        origin_bad = _post(local, {"Host": "mcp.internal.example", "Origin": "https://evil.example"})

        async def tools() -> int:
            async with http_client_for(local) as client:
                return len((await client.list_tools()).tools)

        listed = anyio.run(tools)
        said = server.stderr()
    assert statuses == {
        f"127.0.0.1:{port}": 200,
        f"localhost:{port}": 200,
        "mcp.internal.example": 200,
        "mcp.internal.example:443": 200,
        "lb.example:8443": 200,
        "lb.example:9999": 421,
        f"evil.example:{port}": 421,
        "MCP.Internal.Example": 200,
        f"LOCALHOST:{port}": 200,
    }
    assert (origin_ok, origin_bad, listed) == (200, 403, 4)
    assert f"rimthan-mcp: warning: listening beyond loopback on 0.0.0.0:{port}" in said
    assert "accepting Host: 127.0.0.1:" in said and "mcp.internal.example:*" in said


def test_allowed_host_that_would_switch_the_protection_off_is_a_usage_mistake(tmp_path: Path) -> None:
    # str.isdigit takes Arabic-Indic digits: a port of "٨٠" would be allowed and never match a Host header
    for value in ("*", "http://mcp.example", "mcp.example/path", "mcp.example:\u0668\u0660"):
        done = subprocess.run(
            [RIMTHAN_MCP, "serve", "--transport", "http", "--allowed-host", value],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"error: usage: --allowed-host {value!r}: "), done.stderr


# --------------------------------------------------------------------------- shutdown and framing


def test_sigterm_drains_the_call_in_flight_then_exits_0(world: ServerWorld, tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    world.publish("1.3.0", releases)
    with console_server(_serve(world, releases, tmp_path / "state")) as server:
        parts = urlsplit(server.url)
        body = json.dumps(INITIALIZE).encode()
        head = (
            f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            sock.sendall(head + body[:10])  # a call in flight: its body is still arriving
            time.sleep(1.0)
            seen = len(server.lines)
            server.process.send_signal(signal.SIGTERM)
            server.wait_for("draining calls in flight", after=seen)
            sock.sendall(body[10:])
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        status = server.process.wait(timeout=30)
        server.wait_for("rimthan-mcp: stopped", after=seen)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b'"serverInfo"' in answer
    assert status == 0


def _raw_post(parts: Any, message: dict[str, Any]) -> tuple[bytes, bytes]:
    """A POST's head and body, as raw bytes."""
    body = json.dumps(message).encode()
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


def _open_session(parts: Any) -> str:
    """An initialized 2025-11-25 session's id."""
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        head = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        connection.request("POST", parts.path, json.dumps(INITIALIZE), head)
        response = connection.getresponse()
        response.read()
        sid = response.getheader("mcp-session-id")
        assert response.status == 200 and sid, response.status
        head |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        connection.request("POST", parts.path, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                           head)  # fmt: skip
        initialized = connection.getresponse()
        initialized.read()
        assert initialized.status == 202, initialized.status
        return sid
    finally:
        connection.close()


def test_sigterm_with_a_get_stream_open_and_a_body_never_finished_says_the_call_cut_off(
    world: ServerWorld, tmp_path: Path
) -> None:
    """With --http-sessions, a session's GET stream the client never closes is no call: the server ends it and
    exits 0. A call whose body never finishes is still in flight at the drain's deadline and is cancelled: the
    last line said "calls in flight were answered" all the same; now it says one call was cut off."""
    releases = tmp_path / "releases"
    world.publish("1.3.0", releases)
    with console_server(_serve(world, releases, tmp_path / "state", "--http-sessions")) as server:
        parts = urlsplit(server.url)
        address = (parts.hostname, parts.port)
        with (
            socket.create_connection(address, timeout=60) as stream,
            socket.create_connection(address, timeout=60) as call,
        ):
            sid = _open_session(parts)
            headers = f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            stream.sendall(f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: text/event-stream\r\n"
                           f"{headers}\r\n".encode())  # fmt: skip
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += stream.recv(65536) or b"\r\n\r\n"
            assert answer.startswith(b"HTTP/1.1 200"), answer  # the session's GET stream, open
            head, body = _raw_post(parts, {**INITIALIZE, "id": 2})
            call.sendall(head + body[:10])  # a call in flight: the rest of its body never comes
            seen = len(server.lines)
            server.process.send_signal(signal.SIGTERM)
            status = server.process.wait(timeout=60)  # the GET stream and the unfinished call still open
            while stream.recv(65536):  # the process is gone: its end of the GET stream is closed
                pass
        server.wait_for("rimthan-mcp: stopped", after=seen)
    assert status == 0
    stopped = [line for line in server.lines[seen:] if line.startswith("rimthan-mcp: stopped")]
    assert stopped == ["rimthan-mcp: stopped: 1 call(s) in flight still unanswered after 10 s were cancelled "
                       "(answered Connection closed, HTTP 503)\n"], server.stderr()  # fmt: skip


def test_invalid_utf8_and_non_json_lines_on_stdio_get_a_parse_error(world: ServerWorld, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [RIMTHAN_MCP, "serve", "--release", str(world.built["1.3.0"]), "--trust", str(world.trust)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**server_env(), "RIMTHAN_STATE_DIR": str(tmp_path / "state")},
    )
    assert process.stdin is not None and process.stdout is not None
    lines = [
        json.dumps(INITIALIZE).encode(),
        b"\xff\xfe\xfd not utf-8 at all",
        b'{"jsonrpc":"2.0","id":7,\xc3"method":"ping"}',
        b"not json",
        b'{"jsonrpc":"2.0","id":8,"method":"ping"}',
    ]
    try:
        process.stdin.write(b"\n".join(lines) + b"\n")
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in range(5)]
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for answer in answers:
        by_id.setdefault(answer.get("id"), []).append(answer)
    assert by_id[1][0]["result"]["serverInfo"]["name"] == "rimthan-workflow-mcp"
    assert [a["error"]["code"] for a in by_id[None]] == [-32700, -32700]
    assert "not valid UTF-8" in by_id[None][0]["error"]["message"]
    assert by_id[7][0]["error"]["code"] == -32700 and by_id[8][0]["result"] == {}
    assert process.returncode == 0
