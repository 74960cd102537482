"""Every command example in the README, the docs and the CLIs' ``--help`` runs as written.

The examples are extracted (tests/support/doc_examples.py) from the fenced
shell blocks of README.md, keys/README.md, releases/README.md and docs/, and
from the ``Examples:`` / ``Typical flow:`` blocks of ``rimthan-mcp``,
``rimthan-host`` and ``rimthan-pack`` (its push and pull; the other
subcommands' examples run in tests/packager/test_pack_help_examples.py).
Each runs, with the installed console scripts, in its own copy of a project
laid out as the README describes: the packaged sources, private-keys/dev.key
(and a colleague's key), their public keys in keys/local, the trust store keys/dev.pub, both packaged releases
built and signed into releases/, a state directory under the test's own HOME
(so ``~/.local/state/rimthan`` is the project's) holding the checkpoint keys
of a real run whose log is run.log, rotated once so an older key is
verify-only. Registry examples run against real registries on loopback (TLS,
with the test CA as REQUESTS_CA_BUNDLE, standing in for a public certificate;
and plain HTTP for the 127.0.0.1:5000 example).

Placeholders are substituted (SUBSTITUTIONS below); a long-running ``serve``
is started and must come up (stdio: answer ``initialize``; HTTP: listen, on a
free port instead of 8765) and exit 0 when its client leaves or on SIGTERM.
Everything else must exit 0 without an ``error:`` line. What cannot run here
is in ALLOWLIST with the reason and the test that covers it, and an entry
whose command is no longer shown anywhere fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import rimthan_packager.cli_oci  # noqa: F401  (registers push and pull on the group)
from rimthan_host.serve import main as host_cli
from rimthan_packager.cli import cli as pack_cli
from rimthan_workflow_mcp.cli import main as mcp_cli
from rimthan_workflow_registry.release import load_trust, verify_release
from rimthan_workflow_registry.run import CheckpointKeyring
from support.doc_examples import Example, Prepared, help_examples, markdown_examples, prepare
from support.engines import Engines, TickingClock, drive_migrated
from support.processes import http_server_process
from support.registry import LocalRegistry, TlsFiles, make_tls, start_registry
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, RIMTHAN_PACK

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCS = ("README.md", "keys/README.md", "releases/README.md", "docs/test-vectors/README.md")
PACK_HERE = ("--help", "push", "pull")  # the other subcommands: tests/packager/test_pack_help_examples.py
STATE = "home/.local/state/rimthan"  # the default state directory under the project's HOME
FLOWS = ("rimthan-pack --help",)  # blocks whose commands build on the ones before: run in order, in one project
TIMEOUT = 120

# command as shown -> why it does not run here, and what runs it instead
ALLOWLIST = {
    "make demo": "bootstraps uv and the environment, then rimthan-pack keygen/build/verify (the typical flow of "
    "rimthan-pack --help, run here) and python -m rimthan_host.demo; no test runs the make target itself",
    "make test": "the suite this test belongs to",
    "make serve": "runs `rimthan-mcp serve --releases-dir releases --trust keys/local`: the default "
    "`rimthan-mcp serve` example, started here",
    "make bench": "minutes of benchmarks (benchmarks/); tests/server/test_load_smoke.py runs the load script small",
    "make test-vectors": "rewrites docs/test-vectors/host-protocol.json; its `--check` example runs here and "
    "tests/core/test_host_protocol_vectors.py checks the file",
    "docker build -f deploy/Dockerfile -t rimthan-mcp .": "needs a Docker daemon; "
    "tests/server/test_deploy_dockerfile.py runs the image's build step and checks its entrypoint",
    'docker run --rm -p 8765:8765 -v rimthan-state:/var/lib/rimthan -v "$PWD/keys/trust:/etc/rimthan/trust:ro" '
    '-v "$PWD/secrets/checkpoint-keys.json:/run/secrets/rimthan-checkpoint-keys:ro" rimthan-mcp --releases-from '
    "oci://registry.example/rimthan/research-decision --checkpoint-keys /run/secrets/rimthan-checkpoint-keys "
    "--allowed-host rimthan.example:443 --refresh-interval 60": "needs a Docker daemon; the same serve arguments "
    "run here in docs/fleet.md's --releases-from example; tests/server/test_deploy_dockerfile.py checks the image",
    "claude mcp add --scope project rimthan -- rimthan-host serve": "needs the Claude Code CLI: make interop "
    "(interop/claude_code.py) runs it; tests/host/test_host_install.py starts the command it registers",
    "claude plugin marketplace add ./host/claude-plugin": "needs the Claude Code CLI: make interop "
    "(interop/claude_code.py) runs it; tests/host/test_host_install.py checks the plugin",
    "claude plugin install rimthan@rimthan": "needs the Claude Code CLI: make interop (interop/claude_code.py)",
    "gemini mcp add rimthan rimthan-host serve": "needs the Gemini CLI: make interop (interop/other_hosts.py) runs "
    "it; tests/docs/test_host_kit_other_hosts.py keeps the config it writes as shown",
    "codex mcp add rimthan -- rimthan-host serve": "needs the Codex CLI: make interop (interop/other_hosts.py) runs "
    "it; tests/docs/test_host_kit_other_hosts.py keeps the config it writes as shown",
    "claude plugin install rimthan@rimthan --config require_elicitation=true": "needs the Claude Code CLI; "
    "make interop (interop/claude_code.py) sets the option with the configure line below",
    'echo \'{"require_elicitation": "true"}\' | claude plugin configure rimthan@rimthan --values-stdin': "needs "
    "the Claude Code CLI: make interop (interop/claude_code.py) runs it and finds the bridge's start-up line",
    "kill -HUP <pid>": "needs a running server's pid: tests/server/test_server_provider.py sends SIGHUP to the "
    "pid a real server prints in its `refresh: kill -HUP <pid>` line",
}


def _collect() -> list[Example]:
    docs = [ROOT / d for d in DOCS] + sorted((ROOT / "docs").glob("*.md"))
    examples = [e for doc in docs for e in markdown_examples(doc, ROOT)]
    examples += help_examples("rimthan-mcp", mcp_cli) + help_examples("rimthan-host", host_cli)
    return examples + [
        e for e in help_examples("rimthan-pack", pack_cli) if e.where.rsplit(":", 1)[0].split()[1] in PACK_HERE
    ]


def _is_flow(example: Example) -> bool:
    return example.where.rsplit(":", 1)[0] in FLOWS


def _same_command(examples: list[Example]) -> list[tuple[Example, ...]]:
    """What to run: one command shown in several places runs once; a flow's commands run in order, as one."""
    groups: dict[tuple[object, ...], list[Example]] = {}
    for example in examples:
        shown = prepare(example.command, {})
        key = ("flow", example.where.rsplit(":", 1)[0]) if _is_flow(example) else (shown.script, example.cd)
        groups.setdefault((*key, tuple(sorted(shown.env.items()))), []).append(example)
    return [tuple(group) for group in groups.values()]


