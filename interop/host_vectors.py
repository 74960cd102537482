"""Generate the host-protocol test vectors (docs/test-vectors/host-protocol.json).

For harness authors in other languages: the exact values a host must compute
(RFC 8785 value digests, the workspace manifest and its deliveries, output
attestations, validator report bindings) and a short run's checkpoint log,
all produced by Rimthan's own core and engine over the packaged
research-decision 1.2.0 catalogue, so another implementation can check itself
against them byte for byte.

Everything is fixed so the file is reproducible: the release is built with no
creation time (its manifest digest depends only on the catalogue bytes; the
throwaway Ed25519 key that signs it is generated in a temporary directory and
never written anywhere else), the checkpoint HMAC key is a published TEST key
(32 bytes 0xe0..0xff, never to be used by a server; its base64 text holds ``+``, ``/`` and
padding, so it tells the standard alphabet from base64url), and the clock starts at
``CLOCK_START`` and moves one second per reading.

    uv run python interop/host_vectors.py            # rewrite the file
    uv run python interop/host_vectors.py --check    # exit 1 if it would change

``tests/core/test_host_protocol_vectors.py`` regenerates and compares, so the file
cannot drift from the code, and checks the core's functions against it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rimthan_packager.build import build_release
from rimthan_packager.keygen import generate_keypair
from rimthan_packager.signing import load_signing_key
from rimthan_workflow_mcp.result_contracts import REFUSAL
from rimthan_workflow_mcp.results import ToolResult
from rimthan_workflow_mcp.server import domain_tool_error
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.canonical import canonical_text, digest_value
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import load_trust, verify_release
from rimthan_workflow_registry.run import CheckpointKeyring, peek_claims, token_digest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "catalogues" / "research-decision" / "1.2.0"
VECTORS = ROOT / "docs" / "test-vectors" / "host-protocol.json"
FORMAT = "rimthan.host-protocol-vectors/1"
CLOCK_START = 1767225600  # 2026-01-01T00:00:00Z
TEST_KEY_ID = "ck-test-vectors"
TEST_KEY = bytes(range(0xE0, 0x100))  # a published TEST key: never use it to run a server

HOST: dict[str, Any] = {
    "harness": "claude-code",
    "adapter": {"id": "claude-code", "version": "1.0.0"},
    "capabilities": ["skills", "subagents", "workspace.write"],
    "validator_capabilities": ["subagent.isolated-context"],
    "repository_policy": {"writable_paths": [".claude/*", ".rimthan/*", "research/*"], "protected_paths": [".git/*"]},
}

# Values chosen to exercise RFC 8785: key order by UTF-16 code units, number
# serialisation (ECMAScript: not Python's repr), string escaping (only what
# JSON requires, and not what some encoders add: Go's escapes <, >, & and
# U+2028), no Unicode normalisation (NFC and NFD spellings digest apart),
# nesting and the empty cases.
VALUE_CASES: list[tuple[str, Any]] = [
    ("plain string", "Should we replace seat-based pricing with usage-based pricing?"),
    ("empty string", ""),
    ("string with escapes and non-ASCII", 'quote " backslash \\ tab \t newline \n é € 𝄞 \u001f'),
    ("control characters (short escapes where JSON has one, else \\u00xx)", "\b\f\r\u0000\u0001\u001e"),
    ("characters written as they are (/, DEL, <, >, &, ', U+2028, U+2029)", "a/b \u007f <>&' \u2028 \u2029"),
    ("cafe with U+00E9 (NFC)", "caf\u00e9"),
    ("cafe with e + U+0301 (NFD): not normalised, another digest", "cafe\u0301"),
    ("integer", 42),
    ("negative integer", -7),
    ("zero", 0),
    ("large integer (2**53 - 1)", 9007199254740991),
    ("numbers in ECMAScript form", [1.5, 0.1, 100.0, -0.0, 1e21, 1e-7, 123456789.125, -2.5e-8]),
    ("true", True),
    ("null", None),
    ("empty array", []),
    ("array of strings", ["keep per-seat pricing", "move to usage-based pricing"]),
    ("empty object", {}),
    (
        "object key order (UTF-16 code units)",
        {"b": 1, "a": 2, "é": 3, "Z": 4, "€": 5, "\U0001d11e": 6, "aa": 7, "\ufb01": 8},
    ),
    ("nested", {"options": ["a", "b"], "limits": {"budget": 5000, "staff": ["pm", "eng"]}, "ok": False}),
]


class FixedClock:
    """``CLOCK_START``, then one second later on every reading."""

    def __init__(self, start: int = CLOCK_START) -> None:
        self.now = start - 1

    def __call__(self) -> float:
        self.now += 1
        return float(self.now)


def test_keyring() -> CheckpointKeyring:
    return CheckpointKeyring(signing_key_id=TEST_KEY_ID, keys={TEST_KEY_ID: TEST_KEY})


def _confirmations(values: Mapping[str, Any], at: int) -> dict[str, Any]:
    return {
        name: {"value_digest": digest_value(value), "confirmed_at": at, "confirmed_by": "decision owner"}
        for name, value in sorted(values.items())
    }


def _projection(values: Mapping[str, Any], at: int) -> dict[str, Any]:
    return {"state": dict(values), "confirmations": _confirmations(values, at)}


def value_digests() -> list[dict[str, Any]]:
    return [
        {"name": name, "value": value, "canonical_json": canonical_text(value), "value_digest": digest_value(value)}
        for name, value in VALUE_CASES
    ]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _example(name: str) -> str:
    return (SOURCE / "examples" / name).read_text("utf-8")


def _attested(output: Mapping[str, Any], content: str, write: str) -> dict[str, Any]:
    data = content.encode("utf-8")
    return {
        "artifact_id": output["id"],
        "path": output["path"],
        "media_type": output["media_type"],
        "content": content,
        "attestation": {
            "path": output["path"],
            "sha256": _sha256(data),
            "size": len(data),
            "symlink_free": True,
            "write": write,
        },
    }


def _workspace_manifest(step: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest a host writes after delivering the assets: deliveries sorted by (kind, asset)."""
    delivered = [
        {
            "asset": asset["id"],
            "kind": asset["kind"],
            "path": asset["install_path"],
            "sha256": _sha256(asset["text"].encode("utf-8")),
        }
        for asset in step["host_assets"]
    ]
    return {
        "harness": HOST["harness"],
        "adapter": HOST["adapter"],
        "capabilities": sorted(HOST["capabilities"]),
        "delivered": sorted(delivered, key=lambda d: (d["kind"], d["asset"])),
        "symlink_free": True,
    }


