"""Subprocess entry points: one fresh interpreter per measurement, one JSON line on stdout.

``python -m benchmarks.probe verify --release R --trust T`` loads the release
the way ``rimthan-mcp serve`` does (``ReleaseProvider.open``: full
verification, then the query module; with ``--state-dir``, the server's
state directory, as ``serve`` passes it) and reports the import time, the load
time and the peak RSS (``VmHWM``) of this process.
``build`` does the same for ``build_release``, with the schema checks the
user cache remembers, as ``rimthan-pack build`` runs it. With ``--profile`` the
action runs once under cProfile and the grouped summary is printed instead
(the imports before it are not in that profile).

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

# VmHWM, not ru_maxrss: after fork+exec, Linux folds the parent's high-water mark into ru_maxrss, so a
# child of a large benchmark process would report the parent's peak. VmHWM belongs to this image alone.
BARE_CODE = "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))"


def peak_rss_kib() -> int:
    """This process's RSS high-water mark in KiB (``VmHWM``; ``ru_maxrss`` where there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _verify_action(args: argparse.Namespace) -> Callable[[], Any]:
    from rimthan_workflow_mcp.provider import ReleaseProvider
    from rimthan_workflow_registry.release import load_trust
    from rimthan_workflow_registry.run import CheckpointKeyring

    trust = load_trust(Path(args.trust))
    keyring = CheckpointKeyring.generate()
    state_dir = Path(args.state_dir) if args.state_dir else None
    return lambda: ReleaseProvider.open(Path(args.release), trust=trust, keyring=keyring, state_dir=state_dir)


def _build_action(args: argparse.Namespace) -> Callable[[], Any]:
    from rimthan_packager.build import build_release
    from rimthan_packager.signing import load_signing_key
    from rimthan_packager.user_cache import remembered_checks

    key = load_signing_key(Path(args.key))
    out = Path(tempfile.mkdtemp(prefix="probe-build-", dir=args.out))  # left for the caller to remove

    def build() -> Any:
        with remembered_checks():  # as ``rimthan-pack build`` runs it: the schema passes earlier builds kept count
            return build_release(Path(args.source), [key], out)

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
    parser.add_argument("--state-dir", help="verify: the server state directory (activation floor, schema checks)")
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
