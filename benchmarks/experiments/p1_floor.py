"""P1's lower bounds: the least Python can do to hash a release's files, beside openssl.

``python -m benchmarks.experiments.p1_floor RELEASE_DIR [--runs N]`` reads the
file list (path, size, SHA-256) from ``RELEASE_DIR/manifest.json`` untimed, then
runs each layout ``N`` times, alternating, over the same warm files:

* ``py1``   one thread: ``os.open`` / ``os.read`` / ``hashlib.sha256`` / ``os.close`` per file
            (one read of ``size + 1`` bytes), and the digest compared (a helper call per file);
* ``py1d``  the same, each file opened relative to its directory's descriptor (``dir_fd``);
* ``py2``   ``py1`` on 2 threads (``ThreadPoolExecutor``, batches of 64 files, in order);
* ``fork2`` ``py1`` in 2 forked processes (halves of the list), the parent waits for both;
* ``th2h``  ``py1`` on 2 threads, each over a contiguous half, CPython's default GIL switch interval (5 ms);
* ``th2s``  the same with the switch interval at 0.1 ms while they run (``th2s1``: 0.01 ms);
* ``spawn2`` a spawned ``python -I -S`` worker (stdlib only) is sent the open descriptors of half the files
            over a socketpair (``send_fds``, batches of 200) and answers (length, digest) per file, while
            the parent hashes the other half; the worker's start is inside the figure;
* ``fdig``  ``hashlib.file_digest`` per file; ``readv``: ``os.readv`` into one preallocated buffer;
* ``openssl`` ``openssl dgst -sha256`` over the same files, one process (the P1 floor).

Each layout's wall time and CPU time (user + system, children included) are
printed as medians, with the ratio of wall time to openssl's. Nothing is
cached between runs but the page cache (warm, as in P1). The process's
interpreter start and imports are outside every figure, as in P1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

Entry = tuple[str, int, str]  # path relative to catalogue/, size, hex digest
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_BATCH = 64


def _hash_one(path: str, size: int, digest: str, dir_fd: int | None = None) -> bool:
    fd = os.open(path, _FLAGS, dir_fd=dir_fd)
    try:
        data = os.read(fd, size + 1)
    finally:
        os.close(fd)
    return len(data) == size and hashlib.sha256(data).hexdigest() == digest


def _hash_all(base: str, entries: Sequence[Entry]) -> int:
    return sum(not _hash_one(f"{base}/{path}", size, digest) for path, size, digest in entries)


def _hash_all_dirfd(base: str, entries: Sequence[Entry]) -> int:
    bad = 0
    dirs: dict[str, int] = {}
    try:
        for path, size, digest in entries:
            parent, _, name = path.rpartition("/")
            dfd = dirs.get(parent)
            if dfd is None:
                dfd = dirs[parent] = os.open(f"{base}/{parent}" if parent else base, os.O_RDONLY | os.O_DIRECTORY)
            bad += not _hash_one(name, size, digest, dfd)
    finally:
        for dfd in dirs.values():
            os.close(dfd)
    return bad


def _threads(base: str, entries: Sequence[Entry]) -> int:
    batches = [entries[i : i + _BATCH] for i in range(0, len(entries), _BATCH)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return sum(pool.map(lambda batch: _hash_all(base, batch), batches))


def _forked(base: str, entries: Sequence[Entry]) -> int:
    half = len(entries) // 2
    pids = []
    for part in (entries[:half], entries[half:]):
        pid = os.fork()
        if pid == 0:
            os._exit(1 if _hash_all(base, part) else 0)
        pids.append(pid)
    return sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids)


def _halves(entries: Sequence[Entry], parts: int = 2) -> list[Sequence[Entry]]:
    step = -(-len(entries) // parts)
    return [entries[i : i + step] for i in range(0, len(entries), step)]


def _threads_halves(base: str, entries: Sequence[Entry], interval: float | None = None) -> int:
    import sys
    import threading

    old = sys.getswitchinterval()
    results: list[int] = []
    if interval is not None:
        sys.setswitchinterval(interval)
    try:
        workers = [
            threading.Thread(target=lambda part=part: results.append(_hash_all(base, part)))
            for part in _halves(entries)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(old)
    return sum(results)


def _hash_file_digest(base: str, entries: Sequence[Entry]) -> int:
    bad = 0
    for path, _, digest in entries:
        with open(f"{base}/{path}", "rb", buffering=0) as f:
            bad += hashlib.file_digest(f, "sha256").hexdigest() != digest
    return bad


def _hash_readv(base: str, entries: Sequence[Entry]) -> int:
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    bad = 0
    for path, size, digest in entries:
        fd = os.open(f"{base}/{path}", _FLAGS)
        try:
            n = os.readv(fd, [view[: size + 1]])
        finally:
            os.close(fd)
        bad += n != size or hashlib.sha256(view[:n]).hexdigest() != digest
    return bad


def _spawned(base: str, entries: Sequence[Entry]) -> int:
    import socket
    import struct
    import sys

    parent, child = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "/tmp/ph/worker_proto.py", str(child.fileno())], pass_fds=[child.fileno()]
    )
    child.close()
    half = len(entries) // 2
    mine, theirs = entries[:half], entries[half:]
    bad = 0
    batch = 200
    pending = []
    for i in range(0, len(theirs), batch):
        part = theirs[i : i + batch]
        fds = [os.open(f"{base}/{p}", _FLAGS) for p, _, _ in part]
        for fd in fds:
            os.fstat(fd)
        socket.send_fds(parent, [struct.pack(f"<{len(part)}q", *(e[1] for e in part))], fds)
        for fd in fds:
            os.close(fd)
        pending.append(part)
        if len(pending) > 2:
            bad += _collect(parent, pending.pop(0))
    bad += _hash_all(base, mine)
    for part in pending:
        bad += _collect(parent, part)
    parent.shutdown(socket.SHUT_WR)
    proc.wait()
    parent.close()
    return bad


_WORKER = """
import hashlib, os, socket, struct, sys
sock = socket.socket(fileno=int(sys.argv[1]))
while True:
    msg, fds, _, _ = socket.recv_fds(sock, 65536, 256)
    if not msg:
        break
    out = []
    for fd, size in zip(fds, struct.unpack(f"<{len(fds)}q", msg)):
        try:
            data = os.read(fd, size + 1)
        finally:
            os.close(fd)
        out.append(struct.pack("<q", len(data)) + hashlib.sha256(data).digest())
    sock.sendall(b"".join(out))
