"""Fuzz depth: the four tools fuzzed per tool, at volume, through two transports.

The checks are the tool fuzz's (test_attacks_tools.py): every call a
well-formed result or an ``isError`` whose code is on the closed list and never
``internal_error``; the session serves a real call afterwards. The mutations
are cheap and well-shaped: nearly every call is one of the tool's real,
accepted arguments changed in one small way (a character of the checkpoint,
one confirmed-state value, an item dropped, a key added, a value of another
type, another tool's value), so it passes the input schema and the engine
itself must refuse it (or accept it). One call in ``HUGE_ONE_IN`` sends one of
a few prebuilt huge values (70,000 characters, 20,000 items, 150 deep) to probe
the size limits. Hypothesis draws a seed per batch of ``BATCH`` calls.

* the MCP SDK's in-memory transport against the real server application
  (``create_mcp_application`` over a real signed release):
  ``FUZZ_MEMORY_CALLS`` per tool (100,000 in ``make fuzz-long``), each result
  checked against the tool's declared output schema (see ``InMemory``);
* real stdio against the installed ``rimthan-mcp serve`` process (the
  module-scoped session of test_attacks_tools.py): ``FUZZ_STDIO_CALLS`` per tool
  (5,000 in ``make fuzz-long``).

``make test`` runs a small slice of each (``FUZZ_SLICE`` calls per tool). The
counts and rates are printed (``-s``), with progress every ``PROGRESS_EVERY``
calls; each long test stops starting batches after its time budget and fails
if it has not made its calls by then. docs/security.md holds the figures.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio.from_thread
import jsonschema_rs
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_mcp.server import create_mcp_application
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support import json_edits
from support.checked_client import CheckedClient
from support.engines import StepKit
from support.servers import build_world
from test_attacks_tools import (  # noqa: F401
    CALL_TIMEOUT_SECONDS,
    HUGE_NUMBERS,
    MAX_DEPTH,
    NASTY_STRINGS,
    TOOLS,
    Served,
    _get,
    _valid_arguments,
    nested,
    served,
)

FUZZ_SLICE = 25
FUZZ_MEMORY_CALLS = int(os.environ.get("RIMTHAN_FUZZ_MEMORY_CALLS", "100000"))
FUZZ_STDIO_CALLS = int(os.environ.get("RIMTHAN_FUZZ_STDIO_CALLS", "5000"))
# Per tool test, the bound that keeps make fuzz-long finite on a loaded machine: no batch starts after the budget
# (two in-memory tools per process side by side: under 30 minutes together), the timeout is the backstop.
MEMORY_BUDGET_SECONDS = float(os.environ.get("RIMTHAN_FUZZ_MEMORY_SECONDS", str(13.5 * 60)))
STDIO_BUDGET_SECONDS = float(os.environ.get("RIMTHAN_FUZZ_STDIO_SECONDS", str(6 * 60)))
LONG_TIMEOUT_SECONDS = 20 * 60
PROGRESS_EVERY = 10_000


# Each tool's declared output schema, compiled by jsonschema-rs: what the in-memory fuzz checks every result against.
OUTPUT_SCHEMAS = {c.name: jsonschema_rs.Draft202012Validator(c.output_schema) for c in workflow_engine_tool_contracts()}


@dataclass
class InMemory(Served):
    """The in-memory session, sending ``tools/call`` one level below ``Client.call_tool``.

    ``Client.call_tool`` re-validates every result against the tool's output
    schema with Python jsonschema (about 5 ms a result, as much as the server's
    whole call); here each result that is not an error is checked against the
    same declared schema with jsonschema-rs instead, so the check stays and the
    fuzz reaches its volume. The stdio fuzz keeps ``Client.call_tool``.
    """

    def call(self, tool: str, arguments: Any) -> Any:
        self.stats["calls"] += 1
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
        try:
            result = self.portal.call(
                partial(
                    self.client.session.send_request,
                    request,
                    types.CallToolResult,
                    request_read_timeout_seconds=CALL_TIMEOUT_SECONDS,
                )
            )
        except Exception as exc:
            raise AssertionError(f"{tool} got no tool result ({type(exc).__name__}: {exc})") from exc
        if not result.is_error:
            problem = next(OUTPUT_SCHEMAS[tool].iter_errors(result.structured_content), None)
            assert problem is None, f"{tool} result outside its output schema: {problem}"
        return result


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The real server application over the SDK's in-memory transport."""
    root = tmp_path_factory.mktemp("fuzz-memory")
    world = build_world(root)
    provider = world.provider("1.2.0", keyring=CheckpointKeyring.generate(), migration_target="1.3.0")
    app = create_mcp_application(provider)
    project = root / "project"
    project.mkdir()
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(CheckedClient(app)) as client,
    ):
        served = InMemory(portal=portal, client=client, errlog=root / "unused.log", valid={})
        served.valid = _valid_arguments(served, StepKit(project))
        yield served


