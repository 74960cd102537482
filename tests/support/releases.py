"""Shared test helpers: real Ed25519 keys and real signed release directories.

Everything is created under ``tmp_path``; no private key is ever written into
the repository tree. Helpers are plain functions (import them with
``from support.releases import make_keypair, build_release, ...``) and the common
cases are also fixtures.

Functions
    make_keypair(directory, name) -> KeyPair
        ``rimthan-pack keygen`` equivalent: writes ``<name>.key`` (PKCS#8,
        0600) and ``<name>.pub`` under ``directory``; ``.signing_key`` signs.
    trust_dir(directory, *keypairs) -> Path
        A trust *directory* holding the keypairs' ``.pub`` files (threshold 1).
    trust_file(directory, keypairs, threshold) -> Path
        A TOML trust file naming the keypairs with a k-of-n threshold.
    scaffold_source(directory, name="demo") -> Path
        A fresh ``rimthan-pack init`` catalogue source (it builds as it is).
    build_release(source_dir, out_dir, keys, *, created=None) -> Path
        Build and sign a release exactly as ``rimthan-pack build`` does
        (self-verified against the keys); returns the release directory.
    packaged_source(version) -> Path
        ``catalogues/research-decision/<version>`` in this repository.
    branching_setup_source(root) -> Path
        A copy of the packaged 1.2.0 source whose gated setup-workspace asks
        the route question and branches straight to a route step: a gated step
        that can be validated and still wait for an answer (``input_required``).
    typed_question_source(root) -> Path
        A ``rimthan-pack init`` catalogue whose ungated steps ask two questions
        with typed choices: ``team_size`` (the integers 2 and 5) on ``plan``,
        then ``over_budget`` (true or false) on ``decide``; either answer
        leads on to the gated ``write-summary``.
    unbounded_objective_source(directory) -> Path
        A copy of the packaged 1.2.0 source whose confirmed-state schema sets
        no ``maxLength`` on ``objective``: a catalogue the verifier lets take
        a confirmed value of any size.
    resign_release(release, keys, edit=None) -> None
        Rewrite a release's manifest, SHA256SUMS and signatures after
        ``edit(catalogue_dir)`` changed its files - what a signer with a
        trusted key who skipped the packager's checks could publish. Used to
        prove verification does not rely on the packager alone.
    with_profile(release, keys, profile) -> Path
        ``release`` re-signed by an insider under another ``[scope].profile``
        (its catalogue.toml and manifest both say it): the packager builds only
        the profile rimthan-mcp serves.
    sign_manifest(release, keys, data) -> None
        Publish ``data`` as the manifest, signed by ``keys``: a hand-made
        manifest only the content rules can refuse.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rimthan_packager.build import build_release as _build_release
from rimthan_packager.keygen import generate_keypair
from rimthan_packager.scaffold import init_catalogue
from rimthan_packager.signing import SigningKey, load_signing_key
from rimthan_workflow_registry.release.format import (
    CATALOGUE_DIR,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    SIGNATURES_DIR,
    FileEntry,
    Manifest,
    render_checksums,
    signature_name,
)
from rimthan_workflow_registry.release.manifest_parse import parse_manifest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGED_CATALOGUE = REPO_ROOT / "catalogues" / "research-decision"
PACKAGED_VERSIONS = ("1.2.0", "1.3.0")


@dataclass(frozen=True)
class KeyPair:
    """A generated key pair on disk plus the loaded signing key."""

    private_path: Path
    public_path: Path
    key_id: str
    signing_key: SigningKey


def make_keypair(directory: Path, name: str) -> KeyPair:
    generated = generate_keypair(directory / name)
    return KeyPair(
        private_path=generated.private_path,
        public_path=generated.public_path,
        key_id=generated.key_id,
        signing_key=load_signing_key(generated.private_path),
    )


def trust_dir(directory: Path, *keypairs: KeyPair) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for pair in keypairs:
        shutil.copyfile(pair.public_path, directory / pair.public_path.name)
    return directory


def trust_file(directory: Path, keypairs: Sequence[KeyPair], threshold: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for pair in keypairs:
        shutil.copyfile(pair.public_path, directory / pair.public_path.name)
        entries.append({"name": pair.public_path.stem, "file": pair.public_path.name, "id": pair.key_id})
    path = directory / "trust.toml"
    path.write_text(tomli_w.dumps({"threshold": threshold, "keys": entries}), encoding="utf-8")
    return path


def scaffold_source(directory: Path, name: str = "demo") -> Path:
    init_catalogue(directory, name)
    return directory


def write_non_utf8_name(directory: Path) -> None:
    """Write a file named ``bad-\\xff.md`` (not valid UTF-8) into ``directory``; skip where the filesystem refuses."""
    raw = os.fsencode(directory) + b"/bad-\xff.md"
    try:
        with open(raw, "wb") as handle:
            handle.write(b"x")
    except OSError as exc:  # pragma: no cover - filesystems that enforce UTF-8 names
        pytest.skip(f"filesystem refuses non-UTF-8 names: {exc}")


def build_release(source_dir: Path, out_dir: Path, keys: Sequence[KeyPair], *, created: int | None = None) -> Path:
    result = _build_release(source_dir, [k.signing_key for k in keys], out_dir, created=created)
    return result.path


def packaged_source(version: str) -> Path:
    return PACKAGED_CATALOGUE / version


def branching_setup_source(root: Path) -> Path:
    """research-decision whose gated setup-workspace branches straight to a route (no interview)."""
    source = root / "branching-setup"
    shutil.copytree(packaged_source("1.2.0"), source)
    path = source / "workflows/research-decision.toml"
    workflow = tomllib.loads(path.read_text("utf-8"))
    steps = {s["id"]: s for s in workflow["steps"]}
    setup, select = steps["setup-workspace"], steps["select-route"]
    del setup["next"]
    setup["branches"], setup["question"] = select["branches"], select["question"]
    workflow["steps"] = [
        setup,
        *(s for s in workflow["steps"] if s["id"] in ("desk-research", "user-interviews", "experiment")),
    ]
    path.write_text(tomli_w.dumps(workflow), "utf-8")
    return source


def unbounded_objective_source(directory: Path) -> Path:
    source = directory / "unbounded-objective"
    shutil.copytree(packaged_source("1.2.0"), source)
    schema_path = source / "schemas" / "confirmed-state.schema.json"
    schema = json.loads(schema_path.read_text("utf-8"))
    del schema["properties"]["objective"]["maxLength"]
    schema_path.write_text(json.dumps(schema, indent=2) + "\n", "utf-8")
    return source


def resign_release(
    release: Path,
    keys: Sequence[KeyPair],
    edit: Callable[[Path], object] | None = None,
    manifest_edit: Callable[[Manifest], Manifest] | None = None,
) -> Manifest:
    """Re-derive manifest, checksums and signatures for a release's current files."""
    catalogue = release / CATALOGUE_DIR
    if edit is not None:
        edit(catalogue)
    old = parse_manifest((release / MANIFEST_NAME).read_bytes())
    entries = [
        FileEntry.for_bytes(p.relative_to(catalogue).as_posix(), p.read_bytes())
        for p in sorted(catalogue.rglob("*"))
        if p.is_file()
    ]
    manifest = Manifest(
        release=old.release,
        workflows=old.workflows,
        host_adapters=old.host_adapters,
        files=tuple(sorted(entries, key=lambda e: e.path)),
    )
    if manifest_edit is not None:
        manifest = manifest_edit(manifest)
    (release / CHECKSUMS_NAME).write_bytes(render_checksums(manifest))
    sign_manifest(release, keys, manifest.to_bytes())
    return manifest