"""


def _collect(sock: Any, part: Sequence[Entry]) -> int:
    want = 40 * len(part)
    buf = b""
    while len(buf) < want:
        chunk = sock.recv(want - len(buf))
        assert chunk
        buf += chunk
    bad = 0
    for i, (_, size, digest) in enumerate(part):
        n = int.from_bytes(buf[40 * i : 40 * i + 8], "little")
        bad += n != size or buf[40 * i + 8 : 40 * i + 40].hex() != digest
    return bad


def _openssl(base: str, entries: Sequence[Entry]) -> int:
    subprocess.run(
        ["openssl", "dgst", "-sha256", *(e[0] for e in entries)], cwd=base, check=True, stdout=subprocess.DEVNULL
    )
    return 0


LAYOUTS: dict[str, Callable[[str, Sequence[Entry]], int]] = {
    "py1": _hash_all,
    "py1d": _hash_all_dirfd,
    "py2": _threads,
    "fork2": _forked,
    "th2h": _threads_halves,
    "spawn2": _spawned,
    "th2s": lambda base, entries: _threads_halves(base, entries, 1e-4),
    "th2s1": lambda base, entries: _threads_halves(base, entries, 1e-5),
    "fdig": _hash_file_digest,
    "readv": _hash_readv,
    "openssl": _openssl,
}


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p1_floor")
    parser.add_argument("release", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", nargs="*", default=list(LAYOUTS))
    args = parser.parse_args(argv)
    manifest = json.loads((args.release / "manifest.json").read_bytes())
    entries: list[Entry] = [(f["path"], f["size"], f["sha256"]) for f in manifest["files"]]
    base = str(args.release / "catalogue")
    walls: dict[str, list[float]] = {name: [] for name in args.only}
    cpus: dict[str, list[float]] = {name: [] for name in args.only}
    for name in args.only:  # one untimed run each: warm page cache, thread pool code paths imported
        assert LAYOUTS[name](base, entries) == 0, name
    for _ in range(args.runs):
        for name in args.only:
            cpu, wall = _cpu(), time.perf_counter()
            LAYOUTS[name](base, entries)
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(_cpu() - cpu)
    floor = statistics.median(walls["openssl"]) if "openssl" in walls else None
    print(f"{len(entries)} files, {sum(e[1] for e in entries) / 2**20:.1f} MiB, load {os.getloadavg()[0]:.2f}")
    for name in args.only:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        ratio = f"{wall / floor:5.2f}x" if floor else "-"
        best = min(walls[name]) * 1000
        print(f"{name:8} wall {wall * 1000:7.1f} ms  cpu {cpu * 1000:7.1f} ms  {ratio}  (min {best:.1f})")


if __name__ == "__main__":
    main()
