"""A real OCI registry on loopback for tests: Debian's ``docker-registry`` (the reference distribution).

Each :class:`LocalRegistry` runs its own ``docker-registry serve`` process on a
free loopback port with its own config file and storage directory under
``tmp_path``; tests reach its storage directly to play an attacker who
controls the registry's disk. ``.ci/run`` installs the package; without it the
fixture fails (under ``CI=true``) or skips with the install command.

Functions
    registry_binary() -> str | None
    start_registry(directory, users=None, tls=None) -> LocalRegistry   (stop() it; the fixture does)
        users: {name: password} turns on htpasswd (bcrypt) authentication
        tls:   a TlsFiles (see make_tls) makes the registry serve HTTPS only
    make_tls(directory) -> TlsFiles                 a throwaway CA and a 127.0.0.1 server certificate
    docker_config(directory, host, user, password) -> Path   a Docker config.json with that ``auths`` entry
    LocalRegistry.blob_path(digest) -> Path         where the registry keeps a blob's bytes
    LocalRegistry.ref(repo, tag=None) -> str        ``oci://127.0.0.1:PORT/repo[:tag]``
    LocalRegistry.stop() / .restart()               an outage: the same port, config and storage come back
    LocalRegistry.set_users(users)                  new passwords (a rotation), taken by a restart
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support.processes import stop

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


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FIRST_PORT = 10000  # below it, the ports of the services a machine may run
START_SECONDS = 120.0  # a hang guard only (a registry that exits fails at once), as a test server's start


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's ephemeral range.

    Whoever is given the port binds it later (a registry once its process starts, again after a restart; a
    walkthrough's replica several commands on). A port the kernel handed out for ``bind(0)`` could meanwhile go
    to any server started with ``--port 0`` (another xdist worker starts them all the time): that bind then fails.
    The kernel never picks a port outside its ephemeral range on its own, so only another caller of this picking
    the same one at random could take it.
    """
    low, high = (int(n) for n in EPHEMERAL_RANGE.read_text("ascii").split())
    ports = [*range(FIRST_PORT, low), *range(high + 1, 65536)]
    tries: list[int] = random.SystemRandom().sample(ports, min(len(ports), 200))
    for port in tries:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port outside {low}-{high} in 200 tries")


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
_AUTH = """auth:
  htpasswd:
    realm: rimthan-test
    path: {htpasswd}
"""
_TLS = """  tls:
    certificate: {cert}
    key: {key}
"""


@dataclass(frozen=True)
class TlsFiles:
    """A CA made for one test and a server certificate for 127.0.0.1 it signed (PEM files)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def make_tls(directory: Path) -> TlsFiles:
    """A self-signed CA and a 127.0.0.1 server certificate it issued, valid for a day."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("rimthan test CA"))
        .issuer_name(_name("rimthan test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, files.server_key)
    return files


def docker_config(directory: Path, host: str, user: str, password: str) -> Path:
    """``DIRECTORY/config.json`` in the Docker config format (``auths.HOST.auth`` = base64 ``user:password``)."""
    directory.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    path = directory / "config.json"
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}), encoding="utf-8")
    return path


@dataclass
class LocalRegistry:
    """One running registry process."""

    host: str
    storage: Path
    process: subprocess.Popen[bytes]
    tls: TlsFiles | None = None

    def ref(self, repository: str, tag: str | None = None) -> str:
        return f"oci://{self.host}/{repository}" + (f":{tag}" if tag else "")

    def blob_path(self, digest: str) -> Path:
        hexd = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"

    def tag_link(self, repository: str, tag: str) -> Path:
        """The file that holds the digest a tag points to (edit it to move the tag behind the registry's back)."""
        return self.storage / "docker/registry/v2/repositories" / repository / "_manifests/tags" / tag / "current/link"

    def restart(self) -> None:
        """Start the registry again on the same port, config and storage (after :meth:`stop`), and wait for it."""
        binary = require_registry()
        directory = self.storage.parent
        log = (directory / "registry.log").open("ab")
        self.process = subprocess.Popen([binary, "serve", str(directory / "config.yml")], stdout=log, stderr=log)
        _wait_until_it_answers(self, directory)

    def set_users(self, users: dict[str, str]) -> None:
        """Change the passwords of a registry started with ``users`` (a rotation), and restart it to take them."""
        _write_htpasswd(self.storage.parent, users)
        self.stop()
        self.restart()

    def stop(self) -> None:
        stop(self.process)


def _config(directory: Path, port: int, users: dict[str, str] | None, tls: TlsFiles | None) -> Path:
    text = _CONFIG.format(storage=directory / "storage", port=port)
    if tls is not None:
        text += _TLS.format(cert=tls.server_cert, key=tls.server_key)
    if users is not None:
        text += _AUTH.format(htpasswd=_write_htpasswd(directory, users))
    config = directory / "config.yml"
    config.write_text(text, encoding="utf-8")
    return config


def _write_htpasswd(directory: Path, users: dict[str, str]) -> Path:
    htpasswd = directory / "htpasswd"
    lines = (f"{u}:{bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=5)).decode()}\n" for u, p in users.items())
    htpasswd.write_text("".join(lines), encoding="utf-8")
    return htpasswd


def _answers(registry: LocalRegistry) -> bool:
    """True once ``/v2/`` answers at all (200, or 401 when authentication is on)."""
    scheme, context = (
        ("https", ssl.create_default_context(cafile=registry.tls.ca_cert)) if registry.tls else ("http", None)
    )
    try:
        with urllib.request.urlopen(f"{scheme}://{registry.host}/v2/", timeout=1, context=context) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except OSError:
        return False


def start_registry(directory: Path, users: dict[str, str] | None = None, tls: TlsFiles | None = None) -> LocalRegistry:
    binary = require_registry()
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = _config(directory, port, users, tls)
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    registry = LocalRegistry(host=f"127.0.0.1:{port}", storage=directory / "storage", process=process, tls=tls)
    _wait_until_it_answers(registry, directory)
    return registry


def _wait_until_it_answers(registry: LocalRegistry, directory: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            raise RuntimeError(f"the registry exited: {(directory / 'registry.log').read_text(errors='replace')}")
        if _answers(registry):
            return
        time.sleep(0.05)
    registry.stop()
    raise RuntimeError(f"the registry did not answer within {START_SECONDS:g} s")
