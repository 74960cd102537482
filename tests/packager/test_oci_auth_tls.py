"""Registry credentials and TLS against real registries: htpasswd (bcrypt) authentication and HTTPS.

Each test starts its own ``docker-registry`` on loopback: one that demands
HTTP Basic credentials checked against a bcrypt htpasswd file, and one that
serves HTTPS only with a certificate from a CA made in the test. The client
gets credentials from a Docker config file (``auths.HOST.auth``) or from
``RIMTHAN_REGISTRY_USERNAME`` / ``_PASSWORD``, and trusts a private CA through
``REQUESTS_CA_BUNDLE``; anything else is a one-line refusal with a code and
nothing left in the releases directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from support.oci import one_line_error, pack, tree_bytes
from support.registry import LocalRegistry, TlsFiles, docker_config, make_tls, start_registry

REPO = "rimthan/research"
USER, PASSWORD = "release-bot", "correct horse battery staple"
RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"
CREDENTIAL_VARIABLES = tuple(
    f"RIMTHAN_REGISTRY_{name}" for name in ("USERNAME", "PASSWORD", "USERNAME_FILE", "PASSWORD_FILE")
)


@pytest.fixture
def auth_registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path / "auth-registry", users={USER: PASSWORD})
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def tls_files(tmp_path: Path) -> TlsFiles:
    return make_tls(tmp_path / "tls")


@pytest.fixture
def tls_registry(tmp_path: Path, tls_files: TlsFiles) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path / "tls-registry", tls=tls_files)
    try:
        yield running
    finally:
        running.stop()


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No credentials from the developer's own ~/.docker or environment; only what the test gives."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "DOCKER_CONFIG": str(home / ".docker"), "REQUESTS_CA_BUNDLE": ""}
    env |= {name: "" for name in CREDENTIAL_VARIABLES}
    return env | extra


def _round_trip(
    registry: LocalRegistry, release: Path, trust: Path, out: Path, env: dict[str, str], *flags: str
) -> None:
    pushed = pack("push", release, registry.ref(REPO), "--trust", trust, *flags, env=env)
    assert pushed.returncode == 0, pushed.stderr
    digest = pushed.stdout.strip().splitlines()[-1]
    pulled = pack("pull", f"{registry.ref(REPO)}@{digest}", "--trust", trust, "--out", out, *flags, env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert tree_bytes(out / release.name) == tree_bytes(release)


def test_credentials_from_a_docker_config_file(
    tmp_path: Path, auth_registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    env = _clean_env(tmp_path)
    docker_config(Path(env["DOCKER_CONFIG"]), auth_registry.host, USER, PASSWORD)
    _round_trip(auth_registry, packaged_releases["1.2.0"], trust, tmp_path / "out", env, "--plain-http")


def test_credentials_from_the_environment(
    tmp_path: Path, auth_registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    env = _clean_env(tmp_path, RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD=PASSWORD)
    _round_trip(auth_registry, packaged_releases["1.2.0"], trust, tmp_path / "out", env, "--plain-http")


def test_credentials_from_a_password_file(
    tmp_path: Path, auth_registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """``RIMTHAN_REGISTRY_PASSWORD_FILE``: a mounted secret, its trailing newline dropped (a follower reads it again
    at every refresh: tests/server/test_fleet_credentials.py)."""
    secret = tmp_path / "registry-password"
    secret.write_text(PASSWORD + "\n", encoding="utf-8")
    env = _clean_env(tmp_path, RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD_FILE=str(secret))
    _round_trip(auth_registry, packaged_releases["1.2.0"], trust, tmp_path / "out", env, "--plain-http")


def _refused_pull(registry: LocalRegistry, trust: Path, out: Path, env: dict[str, str]) -> str:
    """Pull 1.2.0 with ``env``: its one-line ``oci_unauthorized`` refusal, nothing installed."""
    pulled = pack("pull", registry.ref(REPO, "1.2.0"), "--trust", trust, "--out", out, "--plain-http", env=env)
    assert not out.exists()
    return one_line_error(pulled, "oci_unauthorized")


def test_credentials_from_a_user_name_file_and_a_password_file(
    tmp_path: Path, auth_registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """A secret store mounting both halves as files (a Kubernetes secret of type basic-auth) needed the user name
    in the environment: ``RIMTHAN_REGISTRY_USERNAME_FILE`` was not read, and the password file alone was refused."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "username").write_text(USER + "\n", encoding="utf-8")
    (secrets / "password").write_text(PASSWORD, encoding="utf-8")
    env = _clean_env(tmp_path, RIMTHAN_REGISTRY_USERNAME_FILE=str(secrets / "username"),
                     RIMTHAN_REGISTRY_PASSWORD_FILE=str(secrets / "password"))  # fmt: skip
    _round_trip(auth_registry, packaged_releases["1.2.0"], trust, tmp_path / "out", env, "--plain-http")


