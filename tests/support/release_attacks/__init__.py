"""The release attack corpus's world: keys, pristine signed releases, and the case registry.

``tests/attacks/test_attacks_releases.py`` runs every registered case through
both paths that load a release. The cases live by what they break:

``files``
    content bytes, endless data, extraneous files, links, special files and names on disk;
``manifest``
    the manifest file itself, non-canonical bytes, duplicate keys, floats, its schema, unsafe paths;
``signatures``
    signatures and thresholds, mix-and-match, rollback, profile and scope;
``content_rules``
    what the catalogue rules refuse in a release re-signed with a trusted key.

Each case copies ``good`` to ``<case>/demo-0.2.0``, breaks exactly one thing
and returns an :class:`Expect`: the failure code and the file the error names.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release.format import signature_name

from support.releases import (
    KeyPair,
    build_release,
    make_keypair,
    scaffold_source,
    trust_dir,
    trust_file,
    with_profile,
)

F = FailureCode
NAME = "demo-0.2.0"
ED25519_L = 2**252 + 27742317777372353535851937790883648493


@dataclass(frozen=True)
class Keys:
    alice: KeyPair
    bob: KeyPair
    carol: KeyPair
    mallory: KeyPair  # trusted by nobody


@dataclass(frozen=True)
class World:
    """The session's keys, trust stores and pristine signed releases."""

    root: Path
    keys: Keys
    trusts: dict[str, Path]
    good: Path
    old: Path
    other: Path
    profile: Path
    scope: Path

    @property
    def signers(self) -> list[KeyPair]:
        """The keys ``good`` is signed with (an insider holding both can re-sign anything)."""
        return [self.keys.alice, self.keys.bob]


@dataclass(frozen=True)
class Expect:
    """The refusal a case must produce, and how verification is invoked."""

    code: FailureCode
    where: Path | str
    trust: str = "alice"
    profile: str | None = WORKFLOW_ENGINE_PROFILE
    scope: str | None = None
    skip: str | None = None  # the platform cannot express the attack (reported as a skip)
    release: Path | None = None  # verify this path instead (the case moved the release)

    @property
    def where_text(self) -> str:
        return str(self.where)


Attack = Callable[[World, Path], Expect]
CASE_MODULES = ("files", "manifest", "signatures", "content_rules")
CASES: dict[str, Attack] = {}


def all_cases() -> dict[str, Attack]:
    """Every case, by name: the case modules register theirs when first imported."""
    for module in CASE_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return CASES


def case(name: str) -> Callable[[Attack], Attack]:
    def register(attack: Attack) -> Attack:
        assert name not in CASES, name
        CASES[name] = attack
        return attack

    return register


# --------------------------------------------------------------------------- helpers


def cat(rel: Path, path: str = "") -> Path:
    return rel / "catalogue" / path if path else rel / "catalogue"


def manifest_path(rel: Path) -> Path:
    return rel / "manifest.json"


def sig(rel: Path, key: KeyPair) -> Path:
    return rel / "signatures" / signature_name(key.key_id)


def sign_raw(world: World, rel: Path, data: bytes, keys: list[KeyPair] | None = None) -> Path:
    """Publish ``data`` as the manifest, signed by trusted keys: only content rules can refuse it."""
    manifest_path(rel).write_bytes(data)
    shutil.rmtree(rel / "signatures")
    (rel / "signatures").mkdir()
    for key in world.signers if keys is None else keys:
        sig(rel, key).write_bytes(key.signing_key.sign(data))
    return manifest_path(rel)


def flip(target: Path, index: int, mask: int) -> None:
    """Flip the bits ``mask`` of byte ``index`` of ``target``, in place."""
    data = bytearray(target.read_bytes())
    data[index] ^= mask
    target.write_bytes(bytes(data))


def manifest_text(rel: Path) -> str:
    return manifest_path(rel).read_text("utf-8")


