"""``rimthan-pack`` through its real command line: round trip, error format, key safety."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rimthan_packager.cli import cli
from rimthan_workflow_registry.limits import MAX_STEP_ARTIFACT_BYTES
from rimthan_workflow_registry.release.format import signature_name
from support.pack_cli import git_work_tree
from support.releases import KeyPair, make_keypair, packaged_source, trust_file

RIMTHAN_PACK = Path(sys.executable).parent / "rimthan-pack"


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner(env=env)
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def assert_one_line_error(result: Result, code: str, where: Path | str | None, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(f"error: {code}: "), lines[0]
    if where is not None:
        assert lines[0].startswith(f"error: {code}: {where}: "), lines[0]
    assert lines[1].startswith("next: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_round_trip_init_build_verify_inspect(tmp_path: Path) -> None:
    source = tmp_path / "my-flow"
    created = run("init", source)
    assert created.exit_code == 0, created.output
    assert (source / "catalogue.toml").is_file()

    keys = tmp_path / "keys"
    made = run("keygen", "--out", keys / "alice", "--json")
    assert made.exit_code == 0, made.output
    key_id = json.loads(made.stdout)["key_id"]

    built = run("build", source, "--key", keys / "alice.key", "--out", tmp_path / "releases", "--json")
    assert built.exit_code == 0, built.output
    info = json.loads(built.stdout)
    release = Path(info["release"])
    assert release == tmp_path / "releases" / "my-flow-0.1.0"
    assert info["signers"] == [key_id]
    assert info["manifest_digest"].startswith("sha256:")

    verified = run("verify", release, "--trust", keys)
    assert verified.exit_code == 0, verified.output
    assert "verified my-flow@0.1.0" in verified.stdout
    assert info["manifest_digest"] in verified.stdout

    shown = run("inspect", release, "--trust", keys, "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["manifest_digest"] == info["manifest_digest"]
    assert data["identity"]["id"] == "my-flow@0.1.0"
    assert data["signatures"] == [{"key_id": key_id, "verified": True, "name": "alice"}]
    assert [s["id"] for s in data["workflows"][0]["steps"]] == ["setup-workspace", "plan", "write-summary"]
    assert data["files"]["count"] == len(list((release / "catalogue").rglob("*.*")))

    text = run("inspect", release)
    assert text.exit_code == 0
    assert "not checked (pass --trust)" in text.stdout
    assert "write-summary gated  terminal" in text.stdout


def test_build_prints_path_and_digest(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    result = run("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel")
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "rel" / "demo-0.1.0") in result.stdout
    assert "manifest digest sha256:" in result.stdout


def test_build_honours_source_date_epoch(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    result = run(
        "build",
        scaffold,
        "--key",
        keypair.private_path,
        "--out",
        tmp_path / "rel",
        "--json",
        env={"SOURCE_DATE_EPOCH": "1700000000"},
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "rel" / "demo-0.1.0" / "manifest.json").read_bytes())
    assert manifest["release"]["created"] == 1700000000


@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0667\u0660\u0660", "17e8", str(2**53), "9" * 5000])
def test_build_refuses_a_source_date_epoch_of_other_than_ascii_digits(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, value: str
) -> None:
    """str.isdigit takes a superscript two (which int() then refused with a traceback) and Arabic-Indic digits.

    Past 2**53 - 1 the manifest's RFC 8785 JSON has no form for the time (IntegerDomainError, a traceback),
    and int() refuses more than 4,300 digits.
    """
    out = tmp_path / "rel"
    result = run("build", scaffold, "--key", keypair.private_path, "--out", out, env={"SOURCE_DATE_EPOCH": value})
    assert_one_line_error(result, "invalid_arguments", "SOURCE_DATE_EPOCH")
    assert not (tmp_path / "rel" / "demo-0.1.0").exists()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            "1" * 5000,
            "Exceeds the limit (4300 digits)",
        ),  # tomllib's int() raised ValueError: `build` printed a traceback
        (str(2**53), "past what JSON carries exactly"),  # built and verified, then every start failed to serialise
        ("9" * 4000, "= an integer of 4000 digits is past what JSON carries"),  # named, not printed whole
    ],
    ids=["5000-digit-integer", "2**53", "4000-digit-integer"],
)
def test_build_refuses_a_toml_integer_json_cannot_carry(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, value: str, said: str
) -> None:
    catalogue = scaffold / "catalogue.toml"
    catalogue.write_text(catalogue.read_text("utf-8") + f"\n[extra]\nsize = {value}\n", "utf-8")
    result = run("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel")
    line = assert_one_line_error(result, "catalogue_invalid", catalogue)
    assert said in line and len(line) < 300
    assert not (tmp_path / "rel" / "demo-0.1.0").exists()


def test_co_signing_through_the_cli(tmp_path: Path, scaffold: Path) -> None:
    alice, bob = make_keypair(tmp_path / "keys", "alice"), make_keypair(tmp_path / "keys", "bob")
    trust = trust_file(tmp_path / "trust", [alice, bob], threshold=2)
    assert run("build", scaffold, "--key", alice.private_path, "--out", tmp_path / "rel").exit_code == 0
    release = tmp_path / "rel" / "demo-0.1.0"

    short = run("verify", release, "--trust", trust)
    assert_one_line_error(short, "signature_threshold_not_met", release / "signatures")

    signed = run("sign", release, "--key", bob.private_path)
    assert signed.exit_code == 0, signed.output
    assert (release / "signatures" / signature_name(bob.key_id)).is_file()
    assert run("verify", release, "--trust", trust).exit_code == 0

    again = run("sign", release, "--key", bob.private_path)
    assert_one_line_error(again, "destination_exists", release / "signatures" / signature_name(bob.key_id))


def test_verify_failure_is_one_line_naming_the_file(signed_release: Path, trust: Path) -> None:
    target = signed_release / "catalogue" / "assets" / "prompts" / "brief.md"
    target.write_bytes(target.read_bytes().upper())
    result = run("verify", signed_release, "--trust", trust)
    line = assert_one_line_error(result, "file_digest_mismatch", target)
    assert "SHA-256" in line


def test_verify_json_failure(signed_release: Path, trust: Path) -> None:
    (signed_release / "catalogue" / "extra.md").write_text("x")
    result = run("verify", signed_release, "--trust", trust, "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data == {
        "ok": False,
        "error": {
            "code": "file_unlisted",
            "message": data["error"]["message"],
            "path": str(signed_release / "catalogue" / "extra.md"),
        },
    }


def test_verify_profile_and_scope_options(signed_release: Path, trust: Path) -> None:
    assert run("verify", signed_release, "--trust", trust, "--scope", "example.demo").exit_code == 0
    wrong = run("verify", signed_release, "--trust", trust, "--profile", "other")
    assert_one_line_error(wrong, "scope_mismatch", signed_release / "manifest.json")


def test_build_refuses_existing_release(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    args = ("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel")
    assert run(*args).exit_code == 0
    result = run(*args)
    assert_one_line_error(result, "release_exists", tmp_path / "rel" / "demo-0.1.0")


def test_build_reports_catalogue_errors_by_source_file(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    schema = scaffold / "schemas" / "summary.schema.json"
    schema.write_text('{"type": 7}')
    result = run("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel")
    assert_one_line_error(result, "schema_invalid", schema)
    assert not (tmp_path / "rel" / "demo-0.1.0").exists()


def test_bad_key_file(tmp_path: Path, scaffold: Path) -> None:
    bogus = tmp_path / "bogus.key"
    bogus.write_text("not a key")
    result = run("build", scaffold, "--key", bogus, "--out", tmp_path / "rel")
    assert_one_line_error(result, "key_invalid", bogus)


def test_public_key_is_not_a_signing_key(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    result = run("build", scaffold, "--key", keypair.public_path, "--out", tmp_path / "rel")
    assert_one_line_error(result, "key_invalid", keypair.public_path)


_P256_OID = bytes.fromhex("06082a8648ce3d030107")  # the DER of prime256v1's object identifier
_SM2_OID = bytes.fromhex("06082a811ccf5501822d")  # SM2's (1.2.156.10197.1.301): same length, a curve cryptography lacks


def _sm2_key_files(directory: Path) -> tuple[Path, Path]:
    """A well-formed PEM key pair on a curve cryptography cannot load (its loaders raise UnsupportedAlgorithm)."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    private = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    directory.mkdir(parents=True)
    paths = directory / "sm2.key", directory / "sm2.pub"
    for path, der, label in ((paths[0], private, "PRIVATE KEY"), (paths[1], public, "PUBLIC KEY")):
        body = base64.encodebytes(der.replace(_P256_OID, _SM2_OID)).decode()
        path.write_text(f"-----BEGIN {label}-----\n{body}-----END {label}-----\n")
    return paths


