"""Release format records, the strict manifest parser, path rules, and the trust store."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jsonschema import Draft202012Validator
from rimthan_workflow_registry.canonical import canonical_bytes, digest_bytes, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, ReleaseVerificationError, TrustError
from rimthan_workflow_registry.release.format import (
    FileEntry,
    HostAdapterEntry,
    Manifest,
    ReleaseIdentity,
    WorkflowEntry,
    key_id_from_signature_name,
    media_type_for,
    render_checksums,
)
from rimthan_workflow_registry.release.manifest_parse import (
    FILE_ENTRY_SCHEMA,
    MANIFEST_SCHEMA,
    _entries_conform,
    _entry_conforms,
    parse_manifest,
)
from rimthan_workflow_registry.release.paths import first_unsafe_path, path_problem, path_set_problem
from rimthan_workflow_registry.release.trust import key_id_for, load_trust
from rimthan_workflow_registry.release.verified import read_checked
from support.releases import KeyPair, make_keypair, trust_dir, trust_file

F = FailureCode


def sample_manifest(created: int | None = None) -> Manifest:
    return Manifest(
        release=ReleaseIdentity(
            catalogue="demo",
            version="1.0.0",
            title="Demo",
            scope_name="example.demo",
            scope_profile="workflow-engine",
            created=created,
        ),
        workflows=(
            WorkflowEntry(id="demo", version="1.0.0", owner="example.demo", entry_aliases=("d",), title="Demo"),
        ),
        host_adapters=(HostAdapterEntry(id="claude-code", version="1.0.0", harness="claude-code"),),
        files=(FileEntry.for_bytes("a.md", b"# a\n"), FileEntry.for_bytes("catalogue.toml", b"format = 1\n")),
    )


def test_manifest_round_trip_is_canonical() -> None:
    manifest = sample_manifest()
    data = manifest.to_bytes()
    assert data == canonical_bytes(json.loads(data))
    assert not data.endswith(b"\n")
    assert parse_manifest(data) == manifest
    assert manifest.digest == digest_bytes(data)
    assert json.loads(data)["release"]["id"] == "demo@1.0.0"


def test_created_only_when_given() -> None:
    assert "created" not in json.loads(sample_manifest().to_bytes())["release"]
    assert json.loads(sample_manifest(1700000000).to_bytes())["release"]["created"] == 1700000000
    assert parse_manifest(sample_manifest(5).to_bytes()).release.created == 5


def test_media_types_by_extension() -> None:
    assert media_type_for("catalogue.toml") == "application/toml"
    assert media_type_for("schemas/x.schema.json") == "application/json"
    assert media_type_for("assets/a.md") == "text/markdown"
    assert media_type_for("assets/logo.png") == "application/octet-stream"


def test_checksums_rendering() -> None:
    manifest = sample_manifest()
    lines = render_checksums(manifest).decode().splitlines()
    assert lines == [f"{f.sha256}  catalogue/{f.path}" for f in manifest.files]


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda v: v.update(format="rimthan.release-manifest/2"), F.MANIFEST_INVALID),
        (lambda v: v["release"].update(id="demo@9.9.9"), F.MANIFEST_INVALID),
        (lambda v: v["files"].reverse(), F.MANIFEST_INVALID),
        (lambda v: v["files"].append(dict(v["files"][-1])), F.MANIFEST_INVALID),
        (lambda v: v["files"][0].update(size=-1), F.MANIFEST_INVALID),
        (lambda v: v["files"][0].update(size=True), F.MANIFEST_INVALID),
        (lambda v: v["files"][0].update(sha256="ABC"), F.MANIFEST_INVALID),
        (lambda v: v["files"][0].update(media_type="text/html"), F.MANIFEST_INVALID),
        (lambda v: v["release"].update(created="2024-01-01"), F.MANIFEST_INVALID),
        (lambda v: v["workflows"][0].update(extra=1), F.MANIFEST_INVALID),
        (lambda v: v.update(files=[]), F.MANIFEST_INVALID),
    ],
)
def test_manifest_refusals(mutate: Callable[[dict[str, Any]], object], code: FailureCode) -> None:
    value = json.loads(sample_manifest().to_bytes())
    mutate(value)
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(canonical_bytes(value), where="m.json")
    assert info.value.code is code
    assert info.value.path == "m.json"


def test_float_refused_even_when_integral() -> None:
    data = sample_manifest().to_bytes().replace(b'"size":4', b'"size":4.0', 1)
    assert data != sample_manifest().to_bytes()
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(data)
    assert info.value.code is F.MANIFEST_INVALID
    assert "integer" in info.value.message


def test_duplicate_keys_refused() -> None:
    data = sample_manifest().to_bytes().replace(b'{"files":', b'{"format":1,"files":', 1)
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(data)
    assert info.value.code is F.MANIFEST_DUPLICATE_KEY


def test_a_manifest_known_canonical_parses_alike_without_the_duplicate_key_search() -> None:
    """Bytes remembered (by digest) as RFC 8785 output skip the per-object duplicate check: same records."""
    from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS, canonical_form_version

    manifest = replace(sample_manifest(), release=replace(sample_manifest().release, title="known canonical"))
    data = manifest.to_bytes()
    assert not SCHEMA_CHECKS.passed(data, canonical_form_version())
    first = parse_manifest(data)
    SCHEMA_CHECKS.remember([data], canonical_form_version())
    assert parse_manifest(data) == first == manifest
    duplicated = data.replace(b'{"files":', b'{"format":1,"files":', 1)  # other bytes: searched as ever
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(duplicated)
    assert info.value.code is F.MANIFEST_DUPLICATE_KEY


def test_parsed_file_records_are_the_records_built_field_by_field() -> None:
    """The parser's records take the parsed entries' own dictionaries: equal, hashed and frozen alike."""
    data = sample_manifest().to_bytes()
    parsed = parse_manifest(data)
    plain = Manifest.from_json(json.loads(data))  # records built one field at a time
    assert parsed == plain == sample_manifest()
    for adopted, built in zip(parsed.files, plain.files, strict=True):
        assert adopted == built and hash(adopted) == hash(built) and repr(adopted) == repr(built)
        assert adopted.to_json() == built.to_json()
        with pytest.raises(FrozenInstanceError):
            adopted.size = 0  # type: ignore[misc]
    assert parsed.paths == tuple(f.path for f in plain.files) == ("a.md", "catalogue.toml")
    assert parsed.total_size == sum(f.size for f in plain.files)


def test_a_known_digest_gives_the_same_check_key_and_parse() -> None:
    """The manifest is hashed once per load; the key and the parse given that digest are the ones computed."""
    from rimthan_workflow_registry.release.schema_checks import canonical_form_version, check_key

    data = sample_manifest(7).to_bytes()
    sha256 = sha256_hex(data)
    assert check_key(data, canonical_form_version(), sha256=sha256) == check_key(data, canonical_form_version())
    assert check_key(data, sha256=sha256) == check_key(data)
    assert parse_manifest(data, sha256=sha256) == parse_manifest(data) == sample_manifest(7)


@pytest.mark.parametrize("suffix", [b" ", b"\n"])
def test_non_canonical_bytes_refused(suffix: bytes) -> None:
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(sample_manifest().to_bytes() + suffix)
    assert info.value.code is F.MANIFEST_NOT_CANONICAL


def test_escaped_unicode_is_not_canonical() -> None:
    manifest = replace(sample_manifest(), release=replace(sample_manifest().release, title="Café"))
    data = manifest.to_bytes()
    assert "Café".encode() in data
    escaped = data.replace("Café".encode(), b"Caf\\u00e9")
    with pytest.raises(ReleaseVerificationError) as info:
        parse_manifest(escaped)
    assert info.value.code is F.MANIFEST_NOT_CANONICAL


@pytest.mark.parametrize(
    "path",
    ["", "/abs", "a\\b", "a//b", "a/", "./a", "a/../b", "..", "a\nb", "a\x00b", "cafe\u0301", "x" * 2000],
)
def test_unsafe_paths(path: str) -> None:
    assert path_problem(path) is not None


@pytest.mark.parametrize("path", ["catalogue.toml", "assets/prompts/a-b_c.md", "café.md", "a/b/c/d.json"])
def test_safe_paths(path: str) -> None:
    assert path_problem(path) is None


def test_the_joined_path_check_answers_as_each_path_alone() -> None:
    """``first_unsafe_path``'s scan over all paths at once names the same first path as ``path_problem`` one by one."""
    segments = [
        "a",
        ".",
        "..",
        "...",
        ".a",
        "",
        "b\x00",
        "c\x01",
        "d\x7f",
        "\x1f",
        "é",
        "e\u0301",
        "x\\y",
        "/",
        "x" * 600,
    ]
    rng = random.Random(8785)
    for _ in range(20_000):
        paths = ["/".join(rng.choices(segments, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 4))]
        first = next(((path, path_problem(path)) for path in paths if path_problem(path) is not None), None)
        assert first_unsafe_path(paths) == first, paths


