"""Instructions our server process spends on each P3 call, counted under callgrind: stable on a shared machine.

``python -m benchmarks.experiments.p3_server_callgrind [--runs N] [--keep DIR] [--transport http]``
serves the packaged research-decision 1.2.0 release (as P3 does) with
``rimthan-mcp serve`` over stdio (or, with ``--transport http``, over
Streamable HTTP on a free port, as P3h and P6 serve it) under ``valgrind --tool=callgrind``
(``PYTHONHASHSEED=0``) and drives ``N`` complete runs (after one untimed) with
the host kit's harness through the SDK client, as ``bench_calls.drive_calls``
drives ours (no echo, no mirror). Before each call and after the last, the
driver has callgrind dump and zero its counters (``callgrind_control --dump``,
by the server's process id): each dump holds exactly the server process's
instructions from one call's request to the next call's, i.e. the whole call as
served (reading and parsing the request, the SDK, our handler, both encodings
of the result, writing the response) and the idle wait after it. Per tool it
prints the median, minimum and maximum instructions a call; ``--keep`` keeps
the dumps (``labels.txt`` says which call each numbered dump is;
``callgrind_annotate --inclusive=yes`` on one says where a call's
instructions go). With ``--ours`` the server runs each ``call_tool`` inside
``functools.reduce`` (``reduced_serving.py``) and each call's line also gives
that function's inclusive instructions: our part of the call, the rest being
the SDK's and the transport's. With ``--layers`` (HTTP) each layer of a call
runs inside its own marker (``layered_serving.py``) and each call's line gives
their inclusive instructions: our ASGI wrappers, the SDK's Starlette
application and session manager, the reply's encoding, ``send``/``receive``
(ours and uvicorn's), ``call_tool``; the rest is uvicorn's protocol and
asyncio's loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from rimthan_host.harness import client_caller

from .. import bench_calls
from ..fixtures import make_keys
from ..servers import CLIENT_MODE, http_server_process, rimthan_server
from ..synthetic import REPO_ROOT
from .layered_serving import LAYERS, split
from .wrapped_serving import wrapped

WORK = REPO_ROOT / "benchmarks" / "work" / "p3-server-callgrind"
STARTING = 900.0  # seconds an HTTP server under callgrind may take to listen on a loaded machine
UNCOUNTED = "-"  # what a dump of the warm-up run's calls is labelled


@dataclass
class Dumps:
    """The server's callgrind process and, in order, what each of its dumps covers (a tool name, or ``-``)."""

    work: Path
    pid: int = 0
    labels: list[str] = field(default_factory=list)
    current: str = UNCOUNTED  # the call under way: what the next dump covers

    def find_pid(self) -> int:
        """The valgrind process's id, read from its log file's name (``--log-file=vg.%p.log``)."""
        deadline = time.monotonic() + 120
        while not self.pid and time.monotonic() < deadline:
            logs = sorted(self.work.glob("vg.*.log"), key=lambda p: p.stat().st_mtime)
            self.pid = int(logs[0].name.split(".")[1]) if logs else 0
            time.sleep(0.1)
        return self.pid

    def dump(self, label: str) -> None:
        """Dump (and zero) the counters: the interval since the last dump is ``label``'s."""
        self.labels.append(label)
        subprocess.run(
            ["callgrind_control", f"--dump={len(self.labels)}-{label}", str(self.find_pid())],
            check=True,
            capture_output=True,
        )


ENV = {"PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")}


def under_callgrind(work: Path, release: Path, keys_trust: Path, state_dir: Path, instrument: str) -> list[str]:
    """``rimthan-mcp serve`` as P3 starts it (``instrument``: under ``wrapped_serving``'s), under callgrind."""
    command = rimthan_server(release, keys_trust, state_dir, work / "server.log")
    if instrument:
        command = wrapped(instrument, work / f"{instrument}.json", command)
    valgrind = [
        "--tool=callgrind",
        f"--callgrind-out-file={work}/callgrind.out.%p",
        f"--log-file={work}/vg.%p.log",
    ]
    return ["valgrind", *valgrind, sys.executable, *command.args]


async def drive(work: Path, runs: int, transport: str = "stdio", instrument: str = "") -> Dumps:
    """``runs`` packaged runs (after an uncounted one) against the server under callgrind; its dumps, labelled."""
    secrets = Path(tempfile.mkdtemp(prefix="rimthan-p3-cg-"))
    try:
        keys, state_dir = make_keys(secrets), secrets / "state"
        release = bench_calls.packaged_release(keys, work)
        dumps = Dumps(work)
        argv = under_callgrind(work, release, keys.trust_dir, state_dir, instrument)
        if transport == "http":
            http = [*argv, "--transport", "http", "--port", "0"]
            with http_server_process(http, cwd=REPO_ROOT, env=ENV, timeout=STARTING) as server:
                async with Client(server.url, mode=CLIENT_MODE) as client:
                    await all_runs(client, dumps, release, work, runs)
            return dumps
        with (work / "server.err").open("w") as errlog:
            params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO_ROOT), env=ENV)
            async with Client(stdio_client(params, errlog=errlog), mode=CLIENT_MODE) as client:
                await all_runs(client, dumps, release, work, runs)
        return dumps
    finally:
        shutil.rmtree(secrets, ignore_errors=True)


