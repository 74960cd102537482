"""docs/fleet.md's loopback walkthrough runs as written: a registry, a push, a following replica, a second push.

The walkthrough was a ``text`` block no test ran, so it drifted from the commands it shows (and was fixed by hand).
Its block is now fenced ``sh walkthrough`` (tests/docs/test_doc_examples.py runs single commands; this block is a
sequence with processes left running), and this test runs it: the ``config.yml`` shown above it is written as
shown, each command runs in order in a project laid out as the page says (private-keys/dev.key, trusted as
keys/local, both packaged releases built into releases/), with the installed console scripts for ``uv run X``,
the registry's and the replica's ports swapped for free ones and the ``/tmp`` paths for the test's own. A
command ending in ``&`` is started and left running (stopped with SIGTERM at the end); one with ``# OUTPUT`` is
run again until it prints OUTPUT (JSON compared as JSON): the registry and the replica take a moment to start,
and the replica activates 1.3.0 at its next refresh. Every other command must exit 0 without an ``error:`` line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.processes import stop
from support.registry import free_port, require_registry
from support.releases import build_release, make_keypair, packaged_source, trust_dir

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAGE = ROOT / "docs/fleet.md"
BLOCKS = re.compile(r"^```yaml\n(?P<config>.*?)\n```\n\n```sh walkthrough\n(?P<script>.*?)\n```$", re.S | re.M)
SHOWN_OUTPUT = re.compile(r"\s+#\s*(?P<output>.*)$")
REGISTRY, REPLICA = 5000, 8765  # the ports the page shows
UNTIL = 90.0  # seconds a command shown with its output may take to print it (a refresh interval, a start)


@dataclass(frozen=True)
class Step:
    """One command of the walkthrough: what it runs, whether it is left running, what it is shown to print."""

    command: str
    background: bool
    output: str | None


def _steps(script: str) -> list[Step]:
    """The walkthrough's commands: continuation lines joined, a trailing ``&`` and a ``# OUTPUT`` taken off."""
    joined = re.sub(r"\\\n\s*", "", script)
    steps = []
    for line in joined.splitlines():
        shown = SHOWN_OUTPUT.search(line)
        command = (line[: shown.start()] if shown else line).strip()
        background = command.endswith("&")
        steps.append(Step(command.removesuffix("&").strip(), background, shown.group("output") if shown else None))
    return [s for s in steps if s.command]


def _project(directory: Path) -> Path:
    """A checkout after ``make demo``: the development key in private-keys, trusted as keys/local, and both releases
    built with it."""
    dev = make_keypair(directory / "private-keys", "dev")
    trust_dir(directory / "keys/local", dev)
    for version in ("1.2.0", "1.3.0"):
        build_release(packaged_source(version), directory / "releases", [dev])
    return directory


def _as_here(text: str, tmp_path: Path, ports: dict[int, int]) -> str:
    """The page's ports and /tmp paths as this test's; ``uv run X`` as the installed X."""
    for shown, port in ports.items():
        assert re.search(rf"\b{shown}\b", text), f"the walkthrough no longer uses port {shown}"
        text = re.sub(rf"\b{shown}\b", str(port), text)
    text = text.replace("/tmp/", f"{tmp_path}/tmp/")
    return re.sub(r"(^|\s)uv run (--locked )?", r"\1", text, flags=re.M)


def _printed(done: subprocess.CompletedProcess[str], output: str) -> bool:
    if done.returncode != 0:
        return False
    try:
        return bool(json.loads(done.stdout) == json.loads(output))
    except json.JSONDecodeError:
        return done.stdout.strip() == output.strip()


@contextmanager
def _left_running() -> Iterator[list[tuple[str, subprocess.Popen[bytes], Path]]]:
    """The processes the walkthrough starts with ``&``: stopped (SIGTERM, then SIGKILL after 10 s) at the end."""
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    try:
        yield started
    finally:
        for _, process, _ in reversed(started):
            stop(process)


def _said(started: list[tuple[str, subprocess.Popen[bytes], Path]]) -> str:
    return "\n".join(f"--- {command}\n{log.read_text('utf-8', 'replace')[-3000:]}" for command, _, log in started)


@pytest.mark.slow  # about 15 s, most of it the replica's --refresh-interval: in make test, not make test-quick
def test_the_fleet_walkthrough_runs_as_written(tmp_path: Path) -> None:
    require_registry()
    found = BLOCKS.search(PAGE.read_text("utf-8"))
    assert found is not None, "docs/fleet.md: no ```yaml config.yml block followed by the ```sh walkthrough block"
    project = _project(tmp_path / "project")
    ports = {REGISTRY: free_port(), REPLICA: free_port()}
    (project / "config.yml").write_text(_as_here(found["config"], tmp_path, {REGISTRY: ports[REGISTRY]}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIMTHAN_")}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(tmp_path / "home")}
    env |= {"DOCKER_CONFIG": str(tmp_path / "home/.docker"), "PYTHONUNBUFFERED": "1"}
    steps = _steps(_as_here(found["script"], tmp_path, ports))
    with _left_running() as started:
        for number, step in enumerate(steps):
            if step.background:
                log = tmp_path / f"step-{number}.log"
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        ["bash", "-c", f"exec {step.command}"], cwd=project, env=env, stdout=out, stderr=out
                    )
                started.append((step.command, process, log))
                continue
            done = _run(step, project, env, [process for _, process, _ in started])
            said = f"{step.command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}\n{_said(started)}"
            if step.output is None:
                assert done.returncode == 0 and "error:" not in done.stderr, said
            else:
                assert _printed(done, step.output), f"never printed {step.output}:\n{said}"
        replica = _said([s for s in started if "rimthan-mcp serve" in s[0]])
    assert '"outcome": "activated"' in replica and "research-decision@1.3.0" in replica, replica


def _run(
    step: Step, project: Path, env: dict[str, str], running: list[subprocess.Popen[bytes]]
) -> subprocess.CompletedProcess[str]:
    """Run ``step`` once, or (shown with its output) until it prints that output, for at most :data:`UNTIL` and
    only while what the walkthrough left ``running`` still runs."""
    deadline = time.monotonic() + UNTIL
    while True:
        done = subprocess.run(
            ["bash", "-c", step.command], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )
        gone = any(process.poll() is not None for process in running)
        if step.output is None or _printed(done, step.output) or gone or time.monotonic() > deadline:
            return done
        time.sleep(0.2)
