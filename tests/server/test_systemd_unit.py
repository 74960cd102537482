"""The systemd unit docs/server.md shows ("Under systemd") is one that works.

``systemd-analyze verify`` (offline, no running systemd needed) accepts the block with only the console
script's path put in; its ``ExecStart`` command line, run as written (paths moved to a temporary directory,
``--port 0`` for a free port, ``--plain-http`` for the real registry on loopback), follows the registry and
serves, takes ``ExecReload``'s SIGHUP as a refresh and exits 0 on ``KillSignal`` (so ``Restart=on-failure``
does not start it again), and a usage mistake in the same line exits with the status the unit does not retry.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.oci import push
from support.processes import http_server_process, wait_for_line
from support.registry import LocalRegistry
from support.servers import RIMTHAN_MCP, server_env

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"
UNIT_FENCE = re.compile(r"^```ini systemd-unit\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOC_SCRIPT = "/opt/rimthan/.venv/bin/rimthan-mcp"
REPO = "rimthan/research-decision"


@dataclass(frozen=True)
class Unit:
    text: str
    service: dict[str, list[str]]

    def one(self, key: str) -> str:
        (value,) = self.service[key]
        return value


def documented_unit() -> Unit:
    """The unit block of docs/server.md, continuation lines joined, its [Service] settings by key."""
    (text,) = UNIT_FENCE.findall(DOC.read_text("utf-8"))
    joined = re.sub(r"\\\n\s*", " ", text)
    service: dict[str, list[str]] = {}
    section = ""
    for line in joined.splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line:
            key, value = line.split("=", 1)
            service.setdefault(key, []).append(value)
    return Unit(text, service)


def test_systemd_analyze_verify_accepts_the_documented_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install -y systemd)")
    unit = documented_unit()
    assert DOC_SCRIPT in unit.one("ExecStart")
    path = tmp_path / "rimthan-mcp.service"
    path.write_text(unit.text.replace(DOC_SCRIPT, RIMTHAN_MCP), "utf-8")
    checked = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and "rimthan-mcp.service" not in checked.stderr, checked.stderr
    assert unit.one("KillSignal") == "SIGTERM" and unit.one("Restart") == "on-failure"
    assert unit.one("ExecReload") == "/bin/kill -HUP $MAINPID"


def _command_line(unit: Unit, root: Path, registry: LocalRegistry | None = None) -> tuple[list[str], dict[str, str]]:
    """``ExecStart`` as argv, with the documented paths under ``root``; the ``Environment=`` lines likewise."""

    def moved(text: str) -> str:
        text = text.replace(DOC_SCRIPT, RIMTHAN_MCP).replace("/var/lib/rimthan", str(root / "var"))
        text = text.replace("/etc/rimthan", str(root / "etc")).replace("--port 8765", "--port 0")
        if registry is not None:
            text = text.replace(f"oci://registry.example/{REPO}", registry.ref(REPO)) + " --plain-http"
        return text

    env = server_env()
    for assignment in unit.service.get("Environment", []):
        key, value = moved(assignment).split("=", 1)
        env[key] = value
    return shlex.split(moved(unit.one("ExecStart"))), env


def _healthz(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url.removesuffix("/mcp") + "/healthz", timeout=10) as answer:
        return dict(json.loads(answer.read()))


def test_the_units_exec_start_serves_reloads_on_sighup_and_stops_with_exit_0(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    unit = documented_unit()
    shutil.copytree(trust, tmp_path / "etc" / "trust")
    keys = subprocess.run(
        [RIMTHAN_MCP, "keys", "rotate", "--checkpoint-keys", str(tmp_path / "etc" / "checkpoint-keys.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert keys.returncode == 0, keys.stderr
    push(packaged_releases["1.2.0"], registry.ref(REPO), trust)
    argv, env = _command_line(unit, tmp_path, registry)
    (tmp_path / "var").mkdir()  # StateDirectory= makes it
    with http_server_process(argv, env=env) as server:
        assert _healthz(server.url)["active"] == ["research-decision@1.2.0"]
        push(packaged_releases["1.3.0"], registry.ref(REPO), trust)
        os.kill(server.pid, signal.SIGHUP)  # ExecReload
        done = r'"refresh done", "trigger": "SIGHUP", "outcome": "activated", "active": "research-decision@1\.3\.0"'
        wait_for_line(lambda: server.lines, done)
        assert _healthz(server.url)["active"] == ["research-decision@1.3.0"]
        server.process.send_signal(signal.SIGTERM)  # KillSignal
        assert server.process.wait(timeout=30) == 0, server.stderr()  # within TimeoutStopSec; no restart
    assert "rimthan-mcp: stopped: calls in flight were answered" in server.stderr()
    assert (tmp_path / "var" / "releases" / "research-decision-1.3.0").is_dir()


def test_a_usage_mistake_in_exec_start_exits_with_the_status_the_unit_does_not_retry(tmp_path: Path) -> None:
    unit = documented_unit()
    argv, env = _command_line(unit, tmp_path)
    proc = subprocess.run([*argv, "--refresh-intervall", "5"], capture_output=True, text=True, env=env, check=False)
    assert str(proc.returncode) in unit.one("RestartPreventExitStatus").split(), proc.stderr
    assert proc.stderr.startswith("error: usage: No such option '--refresh-intervall'"), proc.stderr
