"""``rimthan-mcp``: run, check and key the verifier server.

``rimthan-mcp serve`` with no flags serves the newest release in ./releases,
trusting ./keys/local, with checkpoint keys created on first run under the
state directory ($RIMTHAN_STATE_DIR, else $XDG_STATE_HOME/rimthan, else
~/.local/state/rimthan). Everything human goes to stderr (stdout is the MCP
wire under stdio); every error is one line saying what to do next.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import anyio
import click
from rimthan_workflow_registry.errors import FailureCode, KeyringError, RegistryError
from rimthan_workflow_registry.tokens import CheckpointKeyring
from rimthan_workflow_registry.trust import TrustStore, load_trust

from .floor import FLOOR_FILE
from .logs import LEVELS, configure_logging, get_logger
from .provider import ReleaseProvider, newest_release_dir
from .server import _build_runtime_state, create_mcp_application
from .transports import bind_socket, serve_http, serve_stdio

DEFAULT_RELEASES = Path("releases")
DEFAULT_TRUST = Path("keys/local")
KEYS_FILE = "checkpoint-keys.json"
_log = get_logger("cli")
_HINTS = {
    "release": "check it with `rimthan-mcp check --release DIR --trust TRUST`, or rebuild it with `make release`",
    "trust": "point --trust at a directory of *.pub keys or a trust file (make keys creates ./keys/local)",
    "keys": "fix or move the checkpoint key file (--checkpoint-keys), or rotate with `rimthan-mcp keys rotate`",
    "http": "choose a free --port (0 picks one) or a --host this machine has",
}


def default_state_dir() -> Path:
    if env := os.environ.get("RIMTHAN_STATE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rimthan"


def _say(message: str) -> None:
    click.echo(f"rimthan-mcp: {message}", err=True)


def _fail(message: str, hint: str | None = None) -> NoReturn:
    click.echo(f"rimthan-mcp: error: {message}" + (f" - {hint}" if hint else ""), err=True)
    sys.exit(1)


def _guard(what: str, action: Callable[[], Any]) -> Any:
    """Run ``action``; a refusal becomes one line naming file, check and next step."""
    try:
        return action()
    except RegistryError as exc:
        _fail(exc.one_line(), _HINTS.get(what))
    except OSError as exc:
        _fail(f"{what}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), _HINTS.get(what))


def check_key_path_untracked(path: Path) -> None:
    """Checkpoint keys can forge any run: refuse a path git would track (inside a work tree, not ignored)."""
    path = path.absolute()
    anchor = next((d for d in path.parents if d.is_dir()), None)
    git = shutil.which("git")
    if anchor is None or git is None:
        return
    inside = subprocess.run([git, "-C", str(anchor), "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True, check=False)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return
    ignored = subprocess.run([git, "-C", str(anchor), "check-ignore", "-q", str(path)],
                             capture_output=True, check=False)
    if ignored.returncode != 0:
        raise KeyringError(FailureCode.KEY_PATH_TRACKED,
                           "git would track these checkpoint keys; keep them outside the work tree "
                           "(the default state directory) or ignore the path", path=str(path))


def open_keyring(path: Path, *, create: bool) -> tuple[CheckpointKeyring, bool]:
    check_key_path_untracked(path)
    if path.exists() or not create:
        return CheckpointKeyring.load(path), False
    return CheckpointKeyring.load_or_create(path), True


def _describe_trust(trust: TrustStore) -> str:
    keys = ", ".join(trust.describe(k) for k in sorted(trust.keys))
    return f"trust {trust.source}: threshold {trust.threshold} of {len(trust.keys)} key(s): {keys}"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Rimthan verifier MCP server: serves signed workflow releases through four tools."""


# --------------------------------------------------------------------------- serve


@main.command()
@click.option("--release", "release_dir", type=click.Path(path_type=Path),
              help="Release directory to serve (default: the newest in --releases-dir).")
@click.option("--migration-target", type=click.Path(path_type=Path),
              help="A separate verified release (same scope) that runs may migrate to.")
