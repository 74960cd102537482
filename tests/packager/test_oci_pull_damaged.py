"""``rimthan-pack pull`` into a releases directory that holds a damaged copy of the release pulled.

A real registry, real signed releases, the installed ``rimthan-pack``: the
damaged copy (a file edited after it was pulled, or deleted) is refused with
a next step naming both repairs; ``--replace-damaged`` replaces it with the
verified pull; a copy that verifies is never replaced.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rimthan_workflow_registry.release import load_trust, verify_release
from rimthan_workflow_registry.release.oci_install import _swap_by_renames
from support.oci import pack, pull, push, tree_bytes
from support.refusals import refusal
from support.registry import LocalRegistry
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.servers import FLIPPED_FILE, flip_byte


def _published_and_held(tmp_path: Path, registry: LocalRegistry, release: Path, trust: Path) -> tuple[str, Path]:
    """``release`` pushed to a fresh repository (its ``:1.2.0`` reference) and copied into ``tmp_path/releases``."""
    repository = registry.ref(f"rimthan/{tmp_path.name.lower()}")
    push(release, repository, trust)
    copy = tmp_path / "releases" / release.name
    shutil.copytree(release, copy)
    return f"{repository}:1.2.0", copy


def _damage(release: Path, how: str) -> None:
    if how == "edited":
        flip_byte(release)
    else:
        (release / FLIPPED_FILE).unlink()


@pytest.mark.parametrize("how", ["edited", "deleted"])
def test_a_damaged_copy_is_refused_with_both_repairs_then_replaced_on_request(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, how: str
) -> None:
    ref, copy = _published_and_held(tmp_path, registry, packaged_releases["1.2.0"], trust)
    out = copy.parent
    _damage(copy, how)
    damaged = tree_bytes(copy)

    refused = pull(ref, trust, out)
    said = refusal(refused.stderr)
    assert refused.returncode == 1 and said.code == "release_exists", refused.stderr
    assert "damaged copy of research-decision@1.2.0 that no longer verifies" in said.error, said
    assert "--replace-damaged" in said.next and f"rm -r {copy}" in said.next, said
    assert tree_bytes(copy) == damaged and sorted(p.name for p in out.iterdir()) == [copy.name]  # nothing touched

    replaced = pull(ref, trust, out, "--replace-damaged")
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stderr.startswith(f"replaced a damaged copy at {copy}: file_"), replaced.stderr
    assert f": {FLIPPED_FILE}: " in said.error and f": {FLIPPED_FILE}: " in replaced.stderr  # which file changed
    assert replaced.stdout.startswith("pulled research-decision@1.2.0"), replaced.stdout
    assert tree_bytes(copy) == tree_bytes(packaged_releases["1.2.0"])
    verify_release(copy, load_trust(trust))
    assert sorted(p.name for p in out.iterdir()) == [copy.name]  # no staging or damaged copy left beside it


def test_replace_damaged_never_replaces_a_copy_that_verifies(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref, copy = _published_and_held(tmp_path, registry, packaged_releases["1.2.0"], trust)
    out = copy.parent
    inode = copy.stat().st_ino
    again = pull(ref, trust, out, "--replace-damaged", "--json")
    assert again.returncode == 0, again.stderr
    said = json.loads(again.stdout)
    assert said["already_present"] is True and said["replaced_damaged"] is None and said["replaced_code"] is None, said
    assert copy.stat().st_ino == inode


def test_a_copy_only_the_trust_store_no_longer_vouches_for_is_said_as_that_not_as_damage(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    """A key removed from --trust, the release pushed again co-signed: the copy signed by the removed key was
    refused and then replaced as "a damaged copy", though not a byte of it changed (the follower says it right)."""
    old, new = make_keypair(tmp_path / "keys", "old"), make_keypair(tmp_path / "keys", "new")
    copy = build_release(packaged_source("1.2.0"), tmp_path / "releases", [old])
    co_signed = build_release(packaged_source("1.2.0"), tmp_path / "co-signed", [old, new])
    repository = registry.ref(f"rimthan/{tmp_path.name.lower()}")
    push(co_signed, repository, trust_dir(tmp_path / "publisher-trust", old, new))
    trust = trust_dir(tmp_path / "trust", new)

    refused = pull(f"{repository}:1.2.0", trust, copy.parent)
    said = refusal(refused.stderr)
    assert said.code == "release_exists", refused.stderr
    assert "a copy of research-decision@1.2.0 the trust store no longer vouches for" in said.error, said
    assert "damaged" not in said.error and "the copy (`rm -r" in said.next, said
    assert "keys --trust no longer holds" in " ".join(pack("pull", "--help").stdout.split())  # the flag says so too

    replaced = pull(f"{repository}:1.2.0", trust, copy.parent, "--replace-damaged")
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stderr.startswith(
        f"replaced a copy the trust store no longer vouches for at {copy}: signature_untrusted: "
    ), replaced.stderr
    verify_release(copy, load_trust(trust))
    assert pull(f"{repository}:1.2.0", trust, copy.parent, "--json").returncode == 0  # (already present now)
    copy_signed_by_old_only = build_release(packaged_source("1.2.0"), tmp_path / "old-only", [old])
    shutil.rmtree(copy)
    shutil.copytree(copy_signed_by_old_only, copy)
    said_json = json.loads(pull(f"{repository}:1.2.0", trust, copy.parent, "--replace-damaged", "--json").stdout)
    assert said_json["replaced_untrusted"] is True and said_json["replaced_code"] == "signature_untrusted", said_json


def test_where_the_file_system_cannot_exchange_the_copy_is_swapped_by_renames_and_nothing_is_left_aside(
    tmp_path: Path,
) -> None:
    """The fallback of the one-rename swap (no ``RENAME_EXCHANGE``): the final name holds the verified release,
    the staging name the held copy (deleted with it), and no ``.damaged-*`` directory is left beside them."""
    key = make_keypair(tmp_path / "keys", "k")
    final = build_release(packaged_source("1.2.0"), tmp_path / "releases", [key])
    staging = tmp_path / "releases" / ".pull-staging"
    shutil.copytree(final, staging)
    flip_byte(final)
    held, verified = tree_bytes(final), tree_bytes(staging)
    _swap_by_renames(staging, final)
    assert tree_bytes(final) == verified and tree_bytes(staging) == held
    verify_release(final, load_trust(trust_dir(tmp_path / "trust", key)))
    assert sorted(p.name for p in final.parent.iterdir()) == sorted([final.name, staging.name])