def test_a_key_on_a_curve_cryptography_lacks_is_key_invalid(
    signed_release: Path, scaffold: Path, tmp_path: Path
) -> None:
    """UnsupportedAlgorithm is no ValueError: `build --key` and `verify --trust` printed its traceback."""
    private, public = _sm2_key_files(tmp_path / "sm2")
    built = run("build", scaffold, "--key", private, "--out", tmp_path / "rel")
    assert "is not supported" in assert_one_line_error(built, "key_invalid", private)
    verified = run("verify", signed_release, "--trust", public.parent)
    assert "is not supported" in assert_one_line_error(verified, "key_invalid", public)


def test_missing_trust_store(signed_release: Path, tmp_path: Path) -> None:
    result = run("verify", signed_release, "--trust", tmp_path / "nowhere")
    assert_one_line_error(result, "trust_store_invalid", tmp_path / "nowhere")


def test_usage_errors_exit_2_in_one_line(tmp_path: Path) -> None:
    result = run("verify", tmp_path)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: usage: Missing option '--trust'."
    assert lines[1].startswith("next: add --trust PATH - ") and lines[1].endswith("verify --help'")
    assert len(lines) == 2
    unknown = run("frobnicate")
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("error: usage: No such command")


def test_help_text_for_every_command() -> None:
    for command in ("keygen", "build", "sign", "verify", "inspect", "init"):
        result = run(command, "--help")
        assert result.exit_code == 0
        assert "Usage:" in result.stdout
        assert len(result.stdout.splitlines()) > 6
    bare = subprocess.run([str(RIMTHAN_PACK)], capture_output=True, text=True, timeout=60)
    assert bare.returncode == 2 and bare.stdout == ""
    assert "Commands:" in bare.stderr and bare.stderr.rstrip().endswith(
        "next: run 'rimthan-pack COMMAND', see the list above"
    )
    assert "error: usage: no command given" in bare.stderr


