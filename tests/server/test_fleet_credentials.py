"""A follower's registry credentials rotated while it runs, against a real registry behind htpasswd (bcrypt).

The registry's password is changed (its htpasswd rewritten, the registry restarted) and a new release pushed with
the new one; then the secret each replica reads is rotated in place, as a secret store updates a mounted file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from support.oci import pack
from support.processes import HttpServer, http_server_process
from support.refusals import refusal
from support.registry import LocalRegistry, docker_config, start_registry
from support.servers import RIMTHAN_MCP, server_env

REPO = "rimthan/research"
USER, OLD, NEW = "replica-bot", "first password", "second password"
OLD_USER = "retired-bot"  # the user name a replica reading both halves from files started with


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No credentials from the developer's own ~/.docker or environment; only what the test gives."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**server_env(), "HOME": str(home), "DOCKER_CONFIG": str(home / ".docker")}
    env |= {f"RIMTHAN_REGISTRY_{name}": "" for name in ("USERNAME", "PASSWORD", "USERNAME_FILE", "PASSWORD_FILE")}
    return env | extra


def _push(registry: LocalRegistry, release: Path, trust: Path, tmp_path: Path, password: str) -> None:
    env = _clean_env(tmp_path / "publisher", RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD=password)
    pushed = pack("push", release, registry.ref(REPO), "--trust", trust, "--plain-http", env=env)
    assert pushed.returncode == 0, pushed.stderr


def _replica(registry: LocalRegistry, where: Path, trust: Path) -> list[str]:
    return [str(a) for a in (RIMTHAN_MCP, "serve", "--releases-from", registry.ref(REPO), "--plain-http",
            "--releases-dir", where / "releases", "--trust", trust, "--state-dir", where / "state",
            "--transport", "http", "--port", "0")]  # fmt: skip


def _rotate(path: Path, text: str) -> None:
    """Replace ``path`` in one rename, as a secret store (a Kubernetes secret volume) updates a mounted file."""
    fresh = path.with_name(f".{path.name}.new")
    fresh.write_text(text, encoding="utf-8")
    os.replace(fresh, path)


def _records(server: HttpServer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.lines if line.startswith("{")]


def test_a_credential_rotated_in_a_file_is_used_at_the_next_refresh_from_every_file_source(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A replica given its password through the environment kept the one it started with: rotating it needed a
    restart of every replica, while one reading a Docker config file took the new one at its next refresh. Now
    ``RIMTHAN_REGISTRY_PASSWORD_FILE`` names a file read at every refresh, as the Docker config file is: both
    replicas say the registry refused the old password, then, once their secret file is rotated, take the new one
    at the next refresh and activate the release pushed meanwhile, without a restart. A third replica reads the
    user name too from a file (``RIMTHAN_REGISTRY_USERNAME_FILE``, read at every refresh as well: before, it was not
    read at all and the password file alone was refused), and both its files rotate: another account, then ours."""
    registry = start_registry(tmp_path / "registry", users={USER: OLD, OLD_USER: OLD})
    try:
        _push(registry, packaged_releases["1.2.0"], trust, tmp_path, OLD)
        secret = tmp_path / "secrets" / "registry-password"
        secret.parent.mkdir()
        secret.write_text(OLD + "\n", encoding="utf-8")  # a trailing newline, as `echo ... >` writes it
        by_file = _clean_env(tmp_path / "a", RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD_FILE=str(secret))
        by_docker = _clean_env(tmp_path / "b")
        user_file = tmp_path / "secrets" / "registry-username"
        user_file.write_text(OLD_USER, encoding="utf-8")
        by_files = _clean_env(tmp_path / "c", RIMTHAN_REGISTRY_USERNAME_FILE=str(user_file),
                              RIMTHAN_REGISTRY_PASSWORD_FILE=str(secret))  # fmt: skip
        docker = docker_config(Path(by_docker["DOCKER_CONFIG"]), registry.host, USER, OLD)
        with (
            http_server_process(_replica(registry, tmp_path / "a", trust), env=by_file) as a,
            http_server_process(_replica(registry, tmp_path / "b", trust), env=by_docker) as b,
            http_server_process(_replica(registry, tmp_path / "c", trust), env=by_files) as c,
        ):
            registry.set_users({USER: NEW})
            _push(registry, packaged_releases["1.3.0"], trust, tmp_path, NEW)
            for replica in (a, b, c):
                replica.refresh()
            _rotate(secret, NEW + "\n")
            _rotate(user_file, USER + "\n")
            _rotate(docker, docker_config(tmp_path / "new-docker", registry.host, USER, NEW).read_text("utf-8"))
            for replica in (a, b, c):
                replica.refresh()
            replicas = {"a": _records(a), "b": _records(b), "c": _records(c)}
    finally:
        registry.stop()
    for name, records in replicas.items():
        said = [r for r in records if "credentials" in r["event"]]
        assert [r["event"] for r in said] == [
            "registry refused our credentials; serving what is held",
            "registry accepts our credentials again",
        ], (name, said)
        assert "refused the credentials (HTTP 401)" in said[0]["error"]["message"], (name, said)
        assert (
            "RIMTHAN_REGISTRY_USERNAME_FILE and RIMTHAN_REGISTRY_PASSWORD_FILE are read again at every refresh"
            in (said[0]["next"])
        ), (name, said)
        done = [r for r in records if r["event"] == "refresh done"]
        assert done[-2]["active"] == "research-decision@1.2.0", (name, done)
        assert done[-2]["sync_failed"]["code"] == "oci_unauthorized", (name, done)
        assert done[-1]["outcome"] == "activated" and done[-1]["active"] == "research-decision@1.3.0", (name, done)


def test_credentials_refused_with_nothing_held_exit_1_in_one_true_refusal(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A fresh replica whose password the registry refuses holds nothing to serve: it exits 1 with the refusal
    (oci_unauthorized, where credentials come from). Before, a warning "registry refused our credentials; serving
    what is held" came just before it, though nothing was held and nothing was served; then it was held back from
    the log. Now the warning says what is true: nothing is held to serve yet."""
    registry = start_registry(tmp_path / "registry", users={USER: OLD})
    try:
        _push(registry, packaged_releases["1.2.0"], trust, tmp_path, OLD)
        env = _clean_env(tmp_path / "a", RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD="a guess")
        done = subprocess.run(_replica(registry, tmp_path / "a", trust), capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    finally:
        registry.stop()
    assert done.returncode == 1, done.stderr
    said = refusal(done.stderr, allow_before=True)
    warned = [json.loads(line) for line in done.stderr.splitlines()[:-2]]  # no line says a release is served
    nothing_held = "registry refused our credentials; nothing held to serve yet"
    assert [(w["level"], w["event"]) for w in warned] == [("warning", nothing_held)], done.stderr
    assert warned[0]["error"]["code"] == "oci_unauthorized", warned
    assert said.error.startswith("error: oci_unauthorized: "), said
    assert "nothing could be pulled from" in said.error and "holds no release to serve meanwhile" in said.error, said
    assert said.next.startswith("give credentials the registry accepts: "), said
