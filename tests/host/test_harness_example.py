"""docs/examples/harness.py, the complete library harness docs/host-kit.md points to, run end to end as a
newcomer would: a project made with the installed ``rimthan-pack`` (keygen, build), the harness a real process
over a real ``rimthan-mcp serve`` child; killed (SIGKILL) mid-run, started again, resumed, offered the newer
release published meanwhile, migrated, completed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from support.releases import packaged_source

REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "docs" / "examples" / "harness.py"
BIN = Path(sys.executable).parent


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "RIMTHAN_STATE_DIR": str(state)}


def _pack(project: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run([str(BIN / "rimthan-pack"), *args], cwd=project, env=env, check=True, capture_output=True)


def _key(tmp_path: Path) -> Path:
    return tmp_path / "config" / "rimthan" / "keys" / "me.key"


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project, env = tmp_path / "project", _env(tmp_path / "state")
    project.mkdir()
    key = _key(tmp_path)  # the private key out of the project, its public half trusted: as the docs say
    _pack(project, env, "keygen", "--out", str(key.with_suffix("")), "--trust-dir", "keys/local")
    _pack(project, env, "build", str(packaged_source("1.2.0")), "--key", str(key), "--out", "releases")
    shutil.copy(packaged_source("1.2.0") / "examples" / "confirmed-state.json", project / "facts.json")
    owner = {"research_route": "desk-research", "risk_tolerance": "medium"}
    (project / "owner.json").write_text(json.dumps(owner), "utf-8")
    shutil.copy(EXAMPLE, project / "harness.py")
    return project, env


def _command() -> list[str]:
    return [sys.executable, "harness.py", str(packaged_source("1.2.0").parent)]


def _harness(project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _command(), cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def _kill_at(harness: subprocess.Popen[str], line: str) -> list[str]:
    """Read the harness's lines until ``line`` begins one, then SIGKILL it."""
    assert harness.stdout is not None
    seen = []
    for said in harness.stdout:
        seen.append(said.rstrip("\n"))
        if said.startswith(line):
            harness.send_signal(signal.SIGKILL)
            break
    harness.wait(timeout=60)
    return seen


def test_the_example_harness_is_killed_resumes_migrates_and_completes(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    first = _kill_at(_harness(project, env), "refused:")
    assert "asked: research_route" in first and first[-1].startswith("refused: json_parse_failed"), first
    _pack(project, env, "build", str(packaged_source("1.3.0")), "--key", str(_key(tmp_path)), "--out", "releases")
    again = _harness(project, env)
    out, _ = again.communicate(timeout=300)
    lines = out.splitlines()
    assert again.returncode == 0, lines
    assert lines[0] == "at desk-research (research-decision@1.2.0)", lines  # resumed where it was killed
    assert (
        "offered research-decision@1.3.0: walks again setup-workspace, interview, confirm-contract, select-route"
        in lines
    )
    assert "migrated to research-decision@1.3.0" in lines
    assert any(line.startswith("validators failed: ") for line in lines), lines
    assert lines[-1] == "completed on research-decision@1.3.0", lines
    audit = [str(BIN / "rimthan-mcp"), "audit", ".rimthan/runs/run-1.log", "--releases-dir", "releases"]
    audited = subprocess.run(audit, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert audited.returncode == 0, audited.stderr  # (one chain across the kill and the migration)
    assert "outcome: completed" in audited.stdout and "research-decision@1.3.0" in audited.stdout, audited.stdout


def test_the_example_harness_says_a_refusal_in_one_line(tmp_path: Path) -> None:
    """A start the verifier answers blocked (the owner's facts lack the objective): one error line, exit 1."""
    project, env = _project(tmp_path)
    facts = json.loads((project / "facts.json").read_text("utf-8"))
    del facts["objective"]
    (project / "facts.json").write_text(json.dumps(facts), "utf-8")
    done = subprocess.run(_command(), cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert errors == [
        "error: the run did not start (the verifier answered blocked: confirmed_field_missing: required field "
        "'objective' is missing; ask the user and confirm it: The decision to make, phrased as the question the "
        "research must answer, e.g. 'Should we replace seat-based pricing with usage-based pricing for the Team "
        "plan?'.); confirm what it names and start again"
    ], errors
