"""A release's verification under a stopping server (``oci_stop``): abandoned between two batches of files.

Found: a follower sent SIGTERM while it verified a release it had downloaded read and hashed every file of it
before the pull saw the stop (``check_stop`` ran only after the verification), so a large release kept the
process alive. Now the check reads no batch once the stop is asked, on the one-thread path and on the
read-and-hash pipeline alike, and the work raises :class:`Stopped` (nothing verified, so nothing moved into place).

The stop is asked from inside the verification, as the third batch is about to be read (a real signed release,
one file per batch): what is asserted is which batches were read, never a time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rimthan_workflow_registry.release import Stopped, StopSignal, stoppable, verify
from rimthan_workflow_registry.release.oci_stop import VERIFYING
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.stop_signals import StopAtLook

ASKED_AT = 3  # the stop is asked as the third batch is about to be read


@pytest.mark.parametrize("workers", [1, 2], ids=["one-thread", "read-and-hash"])
def test_a_stop_asked_mid_verification_reads_no_further_batch(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(verify, "verify_threads", lambda files, total: workers)
    monkeypatch.setattr(verify, "_HASH_BATCH", 1)  # one file per batch: many boundaries to stop at
    stop = StopAtLook(ASKED_AT)
    with stoppable(stop), pytest.raises(Stopped) as stopped:
        verify_release(signed_release, load_trust(trust))
    assert stopped.value.during == VERIFYING  # what the stop's log line says it abandoned
    assert stop.looks == ASKED_AT  # no batch after the stop was looked at, let alone read
    assert len(list((signed_release / "catalogue").rglob("*.*"))) > ASKED_AT + 2  # there were batches left


def test_a_stop_never_asked_changes_nothing(signed_release: Path, trust: Path) -> None:
    stop = StopSignal()
    with stoppable(stop):
        assert verify_release(signed_release, load_trust(trust)).release_id.startswith("demo@")
