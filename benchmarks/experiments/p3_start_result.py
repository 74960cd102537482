"""What each part of P3's ``start`` result costs: its bytes, and the client's and the server's work on them.

``python -m benchmarks.experiments.p3_start_result [--reps N] [--callgrind]``
drives one packaged run over stdio as P3 does (``bench_calls.drive_calls``)
and keeps the start result the SDK client received (the ``CallToolResult``
and the start tool's output schema from ``tools/list``). Then, in this
process, it prints:

* the result's bytes, part by part: the response line, ``structuredContent``
  and the canonical text beside it (as sent, escaped inside the line), and
  within ``structuredContent`` the step payload's parts (the host assets'
  texts, the instruction's, the definition, the resource references) and the
  checkpoint; the echo's response line for the same arguments beside it;
* per piece of work done on that result, the median microseconds over
  ``--reps`` runs after a warm-up: the client's parse of the response line
  (as served; with the text content emptied, which prices the second copy;
  and the echo's line for the same arguments), the ``CallToolResult`` model,
  the output-schema check as the SDK client makes it (the schema compiled
  once, then ``best_match(iter_errors(...))``; whole, and with the step's host
  assets left out), the host kit's shape check; on the server, our whole
  start through ``call_tool`` (the served release, replayed in process), the
  SDK's dumps of the result (the handler's ``model_dump``, then the response
  line's ``model_dump_json``; as served and with the text emptied) and the
  canonical text (``rfc8785`` whole, and with the step payload kept as the
  server keeps it).

``--callgrind`` counts instructions instead of timing (stable on a shared
machine): the pieces run under valgrind's callgrind in a child
(``PYTHONHASHSEED=0``), each inside its own ``functools.reduce`` call, the
only function collected (``--toggle-collect``), with a profile dumped as each
ends; the figure is the instructions of one run of the piece, warm. No cache
is simulated: what a piece touches is not counted, only what it executes.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from rimthan_workflow_mcp.tool_contracts import START_WORKFLOW

from .. import bench_calls
from ..fixtures import BenchKeys, make_keys
from ..synthetic import REPO_ROOT

WORK = REPO_ROOT / "benchmarks" / "work" / "p3-start-result"
RECORD = "start-result.json"
DUMPS = "callgrind.out"


@dataclasses.dataclass(frozen=True)
class Served:
    """The served release, the run's keys and the server's state directory (paths), to replay a start in process."""

    release: str
    private_key: str
    trust_dir: str
    key_id: str
    state_dir: str

    def in_process(self) -> bench_calls.InProcess:
        keys = BenchKeys(Path(self.private_key), Path(self.trust_dir), self.key_id)
        return bench_calls.InProcess(Path(self.release), keys, Path(self.state_dir))


@dataclasses.dataclass(frozen=True)
class StartRecord:
    """A start as P3 makes it: the arguments, the result the client received, and the tool's output schema."""

    arguments: dict[str, Any]
    result: dict[str, Any]  # the CallToolResult as the client parsed it, wire names (``structuredContent``)
    output_schema: dict[str, Any]
    served: Served


@dataclasses.dataclass(frozen=True)
class Piece:
    """One piece of work on the start result, on one side of the wire."""

    side: str  # "client" or "server"
    what: str
    run: Callable[[], object]


def record(work: Path, secrets: Path) -> StartRecord:
    """One packaged run (after the untimed one) over stdio; its start call as the client made and received it.

    The run's keys and the server's state directory go in ``secrets``, which must outlive the record's use: the
    start is replayed in process with them (:func:`pieces`).
    """
    keys, state_dir = make_keys(secrets), secrets / "state"
    release = bench_calls.packaged_release(keys, work)
    timings = anyio.run(bench_calls.drive_calls, "stdio", release, keys, state_dir, work, 1)
    start = next(c for c in timings.recorded if c.name == START_WORKFLOW)
    tools = json.loads((work / "tools-stdio.json").read_text("utf-8"))
    schema = next(t["outputSchema"] for t in tools if t["name"] == start.name)
    served = Served(str(release), str(keys.private_key), str(keys.trust_dir), keys.key_id, str(state_dir))
    return StartRecord(start.arguments, json.loads(start.result), schema, served)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _size(value: Any) -> int:
    return len(_compact(value).encode("utf-8"))


