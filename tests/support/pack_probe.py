"""Run ``rimthan-pack`` in a fresh interpreter through its own ``main``, and report on the run.

``prelude`` runs first, in the same process (to wrap a function, say) and may
add entries to ``report``; the last line of stderr is that report as JSON,
with the exit code (``code``), every module imported (``modules``) and the
commands registered on the group (``commands``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PROBE = """
import json, sys
report = {}
%s
sys.argv = ["rimthan-pack", *json.loads(sys.argv[1])]
from rimthan_packager.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
from rimthan_packager.cli_options import cli
report.update(code=code, modules=sorted(sys.modules), commands=sorted(cli.commands))
print(json.dumps(report), file=sys.stderr)
"""


@dataclass(frozen=True)
class PackRun:
    stdout: str
    stderr: str
    report: dict[str, Any]

    @property
    def code(self) -> int:
        return int(self.report["code"])

    @property
    def modules(self) -> set[str]:
        return set(self.report["modules"])

    @property
    def commands(self) -> list[str]:
        """The commands registered on the group by the end (the group imports some modules only on first use)."""
        return list(self.report["commands"])


def pack_probe(*argv: str | Path, prelude: str = "", env: dict[str, str] | None = None) -> PackRun:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE % prelude, json.dumps([str(a) for a in argv])],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        env={**os.environ, **(env or {})},
    )
    return PackRun(result.stdout, result.stderr, json.loads(result.stderr.strip().splitlines()[-1]))
