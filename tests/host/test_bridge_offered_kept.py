"""The workflows a model may start are read from the verifier's resource listing once, not on every reply.

The verifier lists every file of every held release as a resource, so a bridge that read the listing on every
``show_step`` with no run, and on every refused start, moved the whole listing each time. The real
``rimthan-host serve`` starts the real verifier on a releases folder; the verifier's own log (``resources listed``
records at debug, passed through the bridge's stderr) counts its listings. Once 1.3.0 is installed and the
verifier told (SIGHUP: it activates it and says its listing changed), the next list names it, read once more.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.lowlevel import Server
from rimthan_host.offered import OfferedList, offered_workflows
from rimthan_host.protocol import LISTING_PAGES, client_metas
from rimthan_workflow_registry.protocol_names import NEW_RUNS_META, RELEASE_META, WORKFLOWS_META
from support.bridge import BIN, verifier_pids
from support.checked_client import CheckedClient
from support.listings import LISTED, RECORD_WAIT, listings, records, text
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("kept-world"))


def _records(errlog: Path) -> list[dict[str, Any]]:
    """The verifier's JSON log records, from the bridge's stderr."""
    return records(errlog.read_text("utf-8").splitlines())


async def _until(errlog: Path, seen: Callable[[list[dict[str, Any]]], bool]) -> None:
    for _ in range(RECORD_WAIT):
        if seen(_records(errlog)):
            return
        await anyio.sleep(0.25)
    raise AssertionError(f"no such record in {errlog}")


def _listings(errlog: Path) -> int:
    return listings(errlog.read_text("utf-8").splitlines())


def test_the_list_is_read_once_per_connection_and_again_after_the_verifier_says_it_changed(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, releases, state, errlog = tmp_path / "project", tmp_path / "releases", tmp_path / "state", tmp_path / "e"
    project.mkdir()
    world.publish("1.2.0", releases)
    options = ["--releases-dir", str(releases), "--trust", str(world.trust), "--state-dir", str(state)]
    args = ["serve", "--project", str(project), "--", *options, "--migrate-to-newest", "--log-level", "debug"]
    params = StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)

    async def go() -> None:
        with errlog.open("w") as err:
            async with CheckedClient(stdio_client(params, errlog=err)) as client:
                first = await client.call_tool("show_step", {})
                assert "release research-decision@1.2.0" in text(first), text(first)
                await _until(errlog, lambda records: any(r.get("event") == LISTED for r in records))
                again = await client.call_tool("show_step", {})
                unknown = await client.call_tool("start_run", {"workflow": "nope", "facts": {}})
                for reply in (again, unknown):
                    assert "release research-decision@1.2.0" in text(reply), text(reply)
                assert _listings(errlog) == 1  # the second show_step and the refused start read no listing

                world.publish("1.3.0", releases)
                (pid,) = verifier_pids(state)
                os.kill(pid, signal.SIGHUP)  # (the verifier reads its releases folder again)
                await _until(errlog, lambda rs: any("research-decision@1.3.0" in r.get("activated", []) for r in rs))
                for _ in range(RECORD_WAIT):  # (the bridge is told a moment after the verifier logs it)
                    shown = text(await client.call_tool("show_step", {}))
                    if "research-decision@1.3.0" in shown:
                        break
                    await anyio.sleep(0.25)
                assert "release research-decision@1.3.0" in shown, shown
                assert _listings(errlog) == 2  # read once more, after the change, and kept again
                await client.call_tool("show_step", {})
                assert _listings(errlog) == 2

    anyio.run(go)


def _paging(pages: int, manifest_on: int, *, cursor: Callable[[int], str] = str) -> Server[Any]:
    """A real SDK server whose resource listing runs ``pages`` pages (for ever if 0), a manifest on ``manifest_on``."""

    async def on_list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        page = int(params.cursor.rpartition("-")[2]) if params is not None and params.cursor else 0
        meta = {RELEASE_META: "late@1.0.0", NEW_RUNS_META: True, WORKFLOWS_META: [{"id": "late"}]}
        found = [
            types.Resource(uri=f"rimthan://f/{page}", name=f"f{page}", _meta=meta if page == manifest_on else None)
        ]
        more = pages == 0 or page + 1 < pages
        return types.ListResourcesResult(resources=found, next_cursor=cursor(page + 1) if more else None)

    return Server("paging", on_list_resources=on_list_resources)


def test_every_page_is_read_and_a_listing_that_does_not_end_names_none() -> None:
    async def offered(server: Server[Any]) -> OfferedList:
        async with Client(server) as client:
            return await offered_workflows(client_metas(client))

    late = anyio.run(offered, _paging(30, 25))  # (past the 20 pages once read at most)
    assert late.names() == ["late"], late
    endless = anyio.run(offered, _paging(0, 0))
    assert endless.names() == [] and f"goes on past {LISTING_PAGES} pages" in endless.words(), endless.words()
    assert endless.words().startswith("The workflows you can start are not named here: ")
    looping = anyio.run(offered, _paging(0, 0, cursor=lambda page: f"p-{page % 3}"))
    assert looping.names() == [] and "named the cursor p-1 twice" in looping.words(), looping.words()