# --------------------------------------------------------------------------- cheap, well-shaped mutations

# The size probes: built once, sent rarely (one call in HUGE_ONE_IN). A few of them are enough to test the
# size limits; building one per call (the 20,000-item lists, the 70,000-character strings) dominated the
# earlier fuzz.
HUGE_VALUES: tuple[Any, ...] = (
    "a" * 70_000,
    ["x"] * 20_000,
    {f"k{i}": i for i in range(3000)},
    nested(MAX_DEPTH, "list"),
    nested(MAX_DEPTH, "dict"),
)
HUGE_ONE_IN = 200
SMALL_NASTY = tuple(s for s in NASTY_STRINGS if len(s) <= 1000)
SMALL_NUMBERS = (*HUGE_NUMBERS, 2, 3, 10)
OTHER_TYPE: dict[type, tuple[Any, ...]] = {
    str: (7, None, True, ["x"], {"x": 1}),
    int: ("7", None, [7], {"v": 7}, 7.5),
    float: ("2.5", None, [2.5]),
    bool: (1, "true", None, [True]),
    list: ({}, "[]", None, 0),
    dict: ([], "{}", None, 0),
    type(None): ("null", 0, False, [], {}),
}
KEY_CHARS = "abcdefghijklmnopqrstuvwxyz_-.$ \x00\u00e9\u202e\U0001f4a3"
# Weighted: most calls change one value a little (a character of a token, a digit of a number, an item of a
# list), so the input schema still passes and the engine itself must refuse or accept them.
HOWS = (*["tweak"] * 10, *["wrong_type"] * 2, "drop_key", "extra_key", "nasty", "swap_tool")
# Calls per hypothesis example: hypothesis draws a seed, the batch's calls come from random.Random(seed).
# Hypothesis's own bookkeeping cost ~9 ms per example on the loaded machine, as much as a deep engine call;
# per batch it is negligible, and a failure still names its seed and its exact arguments.
BATCH = 50


