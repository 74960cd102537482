"""Withdrawing a release from a fleet: a tag deleted in the registry behind the followers' backs (real registry).

Found: a follower whose served release's tag was deleted in the registry kept
serving it and said nothing, so the operator who deleted the tag to withdraw
the release saw no sign that it was still served (nor that a replica started
afresh would not get it). It now says so once. Kept so, and shown here: the
follower keeps serving the release (a registry that drops a tag never rolls a
replica back), a restart without its copy is refused by the activation floor in
one clean refusal, and only ``--lower-floor`` rolls it back (docs/fleet.md).
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

from support.oci import push
from support.refusals import refusal
from support.registry import LocalRegistry
from test_serve_full_disk import _healthz, _mcp, _size, serving, wait_for

GONE = "tag gone from the registry; its release is kept"


def _delete(registry: LocalRegistry, repository: str, digest: str) -> None:
    """Delete a manifest (and so its tag) through the registry's API, as an operator withdrawing a release would."""
    url = f"http://{registry.host}/v2/{repository}/manifests/{digest}"
    with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30) as answer:
        assert answer.status == 202


def _published(
    tmp_path: Path, ref: str, packaged_releases: dict[str, Path], trust: Path
) -> tuple[str, tuple[str | Path, ...]]:
    """1.2.0 and 1.3.0 pushed to ``ref``: 1.3.0's manifest digest, and the options that follow ``ref``."""
    push(packaged_releases["1.2.0"], ref + ":1.2.0", trust)
    bad = push(packaged_releases["1.3.0"], ref + ":1.3.0", trust)
    follow = ("--releases-from", ref, "--plain-http", "--releases-dir", tmp_path / "releases", "--trust", trust,
              "--state-dir", tmp_path / "state")  # fmt: skip
    return bad, follow


def test_a_tag_deleted_in_the_registry_is_warned_of_once_and_its_release_kept_until_the_floor_is_lowered(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref = registry.ref("rimthan/withdraw")
    bad, follow = _published(tmp_path, ref, packaged_releases, trust)
    releases = tmp_path / "releases"
    log = tmp_path / "serve.log"
    with serving(log, *follow, "--log-level", "debug") as proc:  # each periodic "refresh done" too
        assert _healthz(log)["active"] == ["research-decision@1.3.0"]
        _delete(registry, "rimthan/withdraw", bad)
        warned = json.loads(wait_for(log, GONE, proc))
        mark = _size(log)
        for _ in range(3):  # three more refreshes: still one warning, still serving what it holds
            wait_for(log, '"refresh done"', proc, mark)
            mark = _size(log)
        assert _healthz(log) == {"status": "serving", "active": ["research-decision@1.3.0"], "sync_failed": None}
    assert log.read_text("utf-8").count(GONE) == 1
    assert warned["level"] == "warning" and warned["reference"] == ref + ":1.3.0", warned
    assert "publish a fixed newer version" in warned["next"] and "--lower-floor" in warned["next"], warned
    shutil.rmtree(releases / "research-decision-1.3.0")  # the operator removes the copy too, and restarts
    again = _mcp("serve", "--transport", "http", "--port", "0", *follow)
    assert again.returncode == 1, again.stderr
    said = refusal(again.stderr, allow_before=True)
    assert said.error.startswith(f"error: rollback_refused: {releases}: no release of research-decision"), said
    assert "below the activation floor 1.3.0" in said.error and "--lower-floor" in said.next, said
    log = tmp_path / "lowered.log"
    with serving(log, *follow, "--lower-floor"):
        assert _healthz(log)["active"] == ["research-decision@1.2.0"]
    lowered = [json.loads(line) for line in log.read_text("utf-8").splitlines() if "activation floor lowered" in line]
    assert [line["to"].split(" ")[0] for line in lowered] == ["1.2.0"], lowered


def test_a_tag_deleted_while_the_follower_was_down_is_warned_of_once_at_its_restart(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A running follower warned of a tag deleted under it; one restarted after the deletion served the copy it
    held and said nothing, so a withdrawal during a rolling restart (or an outage) went unnoticed there. The
    restarted follower now says it the same way at its first sync, once per tag, and still serves the copy."""
    ref = registry.ref("rimthan/withdrawn-while-down")
    bad, follow = _published(tmp_path, ref, packaged_releases, trust)
    releases = tmp_path / "releases"
    with serving(tmp_path / "before.log", *follow):  # it pulled both tags before it listened
        assert _healthz(tmp_path / "before.log")["active"] == ["research-decision@1.3.0"]
    _delete(registry, "rimthan/withdrawn-while-down", bad)  # while the replica is down
    log = tmp_path / "restarted.log"
    with serving(log, *follow, "--log-level", "debug") as proc:
        mark = _size(log)
        for _ in range(3):  # three refreshes after the start: still one warning
            wait_for(log, '"refresh done"', proc, mark)
            mark = _size(log)
        assert _healthz(log) == {"status": "serving", "active": ["research-decision@1.3.0"], "sync_failed": None}
    warned = [json.loads(line) for line in log.read_text("utf-8").splitlines() if GONE in line]
    assert [(w["level"], w["reference"]) for w in warned] == [("warning", ref + ":1.3.0")], warned
    assert warned[0]["path"] == str(releases / "research-decision-1.3.0"), warned
    assert "publish a fixed newer version" in warned[0]["next"], warned
