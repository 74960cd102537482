"""A private signing key others can read is named, once, with the fix; keygen never leaves a half-written key.

The installed ``rimthan-pack`` on real keys: ``build`` and ``sign`` warn
(``key_file_exposed``, then ``next: chmod 600 FILE``) and go on, as ssh would
refuse an "UNPROTECTED PRIVATE KEY FILE"; a key another user owns (a
root-owned secret mount) counts only others' access, not its group's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.releases import KeyPair, make_keypair
from support.small_disk import fill, small_tmpfs

RIMTHAN_PACK = str(Path(sys.executable).parent / "rimthan-pack")
NOBODY = 65534


def pack(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RIMTHAN_PACK, *(str(a) for a in args)], capture_output=True, text=True, timeout=120)


def warned(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    return [
        line for i, line in enumerate(lines) if "key_file_exposed" in line or (i and "key_file_exposed" in lines[i - 1])
    ]


def exposed_lines(key: KeyPair, whom: str, mode: int, next_step: str) -> list[str]:
    return [
        f"warning: key_file_exposed: {key.private_path}: private key is readable by {whom} (mode {mode:04o}): "
        f"whoever can read it can sign releases as key {key.key_id}",
        f"next: {next_step}",
    ]


def chmod_600(key: KeyPair) -> str:
    return f"chmod 600 {key.private_path}  (rimthan-pack keygen writes keys 0600)"


@pytest.mark.parametrize(("mode", "whom"), [(0o644, "group and others"), (0o640, "group"), (0o604, "others")])
def test_build_and_sign_name_a_key_others_can_read_with_chmod_600_and_go_on(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, mode: int, whom: str
) -> None:
    keypair.private_path.chmod(mode)
    built = pack("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel")
    assert built.returncode == 0, built.stderr
    assert warned(built.stderr) == exposed_lines(keypair, whom, mode, chmod_600(keypair))
    colleague = make_keypair(tmp_path / "colleague", "bob")
    colleague.private_path.chmod(mode)
    signed = pack("sign", next((tmp_path / "rel").iterdir()), "--key", colleague.private_path)
    assert signed.returncode == 0, signed.stderr
    assert warned(signed.stderr) == exposed_lines(colleague, whom, mode, chmod_600(colleague))
    for private in (0o600, 0o400):  # once only its owner can read it, not a word
        keypair.private_path.chmod(private)
        quiet = pack("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / f"quiet-{private:o}")
        assert quiet.returncode == 0, quiet.stderr
        assert warned(quiet.stderr) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a key file to another user needs root")
def test_a_secret_mount_another_user_owns_counts_only_what_others_can_read(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    """Root-owned 0440 for a group (a Kubernetes or systemd secret) is the owner's choice; 0444 is not."""
    os.chown(keypair.private_path, NOBODY, 0)
    keypair.private_path.chmod(0o440)
    quiet = pack("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert warned(quiet.stderr) == []
    keypair.private_path.chmod(0o444)
    loud = pack("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "loud")
    assert loud.returncode == 0, loud.stderr
    ask = (
        f"ask the owner of {keypair.private_path} (uid {NOBODY}) to drop others' read access (a secret mount: "
        "mode 0400, or 0440 with a group only signers are in)"
    )
    assert warned(loud.stderr) == exposed_lines(keypair, "others", 0o444, ask)


def test_keygen_on_a_full_disk_names_the_key_and_leaves_nothing_so_it_works_once_there_is_room(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        filler = fill(disk)
        full = pack("keygen", "--out", disk / "me")
        assert full.returncode == 1
        assert full.stderr.splitlines()[0] == f"error: io_error: {disk / 'me.key'}: No space left on device"
        assert sorted(p.name for p in disk.iterdir()) == ["fill"]
        filler.unlink()
        again = pack("keygen", "--out", disk / "me")
        assert again.returncode == 0, again.stderr


def test_a_key_option_naming_the_wrong_file_says_which_file_to_pass(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    """The prefix without .key, the public half (under a .key name too), a path with no key, a directory: each
    says what to pass, not checkpoint keys. A public key saved as X.key was told to pass X.key, the file itself;
    a directory was a usage error (exit 2) where a FIFO or a dangling link is key_invalid (exit 1)."""
    prefix = keypair.private_path.with_suffix("")
    public_as_key = tmp_path / "copied.key"
    shutil.copyfile(keypair.public_path, public_as_key)
    directory = tmp_path / "key-folder"
    directory.mkdir()
    cases = {
        prefix: f"pass the private key file itself: --key {keypair.private_path}",
        keypair.public_path: f"pass the private key keygen wrote beside it ({keypair.private_path})",
        public_as_key: "copied.key holds a public key though it is named .key: pass the private key, the PREFIX.key "
        "keygen wrote beside PREFIX.pub (PEM PKCS#8 Ed25519, unencrypted)",
        tmp_path / "nowhere.key": "check the --key path, or make a key pair: rimthan-pack keygen --out PREFIX "
        "(then --key PREFIX.key)",
        directory: f"--key takes a private key file, not a directory: pass one in it, --key {directory}/PREFIX.key",
    }
    for given, next_step in cases.items():
        built = pack("build", scaffold, "--key", given, "--out", tmp_path / "rel")
        assert built.returncode == 1
        error, said = built.stderr.splitlines()
        assert error.startswith(f"error: key_invalid: {given}: ") and said == f"next: {next_step}"
    assert not (tmp_path / "rel").exists()


def test_a_readable_key_given_twice_is_warned_of_once(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    keypair.private_path.chmod(0o644)
    twice = ("--key", keypair.private_path, "--key", keypair.private_path)
    built = pack("build", scaffold, *twice, "--out", tmp_path / "rel")
    assert built.returncode == 0, built.stderr
    assert warned(built.stderr) == exposed_lines(keypair, "group and others", 0o644, chmod_600(keypair))
