"""``make demo``: a real MCP client walks the packaged workflow through ``rimthan-mcp serve``.

The SDK client starts the server over stdio on the packaged release (with the
successor release as migration target and a throwaway state directory), lists
the four tools, then drives two runs with the scripted harness, printing every
step:

1. ``research-decision@1.2.0`` from setup to completion on the desk-research
   route, writing the delivered assets and artifacts into a temporary project
   directory, with one deliberate validator failure and repair;
2. a second run migrated explicitly from 1.2.0 to 1.3.0 (preview, then
   confirmation) and completed on the new release.

Exits 0 when both runs complete; otherwise prints one line saying why and exits 1.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
import click
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_workflow_registry.release import MANIFEST_NAME
from rimthan_workflow_registry.run import EXAMPLES_DIR

from .harness import (
    CatalogueExamples,
    HarnessError,
    HarnessEvent,
    RunResult,
    ToolRefused,
    WorkflowHarness,
    client_caller,
)
from .protocol import failure_lines
from .words import walked_words

WORKFLOW = "research"
ROUTE = "desk-research"


def _print_event(event: HarnessEvent) -> None:
    click.echo(f"  {event.kind:>8}  {event.summary}")


def _release_dir(releases: Path, version: str) -> Path:
    path = releases / f"research-decision-{version}"
    if not (path / MANIFEST_NAME).is_file():
        raise click.ClickException(f"{path} is not a built release; run `make demo` first")
    return path


def _examples(release: Path) -> Path:
    return release / "catalogue" / EXAMPLES_DIR


async def _demo(releases: Path, trust: Path, work: Path, source: str, target: str) -> None:
    active, successor = _release_dir(releases, source), _release_dir(releases, target)
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "rimthan_workflow_mcp",
            "serve",
            "--release",
            str(active),
            "--migration-target",
            str(successor),
            "--trust",
            str(trust),
            "--state-dir",
            str(work / "state"),
            "--log-level",
            "warning",
        ],
    )
    click.echo(f"== starting rimthan-mcp over stdio (state in {work / 'state'})")
    async with Client(server, mode="auto") as client:
        click.echo(f"== connected: protocol {client.protocol_version}")
        tools = await client.list_tools()
        for tool in tools.tools:
            hints = tool.annotations
            click.echo(
                f"  tool {tool.name}: read-only={hints.read_only_hint if hints else None} "
                f"idempotent={hints.idempotent_hint if hints else None}"
            )
        resources = await client.list_resources()
        click.echo(f"  {len(resources.resources)} immutable resources (contracts, manifests, release files)")
        call = client_caller(client)
        examples = {source: _examples(active), target: _examples(successor)}

        click.echo(f"\n== run 1: {WORKFLOW} on research-decision@{source}, route {ROUTE}, one repair drill")
        project = work / "project-1"
        harness = WorkflowHarness(
            call,
            CatalogueExamples(examples, fail_once={"decision-critic"}, answers={"research_route": ROUTE}),
            project_dir=project,
            on_event=_print_event,
        )
        first = await harness.start(WORKFLOW, initial_version=source)
        instruction = first.step_wire["instruction"]
        read = await client.read_resource(instruction["uri"])
        text = getattr(read.contents[0], "text", "")
        click.echo(f"  resource {instruction['uri']} read back: {len(text)} chars")
        await harness.run(first)
        _summary(harness, project)

        click.echo(f"\n== run 2: migrate a {source} run to {target} explicitly, then finish it there")
        project = work / "project-2"
        harness = WorkflowHarness(
            call,
            CatalogueExamples(examples, answers={"research_route": ROUTE}),
            project_dir=project,
            on_event=_print_event,
        )
        result = await harness.run(await harness.start(WORKFLOW, initial_version=source), until_step="select-route")
        preview = await harness.migrate(result, f"research-decision@{target}", target, confirm=False)
        _show_preview(preview)
        migrated = await harness.migrate(result, f"research-decision@{target}", target, confirm=True)
        if migrated.status != "active":
            raise HarnessError(f"migration was not performed: {failure_lines(migrated.failures, migrated.message)}")
        await harness.run(migrated)
        _summary(harness, project)
    click.echo("\n== demo complete: both runs finished; the server exited with the client")


def _show_preview(result: RunResult) -> None:
    preview = result.migration.wire if result.migration else {}
    codes = ", ".join(f.code for f in result.failures)
    click.echo(
        f"  preview: {preview.get('from', {}).get('release')} -> {preview.get('to', {}).get('release')}, "
        f"restart at {preview.get('restart_step')}; invalidates artifacts "
        f"{preview.get('invalidated_artifacts')} validators {preview.get('invalidated_validators')} "
        f"({result.status}: {codes})"
    )
    click.echo(f"  {walked_words(result.walked_again)}")


def _summary(harness: WorkflowHarness, project: Path) -> None:
    record = harness.record
    final = record.final
    click.echo(
        f"  completed {final['workflow']['id']}@{final['workflow']['version']} on {final['release']['id']} "
        f"after {len(record.statuses) + len(record.probes)} tool calls; steps: {' -> '.join(record.steps_visited)}"
    )
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    click.echo(f"  project {project}: {len(files)} files ({', '.join(files)})")


@click.command()
@click.option("--releases-dir", type=click.Path(path_type=Path), default=Path("releases"), show_default=True)
@click.option("--trust", type=click.Path(path_type=Path), default=Path("keys/local"), show_default=True)
@click.option("--work-dir", type=click.Path(path_type=Path), help="Keep projects and state here (default: temp).")
@click.option("--from-version", default="1.2.0", show_default=True)
@click.option("--to-version", default="1.3.0", show_default=True)
def main(releases_dir: Path, trust: Path, work_dir: Path | None, from_version: str, to_version: str) -> None:
    """Walk the packaged research-decision workflow through a real MCP client."""
    with tempfile.TemporaryDirectory(prefix="rimthan-demo-") as tmp:
        work = (work_dir or Path(tmp)).absolute()
        try:
            anyio.run(_demo, releases_dir.absolute(), trust.absolute(), work, from_version, to_version)
        except Exception as exc:  # the SDK reports failures inside task groups as exception groups
            first = _first(exc)
            if isinstance(first, click.ClickException):
                raise first from None
            if isinstance(first, HarnessError | ToolRefused):
                click.echo(f"demo: error: {first}", err=True)
            else:
                click.echo(f"demo: error: {type(first).__name__}: {first} (see the server's stderr above)", err=True)
            sys.exit(1)


def _first(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


if __name__ == "__main__":
    main()
