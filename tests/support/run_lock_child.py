"""A harness author's process on the host library: one run, started or resumed, held at a step until told to go on.

``python -m support.run_lock_child PROJECT RUN start|resume VERIFIER-ARGV-JSON``: prints ``READY <step>`` once the
run is at ``desk-research`` (or where a resume left it), reads one line from stdin, then runs the run to its end and
prints ``DONE <status>``; a refused start or resume prints ``REFUSED <message as JSON>`` and exits 3.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import HarnessError, client_caller
from rimthan_host.runlog import RunLog

from support.servers import scenario


async def main(project: Path, run: str, mode: str, verifier: list[str]) -> int:
    params = StdioServerParameters(command=verifier[0], args=verifier[1:])
    async with Client(params) as client:
        with WorkflowHarness(
            client_caller(client), scenario(), project_dir=project, run_log=RunLog(project, run)
        ) as kit:
            try:
                at: RunResult = (
                    await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")
                    if mode == "start"
                    else await kit.session.resume()
                )
            except HarnessError as refused:
                print("REFUSED " + json.dumps(str(refused)), flush=True)
                return 3
            print(f"READY {at.step_id}", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            print(f"DONE {(await kit.run(at)).status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, Path(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