def with_profile(release: Path, keys: Sequence[KeyPair], profile: str) -> Path:
    """``release`` re-signed under ``[scope].profile = profile``: what only an insider could publish."""

    def edit(catalogue: Path) -> None:
        toml = catalogue / "catalogue.toml"
        toml.write_text(toml.read_text("utf-8").replace('profile = "workflow-engine"', f'profile = "{profile}"', 1))

    resign_release(release, keys, edit, lambda m: replace(m, release=replace(m.release, scope_profile=profile)))
    return release


def sign_manifest(release: Path, keys: Sequence[KeyPair], data: bytes) -> None:
    """Publish ``data`` as the release's manifest, signed by ``keys`` alone (whatever the bytes say)."""
    (release / MANIFEST_NAME).write_bytes(data)
    shutil.rmtree(release / SIGNATURES_DIR)
    (release / SIGNATURES_DIR).mkdir()
    for pair in keys:
        (release / SIGNATURES_DIR / signature_name(pair.key_id)).write_bytes(pair.signing_key.sign(data))


def two_questions_source(root: Path) -> Path:
    """research-decision 1.2.0 asking two questions in a row with the same choices: choose-pilot (pilot_route)
    right before select-route (research_route), so an answer to the first re-sent would fit the second."""
    source = root / "two-questions"
    shutil.copytree(packaged_source("1.2.0"), source)
    schema_path = source / "schemas" / "confirmed-state.schema.json"
    schema = json.loads(schema_path.read_text("utf-8"))
    schema["properties"]["pilot_route"] = {**schema["properties"]["research_route"], "description": "The pilot's."}
    schema_path.write_text(json.dumps(schema, indent=2) + "\n", "utf-8")
    path = source / "workflows/research-decision.toml"
    workflow = tomllib.loads(path.read_text("utf-8"))
    steps = {s["id"]: s for s in workflow["steps"]}
    select = steps["select-route"]
    choices = select["question"]["choices"]
    pilot = {**select, "id": "choose-pilot", "title": "Choose the pilot's route",
             "question": {"field": "pilot_route", "prompt": "Which route will the pilot take?", "choices": choices},
             "branches": [{"target": "select-route", "when": {"field": "pilot_route", "one_of": choices}}]}  # fmt: skip
    steps["confirm-contract"]["next"] = "choose-pilot"
    at = workflow["steps"].index(select)
    workflow["steps"] = [*workflow["steps"][:at], pilot, *workflow["steps"][at:]]
    path.write_text(tomli_w.dumps(workflow), "utf-8")
    return source


