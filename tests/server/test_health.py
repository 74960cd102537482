"""``GET /healthz`` for a load balancer, against the installed ``rimthan-mcp serve --transport http``.

A balancer's health check asks with ``GET``: the server answered every path but ``POST /mcp`` with 405, so a
replica could not be told healthy (nor one serving from one that is not) without speaking MCP. A replica listens
only once it holds a verified release, so the check says it serves and which release, as a refresh changes it.
"""

from __future__ import annotations

import http.server
import json
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.hostile_registry import BOUNDED_WAIT, HostileRegistry, forward
from support.oci import push
from support.processes import http_server_process
from support.registry import LocalRegistry
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, server_env


def _get(url: str, host: str | None = None, method: str = "GET") -> tuple[int, str, str]:
    request = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("content-type", ""), answer.read().decode("utf-8")
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("content-type", ""), refused.read().decode("utf-8")


def test_healthz_says_a_replica_serves_and_which_release_and_keeps_the_host_check(tmp_path: Path) -> None:
    signer = make_keypair(tmp_path / "keys", "ops")
    trust, releases = trust_dir(tmp_path / "trust", signer), tmp_path / "releases"
    build_release(packaged_source("1.2.0"), releases, [signer])
    newer = build_release(packaged_source("1.3.0"), tmp_path / "later", [signer])
    args = ["serve", "--releases-dir", str(releases), "--trust", str(trust), "--state-dir", str(tmp_path / "state")]
    with http_server_process([RIMTHAN_MCP, *args, "--transport", "http", "--port", "0"], env=server_env()) as server:
        health = server.url.replace("/mcp", "/healthz")
        first = _get(health)
        head = _get(health, method="HEAD")
        foreign = _get(health, host="attacker.example")
        shutil.copytree(newer, releases / newer.name)
        seen = len(server.lines)
        server.process.send_signal(signal.SIGHUP)
        server.wait_for('"refresh done"', after=seen)
        after = _get(health)
    assert first[:2] == (200, "application/json"), first
    assert json.loads(first[2]) == {"status": "serving", "active": ["research-decision@1.2.0"]}
    assert head[0] == 200 and head[2] == "", head
    assert foreign[0] == 421 and "research-decision" not in foreign[2], foreign
    assert json.loads(after[2])["active"] == ["research-decision@1.3.0"], after


def _until_status(url: str, status: int) -> tuple[int, str, str]:
    """``GET url`` until it answers ``status`` (a sync's age passing ``--stale-after``), failing after 60 s."""
    deadline = time.monotonic() + 60
    while (answer := _get(url))[0] != status and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer[0] == status, answer
    return answer


def _pushed_and_followed(
    ref: str, packaged_releases: dict[str, Path], trust: Path, tmp_path: Path, stale_after: str
) -> list[str]:
    """Push 1.2.0 to ``ref``; the argv of a follower of it over HTTP with ``--stale-after``."""
    push(packaged_releases["1.2.0"], ref, trust)
    argv = [RIMTHAN_MCP, "serve", "--releases-from", ref, "--plain-http", "--releases-dir", tmp_path / "releases",
            "--trust", trust, "--state-dir", tmp_path / "state", "--transport", "http", "--port", "0",
            "--stale-after", stale_after]  # fmt: skip
    return [str(a) for a in argv]


