"""The library's runs while a newer release is installed under them: a real ``rimthan-mcp serve --releases-dir``
that gains 1.3.0 (copied in, SIGHUP) between two of the harness's calls."""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import (
    CatalogueExamples,
    HarnessEvent,
    RunRecord,
    ToolRefused,
    WorkflowHarness,
    client_caller,
)
from support.processes import HttpServer, http_server_process
from support.servers import RIMTHAN_MCP, ServerWorld, http_client_for, scenario, server_env

NEWER = "research-decision@1.3.0"


@contextmanager
def _fleet_of_one(world: ServerWorld, tmp_path: Path) -> Iterator[tuple[HttpServer, Path]]:
    """A verifier serving the releases folder ``releases`` (1.2.0 in it), offering runs the newest release."""
    releases = tmp_path / "releases"
    world.publish("1.2.0", releases)
    args = ["serve", "--releases-dir", str(releases), "--trust", str(world.trust), "--state-dir"]
    args += [str(tmp_path / "state"), "--migrate-to-newest", "--transport", "http", "--port", "0"]
    with http_server_process([RIMTHAN_MCP, *args], env=server_env()) as server:
        yield server, releases


def _install_newer(world: ServerWorld, server: HttpServer, releases: Path) -> None:
    """Copy 1.3.0 into the verifier's releases folder and have it read the folder again (SIGHUP)."""
    world.publish("1.3.0", releases)
    seen = len(server.lines)
    server.process.send_signal(signal.SIGHUP)
    server.wait_for(r'"activated": \["research-decision@1.3.0"\]', after=seen)


class _InstallsWhileFactsAreRead(CatalogueExamples):
    """The packaged examples; while the first facts are read, 1.3.0 is installed (between probe and start)."""

    def __init__(self, install: Any) -> None:
        base = scenario()
        super().__init__(base.examples, answers=base.answers)
        self.install, self.asked = install, list[str]()

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        if not self.asked:
            self.install()
        self.asked.append(workflow_version)
        return super().initial_state(workflow_version, workflow=workflow)


def test_a_start_with_no_version_starts_the_version_whose_facts_were_read(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """``start("research")`` asked the verifier which version it starts (1.2.0), read 1.2.0's facts, then sent a start
    naming no version: 1.3.0, installed meanwhile, was started on facts read for 1.2.0. The start names 1.2.0, which
    this verifier no longer serves: refused, with its code, and no run starts."""
    with _fleet_of_one(mcp_world, tmp_path) as (server, releases):
        examples = _InstallsWhileFactsAreRead(lambda: _install_newer(mcp_world, server, releases))

        async def go() -> str:
            async with http_client_for(server.url) as client:
                with WorkflowHarness(client_caller(client), examples, project_dir=tmp_path / "project") as harness:
                    try:
                        started = await harness.start("research")
                    except ToolRefused as exc:
                        return exc.code
                    return f"started {started.release}"

        said = anyio.run(go)
    assert examples.asked == ["1.2.0"], examples.asked
    assert said == "workflow_not_found", said


def test_learning_the_offer_before_a_migration_is_no_migrate_event(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A run on 1.2.0 knows no offer of 1.3.0 (installed after its last move), so ``migrate`` first sends a preview
    with no values to learn what 1.3.0 needs: that probe reached an ``on_event`` sink as a second ``migrate`` event.
    Only the migration the caller asked for is one."""
    events: list[HarnessEvent] = []
    with _fleet_of_one(mcp_world, tmp_path) as (server, releases):

        async def go() -> str:
            async with http_client_for(server.url) as client:
                call, project = client_caller(client), tmp_path / "project"
                with WorkflowHarness(call, scenario(), project_dir=project, on_event=events.append) as harness:
                    at = await harness.run(await harness.start("research", "1.2.0"), until_step="interview")
                    _install_newer(mcp_world, server, releases)
                    moved = await harness.migrate(at, NEWER, "1.3.0", confirm=True)
                    return moved.release

        release = anyio.run(go)
    assert release == NEWER, release
    migrations: list[Mapping[str, Any]] = [e.data for e in events if e.kind == "migrate"]
    assert len(migrations) == 1, [e.summary for e in events if e.kind == "migrate"]


def test_the_probe_for_an_offer_is_logged_as_a_probe_not_as_a_call_of_the_run(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The preview with no values ``migrate`` sends to learn what 1.3.0 needs was logged as the run's own call: a
    ``call`` event and a status line ``continue_workflow -> blocked``, as if a preview had been asked for. The
    record (``statuses``, the ``call`` events) now holds the calls of the run only: the migration; the probe is a
    ``probe`` event naming the release and what the verifier answered, and a line of ``record.probes``."""
    events: list[HarnessEvent] = []
    with _fleet_of_one(mcp_world, tmp_path) as (server, releases):

        async def go() -> tuple[int, list[tuple[str, str, str | None]], RunRecord]:
            async with http_client_for(server.url) as client:
                call, project = client_caller(client), tmp_path / "project"
                with WorkflowHarness(call, scenario(), project_dir=project, on_event=events.append) as harness:
                    at = await harness.run(await harness.start("research", "1.2.0"), until_step="interview")
                    _install_newer(mcp_world, server, releases)
                    seen, statuses = len(events), len(harness.record.statuses)
                    await harness.migrate(at, NEWER, "1.3.0", confirm=True)
                    return seen, harness.record.statuses[statuses:], harness.record

        seen, statuses, record = anyio.run(go)
    after = events[seen:]
    assert [e.kind for e in after if e.kind in ("call", "probe")] == ["probe", "call"], [e.summary for e in after]
    [probe] = [e for e in after if e.kind == "probe"]
    assert probe.summary.startswith(f"asked the verifier what {NEWER} needs (a preview with no values)"), probe
    assert probe.summary.endswith("-> blocked, offer learned"), probe.summary
    assert statuses == [("rimthan.continue_workflow", "active", "setup-workspace")], statuses
    assert record.probes == [(NEWER, "blocked")], record.probes