def test_the_file_entry_columns_check_answers_as_each_entry_alone() -> None:
    """The column-wise check of the manifest's file entries agrees with the per-entry one on every mix."""
    good = {"path": "a/b.md", "sha256": "0f" * 32, "size": 3, "media_type": "text/markdown"}
    assert set(good) == set(FILE_ENTRY_SCHEMA["required"])
    values = ["", "x", "a" * 5000, "A" * 64, "g" * 64, "0" * 63, "0" * 65, "é" * 64, "0" * 63 + "\n", 0, -1, 1]
    values += [True, 1.0, None, [], {}, "application/json", "bogus", 2**70]
    rng = random.Random(8785)
    for _ in range(20_000):
        entries: list[Any] = [dict(good) for _ in range(rng.randint(0, 4))]
        for entry in entries:
            if rng.random() < 0.3:
                key = rng.choice([*sorted(good), "extra"])
                if rng.random() < 0.2:
                    entry.pop(key, None)
                else:
                    entry[key] = rng.choice(values)
        if entries and rng.random() < 0.05:
            entries[rng.randrange(len(entries))] = rng.choice(values)
        assert _entries_conform(entries) == all(map(_entry_conforms, entries)), entries


def test_path_set_clashes() -> None:
    assert path_set_problem(["a.md", "b.md"]) is None
    assert path_set_problem(["a.md", "A.md"]) is not None
    assert path_set_problem(["a", "a/b.md"]) is not None


