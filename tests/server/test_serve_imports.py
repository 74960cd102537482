"""``rimthan-mcp`` imports only what the command it runs needs.

A server start is mostly imports (P5 in docs/performance.md): serving a
release directory must not pay for the OCI client (oras, requests), and
``keys`` and ``audit``, which never serve, must not pay for the MCP SDK or the
transports. Checked in a fresh interpreter that imports the CLI module the
console script runs, then runs a real command through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from rimthan_host.harness import client_caller
from rimthan_workflow_mcp.loading import engine_module, load_release
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import VerifiedRelease, load_trust
from rimthan_workflow_registry.run import CheckpointKeyring
from support.processes import serve_options
from support.servers import ServerWorld, harness, stdio_client_for

_SERVER = "rimthan_workflow_mcp.server"
_REGISTRY = ("oras", "requests")


def _modules_after(*argv: str) -> set[str]:
    """The modules loaded once ``rimthan-mcp ARGV`` ran (it may exit with any status)."""
    probe = (
        "import json, sys\n"
        "from rimthan_workflow_mcp.entry import main\n"
        f"sys.argv = ['rimthan-mcp', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def _modules_on_import(module: str) -> set[str]:
    """The modules loaded once a fresh interpreter imported ``module``."""
    probe = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_server_cli_imports_no_registry_client_and_no_sdk_until_it_serves() -> None:
    modules = _modules_on_import("rimthan_workflow_mcp.cli")
    assert "rimthan_workflow_mcp.cli" in modules  # the control: the probe did import the CLI
    assert not _top(modules) & {*_REGISTRY, "mcp", "uvicorn"}
    assert _SERVER not in modules and "rimthan_workflow_registry.release.oci" not in modules


def test_loading_releases_imports_no_http_stack() -> None:
    """The provider (what ``check`` and a server's load run; P1 and P1m measure it) logs through ``logs``, which
    knows the HTTP stack's peer faults by name: importing it costs no starlette or anyio (90 modules, 6 MB)."""
    modules = _modules_on_import("rimthan_workflow_mcp.provider")
    assert "rimthan_workflow_mcp.logs" in modules  # the control: the provider's logging was imported
    assert not _top(modules) & {"starlette", "anyio", "uvicorn", "mcp"}, sorted(_top(modules))


def test_help_imports_neither_the_verifier_nor_the_keys_code() -> None:
    """``rimthan-mcp --help`` and ``serve --help`` print usage: no release verification, trust store
    (cryptography), checkpoint keys or provider is imported for that."""
    for argv in (("--help",), ("serve", "--help")):
        modules = _modules_after(*argv)
        assert "rimthan_workflow_mcp.cli_keys" in modules  # the control: the CLI and its commands were imported
        heavy = {
            m for m in modules if m.startswith(("rimthan_workflow_registry.release.", "rimthan_workflow_registry.run."))
        }
        assert sorted(heavy) == [] and "rimthan_workflow_mcp.provider" not in modules
        assert not _top(modules) & {"cryptography", "rfc8785", "jsonschema", "mcp"}


def test_keys_and_audit_run_without_the_mcp_sdk(tmp_path: Path) -> None:
    state = tmp_path / "state"
    keys = _modules_after("keys", "list", "--state-dir", str(state))
    audit = _modules_after("audit", str(tmp_path / "missing.log"), "--checkpoint-keys", str(tmp_path / "k.json"))
    for modules in (keys, audit):
        assert "rimthan_workflow_mcp.cli_keys" in modules  # the control: the command ran
        assert not _top(modules) & {*_REGISTRY, "mcp", "uvicorn"}, sorted(_top(modules))
        assert _SERVER not in modules


def test_a_server_start_imports_no_jwt_library_until_a_token_is_signed_or_verified() -> None:
    """PyJWT pulls in cryptography's x509, RSA and EC code: a start that only lists tools does not need it."""
    probe = (
        "import json, sys\n"
        "import rimthan_workflow_mcp.cli, rimthan_workflow_mcp.server\n"
        "from rimthan_workflow_registry.errors import FailureCode, TokenError\n"
        "from rimthan_workflow_registry.run import CheckpointKeyring\n"
        "before = sorted(sys.modules)\n"
        "ring = CheckpointKeyring.generate()\n"
        "token = ring.sign({'iat': 1}, 'rimthan-checkpoint+jwt')\n"
        "assert ring.verify(token, 'rimthan-checkpoint+jwt', FailureCode.CHECKPOINT_INVALID)['iat'] == 1\n"
        "forged = token[:-2] + ('AA' if token[-2:] != 'AA' else 'BA')\n"
        "try:\n    ring.verify(forged, 'rimthan-checkpoint+jwt', FailureCode.CHECKPOINT_INVALID)\n"
        "except TokenError:\n    pass\nelse:\n    raise SystemExit('a forged token verified')\n"
        "print(json.dumps([before, sorted(sys.modules)]))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    before, after = (set(m) for m in json.loads(result.stdout.strip().splitlines()[-1]))
    assert "rimthan_workflow_mcp.server" in before  # the control: the probe imported the server
    assert not _top(before) & {"jwt"} and "cryptography.x509" not in before
    assert "jwt" in after  # loaded on first use, and the token round trip above used it


def test_the_benchmarks_measure_processes_that_compile_nothing_from_source() -> None:
    """P2 and P5 time processes with ``PYTHONDONTWRITEBYTECODE`` set on the benchmark VM: a module without a
    fresh ``.pyc`` would be compiled on every start. After the benchmark's own compile step, none of the modules
    a serving start imports (the stdio wire and the release pipeline included) or ``rimthan-pack build`` imports
    is."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    compile_step = "from benchmarks.bytecode import compile_bytecode; compile_bytecode()"
    subprocess.run([sys.executable, "-c", compile_step], cwd=root, env=env, check=True, timeout=600)
    probe = (
        "import importlib.util, json, os, sys\n"
        "import rimthan_workflow_mcp.cli, rimthan_workflow_mcp.server, rimthan_workflow_mcp.stdio_transport\n"
        "import rimthan_workflow_mcp.http_transport\n"
        "import rimthan_workflow_mcp.stdio_pipes, rimthan_workflow_registry.release.file_pipeline\n"
        "import benchmarks.echo_server, rimthan_packager.cli, rimthan_packager.build\n"
        "def stale(f):\n"
        "    c = importlib.util.cache_from_source(f)\n"
        "    return not os.path.exists(c) or os.path.getmtime(c) < os.path.getmtime(f)\n"
        "files = [getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]\n"
        "files = [f for f in files if f.endswith('.py')]\n"
        "print(json.dumps([len(files), sorted(f for f in files if stale(f))]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    imported, stale = json.loads(result.stdout.strip().splitlines()[-1])
    assert imported > 300  # the control: the probe did import the server, the SDK and their dependencies
    assert stale == []


# What tool calls use and listing tools does not: a serving start must not import any of it.
_CALLS_ONLY = frozenset(
    {
        "rimthan_workflow_mcp.workflow_engine",
        "rimthan_workflow_mcp.results",
        "rimthan_workflow_mcp.migration",
        "rimthan_workflow_registry.workflow_engine",
        "rimthan_workflow_registry.failures",
        *(
            f"rimthan_workflow_registry.run.{name}"
            for name in (
                "checkpoints",
                "token_mac",
                "checkpoint_claims",
                "receipts",
                "issued_tokens",
                "validation_bundle",
                "confirmed_state",
                "host_binding",
                "requirements",
                "artifact_checks",
                "attestations",
                "repository_policy",
            )
        ),
    }
)
# What only ``rimthan-mcp audit`` uses: never imported by serving, not even by a call.
_AUDIT_ONLY = frozenset(
    {
        "rimthan_workflow_mcp.audit_releases",
        "rimthan_workflow_registry.run.audit",
        "rimthan_workflow_registry.run.run_ending",
    }
)
# ``python -c PROBE RECORD serve ...``: the console script's ``main`` with every module the process imports
# appended to RECORD as it is first imported (a meta path finder that only records, then lets the import go on).
_RECORDING_SERVER = (
    "import sys\n"
    "record = open(sys.argv.pop(1), 'a', buffering=1)\n"
    "class Recorder:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        record.write(name + '\\n')\n"
    "sys.meta_path.insert(0, Recorder())\n"
    "record.write('\\n'.join(sys.modules) + '\\n')\n"
    "from rimthan_workflow_mcp.entry import main\n"
    "sys.argv[0] = 'rimthan-mcp'\n"
    "main()\n"
)


def test_a_serving_start_imports_only_what_listing_tools_needs_and_the_first_call_the_rest(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """A real ``serve`` over stdio: nothing tool calls use is imported until tools/list has answered;
    the first call imports it (and answers); the audit code is never imported by serving."""
    record = tmp_path / "imported.txt"
    world = mcp_world
    args = [
        "-c",
        _RECORDING_SERVER,
        str(record),
        "serve",
        *serve_options(world.built["1.2.0"], world.trust, tmp_path / "state"),
    ]

    def imported() -> set[str]:
        return set(record.read_text("utf-8").split())

    async def scenario() -> tuple[set[str], set[str], int]:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with stdio_client_for(args, errlog) as client:
                listed = len((await client.list_tools()).tools)
                at_listing = imported()
                started = await harness(client_caller(client), tmp_path / "p").start(
                    "research", initial_version="1.2.0"
                )
                assert started.release == "research-decision@1.2.0"
                return at_listing, imported(), listed

    at_listing, after_call, listed = anyio.run(scenario)
    assert listed == 4 and "rimthan_workflow_mcp.server" in at_listing  # the control: a server did list its tools
    assert "rimthan_workflow_registry.run.tokens" in at_listing  # the checkpoint keys are loaded at start
    assert sorted(at_listing & (_CALLS_ONLY | _AUDIT_ONLY)) == []
    assert sorted(_CALLS_ONLY - after_call) == []  # the first call imported them, and was answered
    assert sorted(after_call & _AUDIT_ONLY) == []


# What only serving over HTTP uses: our HTTP modules, and what only they import (uvicorn's HTTP protocol and h11).
# The SDK's own server module imports uvicorn's server and config and starlette (its HTTP transport): the echo
# floor P5 compares with imports those too, so they are not ours to leave out.
_HTTP_ONLY_PREFIXES = ("rimthan_workflow_mcp.http_", "uvicorn.protocols", "h11")
_HTTP_ONLY = frozenset(
    {
        "rimthan_workflow_mcp.port_claims",
        "rimthan_workflow_mcp.session_room",
        "rimthan_workflow_mcp.health",
    }
)


def test_a_stdio_start_imports_nothing_of_the_http_transport(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A real ``serve`` over stdio, through the console script's ``main``: until tools/list has answered, no module
    of the HTTP transport is imported (P5 times that start)."""
    record = tmp_path / "imported.txt"
    options = serve_options(mcp_world.built["1.2.0"], mcp_world.trust, tmp_path / "state")
    args = ["-c", _RECORDING_SERVER, str(record), "serve", *options]

    async def scenario() -> int:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with stdio_client_for(args, errlog) as client:
                return len((await client.list_tools()).tools)

    listed = anyio.run(scenario)
    imported = set(record.read_text("utf-8").split())
    assert listed == 4 and "rimthan_workflow_mcp.stdio_serve" in imported  # the control: it served over stdio
    http = {m for m in imported if m in _HTTP_ONLY or m.startswith(_HTTP_ONLY_PREFIXES)}
    assert sorted(http) == []


def test_a_loaded_release_builds_its_engine_once_on_first_use_whichever_thread_asks(mcp_world: ServerWorld) -> None:
    """Calls run on worker threads: the first ones to reach a release share one engine, built once."""
    built: list[WorkflowEngineQueryModule] = []

    def factory(release: VerifiedRelease, keyring: CheckpointKeyring) -> WorkflowEngineQueryModule:
        built.append(engine_module(release, keyring))
        return built[-1]

    trust = load_trust(mcp_world.trust)
    loaded = load_release(mcp_world.built["1.2.0"], trust, CheckpointKeyring.generate(), factory)
    assert built == []  # loading verified the release and built nothing for calls
    together = threading.Barrier(8)

    def first_use(_: int) -> WorkflowEngineQueryModule:
        together.wait()
        return loaded.module

    with ThreadPoolExecutor(8) as pool:
        modules = list(pool.map(first_use, range(8)))
    assert len(built) == 1 and all(module is built[0] for module in modules)

    def not_an_engine(release: VerifiedRelease, keyring: CheckpointKeyring) -> WorkflowEngineQueryModule:
        return object()  # type: ignore[return-value]

    odd = load_release(mcp_world.built["1.2.0"], trust, CheckpointKeyring.generate(), not_an_engine)
    with pytest.raises(RegistryError) as refused:
        _ = odd.module
    assert refused.value.code is FailureCode.INTERNAL_ERROR
    assert "is not served by WorkflowEngineQueryModule" in refused.value.message
