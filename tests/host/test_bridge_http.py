"""The bridge talks to a verifier over Streamable HTTP (``rimthan-host serve --verifier-url``).

A real ``rimthan-mcp serve --transport http`` runs on a free port; the bridge
runs as a real process over stdio with ``--verifier-url`` (no child
verifier), and the model stand-in completes a run through it, migration
offer included. ``rimthan-mcp audit`` verifies the run log with the HTTP
verifier's own checkpoint keys.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.link import VerifierLink, VerifierLost
from rimthan_host.protocol import CONTINUE
from rimthan_host.standin import StandIn
from support.bridge import BIN, audit, check_replies, garbled_bridge, refused, stand_in, verifier_args
from support.checked_client import CheckedClient
from support.processes import http_server_process, serve_options
from support.registry import free_port
from support.servers import ServerWorld, server_env


def test_the_stand_in_completes_a_run_through_a_verifier_over_http(mcp_world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(mcp_world, state), "--transport", "http"]
    with http_server_process([*verifier, "--port", "0"], env=server_env()) as http:
        bridge = StdioServerParameters(
            command=str(BIN / "rimthan-host"),
            args=["serve", "--project", str(project), "--verifier-url", http.url],
        )

        async def go() -> StandIn:
            async with CheckedClient(bridge, mode="legacy") as client:
                model = stand_in(client, project)
                at_question = await model.follow(await model.start(), "experiment", until_question=True)
                assert at_question.data["migration"]["to_release"] == "research-decision@1.3.0"
                final = await model.follow(at_question, "experiment")
                assert final.data["status"] == "completed", final.text
                return model

        model = anyio.run(go)
    assert model.leaks() == [] and model.opaque_bytes_sent() == 0
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    history = audit(log, state)
    assert history["ok"] is True and "experiment" in history["steps"]


def test_an_unreachable_verifier_url_is_one_clear_refusal(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    bridge = StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--verifier-url", "http://127.0.0.1:9/mcp"],
        env=server_env(),
    )

    async def go() -> tuple[bool, str]:
        async with CheckedClient(bridge, mode="legacy") as client:
            result = await client.call_tool("start_run", {"workflow": "research", "facts": {}})
            return bool(result.is_error), "\n".join(getattr(c, "text", "") for c in result.content)

    is_error, text = anyio.run(go)
    assert is_error and "the verifier is not reachable" in text and "--verifier-url" in text
    assert "Traceback" not in text


def test_a_verifier_url_that_goes_away_is_unreachable_until_it_is_back(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """The verifier at the URL stops mid-run: the one new connection the bridge tries at once fails, so it says the
    verifier is unreachable; once it listens again, resume_run goes on."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(mcp_world, state), "--transport", "http"]
    with http_server_process([*verifier, "--port", "0"], env=server_env()) as first:
        url = first.url
        bridge = StdioServerParameters(
            command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--verifier-url", url]
        )
        port = url.split(":")[-1].split("/")[0]

        async def go() -> StandIn:
            async with CheckedClient(bridge, mode="legacy") as client:
                model = stand_in(client, project)
                at_question = await model.follow(await model.start(), "experiment", until_question=True)
                run = at_question.data["run"]
                first.process.kill()
                first.process.wait()
                gone = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                assert gone.is_error and f"The verifier at {url} is unreachable" in gone.text, gone.text
                assert f"call resume_run {run}" in gone.text and gone.data["code"] == "verifier_lost", gone.data
                assert "a new connection to it failed too" in gone.text and "reconnected" not in gone.text, gone.text
                assert gone.data["status"] == "verifier_unreachable" and "reconnected" not in gone.data, gone.data
                with http_server_process([*verifier, "--port", port], env=server_env()):
                    resumed = await model.call("resume_run", {"run": run})
                    assert f"Resumed run {run}" in resumed.text and resumed.data["question"], resumed.text
                    final = await model.follow(resumed, "experiment")
                    assert final.data["status"] == "completed", final.text
                return model

        model = anyio.run(go)
    _audited(model, project, state)


