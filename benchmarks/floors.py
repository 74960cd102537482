"""Floors: the least work a figure could possibly cost, measured on this machine in this run.

Hash floor: ``openssl dgst -sha256 f1 f2 ...`` over the same files, in ONE
process. We call ``openssl`` directly with the file list as arguments (paths
relative to the catalogue directory, so 10,000 files fit in a single command
line); only if the list exceeded half of ``ARG_MAX`` would it be split into
consecutive batches, like ``xargs`` does, and the batches' times added. Direct
arguments rather than ``find | xargs`` keep ``find``/``xargs`` start-up out of
the floor, which makes the floor stricter, not looser.

Signature floor: one Ed25519 signature over the manifest bytes, in process
(``cryptography``, i.e. OpenSSL), the median of many.

Build floor (P2): what a build must physically do - copy the source tree
(``cp -R``), hash it (``openssl dgst -sha256``, one process), one Ed25519
signature and one ``sync -f`` of the output file system (the copy is durable
only after it); for the 1 MiB case also the start of a bare interpreter
(``python3 -c pass``), which every Python CLI pays.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .timing import Measure, Sample, timed
from .trash import retire

_DIGEST_LINE = re.compile(r"^[^(]+\((?P<path>.*)\)= (?P<hex>[0-9a-f]{64})$")
_POINTER = 8


def arg_budget() -> int:
    """Bytes of command line we allow one openssl process (half of ARG_MAX, minus the environment)."""
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (OSError, ValueError):
        arg_max = 131072
    env = sum(len(k) + len(v) + 2 + _POINTER for k, v in os.environ.items())
    return max(arg_max // 2 - env, 4096)


def batches(paths: Sequence[str], budget: int | None = None) -> list[list[str]]:
    """Consecutive runs of ``paths`` that each fit one command line (usually just one)."""
    budget = arg_budget() if budget is None else budget
    out: list[list[str]] = [[]]
    used = 0
    for path in paths:
        cost = len(os.fsencode(path)) + 1 + _POINTER
        if out[-1] and used + cost > budget:
            out.append([])
            used = 0
        out[-1].append(path)
        used += cost
    return out


def _openssl(batch: Sequence[str], cwd: Path, capture: bool) -> str:
    if shutil.which("openssl") is None:
        raise RuntimeError("the hash floor needs the openssl command line tool (apt-get install openssl)")
    result = subprocess.run(
        ["openssl", "dgst", "-sha256", *batch],
        cwd=cwd,
        check=True,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
    )
    return result.stdout.decode("utf-8") if capture else ""


def openssl_digests(directory: Path, paths: Sequence[str]) -> dict[str, str]:
    """``path -> hex`` as openssl computes it (the untimed warm-up, which also proves the floor is real)."""
    digests: dict[str, str] = {}
    for batch in batches(paths):
        for line in _openssl(batch, directory, capture=True).splitlines():
            match = _DIGEST_LINE.match(line)
            if match:
                digests[match["path"]] = match["hex"]
    return digests


def hash_floor(directory: Path, paths: Sequence[str], expected: Mapping[str, str]) -> tuple[Measure, int]:
    """A measurement of openssl hashing ``paths`` (relative to ``directory``), and how many processes it takes.

    Checked once against ``expected`` digests first: a floor that hashed
    something else would make every ratio meaningless.
    """
    got = openssl_digests(directory, paths)
    if got != dict(expected):
        wrong = sorted(p for p in expected if got.get(p) != expected[p])[:3]
        raise RuntimeError(f"openssl digests differ from the manifest for {wrong}")
    groups = batches(paths)

    def measure() -> float:
        started = time.perf_counter()
        for batch in groups:
            _openssl(batch, directory, capture=False)
        return time.perf_counter() - started

    return measure, len(groups)


def signature_floor(message: bytes, reps: int = 200) -> Sample:
    """Seconds for one Ed25519 signature over ``message`` (a fresh key; the cost does not depend on it)."""
    key = Ed25519PrivateKey.generate()
    key.sign(message)
    values = []
    for _ in range(reps):
        started = time.perf_counter()
        key.sign(message)
        values.append(time.perf_counter() - started)
    return Sample(tuple(values))


def _run(*argv: str | Path) -> None:
    subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.DEVNULL)


def copy_and_sync(source: Path, scratch: Path, trash: Path) -> Measure:
    """``cp -R source`` into a fresh ``scratch`` copy, then ``sync -f`` its file system (retired untimed)."""
    for command in ("cp", "sync"):
        if shutil.which(command) is None:
            raise RuntimeError(f"the build floor needs the {command} command line tool (coreutils)")
    counter = iter(range(1_000_000))

    def measure() -> float:
        target = scratch / f"copy-{next(counter)}"
        scratch.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        _run("cp", "-R", source, target)
        _run("sync", "-f", target)
        elapsed = time.perf_counter() - started
        retire(target, trash)
        return elapsed

    return measure


def library_imports(modules: Sequence[str]) -> Measure:
    """An interpreter importing ``modules`` and exiting: not a floor, but what explains P2's figure at 1 MiB.

    Given the libraries a ``rimthan-pack build`` imports (``profiling.imported_libraries``: click,
    cryptography, the standard library's modules, none of ours), this is what the build would cost if all of
    our code took no time. A name the build failed to import fails here too.
    """
    code = (
        "import importlib\n"
        f"for name in {list(modules)!r}:\n"
        "    try:\n        importlib.import_module(name)\n"
        "    except ImportError:\n        pass\n"
    )
    return interpreter_start(code)


def interpreter_start(code: str = "pass") -> Measure:
    """An interpreter's start, ``code`` and exit (``python3 -c pass``: the bare start every Python CLI pays), the
    same executable as the CLIs."""
    return timed(lambda: _run(sys.executable, "-c", code))
