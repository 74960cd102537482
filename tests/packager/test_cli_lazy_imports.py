"""CLI start-up imports only what the command needs: help and usage errors never load the verifier.

Every Python CLI pays its imports on each run; jsonschema (with its
metaschema registry), the MCP SDK, tqdm and the verifier are needed only by
the commands that build or verify, so ``rimthan-pack verify --help`` must run
without them (checked in a fresh interpreter, through the CLI's own entry point).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_workflow_registry.limits import _TOML_AT as TOML_ERROR_POSITION
from rimthan_workflow_registry.release import RELEASE_DIR_NAME
from support.pack_probe import pack_probe
from support.releases import KeyPair, packaged_source

HEAVY = (
    "jsonschema",
    "mcp",
    "tqdm",
    "oras",
    "requests",
    "rimthan_workflow_registry.release.verify",
    "rimthan_packager.build",
    "rimthan_packager.staging",
    "rimthan_packager.cosign",
)


def _run(*argv: str) -> tuple[str, int, set[str]]:
    run = pack_probe(*argv)
    return run.stdout, run.code, run.modules


@pytest.mark.parametrize(
    "argv", [("verify", "--help"), ("build", "--help"), ("push", "--help"), ("--help",), ("verify",)]
)
def test_help_and_usage_errors_import_no_heavy_module(argv: tuple[str, ...]) -> None:
    out, code, modules = _run(*argv)
    assert code in (0, 2)
    assert "Usage: rimthan-pack" in out or code == 2
    assert not {m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY}


def test_verify_still_loads_the_verifier_when_it_runs(tmp_path: object) -> None:
    out, code, modules = _run("verify", str(tmp_path), "--trust", str(tmp_path))
    assert code == 1
    assert "rimthan_workflow_registry.release.verify" in modules


def test_a_build_without_a_progress_bar_does_not_import_tqdm(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """stderr is not a terminal here, so no bar is drawn, and tqdm (with multiprocessing) is never imported."""
    _, code, modules = _run("build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "r"))
    assert code == 0
    assert "rimthan_packager.build" in modules
    assert "tqdm" not in modules


# What a small build never needs: the fallback fsync pool (and logging with it), keygen's git check, tempfile,
# the self-check's two-thread pipeline for large releases (with queue), cryptography's OpenSSH key code
# (PEM keys are read through rimthan_workflow_registry.pem_keys), and hashlib and hmac, which load the system's
# libcrypto beside cryptography's own (SHA-256 comes from cryptography; the work directory's name from os.urandom),
# difflib (only a refusal's "did you mean" hint) and the unicode_escape codec (control characters are escaped from
# a table written out); shlex (a next step's shell words), heapq (failures that do not stop a check) and select (a
# broken pipe), needed only when something fails; rfc8785 (a build writes no value outside the C encoder's
# subset); the ascii codec (the umask is read from /proc as bytes); state_formats (only a schema-check cache another
# version wrote); dir_name (a release directory's name, checked where it could claim one: the self-check's hidden
# work directory claims none); and the modules of the commands other than build (check, sign, keygen and init,
# inspect and verify, push and pull), which the group imports only when one of them is run or listed.
NOT_ON_THE_BUILD_PATH = (
    "concurrent.futures",
    "logging",
    "subprocess",
    "tempfile",
    "shutil",
    "queue",
    "rimthan_workflow_registry.release.file_pipeline",
    "cryptography.hazmat.primitives.serialization",
    "cryptography.hazmat.primitives.serialization.ssh",
    "bcrypt",
    "hashlib",
    "_hashlib",
    "hmac",
    "secrets",
    "difflib",
    "encodings.unicode_escape",
    "shlex",
    "heapq",
    "select",
    "rfc8785",
    "encodings.ascii",
    "rimthan_packager.cli_author",
    "rimthan_packager.cli_check",
    "rimthan_packager.cli_inspect",
    "rimthan_packager.cli_oci",
    "rimthan_packager.cli_sign",
    "rimthan_workflow_registry.not_utf8",
    "rimthan_workflow_registry.state_formats",
    "rimthan_workflow_registry.release.dir_name",
)


def test_a_build_imports_no_module_only_other_paths_need(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """A rebuild (nothing new to remember) where the file system has ``syncfs``: none of those modules is loaded."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    key = str(keypair.private_path)
    for out in ("a", "b"):
        run = pack_probe("build", str(scaffold), "--key", key, "--out", str(tmp_path / out), env=env)
        assert run.code == 0, run.stderr
    assert not {m for m in run.modules if m in NOT_ON_THE_BUILD_PATH}


