"""``make interop`` step 7: the harness in Node written from the docs alone (interop/node-harness/harness.mjs).

Node's standard library only, over stdio: the test vectors, a refused ``tools/list`` field without a
description, a completed run; a run migrated from 1.2.0 to 1.3.0; and one under ``--migrate-to-newest`` with
1.3.0 published and the server refreshed mid-run.
"""

from __future__ import annotations

from interop_world import HERE, REPO, Report, World, migration_target, only_the_release, run
from npm_tools import NODE22

NODE_HARNESS = HERE / "node-harness" / "harness.mjs"
VECTORS = REPO / "docs" / "test-vectors" / "host-protocol.json"


def run_node_harness(world: World, report: Report) -> None:
    """Step 6: the Node harness (vectors, tools/list descriptions, a whole run, two migrated runs) over stdio."""
    target = migration_target(world).parent
    runs = (
        ("node", ["--releases-dir", str(world.release.parent)], "a completed run", "ok: completed"),
        (
            "node-migrated",
            ["--release", str(world.release), "--migration-target", str(target / "research-decision-1.3.0")],
            "a run migrated from 1.2.0 to 1.3.0 and completed there",
            "ok: completed at sequence 11 on research-decision@1.3.0, migrated",
        ),
        (
            "node-newest",
            ["--releases-dir", str(only_the_release(world)), "--migrate-to-newest"]
            + ["--publish", str(target / "research-decision-1.3.0")],
            "--migrate-to-newest: 1.3.0 published and refreshed mid-run, the run migrated to it and completed there",
            "ok: completed at sequence 11 on research-decision@1.3.0, migrated",
        ),
    )
    for name, serving, what, ok in runs:
        project = world.work / f"{name}-project"
        project.mkdir()
        command = [str(NODE22), str(NODE_HARNESS), "--server", world.tool("rimthan-mcp"), "--vectors", str(VECTORS)]
        command += [*serving, "--trust", str(world.trust)]
        command += ["--state-dir", str(world.work / f"{name}-state"), "--project", str(project)]
        done = run([*command, "--log", str(world.work / f"{name}-run.log")])
        last = (done.stdout.strip().splitlines() or [""])[-1]
        report.check(
            done.returncode == 0 and last.startswith(ok),
            f"a harness in Node from the docs alone: test vectors, described fields, {what}",
            last if done.returncode == 0 else done.stderr.strip()[-600:],
        )
