"""One value of a catalogue or release file replaced by an odd one, and the run a mutated release must survive.

Shared by the mutation fuzz of catalogue sources (built with the packager)
and of signed release directories (re-signed by an insider, no packager).

``ODD_VALUES``
    What a hand or a script might write in place of a value: integers near
    and past 2^53 and 2^63, ``inf``, ``nan``, control characters, paths that
    escape, empty and nested containers, TOML dates, ``null``.
``mutated(document, path_index, value_index, same_type)``
    A copy of a parsed JSON or TOML document with one value (picked by index
    among every location) replaced by an odd one; with ``same_type``, one of
    the old value's type where there is one, so a fair share gets past the
    type checks.
``dumped(rel, document)``
    The document written back as TOML or JSON (``None`` where the value has no
    form there), the ``TOO_LONG`` stand-in spelled as an integer of 5,000 digits.
``refused_with_a_code(exc)`` / ``run_to_a_protocol_answer(release, trust, work, route)``
    The two ways a mutated release may end: refused with a code from the
    closed list naming a file, or served, with a whole run driven through the
    server's ``tools/call`` (results checked against the tools' output
    schemas) ending on a protocol answer (never ``internal_error``).
``migrate_to_a_protocol_answer(source, target, trust, work, route)``
    The same for a run of ``source`` migrated to a (mutated) ``target``.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from rimthan_host.harness import ToolCaller, WorkflowHarness
from rimthan_host.protocol import HarnessError, ToolRefused, protocol_result
from rimthan_workflow_mcp.loading import LoadedRelease, ReleaseLoader
from rimthan_workflow_mcp.provider import ProviderOptions, ReleaseProvider
from rimthan_workflow_mcp.server import call_tool, runtime_state
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release.trust import TrustStore
from rimthan_workflow_registry.release.verified import VerifiedRelease
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

from support.engines import Engines, ExamplesScenario, TickingClock, drive
from support.json_edits import pointers, set_at

VERSION = "1.2.0"
ROUTES = ("desk-research", "user-interviews", "experiment")
TOO_LONG = 424242424242  # written in its place: an integer of 5,000 digits, which no serialiser here writes
ODD_VALUES: list[Any] = [
    TOO_LONG,
    2**53,
    2**53 - 1,
    2**63 - 1,
    -(2**63),
    float("inf"),
    float("nan"),
    1.5,
    -0.0,
    True,
    0,
    -1,
    "",
    "\x00",
    "a\nb",
    "\u202e",
    "../outside",
    "/absolute",
    "x" * 5000,
    "x" * 300,
    "research/\u00e9\u0301.json",
    "\U0001f600",
    "desk-research",
    "{id}",
    "#/$defs/nowhere",
    "https://example.com/x.json",
    "application/json",
    "application/octet-stream",
    [],
    {},
    [1, [2]],
    {"a": {"b": {}}},
    ["x", "x"],
    datetime.datetime(1979, 5, 27, 7, 32),
    datetime.date(2026, 12, 5),
    datetime.time(1, 2),
    None,  # JSON's null (TOML has none: such a mutation is skipped there)
]


def locations(document: Any) -> list[tuple[Any, ...]]:
    """Every location in a parsed document (containers included), the root excluded."""
    return pointers(document)


def odd_value(old: Any, value_index: int, same_type: bool) -> Any:
    """The odd value picked by ``value_index`` (among those of ``old``'s type, with ``same_type``, if any)."""
    alike = [v for v in ODD_VALUES if type(v) is type(old)] if same_type else []
    candidates = alike or ODD_VALUES
    return candidates[value_index % len(candidates)]


def mutated(document: Any, path_index: int, value_index: int, same_type: bool) -> tuple[tuple[Any, ...], Any]:
    """The location picked by ``path_index`` (modulo their count) and a copy of ``document`` with an odd value there."""
    paths = locations(document)
    target = paths[path_index % len(paths)]
    old = document
    for step in target:
        old = old[step]
    return target, set_at(document, target, odd_value(old, value_index, same_type))


def dumped(rel: str, document: Any) -> str | None:
    """``document`` as TOML or JSON text by ``rel``'s suffix (``None`` where a value has no form in that type)."""
    try:
        written = tomli_w.dumps(document) if rel.endswith(".toml") else json.dumps(document, default=str)
    except (TypeError, ValueError):  # JSON has no NaN; tomli_w writes no lone surrogate
        return None
    return written.replace(str(TOO_LONG), "9" * 5000)


def refused_with_a_code(exc: RegistryError) -> None:
    """A refusal at build or load: a code from the closed list (never ``internal_error``) naming a file."""
    assert exc.code is not FailureCode.INTERNAL_ERROR and exc.path, exc.one_line()


class StandInScenario(ExamplesScenario):
    """The shipped examples' scripted user, who writes a stand-in for an output the examples do not hold.

    A mutated release may declare an output under another id (another step's,
    say): the user writes something, and the engine's answer to it is what is checked.
    """

    def author(self, ctx: Any) -> str:
        try:
            return super().author(ctx)
        except FileNotFoundError:
            return "{}\n" if ctx.output.media_type == "application/json" else "# Stand-in\n"


@dataclass(frozen=True)
class Served:
    """A release served as the server serves it: ``call`` is its ``tools/call``, ``clock`` the engines' clock."""

    call: ToolCaller
    clock: TickingClock


def served(release: VerifiedRelease, trust: TrustStore, migration_target: VerifiedRelease | None = None) -> Served:
    """``release`` (and a migration target) behind :func:`call_tool`, with arguments and results checked as sent."""
    clock = TickingClock()
    keyring = CheckpointKeyring.generate()

    def module(r: VerifiedRelease, k: CheckpointKeyring) -> WorkflowEngineQueryModule:
        return WorkflowEngineQueryModule(r, k, clock=clock)

    active = LoadedRelease(release, keyring, module)
    target = None if migration_target is None else LoadedRelease(migration_target, keyring, module)
    options = ProviderOptions(migration_target=target)
    state = runtime_state(ReleaseProvider(ReleaseLoader(trust, keyring), active, options))

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = call_tool(state, name, arguments)
        return protocol_result(name, result.structured_content, is_error=bool(result.is_error))

    return Served(call, clock)


@contextmanager
def protocol_answers() -> Iterator[None]:
    """A run may stop on the server's refusal or where the scripted user cannot go on; never on ``internal_error``."""
    try:
        yield
    except ToolRefused as exc:  # the server's answer to the scripted user, sent as a result
        assert exc.code != FailureCode.INTERNAL_ERROR.value, str(exc)
    except HarnessError as exc:  # the scripted user stops where the changed catalogue asks what it cannot answer
        assert FailureCode.INTERNAL_ERROR.value not in str(exc), str(exc)


def run_to_a_protocol_answer(release: VerifiedRelease, trust: TrustStore, work: Path, route: str) -> None:
    """Drive a whole run of ``release`` through the server's ``tools/call``: it completes or stops on a protocol answer.

    Every call goes through :func:`call_tool` as the server runs it (arguments and results checked against the
    tools' schemas), so a catalogue value the server accepted but cannot answer within its contract shows as the
    ``internal_error`` it sends, never as a passing run.
    """
    server = served(release, trust)
    engines = Engines({VERSION: release}, CheckpointKeyring.generate(), work, server.clock)
    with protocol_answers():
        drive(engines, VERSION, route, name="mutated", scenario=StandInScenario(route), call=server.call)


def migrate_to_a_protocol_answer(
    source: VerifiedRelease, target: VerifiedRelease, trust: TrustStore, work: Path, route: str
) -> None:
    """A run of ``source`` to select-route, migrated to ``target`` (a preview, then confirmed), then on to its end."""
    server = served(source, trust, migration_target=target)
    project = work / "projects" / "migrated"
    project.mkdir(parents=True)
    harness = WorkflowHarness(server.call, StandInScenario(route), project_dir=project, clock=server.clock)
    release_id, version = target.release_id, target.manifest.release.version

    async def go() -> None:
        result = await harness.run(await harness.start("research", initial_version=VERSION), until_step="select-route")
        server.clock.tick(5)  # the user re-confirms the state for the target release after the last checkpoint
        await harness.migrate(result, release_id, version, confirm=False)
        moved = await harness.migrate(result, release_id, version, confirm=True)
        if moved.status == "active":
            await harness.run(moved)

    with protocol_answers():
        asyncio.run(go())