# Records every dataclass the process creates (Python compiles each one's generated methods: about 3.7 M
# instructions, 0.7% of a 1 MiB build).
_RECORD_DATACLASSES = """
import dataclasses
made = report.setdefault("dataclasses", [])
process_class = dataclasses._process_class
def _recorded(cls, *args):
    made.append(cls.__qualname__)
    return process_class(cls, *args)
dataclasses._process_class = _recorded
"""


# Made only by keygen or inspect, or only for a refusal or a warning a passing build with a 0600 key never gives
# (Unpullable: a release past a bound an OCI pull takes; NotUtf8: a file that is not UTF-8; ReleaseDiff,
# WorkflowChange and KeptVersion: inspect --against, or a build into a directory holding an older release of the
# catalogue; NewerFormat: a schema-check cache a newer version wrote).
NOT_MADE_BY_A_BUILD = {
    "GeneratedKey",
    "ReleaseInspection",
    "KeyFileExposure",
    "KeyFileKind",
    "StrayExample",
    "UnreferencedSchema",
    "Unpullable",
    "NotUtf8",
    "ReleaseDiff",
    "WorkflowChange",
    "KeptVersion",
    "NewerFormat",
}


def test_a_build_creates_no_dataclass_it_never_makes(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """Their types live beside the commands that make them (keygen, inspect), or in modules imported only for the
    refusal or warning that makes them (a stray example, an unreferenced schema, a key file others can read)."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = ("build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "r"))
    run = pack_probe(*argv, prelude=_RECORD_DATACLASSES, env=env)
    assert run.code == 0, run.stderr
    made = set(run.report["dataclasses"])
    assert {"BuildResult", "Catalogue", "FileEntry"} <= made  # the recording sees the build's own
    assert not made & NOT_MADE_BY_A_BUILD


@pytest.mark.parametrize("catalogue", ["scaffold", "packaged 1.2.0"])
def test_a_rebuild_whose_schemas_passed_before_never_imports_jsonschema(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, catalogue: str
) -> None:
    """The schema checks run (with jsonschema) on bytes never seen; a rebuild remembers the passes and skips them.

    The checks: each schema against the metaschema, and (the packaged
    catalogue asks a question) each choice and branch value against its
    field's schema. The self-check verifies the release it wrote without
    jsonschema too: the manifest's shape is checked in plain Python, and
    jsonschema is loaded only to explain a refusal.
    """
    source = scaffold if catalogue == "scaffold" else packaged_source("1.2.0")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    key = str(keypair.private_path)
    first = pack_probe("build", str(source), "--key", key, "--out", str(tmp_path / "a"), env=env)
    assert first.code == 0, first.stderr
    assert "jsonschema" in first.modules
    again = pack_probe("build", str(source), "--key", key, "--out", str(tmp_path / "b"), env=env)
    assert again.code == 0, again.stderr
    assert not {m for m in again.modules if m.split(".")[0] in ("jsonschema", "referencing", "jsonschema_rs")}


def test_the_entry_point_leaves_its_objects_frozen_to_the_exit(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    """After ``main`` (a build that succeeded, and a refusal) the objects are frozen: the exit collects none of them.

    The release is built as ever; only the interpreter's last collection, which frees nothing the process's end
    would not, is skipped.
    """
    code = (
        "import gc, json, sys\n"
        "from rimthan_packager.cli import main\n"
        "sys.argv = ['rimthan-pack', *json.loads(sys.argv[1])]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(json.dumps([code, gc.get_freeze_count()]), file=sys.stderr)\n"
    )
    key = str(keypair.private_path)
    built = ["build", str(scaffold), "--key", key, "--out", str(tmp_path / "r"), "--json"]
    refused = ["verify", str(tmp_path / "missing"), "--trust", str(tmp_path)]
    for argv, expected in ((built, 0), (refused, 1)):
        run = subprocess.run(
            [sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, timeout=120
        )
        status, frozen = json.loads(run.stderr.strip().splitlines()[-1])
        assert status == expected, run.stderr
        assert frozen > 0
        if argv is built:
            assert json.loads(run.stdout)["ok"] is True


def test_keygen_and_init_never_load_ctypes(tmp_path: Path) -> None:
    """``ctypes`` (``syncfs``, ``renameat2``) is imported on first use: only a command that flushes or publishes."""
    made = pack_probe("keygen", "--out", str(tmp_path / "keys" / "k"))
    assert made.code == 0, made.stderr
    scaffolded = pack_probe("init", str(tmp_path / "catalogues" / "demo" / "0.1.0"))
    assert scaffolded.code == 0, scaffolded.stderr
    assert "ctypes" not in made.modules | scaffolded.modules


def test_a_command_registered_elsewhere_is_imported_when_it_is_looked_up() -> None:
    """check (cli_check), sign (cli_sign), keygen, init (cli_author), inspect, verify (cli_inspect), push, pull
    (cli_oci): run, asked for help or listed, each is there, and a command imports only its own module."""
    elsewhere = {f"rimthan_packager.cli_{name}" for name in ("author", "check", "inspect", "oci", "sign")}
    inspected = pack_probe("inspect", "--help")
    assert inspected.code == 0, inspected.stderr
    assert "Usage: rimthan-pack inspect [OPTIONS] RELEASE" in inspected.stdout
    assert "rimthan_packager.cli_inspect" in inspected.modules
    assert not inspected.modules & {"rimthan_packager.cli_oci", "rimthan_packager.cli_author"}
    verified = pack_probe("verify", "/nonexistent/release", "--trust", "/nonexistent")
    assert verified.code == 1
    assert verified.stderr.startswith("error: ")
    assert "rimthan_packager.cli_author" not in verified.modules
    listed = pack_probe("--help")
    assert listed.code == 0, listed.stderr
    commands = listed.stdout.split("Commands:")[1].split("Exit status:")[0]
    names = [line.split()[0] for line in commands.splitlines() if line.strip()]
    assert names == ["build", "check", "init", "inspect", "keygen", "pull", "push", "sign", "verify"]
    checked = pack_probe("check", "/nonexistent/source")
    assert checked.code == 1
    assert checked.stderr.startswith("error: catalogue_invalid: ")
    assert checked.modules & elsewhere == {"rimthan_packager.cli_check"}
    signed = pack_probe("sign", "--help")
    assert signed.code == 0, signed.stderr
    assert "Usage: rimthan-pack sign [OPTIONS] RELEASE" in signed.stdout
    assert signed.modules & elsewhere == {"rimthan_packager.cli_sign"}
    pulled = pack_probe("pull", "oci://127.0.0.1:1/rimthan/x:1.0.0", "--trust", "/nonexistent", "--out", "/nonexistent")
    assert pulled.code == 1
    assert pulled.stderr.startswith("error: ")


# Records the text of every regular expression the process compiles or looks up in re's cache.
_RECORD_PATTERNS = """
import re
patterns = report.setdefault("patterns", [])
compile_pattern = re._compile
def _recorded(pattern, flags):
    patterns.append(pattern if isinstance(pattern, str) else repr(pattern))
    return compile_pattern(pattern, flags)
re._compile = _recorded
"""


def test_a_build_compiles_no_pattern_only_a_refusal_needs(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """Where a TOML syntax error is (tomllib's "(at line L, column C)") is read only for that refusal; a release
    directory's name claims an identity only where it is not hidden, as the self-check's work directory is."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = ("build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "r"))
    run = pack_probe(*argv, prelude=_RECORD_PATTERNS, env=env)
    assert run.code == 0, run.stderr
    compiled = set(run.report["patterns"])
    assert r"[\x00-\x1f\x7f]" in compiled  # the recording sees the build's own (a path's control characters)
    assert TOML_ERROR_POSITION not in compiled
    assert RELEASE_DIR_NAME.pattern not in compiled  # the self-check's work directory is hidden: it claims no name
    slip = tmp_path / "slip"
    shutil.copytree(scaffold, slip)
    (slip / "catalogue.toml").write_text("oops = = 1\n", encoding="utf-8")
    refused = pack_probe("build", str(slip), "--key", str(keypair.private_path), "--out", str(tmp_path / "s"), env=env)
    assert refused.code == 1
    assert "next: fix the TOML syntax in catalogue.toml at line 1, column 8" in refused.stderr


def test_a_build_defines_no_other_command(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """Only ``build`` is made (``cli.py``'s one command): the others' click options are never built."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = ("build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "r"))
    run = pack_probe(*argv, env=env)
    assert run.code == 0, run.stderr
    assert run.commands == ["build"]
