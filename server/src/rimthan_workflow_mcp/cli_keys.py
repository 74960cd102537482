"""``rimthan-mcp audit`` and ``rimthan-mcp keys``: the commands over the checkpoint key file.

Kept apart from ``cli`` (serve and check, which read releases) because these
touch only the HMAC key file and a run's logged tokens; ``serve`` shares the
key-file helpers (where the state directory is, how the file is opened and
refused where git would track it).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rimthan_clikit import epilog, guard, warn
from rimthan_workflow_registry.errors import FailureCode, KeyringError
from rimthan_workflow_registry.key_file_modes import READ_WRITE_BITS, WRITE_BITS, key_file_exposure
from rimthan_workflow_registry.key_file_warning import KeyFileKind, exposure_warning
from rimthan_workflow_registry.secret_paths import check_secret_path_untracked
from rimthan_workflow_registry.state_dir import default_state_dir

if TYPE_CHECKING:
    from rimthan_workflow_registry.run import CheckpointKeyring

KEYS_FILE = "checkpoint-keys.json"
DEFAULT_TRUST = Path("keys/local")
TRUST_HELP = "Trusted public keys: a directory of *.pub files (threshold 1) or a TOML trust file (k-of-n)."
KEYS_IO = "fix or move the checkpoint key file (--checkpoint-keys), or pick another --state-dir"
_AUDIT_KEYS = (
    "pass the --checkpoint-keys (or --state-dir) of the server that issued the run (a server started with "
    "--checkpoint-keys FILE keeps none in its state directory); new keys would verify none of its tokens"
)
STATE_HELP = (
    "Directory of the checkpoint keys and the activation floor. [default: $RIMTHAN_STATE_DIR, else "
    "$XDG_STATE_HOME/rimthan, else ~/.local/state/rimthan]"
)
KEYS_HELP = f"Checkpoint HMAC key file. [default: STATE_DIR/{KEYS_FILE}]"


def trust_option(also: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--trust``: the trust store (serve, check, audit), with what this command does with it."""
    return click.option(
        "--trust",
        type=click.Path(path_type=Path),
        default=DEFAULT_TRUST,
        show_default=True,
        metavar="PATH",
        envvar="RIMTHAN_TRUST",
        show_envvar=True,
        help=TRUST_HELP + also,
    )