def _tweaked(rng: random.Random, value: Any) -> Any:
    """A small, same-typed change to one value: what a careless or malicious client would send."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-1, 1, 2**31, -(2**31), 10**6))
    if isinstance(value, float):
        return value * rng.choice((-1.0, 0.5, 2.0))
    if isinstance(value, str):
        return _tweaked_text(rng, value)
    if isinstance(value, list):
        if not value:
            return [rng.choice(SMALL_NASTY)]
        at = rng.randrange(len(value))
        return rng.choice((value[:at] + value[at + 1 :], [*value, value[at]], value[::-1]))
    if isinstance(value, dict):
        if not value:
            return {"x": 1}
        key = rng.choice(sorted(value))
        return {k: v for k, v in value.items() if k != key}
    return rng.choice(SMALL_NASTY)


def _tweaked_text(rng: random.Random, value: str) -> str:
    if not value:
        return rng.choice(("x", " ", "\x00"))
    at = rng.randrange(len(value))
    edit = rng.choice(("flip", "cut", "dup", "case"))
    if edit == "flip":
        return value[:at] + rng.choice("A0z_-.=/\u00e9\x00") + value[at + 1 :]
    if edit == "cut":
        return value[:at]
    if edit == "dup":
        return value[:at] + value[at:] + value[at:]
    return value.swapcase()


def cheap_mutation(rng: random.Random, valid: dict[str, dict[str, Any]], tool: str) -> tuple[Any, str]:
    """(arguments, how): ``tool``'s real arguments changed in one small, well-shaped way.

    One call in ``HUGE_ONE_IN`` instead sends one of the prebuilt ``HUGE_VALUES`` at a random location.
    """
    base = valid[tool]
    pointers = json_edits.pointers(base)
    path = rng.choice(pointers)
    if rng.randrange(HUGE_ONE_IN) == 0:
        return json_edits.replaced_at(base, path, rng.choice(HUGE_VALUES)), "huge"
    how = rng.choice(HOWS)
    current = _get(base, path)
    if how == "tweak":
        return json_edits.replaced_at(base, path, _tweaked(rng, current)), how
    if how == "wrong_type":
        return json_edits.replaced_at(base, path, rng.choice(OTHER_TYPE[type(current)])), how
    if how == "drop_key":
        return json_edits.replaced_at(
            base, rng.choice([p for p in pointers if isinstance(p[-1], str)]), delete=True
        ), how
    if how == "extra_key":
        where = rng.choice([p for p in ((), *pointers) if isinstance(_get(base, p), dict)])
        key = "".join(rng.choice(KEY_CHARS) for _ in range(rng.randint(1, 12)))
        return json_edits.replaced_at(
            base, where, {**_get(base, where), key: rng.choice(SMALL_NASTY + SMALL_NUMBERS)}
        ), how
    if how == "nasty":
        return json_edits.replaced_at(base, path, rng.choice(SMALL_NASTY + SMALL_NUMBERS)), how
    # another tool's value for the same key (a start's checkpoint sent to submit, another call's state)
    donor = valid[rng.choice([t for t in TOOLS if t != tool])]
    key = rng.choice(sorted(base))
    return {**base, key: donor.get(key, donor)}, how


def _batch(target: Served, tool: str, seed: int, calls: int) -> None:
    """``calls`` mutated calls from ``seed``, each checked; a failure names the seed, the mutation and the call."""
    rng = random.Random(seed)
    for _ in range(calls):
        arguments, how = cheap_mutation(rng, target.valid, tool)
        try:
            target.check(tool, arguments)
        except AssertionError as exc:
            shown = repr(arguments)
            raise AssertionError(f"seed {seed}, {how}: {exc}; arguments {shown[:600]}") from exc


def _per_tool(target: Served, tool: str, calls: int, label: str, budget: float = float("inf")) -> None:
    """``calls`` checked calls to ``tool`` in hypothesis-seeded batches; then the session must still serve.

    No batch starts after ``budget`` seconds: a run on a starved machine stops there and fails, naming how far
    it got and at what rate, instead of running for hours. Progress is printed every ``PROGRESS_EVERY`` calls.
    """
    before = dict(target.stats)
    started, cpu = time.perf_counter(), time.process_time()
    batches, rest = divmod(calls, BATCH)
    shown = [0]

    @settings(
        max_examples=batches + (1 if rest else 0),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(seed=st.integers(0, 2**64 - 1))
    def one(seed: int) -> None:
        done = target.stats["calls"] - before["calls"]
        if done >= calls or time.perf_counter() - started > budget:
            return
        _batch(target, tool, seed, min(BATCH, calls - done))
        if done // PROGRESS_EVERY > shown[0]:
            shown[0] = done // PROGRESS_EVERY
            print(f"\n  {label} {tool}: {done}/{calls} calls, {done / (time.perf_counter() - started):.0f} calls/s")

    one()
    made = target.stats["calls"] - before["calls"]
    target.still_serves()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    errors = target.stats["errors"] - before["errors"]
    accepted = target.stats["accepted"] - before["accepted"]
    print(
        f"\nfuzz {label} {tool}: {made} calls ({errors} isError with a listed code, {accepted} well-formed "
        f"results, 0 internal_error) in {seconds:.1f} s, {made / seconds:.0f} calls/s "
        f"({made / cpu_seconds:.0f} per CPU second of this process)"
    )
    assert made >= calls, f"{label} {tool}: {made} of {calls} calls within the {budget:.0f} s budget"


@pytest.mark.parametrize("tool", TOOLS)
def test_fuzz_slice_in_memory(in_memory: Served, tool: str) -> None:
    _per_tool(in_memory, tool, FUZZ_SLICE, "in-memory")


@pytest.mark.parametrize("tool", TOOLS)
def test_fuzz_slice_stdio(served: Served, tool: str) -> None:  # noqa: F811
    _per_tool(served, tool, FUZZ_SLICE, "stdio")


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_SECONDS)
@pytest.mark.parametrize("tool", TOOLS)
def test_fuzz_long_in_memory(in_memory: Served, tool: str) -> None:
    _per_tool(in_memory, tool, FUZZ_MEMORY_CALLS, "in-memory", MEMORY_BUDGET_SECONDS)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_SECONDS)
@pytest.mark.parametrize("tool", TOOLS)
def test_fuzz_long_stdio(served: Served, tool: str) -> None:  # noqa: F811
    _per_tool(served, tool, FUZZ_STDIO_CALLS, "stdio", STDIO_BUDGET_SECONDS)