@click.option("--releases-dir", type=click.Path(path_type=Path),
              help="Directory refresh rescans for newer releases (default: ./releases, or the --release parent).")
@click.option("--trust", type=click.Path(path_type=Path), default=DEFAULT_TRUST, show_default=True,
              help="Trusted public keys: a directory of *.pub files or a trust file.")
@click.option("--checkpoint-keys", type=click.Path(path_type=Path),
              help=f"Checkpoint HMAC key file (default: STATE_DIR/{KEYS_FILE}, created mode 0600 on first run).")
@click.option("--state-dir", type=click.Path(path_type=Path),
              help="Where checkpoint keys and the activation floor live (default: $RIMTHAN_STATE_DIR or "
                   "~/.local/state/rimthan).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8765, show_default=True, type=int, help="HTTP port (0 picks a free one).")
@click.option("--allowed-host", "allowed_hosts", multiple=True,
              help="Extra Host header value (host:port) to accept behind a proxy; repeatable.")
@click.option("--refresh-interval", type=float, default=None,
              help="Also rescan --releases-dir every N seconds (SIGHUP always triggers a refresh).")
@click.option("--lower-floor", is_flag=True,
              help="Deliberately activate a release below the recorded activation floor (rollback).")
@click.option("--log-level", type=click.Choice(LEVELS), default="info", show_default=True)
def serve(release_dir: Path | None, migration_target: Path | None, releases_dir: Path | None, trust: Path,
          checkpoint_keys: Path | None, state_dir: Path | None, transport: str, host: str, port: int,
          allowed_hosts: tuple[str, ...], refresh_interval: float | None, lower_floor: bool,
          log_level: str) -> None:
    """Verify the release(s) and serve the four workflow tools (stdio by default)."""
    configure_logging(log_level)
    state_dir = state_dir or default_state_dir()
    keys_path = checkpoint_keys or state_dir / KEYS_FILE
    if release_dir is None:
        release_dir = _guard("release", lambda: newest_release_dir(releases_dir or DEFAULT_RELEASES))
    trust_store = _guard("trust", lambda: load_trust(trust))
    keyring, created = _guard("keys", lambda: open_keyring(keys_path, create=True))
    provider: ReleaseProvider = _guard("release", lambda: ReleaseProvider.open(
        release_dir, trust=trust_store, keyring=keyring, migration_target_dir=migration_target,
        releases_dir=releases_dir, state_dir=state_dir, lower_floor=lower_floor))
    app = _guard("release", lambda: create_mcp_application(provider))
    active = provider.active
    _say(f"release {active.release.release_id} {active.digest} ({active.release.root}) [active]")
    if provider.migration_target is not None:
        target = provider.migration_target
        _say(f"migration target {target.release.release_id} {target.digest} ({target.release.root})")
    else:
        _say("migration target: none (migration is refused)")
    _say(_describe_trust(trust_store))
    _say(f"checkpoint keys {keys_path} ({'created' if created else 'loaded'}): signing {keyring.signing_key_id}, "
         f"{len(keyring.keys)} key(s)")
    _say(f"activation floor {state_dir / FLOOR_FILE}: {active.catalogue} >= "
         f"{provider.floor.get(active.catalogue).version if provider.floor.get(active.catalogue) else '-'}")
    interval = f", every {refresh_interval:g}s" if refresh_interval else ""
    _say(f"refresh: kill -HUP {os.getpid()}{interval}; rescans {provider.releases_dir}")
    _log.info("loaded", extra={"provider": provider.describe(), "trust_keys": sorted(trust_store.keys),
                               "transport": transport})
    try:
        if transport == "stdio":
            _say("transport stdio (MCP on stdin/stdout)")
            anyio.run(lambda: serve_stdio(app, provider, refresh_interval=refresh_interval))
        else:
            sock, binding = _guard("http", lambda: bind_socket(host, port))
            _say(f"transport http (stateless Streamable HTTP) at {binding.url}")
            anyio.run(lambda: serve_http(app, provider, sock=sock, binding=binding,
                                         refresh_interval=refresh_interval, extra_hosts=allowed_hosts,
                                         log_level="debug" if log_level == "debug" else "warning"))
    except KeyboardInterrupt:
        _say("interrupted; stopped")
        sys.exit(130)
    except Exception as exc:  # never a traceback on the operator's terminal; details at --log-level debug
        _log.debug("server stopped unexpectedly", exc_info=True)
        _fail(f"internal_error: the server stopped unexpectedly ({type(exc).__name__}: {exc})",
              "rerun with --log-level debug for details")


# --------------------------------------------------------------------------- check


@main.command()
@click.option("--release", "release_dir", type=click.Path(path_type=Path), required=True)
@click.option("--trust", type=click.Path(path_type=Path), default=DEFAULT_TRUST, show_default=True)
@click.option("--migration-target", type=click.Path(path_type=Path))
@click.option("--state-dir", type=click.Path(path_type=Path),
              help="Also check the release against this state directory's activation floor.")
def check(release_dir: Path, trust: Path, migration_target: Path | None, state_dir: Path | None) -> None:
    """Verify a release exactly as `serve` would load it; exit 0 if it would be served, 1 if not."""
    trust_store = _guard("trust", lambda: load_trust(trust))
    provider: ReleaseProvider = _guard("release", lambda: ReleaseProvider.open(
        release_dir, trust=trust_store, keyring=CheckpointKeyring.generate(),
        migration_target_dir=migration_target, state_dir=state_dir, record_floor=False))
    _guard("release", lambda: _build_runtime_state(provider))
    for loaded in provider.held.values():
        signers = ", ".join(trust_store.describe(k) for k in loaded.release.signer_key_ids)
        click.echo(f"ok {loaded.release.release_id} {loaded.digest} signed by {signers}")


# --------------------------------------------------------------------------- keys


@main.group()
def keys() -> None:
    """Checkpoint HMAC keys: several verify, one signs. Rotate, then retire the old key later."""


_keys_option = click.option("--checkpoint-keys", type=click.Path(path_type=Path),
                            help=f"Key file (default: STATE_DIR/{KEYS_FILE}).")
_state_option = click.option("--state-dir", type=click.Path(path_type=Path))


def _keys_path(checkpoint_keys: Path | None, state_dir: Path | None) -> Path:
    return checkpoint_keys or (state_dir or default_state_dir()) / KEYS_FILE


@keys.command("list")
@_keys_option
@_state_option
def keys_list(checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Show key ids (never key material), which one signs, and retired ids."""
    path = _keys_path(checkpoint_keys, state_dir)
    keyring, _ = _guard("keys", lambda: open_keyring(path, create=False))
    click.echo(f"# {path}")
    for kid in sorted(keyring.keys):
        click.echo(f"{kid}\t{'signing' if kid == keyring.signing_key_id else 'verify-only'}")
    for kid in sorted(keyring.retired):
        click.echo(f"{kid}\tretired")


@keys.command("rotate")
@_keys_option
@_state_option
def keys_rotate(checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Add a new signing key; old keys keep verifying existing checkpoints. Restart or redeploy replicas."""
    path = _keys_path(checkpoint_keys, state_dir)
    keyring, created = _guard("keys", lambda: open_keyring(path, create=True))
    rotated = keyring.rotated()
    _guard("keys", lambda: rotated.save(path))
    click.echo(f"signing key is now {rotated.signing_key_id} ({len(rotated.keys)} key(s) verify) in {path}")
    _say("restart the server (and every replica) so it signs with the new key")


@keys.command("retire")
@click.argument("key_id")
@_keys_option
@_state_option
def keys_retire(key_id: str, checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Stop accepting checkpoints signed with KEY_ID (runs holding them must restart)."""
    path = _keys_path(checkpoint_keys, state_dir)
    keyring, _ = _guard("keys", lambda: open_keyring(path, create=False))
    retired = _guard("keys", lambda: keyring.retiring(key_id))
    _guard("keys", lambda: retired.save(path))
    click.echo(f"retired {key_id}; {len(retired.keys)} key(s) remain, signing {retired.signing_key_id}")
