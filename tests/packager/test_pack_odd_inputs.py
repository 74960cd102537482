"""What a release engineer hands the installed CLIs by mistake: a FIFO, a directory or a huge file as a key, an empty
``keygen`` prefix, an ``--out`` inside the catalogue source or blocked by a dangling link, a symlink loop as
SOURCE or ``--out``, an odd ``SOURCE_DATE_EPOCH``.

Each is refused in one line with a code and a ``next:`` line, never a hang and
never a traceback. Every command runs the console script in a subprocess with
stdin closed and a timeout: a command that waits on a FIFO fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from support.refusals import Refusal, refusal
from support.releases import KeyPair, build_release, make_keypair, scaffold_source, trust_dir

BIN = Path(sys.executable).parent
HANG_SECONDS = 30  # far above any of these refusals; a command still running then is waiting on a FIFO


def run(
    tool: str, *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
    )


def refused(done: subprocess.CompletedProcess[str], status: int = 1) -> Refusal:
    assert done.returncode == status, done.stderr
    return refusal(done.stderr)


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "release")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scaffold_source(tmp_path_factory.mktemp("source") / "demo")


@pytest.fixture(scope="module")
def release(source: Path, signer: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_release(source, tmp_path_factory.mktemp("releases"), [signer])


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", ["build", "sign"])
def test_a_fifo_as_key_is_refused_never_waited_on(command: str, source: Path, release: Path, tmp_path: Path) -> None:
    key = _fifo(tmp_path / "ci.key")
    target = ("build", source, "--out", tmp_path / "out") if command == "build" else ("sign", release)
    found = refused(run("rimthan-pack", *target, "--key", key))
    assert found.code == "key_invalid" and "not a regular file" in found.error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["build", "sign"])
def test_a_directory_as_key_is_key_invalid_as_a_fifo_is(
    command: str, source: Path, release: Path, tmp_path: Path
) -> None:
    """A directory was click's usage error (exit 2); a FIFO or a dangling link was key_invalid (exit 1)."""
    key = tmp_path / "private-keys"
    key.mkdir()
    target = ("build", source, "--out", tmp_path / "out") if command == "build" else ("sign", release)
    found = refused(run("rimthan-pack", *target, "--key", key))
    assert found.code == "key_invalid" and "not a regular file" in found.error
    assert found.next == f"--key takes a private key file, not a directory: pass one in it, --key {key}/PREFIX.key"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["build", "verify"])
def test_a_trust_file_naming_a_fifo_is_refused_never_waited_on(
    command: str, source: Path, release: Path, signer: KeyPair, tmp_path: Path
) -> None:
    _fifo(tmp_path / "ops.pub")
    trust = tmp_path / "trust.toml"
    trust.write_text('threshold = 1\n[[keys]]\nname = "ops"\nfile = "ops.pub"\n', encoding="utf-8")
    args = (
        ("build", source, "--key", signer.private_path, "--out", tmp_path / "out")
        if command == "build"
        else ("verify", release)
    )
    found = refused(run("rimthan-pack", *args, "--trust", trust))
    assert found.code == "key_invalid" and "ops.pub" in found.error and "not a regular file" in found.error
    assert not (tmp_path / "out").exists()


def test_a_huge_sparse_key_is_refused_as_too_large(source: Path, tmp_path: Path) -> None:
    key = tmp_path / "huge.key"
    with key.open("wb") as handle:
        handle.truncate(1024**3)  # 1 GB, sparse: costs no disk
    found = refused(run("rimthan-pack", "build", source, "--key", key, "--out", tmp_path / "out"))
    assert found.code == "key_invalid" and "too large to be a private key" in found.error


