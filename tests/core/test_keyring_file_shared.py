"""Replicas that share one state directory share its checkpoint key file, created by whichever starts first.

Replicas of a fleet often start together (a rolling deploy, a node coming back). Each found no key file, made
a key and renamed its file over the other's: the first replica then signed checkpoints with a key that no other
replica, nor its own restart, knew, so every run it had started was refused (``checkpoint_key_unknown``) on any
other replica and lost at its restart. Many starts racing on real files, one thread each, must end on one key
file that every one of them holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rimthan_workflow_registry.run import CheckpointKeyring

REPLICAS = 8
ROUNDS = 12
T = TypeVar("T")


def _start_together(path: Path, open_: Callable[[Path], T]) -> list[T]:
    barrier = threading.Barrier(REPLICAS)
    opened: list[T] = []

    def replica() -> None:
        barrier.wait()
        opened.append(open_(path))

    threads = [threading.Thread(target=replica) for _ in range(REPLICAS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return opened


def test_replicas_starting_together_on_one_state_directory_all_sign_with_the_key_file_s_key(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"state-{round_}" / "checkpoint-keys.json"
        opened = _start_together(path, CheckpointKeyring.load_or_create)
        on_disk = CheckpointKeyring.load(path)
        assert len(opened) == REPLICAS
        assert {keyring.signing_key_id for keyring in opened} == {on_disk.signing_key_id}
        assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint-keys.json"]  # no temporary left
        assert path.stat().st_mode & 0o777 == 0o600


def test_one_of_the_replicas_starting_together_says_it_created_the_key_file(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"state-{round_}" / "checkpoint-keys.json"
        opened = _start_together(path, CheckpointKeyring.opened)
        assert [created for _, created in opened].count(True) == 1  # the rest say "loaded"
        assert all(keyring == CheckpointKeyring.load(path) for keyring, _ in opened)


def test_load_or_create_still_loads_a_key_file_already_there(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint-keys.json"
    first = CheckpointKeyring.load_or_create(path)
    assert CheckpointKeyring.opened(path) == (first, False)
