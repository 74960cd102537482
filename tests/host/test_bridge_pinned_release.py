"""A run whose release was withdrawn while the host was closed: the bridge says so in its own words, and once the
user puts the release back, the same call goes through without restarting the host.

The project serves every release in its ``releases/`` (the bridge's default). A run starts on 1.2.0 and stops at
its question; the host closes; 1.3.0 is published and 1.2.0 withdrawn; a new bridge resumes the run (shown from its
saved result, nothing asked of the verifier). Its answer is refused ``pinned_release_unavailable``: before, in the
verifier's words for an operator ("refresh this server (SIGHUP ...)", the digest as ``[omitted]``) and "fix what it
names and call answer_question again" - but the verifier the bridge started never read its releases directory
again, so the call was refused for as long as the host ran, whatever the user put back.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.bridge import Bridge, Reply
from rimthan_host.link import VerifierLink
from rimthan_host.standin import StandIn
from rimthan_host.verifier_replies import VerifierFailure, floor_reply, pinned_release_reply
from support.bridge import BIN, audited, check_replies, refused, stand_in
from support.checked_client import CheckedClient
from support.processes import http_server_process
from support.servers import ServerWorld, build_world, server_env


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("pinned-world"))


def _bridge(project: Path, world: ServerWorld, state: Path) -> StdioServerParameters:
    """``rimthan-host serve`` on every release in the project's ``releases/``, as a user sets it up."""
    verifier = ["--releases-dir", str(project / "releases"), "--trust", str(world.trust), "--state-dir", str(state)]
    args = ["serve", "--project", str(project), "--", *verifier, "--log-level", "warning"]
    return StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)