def _build(work: Path) -> Any:
    key = generate_keypair(work / "keys" / "vectors")
    built = build_release(SOURCE, [load_signing_key(key.private_path)], work / "out")
    trust = work / "trust"
    trust.mkdir()
    (trust / key.public_path.name).write_bytes(key.public_path.read_bytes())
    return verify_release(built.path, load_trust(trust))


def short_run(engine: WorkflowEngineQueryModule, clock: FixedClock) -> dict[str, Any]:
    """setup-workspace -> interview -> confirm-contract -> select-route -> desk-research -> completed."""
    log: list[str] = []
    calls: list[dict[str, Any]] = []

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        typed: ToolResult = getattr(engine, tool)(arguments)
        result = typed.to_json()
        calls.append({"tool": f"rimthan.{tool}", "status": result["status"], "sequence": result["sequence"]})
        if result["checkpoint"] and (not log or log[-1] != result["checkpoint"]):
            log.append(result["checkpoint"])
        return result

    values = json.loads(_example("confirmed-state.json"))
    state = _projection(values, CLOCK_START)
    started = call("start_workflow", {"workflow": "research-decision", "confirmed_state": state, "host": HOST})
    setup = started["step"]
    manifest = _workspace_manifest(setup)
    manifest_text = canonical_text(manifest) + "\n"  # any JSON text is accepted; this is what the host kit writes
    (output,) = setup["outputs"]
    workspace_artifact = _attested(output, manifest_text, "created")  # attested like every output
    ready = call(
        "prepare_step_validation",
        {
            "checkpoint": started["checkpoint"],
            "confirmed_state": state,
            "host": HOST,
            "artifacts": [workspace_artifact],
        },
    )
    result = call(
        "submit_step_validation",
        {
            "checkpoint": started["checkpoint"],
            "confirmed_state": state,
            "validation_bundle": ready["validation_bundle"],
            "reports": [],
        },
    )
    while result["status"] in ("active", "advanced") and not result["step"]["gated"]:
        result = call("continue_workflow", {"checkpoint": result["checkpoint"], "confirmed_state": state})
    question = result["question"]
    answered_at = int(clock.now) + 1
    chosen = {**values, question["field"]: "desk-research"}
    next_state = {
        "state": chosen,
        "confirmations": {
            **state["confirmations"],
            **_confirmations({question["field"]: "desk-research"}, answered_at),
        },
    }
    result = call(
        "continue_workflow",
        {"checkpoint": result["checkpoint"], "confirmed_state": state, "next_confirmed_state": next_state},
    )
    desk = result["step"]
    contents = {"evidence-log": _example("evidence-log.json"), "findings": _example("findings.md")}
    artifacts = [_attested(o, contents[o["id"]], "created") for o in desk["outputs"]]
    ready = call(
        "prepare_step_validation",
        {"checkpoint": result["checkpoint"], "confirmed_state": next_state, "host": HOST, "artifacts": artifacts},
    )
    bundle = ready["validation_bundle"]
    receipts = bundle["artifacts"]
    reports = [
        {
            "validator_id": v["validator_id"],
            "version": v["version"],
            "outcome": "pass",
            "instruction_digest": v["instruction_digest"],
            "input_artifacts": {aid: r["sha256"] for aid, r in sorted(receipts.items())},
            "findings": [],
            "validated_by": {"harness": HOST["harness"], "adapter_version": HOST["adapter"]["version"]},
        }
        for v in ready["validators"]
    ]
    done = call(
        "submit_step_validation",
        {
            "checkpoint": result["checkpoint"],
            "confirmed_state": next_state,
            "validation_bundle": bundle,
            "reports": reports,
        },
    )
    assert done["status"] == "completed", done
    refusals = _refusals(engine, done["checkpoint"], next_state)
    return {
        "initial_state": state,
        "answered_state": next_state,
        "workspace": {
            "step": "setup-workspace",
            "expected_deliveries": [
                {"asset": a["id"], "kind": a["kind"], "path": a["install_path"], "uri": a["uri"], "sha256": a["sha256"]}
                for a in setup["host_assets"]
            ],
            "manifest": manifest,
            "artifact": workspace_artifact,
            "artifact_sha256": _sha256(manifest_text.encode("utf-8")),
        },
        "outputs": {"step": desk["id"], "artifacts": artifacts},
        "report_bindings": {
            "step": desk["id"],
            "artifact_receipts": receipts,
            "validators": [
                {
                    "validator_id": v["validator_id"],
                    "version": v["version"],
                    "instruction_file": next(x for x in desk["validators"] if x["id"] == v["validator_id"])[
                        "instruction"
                    ]["path"],
                    "instruction_digest": v["instruction_digest"],
                    "input_digest": v["input_digest"],
                }
                for v in ready["validators"]
            ],
            "reports": reports,
        },
        "calls": calls,
        "log": log,
        "refusals": refusals,
    }