def test_init_refuses_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "notes.md").write_text("mine")
    result = run("init", tmp_path / "src")
    assert_one_line_error(result, "destination_exists", tmp_path / "src")
    assert (tmp_path / "src" / "notes.md").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["notes.md"]


def test_init_rejects_invalid_name(tmp_path: Path) -> None:
    result = run("init", tmp_path / "src", "--name", "Bad Name")
    assert_one_line_error(result, "catalogue_invalid", None)
    result = run("init", tmp_path / "src", "--name", "good-name\n")  # re's "$" would take it
    assert_one_line_error(result, "catalogue_invalid", None)
    assert not (tmp_path / "src").exists()


# --------------------------------------------------------------------------- keygen safety


def test_keygen_writes_private_key_0600_and_refuses_overwrite(tmp_path: Path) -> None:
    result = run("keygen", "--out", tmp_path / "k" / "dev")
    assert result.exit_code == 0, result.output
    private, public = tmp_path / "k" / "dev.key", tmp_path / "k" / "dev.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    # PKCS#8 label ("BEGIN PRIVATE KEY"), spelt as words so no key-block marker stands in the tree
    assert private.read_text().splitlines()[0].split() == ["-----BEGIN", "PRIVATE", "KEY-----"]
    assert isinstance(serialization.load_pem_private_key(private.read_bytes(), password=None), Ed25519PrivateKey)
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    key_id = result.stdout.split("key id")[1].split()[0]
    assert len(key_id) == 64

    before = private.read_bytes()
    again = run("keygen", "--out", tmp_path / "k" / "dev")
    assert_one_line_error(again, "destination_exists", private)
    assert private.read_bytes() == before


def test_keygen_mode_ignores_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        assert run("keygen", "--out", tmp_path / "dev").exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "dev.key").stat().st_mode) == 0o600


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    return git_work_tree(tmp_path / "repo")


def test_keygen_refuses_path_git_would_track(git_repo: Path) -> None:
    target = git_repo / "keys" / "dev"
    result = run("keygen", "--out", target)
    assert_one_line_error(result, "key_path_tracked", git_repo / "keys" / "dev.key")
    assert not (git_repo / "keys" / "dev.key").exists()
    assert not (git_repo / "keys" / "dev.pub").exists()


def test_keygen_allows_git_ignored_path(git_repo: Path) -> None:
    (git_repo / ".gitignore").write_text("/keys/local/\n")
    result = run("keygen", "--out", git_repo / "keys" / "local" / "dev")
    assert result.exit_code == 0, result.output
    assert (git_repo / "keys" / "local" / "dev.key").is_file()


