"""Verification's threaded file check: the same verdict as one thread, on real signed releases.

Every test forces the threaded path (two threads, one file per batch, so the
threads interleave over the whole release) and compares it with the
one-thread path on the same broken release: the failure code, the file named
and the message must be identical. The GIL switch interval the threaded path
shortens is restored afterwards, whatever the outcome.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import MAX_SAID_FAILURES, FailureCode, RegistryError, ReleaseVerificationError
from rimthan_workflow_registry.release import file_pipeline, parallel, verified, verify
from rimthan_workflow_registry.release.format import FileEntry
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verified import READ_CHUNK, check_file, check_files, stops_file_check
from rimthan_workflow_registry.release.verify import verify_release

F = FailureCode


def _verdict(release: Path, trust: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str]:
    """(code, path, message) of the refusal, or ("accepted", release id, "") - on ``workers`` threads."""
    with monkeypatch.context() as patch:
        patch.setattr(verify, "verify_threads", lambda files, total: workers)
        patch.setattr(verify, "_HASH_BATCH", 1)
        try:
            verified = verify_release(release, load_trust(trust))
        except RegistryError as exc:
            return exc.code.value, exc.path or "", exc.message
    return "accepted", verified.release_id, ""


def _catalogue_files(release: Path) -> list[Path]:
    catalogue = release / "catalogue"
    return [catalogue / rel for rel in sorted(p.relative_to(catalogue).as_posix() for p in catalogue.rglob("*.md"))]


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))


def _grow(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\n")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


def _hard_link(path: Path) -> None:
    (path.parent.parent / f"{path.name}.link").hardlink_to(path)


def _remove(path: Path) -> None:
    path.unlink()


def _to_symlink(path: Path) -> None:
    target = path.with_name(path.name + ".real")
    path.rename(target)
    path.symlink_to(target)


BREAKS: dict[str, tuple[Callable[[Path], None], FailureCode]] = {
    "digest": (_flip_byte, F.FILE_DIGEST_MISMATCH),
    "grown": (_grow, F.FILE_SIZE_MISMATCH),
    "truncated": (_truncate, F.FILE_SIZE_MISMATCH),
    "hard-linked": (_hard_link, F.FILE_TYPE_FORBIDDEN),
    "missing": (_remove, F.FILE_MISSING),
}


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_file_is_named_alike_on_one_thread_and_on_two(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch, name: str, where: str
) -> None:
    files = _catalogue_files(signed_release)
    target = {"first": files[0], "middle": files[len(files) // 2], "last": files[-1]}[where]
    breaks, code = BREAKS[name]
    breaks(target)
    one = _verdict(signed_release, trust, 1, monkeypatch)
    two = _verdict(signed_release, trust, 2, monkeypatch)
    assert one[0] == code.value, one
    assert two == one


def test_two_broken_files_the_first_in_manifest_order_is_named_on_every_run(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _catalogue_files(signed_release)
    _flip_byte(files[-1])
    _flip_byte(files[1])
    expected = _verdict(signed_release, trust, 1, monkeypatch)
    assert expected[:2] == (F.FILE_DIGEST_MISMATCH.value, str(files[1]))
    for _ in range(10):
        assert _verdict(signed_release, trust, 2, monkeypatch) == expected


def test_a_symlinked_file_is_refused_alike(signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _to_symlink(_catalogue_files(signed_release)[2])
    one = _verdict(signed_release, trust, 1, monkeypatch)
    assert one[0] == F.FILE_TYPE_FORBIDDEN.value
    assert _verdict(signed_release, trust, 2, monkeypatch) == one


def test_the_unbroken_release_verifies_on_two_threads_and_the_switch_interval_is_restored(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sys.getswitchinterval()
    assert _verdict(signed_release, trust, 2, monkeypatch) == ("accepted", "demo@0.1.0", "")
    _flip_byte(_catalogue_files(signed_release)[0])
    assert _verdict(signed_release, trust, 2, monkeypatch)[0] == F.FILE_DIGEST_MISMATCH.value
    assert sys.getswitchinterval() == before


def test_concurrent_verifications_restore_the_switch_interval_after_the_last(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sys.getswitchinterval()
    monkeypatch.setattr(verify, "verify_threads", lambda files, total: 2)
    monkeypatch.setattr(verify, "_HASH_BATCH", 1)
    store = load_trust(trust)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(verify_release(signed_release, store).release_id))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["demo@0.1.0"] * 4
    assert sys.getswitchinterval() == before


# --------------------------------------------------------------------------- the batch file check


def _one_by_one(base: str, entries: Sequence[FileEntry]) -> list[ReleaseVerificationError]:
    """The reference: :func:`check_file` on each entry in order, on past a digest mismatch, up to any other failure."""
    found: list[ReleaseVerificationError] = []
    for entry in entries:
        try:
            check_file(f"{base}/{entry.path}", entry, where=f"{base}/{entry.path}")
        except ReleaseVerificationError as exc:
            found.append(exc)
            if stops_file_check(exc):
                break
    return found


def _said(found: Sequence[BaseException]) -> object:
    return [(f.code, f.path, f.message) for f in found if isinstance(f, RegistryError)] or "accepted"


def _refusal(
    check: Callable[[str, Sequence[FileEntry]], Sequence[BaseException]], base: Path, entries: list[FileEntry]
) -> object:
    return _said(check(str(base), entries))


def _to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _to_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


FILE_BREAKS: dict[str, Callable[[Path], None]] = {
    **{name: breaks for name, (breaks, _) in BREAKS.items()},
    "symlink": _to_symlink,
    "fifo": _to_fifo,
    "directory": _to_directory,
    "unbroken": lambda path: None,
}


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
@pytest.mark.parametrize("name", sorted(FILE_BREAKS))
def test_the_batch_file_check_refuses_exactly_as_the_one_file_check(tmp_path: Path, name: str, large: bool) -> None:
    """Same code, path and message as :func:`check_file` file by file: each broken file in order, up to one that
    is not a digest mismatch."""
    (tmp_path / "d").mkdir()
    contents = [b"first", os.urandom(READ_CHUNK + 7) if large else b"second file", b"third"]
    entries = [FileEntry.for_bytes(f"d/{n}.bin", data) for n, data in enumerate(contents)]
    for entry, data in zip(entries, contents, strict=True):
        (tmp_path / entry.path).write_bytes(data)
    FILE_BREAKS[name](tmp_path / entries[1].path)
    _flip_byte(tmp_path / entries[2].path)  # a later broken file never hides the first one
    expected = _refusal(_one_by_one, tmp_path, entries)
    assert expected != "accepted"
    assert _refusal(check_files, tmp_path, entries) == expected


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_release_is_refused_alike_by_the_batch_and_the_one_file_check(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    breaks, code = BREAKS[name]
    breaks(_catalogue_files(signed_release)[1])
    batch = _verdict(signed_release, trust, 2, monkeypatch)
    monkeypatch.setattr(verify, "check_files", _one_by_one)
    assert batch[0] == code.value
    assert _verdict(signed_release, trust, 2, monkeypatch) == batch


def _files(tmp_path: Path, count: int, breaks: dict[int, Callable[[Path], None]]) -> list[FileEntry]:
    """``count`` files in ``tmp_path/d`` (a hard link goes beside ``d``), those in ``breaks`` broken."""
    entries = [FileEntry.for_bytes(f"d/f{n:03}.bin", b"file %d" % n * (n + 1)) for n in range(count)]
    (tmp_path / "d").mkdir()
    for n, entry in enumerate(entries):
        (tmp_path / entry.path).write_bytes(b"file %d" % n * (n + 1))
        if n in breaks:
            breaks[n](tmp_path / entry.path)
    return entries


PIPELINE_CASES: dict[str, dict[int, Callable[[Path], None]]] = {
    "none": {},
    "digest before a missing file": {5: _flip_byte, 17: _remove},
    "missing before a digest": {5: _remove, 17: _flip_byte},
    "symlink, then grown": {0: _to_symlink, 1: _grow},
    "digest in the last file": {29: _flip_byte},
    "digest, then hard link": {11: _flip_byte, 12: _hard_link},
    "two digests": {23: _flip_byte, 3: _flip_byte},
}


@pytest.mark.parametrize("batch", [1, 3, 64])
@pytest.mark.parametrize("name", sorted(PIPELINE_CASES))
def test_the_read_and_hash_threads_report_the_one_thread_failure(tmp_path: Path, name: str, batch: int) -> None:
    """Failures found by either thread, in any batch: in order, the ones ``check_files`` finds."""
    entries = _files(tmp_path, 30, PIPELINE_CASES[name])
    expected = _refusal(check_files, tmp_path, entries)
    batches = [entries[i : i + batch] for i in range(0, len(entries), batch)]
    for _ in range(5):
        assert _said(file_pipeline.file_failures(str(tmp_path), batches)) == expected


class _ThreadKilled(BaseException):
    """Not an ``Exception``: what a thread could die of without any ``except Exception`` seeing it."""


@pytest.mark.parametrize("error", [RuntimeError, _ThreadKilled])
def test_an_unexpected_error_on_the_hashing_thread_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    entries = _files(tmp_path, 12, {})
    real = verified.digest_failures

    def failing(base: str, batch: Sequence[FileEntry], read: Sequence[bytes | None], *digest: object) -> object:
        if batch[0].path == "d/f006.bin":
            raise error("hashing broke")
        return real(base, batch, read, *digest)  # type: ignore[arg-type]

    monkeypatch.setattr(file_pipeline, "digest_failures", failing)
    before = sys.getswitchinterval()
    (found,) = file_pipeline.file_failures(str(tmp_path), [entries[i : i + 2] for i in range(0, 12, 2)])
    assert isinstance(found, error) and str(found) == "hashing broke"  # never a batch counted as checked
    assert sys.getswitchinterval() == before


# --------------------------------------------------------------------------- the helper itself


def _check_until(
    bad: set[int], raises: set[int], seen: list[int], error: type[BaseException] = RuntimeError
) -> Callable[[Sequence[int]], BaseException | None]:
    def check(batch: Sequence[int]) -> BaseException | None:
        for item in batch:
            seen.append(item)
            if item in raises:
                raise error(f"unexpected at {item}")
            if item in bad:
                return ValueError(f"bad {item}")
        return None

    return check


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_first_failure_is_the_first_in_order_and_an_unexpected_error_is_never_dropped(workers: int) -> None:
    batches = [[i, i + 1] for i in range(0, 200, 2)]
    seen: list[int] = []
    assert parallel.first_failure(_check_until(set(), set(), seen), batches, workers) is None
    assert sorted(seen) == list(range(200))
    found = parallel.first_failure(_check_until({151, 37}, set(), []), batches, workers)
    assert isinstance(found, ValueError) and str(found) == "bad 37"
    for error in (RuntimeError, _ThreadKilled):  # whatever a thread dies of fails its batch: never counted as checked
        crashed = parallel.first_failure(_check_until({151}, {99}, [], error), batches, workers)
        assert isinstance(crashed, error) and str(crashed) == "unexpected at 99"


def test_the_switch_interval_is_short_only_while_a_check_runs() -> None:
    before = sys.getswitchinterval()
    during: list[float] = []

    def check(batch: Sequence[int]) -> BaseException | None:
        during.append(sys.getswitchinterval())
        return None

    assert parallel.first_failure(check, [[1], [2], [3]], 2) is None
    assert during == pytest.approx([min(before, parallel.SWITCH_INTERVAL_S)] * 3)
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize("workers", [1, 2])
def test_every_file_whose_digest_differs_is_said_on_one_thread_or_two(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """On one thread (``failures_in_order``) and on two (the read and hash threads of ``file_pipeline``), every
    file whose SHA-256 is not listed is a failure of its own, in manifest order, the first raised."""
    changed = _catalogue_files(signed_release)[1:6:2]
    for path in changed:
        _flip_byte(path)
    with monkeypatch.context() as patch:
        patch.setattr(verify, "verify_threads", lambda files, total: workers)
        patch.setattr(verify, "_HASH_BATCH", 1)
        with pytest.raises(RegistryError) as refused:
            verify_release(signed_release, load_trust(trust))
    assert [(f.code, f.path) for f in refused.value.failures] == [
        (FailureCode.FILE_DIGEST_MISMATCH, str(path)) for path in changed
    ]


@pytest.mark.parametrize("workers", [1, 2])
def test_an_unexpected_error_after_a_digest_mismatch_is_raised_not_hidden(
    signed_release: Path, trust: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A digest mismatch does not stop the check, so a later batch may die of something else: that is raised."""
    catalogue = signed_release / "catalogue"
    files = _catalogue_files(signed_release)
    _flip_byte(files[0])
    broken = str(files[3])
    module, name = (verify, "check_files") if workers == 1 else (file_pipeline, "read_files")
    real = getattr(module, name)

    def dies(base: str, entries: Sequence[FileEntry], *at: object) -> object:
        if any(f"{base}/{e.path}" == broken for e in entries):
            raise _ThreadKilled("reading broke")
        return real(base, entries, *at)

    assert broken.startswith(str(catalogue))
    monkeypatch.setattr(verify, "verify_threads", lambda files, total: workers)
    monkeypatch.setattr(verify, "_HASH_BATCH", 1)
    monkeypatch.setattr(module, name, dies)
    with pytest.raises(_ThreadKilled, match="reading broke"):
        verify_release(signed_release, load_trust(trust))


