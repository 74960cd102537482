"""What ``rimthan-host serve`` (the bridge) does from exec until it answers ``tools/list``, beside the echo floor.

``python -m benchmarks.experiments.bridge_start [--runs N] [--callgrind]``
starts the bridge as a host does (``rimthan-host serve --project P -- <the
verifier's options>``, the verifier a child ``rimthan-mcp serve`` on the
packaged 1.2.0 release) and the SDK echo server (``benchmarks.echo_server``,
P5's floor) under ``python -X importtime``, lists the tools with the SDK
client, and prints, per server, the modules it imported by then and the
cumulative import time of the largest top-level ones (the client waits for
the answer, then closes). With ``--callgrind`` the server process alone (not
the bridge's child) runs under ``valgrind --tool=callgrind``
(``PYTHONHASHSEED=0``); once ``tools/list`` is answered its counters are
dumped: the instructions from exec to that answer.
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
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .. import bench_calls
from ..bytecode import compile_bytecode
from ..fixtures import make_keys
from ..servers import CLIENT_MODE
from ..synthetic import REPO_ROOT
from .p3_server_callgrind import total

sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.processes import serve_options  # noqa: E402

WORK = REPO_ROOT / "benchmarks" / "work" / "bridge-start"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Started:
    """One start: the modules imported by the answer, the largest top-level imports (us), the instructions."""

    modules: int
    largest: list[tuple[int, str]]
    instructions: int


def bridge_argv(work: Path, secrets: Path) -> list[str]:
    keys = make_keys(secrets)
    release = bench_calls.packaged_release(keys, work)
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    options = serve_options(release, keys.trust_dir, secrets / "state", log_level="warning")
    return [str(BIN / "rimthan-host"), "serve", "--project", str(project), "--", *options]


def echo_argv() -> list[str]:
    return ["-m", "benchmarks.echo_server"]


async def list_tools(argv: list[str], errlog: Path, callgrind: Path | None) -> None:
    """Start ``argv`` (under ``-X importtime``, and callgrind if asked), list its tools, dump, close."""
    command = [sys.executable, *(() if callgrind else ("-X", "importtime")), *argv]
    if callgrind is not None:
        out = [f"--callgrind-out-file={callgrind}/cg.%p", f"--log-file={callgrind}/vg.%p.log"]
        command = ["valgrind", "--tool=callgrind", *out, *command]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with errlog.open("w") as err:
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO_ROOT), env=env)
        async with Client(stdio_client(params, errlog=err), mode=CLIENT_MODE) as client:
            tools = await client.list_tools()
            if not tools.tools:
                raise RuntimeError("no tools listed")
            if callgrind is not None:
                dump(callgrind)


def server_pid(callgrind: Path) -> str:
    """The server's process id under valgrind, from its log file's name: the lowest (a child it forked writes one
    too, later, under a higher id; which log was written last says nothing, valgrind writes the server's at exit)."""
    return str(min(int(log.name.split(".")[1]) for log in callgrind.glob("vg.*.log")))


def dump(callgrind: Path) -> None:
    """Dump the server's counters (by its process id: never another valgrind's) and wait until the dump is written."""
    pid = server_pid(callgrind)
    subprocess.run(["callgrind_control", "--dump=listed", pid], check=True, capture_output=True)
    deadline = time.monotonic() + 300
    while not list(callgrind.glob(f"cg.{pid}.1")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1)


def read_start(errlog: Path, callgrind: Path | None) -> Started:
    lines = [line for line in errlog.read_text().splitlines() if line.startswith("import time:")]
    rows = [line.split("|") for line in lines[1:]]
    top = [(int(row[1]), row[2].strip()) for row in rows if not row[2].startswith("  ")]
    count = 0
    if callgrind is not None:
        [at_answer] = callgrind.glob("cg.*.1")  # the one dump, at the answer (the file written at exit is cg.PID)
        count = total(at_answer)
    return Started(len(rows), sorted(top, reverse=True)[:12], count)


def report(name: str, starts: list[Started], counted: bool) -> None:
    if counted:
        counts = [s.instructions for s in starts]
        print(f"{name}: instructions median {statistics.median(counts):,.0f} min {min(counts):,} max {max(counts):,}")
        return
    print(f"{name}: modules {sorted({s.modules for s in starts})}; largest top-level imports (last start):")
    for micros, module in starts[-1].largest:
        print(f"    {micros:>9,} us  {module}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.bridge_start")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args(argv)
    compile_bytecode()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    secrets = Path(tempfile.mkdtemp(prefix="rimthan-bridge-start-"))
    try:
        servers = {"bridge": bridge_argv(WORK, secrets), "echo": echo_argv()}
        for name, server in servers.items():
            starts = []
            for run in range(args.runs):
                cg = WORK / f"cg-{name}-{run}" if args.callgrind else None
                if cg is not None:
                    cg.mkdir()
                errlog = WORK / f"{name}-{run}.err"
                anyio.run(list_tools, server, errlog, cg)
                starts.append(read_start(errlog, cg))
            report(name, starts, args.callgrind)
    finally:
        shutil.rmtree(secrets, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
