"""``CatalogueExamples.review`` reads the submitted files as the bridge does: through the project's symlink-free
walk, against a real ``rimthan-mcp`` (1.2.0)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from rimthan_host.harness import CatalogueExamples, HarnessError, Review, ReviewContext, WorkflowHarness, client_caller
from support.processes import HttpServer
from support.servers import http_client_for, scenario


class _LinksTheFirstFile(CatalogueExamples):
    """The packaged examples; before the first review, a submitted file is swapped for a link to the same bytes
    outside the project."""

    def __init__(self, outside: Path) -> None:
        base = scenario()
        super().__init__(base.examples, answers=base.answers)
        self.outside, self.reviews = outside, list[Review]()

    def review(self, ctx: ReviewContext) -> Review:
        if not self.reviews:
            submitted = next(iter(ctx.artifacts.values()))
            at = ctx.project_dir / submitted.path
            copy = self.outside / at.name
            copy.write_bytes(at.read_bytes())
            at.unlink()
            os.symlink(copy, at)
        self.reviews.append(super().review(ctx))
        return self.reviews[-1]


def test_a_submitted_file_swapped_for_a_link_fails_review_unfollowed(mcp_http: HttpServer, tmp_path: Path) -> None:
    """The review read ``project_dir / path`` following links: a file swapped for a link to the same bytes outside
    the project passed. It is read through the walk, the link refused: the review fails it (and the repair, which
    writes no file through a link, stops the run with the harness's refusal)."""
    (outside := tmp_path / "outside").mkdir()
    examples = _LinksTheFirstFile(outside)

    async def go() -> str:
        async with http_client_for(mcp_http.url) as client:
            with WorkflowHarness(client_caller(client), examples, project_dir=tmp_path / "project") as harness:
                try:
                    return (await harness.run(await harness.start("research", "1.2.0"))).status
                except HarnessError as exc:
                    return str(exc)

    ended = anyio.run(go)
    first = examples.reviews[0]
    assert first.outcome == "fail", (first, ended)
    [finding] = first.findings
    path = finding.message.split(" ")[0]
    assert finding.message == f"{path} on disk no longer has the SHA-256 that was submitted", finding
    assert ended.endswith(f"{path} is a symbolic link; refusing to write or read through it"), ended