EXAMPLES = _collect()
TO_RUN = _same_command([e for e in EXAMPLES if e.command not in ALLOWLIST])


# --------------------------------------------------------------------------- the project


@dataclass(frozen=True)
class Project:
    bare: Path  # sources and keys, no release built yet
    built: Path  # the same with both releases, a run's log and the state directory
    dev: KeyPair
    old_key_id: str  # a verify-only checkpoint key (the signing key before a rotation)


def _pack(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [RIMTHAN_PACK, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, env=env
    )
    assert done.returncode == 0, done.stderr
    return done


def _log_a_run(project: Path, dev: KeyPair) -> None:
    """A real run (started on 1.2.0, migrated to 1.3.0) on the project's releases: run.log and the state's keys."""
    trust = load_trust(project / "keys/local")
    releases = {v: verify_release(project / f"releases/research-decision-{v}", trust) for v in ("1.2.0", "1.3.0")}
    engines = Engines(releases, CheckpointKeyring.generate(), project / ".engines", TickingClock())
    run = drive_migrated(engines, name="documented-run")
    assert run.harness.record.final["status"] == "completed"
    (project / "run.log").write_text("\n".join(run.checkpoints) + "\n", "utf-8")
    engines.keyring.save(project / STATE / "checkpoint-keys.json")
    shutil.rmtree(project / ".engines")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    bare = tmp_path_factory.mktemp("doc-project") / "bare"
    for version in ("1.2.0", "1.3.0"):
        shutil.copytree(packaged_source(version), bare / "catalogues/research-decision" / version)
    dev = make_keypair(bare / "private-keys", "dev")  # as make demo: the private half out of the trust directory
    colleague = make_keypair(bare / "private-keys", "colleague")
    trust_dir(bare / "keys/local", dev, colleague)
    for pair in (dev, colleague):
        pair.public_path.unlink()
    shutil.copyfile(bare / "keys/local/dev.pub", bare / "keys/dev.pub")  # the project's trust store (keys/README.md)
    (bare / "interop").symlink_to(ROOT / "interop")
    built = bare.with_name("built")
    shutil.copytree(bare, built, symlinks=True)
    for version in ("1.2.0", "1.3.0"):
        build_release(packaged_source(version), built / "releases", [dev])
    _log_a_run(built, dev)
    state = built / STATE
    old = json.loads((state / "checkpoint-keys.json").read_text("utf-8"))["signing_key_id"]
    rotated = subprocess.run(
        [RIMTHAN_MCP, "keys", "rotate", "--state-dir", str(state)], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert rotated.returncode == 0, rotated.stderr
    return Project(bare=bare, built=built, dev=dev, old_key_id=old)


@dataclass(frozen=True)
class Registries:
    tls: LocalRegistry
    plain: LocalRegistry
    ca: Path
    digests: dict[str, str]  # repository -> OCI manifest digest of the 1.3.0 pushed there


@pytest.fixture(scope="module")
def registries(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    root = tmp_path_factory.mktemp("doc-registries")
    tls: TlsFiles = make_tls(root / "tls")
    secure = start_registry(root / "tls-registry", tls=tls)
    plain = start_registry(root / "plain-registry")
    try:
        env = {**os.environ, "REQUESTS_CA_BUNDLE": str(tls.ca_cert), "HOME": str(root)}
        digests = {}
        for repository in ("rimthan/research-decision", "rimthan/research"):
            pushed = _pack(
                "push",
                "releases/research-decision-1.3.0",
                secure.ref(repository),
                "--trust",
                "keys/local",
                cwd=project.built,
                env=env,
            )
            digests[repository] = pushed.stdout.strip().splitlines()[-1]
        yield Registries(tls=secure, plain=plain, ca=tls.ca_cert, digests=digests)
    finally:
        secure.stop()
        plain.stop()


def _needs_registry(example: Example) -> bool:
    return "oci://" in example.command


def _substitutions(work: Path, project: Project, registries: Registries | None) -> dict[str, str]:
    """Placeholders (regular expressions) and what they stand for in ``work``, this copy of the project."""
    subs = {
        r"<keyid>": project.dev.key_id,
        r"<old-key-id>": project.old_key_id,
        r"<new-key-id>": project.old_key_id,  # a verify-only key, as `keys add` leaves the one it adds
        r"\bcatalogues/NAME/VERSION\b": "catalogues/research-decision/1.3.0",
        r"\breleases/NAME-VERSION\b": "releases/research-decision-1.3.0",
        r"(?<=push )RELEASE\b": "releases/research-decision-1.3.0",
        r"/srv/rimthan|/path/to/state|\bSTATE_DIR\b": str(work / STATE),
        r"/etc/rimthan/trust\b": "keys/local",
        r"/var/lib/rimthan/releases\b": "followed-releases",
        r"\[(--json)\]": "--json",
    }
    if registries is not None:
        for repository, digest in registries.digests.items():
            subs[rf"(?<={re.escape(repository)})@sha256:<[^>]*>"] = f"@{digest}"
        subs |= {
            r"oci://(registry\.example|registry\.internal:5000)": f"oci://{registries.tls.host}",
            r"oci://127\.0\.0\.1:5000": f"oci://{registries.plain.host}",
            r"/etc/rimthan/registry-ca\.pem": str(registries.ca),
        }
    return subs


def _env(work: Path, registries: Registries | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIMTHAN_") and k != "XDG_STATE_HOME"}
    env |= {"HOME": str(work / "home"), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}
    env |= {"DOCKER_CONFIG": str(work / "home/.docker")}
    env["REQUESTS_CA_BUNDLE"] = str(registries.ca) if registries is not None else ""
    return env


# --------------------------------------------------------------------------- running one example


def _serve(prepared: Prepared, cwd: Path, env: dict[str, str], where: str) -> None:
    """Start a documented ``rimthan-mcp``/``rimthan-host`` ``serve``: it must come up, then exit 0 when its
    client leaves (stdio) or on SIGTERM (HTTP)."""
    argv = [str(BIN / prepared.argv[0]), *prepared.argv[1:]]
    if "http" in argv:  # a free port, so parallel runs never collide on 8765
        argv = [*shlex.split(re.sub(r"--port \d+", "", shlex.join(argv))), "--port", "0"]
        with http_server_process(argv, cwd=cwd, env=env) as server:
            if "--releases-from" in argv:
                server.wait_for(r"following oci://")
        assert server.process.returncode == 0, f"{where}: {shlex.join(argv)}\n{server.stderr()}"
        return
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "docs", "version": "0"}},
    }
    done = subprocess.run(
        argv, input=json.dumps(hello) + "\n", capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT
    )
    said = f"{where}: {shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
    answer = json.loads(done.stdout.splitlines()[0]) if done.stdout.strip() else {}
    assert answer.get("id") == 1 and "serverInfo" in answer.get("result", {}), said
    assert done.returncode == 0 and "error:" not in done.stderr, said


def _shell(prepared: Prepared, cwd: Path, env: dict[str, str], where: str) -> None:
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", prepared.script],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env | prepared.env,
        timeout=TIMEOUT,
    )
    said = f"{where}: {prepared.script}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, said
    assert "error:" not in done.stderr and "Traceback" not in done.stderr, said