@pytest.mark.parametrize("case", ["with-user", "no-password", "empty", "fifo"])
def test_a_user_name_file_that_cannot_be_used_is_refused_in_one_line(
    tmp_path: Path, auth_registry: LocalRegistry, trust: Path, case: str
) -> None:
    """The same refusals as the password file's: set beside the variable, set alone, or not a file holding one."""
    secret, password = tmp_path / "registry-user", tmp_path / "registry-password"
    password.write_text(PASSWORD, encoding="utf-8")
    if case == "fifo":
        os.mkfifo(secret)
    else:
        secret.write_text("" if case == "empty" else USER, encoding="utf-8")
    besides = {"with-user": {"RIMTHAN_REGISTRY_USERNAME": USER}, "no-password": {"RIMTHAN_REGISTRY_PASSWORD_FILE": ""}}
    files = {"RIMTHAN_REGISTRY_USERNAME_FILE": str(secret), "RIMTHAN_REGISTRY_PASSWORD_FILE": str(password)}
    env = _clean_env(tmp_path, **files) | besides.get(case, {})
    line = _refused_pull(auth_registry, trust, tmp_path / "out", env)
    said = {
        "with-user": "both RIMTHAN_REGISTRY_USERNAME and RIMTHAN_REGISTRY_USERNAME_FILE are set; set one",
        "no-password": "RIMTHAN_REGISTRY_USERNAME_FILE is set but RIMTHAN_REGISTRY_PASSWORD is not; set both (or "
        "neither, to use the Docker config's), the password as RIMTHAN_REGISTRY_PASSWORD or "
        "RIMTHAN_REGISTRY_PASSWORD_FILE",
        "empty": f"the user name file {secret} (RIMTHAN_REGISTRY_USERNAME_FILE) is empty",
        "fifo": f"the user name file {secret} (RIMTHAN_REGISTRY_USERNAME_FILE) is not a regular file",
    }[case]
    assert said in line, line


@pytest.mark.parametrize("case", ["with-password", "no-user", "missing", "empty", "directory", "fifo", "too-large"])
def test_a_password_file_that_cannot_be_used_is_refused_in_one_line(
    tmp_path: Path, auth_registry: LocalRegistry, trust: Path, case: str
) -> None:
    """It is never guessed at: set beside a password, without a user name, or not a file holding a password."""
    secret = tmp_path / "registry-password"
    if case == "directory":
        secret.mkdir()
    elif case == "fifo":  # nothing ever writes to it: a read would hold the pull (and a follower's sync) forever
        os.mkfifo(secret)
    elif case != "missing":
        secret.write_text({"empty": "", "too-large": "x" * 65537}.get(case, PASSWORD), encoding="utf-8")
    env = _clean_env(tmp_path, RIMTHAN_REGISTRY_USERNAME=USER, RIMTHAN_REGISTRY_PASSWORD_FILE=str(secret))
    if case == "with-password":
        env["RIMTHAN_REGISTRY_PASSWORD"] = PASSWORD
    elif case == "no-user":
        env["RIMTHAN_REGISTRY_USERNAME"] = ""
    line = _refused_pull(auth_registry, trust, tmp_path / "out", env)
    said = {
        "with-password": "both RIMTHAN_REGISTRY_PASSWORD and RIMTHAN_REGISTRY_PASSWORD_FILE are set; set one",
        "no-user": "RIMTHAN_REGISTRY_PASSWORD_FILE is set but RIMTHAN_REGISTRY_USERNAME is not",
        "missing": f"the password file {secret} (RIMTHAN_REGISTRY_PASSWORD_FILE) cannot be read (No such file",
        "empty": f"the password file {secret} (RIMTHAN_REGISTRY_PASSWORD_FILE) is empty",
        "directory": f"the password file {secret} (RIMTHAN_REGISTRY_PASSWORD_FILE) cannot be read (Is a directory)",
        "fifo": f"the password file {secret} (RIMTHAN_REGISTRY_PASSWORD_FILE) is not a regular file",
        "too-large": "holds more than 65536 bytes; it is not a password",
    }[case]
    assert said in line, line


