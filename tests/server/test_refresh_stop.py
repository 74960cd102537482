"""A stopping server abandons the refresh's verification of what a follower's sync brought in.

Found: a follower's pull verifies its download under the server's stop (``oci_stop``), but the refresh that then
verifies the pulled release again (``ReleaseProvider.refresh``: to activate it) ran under no stop, so a server
sent SIGTERM just after the sync ended hashed a large release whole before it could stop. Now the refresh runs
under the follower's stop (``provider.stopping``): the verification reads no batch of files once the stop is
asked, raises :class:`Stopped` saying what it abandoned, logs ``refresh stopped``, and nothing is activated nor
recorded in the activation floor.

In process, on a real provider and signed releases: the sync is stood in for by copying the newer release into
the releases directory (what a pull does), and the stop is asked from inside the verification, as its second
batch is about to be read (one file per batch): what is asserted is which batches were read, never a time.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_registry.release import Stopped, StopSignal, TrustStore, verify
from rimthan_workflow_registry.release.oci_stop import VERIFYING
from support.servers import ServerWorld
from support.stop_signals import StopAtLook

ASKED_AT = 2  # the stop is asked as the second batch of the newer release is about to be read


def _following(mcp_world: ServerWorld, tmp_path: Path, stopping: StopSignal) -> ReleaseProvider:
    """A provider serving 1.2.0 whose refresh first "syncs" 1.3.0 into its releases directory, under ``stopping``."""
    releases = tmp_path / "releases"
    provider = mcp_world.provider("1.2.0", releases_dir=releases, state_dir=tmp_path / "state")

    def pulled(trust: TrustStore) -> tuple[()]:
        mcp_world.publish("1.3.0", releases)
        return ()

    provider.before_refresh, provider.stopping = pulled, stopping
    return provider


def test_a_stop_asked_while_a_refresh_verifies_a_pulled_release_activates_nothing(
    mcp_world: ServerWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(verify, "verify_threads", lambda files, total: 1)
    monkeypatch.setattr(verify, "_HASH_BATCH", 1)  # one file per batch: many boundaries to stop at
    stop = StopAtLook(ASKED_AT)
    provider = _following(mcp_world, tmp_path, stop)
    with caplog.at_level(logging.INFO, logger="rimthan.mcp"), pytest.raises(Stopped) as stopped:
        provider.refresh("SIGHUP")
    assert stopped.value.during == VERIFYING
    assert stop.looks == ASKED_AT  # no batch after the stop was looked at, let alone read
    assert provider.active.version == "1.2.0"
    assert "1.3.0" not in (tmp_path / "state" / "activation-floor.json").read_text("utf-8")
    said = [r for r in caplog.records if r.getMessage() == "refresh stopped"]
    assert [(r.__dict__["trigger"], r.__dict__["abandoned"]) for r in said] == [("SIGHUP", VERIFYING)]


def test_a_stop_never_asked_lets_the_refresh_activate_the_pulled_release(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    provider = _following(mcp_world, tmp_path, StopSignal())
    assert provider.refresh("SIGHUP").outcome == "activated"
    assert provider.active.version == "1.3.0"