def manifest_value(rel: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(manifest_path(rel).read_bytes())
    return value


def resign_value(world: World, rel: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """Edit the manifest as JSON, re-encode it canonically and re-sign it with trusted keys."""
    value = manifest_value(rel)
    edit(value)
    return sign_raw(world, rel, canonical_bytes(value))


def resign_text(world: World, rel: Path, old: str, new: str) -> Path:
    """Edit the manifest's exact text (one occurrence) and re-sign the edited bytes."""
    text = manifest_text(rel)
    assert old in text, old
    return sign_raw(world, rel, text.replace(old, new, 1).encode("utf-8"))


def first_size(rel: Path) -> int:
    return int(manifest_value(rel)["files"][0]["size"])


def replace_tree(rel: Path, source: Path) -> None:
    """Put another release's whole directory where ``rel`` is (the name stays ``rel``)."""
    shutil.rmtree(rel)
    shutil.copytree(source, rel)


def short_socket(path: Path) -> None:
    """Bind a UNIX socket at ``path`` (chdir keeps the bound name under the 108-byte limit)."""
    here = os.getcwd()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.chdir(path.parent)
        server.bind(path.name)
    finally:
        os.chdir(here)
        server.close()


def size_or_digest(replaced: bytes, original: bytes) -> FailureCode:
    return F.FILE_SIZE_MISMATCH if len(replaced) != len(original) else F.FILE_DIGEST_MISMATCH


# --------------------------------------------------------------------------- the session world


def _source(root: Path, name: str, *, version: str = "0.1.0", scope: str | None = None) -> Path:
    source = scaffold_source(root, name)
    path = source / "catalogue.toml"
    text = path.read_text("utf-8").replace('version = "0.1.0"', f'version = "{version}"', 1)
    if scope is not None:
        text = text.replace(f'name = "example.{name}"', f'name = "{scope}"', 1)
    path.write_text(text, "utf-8")
    return source


def _trust_toml(directory: Path, threshold: Any, entries: list[tuple[str, KeyPair]]) -> Path:
    directory.mkdir(parents=True)
    for _, pair in entries:
        shutil.copyfile(pair.public_path, directory / pair.public_path.name)
    path = directory / "trust.toml"
    keys = [{"name": name, "file": pair.public_path.name} for name, pair in entries]
    path.write_text(tomli_w.dumps({"threshold": threshold, "keys": keys}), encoding="utf-8")
    return path


def build_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """The session's keys, trust stores and the five signed releases the cases start from."""
    root = tmp_path_factory.mktemp("attack-world")
    keys = Keys(*(make_keypair(root / "keys", n) for n in ("alice", "bob", "carol", "mallory")))
    signers = [keys.alice, keys.bob]
    sources = root / "sources"

    def built(kind: str, source: Path) -> Path:
        return build_release(source, root / "built" / kind, signers)

    good = built("good", _source(sources / "good", "demo", version="0.2.0"))
    trusts = {
        "alice": trust_dir(root / "trust-alice", keys.alice),
        "k2of3": trust_file(root / "trust-2of3", [keys.alice, keys.bob, keys.carol], 2),
        "k3of3": trust_file(root / "trust-3of3", [keys.alice, keys.bob, keys.carol], 3),
        "alice-twice": _trust_toml(root / "trust-alice-twice", 2, [("alice", keys.alice), ("alice-again", keys.alice)]),
        "float-threshold": _trust_toml(root / "trust-float", 1.0, [("alice", keys.alice)]),
        "threshold-3-of-2": _trust_toml(root / "trust-3of2", 3, [("alice", keys.alice), ("bob", keys.bob)]),
    }
    return World(
        root=root,
        keys=keys,
        trusts=trusts,
        good=good,
        old=built("old", _source(sources / "old", "demo")),
        other=built("other", _source(sources / "other", "other")),
        profile=with_profile(
            built("profile", _source(sources / "profile", "demo", version="0.2.0")), signers, "report-engine"
        ),
        scope=built("scope", _source(sources / "scope", "demo", version="0.2.0", scope="example.elsewhere")),
    )