@pytest.mark.parametrize("half", ["RIMTHAN_REGISTRY_USERNAME", "RIMTHAN_REGISTRY_PASSWORD"])
def test_a_user_name_or_a_password_set_alone_is_refused_not_left_for_the_docker_config(
    tmp_path: Path, auth_registry: LocalRegistry, trust: Path, half: str
) -> None:
    """Half of the environment's credentials was dropped without a word and the Docker config's used instead (here
    it holds working ones, so the pull went through on credentials the operator did not mean): now refused."""
    env = _clean_env(tmp_path, **{half: USER if half.endswith("USERNAME") else PASSWORD})
    docker_config(Path(env["DOCKER_CONFIG"]), auth_registry.host, USER, PASSWORD)
    line = _refused_pull(auth_registry, trust, tmp_path / "out", env)
    missing = "RIMTHAN_REGISTRY_PASSWORD" if half.endswith("USERNAME") else "RIMTHAN_REGISTRY_USERNAME"
    assert f"{half} is set but {missing} is not; set both (or neither, to use the Docker config's)" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", ["none", "wrong-env", "wrong-docker-config"])
def test_missing_or_wrong_credentials_are_refused(
    tmp_path: Path, auth_registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, given: str
) -> None:
    env = _clean_env(tmp_path)
    if given == "wrong-env":
        env |= {"RIMTHAN_REGISTRY_USERNAME": USER, "RIMTHAN_REGISTRY_PASSWORD": "guess"}
    elif given == "wrong-docker-config":
        docker_config(Path(env["DOCKER_CONFIG"]), auth_registry.host, USER, "guess")
    pushed = pack(
        "push", packaged_releases["1.2.0"], auth_registry.ref(REPO), "--trust", trust, "--plain-http", env=env
    )
    line = one_line_error(pushed, "oci_unauthorized")
    assert ("none found" in line) == (given == "none"), line
    assert not (auth_registry.storage / "docker/registry/v2/repositories").exists()  # nothing was published

    pulled = pack("pull", auth_registry.ref(REPO, "1.2.0"), "--trust", trust, "--out", tmp_path / "out",
                  "--plain-http", env=env)  # fmt: skip
    one_line_error(pulled, "oci_unauthorized")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("config", ["{not json", "[]", '{"auths": {"HOST": "user:password"}}'])
@pytest.mark.parametrize("where", ["DOCKER_CONFIG", "HOME"])
def test_a_docker_config_file_that_is_not_a_credentials_file_is_refused_in_one_line(
    tmp_path: Path,
    auth_registry: LocalRegistry,
    packaged_releases: dict[str, Path],
    trust: Path,
    config: str,
    where: str,
) -> None:
    """oras read these and raised JSONDecodeError or AttributeError: a traceback from push and pull."""
    env = _clean_env(tmp_path)
    folder = Path(env["DOCKER_CONFIG"]) if where == "DOCKER_CONFIG" else Path(env["HOME"]) / ".docker"
    if where == "HOME":
        env["DOCKER_CONFIG"] = ""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config.replace("HOST", auth_registry.host))
    pushed = pack(
        "push", packaged_releases["1.2.0"], auth_registry.ref(REPO), "--trust", trust, "--plain-http", env=env
    )
    assert str(folder / "config.json") in one_line_error(pushed, "oci_unauthorized")
    pulled = pack("pull", auth_registry.ref(REPO, "1.2.0"), "--trust", trust, "--out", tmp_path / "out",
                  "--plain-http", env=env)  # fmt: skip
    assert str(folder / "config.json") in one_line_error(pulled, "oci_unauthorized")