def releases_dir_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--releases-dir`` (or $RIMTHAN_RELEASES_DIR): a directory of releases (serve, audit)."""
    return click.option(
        "--releases-dir",
        type=click.Path(path_type=Path),
        metavar="DIR",
        envvar="RIMTHAN_RELEASES_DIR",
        show_envvar=True,
        help=help_text,
    )


def say(message: str) -> None:
    """Human output goes to stderr: under stdio, stdout is the MCP wire."""
    click.echo(f"rimthan-mcp: {message}", err=True)


def check_key_path_untracked(path: Path) -> None:
    """Checkpoint keys can forge any run: refuse a path git would track (inside a work tree, not ignored)."""
    check_secret_path_untracked(path, what="these checkpoint keys", error=KeyringError)


def open_keyring(path: Path, *, create: bool) -> tuple[CheckpointKeyring, bool]:
    """The key file at ``path`` (created with one signing key when ``create``), and whether it was created; its
    ``key_file_exposed`` warnings said on stderr."""
    keyring, created, warnings = opened_keyring(path, create=create)
    for said in warnings:
        warn(said.code, said.where, said.message, said.next_step)
    return keyring, created


def opened_keyring(path: Path, *, create: bool) -> tuple[CheckpointKeyring, bool, tuple[KeyFileWarning, ...]]:
    """:func:`open_keyring` with its warnings returned, not said (``audit --json`` puts them in its document)."""
    from rimthan_workflow_registry.run import CheckpointKeyring

    check_key_path_untracked(path)
    if not create:
        keyring, created = CheckpointKeyring.load(path), False
    else:  # replicas starting together on one state directory: one creates the file, the others load it
        keyring, created = CheckpointKeyring.opened(path)
    exposed = () if created else file_exposed(path)
    return keyring, created, (*exposed, *folder_exposed(path))


@dataclass(frozen=True)
class KeyFileWarning:
    """A ``key_file_exposed`` warning: the command goes on."""

    code: FailureCode
    where: str
    message: str
    next_step: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code.value, "path": self.where, "message": self.message, "next_step": self.next_step}


def file_exposed(path: Path) -> tuple[KeyFileWarning, ...]:
    """``key_file_exposed`` when others than the owner may read or write the key file: either can forge checkpoints."""
    exposed = key_file_exposure(path, READ_WRITE_BITS)
    if exposed is None:
        return ()
    said = exposure_warning(exposed, _CHECKPOINT_KEYS)
    return (KeyFileWarning(FailureCode.KEY_FILE_EXPOSED, str(path), said.message, said.next_step),)


def folder_exposed(path: Path) -> tuple[KeyFileWarning, ...]:
    """``key_file_exposed`` when others than the owner may write the directory holding the key file (not sticky):
    they can rename another file over it, whatever its own mode, and forge checkpoints (or lower the floor)."""
    folder = Path(os.path.realpath(path)).parent if path.is_symlink() else path.parent
    exposed = key_file_exposure(folder, WRITE_BITS)
    if exposed is None or exposed.mode & stat.S_ISVTX:  # sticky (/tmp): only the owner may replace the file
        return ()
    fix = f"chmod 700 {folder}" if exposed.owned else f"ask the owner of {folder} (uid {exposed.uid}) to chmod 700 it"
    message = (
        f"the directory holding the checkpoint key file is writable by {exposed.whom} (mode {exposed.mode:04o}): "
        "whoever can write it can replace the key file, whatever its mode, and forge checkpoints"
    )
    next_step = f"{fix}  (only the server's user writes its state directory)"
    return (KeyFileWarning(FailureCode.KEY_FILE_EXPOSED, str(folder), message, next_step),)


_CHECKPOINT_KEYS = KeyFileKind("checkpoint key file", "forge checkpoints", "the server writes it", "its servers")


# --------------------------------------------------------------------------- audit


def check_state_dir(directory: Path | None) -> None:
    """A state directory that is a file, or that this user may not enter, is a setup mistake worth naming as such,
    not an I/O puzzle (``None``: none)."""
    if directory is None or not directory.exists():
        return
    if not directory.is_dir():
        raise KeyringError(
            FailureCode.IO_ERROR,
            "the state directory is a file, not a directory",
            next_step="give --state-dir (or $RIMTHAN_STATE_DIR) a directory, or move the file away",
            path=str(directory),
        )
    if not os.access(directory, os.X_OK):
        raise KeyringError(
            FailureCode.IO_ERROR,
            "this user may not enter the state directory (permission denied)",
            next_step=f"give the user the server runs as access to {directory} (it reads and writes its checkpoint "
            f"keys and activation floor there: `chown USER {directory} && chmod 700 {directory}`), or pick another "
            "--state-dir; do not create new keys elsewhere: the runs the keys in it signed would be refused",
            path=str(directory),
        )


def _in_file(path: Path, action: Callable[[], Any]) -> Any:
    """``action``'s keyring refusal, naming the key file it concerns."""
    try:
        return action()
    except KeyringError as exc:
        raise KeyringError(exc.code, exc.message, path=str(path), next_step=exc.next_step) from None


def _audit_keyring(path: Path) -> CheckpointKeyring:
    """The keys an audit verifies with (the key file's warnings said). None at ``path`` is refused with the audit's
    own next step: new keys (what a missing key file suggests to ``keys``) verify none of a run's tokens."""
    _key_file_present(path)
    return open_keyring(path, create=False)[0]


