"""A real OCI registry on loopback for tests: Debian's ``docker-registry`` (the reference distribution).

Each :class:`LocalRegistry` runs its own ``docker-registry serve`` process on a
free loopback port with its own config file and storage directory under
``tmp_path``; tests reach its storage directly to play an attacker who
controls the registry's disk. ``.ci/run`` installs the package; without it the
fixture fails (under ``CI=true``) or skips with the install command.

Functions
    registry_binary() -> str | None
    start_registry(directory) -> LocalRegistry      (stop() it; the fixture does)
    LocalRegistry.blob_path(digest) -> Path         where the registry keeps a blob's bytes
    LocalRegistry.ref(repo, tag=None) -> str        ``oci://127.0.0.1:PORT/repo[:tag]``
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARY = "docker-registry"
INSTALL = "apt-get install -y docker-registry"


def registry_binary() -> str | None:
    return shutil.which(BINARY) or (f"/usr/bin/{BINARY}" if os.access(f"/usr/bin/{BINARY}", os.X_OK) else None)


def require_registry() -> str:
    """The registry binary, or fail (CI) / skip (a developer's machine) saying how to install it."""
    binary = registry_binary()
    if binary is None:
        message = f"{BINARY} is not installed; run as root: {INSTALL}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_CONFIG = """version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


@dataclass
class LocalRegistry:
    """One running registry process."""

    host: str
    storage: Path
    process: subprocess.Popen[bytes]

    def ref(self, repository: str, tag: str | None = None) -> str:
        return f"oci://{self.host}/{repository}" + (f":{tag}" if tag else "")

    def blob_path(self, digest: str) -> Path:
        hexd = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"

    def tag_link(self, repository: str, tag: str) -> Path:
        """The file that holds the digest a tag points to (edit it to move the tag behind the registry's back)."""
        return self.storage / "docker/registry/v2/repositories" / repository / "_manifests/tags" / tag / "current/link"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_registry(directory: Path) -> LocalRegistry:
    binary = require_registry()
    directory.mkdir(parents=True, exist_ok=True)
    storage = directory / "storage"
    port = _free_port()
    config = directory / "config.yml"
    config.write_text(_CONFIG.format(storage=storage, port=port), encoding="utf-8")
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    registry = LocalRegistry(host=f"127.0.0.1:{port}", storage=storage, process=process)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the registry exited: {(directory / 'registry.log').read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"http://{registry.host}/v2/", timeout=1) as response:
                if response.status == 200:
                    return registry
        except OSError:
            time.sleep(0.05)
    registry.stop()
    raise RuntimeError("the registry did not answer within 20 s")