def _audited(model: StandIn, project: Path, state: Path) -> None:
    """No opaque value leaked to the model, and the run's log audits with the verifier's checkpoint keys."""
    assert model.leaks() == []
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    assert audit(log, state)["ok"] is True


def test_a_sessions_verifier_restarted_on_its_port_under_the_bridge_serves_the_next_call(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """``--http-sessions`` restarted on the same port mid-run: the bridge speaks 2026-07-28 (it asks
    ``server/discover`` first, and rimthan-mcp answers it), which has no ``Mcp-Session-Id``, so the new process
    serves the next move as it is, no error, no resume (a 2025-11-25 client's old id is 404 there:
    ``tests/server/test_http_session_ids.py``)."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    port = free_port()
    options = serve_options(mcp_world.built["1.2.0"], mcp_world.trust, state, migration_target=mcp_world.built["1.3.0"])
    verifier = [str(BIN / "rimthan-mcp"), "serve", *options, "--transport", "http", "--port", str(port)]
    with http_server_process([*verifier, "--http-sessions"], env=server_env()) as first:
        bridge = StdioServerParameters(
            command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--verifier-url", first.url]
        )

        async def go() -> StandIn:
            async with CheckedClient(bridge, mode="legacy") as client:
                model = stand_in(client, project)
                await model.follow(await model.start(), "experiment", until_question=True)
                first.process.terminate()
                first.process.wait()
                with http_server_process([*verifier, "--http-sessions"], env=server_env()) as second:
                    answered = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                    assert not answered.is_error and "Resumed" not in answered.text, answered.text
                    second.wait_for('"call served"')  # the move reached the new process
                    final = await model.follow(answered, "experiment")
                    assert final.data["status"] == "completed", final.text
                return model

        model = anyio.run(go)
    _audited(model, project, state)


def test_a_link_whose_http_session_was_lost_initializes_afresh_on_the_next_call(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """A verifier URL on 2025-11-25 terms (a gateway that answers no ``server/discover``: the link's era pinned here)
    with ``--http-sessions``, restarted on its port: the first call after it names the old session, is answered 404
    ``Session not found`` and is VerifierLost; the next call initializes afresh and the new process serves it.
    Before, the link kept the connection with the old id, and every later call was refused the same way."""
    port = free_port()
    options = serve_options(mcp_world.built["1.3.0"], mcp_world.trust, tmp_path / "state")
    verifier = [str(BIN / "rimthan-mcp"), "serve", *options, "--transport", "http", "--port", str(port)]
    host = {
        "harness": "claude-code",
        "adapter": {"id": "claude-code", "version": "1.0.0"},
        "capabilities": [],
        "validator_capabilities": [],
        "repository_policy": {"writable_paths": [], "protected_paths": []},
    }
    empty: dict[str, Any] = {"state": {}, "confirmations": {}}
    start = ("rimthan.start_workflow", {"workflow": "research", "confirmed_state": empty, "host": host})  # blocked
    with http_server_process([*verifier, "--http-sessions"], env=server_env()) as first:

        async def go() -> None:
            async with anyio.create_task_group() as tasks:
                link = VerifierLink(first.url, tasks, mode="legacy")
                assert (await link.call(*start))["status"] == "blocked"
                first.process.terminate()
                first.process.wait()
                with http_server_process([*verifier, "--http-sessions"], env=server_env()) as second:
                    with pytest.raises(VerifierLost, match="no MCP session for this connection"):
                        await link.call(*start)
                    assert await link.down(60) is None  # up, asked on a new connection (the bridge's exit status)
                    assert (await link.call(*start))["status"] == "blocked"
                    second.wait_for('"call served"')
                    link.close()
                tasks.cancel_scope.cancel()

        anyio.run(go)


def test_a_project_directory_that_does_not_exist_is_a_usage_mistake(tmp_path: Path) -> None:
    """A mistyped --project is refused at once (exit 2), not created by the first tool call with a run in it."""
    typo = tmp_path / "projcet"
    argv = [str(BIN / "rimthan-host"), "serve", "--project", str(typo), "--verifier-url", "http://127.0.0.1:9/mcp"]
    out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out
    assert f"'--project': Directory '{typo}' does not exist" in out.stderr and "Traceback" not in out.stderr
    assert not typo.exists()


def test_a_verifier_url_that_answers_no_protocol_result_is_refused_in_words(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """A result without a status, a refusal whose error is no object or missing (no code of the closed list): named,
    nothing of it used, the run goes on."""
    not_protocol = f"the verifier answered something that is not a protocol result: {CONTINUE} gave"
    check_url = "check --verifier-url points at rimthan-mcp"
    with garbled_bridge(mcp_world, tmp_path) as bridge:
        project, state, switch = bridge.project, bridge.state, bridge.switch

        async def go() -> StandIn:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, project)
                run = (await model.follow(await model.start(), "experiment", until_question=True)).data["run"]
                switch.write_text("no-status", "utf-8")
                missing = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                refused(missing, f"{not_protocol} a result without a status; {check_url}", f"call resume_run {run}")
                # A resume at a question shows the step saved with its checkpoint, asking the verifier nothing;
                # the next answer reaches it.
                switch.write_text("error-not-an-object", "utf-8")
                assert f"Resumed run {run}" in (await model.call("resume_run", {"run": run})).text
                wrong = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                refused(wrong, f"{not_protocol} a refusal whose error is not an object (str); {check_url}")
                assert f"call resume_run {run}" in wrong.text and "unexpected" not in missing.text + wrong.text
                switch.write_text("error-in-text-only", "utf-8")
                await model.call("resume_run", {"run": run})
                bare = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                refused(bare, f"{not_protocol} a refusal whose error is missing (it said 'Error: boom'); {check_url}")
                switch.unlink()
                resumed = await model.call("resume_run", {"run": run})
                assert f"Resumed run {run}" in resumed.text and resumed.data["question"], resumed.text
                assert (await model.follow(resumed, "experiment")).data["status"] == "completed"
                return model

        model = anyio.run(go)
    check_replies(model)
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    history = audit(log, state)  # only what the real verifier issued was logged
    assert history["ok"] is True and history["steps"][-1] == "experiment"


def test_an_answer_the_verifier_refuses_is_not_kept(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A verifier that refuses answer_question (another one at the URL, with other checkpoint keys): nothing is
    recorded, as the reply says; once the run's own verifier is back, the same answer goes through."""
    project, state, other = tmp_path / "project", tmp_path / "state", tmp_path / "other-state"
    project.mkdir()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(mcp_world, state), "--transport", "http"]
    stranger = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(mcp_world, other), "--transport", "http"]
    with http_server_process([*verifier, "--port", "0"], env=server_env()) as first:
        url = first.url
        port = url.split(":")[-1].split("/")[0]
        bridge = StdioServerParameters(
            command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--verifier-url", url]
        )

        async def go() -> StandIn:
            async with CheckedClient(bridge, mode="legacy") as client:
                model = stand_in(client, project)
                at_question = await model.follow(await model.start(), "experiment", until_question=True)
                first.process.terminate()
                first.process.wait()
                with http_server_process([*stranger, "--port", port], env=server_env()):
                    no = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                    refused(no, "The verifier refused: checkpoint_key_unknown", "Nothing changed", "answer_question")
                with http_server_process([*verifier, "--port", port], env=server_env()):
                    shown = await model.call("show_step")
                    assert shown.data["question"] == at_question.data["question"], shown.text
                    yes = await model.call("answer_question", {"answer": "experiment", "field": "research_route"})
                    assert not yes.is_error and "Recorded research_route = experiment" in yes.text, yes.text
                    final = await model.follow(yes, "experiment")
                    assert final.data["status"] == "completed", final.text
                return model

        model = anyio.run(go)
    check_replies(model)
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    history = audit(log, state)
    assert history["ok"] is True and history["steps"][-1] == "experiment"
