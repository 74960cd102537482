"""``rimthan-pack keygen`` keeps the private key out of the trust directory, in owner-only folders.

The documented path (docs/host-kit.md, ``make demo``) is ``keygen --out
private-keys/me --trust-dir keys/local``: the private key in a git-ignored
folder of its own, the public key in the trust directory the verifier reads.
Before, the only form was ``--out keys/local/me``, which put the private key
in the trust directory itself; and the folders made above the private key's
own, or for a trust directory, took the umask's mode (0777 under umask 0:
anyone could swap the key's folder, or put a key of theirs in the trust
directory). The installed console script, real keys, a real git work tree;
``--out`` alone still works as before (tests/packager/test_packager_cli.py).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_packager.signing import load_signing_key
from rimthan_workflow_registry.release import load_trust
from support.pack_cli import git_work_tree

BIN = Path(sys.executable).parent
GITIGNORE = Path(__file__).resolve().parents[2] / ".gitignore"


def _keygen(*args: str, cwd: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "rimthan-pack"), "keygen", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        preexec_fn=lambda: os.umask(umask),  # noqa: PLW1509  (a umask for the child only; no threads involved)
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git work tree with this repository's .gitignore."""
    root = git_work_tree(tmp_path / "project")
    shutil.copyfile(GITIGNORE, root / ".gitignore")
    return root


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_the_documented_keygen_keeps_the_private_key_out_of_the_trust_directory(checkout: Path, umask: int) -> None:
    done = _keygen("--out", "private-keys/me", "--trust-dir", "keys/local", cwd=checkout, umask=umask)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    private, public = checkout / "private-keys" / "me.key", checkout / "keys" / "local" / "me.pub"
    assert "private key  private-keys/me.key" in done.stdout and "public key   keys/local/me.pub" in done.stdout
    assert sorted(p.name for p in (checkout / "keys" / "local").iterdir()) == ["me.pub"]  # no private key there
    assert sorted(p.name for p in (checkout / "private-keys").iterdir()) == ["me.key"]
    assert (_mode(private), _mode(private.parent)) == (0o600, 0o700)
    assert (_mode(public), _mode(public.parent), _mode(public.parent.parent)) == (0o644, 0o755, 0o755)
    trusted = load_trust(checkout / "keys" / "local")
    assert list(trusted.keys) == [load_signing_key(private).key_id]
    paths = ["private-keys/me.key", "keys/local/me.pub"]
    ignored = subprocess.run(["git", "-C", str(checkout), "check-ignore", *paths], capture_output=True, text=True)
    assert ignored.stdout.split() == paths, ignored  # both git-ignored: never committed by accident


def test_every_folder_keygen_makes_for_a_private_key_is_owner_only(tmp_path: Path) -> None:
    """Under umask 0, the folders above the key's own were made 0777: anyone could swap the key's folder."""
    done = _keygen("--out", "a/b/c/me", cwd=tmp_path, umask=0)
    assert done.returncode == 0, done.stderr
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700, 0o700, 0o700]
    assert _mode(tmp_path / "a/b/c/me.key") == 0o600 and (tmp_path / "a/b/c/me.pub").is_file()


def test_an_existing_public_key_in_the_trust_directory_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "me.pub").write_text("kept")
    done = _keygen("--out", "private/me", "--trust-dir", "keys", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("error: destination_exists"), done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2 and "Traceback" not in done.stderr
    assert (tmp_path / "keys" / "me.pub").read_text() == "kept" and not (tmp_path / "private").exists()
