"""The host kit's run log on a disk that fills part way through a line (a real tmpfs).

Found: an append is one ``write``; on a disk with room for part of the line
the OS writes that part and returns its count, and the bridge took the move
as recorded. The log then ended in half a token (the next append glued a
whole one onto it), so the run could not be resumed from it. Now the line is
written whole or taken back: the log ends at its last complete line, the
move is not recorded, and the agent is told to have the user free space and
resume.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.words import failed_words
from support.small_disk import fill, small_tmpfs

FIRST = "a" * 3000  # a checkpoint token's shape for the log: ASCII, one line (a real one is 1-2 KiB)
SECOND = "b" * 1500


def test_a_line_the_disk_has_room_for_only_part_of_is_taken_back_and_written_once_there_is_room(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "project", "64k") as project:
        log = RunLog(project, "run-full")
        log.append(FIRST)
        filler = fill(project)  # the log's last page still has room for part of the next line
        with pytest.raises(OSError) as raised:
            log.append(SECOND)
        assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(log.log_path)
        assert log.log_path.read_bytes() == FIRST.encode() + b"\n"  # its last complete line, nothing after it
        assert log.last_token() == FIRST
        words = failed_words("step_done", raised.value, project, "run-full")
        assert words == (
            "The bridge failed on step_done (No space left on device: .rimthan/runs/run-full.log); the disk holding "
            "the project is full or read-only: ask the user to free space on it or make it writable, then call "
            "resume_run run-full to go on from the run log."
        )
        filler.unlink()
        log.append(SECOND)
        assert log.tokens() == [FIRST, SECOND]
