"""``resources/list`` in pages: a release of more files than a page, held beside two others.

The real ``rimthan-mcp serve`` holds real signed releases (one built by the packager with 1,200 data files
more than the packaged catalogue); a real SDK client follows ``nextCursor`` over stdio and Streamable HTTP in
both protocol eras. The pages put together are exactly the listing the releases' manifests say, once each,
manifests first; a cursor from before a refresh that changed the listing, or one the server never gave, is
refused (-32602, ``invalid_arguments``) with one line saying to list again from the start; and a real
``rimthan-host serve`` bridge, which follows the cursors, still names the workflows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Resource
from rimthan_workflow_mcp.resource_pages import PAGE_SIZE
from rimthan_workflow_registry.protocol_names import WORKFLOWS_META
from support.checked_client import CheckedClient
from support.listings import bridge_at, http_verifier, text, verifier_argv
from support.processes import HttpServer, stdio_client_process, wait_for_line
from support.releases import build_release, packaged_source
from support.servers import ServerWorld, http_client_for

DATA_FILES = 1_200  # with the packaged catalogue's own files: more than two pages of one release
ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
LIST_AGAIN = "list resources again from the start"


@pytest.fixture(scope="module")
def bulk(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """research-decision 1.4.0: the packaged 1.3.0 plus ``DATA_FILES`` data files, built and signed for real."""
    root = tmp_path_factory.mktemp("bulk")
    source = root / "source"
    shutil.copytree(packaged_source("1.3.0"), source)
    toml = source / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace('version = "1.3.0"', 'version = "1.4.0"', 1), "utf-8")
    for index in range(DATA_FILES):
        path = source / "data" / f"d{index // 100:02d}" / f"f{index:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"data file {index}\n", "utf-8")
    return build_release(source, root / "built", [mcp_world.key])


def _publish(release: Path, releases: Path) -> Path:
    return Path(shutil.copytree(release, releases / release.name))


def _expected(releases: Path) -> list[str]:
    """Every URI the releases' signed manifests name: each manifest, then each file."""
    uris: list[str] = []
    manifests = sorted(releases.iterdir())
    for release in manifests:
        uris.append(f"rimthan://manifests/{_hex(release)}/manifest.json")
    for release in manifests:
        files = json.loads((release / "manifest.json").read_text("utf-8"))["files"]
        uris += [f"rimthan://releases/{_hex(release)}/{entry['path']}" for entry in files]
    return uris


def _hex(release: Path) -> str:
    return hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()


