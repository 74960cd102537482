"""``make interop`` step 3: the official conformance suite against ``rimthan-mcp serve --transport http``.

Every server scenario (``--suite all``) with interop/expected-failures.yml as the baseline: each entry needs a
one-line reason and must still fail, every other scenario must pass without a warning, and the scenarios that
need no fixture of the reference server (:data:`GENERIC`) must have a passing check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from interop_world import HERE, Report, SetupError, World, run
from npm_tools import CONFORMANCE, NODE22, node_env

EXPECTED_FAILURES = HERE / "expected-failures.yml"
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