def test_keygen_refuses_tracked_even_if_ignored(git_repo: Path) -> None:
    (git_repo / "secret").mkdir()
    (git_repo / "secret" / "dev.key").write_text("placeholder")
    subprocess.run(["git", "-C", str(git_repo), "add", "secret/dev.key"], check=True)
    (git_repo / "secret" / "dev.key").unlink()
    (git_repo / ".gitignore").write_text("*.key\n")
    result = run("keygen", "--out", git_repo / "secret" / "dev")
    assert_one_line_error(result, "key_path_tracked", git_repo / "secret" / "dev.key")


# --------------------------------------------------------------------------- the installed entry point


def test_installed_entry_point(tmp_path: Path) -> None:
    assert RIMTHAN_PACK.is_file(), f"{RIMTHAN_PACK} is not installed (run uv sync)"
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}

    def pack(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(RIMTHAN_PACK), *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
        )

    assert pack("init", "src").returncode == 0
    assert pack("keygen", "--out", "keys/dev").returncode == 0
    built = pack("build", "src", "--key", "keys/dev.key", "--json")
    assert built.returncode == 0, built.stderr
    release = Path(json.loads(built.stdout)["release"])
    assert release == Path("releases/src-0.1.0")
    assert pack("verify", release, "--trust", "keys").returncode == 0

    (tmp_path / release / "catalogue" / "catalogue.toml").write_text("tampered")
    failed = pack("verify", release, "--trust", "keys")
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: file_size_mismatch: releases/src-0.1.0/catalogue/catalogue.toml: ")
    assert "Traceback" not in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 2


def _declare(source: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """``change`` applied to the desk-research step of a copy of the packaged 1.2.0 workflow; the file edited."""
    workflow = source / "workflows" / "research-decision.toml"
    data = tomllib.loads(workflow.read_text("utf-8"))
    change(next(s for s in data["steps"] if s["id"] == "desk-research"))
    workflow.write_text(tomli_w.dumps(data), "utf-8")
    return workflow


def _sum_of_outputs(total: int) -> Callable[[dict[str, Any]], None]:
    """No max_total_bytes; the two outputs' max_bytes sum to ``total``."""

    def change(step: dict[str, Any]) -> None:
        del step["max_total_bytes"]
        step["outputs"][0]["max_bytes"] = total - step["outputs"][1]["max_bytes"]

    return change


_BOUND = MAX_STEP_ARTIFACT_BYTES
_PAST_THE_BOUND = {
    "an output's max_bytes": (
        lambda step: step["outputs"][1].update(max_bytes=_BOUND + 1),
        f"step desk-research: output findings max_bytes = {_BOUND + 1} is past the {_BOUND} bytes",
    ),
    "max_total_bytes": (
        lambda step: step.update(max_total_bytes=_BOUND + 1),
        f"step desk-research: max_total_bytes = {_BOUND + 1} is past the {_BOUND} bytes",
    ),
    "the outputs' sum without max_total_bytes": (
        _sum_of_outputs(_BOUND + 1),
        f"step desk-research: its outputs' max_bytes sum to {_BOUND + 1}, past the {_BOUND} bytes",
    ),
}


@pytest.mark.parametrize("case", list(_PAST_THE_BOUND))
def test_build_refuses_a_step_declaring_more_than_one_call_carries(tmp_path: Path, keypair: KeyPair, case: str) -> None:
    """A release declaring artifacts past MAX_STEP_ARTIFACT_BYTES built, then failed every prepare over HTTP (413)."""
    change, said = _PAST_THE_BOUND[case]
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.2.0"), source)
    workflow = _declare(source, change)
    result = run("build", source, "--key", keypair.private_path, "--out", tmp_path / "rel")
    line = assert_one_line_error(result, "catalogue_invalid", workflow)
    assert said in line, line
    assert not (tmp_path / "rel").exists() or not any((tmp_path / "rel").iterdir())


@pytest.mark.parametrize(
    "change",
    [
        lambda step: (step.update(max_total_bytes=_BOUND), step["outputs"][0].update(max_bytes=_BOUND)),
        _sum_of_outputs(_BOUND),
    ],
    ids=["max_total_bytes-and-max_bytes-at-the-bound", "outputs-summing-to-the-bound"],
)
def test_build_and_verify_take_a_step_declaring_exactly_the_bound(
    tmp_path: Path, keypair: KeyPair, trust: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.2.0"), source)
    _declare(source, change)
    built = run("build", source, "--key", keypair.private_path, "--out", tmp_path / "rel", "--json")
    assert built.exit_code == 0, built.output
    verified = run("verify", json.loads(built.stdout)["release"], "--trust", trust)
    assert verified.exit_code == 0, verified.output
