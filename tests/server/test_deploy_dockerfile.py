"""deploy/Dockerfile, checked without a Docker daemon: what it copies exists and its build step works.

No daemon runs here (and a build would pull a base image), so the test does
what the image build does that can go wrong on our side: it copies exactly
what the COPY instructions copy into a fresh context, runs the Dockerfile's
own ``uv sync`` command there (``--offline``: from the local cache), and then
runs the ENTRYPOINT with the CMD and ``--help`` - the installed ``rimthan-mcp``
must accept every option the image passes. The signing code must not be in
the image.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
_SKIP = shutil.ignore_patterns(".venv", "__pycache__", ".mypy_cache", ".pytest_cache", "*.egg-info")


def _instructions(name: str) -> list[str]:
    parser = DockerfileParser(path=str(DOCKERFILE))
    return [i["value"] for i in parser.structure if i["instruction"] == name]


def _copies() -> list[tuple[list[str], str]]:
    out = []
    for value in _instructions("COPY"):
        *sources, dest = shlex.split(value)
        assert not any(s.startswith("--") for s in sources), value  # no --from stages: the context is the repo
        out.append((sources, dest))
    return out


def _uv_sync() -> list[str]:
    for value in _instructions("RUN"):
        for step in value.split("&&"):
            words = shlex.split(step)
            if words[:2] == ["uv", "sync"]:
                return words
    raise AssertionError("the Dockerfile has no uv sync step")


def test_every_copied_path_exists_and_the_whole_workspace_is_copied() -> None:
    copied = {source for sources, _ in _copies() for source in sources}
    assert all((ROOT / source).exists() for source in copied), copied
    members = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    missing = set(members) - copied
    assert not missing, f"uv sync --locked needs every workspace member in the image: {missing}"
    assert {"pyproject.toml", "uv.lock"} <= copied
    assert not {"keys", "releases", "."} & copied  # no key and no release inside the image


def test_the_entrypoint_is_the_installed_server_serving_http() -> None:
    (entrypoint,) = _instructions("ENTRYPOINT")
    argv = json.loads(entrypoint)
    server = tomllib.loads((ROOT / "server" / "pyproject.toml").read_text())["project"]
    assert argv[0] in server["scripts"] and argv[:2] == ["rimthan-mcp", "serve"]
    assert argv[argv.index("--transport") + 1] == "http"
    sync = _uv_sync()
    assert sync[sync.index("--package") + 1] == server["name"]
    assert {"--locked", "--no-dev", "--no-editable"} <= set(sync)


@pytest.mark.slow
def test_the_image_build_step_installs_a_working_server(tmp_path: Path) -> None:
    context = tmp_path / "image"
    context.mkdir()
    for sources, dest in _copies():
        for source in sources:
            target = context / (dest if not dest.endswith("/") else dest + Path(source).name).removeprefix("./")
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, ignore=_SKIP)
            else:
                shutil.copy2(ROOT / source, target)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    uv = os.environ.get("UV") or shutil.which("uv") or "uv"  # `uv run` names itself in $UV
    built = subprocess.run(
        [uv, *_uv_sync()[1:], "--offline", "-q"],
        cwd=context,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr

    venv = context / ".venv" / "bin"
    argv = json.loads(_instructions("ENTRYPOINT")[0]) + json.loads(_instructions("CMD")[0])
    helped = subprocess.run(
        [str(venv / argv[0]), *argv[1:], "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert helped.returncode == 0 and "Usage: rimthan-mcp serve" in helped.stdout, helped.stderr
    for name in ("RIMTHAN_RELEASES_DIR", "RIMTHAN_TRUST"):
        assert name in helped.stdout  # the ENV the image sets are options serve reads
    signing = subprocess.run(
        [str(venv / "python"), "-c", "import rimthan_packager"], capture_output=True, timeout=60, check=False
    )
    assert signing.returncode != 0  # the packager (signing code) is not in the image
