"""Moving a pulled, verified release into the releases directory, and repairing a damaged copy there.

A pull downloads into a staging directory beside its final name and verifies
it there (``release/oci``); this module then puts it in place. A directory
already under that name is verified first: a copy that verifies is never
touched (the same release: already present; another one: ``release_exists``),
except that a caller who asks to replace (``replace_damaged``: a registry
follower, whose directory it is, or ``rimthan-pack pull --replace-damaged``)
takes the download of the same release when it carries signatures the copy
lacks (co-signed and pushed again during a key rotation), by the same exchange
as a repair. A copy that does not verify (a file edited or deleted since it
was pulled, or signed only by keys the trust store no longer holds) is
replaced only when such a caller asks: the verified staging
directory and the damaged copy swap names in one ``renameat2(RENAME_EXCHANGE)``,
so the name never points at nothing or at a half-written release; the damaged
copy, now under the staging name, is deleted with it. Where the file system
cannot exchange, the damaged copy is renamed aside first (the name is missing
for the instant between two renames; a crash there leaves the damaged copy
hidden beside it as ``.damaged-*`` and the next pull installs afresh).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..canonical import digest_bytes
from ..errors import FailureCode, RegistryError, refusal_line, shell_word
from ..remediation import local_io
from .format import MANIFEST_NAME, SIGNATURES_DIR
from .oci_client import refusal as _refuse
from .signature_check import NOT_TRUSTED
from .trust import TrustStore
from .verified import VerifiedRelease
from .verify import verify_release

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_NO_EXCHANGE = frozenset({errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP})


@dataclass(frozen=True)
class Installed:
    """Where the release is, whether it was there already, and what was wrong with a copy it replaced."""

    path: Path
    already_present: bool
    replaced_damaged: str | None = None  # the damaged copy's verification failure, when one was replaced
    replaced_code: FailureCode | None = None  # that failure's code


@dataclass(frozen=True)
class Expected:
    """What the verification of a copy expects (as the pull's own)."""

    trust: TrustStore
    profile: str | None = None
    scope: str | None = None


def install_release(
    staging: Path, final: Path, release: VerifiedRelease, expected: Expected, *, replace_damaged: bool
) -> Installed:
    """Rename ``staging`` (verified as ``release``) to ``final``; see the module docstring for a copy already there."""
    if not os.path.lexists(final):
        with local_io(final.parent, f"installing {final.name}"):
            staging.chmod(0o755)  # mkdtemp's 0700 is for the download, not for the release
            os.rename(staging, final)
        return Installed(final, already_present=False)
    code, damage = _damage(final, expected)
    if damage is None:
        if _manifest_digest(final) != release.manifest_digest:
            raise _refuse(
                FailureCode.RELEASE_EXISTS,
                "holds another release under this name (it verifies); releases are never overwritten",
                str(final),
            )
        if replace_damaged and _signatures(staging) - _signatures(final):  # co-signed since: take its signatures
            with local_io(final.parent, f"adding the new signatures to {final.name}"):
                staging.chmod(0o755)
                _swap(staging, final)
            return Installed(final, already_present=False)
        return Installed(final, already_present=True)
    if not replace_damaged:
        raise RegistryError(
            FailureCode.RELEASE_EXISTS,
            f"holds {_held(code, release.release_id)} ({damage}); it is not overwritten unless asked",
            path=str(final),
            next_step=f"pull again with --replace-damaged (the verified pull replaces it in one rename), or delete "
            f"the copy (`rm -r {shell_word(final)}`) and pull again",
        )
    with local_io(final.parent, f"replacing the copy at {final.name}"):
        staging.chmod(0o755)
        _swap(staging, final)
    return Installed(final, already_present=False, replaced_damaged=damage, replaced_code=code)


def _held(code: FailureCode | None, release_id: str) -> str:
    """The copy held, as what happened to it: damage, or a trust store that no longer vouches for it."""
    if code in NOT_TRUSTED:
        return f"a copy of {release_id} the trust store no longer vouches for"
    return f"a damaged copy of {release_id} that no longer verifies"


def _damage(path: Path, expected: Expected) -> tuple[FailureCode | None, str | None]:
    """Why the copy at ``path`` does not verify: its code and ``code: file: message`` (the file relative to the
    copy), or ``(None, None)``.

    The file is what an operator must know to find what changed; the copy's own path is said beside it.
    """
    try:
        verify_release(path, expected.trust, expected_profile=expected.profile, expected_scope=expected.scope)
    except RegistryError as exc:
        return exc.code, refusal_line(exc.code, _within(path, exc.path), exc.message)
    return None, None


def _within(release_dir: Path, where: str | None) -> str | None:
    """``where`` relative to ``release_dir`` when it lies inside it (``catalogue/...``), else as it is."""
    if where is None or not Path(where).is_relative_to(release_dir):
        return where
    inside = Path(where).relative_to(release_dir)
    return None if inside == Path() else str(inside)


def _signatures(release_dir: Path) -> set[str]:
    """The names of the signature files a release directory holds."""
    signatures = release_dir / SIGNATURES_DIR
    return {entry.name for entry in signatures.iterdir()} if signatures.is_dir() else set()


def _manifest_digest(release_dir: Path) -> str:
    manifest = release_dir / MANIFEST_NAME
    return digest_bytes(manifest.read_bytes() if manifest.is_file() else b"")


def _swap(staging: Path, final: Path) -> None:
    """``final`` becomes what ``staging`` holds and ``staging`` what ``final`` held (the caller deletes it)."""
    if not _exchange(staging, final):
        _swap_by_renames(staging, final)


def _swap_by_renames(staging: Path, final: Path) -> None:
    """:func:`_swap` where the file system cannot exchange: the held copy renamed aside first (see the module)."""
    aside = Path(tempfile.mkdtemp(prefix=f".damaged-{final.name}-", dir=final.parent))
    os.rename(final, aside / final.name)
    os.rename(staging, final)
    os.rename(aside / final.name, staging)  # deleted with the staging directory
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``); ``False`` where not supported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc 2.28+ (or not Linux)
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE:
        return False
    raise OSError(err, os.strerror(err), str(second))