def test_tls_by_default_with_the_ca_trusted_through_requests_ca_bundle(
    tmp_path: Path, tls_registry: LocalRegistry, tls_files: TlsFiles, packaged_releases: dict[str, Path], trust: Path
) -> None:
    env = _clean_env(tmp_path, REQUESTS_CA_BUNDLE=str(tls_files.ca_cert))
    _round_trip(tls_registry, packaged_releases["1.3.0"], trust, tmp_path / "out", env)  # no --plain-http: HTTPS


def test_an_untrusted_certificate_is_refused(
    tmp_path: Path, tls_registry: LocalRegistry, tls_files: TlsFiles, packaged_releases: dict[str, Path], trust: Path
) -> None:
    other_ca = make_tls(tmp_path / "other-ca").ca_cert
    for bundle in ("", str(other_ca)):  # the default bundle, and a CA that did not issue the registry's certificate
        env = _clean_env(tmp_path, REQUESTS_CA_BUNDLE=bundle)
        pushed = pack("push", packaged_releases["1.3.0"], tls_registry.ref(REPO), "--trust", trust, env=env)
        one_line_error(pushed, "oci_tls_untrusted")
        pulled = pack("pull", tls_registry.ref(REPO, "1.3.0"), "--trust", trust, "--out", tmp_path / "out", env=env)
        one_line_error(pulled, "oci_tls_untrusted")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    assert not (tls_registry.storage / "docker/registry/v2/repositories").exists()


def test_a_follower_pulls_over_tls_with_credentials_and_keeps_serving_when_refused(
    tmp_path: Path, tls_files: TlsFiles, packaged_releases: dict[str, Path], trust: Path
) -> None:
    registry = start_registry(tmp_path / "both", users={USER: PASSWORD}, tls=tls_files)
    try:
        env = _clean_env(tmp_path, REQUESTS_CA_BUNDLE=str(tls_files.ca_cert))
        env |= {"RIMTHAN_REGISTRY_USERNAME": USER, "RIMTHAN_REGISTRY_PASSWORD": PASSWORD}
        pushed = pack("push", packaged_releases["1.2.0"], registry.ref(REPO), "--trust", trust, env=env)
        assert pushed.returncode == 0, pushed.stderr
        releases = tmp_path / "releases"
        started = _serve(registry, releases, trust, tmp_path / "state", env)
        assert "research-decision@1.2.0" in started.stderr and "[active]" in started.stderr, started.stderr
        assert sorted(p.name for p in releases.iterdir()) == ["research-decision-1.2.0"]

        refused = _serve(registry, releases, trust, tmp_path / "state", env | {"RIMTHAN_REGISTRY_PASSWORD": "guess"})
        assert '"registry refused our credentials; serving what is held"' in refused.stderr, refused.stderr
        assert "oci_unauthorized" in refused.stderr and "[active]" in refused.stderr
    finally:
        registry.stop()


def _serve(
    registry: LocalRegistry, releases: Path, trust: Path, state: Path, env: dict[str, str]
) -> CompletedProcess[str]:
    """``rimthan-mcp serve`` (stdio, stdin closed) just far enough to print its start-up lines."""
    return subprocess.run(
        [str(RIMTHAN_MCP), "serve", "--releases-from", registry.ref(REPO), "--releases-dir", str(releases),
         "--trust", str(trust), "--state-dir", str(state)],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, check=False, env={**os.environ, **env},
    )  # fmt: skip