def _line(result: dict[str, Any]) -> str:
    return _compact({"jsonrpc": "2.0", "id": 7, "result": result})


def _text_emptied(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "content": [{**c, "text": ""} for c in result["content"]]}


def _echoed(start: StartRecord) -> dict[str, Any]:
    """The echo's result for the start's arguments (``echo_server.py``: text and structured content)."""
    return {"content": [{"type": "text", "text": json.dumps(start.arguments)}], "structuredContent": start.arguments}


def byte_rows(start: StartRecord) -> list[tuple[str, int]]:
    """The start result's bytes, part by part (UTF-8 of compact JSON), and the echo's line beside it."""
    structured = start.result["structuredContent"]
    step = structured["step"]
    texts = [a["text"] for a in (step["instruction"], *step["host_assets"])]
    return [
        ("response line", len(_line(start.result).encode("utf-8"))),
        ("  structuredContent", _size(structured)),
        ("  canonical text, as sent (escaped)", _size(start.result["content"][0]["text"])),
        (
            "  the rest (_meta, isError, ...)",
            _size({k: v for k, v in start.result.items() if k not in ("content", "structuredContent")}),
        ),
        ("structuredContent: step", _size(step)),
        ("  instruction and host assets' texts", sum(_size(t) for t in texts)),
        (
            "  host assets but their texts",
            _size([{k: v for k, v in a.items() if k != "text"} for a in step["host_assets"]]),
        ),
        ("  definition", _size(step["definition"])),
        ("  resources (references)", _size(step["resources"])),
        ("structuredContent: checkpoint", _size(structured["checkpoint"])),
        ("echo's response line, same arguments", len(_line(_echoed(start)).encode("utf-8"))),
    ]


def pieces(start: StartRecord) -> list[Piece]:
    """The client's and the server's work on the start result, each as a call to time or count."""
    import mcp_types as types
    import rfc8785
    from jsonschema import exceptions as schema_errors
    from jsonschema.validators import validator_for
    from referencing import Registry
    from rimthan_host.protocol import protocol_result
    from rimthan_workflow_registry.canonical import CanonicalParts

    result, schema = start.result, start.output_schema
    line, emptied_line, echo_line = _line(result), _line(_text_emptied(result)), _line(_echoed(start))
    parse = types.jsonrpc_message_adapter.validate_json
    raw = result
    model = types.CallToolResult.model_validate(raw, by_name=False)
    emptied_model = types.CallToolResult.model_validate(_text_emptied(raw), by_name=False)
    structured = result["structuredContent"]
    no_assets = {**structured, "step": {**structured["step"], "host_assets": []}}
    checker = validator_for(schema)(schema, registry=Registry())  # as the SDK client compiles it, once

    def check(value: Any) -> object:
        return schema_errors.best_match(checker.iter_errors(value))

    ours = start.served.in_process()

    def our_start() -> object:
        result = ours.call(START_WORKFLOW, start.arguments)
        if result.is_error:
            raise RuntimeError(f"the start replayed in process was refused: {result.structured_content}")
        return result

    kept = CanonicalParts()
    kept.keep(structured["step"])

    def response_line(dumped: types.CallToolResult) -> str:
        body = dumped.model_dump(by_alias=True, mode="json", exclude_none=True)
        return types.JSONRPCResponse(jsonrpc="2.0", id=7, result=body).model_dump_json(
            by_alias=True, exclude_unset=True
        )

    return [
        Piece("client", "parse the response line", lambda: parse(line, by_name=False)),
        Piece("client", "  the same, text content emptied", lambda: parse(emptied_line, by_name=False)),
        Piece("client", "  the echo's line, same arguments", lambda: parse(echo_line, by_name=False)),
        Piece("client", "CallToolResult model", lambda: types.CallToolResult.model_validate(raw, by_name=False)),
        Piece("client", "output-schema check (SDK client)", lambda: check(structured)),
        Piece("client", "  the same, step without host assets", lambda: check(no_assets)),
        Piece("client", "host kit's shape check", lambda: protocol_result(START_WORKFLOW, structured, is_error=False)),
        Piece("server", "our call_tool: the whole start", our_start),
        Piece("server", "SDK: result dumped, response line", lambda: response_line(model)),
        Piece("server", "  the same, text content emptied", lambda: response_line(emptied_model)),
        Piece("server", "canonical text, whole (rfc8785)", lambda: rfc8785.dumps(structured)),
        Piece("server", "canonical text, step payload kept", lambda: kept.dumps(structured)),
    ]


