"""A step input must be produced on every route to the step: the installed ``rimthan-pack build`` refuses one
only another branch produces.

research-decision 1.3.0 branches at select-route into desk-research, user-interviews and experiment, which
all lead to decision-record. A decision-record reading desk-research's ``findings`` used to build; every run
on the other two routes then failed prepare there (``input_binding_mismatch``, no receipt) and could never
finish. One reading the workspace manifest, which setup-workspace produces before every route, builds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support.refusals import refusal
from support.releases import KeyPair, packaged_source

BIN = Path(sys.executable).parent
WORKFLOW = Path("workflows/research-decision.toml")
DECLARED = 'id = "decision-record"\ntitle = "Record the decision"\n'


def decision_record_reading(artifact_id: str, root: Path) -> Path:
    """A copy of research-decision 1.3.0 whose decision-record step reads ``artifact_id``."""
    source = root / "source"
    shutil.copytree(packaged_source("1.3.0"), source)
    workflow = source / WORKFLOW
    text = workflow.read_text("utf-8")
    head, rest = text.split(DECLARED)
    assert "inputs = []\n" in rest.split("[[steps", 1)[0]
    workflow.write_text(head + DECLARED + rest.replace("inputs = []\n", f"inputs = [{artifact_id!r}]\n", 1), "utf-8")
    return source


def build(source: Path, keypair: KeyPair, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "rimthan-pack"), "build", str(source), "--key", str(keypair.private_path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_an_input_only_one_branch_produces_is_refused_naming_a_route_without_it(
    tmp_path: Path, keypair: KeyPair
) -> None:
    source = decision_record_reading("findings", tmp_path)
    done = build(source, keypair, tmp_path / "out")
    assert done.returncode == 1, done.stdout
    found = refusal(done.stderr)
    assert found.error == (
        f"error: terminal_unreachable: {source / WORKFLOW}: workflow research-decision@1.3.0: step decision-record "
        "reads artifact 'findings', but the route setup-workspace -> interview -> confirm-contract -> select-route "
        "-> user-interviews -> decision-record reaches it without passing desk-research, the step that produces it; "
        "a run on that route could never pass decision-record"
    )
    assert "make desk-research come before decision-record on every route" in found.next
    assert "drop 'findings' from decision-record's inputs" in found.next
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_input_every_route_produces_first_builds(tmp_path: Path, keypair: KeyPair) -> None:
    source = decision_record_reading("workspace-manifest", tmp_path)
    done = build(source, keypair, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert any((tmp_path / "out").iterdir())
