"""``make agent-demo``: a scripted model completes packaged runs through ``rimthan-host serve``, with figures.

Two runs of research-decision 1.2.0 (desk research with one validator repair,
and one migrated to 1.3.0 with preview and confirmation) are driven twice:
once by the scripted harness straight against the verifier (what a host had
to send before the kit), once by the model stand-in through the bridge. It
prints, per packaged run, the opaque bytes the caller had to send exactly
(checkpoint and validation tokens, hexadecimal digests, file contents
repeated byte for byte), the model's tool calls, and the size of the bridge's
tool definitions as a model sees them (names, descriptions, input schemas).
Exits 1 with one line if a run does not complete.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import click
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_workflow_registry.release import MANIFEST_NAME
from rimthan_workflow_registry.run import CONFIRMED_STATE_EXAMPLE, EXAMPLES_DIR

from .harness import CatalogueExamples, WorkflowHarness
from .protocol import ToolCaller, client_caller
from .standin import StandIn

HEX = re.compile(r"[0-9a-fA-F]{64}")
TARGET = "research-decision@1.3.0"


def opaque_bytes(arguments: Mapping[str, Any]) -> int:
    """Bytes a caller must reproduce exactly: tokens, hex digests, and file contents."""
    total = 0

    def walk(value: Any, key: str = "") -> None:
        nonlocal total
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key in ("checkpoint", "validation_bundle", "content"):
                total += len(value.encode("utf-8"))
            else:
                total += sum(len(m.group(0)) for m in HEX.finditer(value))

    walk(arguments)
    return total


def _verifier_args(releases: Path, trust: Path, state: Path) -> list[str]:
    return [
        "--release", str(releases / "research-decision-1.2.0"),
        "--migration-target", str(releases / "research-decision-1.3.0"),
        "--trust", str(trust), "--state-dir", str(state), "--log-level", "warning",
    ]  # fmt: skip


async def _before(releases: Path, trust: Path, work: Path) -> list[int]:
    """The scripted harness against the verifier directly: opaque bytes per run."""
    bin_dir = Path(sys.executable).parent
    server = StdioServerParameters(
        command=str(bin_dir / "rimthan-mcp"), args=["serve", *_verifier_args(releases, trust, work / "state-before")]
    )
    examples = {v: releases / f"research-decision-{v}" / "catalogue" / EXAMPLES_DIR for v in ("1.2.0", "1.3.0")}
    counts = []
    async with Client(server, mode="auto") as client:
        for name in ("repair", "migrate"):
            sent = [0]
            inner = client_caller(client)

            def counting(inner: ToolCaller = inner, sent: list[int] = sent) -> ToolCaller:
                async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                    sent[0] += opaque_bytes(arguments)
                    return await inner(tool, arguments)

                return call

            fail = {"decision-critic"} if name == "repair" else set()
            scenario = CatalogueExamples(examples, fail_once=fail, answers={"research_route": "desk-research"})
            harness = WorkflowHarness(counting(), scenario, project_dir=work / f"before-{name}")
            result = await harness.start("research", initial_version="1.2.0")
            if name == "migrate":
                result = await harness.run(result, until_step="select-route")
                await harness.migrate(result, TARGET, "1.3.0", confirm=False)
                result = await harness.migrate(result, TARGET, "1.3.0", confirm=True)
            await harness.run(result)
            counts.append(sent[0])
    return counts


async def _after(releases: Path, trust: Path, work: Path) -> tuple[list[StandIn], int]:
    """The model stand-in through the bridge: its runs, and the tool definitions' size."""
    bin_dir = Path(sys.executable).parent
    examples = {v: releases / f"research-decision-{v}" / "catalogue" / EXAMPLES_DIR for v in ("1.2.0", "1.3.0")}
    models = []
    size = 0
    for name in ("repair", "migrate"):
        project = work / f"after-{name}"
        project.mkdir(parents=True)
        bridge = StdioServerParameters(
            command=str(bin_dir / "rimthan-host"),
            args=["serve", "--project", str(project), "--", *_verifier_args(releases, trust, work / "state-after")],
        )
        async with Client(bridge, mode="auto") as client:
            tools = await client.list_tools()
            size = len(json.dumps([t.model_dump(by_alias=True, include={"name", "description", "input_schema"})
                                   for t in tools.tools], separators=(",", ":")).encode("utf-8"))  # fmt: skip
            model = StandIn(client, project, examples, fail_once={"decision-critic"} if name == "repair" else set())
            reply = await model.start()
            if name == "migrate":
                reply = await model.follow(reply, "desk-research", until_question=True)
                state = json.loads((examples["1.3.0"] / CONFIRMED_STATE_EXAMPLE).read_text("utf-8"))
                facts = {k: state[k] for k in reply.data["migration"]["needs"]}  # what the bridge said it needs
                await model.call("migrate_run", {"confirm": False, "facts": facts})
                reply = await model.call("migrate_run", {"confirm": True, "facts": facts})
                model.version = "1.3.0"
            final = await model.follow(reply, "desk-research")
            if final.data.get("status") != "completed":
                raise click.ClickException(f"the {name} run did not complete: {final.text}")
            leaks = model.leaks()
            if leaks:
                raise click.ClickException(f"the model saw or sent opaque values: {leaks[:3]}")
            models.append(model)
    return models, size


async def _demo(releases: Path, trust: Path, work: Path) -> None:
    before = await _before(releases, trust, work)
    models, size = await _after(releases, trust, work)
    click.echo("== agent figures: a model drives research-decision through rimthan-host serve")
    for name, old, model in zip(("run 1 (repair)", "run 2 (migration)"), before, models, strict=True):
        click.echo(
            f"  {name}: opaque bytes the model sent {model.opaque_bytes_sent()} (goal 0; the scripted harness "
            f"sent {old / 1000:.1f} KB to the verifier directly); tool calls {model.calls}"
        )
    verdict = "within" if size <= 6000 else "OVER"
    click.echo(f"  bridge tool definitions as a model sees them: {size} bytes ({verdict} the 6 KB goal)")


@click.command()
@click.option("--releases-dir", type=click.Path(path_type=Path), default=Path("releases"), show_default=True)
@click.option("--trust", type=click.Path(path_type=Path), default=Path("keys/local"), show_default=True)
def main(releases_dir: Path, trust: Path) -> None:
    """Print the agent figures for the packaged releases."""
    for version in ("1.2.0", "1.3.0"):
        if not (releases_dir / f"research-decision-{version}" / MANIFEST_NAME).is_file():
            raise click.ClickException(f"no built release research-decision-{version} in {releases_dir}; run make demo")
    with tempfile.TemporaryDirectory(prefix="rimthan-agent-") as tmp:
        try:
            anyio.run(_demo, releases_dir.absolute(), trust.absolute(), Path(tmp))
        except Exception as exc:  # the SDK reports failures inside task groups as exception groups
            first: BaseException = exc
            while isinstance(first, BaseExceptionGroup) and first.exceptions:
                first = first.exceptions[0]
            if isinstance(first, click.ClickException):
                raise first from None
            click.echo(f"agent-demo: error: {type(first).__name__}: {first}", err=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
