"""The route analysis behind "a step's inputs are produced on every route to it" (catalogue_routes).

A step graph with a branch and a revisit, as plain edges: the analysis must find
a route that skips the producing step wherever one exists, and none where every
route (loops included) passes it.
"""

from __future__ import annotations

from rimthan_workflow_registry.release.catalogue_routes import reached_from, route_avoiding

# setup branches at choose: draft produces the artifact review reads, shortcut does not; review may send the
# run back to draft (a revisit) or on to done.
SKIPPING = {
    "setup": ("choose",),
    "choose": ("draft", "shortcut"),
    "draft": ("review",),
    "shortcut": ("review",),
    "review": ("draft", "done"),
    "done": (),
}
# The same, but the shortcut rejoins before draft: every route to review, first visit or revisit, passes draft.
JOINING = {**SKIPPING, "shortcut": ("draft",)}


def test_a_branch_that_skips_the_producing_step_is_the_route_named() -> None:
    assert route_avoiding(SKIPPING, "setup", "review", "draft") == ("setup", "choose", "shortcut", "review")


def test_no_route_when_every_branch_and_every_revisit_passes_the_producing_step() -> None:
    assert route_avoiding(JOINING, "setup", "review", "draft") is None
    assert route_avoiding(JOINING, "setup", "done", "review") is None  # done only follows review
    assert route_avoiding(JOINING, "setup", "draft", "shortcut") == ("setup", "choose", "draft")


def test_a_producer_only_a_loop_reaches_after_the_reader_does_not_count() -> None:
    looping = {"setup": ("review",), "review": ("draft", "done"), "draft": ("review",), "done": ()}
    assert route_avoiding(looping, "setup", "review", "draft") == ("setup", "review")


def test_the_walk_never_enters_the_avoided_step_and_records_first_predecessors() -> None:
    found = reached_from(["setup"], SKIPPING, "draft")
    assert found == {"setup": None, "choose": "setup", "shortcut": "choose", "review": "shortcut", "done": "review"}
    assert reached_from(["setup"], SKIPPING, "setup") == {}