def _audit_keys(path: Path) -> tuple[CheckpointKeyring, tuple[KeyFileWarning, ...]]:
    """:func:`_audit_keyring` with the key file's warnings returned, not said."""
    _key_file_present(path)
    keyring, _, warnings = opened_keyring(path, create=False)
    return keyring, warnings


def _key_file_present(path: Path) -> None:
    if not os.path.lexists(path):
        raise KeyringError(
            FailureCode.KEY_INVALID, "cannot read checkpoint keys: no such file", path=str(path), next_step=_AUDIT_KEYS
        )


def _keys_path(checkpoint_keys: Path | None, state_dir: Path | None) -> Path:
    return checkpoint_keys or (state_dir or default_state_dir()) / KEYS_FILE


_keys_option = click.option("--checkpoint-keys", type=click.Path(path_type=Path), metavar="FILE", help=KEYS_HELP)
_state_option = click.option(
    "--state-dir", type=click.Path(path_type=Path, readable=False), metavar="DIR", help=STATE_HELP
)


@click.command(
    epilog=epilog(
        [
            "rimthan-mcp audit run.log                       # keys from the default state directory",
            "rimthan-mcp audit run.log --checkpoint-keys /srv/rimthan/checkpoint-keys.json",
            "rimthan-mcp audit run.log --json | jq .migrations",
            "rimthan-mcp audit run.log --releases-dir releases --trust keys/local   # also: how the run ended",
        ],
        exits=(
            "Exit status:",
            "  0  every token verifies and the chain is unbroken; the history is printed",
            "  1  refused: one line on stderr names the line where the chain breaks (gap, reorder, fork, foreign",
            "     token, or a token that does not verify) and what to do next",
            "  2  usage mistake",
        ),
    )
)
@click.argument("log_file", type=click.Path(path_type=Path), metavar="LOG")
@_keys_option
@_state_option
@releases_dir_option(
    "Verify every release in DIR and read the one the run's last checkpoint is pinned to, to tell whether "
    "the run completed or what it waits for. [default: no release is read; the outcome is not told]"
)
@click.option(
    "--release",
    "release_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    metavar="DIR",
    help="A release to verify and read, as --releases-dir (repeatable).",
)
@trust_option(" Used only with --releases-dir or --release.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the history (or the refusal) as one JSON document on stdout; key file warnings go in its "
    "'warnings', not to stderr.",
)
def audit(
    log_file: Path,
    checkpoint_keys: Path | None,
    state_dir: Path | None,
    releases_dir: Path | None,
    release_dirs: tuple[Path, ...],
    trust: Path,
    as_json: bool,
) -> None:
    """Verify a run's logged checkpoint tokens offline and print its history.

    LOG holds the checkpoint tokens of one run, one per line, in the order
    the server issued them (blank lines are skipped). Every token's signature
    and claims are verified with the checkpoint keys; then the chain: the
    first starts the run (sequence 1), each next one has sequence + 1 and
    names the line before it as parent. The history lists the release and
    manifest digest, workflow and version, each step reached, the artifacts
    and validator receipts by digest, and every migration with its parent
    link. No server and no server storage is involved. LOG is read one line
    at a time; a line that is not UTF-8 or is longer than any token is
    refused at its line (checkpoint_invalid).

    With --releases-dir or --release, it also says how the run ended, read
    from the verified release its last checkpoint is pinned to: completed,
    or waiting (for an answer to a question and its field, for a gated
    step's outputs and validators, for a repair after a failed round with
    its findings count, or for the setup to deliver), and migrated to what.
    """
    # Imported here: a server start imports this module (for its commands) but never audits.
    from rimthan_workflow_registry.release import load_trust
    from rimthan_workflow_registry.run import audit_run, describe, ending_of

    from .audit_log import LOG_IO, logged_tokens
    from .audit_releases import read_audit_releases

    path = _keys_path(checkpoint_keys, state_dir)
    keyring, warnings = guard(lambda: _audit_keys(path), on_io_error=KEYS_IO, as_json=as_json)
    for said in () if as_json else warnings:  # --json: in the document, stderr stays empty
        warn(said.code, said.where, said.message, said.next_step)
    with guard(lambda: log_file.open("rb"), on_io_error=LOG_IO, as_json=as_json) as stream:
        history = guard(
            lambda: audit_run(logged_tokens(stream, str(log_file)), keyring.for_audit(), source=str(log_file)),
            on_io_error=LOG_IO,
            as_json=as_json,
        )
    store = guard(lambda: load_trust(trust), as_json=as_json) if releases_dir is not None or release_dirs else None
    releases = guard(lambda: read_audit_releases(release_dirs, releases_dir, store), as_json=as_json)
    ending = ending_of(history, releases.verified, missing=releases.missing_note())
    retired = sorted({c.key_id for c in history.checkpoints} & set(keyring.archived))
    if as_json:  # stdout holds the one document, warnings included; stderr nothing
        listed = [w.to_json() for w in warnings]
        document = {**history.to_json(), "outcome": ending.to_json(), "retired_keys": retired, "warnings": listed}
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for line in describe(history):
        click.echo(line)
    click.echo(ending.summary())
    for kid in retired:
        click.echo(
            f"key {kid} is retired: it no longer verifies live calls; its material is archived in {path} for audit only"
        )


