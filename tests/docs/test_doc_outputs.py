"""What the docs show a command print, or a client send, is what the real thing prints or accepts.

tests/docs/test_doc_examples.py runs every documented command; this file
checks what the docs show beside them, against the installed console scripts
and the server's own contracts:

- docs/harness-guide.md's JSON blocks (a confirmed state, a host, an artifact,
  a validator report) validate against the contracts the tool schemas embed,
  once their placeholders (``<hex>`` ...) are filled with values of their form;
- docs/server.md's ``rollback_refused`` block is the refusal ``rimthan-mcp``
  prints, line for line (``...`` stands for a path or key ids);
- docs/fleet.md's ``rimthan-pack push`` output (the comment lines of its
  Publish block) is what a push of the packaged 1.3.0 to a real registry on
  loopback prints, and its refusal of a plain-HTTP registry without
  ``--plain-http`` is what a pull from one prints.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from rimthan_workflow_mcp.contract_schemas import (
    ARTIFACT,
    CONFIRMED_STATE_PROJECTION,
    CONTRACTS,
    HOST,
    VALIDATOR_REPORT,
)
from support.registry import LocalRegistry
from support.releases import REPO_ROOT, KeyPair, build_release, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, RIMTHAN_PACK, server_env

DOCS = REPO_ROOT / "docs"
TIMEOUT = 120


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)\n```", (DOCS / page).read_text("utf-8"), flags=re.S | re.M)


def _shown(text: str) -> re.Pattern[str]:
    """A line as a doc shows it: ``...`` stands for anything, the rest is literal."""
    return re.compile(".*?".join(re.escape(part) for part in text.split("...")))


# --------------------------------------------------------------------------- harness-guide.md

HEX = "0123456789abcdef" * 4
PLACEHOLDERS = {  # as docs/harness-guide.md writes them -> a value of that form
    "sha256:<hex>": f"sha256:{HEX}",
    "sha256:<from the bundle>": f"sha256:{HEX}",
    "<hex of the bytes on disk>": HEX,
    "<hex>": HEX,
}
# the blocks in page order, and the contract each shows
CONTRACTS_SHOWN = (CONFIRMED_STATE_PROJECTION, HOST, ARTIFACT, VALIDATOR_REPORT)


def _filled(block: str) -> Any:
    for placeholder, value in PLACEHOLDERS.items():
        block = block.replace(placeholder, value)
    return json.loads(block)


def test_the_harness_guide_json_blocks_are_what_the_tools_accept() -> None:
    blocks = _blocks("harness-guide.md", "json")
    assert len(blocks) == len(CONTRACTS_SHOWN), "docs/harness-guide.md gained or lost a JSON block: name its contract"
    registry: Registry[Any] = Registry().with_resources(
        (document["$id"], Resource.from_contents(document)) for document in CONTRACTS.values()
    )
    for block, contract in zip(blocks, CONTRACTS_SHOWN, strict=True):
        errors = [e.message for e in Draft202012Validator(contract, registry=registry).iter_errors(_filled(block))]
        assert errors == [], (contract["$id"], block)


# --------------------------------------------------------------------------- server.md: the rollback refusal


def test_the_documented_rollback_refusal_is_what_rimthan_mcp_prints(tmp_path: Path, keypair: KeyPair) -> None:
    (shown,) = [b for b in _blocks("server.md", "text") if "rollback_refused" in b]
    releases = {v: build_release(packaged_source(v), tmp_path / "releases", [keypair]) for v in ("1.2.0", "1.3.0")}
    trust = trust_dir(tmp_path / "trust", keypair)
    state = tmp_path / "state"

    def mcp(command: str, version: str) -> subprocess.CompletedProcess[str]:
        args = [command, "--release", str(releases[version]), "--trust", str(trust), "--state-dir", str(state)]
        return subprocess.run(
            [RIMTHAN_MCP, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,  # serve over stdio: loads, records the floor, exits when stdin ends
            timeout=TIMEOUT,
            env=server_env(),
        )

    assert mcp("serve", "1.3.0").returncode == 0  # the floor is now 1.3.0 for this deployment
    refused = mcp("check", "1.2.0")
    said = [line for line in refused.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert refused.returncode == 1 and len(said) == len(shown.splitlines()), refused.stderr
    for line, doc_line in zip(said, shown.splitlines(), strict=True):
        assert _shown(doc_line).fullmatch(line), (doc_line, line)


# --------------------------------------------------------------------------- fleet.md: the push output


def test_the_documented_push_output_is_what_rimthan_pack_prints(
    tmp_path: Path, keypair: KeyPair, registry: LocalRegistry
) -> None:
    (publish,) = [b for b in _blocks("fleet.md", "sh") if "rimthan-pack push" in b]
    shown = [line.removeprefix("# ") for line in publish.splitlines() if line.startswith("# ")]
    release = build_release(packaged_source("1.3.0"), tmp_path / "releases", [keypair])
    trust = trust_dir(tmp_path / "trust", keypair)
    pushed = subprocess.run(
        [RIMTHAN_PACK, "push", str(release), registry.ref("rimthan/research-decision"), "--trust", str(trust)]
        + ["--plain-http"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert pushed.returncode == 0, pushed.stderr
    printed = pushed.stdout.splitlines()
    assert len(printed) == len(shown), (shown, printed)
    for line, doc_line in zip(printed, shown, strict=True):
        expected = re.escape(doc_line.replace("oci://registry.example/", f"oci://{registry.host}/"))
        expected = re.sub(r"<[^>]*digest>", "[0-9a-f]{64}", expected)  # sha256:<manifest digest> and the like
        assert re.fullmatch(expected, line), (doc_line, line)


def test_the_documented_refusal_of_a_plain_http_registry_without_plain_http_is_what_rimthan_pack_prints(
    tmp_path: Path, keypair: KeyPair, registry: LocalRegistry
) -> None:
    """fleet.md quoted `SSL: WRONG_VERSION_NUMBER` for this since the refusal stopped quoting OpenSSL."""
    text = re.sub(r"\s+", " ", (DOCS / "fleet.md").read_text("utf-8"))
    (quoted,) = re.findall(
        r"Without `--plain-http` such a registry is refused as `oci_registry_error` \(`(.*?)`\)", text
    )
    trust = trust_dir(tmp_path / "trust", keypair)
    pulled = subprocess.run(
        [RIMTHAN_PACK, "pull", registry.ref("rimthan/research-decision", "1.2.0"), "--trust", str(trust), "--out"]
        + [str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    error, step = pulled.stderr.splitlines()
    assert _shown(f"error: oci_registry_error: ...: {quoted}").fullmatch(error), (quoted, error)
    assert "--plain-http" in step, step
