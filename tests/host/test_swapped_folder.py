"""A folder of the project swapped for a symbolic link after the bridge checked it: nothing written outside.

Found: the host kit checked each folder on a file's path for a symbolic link,
then opened the full path. A local process that swapped a checked folder
(``.claude/agents``, ``.rimthan``, ``.rimthan/runs``) for a link to a folder
outside the project between the check and the open had the bridge write the
delivered asset, the delivery record, the run log, the run state or a lock
file there. Now every writer opens the project one folder at a time, each
relative to the last and never through a link (``files.open_folder``), and
writes, renames and fsyncs relative to the last folder's descriptor.

The read side too: an existence check (``ProjectFiles.exists``, what a write
says it created or replaced) and a listing of the project's runs
(``list_runs``, what start_run and show_step offer) looked the path up by name
after the folder was checked, so a folder swapped meanwhile had them report a
file, or runs, from outside the project. Both now go through the walk
(``files.file_status``, ``files.folder_entries``) and refuse the link.

Deterministic, without timing: a subprocess drives the real library with an
audit hook (``sys.addaudithook``; the ``open`` event fires before the
system call) that swaps the folder for a link to an outside folder at the
first open that reaches into it: a file in it opened to write, or the folder
itself opened by name relative to its parent's descriptor (or listed by path,
``os.scandir``). A lookup by path (``os.stat``) raises no audit event: a
profile hook (``sys.setprofile``) swaps the folder as ``os.stat`` is called on
a path inside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import quoted

_PROBE = r"""
import json, os, sys
from pathlib import Path

project, outside, swapped, writer = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
folder = project / swapped
fired = []
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT


def swap_now(path):
    fired.append(path)
    folder.rename(folder.with_name(folder.name + "-moved"))
    folder.symlink_to(outside, target_is_directory=True)


def swap(event, args):
    if event not in ("open", "os.scandir") or fired or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if event == "os.scandir":  # a listing by path
        if path == str(folder):
            swap_now(path)
        return
    flags = args[2] if isinstance(args[2], int) else 0
    into = path.startswith(f"{folder}/") and flags & WRITE
    if into or (path == folder.name and flags & getattr(os, "O_DIRECTORY", 0)):
        swap_now(path)


def stat_swap(frame, event, arg):  # a lookup by path inside the folder (os.stat raises no audit event)
    if event == "c_call" and arg is os.stat and not fired:
        path = frame.f_locals.get("self")
        if isinstance(path, Path) and str(path).startswith(f"{folder}/"):
            swap_now(str(path))


from rimthan_host.delivered import Record, save_record
from rimthan_host.project_files import ProjectFiles
from rimthan_host.protocol import HarnessError
from rimthan_host.run_lock import RunLock
from rimthan_host.runlog import RunLog, list_runs
from rimthan_host.words import failed_words
from rimthan_host.workspace_lock import WorkspaceLock

log = RunLog(project, "run-1")
WRITERS = {
    "asset": lambda: ProjectFiles(project).write("a", ".claude/agents/a.md", "text/markdown", "mine\n"),
    "record": lambda: save_record(ProjectFiles(project), Record({"x.md": "0" * 64})),
    "log": lambda: log.append("token"),
    "state": lambda: log.save_state("token", {"step": None}, logged=None),
    "run_lock": lambda: RunLock(log).acquire(),
    "bridge_lock": lambda: WorkspaceLock(project).acquire(),
    "exists": lambda: ProjectFiles(project).exists(".claude/agents/a.md"),
    "list_runs": lambda: list_runs(project),
}
sys.addaudithook(swap)
sys.setprofile(stat_swap)
try:
    found = WRITERS[writer]()
    sys.setprofile(None)
    said = None if found in (None, False, []) else f"found outside the project: {found}"
except HarnessError as exc:
    said = str(exc)
except OSError as exc:
    said = failed_words("start_run", exc, project, None)
print(json.dumps({"fired": fired, "said": said}))
"""

CASES = [
    ("asset", ".claude/agents"),
    ("asset", ".claude"),
    ("record", ".rimthan"),
    ("log", ".rimthan/runs"),
    ("state", ".rimthan/runs"),
    ("run_lock", ".rimthan/runs"),
    ("bridge_lock", ".rimthan"),
    ("exists", ".claude/agents"),
    ("list_runs", ".rimthan/runs"),
]
READERS = {"exists": ("a.md",), "list_runs": ("run-9.log",)}  # in the outside folder: what a lookup must not find


@pytest.mark.parametrize(("writer", "swapped"), CASES)
def test_a_folder_swapped_for_a_link_after_the_check_is_refused_and_nothing_is_written_outside(
    tmp_path: Path, writer: str, swapped: str
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    for folder in (".claude/agents", ".rimthan/runs"):
        (project / folder).mkdir(parents=True)
        below = Path(folder).relative_to(swapped) if Path(folder).is_relative_to(swapped) else None
        (outside / (below or "")).mkdir(parents=True, exist_ok=True)  # where a write through the link would land
    for name in READERS.get(writer, ()):
        (outside / name).write_text("outside\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(project), str(outside), swapped, writer],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["fired"], "the folder was never opened: the probe swapped nothing"
    assert (project / swapped).is_symlink()
    written = [p.name for p in outside.rglob("*") if not p.is_dir()]
    assert written == list(READERS.get(writer, ())), written  # no file written outside the project
    said = result["said"]
    if writer in ("asset", "record", "exists"):  # written through ProjectFiles: its refusal of a link on the way
        assert said == f"{quoted(project / swapped)} is a symbolic link; refusing to write or read through it"
    else:
        assert said is not None and f"(Symbolic link refused: {swapped})" in said, said
