"""Run a page's ``sh walkthrough`` block as written: each command in order, in one project.

A walkthrough is a sequence with processes left running, which
tests/docs/test_doc_examples.py (one command at a time) does not run. Its
commands run with the installed console scripts for ``uv run X``, the ports
the page shows swapped for free ones and its ``/tmp`` paths for the test's
own. A command ending in ``&`` is started and left running (stopped with
SIGTERM at the end); one with ``# OUTPUT`` is run again until it prints OUTPUT
(JSON compared as JSON), for at most :data:`UNTIL` seconds and only while what
was left running still runs. Every other command must exit 0 without an
``error:`` line.

Functions
    walkthrough_blocks(page) -> list[str]          the page's ``sh walkthrough`` blocks, in order
    as_here(text, tmp_path, ports) -> str          the page's ports and /tmp paths as the test's; uv run X as X
    walkthrough_env(tmp_path) -> dict[str, str]    the installed scripts first on PATH, HOME under tmp_path
    run_walkthrough(script, project, env, tmp_path) -> dict   run it; what each process left running logged
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

from support.processes import stop

BIN = Path(sys.executable).parent
WALKTHROUGH = re.compile(r"^```sh walkthrough\n(?P<script>.*?)\n```$", re.S | re.M)
SHOWN_OUTPUT = re.compile(r"\s+#\s*(?P<output>.*)$")
UNTIL = 90.0  # seconds a command shown with its output may take to print it (a refresh interval, a start)

Started = list[tuple[str, subprocess.Popen[bytes], Path]]


@dataclass(frozen=True)
class Step:
    """One command of the walkthrough: what it runs, whether it is left running, what it is shown to print."""

    command: str
    background: bool
    output: str | None


def walkthrough_blocks(page: Path) -> list[str]:
    return [found["script"] for found in WALKTHROUGH.finditer(page.read_text("utf-8"))]


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


def as_here(text: str, tmp_path: Path, ports: dict[int, int]) -> str:
    """The page's ports and /tmp paths as this test's; ``uv run X`` as the installed X."""
    for shown, port in ports.items():
        assert re.search(rf"\b{shown}\b", text), f"the walkthrough no longer uses port {shown}"
        text = re.sub(rf"\b{shown}\b", str(port), text)
    text = text.replace("/tmp/", f"{tmp_path}/tmp/")
    return re.sub(r"(^|\s)uv run (--locked )?", r"\1", text, flags=re.M)


def walkthrough_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIMTHAN_")}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(tmp_path / "home")}
    return env | {"DOCKER_CONFIG": str(tmp_path / "home/.docker"), "PYTHONUNBUFFERED": "1"}


def _printed(done: subprocess.CompletedProcess[str], output: str) -> bool:
    if done.returncode != 0:
        return False
    try:
        return bool(json.loads(done.stdout) == json.loads(output))
    except json.JSONDecodeError:
        return done.stdout.strip() == output.strip()


@contextmanager
def _left_running() -> Iterator[Started]:
    """The processes the walkthrough starts with ``&``: stopped (SIGTERM, then SIGKILL after 10 s) at the end."""
    started: Started = []
    try:
        yield started
    finally:
        for _, process, _ in reversed(started):
            stop(process)


def said(started: Started) -> str:
    return "\n".join(f"--- {command}\n{log.read_text('utf-8', 'replace')[-3000:]}" for command, _, log in started)


def run_walkthrough(script: str, project: Path, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Run ``script``'s steps in ``project``; what each process it left running logged (by its command), once
    all are stopped."""
    with _left_running() as started:
        for number, step in enumerate(_steps(script)):
            if step.background:
                log = tmp_path / f"step-{number}.log"
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        ["bash", "-c", f"exec {step.command}"], cwd=project, env=env, stdout=out, stderr=out
                    )
                started.append((step.command, process, log))
                continue
            done = _run(step, project, env, [process for _, process, _ in started])
            shown = f"{step.command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}\n{said(started)}"
            if step.output is None:
                assert done.returncode == 0 and "error:" not in done.stderr, shown
            else:
                assert _printed(done, step.output), f"never printed {step.output}:\n{shown}"
    return {command: log.read_text("utf-8", "replace") for command, _, log in started}


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