# --------------------------------------------------------------------------- only what is said is held


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_the_read_and_hash_threads_hold_only_the_mismatches_that_are_said(tmp_path: Path, batch: int) -> None:
    """35 files whose digest differs, then a missing one: the first ``MAX_SAID_FAILURES`` mismatches (all that a
    refusal says) and the missing file are all the check returns; before, every mismatch was held to the end."""
    entries = _files(tmp_path, 40, {**dict.fromkeys(range(35), _flip_byte), 36: _remove})
    batches = [entries[i : i + batch] for i in range(0, len(entries), batch)]
    found = file_pipeline.file_failures(str(tmp_path), batches)
    said = [(f.code, f.path) for f in found if isinstance(f, RegistryError)]
    mismatches = [(FailureCode.FILE_DIGEST_MISMATCH, f"{tmp_path}/{e.path}") for e in entries[:MAX_SAID_FAILURES]]
    assert said == [*mismatches, (FailureCode.FILE_MISSING, f"{tmp_path}/{entries[36].path}")]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_failures_in_order_holds_the_first_it_keeps_then_the_first_that_stops(workers: int) -> None:
    """Every item fails without stopping but 150, which stops: the first ``keep`` in order, then 150's."""

    def check(batch: Sequence[int]) -> list[BaseException]:
        found: list[BaseException] = []
        for item in batch:
            found.append(RuntimeError(f"stop {item}") if item == 150 else ValueError(f"bad {item}"))
            if item == 150:
                break
        return found

    batches = [[i, i + 1, i + 2] for i in range(0, 300, 3)]
    found = parallel.failures_in_order(check, batches, workers, stops=lambda f: isinstance(f, RuntimeError), keep=7)
    assert [str(f) for f in found] == [*(f"bad {i}" for i in range(7)), "stop 150"]
    everything = parallel.failures_in_order(check, batches, workers, stops=lambda f: False, keep=7)
    assert [str(f) for f in everything] == [f"bad {i}" for i in range(7)]