def timed(piece: Piece, reps: int) -> float:
    """Median microseconds of one run of ``piece``, after a warm-up."""
    for _ in range(max(3, reps // 10)):
        piece.run()
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        piece.run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1e6


def counted(work: Path, reps: int, expected: int) -> list[float]:
    """Instructions of one run of each of the ``expected`` pieces, warm: counted under callgrind in a child."""
    if shutil.which("valgrind") is None:
        raise SystemExit("p3_start_result: --callgrind needs valgrind on PATH")
    dumps = work / "callgrind"
    shutil.rmtree(dumps, ignore_errors=True)
    dumps.mkdir(parents=True)
    valgrind = [
        "valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
        "--dump-after=functools_reduce", f"--callgrind-out-file={dumps / DUMPS}",
    ]  # fmt: skip
    module = __spec__.name if __spec__ else __name__
    child = [sys.executable, "-m", module, "--counted-child", str(reps), "--work", str(work)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict and set layouts in every count
    subprocess.run([*valgrind, *child], cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    totals = [_total(p) for p in sorted(dumps.glob(f"{DUMPS}.*"), key=lambda p: int(p.suffix[1:]))]
    counts = [t for t in totals if t]
    if len(counts) != expected:
        raise SystemExit(f"p3_start_result: expected one profile per piece, found {len(counts)} with instructions")
    return [c / reps for c in counts]


def _total(dump: Path) -> int:
    for line in dump.read_text("utf-8").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    return 0


def _counted_child(reps: int, work: Path) -> None:
    """In the child under callgrind: warm every piece, then run each ``reps`` times inside one ``reduce``."""
    measured = pieces(load(work))
    for piece in measured:
        piece.run()
        piece.run()
    for piece in measured:
        functools.reduce(_again(piece.run), range(reps), None)


def _again(run: Callable[[], object]) -> Callable[[object, int], object]:
    """A ``reduce`` step that runs ``run`` once (the accumulated value is unused)."""
    return lambda _acc, _i: run()


def save(start: StartRecord, work: Path) -> None:
    (work / RECORD).write_text(_compact(dataclasses.asdict(start)), "utf-8")


def load(work: Path) -> StartRecord:
    kept = json.loads((work / RECORD).read_text("utf-8"))
    return StartRecord(**{**kept, "served": Served(**kept["served"])})


def report(start: StartRecord, measured: list[Piece], costs: list[float], unit: str) -> list[str]:
    """The bytes table, then one line per piece of work with its cost in ``unit``."""
    lines = [f"{'bytes':>9}  part"]
    lines += [f"{n:>9,}  {what}" for what, n in byte_rows(start)]
    lines.append(f"{unit:>13}  side    work on the start result")
    for piece, cost in zip(measured, costs, strict=True):
        lines.append(f"{cost:>13,.1f}  {piece.side:<7} {piece.what}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_start_result")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--callgrind", action="store_true", help="count instructions under valgrind, not time")
    parser.add_argument("--counted-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=WORK, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.counted_child:
        _counted_child(args.counted_child, args.work)
        return 0
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="rimthan-p3-start-") as secrets:
        start = record(WORK, Path(secrets))
        save(start, WORK)
        measured = pieces(start)
        if args.callgrind:
            costs, unit = counted(WORK, args.reps, len(measured)), "instructions"
        else:
            costs, unit = [timed(p, args.reps) for p in measured], "microseconds"
    print(f"P3 start result (one packaged run over stdio); {unit} per run of each piece, {args.reps} runs")
    print("\n".join(report(start, measured, costs, unit)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
