"""Subprocess entry points: one fresh interpreter per measurement, one JSON line on stdout.

``python -m benchmarks.probe verify --release R --trust T`` loads the release
the way ``rimthan-mcp serve`` does (``ReleaseProvider.open``: full
verification, then the query module) and reports the import time, the load
time and the peak RSS (``ru_maxrss``, the kernel's VmHWM) of this process.
``build`` does the same for ``build_release``. With ``--profile`` the action
runs once under cProfile and the grouped summary is printed instead.

A fresh process per measurement means nothing is cached from an earlier
repetition, and the memory high-water mark belongs to this load alone.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BARE_CODE = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def peak_rss_kib() -> int:
    """The process's RSS high-water mark in KiB (Linux reports ``ru_maxrss`` in KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _verify_action(args: argparse.Namespace) -> Callable[[], Any]:
    from rimthan_workflow_mcp.provider import ReleaseProvider
    from rimthan_workflow_registry.tokens import CheckpointKeyring
    from rimthan_workflow_registry.trust import load_trust

    trust = load_trust(Path(args.trust))
    keyring = CheckpointKeyring.generate()
    return lambda: ReleaseProvider.open(Path(args.release), trust=trust, keyring=keyring)


def _build_action(args: argparse.Namespace) -> Callable[[], Any]:
    from rimthan_packager.build import build_release
    from rimthan_packager.signing import load_signing_key

    key = load_signing_key(Path(args.key))

    def build() -> Any:
        with tempfile.TemporaryDirectory(dir=args.out) as out:
            return build_release(Path(args.source), [key], Path(out))

    return build


ACTIONS = {"verify": _verify_action, "build": _build_action}


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe")
    parser.add_argument("action", choices=sorted(ACTIONS))
    parser.add_argument("--release")
    parser.add_argument("--trust")
    parser.add_argument("--source")
    parser.add_argument("--key")
    parser.add_argument("--out")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary instead of timings")
    args = parser.parse_args(argv)
    action = ACTIONS[args.action](args)
    imported = time.perf_counter()
    if args.profile:
        from .profiling import profile_call

        print(json.dumps(profile_call(action)))
        return 0
    action()
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - started, "action_s": done - imported, "peak_rss_kib": peak_rss_kib()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
