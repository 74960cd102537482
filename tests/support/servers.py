"""Shared helpers for the MCP server tests (section B of test_workflow_engine.py, test_server_*.py).

Real releases built and signed with a real key under a temporary directory,
real server processes (``python -m rimthan_workflow_mcp serve``) over stdio and
HTTP, and the SDK client. Nothing here mocks the server or the engine.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mcp import types
from rimthan_host.harness import CatalogueExamples, ToolCaller, WorkflowHarness
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

from support.checked_client import CheckedClient
from support.processes import HttpServer as HttpServer  # re-exported: the server tests take it from here
from support.processes import http_server_process, serve_module_args, stdio_client_process
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

VERSIONS = ("1.2.0", "1.3.0")
CATALOGUE = "research-decision"


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
    return CatalogueExamples(
        {v: packaged_source(v) / "examples" for v in VERSIONS}, fail_once=fail_once, answers={"research_route": route}
    )


def harness(
    call: ToolCaller, project: Path, route: str = "desk-research", fail_once: frozenset[str] = frozenset()
) -> WorkflowHarness:
    return WorkflowHarness(call, scenario(route, fail_once), project_dir=project)


def example_state(version: str) -> dict[str, Any]:
    return scenario().initial_state(version)


# --------------------------------------------------------------------------- corrupting a release


FLIPPED_FILE = "catalogue/assets/instructions/interview.md"  # the file flip_byte changes


def flip_byte(release: Path) -> str:
    path = release / FLIPPED_FILE
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
    return serve_module_args(
        release, world.trust, state_dir, releases_dir=releases_dir, migration_target=migration_target, extra=extra
    )


RIMTHAN_MCP = str(Path(sys.executable).with_name("rimthan-mcp"))
RIMTHAN_PACK = str(Path(sys.executable).with_name("rimthan-pack"))


def server_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


@contextmanager
def http_server(args: Sequence[str]) -> Iterator[HttpServer]:
    """``python -m rimthan_workflow_mcp serve ...`` (``args``) over Streamable HTTP on a free port."""
    with http_server_process([sys.executable, *args, "--transport", "http", "--port", "0"], env=server_env()) as server:
        yield server


def stdio_client_for(args: Sequence[str], errlog: TextIO, *, mode: str = "auto") -> CheckedClient:
    """An SDK client that spawns the server over stdio, its stderr going to ``errlog`` (a real file)."""
    return stdio_client_process(sys.executable, args, errlog, mode=mode)


def http_client_for(url: str, *, mode: str = "auto") -> CheckedClient:
    return CheckedClient(url, mode=mode)


def text_of(read: types.ReadResourceResult) -> str:
    """The text of a resource read (its first part, which must be text)."""
    part = read.contents[0]
    assert isinstance(part, types.TextResourceContents), part
    return part.text


def structured_error(result: Any) -> dict[str, Any]:
    """The ``error`` object of an ``isError`` tool result (asserting the text carries the same JSON)."""
    import json

    assert result.is_error, result
    error: dict[str, Any] = result.structured_content["error"]
    assert json.loads(result.content[0].text) == {"error": error}
    return error


def mcp_client(transport: str, mode: str, world: ServerWorld, http: HttpServer, tmp: Path) -> CheckedClient:
    """A client for ``transport``: the shared HTTP server ``http``, or a fresh stdio server (1.2.0, target 1.3.0)."""
    if transport == "http":
        return http_client_for(http.url, mode=mode)
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp / "state", migration_target=world.built["1.3.0"])
    return stdio_client_for(args, (tmp / "stderr.log").open("w"), mode=mode)