async def _pages(client: CheckedClient) -> list[list[Resource]]:
    pages, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        pages.append(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 100, "the listing does not end"


async def _refused(client: CheckedClient, cursor: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.list_resources(cursor=cursor)
    error = refused.value
    assert error.code == INVALID_PARAMS and error.data["code"] == "invalid_arguments", error.error
    assert error.message.startswith("invalid_arguments: ") and "\n" not in error.message, error.message
    assert LIST_AGAIN in error.message and "Traceback" not in error.message, error.message
    return error.message


def _with_position(cursor: str, position: int) -> str:
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    raw = raw[:-4] + position.to_bytes(4, "big")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@contextmanager
def _served(
    world: ServerWorld, releases: Path, tmp: Path, transport: str, mode: str
) -> Iterator[tuple[CheckedClient, HttpServer | None]]:
    """A client of the real ``rimthan-mcp serve`` on ``releases`` over ``transport``, in era ``mode``."""
    if transport == "http":
        with http_verifier(world, releases, tmp / "state") as server:
            yield http_client_for(server.url, mode=mode), server
        return
    argv = verifier_argv(world, releases, tmp / "state")
    with (tmp / "stderr.log").open("w") as errlog:
        yield stdio_client_process(argv[0], argv[1:], errlog, mode=mode), None


def _params() -> list[Any]:
    return [pytest.param(t, e, id=f"{t}-{e}") for t in ("stdio", "http") for e in ERAS]


@pytest.mark.parametrize(("transport", "era"), _params())
def test_pages_put_together_are_the_whole_listing_manifests_first_and_a_bad_cursor_is_refused(
    mcp_world: ServerWorld, bulk: Path, tmp_path: Path, transport: str, era: str
) -> None:
    releases = tmp_path / "releases"
    for version in ("1.2.0", "1.3.0"):
        mcp_world.publish(version, releases)
    _publish(bulk, releases)
    expected = _expected(releases)

    async def check() -> None:
        with _served(mcp_world, releases, tmp_path, transport, ERAS[era]) as (connect, _):
            async with connect as client:
                assert client.protocol_version == era
                pages = await _pages(client)
                listed = [str(r.uri) for page in pages for r in page]
                assert len(pages) >= 3 and all(len(page) <= PAGE_SIZE for page in pages), [len(p) for p in pages]
                assert len(listed) == len(set(listed)), "a resource listed twice"
                assert [u for u in listed if not u.startswith("rimthan://contracts/")] == expected
                assert [r.meta is not None and WORKFLOWS_META in r.meta for r in pages[0][:3]] == [True] * 3
                first = await client.list_resources(cursor=None)
                assert first.next_cursor is not None and [r.uri for r in first.resources] == [r.uri for r in pages[0]]
                cursor = first.next_cursor
                for bad in ("garbled", cursor + "A", cursor[:-1], "x" * 5_000, _with_position(cursor, 1)):
                    await _refused(client, bad)
                await _refused(client, _with_position(cursor, len(listed)))
                forged = base64.urlsafe_b64decode(cursor + "=")
                forged = forged[:1] + bytes(16) + forged[17:]  # another listing's key
                said = await _refused(client, base64.urlsafe_b64encode(forged).decode("ascii").rstrip("="))
                assert "listing has changed" in said, said
                assert [r.uri for r in (await client.list_resources(cursor=cursor)).resources] == [
                    r.uri for r in pages[1]
                ]

    anyio.run(check)


@pytest.mark.parametrize(("transport", "era"), _params())
def test_a_cursor_from_before_a_refresh_that_changed_the_listing_is_refused(
    mcp_world: ServerWorld, bulk: Path, tmp_path: Path, transport: str, era: str
) -> None:
    releases = tmp_path / "releases"
    mcp_world.publish("1.2.0", releases)
    _publish(bulk, releases)
    errlog = tmp_path / "stderr.log"

    async def check() -> None:
        with _served(mcp_world, releases, tmp_path, transport, ERAS[era]) as (connect, http):
            async with connect as client:
                cursor = (await client.list_resources()).next_cursor
                assert cursor is not None
                assert len((await client.list_resources(cursor=cursor)).resources) == PAGE_SIZE  # not stale yet
                mcp_world.publish("1.3.0", releases)
                await anyio.to_thread.run_sync(_sighup, http, errlog)
                said = await _refused(client, cursor)
                assert "listing has changed since this cursor was given" in said, said
                pages = await _pages(client)  # from the start again: the listing as it is now
                assert [str(r.uri) for p in pages for r in p if "contracts/" not in str(r.uri)] == _expected(releases)

    anyio.run(check)


def _sighup(http: HttpServer | None, errlog: Path) -> None:
    """A refresh: SIGHUP the server, wait for its ``refresh done``."""
    if http is not None:
        http.refresh()
        return

    def lines() -> list[str]:
        return errlog.read_text("utf-8").splitlines()

    pid = int(wait_for_line(lines, r"refresh: kill -HUP (\d+)").group(1))
    seen = len(lines())
    os.kill(pid, signal.SIGHUP)
    wait_for_line(lines, '"refresh done"', after=seen)


def test_a_bridge_still_names_the_workflows_new_runs_start_on(
    mcp_world: ServerWorld, bulk: Path, tmp_path: Path
) -> None:
    releases, project = tmp_path / "releases", tmp_path / "project"
    project.mkdir()
    for version in ("1.2.0", "1.3.0"):
        mcp_world.publish(version, releases)
    _publish(bulk, releases)

    async def check() -> None:
        with (
            http_verifier(mcp_world, releases, tmp_path / "state") as verifier,
            (tmp_path / "bridge.log").open("w") as err,
        ):
            async with bridge_at(verifier.url, project, err) as bridge:
                said = text(await bridge.call_tool("show_step", {}))
        assert "Workflows you can start (pass the name as start_run's workflow): " in said, said
        assert "research-decision@1.4.0" in said, said

    anyio.run(check)
