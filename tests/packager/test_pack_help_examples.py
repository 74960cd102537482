"""Every example in ``rimthan-pack``'s ``--help`` runs as written against a fresh project.

The examples are read from the installed console script's help output (so
help cannot drift from the CLI), with only the placeholders the help itself
names substituted (SOURCE, RELEASE). Each runs in its own copy of a project
laid out as the README describes; ``init``'s examples run in sequence because
its last one builds what its first one made.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

BIN = Path(sys.executable).parent
PACKAGED = Path(__file__).resolve().parents[2] / "catalogues" / "research-decision" / "1.3.0"
SUBSTITUTE = {"SOURCE": "catalogues/research-decision/1.3.0", "RELEASE": "releases/research-decision-1.3.0"}
# push and pull talk to an OCI registry: tests/docs/test_doc_examples.py runs their help examples against real ones.
NEEDS_A_REGISTRY = ("push", "pull")
COMMANDS = ("keygen", "check", "build", "sign", "verify", "inspect", "init")


def pack(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "rimthan-pack"), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def help_examples(command: str) -> list[str]:
    text = pack(command, "--help", cwd=Path.cwd()).stdout
    block = text.split("Examples:", 1)[1].split("\n\n", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.strip().splitlines()]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two project states: sources and keys only, and the same with the packaged release built."""
    bare = tmp_path_factory.mktemp("bare")
    shutil.copytree(PACKAGED, bare / "catalogues/research-decision/1.3.0")
    for name in ("dev", "colleague"):  # as make demo and docs/host-kit.md lay them out: private half out of keys/local
        assert pack("keygen", "--out", f"private-keys/{name}", "--trust-dir", "keys/local", cwd=bare).returncode == 0
    for prefix in ("a", "b"):
        assert pack("keygen", "--out", prefix, cwd=bare).returncode == 0
    keys = []
    for pub in ("keys/local/dev.pub", "keys/local/colleague.pub", "a.pub", "b.pub"):
        shutil.copyfile(bare / pub, bare / "keys" / Path(pub).name)
        keys.append({"name": Path(pub).stem, "file": Path(pub).name})
    (bare / "keys/trust.toml").write_text(tomli_w.dumps({"threshold": 1, "keys": keys}), "utf-8")
    built = tmp_path_factory.mktemp("built") / "project"
    shutil.copytree(bare, built)
    assert pack("build", SUBSTITUTE["SOURCE"], "--key", "private-keys/dev.key", cwd=built).returncode == 0
    shutil.copytree(PACKAGED.parent / "1.2.0", built / "catalogues/research-decision/1.2.0")  # inspect --against it
    assert (
        pack("build", "catalogues/research-decision/1.2.0", "--key", "private-keys/dev.key", cwd=built).returncode == 0
    )
    return {"bare": bare, "built": built}


def _run(example: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = [SUBSTITUTE.get(w, w) for w in shlex.split(example)]
    env = {**os.environ, "HOME": str(cwd / "home")}
    while "=" in words[0]:  # VAR=value prefixes, as a shell would take them
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0] == "rimthan-pack", example
    words = [os.path.expanduser(w).replace(str(Path.home()), env["HOME"]) if w.startswith("~") else w for w in words]
    return pack(*words[1:], cwd=cwd, env=env)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_example_runs(command: str, project: dict[str, Path], tmp_path: Path) -> None:
    examples = help_examples(command)
    assert examples and all(e.split()[0] in ("rimthan-pack",) or "=" in e.split()[0] for e in examples)
    state = "built" if command in ("sign", "verify", "inspect") else "bare"
    fresh = tmp_path / "project"
    if command == "init":
        shutil.copytree(project[state], fresh)
    for example in examples:
        if command != "init":
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.copytree(project[state], fresh)
        done = _run(example, fresh)
        assert done.returncode == 0, (example, done.stderr)
        assert "error:" not in done.stderr, (example, done.stderr)


def test_examples_that_need_a_registry_are_the_only_ones_not_run_here() -> None:
    listed = pack("--help", cwd=Path.cwd()).stdout.split("Commands:", 1)[1].split()
    commands = {word for word in listed if word.isalpha() and word.islower() and word in (*COMMANDS, *NEEDS_A_REGISTRY)}
    assert commands == {*COMMANDS, *NEEDS_A_REGISTRY}
    for command in NEEDS_A_REGISTRY:
        assert all(" oci://" in e for e in help_examples(command))
