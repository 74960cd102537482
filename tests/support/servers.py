"""Shared helpers for the MCP server tests (section B of test_workflow_engine.py, test_server_*.py).

Real releases built and signed with a real key under a temporary directory,
real server processes (``python -m rimthan_workflow_mcp serve``) over stdio and
HTTP, and the SDK client. Nothing here mocks the server or the engine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from rimthan_host.harness import CatalogueExamples, ToolCaller, WorkflowHarness
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

VERSIONS = ("1.2.0", "1.3.0")
CATALOGUE = "research-decision"
WAIT_SECONDS = 30.0


@dataclass
class ServerWorld:
    """Signed packaged releases (built once into ``built/``), a trust directory and a key."""

    root: Path
    key: KeyPair
    trust: Path
    built: dict[str, Path]

    def publish(self, version: str, releases_dir: Path) -> Path:
        """Copy a built release into ``releases_dir`` (what an operator's deploy does)."""
        releases_dir.mkdir(parents=True, exist_ok=True)
        target = releases_dir / self.built[version].name
        shutil.copytree(self.built[version], target)
        return target

    def provider(
        self,
        version: str,
        *,
        releases_dir: Path | None = None,
        state_dir: Path | None = None,
        keyring: CheckpointKeyring | None = None,
        migration_target: str | None = None,
        lower_floor: bool = False,
    ) -> ReleaseProvider:
        return ReleaseProvider.open(
            self.built[version],
            trust=load_trust(self.trust),
            keyring=keyring or CheckpointKeyring.generate(),
            releases_dir=releases_dir,
            state_dir=state_dir,
            lower_floor=lower_floor,
            migration_target_dir=self.built[migration_target] if migration_target else None,
        )


def build_world(root: Path) -> ServerWorld:
    key = make_keypair(root / "keys", "release-engineer")
    built = {v: build_release(packaged_source(v), root / "built", [key]) for v in VERSIONS}
    return ServerWorld(root=root, key=key, trust=trust_dir(root / "trust", key), built=built)


def scenario(route: str = "desk-research", fail_once: frozenset[str] = frozenset()) -> CatalogueExamples:
    """The packaged catalogues' shipped examples as a harness scenario."""
    return CatalogueExamples({v: packaged_source(v) / "examples" for v in VERSIONS}, route, fail_once)


def harness(
    call: ToolCaller, project: Path, route: str = "desk-research", fail_once: frozenset[str] = frozenset()
) -> WorkflowHarness:
    return WorkflowHarness(call, scenario(route, fail_once), project_dir=project)


def example_state(version: str) -> dict[str, Any]:
    return scenario().initial_state(version)


# --------------------------------------------------------------------------- corrupting a release


def flip_byte(release: Path) -> str:
    path = release / "catalogue" / "assets" / "instructions" / "interview.md"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return "file_digest_mismatch"


def add_file(release: Path) -> str:
    (release / "catalogue" / "assets" / "instructions" / "extra.md").write_text("unlisted\n", encoding="utf-8")
    return "file_unlisted"


def strip_signatures(release: Path) -> str:
    for sig in (release / "signatures").iterdir():
        sig.unlink()
    return "signature_missing"


CORRUPTIONS: dict[str, Callable[[Path], str]] = {
    "byte_flipped": flip_byte,
    "file_added": add_file,
    "signature_stripped": strip_signatures,
}


# --------------------------------------------------------------------------- server processes


def serve_args(
    world: ServerWorld,
    release: Path,
    *,
    state_dir: Path,
    releases_dir: Path | None = None,
    migration_target: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    args = [
        "-m",
        "rimthan_workflow_mcp",
        "serve",
        "--release",
        str(release),
        "--trust",
        str(world.trust),
        "--state-dir",
        str(state_dir),
        "--log-level",
        "info",
    ]
    if releases_dir is not None:
        args += ["--releases-dir", str(releases_dir)]
    if migration_target is not None:
        args += ["--migration-target", str(migration_target)]
    return args + list(extra)


def server_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


@dataclass
class HttpServer:
    """A ``rimthan-mcp serve --transport http`` process and everything it wrote to stderr."""

    process: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """The first stderr line (from index ``after``) matching ``pattern``; fails the test on timeout."""
        return wait_for_line(lambda: self.lines, pattern, after=after, timeout=timeout)


def wait_for_line(
    lines: Callable[[], list[str]], pattern: str, *, after: int = 0, timeout: float = WAIT_SECONDS
) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        for line in lines()[after:]:
            match = regex.search(line)
            if match:
                return match
        time.sleep(0.05)
    raise AssertionError(f"no stderr line matched {pattern!r}:\n{''.join(lines())}")


RIMTHAN_MCP = str(Path(sys.executable).with_name("rimthan-mcp"))
RIMTHAN_PACK = str(Path(sys.executable).with_name("rimthan-pack"))


@contextmanager
def http_server(
    args: Sequence[str],
    *,
    command: Sequence[str] = (sys.executable,),
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    transport: Sequence[str] = ("--transport", "http", "--port", "0"),
) -> Iterator[HttpServer]:
    """A server process answering on HTTP; ``command`` is ``(RIMTHAN_MCP,)`` for the installed console script."""
    process = subprocess.Popen(
        [*command, *args, *transport],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env or server_env(),
    )
    lines: list[str] = []
    assert process.stderr is not None
    stream = process.stderr
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        match = wait_for_line(lambda: lines, r"listening on (http://\S+)")
        yield HttpServer(process=process, url=match.group(1), lines=lines)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=5)


def stdio_client_for(args: Sequence[str], errlog: TextIO, *, mode: str = "auto") -> Client:
    """An SDK client that spawns the server over stdio, its stderr going to ``errlog`` (a real file)."""
    params = StdioServerParameters(command=sys.executable, args=list(args), env={"PYTHONUNBUFFERED": "1"})
    return Client(stdio_client(params, errlog=errlog), mode=mode)


def http_client_for(url: str, *, mode: str = "auto") -> Client:
    return Client(url, mode=mode)


def structured_error(result: Any) -> dict[str, Any]:
    """The ``error`` object of an ``isError`` tool result (asserting the text carries the same JSON)."""
    import json

    assert result.is_error, result
    error = result.structured_content["error"]
    assert json.loads(result.content[0].text) == {"error": error}
    return error
