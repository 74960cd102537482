"""A ``rimthan-pack build`` that fails leaves nothing behind: not its work directory, not the ``--out`` it made.

``--out`` and its missing parents were made before the build could fail, and
stayed: after a refused self-check, a failed copy, Ctrl-C or ``SIGTERM``, an
engineer found an empty ``releases/new/dir`` (and, after ``SIGTERM``, a
hidden work directory in it). Now a failed build removes exactly the
directories it made, and never one that existed before, nor anything in it.
Each case runs the installed console script.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.refusals import refusal
from support.releases import KeyPair, make_keypair, scaffold_source, trust_dir

BIN = Path(sys.executable).parent
WAIT = 120.0  # a safety net against a hung child only
BULK_FILES = 3000  # enough files that the build is still copying when the signal comes
BIG_FILE = 256 * 1024
FILE_SIZE_LIMIT = 64 * 1024  # below BIG_FILE: writing the copy fails with EFBIG, as on a full disk


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "release")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalogue with thousands of small files and one large one (all shipped)."""
    source = scaffold_source(tmp_path_factory.mktemp("source") / "demo")
    bulk = source / "assets" / "bulk"
    bulk.mkdir(parents=True)
    for index in range(BULK_FILES):
        (bulk / f"f{index:05d}.md").write_text(f"# Note {index}\n\n" + "evidence line\n" * 20, "utf-8")
    (bulk / "big.md").write_text("# Big\n\n" + "x" * BIG_FILE + "\n", "utf-8")
    return source


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _build(
    source: Path, signer: KeyPair, out: Path, *extra: str | Path, limit_size: bool = False
) -> subprocess.Popen[str]:
    args = [str(BIN / "rimthan-pack"), "build", str(source), "--key", str(signer.private_path), "--out", str(out)]
    return subprocess.Popen(
        [*args, *map(str, extra)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit_file_size if limit_size else None,
    )


def _signal_when_copying(sig: int) -> Callable[[subprocess.Popen[str], Path], None]:
    def send(proc: subprocess.Popen[str], out: Path) -> None:
        ends = time.monotonic() + WAIT
        while proc.poll() is None and time.monotonic() < ends:
            if out.is_dir() and any(p.name.startswith(".demo-0.1.0.building-") for p in out.iterdir()):
                proc.send_signal(sig)
                return
            time.sleep(0.0005)

    return send


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused_as(code: str) -> Callable[[subprocess.Popen[str]], None]:
    def check(proc: subprocess.Popen[str]) -> None:
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 1, stderr
        assert refusal(stderr).code == code

    return check


def _ended(status: int, lines: list[str] | None) -> Callable[[subprocess.Popen[str]], None]:
    def check(proc: subprocess.Popen[str]) -> None:
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == status, stderr
        assert "Traceback" not in stderr
        assert lines is None or stderr.splitlines() == lines

    return check


# Ctrl-C is neither a usage mistake (exit 2) nor a refusal (exit 1): its own two lines, no blank line before them
INTERRUPTED = ["error: interrupted: stopped by Ctrl-C", "next: run the command again when you want it to finish"]

# how each build fails: its self-check refused (the signer is not in --trust), a copy that cannot be written
# (a file size limit, as a full disk), Ctrl-C while copying, SIGTERM while copying
CASES = ["untrusted", "copy", "sigint", "sigterm"]


def _run_case(case: str, source: Path, signer: KeyPair, out: Path, tmp_path: Path) -> None:
    if case == "untrusted":
        other = trust_dir(tmp_path / "other-trust", make_keypair(tmp_path / "other", "other"))
        _refused_as("signature_untrusted")(_build(source, signer, out, "--trust", other))
    elif case == "copy":
        _refused_as("io_error")(_build(source, signer, out, limit_size=True))
    else:
        proc = _build(source, signer, out)
        _signal_when_copying(signal.SIGINT if case == "sigint" else signal.SIGTERM)(proc, out)
        ended = _ended(128 + signal.SIGINT, INTERRUPTED) if case == "sigint" else _ended(128 + signal.SIGTERM, None)
        ended(proc)


@pytest.mark.parametrize("case", CASES)
def test_a_failed_build_removes_the_out_directories_it_made(
    case: str, source: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """``--out new/a/b`` under an existing directory: after the failure, the existing directory is as it was."""
    before = tmp_path / "existing"
    before.mkdir()
    (before / "keep.txt").write_text("an operator's file", "utf-8")
    _run_case(case, source, signer, before / "new" / "a" / "b", tmp_path)
    assert _tree(before) == ["keep.txt"]


def test_a_failed_build_into_an_existing_out_leaves_it_and_its_contents(
    source: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Only what the build made is taken back: an existing --out, even an empty one, stays."""
    out = tmp_path / "releases"
    (out / "empty").mkdir(parents=True)
    _run_case("untrusted", source, signer, out / "empty", tmp_path)
    assert _tree(out) == ["empty"]


def test_a_build_refused_before_writing_makes_no_out_directory(source: Path, tmp_path: Path) -> None:
    """A content or schema refusal comes before any directory is made (this already held; kept as a guard)."""
    broken = scaffold_source(tmp_path / "broken")
    (broken / "schemas" / "summary.schema.json").write_text("{", "utf-8")
    signer = make_keypair(tmp_path / "keys", "me")
    _refused_as("schema_invalid")(_build(broken, signer, tmp_path / "out" / "a"))
    assert not (tmp_path / "out").exists()