@pytest.mark.parametrize("place", ["trusted", "private", "private-not-ed25519"])
def test_key_invalid_says_the_next_step_for_the_key_it_names(
    place: str, source: Path, release: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """A garbage trusted ``.pub`` once advised ``rimthan-mcp keys rotate`` (checkpoint keys): each says its own."""
    if place == "trusted":
        (tmp_path / "trust").mkdir()
        (tmp_path / "trust/ops.pub").write_text("garbage\n", encoding="utf-8")
        found = refused(run("rimthan-pack", "verify", release, "--trust", tmp_path / "trust"))
        expected = "replace or remove the named key in --trust"
    else:
        key = tmp_path / "ci.key"
        other = ec.generate_private_key(ec.SECP256R1()) if place == "private-not-ed25519" else None
        key.write_bytes(
            other.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if other else b"x" * 10**6
        )
        key.chmod(0o600)
        found = refused(run("rimthan-pack", "build", source, "--key", key, "--out", tmp_path / "out"))
        expected = "pass the PREFIX.key that `rimthan-pack keygen --out PREFIX` wrote"
    assert found.code == "key_invalid" and found.next.startswith(expected), found
    assert "keys rotate" not in found.next


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_checkpoint_keys_that_are_a_fifo_or_huge_are_refused(kind: str, tmp_path: Path) -> None:
    keys = tmp_path / "checkpoint-keys.json"
    if kind == "fifo":
        _fifo(keys)
    else:
        with keys.open("wb") as handle:
            handle.truncate(1024**3)  # read whole before: a gigabyte of memory for a key file
    for command in ("list", "rotate"):
        found = refused(run("rimthan-mcp", "keys", command, "--checkpoint-keys", keys))
        expected = "not a regular file" if kind == "fifo" else "over 1048576 bytes"
        assert found.code == "key_invalid" and expected in found.error, found
    assert keys.is_fifo() if kind == "fifo" else keys.stat().st_size == 1024**3  # never replaced


@pytest.mark.parametrize("file", ["manifest", "checkpoint-keys"])
def test_a_byte_that_is_not_utf8_is_named_at_its_line_not_in_pythons_words(
    file: str, release: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Was "not valid JSON: 'utf-8' codec can't decode byte 0xff in position 17: invalid start byte"."""
    copy = tmp_path / release.name
    shutil.copytree(release, copy)
    target = copy / "manifest.json" if file == "manifest" else tmp_path / "checkpoint-keys.json"
    target.write_bytes(b'{\n  "format": "\xff"}')
    if file == "manifest":
        found = refused(run("rimthan-pack", "verify", copy, "--trust", trust_dir(tmp_path / "trust", signer)))
    else:
        found = refused(run("rimthan-mcp", "keys", "list", "--checkpoint-keys", target))
    assert found.code == ("manifest_invalid" if file == "manifest" else "key_invalid"), found
    assert found.error.endswith("not valid JSON: byte 0xff at line 2, column 14 (byte offset 15) is not UTF-8"), found


def test_keygen_with_an_empty_prefix_is_a_usage_mistake(tmp_path: Path) -> None:
    found = refused(run("rimthan-pack", "keygen", "--out", "", cwd=tmp_path), status=2)
    assert found.code == "usage" and "needs a file name prefix" in found.error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("inside", ["releases", "."])
def test_build_refuses_an_out_inside_its_source(inside: str, signer: KeyPair, tmp_path: Path) -> None:
    source = scaffold_source(tmp_path / "demo")
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    found = refused(run("rimthan-pack", "build", source, "--key", signer.private_path, "--out", source / inside))
    assert found.code == "path_unsafe" and "inside the catalogue source" in found.error
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before  # nothing written into the source


@pytest.mark.parametrize("value", [" ", "-1", "0x10", "+5"])
def test_an_odd_source_date_epoch_says_how_to_set_it(value: str, source: Path, signer: KeyPair, tmp_path: Path) -> None:
    """The refusal's next line was the tool-call advice (``fix the value ... to match the tool's input schema``)."""
    epoch = {**os.environ, "SOURCE_DATE_EPOCH": value}
    done = run("rimthan-pack", "build", source, "--key", signer.private_path, "--out", tmp_path, env=epoch)
    found = refused(done)
    assert found.code == "invalid_arguments" and "SOURCE_DATE_EPOCH" in found.error
    assert found.next.startswith("set SOURCE_DATE_EPOCH to whole seconds since 1970")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["build", "keygen"])
def test_a_file_or_dangling_link_in_the_way_of_a_directory_is_named_as_such(
    command: str, source: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Both said "File exists" of the path in the way, which reads as the release or key already existing."""
    in_the_way = tmp_path / "in-the-way"
    in_the_way.symlink_to("nowhere")
    args = (
        ("build", source, "--key", signer.private_path, "--out", in_the_way)
        if command == "build"
        else ("keygen", "--out", in_the_way / "me")
    )
    found = refused(run("rimthan-pack", *args))
    assert found.code == "io_error" and found.error.endswith(
        f"{in_the_way}: exists and is not a directory (a file, or a symbolic link to nothing)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [in_the_way.name]


def _loop(directory: Path) -> Path:
    """``directory/loop-a`` -> ``loop-b`` -> ``loop-a``: a symbolic link loop (ELOOP on every use)."""
    (directory / "loop-b").symlink_to("loop-a")
    (directory / "loop-a").symlink_to("loop-b")
    return directory / "loop-a"


@pytest.mark.parametrize(
    ("given", "code", "said"),
    [
        ("source", "catalogue_invalid", "no catalogue source directory here"),
        ("out", "io_error", "exists and is not a directory (a file, or a symbolic link to nothing)"),
        ("out below", "io_error", "exists and is not a directory (a file, or a symbolic link to nothing)"),
    ],
)
def test_a_symlink_loop_as_source_or_out_is_refused_in_one_line(
    given: str, code: str, said: str, source: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """The check that --out is not inside the source resolved both paths first: a loop was a RuntimeError traceback."""
    loop = _loop(tmp_path)
    out = {"source": tmp_path / "releases", "out": loop, "out below": loop / "releases"}[given]
    done = run(
        "rimthan-pack", "build", loop if given == "source" else source, "--key", signer.private_path, "--out", out
    )
    found = refused(done)
    assert "Traceback" not in done.stderr
    assert found.code == code and found.error.endswith(f"{loop}: {said}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop-a", "loop-b"]  # no --out, no work directory


@pytest.mark.parametrize("half", ["public", "private"])
def test_a_key_file_as_trust_is_named_as_a_key_not_as_bad_toml(
    half: str, release: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """``--trust me.pub`` (or ``me.key``) was read as a TOML trust file: "fix the TOML syntax in me.pub at line 1"."""
    given = signer.public_path if half == "public" else signer.private_path
    building = ("build", scaffold_source(tmp_path / half), "--key", signer.private_path, "--out", tmp_path / "rel")
    for args in (("verify", release), building):
        found = refused(run("rimthan-pack", *args, "--trust", given))
        assert found.code == "trust_store_invalid" and "TOML syntax" not in found.next
        assert found.error.endswith(
            f"{given}: is one public key, not a trust store: --trust takes a directory of *.pub files or a TOML "
            "trust file"
            if half == "public"
            else f"{given}: is a private key, not a trust store (trust holds public keys only)"
        )
    assert not (tmp_path / "rel").exists()


@pytest.mark.parametrize("command", [["inspect"], ["verify", "--json", "--trust"]], ids=" ".join)
def test_output_piped_to_a_reader_that_has_gone_ends_quietly(
    command: list[str], release: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """``rimthan-pack inspect R | head -3`` said `error: io_error: Broken pipe` and a `next:` line about paths
    (exit 1): now nothing, and the status a shell gives a command stopped by SIGPIPE (141)."""
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "release.pub").write_bytes(signer.public_path.read_bytes())
    extra = [*command[1:], str(trust)] if command[-1] == "--trust" else command[1:]
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the first line: every write meets EPIPE
    try:
        done = subprocess.run(
            [str(BIN / "rimthan-pack"), command[0], str(release), *extra],
            stdout=writer,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=HANG_SECONDS,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")


# a required option left out: the command, and the next step naming the option and what it takes
LEFT_OUT = {
    "verify": "add --trust PATH - trust store: a directory of PEM *.pub files (threshold 1) or a TOML trust file "
    "with a threshold; more in 'rimthan-pack verify --help'",
    "sign": "add --key FILE - private signing key (PEM PKCS#8) of the co-signer; more in 'rimthan-pack sign --help'",
}


@pytest.mark.parametrize("command", sorted(LEFT_OUT))
def test_a_required_option_left_out_says_what_it_takes(command: str, release: Path) -> None:
    """`--trust` forgotten said only `run 'rimthan-pack verify --help'`: now the option and what to give it."""
    said = refused(run("rimthan-pack", command, release), status=2)

    assert said.error == f"error: usage: Missing option '{'--trust' if command == 'verify' else '--key'}'."
    assert said.next == LEFT_OUT[command]
