"""A start_run the verifier refuses as ``workflow_not_found`` is said in the bridge's own words.

The bridge names the workflow asked for and each workflow the verifier serves once, from the refusal's code and
``details.available``; it never edits the verifier's message (whose reason may name the workflows too, or be worded
otherwise). Details that are missing or not in the shape the core writes name no guessed list: the bridge's kept
listing, or words saying the list could not be read. The end-to-end test drives the real ``rimthan-host serve``
over stdio, which starts the real verifier on a real signed release whose two workflows (of two owners) share an
alias; the rest are the pure wording function.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
from mcp.client.stdio import StdioServerParameters
from rimthan_host.offered import Offered, OfferedList
from rimthan_host.step_replies import Reply
from rimthan_host.unserved import served_workflows, unserved_reply
from rimthan_workflow_registry.errors import FailureCode
from support.bridge import BIN, check_replies, refused, stand_in
from support.checked_client import CheckedClient
from support.releases import build_release, make_keypair, scaffold_source, trust_dir

CODE = FailureCode.WORKFLOW_NOT_FOUND.value
LISTED = "Workflows you can start (pass the name as start_run's workflow): "


def _two_owners(root: Path) -> Path:
    """A catalogue ``owners`` of workflows ``first`` (owner team.alpha) and ``second`` (team.beta), both also
    called ``shared``: the verifier refuses ``shared`` as naming several workflows."""
    source = scaffold_source(root / "owners", "owners")
    made = source / "workflows" / "owners.toml"
    text = made.read_text("utf-8").replace("entry_aliases = []", 'entry_aliases = ["shared"]', 1)
    for wf_id, owner, title in (("first", "team.alpha", "First"), ("second", "team.beta", "Second")):
        own = re.sub(r'(?m)^id = "owners"$', f'id = "{wf_id}"', text, count=1)
        own = re.sub(r'(?m)^owner = ".*"$', f'owner = "{owner}"', own, count=1)
        own = re.sub(r'(?m)^title = ".*"$', f'title = "{title}"', own, count=1)
        (source / "workflows" / f"{wf_id}.toml").write_text(own, "utf-8")
    made.unlink()
    catalogue = source / "catalogue.toml"
    listed = '"workflows/first.toml",\n    "workflows/second.toml",'
    catalogue.write_text(catalogue.read_text("utf-8").replace('"workflows/owners.toml",', listed, 1), "utf-8")
    return source


def _named_once(text: str, word: str) -> bool:
    return len(re.findall(rf"(?<![\w.@-]){re.escape(word)}(?![\w@-])", text)) == 1


def test_an_unknown_or_shared_name_names_the_name_and_each_workflow_once(tmp_path: Path) -> None:
    key = make_keypair(tmp_path / "keys", "release-engineer")
    releases, project, state = tmp_path / "releases", tmp_path / "project", tmp_path / "state"
    project.mkdir()
    build_release(_two_owners(tmp_path / "source"), releases, [key])
    options = ["--releases-dir", str(releases), "--trust", str(trust_dir(tmp_path / "trust", key))]
    params = StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--", *options, "--state-dir", str(state)],
    )

    async def go() -> None:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            for head in (
                "no workflow or alias 'nowhere' is among",
                "'shared' names several of the workflows it serves",
            ):
                said = await model.call("start_run", {"workflow": head.split("'")[1], "facts": {}})
                refused(said, f"The verifier refused: {CODE}: {head}", f"of the workflows below.\n{LISTED}")
                for workflow in ("first", "second"):
                    assert _named_once(said.text, workflow), said.text
                assert "available:" not in said.text and "team.alpha" not in said.text, said.text
                assert said.data == {"status": "refused", "refused": CODE, "workflows": ["first", "second"]}
            check_replies(model)

    anyio.run(go)
    assert not list(project.glob(".rimthan/runs/*.log"))  # none of it started a run


AVAILABLE = [
    {"id": "a", "owner": "o", "title": "A", "aliases": ["x"], "versions": ["1.0.0"]},
    {"id": "b", "owner": "o", "title": "B", "aliases": [], "versions": ["1.0.0", "1.1.0"]},
]
KEPT = OfferedList((Offered("kept", "cat@2.0.0"),))
NONE_KEPT = OfferedList()


def _said(asked: str, details: object, listing: OfferedList = NONE_KEPT) -> Reply:
    """start_run's reply to a ``workflow_not_found`` of ``asked`` carrying ``details``."""
    return unserved_reply("start_run", asked, served_workflows(details), listing)


def test_the_verifiers_list_is_named_once_from_its_details() -> None:
    said = _said("nope", {"available": AVAILABLE})
    assert said.is_error and said.data == {"status": "refused", "refused": CODE, "workflows": ["a", "b"]}
    assert said.text.startswith(f"The verifier refused: {CODE}: no workflow or alias 'nope' is among"), said.text
    assert said.text.endswith(LISTED + "a (A; also called x); b (B)."), said.text
    several = _said("x", {"available": [*AVAILABLE, {"id": "c", "aliases": ["x"]}]})
    assert f"{CODE}: 'x' names several of the workflows it serves" in several.text, several.text
    other = _said("b", {"available": [{**AVAILABLE[0], "release": "cat@1.0.0"}, AVAILABLE[1]]})
    assert f"{CODE}: it starts no workflow by the name 'b'." in other.text, other.text  # (why: not in the list)
    assert other.text.endswith(LISTED + "a (A, release cat@1.0.0; also called x); b (B)."), other.text
    listed = OfferedList((Offered("a", "cat@2.0.0"), Offered("b", "one@1.0.0"), Offered("b", "two@1.0.0")))
    released = _said("nope", {"available": AVAILABLE}, listed)  # (its release from the listing: b's is not one)
    assert released.text.endswith(LISTED + "a (A, release cat@2.0.0; also called x); b (B)."), released.text
    trimmed = _said("nope", {"available": [{"id": "a"}]})  # (only an id: named as such)
    assert trimmed.text.endswith(LISTED + "a."), trimmed.text
    none = _said("nope", {"available": []})
    assert none.text.endswith("serves no workflow a run can start: tell the user; start_run cannot go on.")
    assert "workflows" not in none.data


def test_details_missing_malformed_or_cut_name_no_guessed_list() -> None:
    cut: list[object] = [
        None,
        "available",
        {},
        {"available": "a, b"},
        {"available": [AVAILABLE[0], {"title": "no id"}]},  # (one entry cut: no part of the list is named)
        {"available": [AVAILABLE[0], "b"]},
        {"available": [{"id": 7}]},
    ]
    for details in cut:
        said = _said("nope", details)
        assert said.is_error and said.data == {"status": "refused", "refused": CODE}, (details, said)
        assert said.text.startswith(f"The verifier refused: {CODE}: it starts no workflow by the name 'nope'.")
        assert "could not be read: ask the user which workflow they meant" in said.text, said.text
        assert "a (" not in said.text and "Workflows you can start" not in said.text, said.text
        kept = _said("nope", details, KEPT)
        assert kept.text.endswith(LISTED + "kept (release cat@2.0.0)."), kept.text  # (the bridge's own listing)
        assert kept.data["workflows"] == ["kept"], kept.data
        assert "a (" not in kept.text, kept.text
    unread = _said("nope", None, OfferedList(unread="it goes on past 1000 pages"))
    assert "not named here: it goes on past 1000 pages" in unread.text and "workflows" not in unread.data
    long = _said("n\n" + "o" * 5000, {"available": AVAILABLE})
    head = long.text.split("\n")[0]
    assert head.endswith("...[5002 chars, cut]' is among the workflows it serves.") and len(head) < 400, head