def test_a_withdrawn_release_is_said_in_the_bridges_words_and_put_back_without_a_restart(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    releases = project / "releases"
    releases.mkdir(parents=True)
    withdrawn = world.publish("1.2.0", releases)

    async def before() -> StandIn:
        async with CheckedClient(_bridge(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await model.follow(await model.start(), "", until_question=True)
            return model

    async def after() -> tuple[StandIn, str]:
        async with CheckedClient(_bridge(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run")
            run = resumed.data["run"]
            assert resumed.data["question"]["field"] == "research_route", resumed.text
            answer = {"answer": "desk-research", "field": "research_route"}
            gone = await model.call("answer_question", answer)
            refused(gone, "pinned_release_unavailable", "research-decision@1.2.0", "releases/research-decision-1.2.0",
                    "call answer_question again", "start_run with new_run true")  # fmt: skip
            assert "[omitted]" not in gone.text and "SIGHUP" not in gone.text, gone.text
            assert gone.data["refused"] == "pinned_release_unavailable"
            assert gone.data["release"] == "research-decision@1.2.0"
            world.publish("1.2.0", releases)  # the user puts the release back, the host still open
            step = await model.call("answer_question", answer)
            assert not step.is_error and step.data["step"]["id"] == "desk-research", step.text
            await model.follow(step, "desk-research")
            return model, run

    first = anyio.run(before)
    shutil.rmtree(withdrawn)
    world.publish("1.3.0", releases)
    second, run = anyio.run(after)
    for model in (first, second):
        check_replies(model)
    audited(project, state, run)


def test_a_verifier_by_url_without_the_pinned_release_is_its_operators_to_fix(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The same through ``--verifier-url``: the bridge restarts nothing there, so its words send the model to the
    verifier's operator (put the release back and refresh it), not to a release directory of the project."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    def verifier(version: str) -> list[str]:  # (its releases directory holds that one release alone)
        release = world.publish(version, tmp_path / f"releases-{version}")
        served = ["--release", str(release), "--trust", str(world.trust), "--state-dir", str(state)]
        return [str(BIN / "rimthan-mcp"), "serve", *served, "--transport", "http", "--port", "0"]

    def bridge(url: str) -> StdioServerParameters:
        args = ["serve", "--project", str(project), "--verifier-url", url]
        return StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)

    async def before(url: str) -> StandIn:
        async with CheckedClient(bridge(url), mode="legacy") as client:
            model = stand_in(client, project)
            await model.follow(await model.start(), "", until_question=True)
            return model

    async def after(url: str) -> StandIn:
        async with CheckedClient(bridge(url), mode="legacy") as client:
            model = stand_in(client, project)
            assert not (await model.call("resume_run")).is_error
            gone = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
            refused(gone, "pinned_release_unavailable", "research-decision@1.2.0", f"the verifier at {url}",
                    "Ask its operator to put that release back", "call answer_question again",
                    "start_run with new_run true")  # fmt: skip
            assert "[omitted]" not in gone.text and "releases/research-decision-1.2.0" not in gone.text, gone.text
            return model

    with http_server_process(verifier("1.2.0"), env=server_env()) as old:
        first = anyio.run(before, old.url)
    with http_server_process(verifier("1.3.0"), env=server_env()) as new:  # (1.2.0 withdrawn)
        second = anyio.run(after, new.url)
    for model in (first, second):
        check_replies(model)


def test_the_newest_release_withdrawn_below_the_floor_is_said_with_what_to_do(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A run pinned to the newest release, which is then withdrawn: the verifier's activation floor refuses the
    older release left (``rollback_refused``), so the verifier the bridge starts does not come up. Before, the
    bridge's words were those for a misconfigured verifier ("check the flags after -- or --verifier-url"); now
    which release was withdrawn below the floor it raised, and what the user can do (put it back, or lower the
    floor deliberately and start a new run)."""
    project, state = tmp_path / "project", tmp_path / "state"
    releases = project / "releases"
    releases.mkdir(parents=True)
    world.publish("1.2.0", releases)
    newest = world.publish("1.3.0", releases)

    async def before() -> StandIn:
        async with CheckedClient(_bridge(project, world, state), mode="legacy") as client:
            model = stand_in(client, project, version="1.3.0")
            await model.follow(await model.start(), "", until_question=True)
            return model

    async def after() -> StandIn:
        async with CheckedClient(_bridge(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run")  # (shown from its saved result: no verifier asked)
            assert resumed.data["question"]["field"] == "research_route", resumed.text
            answer = {"answer": "desk-research", "field": "research_route"}
            floor = await model.call("answer_question", answer)
            refused(floor, "rollback_refused", "research-decision@1.3.0", "releases/research-decision-1.3.0",
                    "(research-decision@1.2.0 is below it)", "this run is pinned to it",
                    "\nnext: ask the user to put release research-decision@1.3.0 back", "call answer_question again",
                    "--lower-floor", "start_run with new_run true")  # fmt: skip
            assert "flags after --" not in floor.text, floor.text
            assert floor.data == {
                "status": "refused",
                "refused": "rollback_refused",
                "release": "research-decision@1.3.0",
            }
            world.publish("1.3.0", releases)  # the user puts the release back, the host still open
            step = await model.call("answer_question", answer)
            assert not step.is_error and step.data["step"]["id"] == "desk-research", step.text
            return model

    first = anyio.run(before)
    shutil.rmtree(newest)
    second = anyio.run(after)
    for model in (first, second):
        check_replies(model)


def _floor_reply(project: Path, failure: VerifierFailure) -> Reply:
    """What the bridge says for ``failure`` of a child verifier (a reply that makes no call)."""
    return _said(project, failure, floor_reply)


def _said(
    project: Path, failure: VerifierFailure, words: Callable[[Bridge, VerifierLink, VerifierFailure], Reply | None]
) -> Reply:
    """What ``words`` (a reply of verifier_replies) says for ``failure`` of a verifier at a URL; it makes no call."""

    async def no_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the reply makes no call")

    async def go() -> Reply | None:
        async with anyio.create_task_group() as tasks:
            link = VerifierLink("http://127.0.0.1:9/mcp", tasks)
            said = words(Bridge(no_call, project_dir=project), link, failure)
            tasks.cancel_scope.cancel()
        return said

    said = anyio.run(go)
    assert said is not None and said.is_error
    return said


@pytest.mark.parametrize(
    "message", ["a wording the bridge does not know", "research-decision@1.2.0 is below the activation floor 1.3.0"]
)
def test_a_floor_refusal_without_details_names_no_release_and_still_reads_as_a_sentence(
    tmp_path: Path, message: str
) -> None:
    """The floor reply names releases only from the refusal's details; a refusal without them (a verifier that
    wrote no below-floor line) gives the reply without names, still a sentence ("The newest release it served"),
    not a garbled one, whatever its message says."""
    said = _floor_reply(tmp_path, VerifierFailure("rollback_refused", "start_run", message, exited=True))
    assert "The newest release it served is no longer in the releases directory" in said.text, said.text
    assert "the newest the newest" not in said.text.lower(), said.text
    assert said.data == {"status": "refused", "refused": "rollback_refused", "release": None}


def test_the_floor_reply_names_the_releases_of_the_refusals_details_not_of_its_english(tmp_path: Path) -> None:
    """The release names come from the refusal's details (the child verifier's below-floor machine line), so a
    message worded otherwise - here naming other releases in the very sentence the bridge once parsed - changes
    nothing. Before, the bridge read the names out of the English message."""
    english = "other@9.9.9 is below the activation floor 10.0.0 recorded somewhere"
    details = {"catalogue": "research-decision", "version": "1.2.0", "floor": "1.3.0"}
    said = _floor_reply(tmp_path, VerifierFailure("rollback_refused", "start_run", english, details, exited=True))
    assert "The newest release research-decision@1.3.0 is no longer" in said.text, said.text
    assert "(research-decision@1.2.0 is below it)" in said.text, said.text
    assert "other@" not in said.text and "10.0.0" not in said.text, said.text
    assert said.data == {"status": "refused", "refused": "rollback_refused", "release": "research-decision@1.3.0"}


def test_a_pinned_release_the_verifier_dropped_as_untrusted_is_not_sent_to_be_put_back(tmp_path: Path) -> None:
    """A verifier whose trust store stopped vouching for the run's release (a signing key revoked) still holds it in
    its releases directory: "put that release back" sent the operator the wrong way. The verifier's refusal says
    ``details.untrusted``, and the bridge's words ask for a co-signature by a trusted key instead."""
    details = {"release_id": "research-decision@1.2.0", "untrusted": True}
    failure = VerifierFailure("pinned_release_unavailable", "answer_question", "dropped", details)
    said = _said(tmp_path, failure, pinned_release_reply)
    assert said.is_error and "research-decision@1.2.0" in said.text, said.text
    assert "dropped: its trust store no longer vouches for the release's signatures" in said.text, said.text
    assert "co-signed with a key the verifier trusts" in said.text and "call answer_question again" in said.text
    assert "put that release back" not in said.text, said.text
