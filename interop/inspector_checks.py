"""``make interop`` step 4: the MCP Inspector CLI in both protocol eras over stdio and stateless HTTP.

Per era and transport: initialize (the negotiated version), tools/list with ``--strict`` (the four tools, no
schema-portability finding), resources/list and resources/read of every contract (the digest its URI names),
prompts/list, and tools/call of rimthan.start_workflow with the example confirmed state.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from interop_world import Report, World, run
from npm_tools import INSPECTOR, NODE22, node_env
from rimthan_host.harness import HostProfile
from rimthan_workflow_mcp.contract_schemas import CONTRACTS
from rimthan_workflow_registry.canonical import digest_value

WORKFLOW, WORKFLOW_VERSION, SETUP_STEP = "research", "1.2.0", "setup-workspace"
TOOLS = [
    "rimthan.start_workflow",
    "rimthan.continue_workflow",
    "rimthan.prepare_step_validation",
    "rimthan.submit_step_validation",
]
ERAS = {"legacy": "2025-11-25", "modern": "2026-07-28"}


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