def test_signature_names() -> None:
    key_id = "ab" * 32
    assert key_id_from_signature_name(f"{key_id}.sig") == key_id
    assert key_id_from_signature_name(f"{key_id.upper()}.sig") is None
    assert key_id_from_signature_name(f"{key_id}.sig.bak") is None
    assert key_id_from_signature_name("alice.sig") is None


def test_the_manifest_schema_is_valid_draft_2020_12() -> None:
    """Checked here, not at import: the metaschema check would cost every CLI and server start."""
    Draft202012Validator.check_schema(MANIFEST_SCHEMA)


def test_read_checked_stops_after_declared_size(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * (3 * 1024 * 1024))
    entry = FileEntry.for_bytes("big", b"x" * 10)
    with pytest.raises(ReleaseVerificationError) as info:
        read_checked(path, entry, where="big")
    assert info.value.code is F.FILE_SIZE_MISMATCH
    assert "the manifest says 10" in info.value.message  # refused on the descriptor's size, before any read


def test_read_checked_refuses_devices(tmp_path: Path) -> None:
    entry = FileEntry.for_bytes("zero", b"\0" * 10)
    with pytest.raises(ReleaseVerificationError) as info:
        read_checked(Path("/dev/zero"), entry, where="zero")
    assert info.value.code is F.FILE_TYPE_FORBIDDEN


# --------------------------------------------------------------------------- trust store


def test_key_id_is_sha256_of_raw_public_key(keypair: KeyPair) -> None:
    import hashlib

    key = serialization.load_pem_public_key(keypair.public_path.read_bytes())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert keypair.key_id == hashlib.sha256(raw).hexdigest() == key_id_for(key)  # type: ignore[arg-type]


def test_trust_directory(tmp_path: Path) -> None:
    a, b = make_keypair(tmp_path / "k", "a"), make_keypair(tmp_path / "k", "b")
    directory = trust_dir(tmp_path / "trust", a, b)
    (directory / "README.md").write_text("not a key")
    store = load_trust(directory)
    assert set(store.keys) == {a.key_id, b.key_id}
    assert store.threshold == 1
    assert store.names[a.key_id] == "a"


