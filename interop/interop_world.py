"""``make interop``'s setting: its work directory, the signed release, the server, and how a check is reported.

A new signing key, the packaged research-decision 1.2.0 built and signed with it (and 1.3.0, the migration
target, when a step needs it), a trust directory and a state directory: the :class:`World` every step runs
against; ``rimthan-mcp serve --transport http`` on a free loopback port; :class:`Report`, the one line per
check and the summary; :class:`SetupError`, what ends the run with exit 2.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CATALOGUE = REPO / "catalogues" / "research-decision" / "1.2.0"
TIMEOUT = 120


class SetupError(Exception):
    """The tools or the server could not be installed or started (exit 2)."""


@dataclass
class Report:
    lines: list[tuple[bool, str, str]] = field(default_factory=list)

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        self.lines.append((ok, what, detail))
        print(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    @property
    def failures(self) -> list[tuple[bool, str, str]]:
        return [line for line in self.lines if not line[0]]


@dataclass(frozen=True)
class World:
    work: Path
    release: Path
    trust: Path
    state: Path
    bin_dir: Path

    def tool(self, name: str) -> str:
        return str(self.bin_dir / name)

    def serve_args(self, *extra: str) -> list[str]:
        return [
            self.tool("rimthan-mcp"),
            "serve",
            "--release",
            str(self.release),
            "--trust",
            str(self.trust),
            "--state-dir",
            str(self.state),
            "--log-level",
            "warning",
            *extra,
        ]


def run(
    cmd: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def prepare(work: Path, report: Report) -> World:
    """A new key, the packaged release built and signed with it, a trust dir, a state dir; then ``check``."""
    bin_dir = Path(sys.executable).parent
    keys, trust, releases = work / "keys", work / "trust", work / "releases"
    for step in (
        ["rimthan-pack", "keygen", "--out", str(keys / "interop")],
        ["rimthan-pack", "build", str(CATALOGUE), "--key", str(keys / "interop.key"), "--out", str(releases)],
    ):
        done = run([str(bin_dir / step[0]), *step[1:]])
        if done.returncode != 0:
            raise SetupError(f"{' '.join(step[:2])} failed: {done.stderr.strip() or done.stdout.strip()}")
    trust.mkdir()
    shutil.copyfile(keys / "interop.pub", trust / "interop.pub")
    world = World(work, releases / "research-decision-1.2.0", trust, work / "state", bin_dir)
    checked = run([world.tool("rimthan-mcp"), "check", "--release", str(world.release), "--trust", str(trust)])
    report.check(
        checked.returncode == 0 and checked.stdout.startswith("ok research-decision@1.2.0 sha256:"),
        "rimthan-mcp check on the freshly signed release",
        checked.stdout.strip() or checked.stderr.strip(),
    )
    return world


@contextmanager
def http_server(world: World, *extra: str) -> Iterator[str]:
    """``rimthan-mcp serve --transport http --port 0`` (plus ``extra``); yields the URL it printed."""
    log = (world.work / f"serve-http{'-'.join(('',) + extra)}.log").open("w+")
    proc = subprocess.Popen(
        world.serve_args("--transport", "http", "--host", "127.0.0.1", "--port", "0", *extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", Path(log.name).read_text())
            url = found.group(1) if found else None
        if url is None:
            raise SetupError(f"rimthan-mcp serve --transport http did not start: {Path(log.name).read_text()[-800:]}")
        yield url
    finally:
        _end(proc)
        log.close()


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 15 s."""
    proc.terminate()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
        return
    proc.kill()


def migration_target(world: World) -> Path:
    """research-decision 1.3.0 built and signed with the interop key (once), the runs' migration target."""
    target = world.work / "target"
    if not target.exists():
        build = [world.tool("rimthan-pack"), "build", str(CATALOGUE.with_name("1.3.0"))]
        built = run([*build, "--key", str(world.work / "keys" / "interop.key"), "--out", str(target)])
        if built.returncode != 0:
            raise SetupError(f"rimthan-pack build of 1.3.0 failed: {built.stderr.strip() or built.stdout.strip()}")
    return target / "research-decision-1.3.0"


def only_the_release(world: World) -> Path:
    """A releases directory of its own holding a copy of the 1.2.0 release (the harness publishes 1.3.0 into it)."""
    releases = world.work / "newest-releases"
    shutil.copytree(world.release, releases / world.release.name)
    return releases
