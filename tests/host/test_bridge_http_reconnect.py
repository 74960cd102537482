"""A lost connection to a verifier at a URL that is running: the bridge reconnects at once and the run goes on.

A real ``rimthan-mcp serve --transport http --http-sessions`` on a fixed port (``support.registry.free_port``)
behind ``support.listen_proxy`` in ``handshake-only`` mode (it refuses ``server/discover``), so the real
``rimthan-host serve --verifier-url`` bridge connects on 2025-11-25 terms and holds an ``Mcp-Session-Id``. The
verifier is stopped and started again on its port: the bridge's next call names a session the new process does
not hold (404 ``Session not found``: ``verifier_lost``), and the bridge connects afresh in that same call. A
verifier stopped and not started again is ``tests/host/test_bridge_http.py``'s (unreachable, resume_run once back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp.client.stdio import StdioServerParameters
from rimthan_host.standin import StandIn
from support.bridge import (
    BIN,
    as_an_older_bridge_saved,
    audited_only_run,
    check_replies,
    no_run,
    refused,
    stand_in,
    verifier_args,
)
from support.checked_client import CheckedClient
from support.listen_proxy import HANDSHAKE_ONLY
from support.listings import entered, listen_proxy
from support.processes import http_server_process
from support.registry import free_port
from support.servers import ServerWorld, server_env

ANSWER = {"answer": "experiment", "field": "research_route"}


@asynccontextmanager
async def _bridge_on_sessions(
    world: ServerWorld, project: Path, state: Path
) -> AsyncIterator[tuple[StandIn, str, Callable[[], None]]]:
    """The model stand-in on a bridge at the proxy's URL, that URL, and a restart of the verifier on its port."""
    port = free_port()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(world, state), "--transport", "http"]
    verifier += ["--port", str(port), "--http-sessions"]
    with ExitStack() as stack:
        served = [await entered(stack, http_server_process(verifier, env=server_env()))]
        proxy = await entered(stack, listen_proxy(served[0].url, HANDSHAKE_ONLY))

        def restart() -> None:  # (stopped, then started again on the same port: no session of the old one)
            served[0].process.terminate()
            served[0].process.wait()
            served[0] = stack.enter_context(http_server_process(verifier, env=server_env()))

        bridge = StdioServerParameters(
            command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--verifier-url", proxy.url]
        )
        async with CheckedClient(bridge, mode="legacy") as client:
            yield stand_in(client, project), proxy.url, restart
        assert "server/discover refused" in proxy.stderr(), proxy.stderr()  # (the bridge fell back to initialize)


def test_a_lost_session_mid_run_is_reconnected_and_the_run_resumed_in_the_same_call(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The verifier restarted at a question: the answer's reply says the connection was lost, the bridge reconnected
    and resumed the run from its log; the answer made again is recorded and the run completes. Before, the reply
    said the verifier (running) was unreachable and to call resume_run once it was running again."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> StandIn:
        async with _bridge_on_sessions(mcp_world, project, state) as (model, url, restart):
            at_question = await model.follow(await model.start(), "experiment", until_question=True)
            run = at_question.data["run"]
            await anyio.to_thread.run_sync(restart)
            lost = await model.call("answer_question", ANSWER)
            refused(lost, f"The connection to the verifier at {url} was lost during answer_question; the bridge "
                    "reconnected (verifier_lost). Your answer_question call did not go through: make it again",
                    f"Resumed run {run} from its log")  # fmt: skip
            assert "unreachable" not in lost.text and "restarted" not in lost.text, lost.text
            assert lost.data["code"] == "verifier_lost" and lost.data["reconnected"] is True, lost.data
            assert lost.data["question"]["field"] == "research_route", lost.text  # where the run is
            again = await model.call("answer_question", ANSWER)
            assert not again.is_error and again.data["run"] == run, again.text  # (recorded: the run moved on)
            assert (await model.follow(again, "experiment")).data["status"] == "completed"
            return model

    check_replies(anyio.run(go))
    assert audited_only_run(project, state)["steps"][-1] == "experiment"


def test_a_lost_session_before_any_run_is_logged_is_reconnected_and_the_call_made_again(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The verifier restarted after the bridge's session began (a ``show_step`` read its listing) and before any run
    was logged: start_run's reply says the bridge reconnected and to call start_run again, which starts the run."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    runs = project / ".rimthan" / "runs"

    async def go() -> StandIn:
        async with _bridge_on_sessions(mcp_world, project, state) as (model, url, restart):
            assert not (await model.call("show_step")).is_error
            await anyio.to_thread.run_sync(restart)
            lost = await model.start()
            refused(lost, f"The connection to the verifier at {url} was lost (verifier_lost); the bridge reconnected. "
                    "start_run did not go through: call start_run again.")  # fmt: skip
            assert lost.data == {"status": "reconnected", "code": "verifier_lost"}, lost.data
            assert not runs.exists() or not any(runs.glob("*.log")), "no run was logged"
            final = await model.follow(await model.start(), "experiment")
            assert final.data["status"] == "completed", final.text
            return model

    check_replies(anyio.run(go))
    assert audited_only_run(project, state)["steps"][-1] == "experiment"


def test_a_resume_refused_after_reconnecting_is_the_reply(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """Reconnected, but the resume is refused (a state an older bridge saved keeps no result for the ungated step the
    log ends on: ``run_position_unknown``): the refusal is the reply, its code in words and data, as for a child."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> None:
        async with _bridge_on_sessions(mcp_world, project, state) as (model, url, restart):
            started = await model.start()
            run = started.data["run"]
            as_an_older_bridge_saved(project, run)
            await anyio.to_thread.run_sync(restart)
            lost = await model.call("step_done", {"step": "interview"})
            refused(lost, f"The connection to the verifier at {url} was lost during step_done; the bridge reconnected, "
                    f"but step_done did not go through and the run was not picked up again. Run {run} was not resumed "
                    "(run_position_unknown)")  # fmt: skip
            assert lost.data["code"] == "run_position_unknown" and lost.data["reconnected"] is True, lost.data
            assert "verifier_lost" not in lost.text and "restarted" not in lost.text, lost.text
            no_run(await model.call("show_step"), "No run is active")

    anyio.run(go)