async def all_runs(client: Client, dumps: Dumps, release: Path, work: Path, runs: int) -> None:
    for run in range(runs + 1):
        await one_run(client, dumps, release, work / "projects" / str(run), counted=run > 0)
    dumps.dump(dumps.current)


async def one_run(client: Client, dumps: Dumps, release: Path, project: Path, *, counted: bool) -> None:
    """One complete run through the harness; each call opens a new dump interval (``counted``: labelled)."""
    inner = client_caller(client)

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        dumps.dump(dumps.current)
        dumps.current = name if counted else UNCOUNTED
        return await inner(name, arguments)

    if await bench_calls.packaged_run(call, release, project) != "completed":
        raise RuntimeError("the packaged run did not complete")


def totals(work: Path, dumps: Dumps, count: Callable[[Path], int] | None = None) -> dict[str, list[int]]:
    """Per tool, ``count`` of each counted call's dump (by default its ``summary:`` or ``totals:`` line)."""
    per_tool: dict[str, list[int]] = {}
    for number, label in enumerate(dumps.labels, start=1):
        if label != UNCOUNTED:
            per_tool.setdefault(label, []).append((count or total)(work / f"callgrind.out.{dumps.pid}.{number}"))
    return per_tool


def total(path: Path) -> int:
    """A dump's instructions, from its ``summary:`` or ``totals:`` line."""
    lines = path.read_text().splitlines()
    return next(int(line.split()[1]) for line in lines if line.startswith(("summary:", "totals:")))


def in_call_tool(path: Path) -> int:
    """A dump's inclusive instructions of ``functools_reduce``: our ``call_tool`` under ``--ours``."""
    return inclusive(path)["functools_reduce"]


def inclusive(path: Path) -> dict[str, int]:
    """A dump's inclusive instructions of each marker ``LAYERS`` names (0: not called)."""
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = dict.fromkeys(LAYERS, 0)
    for line in annotated.splitlines():
        parts = line.split()  # "1,234 (5.6%) file:symbol [object]"
        symbol = parts[-2].rsplit(":", 1)[-1] if len(parts) > 3 and parts[-1].startswith("[") else ""
        if symbol in found:
            found[symbol] = max(found[symbol], int(parts[0].replace(",", "")))
    return found


def layer_lines(work: Path, dumps: Dumps) -> list[str]:
    """Per tool, the median instructions a call of each part of it (``--layers``: ``layered_serving.split``)."""
    per_tool: dict[str, list[dict[str, int]]] = {}
    for number, label in enumerate(dumps.labels, start=1):
        if label != UNCOUNTED:
            path = work / f"callgrind.out.{dumps.pid}.{number}"
            per_tool.setdefault(label, []).append(split(total(path), inclusive(path)))
    return [
        f"{tool} {part:<44} median {statistics.median(c[part] for c in counts):>12,.0f}"
        for tool, counts in sorted(per_tool.items())
        for part in counts[0]
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_server_callgrind")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--ours", action="store_true", help="also count call_tool's part (inside functools.reduce)")
    parser.add_argument("--layers", action="store_true", help="HTTP: also count each layer of a call (its marker)")
    args = parser.parse_args(argv)
    if args.layers and args.transport != "http":
        parser.error("--layers splits an HTTP call: give --transport http")
    instrument = "layered" if args.layers else "reduced" if args.ours else ""
    work = args.keep or WORK
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dumps = anyio.run(drive, work, args.runs, args.transport, instrument)
    (work / "labels.txt").write_text("".join(f"{number} {label}\n" for number, label in enumerate(dumps.labels, 1)))
    time.sleep(1)
    for tool, counts in sorted(totals(work, dumps).items()):
        print(
            f"{tool:<32} calls {len(counts):>3}  median {statistics.median(counts):>12,.0f}  "
            f"min {min(counts):>12,}  max {max(counts):>12,}"
        )
    if args.layers:
        print("\n".join(layer_lines(work, dumps)))
    elif args.ours:
        for tool, counts in sorted(totals(work, dumps, in_call_tool).items()):
            print(
                f"{tool + ' call_tool':<42} median {statistics.median(counts):>12,.0f}  "
                f"min {min(counts):>12,}  max {max(counts):>12,}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