def test_trust_file_threshold(tmp_path: Path) -> None:
    pairs = [make_keypair(tmp_path / "k", n) for n in ("a", "b", "c")]
    store = load_trust(trust_file(tmp_path / "trust", pairs, 2))
    assert store.threshold == 2
    assert len(store.keys) == 3


@pytest.mark.parametrize("threshold", [0, 4, -1])
def test_trust_file_threshold_out_of_range(tmp_path: Path, threshold: int) -> None:
    pairs = [make_keypair(tmp_path / "k", n) for n in ("a", "b", "c")]
    path = trust_file(tmp_path / "trust", pairs, threshold)
    with pytest.raises(TrustError) as info:
        load_trust(path)
    assert info.value.code is F.TRUST_STORE_INVALID
    assert info.value.path == str(path)


def test_trust_file_declared_id_must_match(tmp_path: Path) -> None:
    a = make_keypair(tmp_path / "k", "a")
    path = trust_file(tmp_path / "trust", [a], 1)
    path.write_text(path.read_text().replace(a.key_id, "0" * 64))
    with pytest.raises(TrustError) as info:
        load_trust(path)
    assert info.value.code is F.TRUST_STORE_INVALID
    assert "does not match" in info.value.message
    path.write_text(path.read_text().replace("0" * 64, a.key_id + "\\n"))  # TOML's "\n": re's "$" takes it
    with pytest.raises(TrustError) as newline:
        load_trust(path)
    assert newline.value.code is F.TRUST_STORE_INVALID
    assert "must be 64 lowercase hex characters" in newline.value.message


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        # a NUL byte in the key file name was a ValueError traceback
        (lambda text: text.replace('.pub"', '\\u0000.pub"', 1), "keys[0].file must name a .pub file"),
        (lambda text: text.replace("threshold = 1", "threshold = 1979-05-27", 1), "a TOML date or time"),
        (lambda text: text.replace("threshold = 1", "threshold = " + "9" * 5000, 1), "Exceeds the limit (4300 digits)"),
    ],
    ids=["NUL-in-file", "date-threshold", "5000-digit-threshold"],
)
def test_trust_file_values_no_file_or_json_can_hold(tmp_path: Path, edit: Callable[[str], str], said: str) -> None:
    a = make_keypair(tmp_path / "k", "a")
    path = trust_file(tmp_path / "trust", [a], 1)
    path.write_text(edit(path.read_text()))
    with pytest.raises(TrustError) as info:
        load_trust(path)
    assert info.value.code is F.TRUST_STORE_INVALID and said in info.value.message, info.value.one_line()


def test_trust_file_unknown_keys_refused(tmp_path: Path) -> None:
    a = make_keypair(tmp_path / "k", "a")
    path = trust_file(tmp_path / "trust", [a], 1)
    path.write_text(path.read_text() + "\nthreshhold = 1\n")
    with pytest.raises(TrustError) as info:
        load_trust(path)
    assert info.value.code is F.TRUST_STORE_INVALID


def test_empty_trust_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrustError) as info:
        load_trust(tmp_path / "empty")
    assert info.value.code is F.TRUST_STORE_INVALID


def test_missing_trust_store(tmp_path: Path) -> None:
    with pytest.raises(TrustError) as info:
        load_trust(tmp_path / "missing")
    assert info.value.code is F.TRUST_STORE_INVALID


def test_non_ed25519_public_key_refused(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    directory = tmp_path / "trust"
    directory.mkdir()
    (directory / "p256.pub").write_bytes(
        other.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(TrustError) as info:
        load_trust(directory)
    assert info.value.code is F.KEY_INVALID
    assert info.value.path == str(directory / "p256.pub")


def test_private_key_is_not_a_public_key(tmp_path: Path) -> None:
    directory = tmp_path / "trust"
    directory.mkdir()
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (directory / "oops.pub").write_bytes(pem)
    with pytest.raises(TrustError) as info:
        load_trust(directory)
    assert info.value.code is F.KEY_INVALID
