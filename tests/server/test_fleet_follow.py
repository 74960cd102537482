"""``rimthan-mcp serve --releases-from oci://...``: the follower against a real registry.

The small fleet run is ``tests/load/run_fleet.py`` (``make fleet``) with 3
replicas and 4 clients; it asserts its own figures and prints ``RESULT PASS``,
including runs held on 1.2.0 until every replica activated 1.3.0 and then
finished on their pinned release (crossed the refresh).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.release import open_registry, verify_release
from rimthan_workflow_registry.release.oci import fetch_manifest, parse_reference
from rimthan_workflow_registry.release.trust import load_trust
from support.hostile_registry import (
    HostileRegistry,
    endless_pages,
    forward,
    send_json,
    send_raw,
    start_hostile,
)
from support.oci import push, push_corrupt, put_raw_manifest
from support.processes import HttpServer, http_server_process
from support.refusals import Refusal, refusal
from support.registry import LocalRegistry, require_registry
from support.releases import KeyPair
from support.servers import FLIPPED_FILE, flip_byte, server_env

REPO_ROOT = Path(__file__).resolve().parents[2]
RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"


def check(*args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Start ``serve`` just far enough to print its start-up lines (stdio, stdin closed: it exits)."""
    return subprocess.run(
        [str(RIMTHAN_MCP), "serve", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_small_fleet_follows_the_registry_under_load() -> None:
    require_registry()
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tests/load/run_fleet.py"), "--clients", "4", "--runs-per-client", "2",
         "--replicas", "3", "--deadline", "400"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "RESULT PASS" in proc.stdout
    assert "failed calls          0" in proc.stdout
    assert "0 lost" in proc.stdout
    assert "finished elsewhere    0 " in proc.stdout
    crossed = re.search(r"^crossed the refresh +(\d+) ", proc.stdout, re.MULTILINE)
    assert crossed is not None and int(crossed.group(1)) >= 1, proc.stdout[-4000:]
    assert "1.4.0 left on disk    0 directories, 0 staging directories" in proc.stdout


def test_serve_starts_from_the_registry_and_keeps_a_corrupt_publish_out(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, keypair: KeyPair
) -> None:
    ref = registry.ref("rimthan/follow")
    push(packaged_releases["1.2.0"], ref, trust)
    push_corrupt(packaged_releases["1.3.0"], ref, load_trust(trust), "catalogue/catalogue.toml")
    releases = tmp_path / "releases"
    proc = check("--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                 "--state-dir", tmp_path / "state")  # fmt: skip
    assert "following " + ref in proc.stderr, proc.stderr
    assert "research-decision@1.2.0" in proc.stderr and "[active]" in proc.stderr, proc.stderr
    assert '"publish refused"' in proc.stderr
    assert sorted(p.name for p in releases.iterdir()) == ["research-decision-1.2.0"]


def test_serve_refuses_a_bad_reference_in_one_line(tmp_path: Path, trust: Path) -> None:
    proc = check("--releases-from", "http://example/x", "--trust", trust, "--state-dir", tmp_path / "state")
    assert proc.returncode == 1
    said = refusal(proc.stderr)
    assert said.code == "oci_reference_invalid" and said.next.startswith("--releases-from follows a repository")
    assert "oci://HOST[:PORT]/REPOSITORY" in said.next and "[:TAG]" not in said.next, said  # no tag to follow


@pytest.mark.parametrize("suffix", [":1.2.0", "@sha256:" + "a" * 64])
def test_serve_refuses_a_reference_naming_one_release(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, suffix: str
) -> None:
    """It was followed as its whole repository, its tag ignored: the operator who meant to pin a version got the
    newest, and the start line said it followed the tag."""
    push(packaged_releases["1.2.0"], registry.ref("rimthan/pinned"), trust)
    reference = registry.ref("rimthan/pinned") + suffix
    proc = check("--releases-from", reference, "--plain-http", "--releases-dir", tmp_path / "releases",
                 "--trust", trust, "--state-dir", tmp_path / "state")  # fmt: skip
    assert proc.returncode == 1
    said = refusal(proc.stderr)
    assert said.code == "oci_reference_invalid" and said.error.startswith(f"error: oci_reference_invalid: {reference}")
    assert "names one release" in said.error and f"rimthan-pack pull {reference}" in said.next, said
    assert not (tmp_path / "releases").exists()


def test_an_unreachable_registry_is_logged_and_the_held_release_serves(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    proc = serve_holding_1_2_0("oci://127.0.0.1:9/rimthan/x", tmp_path, packaged_releases, trust)
    assert_held_release_serves(proc)


def test_an_unreachable_registry_and_nothing_held_refuses_with_the_registry_s_error(
    tmp_path: Path, trust: Path
) -> None:
    """A fresh replica whose registry cannot be reached: the refusal names the registry, not an empty directory.
    It came after a warning "registry unreachable; serving what is held", with nothing held and the process exiting
    (then that warning was held back from the log); now the warning says what it means: nothing held yet."""
    proc = check("--releases-from", "oci://127.0.0.1:9/rimthan/x", "--plain-http", "--releases-dir",
                 tmp_path / "releases", "--trust", trust, "--state-dir", tmp_path / "state", timeout=90)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    said = refusal(proc.stderr, allow_before=True)
    warned = [json.loads(line) for line in proc.stderr.splitlines()[:-2]]  # every line before the refusal: JSON
    nothing_held = "registry unreachable; nothing held to serve yet"
    assert [(w["level"], w["event"]) for w in warned] == [("warning", nothing_held)], proc.stderr
    assert warned[0]["error"]["code"] == "oci_registry_error" and warned[0]["next"].startswith("check the registry")
    assert (
        said.code == "oci_registry_error" and "nothing could be pulled from oci://127.0.0.1:9/rimthan/x (" in said.error
    )
    assert "no connection to the registry" in said.error and "holds no release to serve meanwhile" in said.error, said
    assert said.next.startswith("check the registry address in --releases-from"), said


def start_with_nothing_held(reference: str, tmp_path: Path, trust: Path) -> Refusal:
    """``check`` a follower of ``reference`` with an empty releases directory: it must refuse, in one line."""
    proc = check("--releases-from", reference, "--plain-http", "--releases-dir", tmp_path / "releases",
                 "--trust", trust, "--state-dir", tmp_path / "state", timeout=90)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    return refusal(proc.stderr, allow_before=True)


@pytest.mark.parametrize("answer", ["not found", "web page"])
def test_a_registry_that_answers_but_gives_nothing_is_not_said_to_be_unreachable(
    tmp_path: Path, registry: LocalRegistry, trust: Path, answer: str
) -> None:
    """A registry that answered (HTTP 404, a proxy's page) and nothing held: the refusal said "the registry could
    not be reached", which sent the operator to check a network that worked."""
    page = b"<html><body>502 Bad Gateway</body></html>"
    hostile = start_hostile(lambda handler, _: send_raw(handler, page, headers={"Content-Type": "text/html"}))
    try:
        reference = registry.ref("rimthan/never-pushed") if answer == "not found" else hostile.ref("rimthan/x")
        said = start_with_nothing_held(reference, tmp_path, trust)
    finally:
        hostile.stop()
    assert said.code == "oci_registry_error" and "could not be reached" not in said.error, said
    assert f"nothing could be pulled from {reference} (listing tags: the registry" in said.error, said
    assert ("HTTP 404 NAME_UNKNOWN" if answer == "not found" else "answer is not JSON") in said.error, said


def test_a_repository_with_no_version_tag_and_nothing_held_says_to_push_a_release_to_it(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """It refused with the generic release_not_found "build a release into it with rimthan-pack build ...",
    naming the empty releases directory, not the repository that holds no release."""
    ref = registry.ref("rimthan/untagged")
    push(packaged_releases["1.2.0"], ref + ":stable", trust)
    said = start_with_nothing_held(ref, tmp_path, trust)
    assert said.code == "release_not_found", said
    assert said.error.startswith(f"error: release_not_found: {ref}: {ref} has no version tag to pull"), said
    assert f"push a release to it (`rimthan-pack push RELEASE {ref}:VERSION" in said.next, said
    assert "rimthan-pack build" not in said.next, said


def test_a_repository_whose_every_version_tag_is_refused_and_nothing_held_says_why(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """Only refused publishes and nothing held: the generic release_not_found named neither the repository nor
    why its tags were kept out (that was only in a log line above)."""
    ref = registry.ref("rimthan/all-refused")
    push_corrupt(packaged_releases["1.3.0"], ref, load_trust(trust), "catalogue/catalogue.toml")
    said = start_with_nothing_held(ref, tmp_path, trust)
    assert said.code == "release_not_found", said
    assert f"every version tag of {ref} was refused (file_digest_mismatch: {ref}:1.3.0/catalogue/catalogue.toml: " in (
        said.error
    ), said
    assert said.next.startswith(f"push a release to it (`rimthan-pack push RELEASE {ref}:VERSION"), said
    assert "that verifies under --trust" in said.next, said


def serve_holding_1_2_0(
    reference: str, tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> subprocess.CompletedProcess[str]:
    """``check`` a follower of ``reference`` whose releases directory already holds 1.2.0."""
    releases = tmp_path / "releases"
    releases.mkdir()
    shutil.copytree(packaged_releases["1.2.0"], releases / "research-decision-1.2.0")
    return check("--releases-from", reference, "--plain-http", "--releases-dir", releases,
                 "--trust", trust, "--state-dir", tmp_path / "state", timeout=90)  # fmt: skip


def assert_held_release_serves(proc: subprocess.CompletedProcess[str]) -> None:
    assert '"registry unreachable; serving what is held"' in proc.stderr, proc.stderr
    assert "research-decision@1.2.0" in proc.stderr and "[active]" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_registry_whose_tag_list_never_ends_is_logged_and_the_held_release_serves(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """Every tag page linked to a next one: the follower's first sync never ended, so serve never started."""
    hostile = start_hostile(lambda handler, _: endless_pages(handler))
    try:
        proc = serve_holding_1_2_0(hostile.ref("rimthan/x"), tmp_path, packaged_releases, trust)
    finally:
        hostile.stop()
    assert "oci_registry_error" in proc.stderr and "runs past 1000 pages" in proc.stderr, proc.stderr
    assert_held_release_serves(proc)


def test_one_tag_whose_manifest_is_refused_does_not_hold_back_the_others(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A sync stopped at the first tag whose manifest was refused (here one with a key written twice, between
    1.2.0 and 1.3.0): no tag after it was pulled, so one broken publish held back every newer release."""
    ref = registry.ref("rimthan/one-bad-tag")
    push(packaged_releases["1.2.0"], ref, trust)
    parsed = parse_reference(ref + ":1.2.0")
    _, manifest = fetch_manifest(open_registry(parsed, plain_http=True), parsed)
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    put_raw_manifest(ref + ":1.2.5", b'{"artifactType":"application/vnd.example.other",' + data[1:])
    push(packaged_releases["1.3.0"], ref, trust)
    releases = tmp_path / "releases"
    proc = check("--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                 "--state-dir", tmp_path / "state")  # fmt: skip
    assert "research-decision@1.3.0" in proc.stderr and "[active]" in proc.stderr, proc.stderr
    assert sorted(p.name for p in releases.iterdir()) == ["research-decision-1.2.0", "research-decision-1.3.0"]
    assert '"publish refused"' in proc.stderr and ":1.2.5" in proc.stderr, proc.stderr


def test_a_registry_s_long_text_reaches_the_follower_s_log_cut(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The refusal the follower logs quotes the registry's ``Link``: on the old code a 60 KiB log line."""
    link = "<http://elsewhere.example/" + "e" * 60_000 + '?last=1>; rel="next"'
    hostile = start_hostile(lambda handler, _: send_json(handler, {"tags": ["1.2.0"]}, headers={"Link": link}))
    try:
        proc = serve_holding_1_2_0(hostile.ref("rimthan/x"), tmp_path, packaged_releases, trust)
    finally:
        hostile.stop()
    assert max(map(len, proc.stderr.splitlines())) < 4096
    assert "next tag page is on another host" in proc.stderr and "chars, cut]" in proc.stderr, proc.stderr[:3000]
    assert_held_release_serves(proc)


def test_a_follower_replaces_a_damaged_copy_with_a_verified_pull(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A release directory edited on disk no longer verified: the follower's pull of its tag was refused as a
    bad publish, and a restart served nothing. It is replaced in one rename, with one line saying why."""
    ref = registry.ref("rimthan/repair")
    push(packaged_releases["1.2.0"], ref, trust)
    releases = tmp_path / "releases"
    copy = releases / "research-decision-1.2.0"
    shutil.copytree(packaged_releases["1.2.0"], copy)
    flip_byte(copy)
    proc = check("--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                 "--state-dir", tmp_path / "state")  # fmt: skip
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    replaced = [r for r in records if r["event"] == "damaged copy replaced"]
    assert len(replaced) == 1 and replaced[0]["path"] == str(copy), proc.stderr
    assert replaced[0]["why"].startswith(f"file_digest_mismatch: {FLIPPED_FILE}: "), replaced  # which file changed
    assert "research-decision@1.2.0" in proc.stderr and "[active]" in proc.stderr, proc.stderr
    assert '"publish refused"' not in proc.stderr
    verify_release(copy, load_trust(trust))
    assert sorted(p.name for p in releases.iterdir()) == [copy.name]


def test_a_registry_outage_is_one_warning_then_one_info_line_when_it_answers_again(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A registry down for many refreshes logged one warning per refresh: a long outage flooded the log. Now the
    warning (code and next step) is said once, the outage is quiet, and its end is one info line."""
    ref = registry.ref("rimthan/outage")
    push(packaged_releases["1.2.0"], ref, trust)
    argv = [RIMTHAN_MCP, "serve", "--releases-from", ref, "--plain-http", "--releases-dir", tmp_path / "releases",
            "--trust", trust, "--state-dir", tmp_path / "state", "--transport", "http", "--port", "0"]  # fmt: skip
    with http_server_process([str(a) for a in argv], env=server_env()) as server:
        registry.stop()
        for _ in range(4):  # four refreshes while it is down
            refresh(server)
        registry.restart()
        refresh(server)
        refresh(server)  # and one after it is back
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    down = [r for r in records if r["event"] == "registry unreachable; serving what is held"]
    assert len(down) == 1 and down[0]["level"] == "warning", down
    assert down[0]["error"]["code"] == "oci_registry_error", down
    assert "no connection to the registry (Connection refused)" in down[0]["error"]["message"], down
    assert down[0]["next"].startswith("check the registry address in --releases-from"), down
    back = [r for r in records if r["event"] == "registry reachable again"]
    assert len(back) == 1 and back[0]["level"] == "info" and back[0]["registry"] == ref, back
    assert records.index(down[0]) < records.index(back[0])


def refresh(server: HttpServer) -> None:
    """SIGHUP, and wait for its ``refresh done`` line."""
    server.refresh()


def test_a_registry_answering_a_web_page_is_said_to_answer_no_json_and_the_held_release_serves(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A proxy's HTML page where the tag list should be: the log quoted the JSON decoder ("Expecting value: line 1
    column 1 (char 0)"), which names neither the registry nor what was wrong with its answer."""
    page = b"<html><body>502 Bad Gateway</body></html>"
    hostile = start_hostile(lambda handler, _: send_raw(handler, page, headers={"Content-Type": "text/html"}))
    try:
        proc = serve_holding_1_2_0(hostile.ref("rimthan/x"), tmp_path, packaged_releases, trust)
    finally:
        hostile.stop()
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    down = next(r for r in records if r["event"] == "registry unreachable; serving what is held")
    assert down["error"]["message"] == "listing tags: the registry's answer is not JSON", down
    assert_held_release_serves(proc)


def test_a_follower_removes_the_downloads_a_killed_pull_left_and_spares_a_live_one(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A replica killed mid-pull (SIGKILL, OOM, a drained node) leaves its ``.pull-*`` download directory: nothing
    ever removed it, so every such restart left another one to fill the releases directory's disk."""
    ref = registry.ref("rimthan/killed")
    push(packaged_releases["1.2.0"], ref, trust)
    releases = tmp_path / "releases"
    shutil.copytree(packaged_releases["1.2.0"], releases / "research-decision-1.2.0")
    killed, live = releases / ".pull-k1ll3d", releases / ".pull-l1ve"
    aside = releases / ".damaged-research-decision-1.2.0-x"  # a replacement killed between its two renames
    for left in (killed, aside, live):
        shutil.copytree(packaged_releases["1.2.0"] / "catalogue", left / "catalogue")
    long_ago = time.time() - 2 * 86400
    for left in (killed, aside):
        for path in (left, *left.rglob("*")):
            os.utime(path, (long_ago, long_ago), follow_symlinks=False)
    proc = check("--releases-from", ref, "--plain-http", "--releases-dir", releases, "--trust", trust,
                 "--state-dir", tmp_path / "state")  # fmt: skip
    assert "research-decision@1.2.0" in proc.stderr and "[active]" in proc.stderr, proc.stderr
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    removed = sorted(r["path"] for r in records if r["event"] == "stale download removed")
    assert removed == sorted([str(killed), str(aside)]), proc.stderr
    assert sorted(p.name for p in releases.iterdir()) == [live.name, "research-decision-1.2.0"]


def test_a_repository_never_pushed_to_is_named_as_such_and_the_held_release_serves(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A misspelt repository (or one before its first push): oras logged the registry's body at error level and
    the refusal said "Issue with http://...: Not Found", naming neither the repository nor what to check."""
    proc = serve_holding_1_2_0(registry.ref("rimthan/never-pushed"), tmp_path, packaged_releases, trust)
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert [r["logger"] for r in records if r["level"] == "error"] == [], proc.stderr
    down = next(r for r in records if r["event"] == "registry unreachable; serving what is held")
    assert down["error"]["message"] == (
        "listing tags: the registry answered HTTP 404 NAME_UNKNOWN; nothing was pushed to it yet, or its name is "
        "misspelt"
    ), down
    assert_held_release_serves(proc)


def test_a_local_file_error_escaping_the_sync_is_one_warning_then_one_info_line_when_it_is_over(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """An ``OSError`` no pull step said as ``io_error`` (here the Docker config's name, too long to stat) was a
    warning at every refresh, as a registry outage and a failing pull were before they were said once."""
    ref = registry.ref("rimthan/local-error")
    push(packaged_releases["1.2.0"], ref, trust)
    docker = tmp_path / "docker"
    docker.mkdir()
    (docker / "config.json").symlink_to("c" * 300)  # stat: ENAMETOOLONG, which Path.is_file does not swallow
    releases = tmp_path / "releases"
    releases.mkdir()
    shutil.copytree(packaged_releases["1.2.0"], releases / "research-decision-1.2.0")
    argv = [RIMTHAN_MCP, "serve", "--releases-from", ref, "--plain-http", "--releases-dir", releases,
            "--trust", trust, "--state-dir", tmp_path / "state", "--transport", "http", "--port", "0",
            "--log-level", "debug"]  # fmt: skip
    with http_server_process([str(a) for a in argv], env={**server_env(), "DOCKER_CONFIG": str(docker)}) as server:
        for _ in range(3):
            refresh(server)
        (docker / "config.json").unlink()
        refresh(server)
        refresh(server)
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
    events = [r["event"] for r in records if "on a local file" in r["event"]]
    assert events == [
        "sync failed on a local file; serving what is held",
        *["sync still failing on a local file"] * 3,
        "sync no longer failing on a local file",
    ], events
    failed = next(r for r in records if r["event"] == "sync failed on a local file; serving what is held")
    assert failed["level"] == "warning" and "File name too long" in failed["exc"] and failed["next"], failed
    over = next(r for r in records if r["event"] == "sync no longer failing on a local file")
    assert over["level"] == "info" and over["was"] == "ENAMETOOLONG", over


def test_a_registry_refusing_the_follower_s_credentials_is_said_as_such_in_the_log_refresh_and_healthz(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A follower whose credentials stopped working logged "registry unreachable" (with ``oci_unauthorized``) and
    its SIGHUP ``refresh done`` said ``unchanged``, nothing rejected; ``/healthz`` said nothing. Now the refusal is
    its own warning, said once, with where credentials come from; every refresh while it lasts says ``sync_failed``;
    ``/healthz`` says it (code, since when) and still answers 200; its end is one info line."""
    ref = registry.ref("rimthan/credentials")
    push(packaged_releases["1.2.0"], ref, trust)
    refusing = threading.Event()
    proxy = start_hostile(lambda handler, proxy: _token_refused_while(refusing, handler, proxy, registry.host))
    env = {**server_env(), "RIMTHAN_REGISTRY_USERNAME": "follower", "RIMTHAN_REGISTRY_PASSWORD": "revoked"}
    argv = [RIMTHAN_MCP, "serve", "--releases-from", proxy.ref("rimthan/credentials"), "--plain-http",
            "--releases-dir", tmp_path / "releases", "--trust", trust, "--state-dir", tmp_path / "state",
            "--transport", "http", "--port", "0"]  # fmt: skip
    try:
        with http_server_process([str(a) for a in argv], env=env) as server:
            health = server.url.replace("/mcp", "/healthz")
            before = _health(health)
            refusing.set()
            for _ in range(3):
                refresh(server)
            during = _health(health)
            refusing.clear()
            refresh(server)
            after = _health(health)
            records = [json.loads(line) for line in server.lines if line.startswith("{")]
    finally:
        proxy.stop()
    said = [r for r in records if "credentials" in r["event"]]
    assert [r["event"] for r in said] == [
        "registry refused our credentials; serving what is held",
        "registry accepts our credentials again",
    ], said
    refused, back = said
    assert refused["level"] == "warning" and refused["error"]["code"] == "oci_unauthorized", refused
    assert "token service refused the credentials" in refused["error"]["message"], refused
    assert "RIMTHAN_REGISTRY_USERNAME" in refused["next"] and "config.json" in refused["next"], refused
    assert back["level"] == "info" and back["was"] == "oci_unauthorized", back
    assert not [r for r in records if "unreachable" in r["event"]], records
    done = [r for r in records if r["event"] == "refresh done"]
    failing, fine = done[-4:-1], done[-1]
    assert all(r["level"] == "warning" and r["sync_failed"]["code"] == "oci_unauthorized" for r in failing), failing
    assert len({r["sync_failed"]["since"] for r in failing}) == 1, failing  # since the first failed sync
    assert "sync_failed" not in fine and fine["level"] == "info", fine
    assert before == {"status": "serving", "active": ["research-decision@1.2.0"], "sync_failed": None}, before
    assert during["active"] == ["research-decision@1.2.0"], during
    assert during["sync_failed"] == failing[0]["sync_failed"], during
    assert after["sync_failed"] is None, after


def _token_refused_while(refusing: threading.Event, handler: Any, proxy: HostileRegistry, upstream: str) -> None:
    """The registry at ``upstream`` while ``refusing`` is clear; else one whose token service refuses every login."""
    if not refusing.is_set():
        forward(handler, proxy, upstream)
    elif handler.path.startswith("/token"):
        send_json(handler, {"errors": [{"code": "UNAUTHORIZED"}]}, status=401)
    else:
        challenge = f'Bearer realm="http://{proxy.host}/token",service="x",scope="repository:rimthan/credentials:pull"'
        send_json(handler, {}, status=401, headers={"WWW-Authenticate": challenge})


def _health(url: str) -> Any:
    """``GET /healthz``: its JSON answer (a status other than 200 fails the test)."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return json.loads(answer.read())