# --------------------------------------------------------------------------- keys


@click.group(
    epilog=epilog(
        [
            "rimthan-mcp keys list",
            "rimthan-mcp keys rotate      # one server: a new signing key at once, then restart it",
            "rimthan-mcp keys add         # a fleet, phase 1: a verify-only key; restart every replica",
            "rimthan-mcp keys promote <new-key-id>   # phase 2: it signs; restart every replica",
            "rimthan-mcp keys retire <old-key-id>   # a verify-only id from keys list, once its runs are done",
        ]
    )
)
def keys() -> None:
    """Checkpoint HMAC keys: several verify, one signs.

    One server: rotate to a new signing key (old keys keep verifying
    existing runs) and restart it. Replicas sharing the key file: add a
    verify-only key and restart every replica, then promote it and restart
    every replica again, so no replica meets a key it does not hold. Retire
    the old key once its runs are done. Key material is never printed.
    """


@keys.command("list", epilog=epilog(["rimthan-mcp keys list --state-dir /srv/rimthan"]))
@_keys_option
@_state_option
def keys_list(checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Show key ids (never key material): which one signs, which only verify, which are retired."""
    path = _keys_path(checkpoint_keys, state_dir)
    guard(lambda: check_state_dir(path.parent))  # before asking whether the file exists: the OS may refuse that
    present = os.path.lexists(path)  # a link that leads nowhere is read, and refused: never "no keys yet"
    keyring = guard(lambda: open_keyring(path, create=False), on_io_error=KEYS_IO)[0] if present else None
    click.echo(f"# {path}")  # only once the file is read or known absent: a refusal prints nothing before it
    if keyring is None:
        click.echo("# no checkpoint keys yet: `rimthan-mcp serve` or `rimthan-mcp keys rotate` creates them")
        return
    for kid in sorted(keyring.keys):
        click.echo(f"{kid}\t{'signing' if kid == keyring.signing_key_id else 'verify-only'}")
    for kid in sorted(keyring.retired):
        archived = "archived for audit" if kid in keyring.archived else "not kept"
        click.echo(f"{kid}\tretired ({archived})")


@keys.command("rotate", epilog=epilog(["rimthan-mcp keys rotate --checkpoint-keys /srv/rimthan/checkpoint-keys.json"]))
@_keys_option
@_state_option
def keys_rotate(checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Add a new signing key at once; old keys keep verifying existing checkpoints.

    For one server. Creates the key file (mode 0600) if it does not exist.
    Replicas restarted with the new file sign with a key the others do not
    hold yet: a fleet rotates with `keys add`, then `keys promote`.
    """
    path = _keys_path(checkpoint_keys, state_dir)
    guard(lambda: check_state_dir(path.parent))
    keyring, created = guard(lambda: open_keyring(path, create=True), on_io_error=KEYS_IO)
    if created:  # a fresh key file already holds one new signing key: rotating again would orphan it
        click.echo(f"created {path}: signing key {keyring.signing_key_id} (the only key)")
        return
    rotated = keyring.rotated()
    guard(lambda: rotated.save(path), on_io_error=KEYS_IO)
    click.echo(f"signing key is now {rotated.signing_key_id} ({len(rotated.keys)} key(s) verify) in {path}")
    say("restart the server (and every replica) so it signs with the new key")


@keys.command("retire", epilog=epilog(["rimthan-mcp keys retire <old-key-id>   # a verify-only id from keys list"]))
@click.argument("key_id")
@_keys_option
@_state_option
def keys_retire(key_id: str, checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Stop accepting checkpoints signed with KEY_ID.

    Live runs still holding such checkpoints are refused (checkpoint_key_unknown)
    and must start again; the key stays archived in the key file so that
    `rimthan-mcp audit` still verifies finished runs. The signing key cannot
    be retired: rotate first.
    """
    path = _keys_path(checkpoint_keys, state_dir)
    keyring = guard(lambda: _audit_keyring(path), on_io_error=KEYS_IO)
    retired = guard(lambda: _in_file(path, lambda: keyring.retiring(key_id)))
    guard(lambda: retired.save(path), on_io_error=KEYS_IO)
    click.echo(
        f"retired {key_id}; {len(retired.keys)} key(s) remain, signing {retired.signing_key_id}; "
        f"kept in {path} for `rimthan-mcp audit` only"
    )


@keys.command("add", epilog=epilog(["rimthan-mcp keys add --checkpoint-keys /srv/rimthan/checkpoint-keys.json"]))
@_keys_option
@_state_option
def keys_add(checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Add a verify-only key: a fleet's rotation, phase 1.

    The signing key does not change. Restart every replica with the new
    file: each then verifies checkpoints signed with the new key, and none
    signs with it. Then `keys promote` it (phase 2).
    """
    path = _keys_path(checkpoint_keys, state_dir)
    keyring = guard(lambda: _audit_keyring(path), on_io_error=KEYS_IO)
    added, kid = keyring.adding()
    guard(lambda: added.save(path), on_io_error=KEYS_IO)
    click.echo(f"added {kid} (verify-only); signing key is still {added.signing_key_id} in {path}")
    say(f"restart every replica with this file, then run `rimthan-mcp keys promote {kid}`")


@keys.command("promote", epilog=epilog(["rimthan-mcp keys promote <new-key-id>   # a verify-only id from keys add"]))
@click.argument("key_id")
@_keys_option
@_state_option
def keys_promote(key_id: str, checkpoint_keys: Path | None, state_dir: Path | None) -> None:
    """Make KEY_ID, a verify-only key, the signing key: a fleet's rotation, phase 2.

    The key that signed before stays verify-only, so runs it signed go on.
    Promote only once every replica runs with the file `keys add` wrote;
    then restart every replica so they all sign with KEY_ID.
    """
    path = _keys_path(checkpoint_keys, state_dir)
    keyring = guard(lambda: _audit_keyring(path), on_io_error=KEYS_IO)
    if key_id == keyring.signing_key_id:
        click.echo(f"{key_id} already signs in {path}; nothing changed")
        return
    promoted = guard(lambda: _in_file(path, lambda: keyring.promoting(key_id)))
    guard(lambda: promoted.save(path), on_io_error=KEYS_IO)
    click.echo(f"signing key is now {key_id}; {keyring.signing_key_id} stays verify-only in {path}")
    say("restart every replica with this file so they all sign with the new key")
