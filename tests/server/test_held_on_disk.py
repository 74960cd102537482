"""The older release directories a long-running server remembers having tried: only those of the latest scan.

Every replaced directory (a follower's exchange, an operator's copy) used to add a remembered entry never removed.
Real keys, real signed release directories, the releases-directory scan ``serve`` uses.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rimthan_workflow_mcp.held_on_disk import OlderReleases
from rimthan_workflow_mcp.loading import ReleaseLoader
from rimthan_workflow_mcp.release_scan import scan_releases
from rimthan_workflow_mcp.trust_refresh import Distrusted
from rimthan_workflow_registry.release import load_trust
from rimthan_workflow_registry.run import CheckpointKeyring
from support.releases import build_release, make_keypair, packaged_source, trust_dir

REPLACEMENTS = 5


def _replace(directory: Path) -> None:
    """Put a fresh copy in place of ``directory`` (a new directory: copied beside it first, then renamed)."""
    fresh = directory.with_name(f".{directory.name}.new")
    shutil.copytree(directory, fresh)
    shutil.rmtree(directory)
    fresh.rename(directory)


def test_only_directories_in_the_latest_scan_are_remembered_each_once(tmp_path: Path) -> None:
    signer = make_keypair(tmp_path / "keys", "ops")
    releases = tmp_path / "releases"
    newest = build_release(packaged_source("1.3.0"), releases, [signer])
    older = build_release(packaged_source("1.2.0"), releases, [signer])
    loader = ReleaseLoader(load_trust(trust_dir(tmp_path / "trust", signer)), CheckpointKeyring.generate())
    active = loader.load(newest)
    tried = OlderReleases(Distrusted())
    held = tried.held_with(scan_releases(releases), {active.catalogue: active}, {}, loader, announce=False)
    assert [loaded.release.release_id for loaded in held.values()] == ["research-decision@1.2.0"]
    for _ in range(REPLACEMENTS):
        _replace(older)
        again = tried.held_with(scan_releases(releases), {active.catalogue: active}, {}, loader, announce=False)
        assert set(again) == set(held)  # each replacement is tried again, and verifies
        assert tried.remembered == 1
    shutil.rmtree(older)
    tried.held_with(scan_releases(releases), {active.catalogue: active}, {}, loader, announce=False)
    assert tried.remembered == 0
