"""Where secrets may be written: never to a path git tracks or would track.

Signing keys (packager) and checkpoint HMAC keys (server) can each forge what
Rimthan exists to protect, so both refuse a destination inside a git work tree
that no ignore rule covers. One implementation, shared by both CLIs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError


def _nearest_existing_dir(path: Path) -> Path:
    current = path.parent
    while not current.exists():
        current = current.parent
    return current


def _inside_git_work_tree(directory: Path, git: str | None) -> bool:
    if git is None:
        # No git to ask: fail closed if any ancestor looks like a work tree.
        return any((d / ".git").exists() for d in (directory, *directory.parents))
    result = subprocess.run(
        [git, "-C", str(directory), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True, check=False
    )
    return result.returncode == 0 and result.stdout.strip() == "true"


def check_secret_path_untracked(path: Path, *, what: str, error: type[RegistryError] = RegistryError) -> None:
    """Refuse ``path`` if git tracks it or would track it (inside a work tree, not ignored).

    Tracked files are never reported as ignored by ``git check-ignore``, so an
    already-tracked path is refused as well. ``what`` names the secret in the
    message; ``error`` picks the exception class the caller's domain uses.
    """
    path = path.absolute()
    anchor = _nearest_existing_dir(path)
    git = shutil.which("git")
    if not _inside_git_work_tree(anchor, git):
        return
    if git is None:
        raise error(
            FailureCode.KEY_PATH_TRACKED,
            f"inside a git work tree but git is not installed to check that {what} would be ignored",
            path=str(path),
        )
    ignored = subprocess.run(
        [git, "-C", str(anchor), "check-ignore", "-q", str(path)], capture_output=True, check=False
    )
    if ignored.returncode != 0:
        raise error(
            FailureCode.KEY_PATH_TRACKED,
            f"git would track {what} (inside a work tree and not ignored); write it to a git-ignored "
            "path such as private-keys/, or outside the work tree",
            path=str(path),
        )