def typed_question_source(root: Path) -> Path:
    """A scaffolded catalogue asking a question of integer choices, then one of boolean choices."""
    source = scaffold_source(root / "typed-questions")
    schema_path = source / "schemas/confirmed-state.schema.json"
    schema = json.loads(schema_path.read_text("utf-8"))
    schema["properties"]["team_size"] = {"type": "integer", "enum": [2, 5], "description": "People on the team."}
    schema["properties"]["over_budget"] = {"type": "boolean", "description": "Whether the work may exceed budget."}
    schema_path.write_text(json.dumps(schema, indent=2), "utf-8")
    path = source / "workflows/demo.toml"
    workflow = tomllib.loads(path.read_text("utf-8"))
    steps = {s["id"]: s for s in workflow["steps"]}
    del steps["plan"]["next"]
    steps["plan"]["question"] = {"field": "team_size", "prompt": "How many people are on the team?", "choices": [2, 5]}
    steps["plan"]["branches"] = [{"target": "decide", "when": {"field": "team_size", "one_of": [2, 5]}}]
    decide: dict[str, Any] = {"id": "decide", "title": "Decide the budget", "instruction": steps["plan"]["instruction"]}
    decide["question"] = {"field": "over_budget", "prompt": "May the work exceed its budget?", "choices": [True, False]}
    decide["branches"] = [
        {"target": "write-summary", "when": {"field": "over_budget", "equals": value}} for value in (True, False)
    ]
    workflow["steps"] = [steps["setup-workspace"], steps["plan"], decide, steps["write-summary"]]
    path.write_text(tomli_w.dumps(workflow), "utf-8")
    return source