def _turned_stale_then_fresh(records: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The health lines of a server's log: one warning as it turned stale, one info line as it turned fresh."""
    changes = [r for r in records if r["logger"] == "rimthan.mcp.health"]
    assert [(r["level"], r["event"]) for r in changes] == [
        ("warning", "stale; /healthz answers 503"),
        ("info", "fresh again; /healthz answers 200"),
    ], changes
    return changes[0], changes[1]


def test_a_follower_that_lost_its_registry_is_stale_after_stale_after_and_serving_once_it_syncs_again(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """``/healthz`` said 200 for ever on a follower whose registry was gone: a balancer kept sending calls to a
    replica that could no longer take a publish. With ``--stale-after`` it answers 503 with the failure (code, since
    when) once its last good sync is that long past, and 200 again at the first sync that reaches the registry; each
    change said in one log line (the probes in between say nothing)."""
    ref = registry.ref("rimthan/stale")
    with http_server_process(
        _pushed_and_followed(ref, packaged_releases, trust, tmp_path, "1"), env=server_env()
    ) as server:
        health = server.url.replace("/mcp", "/healthz")
        synced = json.loads(_get(health)[2])
        registry.stop()
        server.refresh()
        stale = _until_status(health, 503)
        head = _get(health, method="HEAD")
        registry.restart()
        server.refresh()
        back = _get(health)
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    started = "health: GET /healthz answers 503 once syncs fail or hang and the last good one is over 1s old"
    assert started in server.stderr()
    assert synced == {"status": "serving", "active": ["research-decision@1.2.0"], "sync_failed": None}, synced
    said = json.loads(stale[2])
    assert said["status"] == "stale" and said["active"] == ["research-decision@1.2.0"], said
    assert said["sync_failed"]["code"] == "oci_registry_error" and said["sync_failed"]["since"], said
    assert said["stale"]["after"] == 1 and said["stale"]["last_synced"] <= said["sync_failed"]["since"], said
    assert head[0] == 503 and head[2] == "", head
    assert back[0] == 200 and json.loads(back[2])["status"] == "serving", back
    assert json.loads(back[2])["sync_failed"] is None, back
    changes = [(r["level"], r["event"], r.get("code")) for r in records if r["logger"] == "rimthan.mcp.health"]
    assert changes == [
        ("warning", "stale; /healthz answers 503", "oci_registry_error"),
        ("info", "fresh again; /healthz answers 200", None),
    ], changes


def test_a_follower_restarted_while_its_registry_is_down_still_says_when_it_last_synced(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A replica restarted during a registry outage said ``last_synced: null`` and counted staleness from its new
    start, so the outage looked as young as the process. The state directory now keeps the last good sync."""
    argv = _pushed_and_followed(registry.ref("rimthan/outage"), packaged_releases, trust, tmp_path, "3600")
    with http_server_process(argv, env=server_env()):
        pass  # its start pulled 1.2.0: a good sync
    synced_before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    registry.stop()
    argv[argv.index("3600")] = "1"
    with http_server_process(argv, env=server_env()) as server:
        said = json.loads(_until_status(server.url.replace("/mcp", "/healthz"), 503)[2])
    assert said["active"] == ["research-decision@1.2.0"], said
    assert said["sync_failed"]["code"] == "oci_registry_error", said
    last = said["stale"]["last_synced"]
    assert last is not None and last <= synced_before <= said["sync_failed"]["since"], said  # the first process's


def test_a_follower_whose_registry_hangs_is_stale_after_stale_after_and_says_each_change_once(
    tmp_path: Path,
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
    packaged_releases: dict[str, Path],
    trust: Path,
) -> None:
    """A registry that takes the connection and never answers held the sync (and ``/healthz`` at 200) until the
    request's read timeout, or the sync's 600 s deadline for one that drips: ``--stale-after`` counted only from a
    sync that had failed. Now a sync under way counts from its own start, so the answer turns 503 while the sync
    still hangs (nothing has failed yet). Turning 503 and turning 200 again were not logged at all: now one warning
    (code, since when, the registry) and one info line, however many probes see the same state."""
    hangs, released = threading.Event(), threading.Event()

    def answer(handler: http.server.BaseHTTPRequestHandler, front: HostileRegistry) -> None:
        if hangs.is_set():  # took the connection and the request; answers only once released
            released.wait(BOUNDED_WAIT)
        forward(handler, front, registry.host)

    front = hostile(answer)
    push(packaged_releases["1.2.0"], registry.ref("rimthan/hangs"), trust)
    argv = [RIMTHAN_MCP, "serve", "--releases-from", front.ref("rimthan/hangs"), "--plain-http",
            "--releases-dir", tmp_path / "releases", "--trust", trust, "--state-dir", tmp_path / "state",
            "--transport", "http", "--port", "0", "--stale-after", "1"]  # fmt: skip
    with http_server_process([str(a) for a in argv], env=server_env()) as server:
        health = server.url.replace("/mcp", "/healthz")
        first = _get(health)
        hangs.set()
        server.process.send_signal(signal.SIGHUP)
        stale = _until_status(health, 503)
        again = [_get(health)[0] for _ in range(3)]
        seen = len(server.lines)
        released.set()
        server.wait_for('"refresh done"', after=seen)
        back = [_get(health) for _ in range(3)]
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    assert first[0] == 200, first
    said = json.loads(stale[2])
    assert said["status"] == "stale" and said["sync_failed"] is None, said  # the sync still hangs: nothing failed
    assert said["stale"]["after"] == 1 and said["stale"]["sync_under_way_since"], said
    assert again == [503] * 3, again
    assert [answer[0] for answer in back] == [200] * 3, back
    went, came = _turned_stale_then_fresh(records)
    assert went["registry"] == came["registry"] == front.ref("rimthan/hangs"), (went, came)
    assert went["code"] == "oci_registry_error" and went["since"] == said["stale"]["sync_under_way_since"], went
    assert came["stale_since"] >= went["since"] and came["last_synced"] >= came["stale_since"], came


def test_a_follower_s_turns_stale_and_fresh_are_logged_when_they_happen_with_no_probe_at_all(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The warning and the info line came only as a probe saw the change: a replica nothing probed (a balancer
    stopped, a check misconfigured) said nothing while it turned stale and fresh again. Now each change is logged
    when it happens (a timer at the moment the last good sync turns SECONDS old, a judgement as each sync begins
    and ends), once, with no ``/healthz`` request at all."""
    ref = registry.ref("rimthan/unprobed")
    # SECONDS long enough that the failed sync usually ends before them: the warning then comes from the timer alone
    with http_server_process(
        _pushed_and_followed(ref, packaged_releases, trust, tmp_path, "4"), env=server_env()
    ) as server:
        registry.stop()
        server.refresh()  # the sync fails; nothing asks /healthz
        server.wait_for('"stale; /healthz answers 503"')
        registry.restart()
        server.refresh()
        server.wait_for('"fresh again; /healthz answers 200"')
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    went, came = _turned_stale_then_fresh(records)
    assert went["registry"] == came["registry"] == ref and went["code"] == "oci_registry_error", went
    assert went["after"] == 4 and went["last_synced"] <= went["since"], went
    assert came["stale_since"] >= went["since"] and came["last_synced"] >= came["stale_since"], came


def test_a_follower_whose_registry_answers_stays_fresh_whatever_the_sync_rhythm(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A sync under way counted from the last good sync: with ``--refresh-interval`` above ``--stale-after`` (or a
    SIGHUP more than SECONDS after the last sync) every sync of a registry that answers turned ``/healthz`` 503 while
    it ran and logged a stale warning and a fresh line, a pair per sync. Now a sync under way counts from its own
    start: a registry that answers keeps the replica 200, and nothing is logged."""
    ref = registry.ref("rimthan/rhythm")
    argv = [*_pushed_and_followed(ref, packaged_releases, trust, tmp_path, "0.5"),
            "--refresh-interval", "1", "--log-level", "debug"]  # fmt: skip
    with http_server_process(argv, env=server_env()) as server:
        health = server.url.replace("/mcp", "/healthz")
        for _ in range(3):  # each periodic sync begins well over SECONDS after the last good one
            server.wait_for('"trigger": "interval"', after=len(server.lines))
        time.sleep(0.7)
        server.refresh()  # a SIGHUP, too, over SECONDS after the last good sync
        answers = [_get(health)[0] for _ in range(3)]
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    assert answers == [200] * 3, answers
    assert [r["event"] for r in records if r["logger"] == "rimthan.mcp.health"] == [], records