def _run(shown: tuple[Example, ...], project: Project, registries: Registries | None, tmp_path: Path) -> None:
    example = shown[0]  # the same command shown elsewhere too runs once; a flow runs every command in order
    commands = (
        [(e.where, e.command) for e in shown]
        if _is_flow(example)
        else [(" ".join(e.where for e in shown), example.command)]
    )
    bare = any(re.search(r"rimthan-pack (build|pull) ", c) for _, c in commands)
    work = tmp_path / "project"
    shutil.copytree(project.bare if bare else project.built, work, symlinks=True)
    env = _env(work, registries)
    subs = _substitutions(work, project, registries)
    for where, command in commands:
        prepared = prepare(command, subs)
        cwd = work / example.cd
        if re.match(r"rimthan-(mcp|host) serve\b", prepared.script):
            _serve(prepared, cwd, env | prepared.env, where)
        else:
            _shell(prepared, cwd, env, where)


@pytest.mark.parametrize("shown", TO_RUN, ids=[" ".join(e.where for e in group) for group in TO_RUN])
def test_the_example_runs_as_written(
    shown: tuple[Example, ...], project: Project, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    registries = request.getfixturevalue("registries") if _needs_registry(shown[0]) else None
    _run(shown, project, registries, tmp_path)


def test_every_allowlisted_command_is_still_shown() -> None:
    shown = {e.command for e in EXAMPLES}
    assert [command for command in ALLOWLIST if command not in shown] == []


def test_examples_come_from_every_source() -> None:
    sources = {e.where.split(":")[0] if ".md" in e.where else e.where.split(" --help")[0] for e in EXAMPLES}
    for expected in (
        "README.md",
        "docs/server.md",
        "docs/fleet.md",
        "rimthan-mcp",
        "rimthan-mcp serve",
        "rimthan-mcp keys retire",
        "rimthan-host serve",
        "rimthan-pack",
        "rimthan-pack push",
        "rimthan-pack pull",
    ):
        assert expected in sources, (expected, sorted(sources))
