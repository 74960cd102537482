"""``resources/list`` says which held release a new run starts on, before the harness calls start.

Each held release's manifest resource carries ``_meta`` ``rimthan/release`` (its release id, as a result's
``release.id``) and ``rimthan/new-runs``: true on the release ``start_workflow`` starts a run on (the newest
of a releases directory; ``--release`` beside a ``--migration-target``), false on one held only for the runs
pinned to it, and ``rimthan/workflows``: the workflows it carries (id, owner, title, aliases, versions), which a
host lists for a model to start. A real SDK client against the real server process, the run then started to check it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_workflow_registry.canonical import digest_value
from support.processes import stdio_client_process
from support.servers import ServerWorld, example_state, serve_args

RELEASE_META, NEW_RUNS_META = "rimthan/release", "rimthan/new-runs"  # the wire's names, as a harness reads them
WORKFLOWS_META = "rimthan/workflows"
HOST = {
    "harness": "claude-code",
    "adapter": {"id": "claude-code", "version": "1.0.0"},
    "capabilities": ["skills", "subagents", "workspace.write"],
    "validator_capabilities": ["subagent.isolated-context"],
    "repository_policy": {"writable_paths": [".claude/*", ".rimthan/*", "research/*"], "protected_paths": [".git/*"]},
}


def _confirmed(state: dict[str, Any]) -> dict[str, Any]:
    at = int(time.time())
    return {
        "state": state,
        "confirmations": {
            k: {"value_digest": digest_value(v), "confirmed_at": at, "confirmed_by": "the user"}
            for k, v in state.items()
        },
    }


def _marked(resources: list[types.Resource]) -> dict[str, tuple[bool, str]]:
    """Release id -> (new runs start on it, its manifest URI), from the manifest resources' ``_meta``."""
    out = {}
    for r in resources:
        meta = r.meta or {}
        if RELEASE_META in meta:
            out[meta[RELEASE_META]] = (meta[NEW_RUNS_META], r.uri)
    return out


def _serve(world: ServerWorld, tmp: Path, how: str) -> list[str]:
    state = tmp / "state"
    if how == "releases-dir":
        releases = tmp / "releases"
        for version in ("1.2.0", "1.3.0"):
            world.publish(version, releases)
        return ["-m", "rimthan_workflow_mcp", "serve", "--releases-dir", str(releases), "--trust", str(world.trust),
                "--state-dir", str(state)]  # fmt: skip
    return serve_args(world, world.built["1.2.0"], state_dir=state, migration_target=world.built["1.3.0"])


@pytest.mark.parametrize(("how", "starts_on"), [("releases-dir", "1.3.0"), ("release-and-target", "1.2.0")])
def test_the_listing_marks_the_release_a_new_run_starts_on(
    mcp_world: ServerWorld, tmp_path: Path, how: str, starts_on: str
) -> None:
    args = _serve(mcp_world, tmp_path, how)

    async def check() -> None:
        async with stdio_client_process(sys.executable, args, (tmp_path / "stderr.log").open("w")) as client:
            listed = (await client.list_resources()).resources
            marked = _marked(listed)
            metas = [r.meta for r in listed if r.meta and RELEASE_META in r.meta]
            carried = {meta[RELEASE_META]: meta[WORKFLOWS_META] for meta in metas}
            assert carried[f"research-decision@{starts_on}"] == [
                {
                    "id": "research-decision",
                    "owner": "rimthan.research",
                    "title": "Research decision",
                    "aliases": ["decide", "research"],
                    "versions": [starts_on],
                }
            ]
            assert {k: v[0] for k, v in marked.items()} == {
                "research-decision@1.2.0": starts_on == "1.2.0",
                "research-decision@1.3.0": starts_on == "1.3.0",
            }
            started = await client.call_tool(
                "rimthan.start_workflow",
                {"workflow": "research", "confirmed_state": _confirmed(example_state(starts_on)), "host": HOST},
            )
            assert not started.is_error and started.structured_content is not None, started
            release = started.structured_content["release"]
            assert release["id"] == f"research-decision@{starts_on}"
            assert marked[release["id"]][1] == f"rimthan://manifests/{release['manifest_digest'][7:]}/manifest.json"

    anyio.run(check)