def _refusals(engine: WorkflowEngineQueryModule, checkpoint: str, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Two refused calls after the run (so no earlier value moves): the isError result each is answered with."""
    tampered = checkpoint[:-1] + ("A" if checkpoint[-1] != "A" else "B")
    calls = (
        ("start_workflow", {"workflow": "no-such-workflow", "confirmed_state": state, "host": HOST}),
        ("continue_workflow", {"checkpoint": tampered, "confirmed_state": state}),
    )
    refused = []
    for tool, arguments in calls:
        try:
            getattr(engine, tool)(arguments)
        except RegistryError as exc:
            refused.append({"tool": f"rimthan.{tool}", "isError": True, "structuredContent": _refusal(exc)})
            continue
        raise AssertionError(f"{tool} was not refused")
    return refused


def _refusal(exc: RegistryError) -> dict[str, Any]:
    structured: dict[str, Any] = domain_tool_error(exc).structured_content or {}
    return structured


def generate() -> dict[str, Any]:
    """The whole vector document (plain JSON data)."""
    with tempfile.TemporaryDirectory(prefix="rimthan-vectors-") as tmp:
        release = _build(Path(tmp))
        clock = FixedClock()
        run = short_run(WorkflowEngineQueryModule(release, test_keyring(), clock=clock), clock)
    log = run.pop("log")
    return {
        "format": FORMAT,
        "about": (
            "Test vectors for Rimthan host implementations, generated by interop/host_vectors.py from the "
            "packaged research-decision 1.2.0 catalogue. See docs/test-vectors/README.md."
        ),
        "fixed": {
            "clock_start": CLOCK_START,
            "clock": "starts at clock_start and moves one second per engine clock reading",
            "checkpoint_keys": {
                "note": "TEST key, published on purpose: never use it for a server",
                "format": "rimthan.checkpoint-keys/1",
                "signing_key_id": TEST_KEY_ID,
                "keys": [{"id": TEST_KEY_ID, "key": base64.b64encode(TEST_KEY).decode("ascii")}],
                "retired": [],
            },
            "host": HOST,
        },
        "release": {"id": release.release_id, "manifest_digest": release.manifest_digest},
        "value_digests": value_digests(),
        "confirmed_state": {
            "projection": run["initial_state"],
            "state_digest": digest_value(run["initial_state"]["state"]),
            "field_digests": {k: digest_value(v) for k, v in sorted(run["initial_state"]["state"].items())},
        },
        "workspace_manifest": run["workspace"],
        "output_attestations": run["outputs"],
        "report_bindings": run["report_bindings"],
        "refusals": {"contract": REFUSAL, "examples": run["refusals"]},
        "checkpoint_log": {
            "calls": run["calls"],
            "tokens": log,
            "token_digests": [token_digest(t) for t in log],
            "claims": [peek_claims(t) for t in log],
            "log_text": "".join(t + "\n" for t in log),
        },
    }


def render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None, *, write: Callable[[str], None] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/test-vectors/host-protocol.json")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    text = render(generate())
    if args.check:
        same = VECTORS.is_file() and VECTORS.read_text("utf-8") == text
        print("host-protocol vectors are current" if same else f"{VECTORS} is stale: run interop/host_vectors.py")
        return 0 if same else 1
    (write or (lambda t: VECTORS.write_text(t, "utf-8")))(text)
    print(f"wrote {VECTORS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
