"""``rimthan-host`` usage mistakes speak the one error voice of ``rimthan-pack`` and ``rimthan-mcp``.

Run through the installed console script: two lines on stderr (``error: usage: ...`` and a
``next:`` line naming the help to read), exit status 2, nothing on stdout, and no bridge started.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support.refusals import refusal

RIMTHAN_HOST = str(Path(sys.executable).with_name("rimthan-host"))


def _host(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rimthan-host ARGS`` run to its end, with no stdin (a bridge that started would exit 0 at once)."""
    return subprocess.run(
        [RIMTHAN_HOST, *args], capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize(
    ("args", "expect", "help_of"),
    [
        # once handed to the child verifier as one of its arguments: the bridge started and exited 0
        (["serve", "--bogus"], "No such option '--bogus' (the verifier's own flags go after --)", "rimthan-host serve"),
        # words not after --: handed to the child verifier before, and the bridge exited 0 whatever it said
        (["serve", "releases"], "unexpected word 'releases': rimthan-host serve takes only", "rimthan-host serve"),
        (["serve", "--harness", "opencode", "a", "b"], "unexpected words 'a' 'b': ", "rimthan-host serve"),
        (["serve", "--releases-dir", "r"], "No such option '--releases-dir' (the verifier's", "rimthan-host serve"),
        (["serve", "--harness", "vim"], "Invalid value for '--harness'", "rimthan-host serve"),
        (["serve", "--project", "no-such-dir"], "Invalid value for '--project'", "rimthan-host serve"),
        (["serve", "--verifier-url"], "Option '--verifier-url' requires an argument", "rimthan-host"),
        # a URL the bridge could never reach, or one with verifier flags it would drop: refused, not served
        (["serve", "--verifier-url", ""], "'' is not an http:// or https:// URL with a host", "rimthan-host serve"),
        (["serve", "--verifier-url", "ftp://h/"], "'ftp://h/' is not an http:// or https://", "rimthan-host serve"),
        (["serve", "--verifier-url", "http://[::1"], "'http://[::1' is not an http:// or", "rimthan-host serve"),
        (["serve", "--verifier-url", "http://h:99999/"], "'http://h:99999/' is not an", "rimthan-host serve"),
        (
            ["serve", "--verifier-url", "http://h/", "--", "-v"],
            "with --verifier-url it starts none",
            "rimthan-host serve",
        ),
        (["frobnicate"], "No such command 'frobnicate'", "rimthan-host"),
        ([], "no command given", "rimthan-host"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_usage_mistakes_are_one_error_line_and_a_next_line(
    args: list[str], expect: str, help_of: str, tmp_path: Path
) -> None:
    done = _host(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    said = refusal(done.stderr, allow_before=not args)  # no command: the help comes first, on stderr
    assert said.code == "usage" and expect in said.error, done.stderr
    assert said.next.startswith(f"run '{help_of} ") and "Error:" not in done.stderr, done.stderr
    assert not (tmp_path / ".rimthan").exists()


def test_serve_help_documents_the_exit_statuses_of_the_error_voice(tmp_path: Path) -> None:
    done = _host("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0 and "Exit status:" in done.stdout and "Examples:" in done.stdout
    assert "error: <code>: <message>" in done.stdout and "rimthan-host: error:" not in done.stdout


def test_a_bridge_that_cannot_serve_says_so_in_the_error_voice(tmp_path: Path) -> None:
    """No stdin at all (fd 0 closed): the bridge cannot serve; one error: and next: pair, exit 1, no traceback."""
    done = subprocess.run(
        [RIMTHAN_HOST, "serve"], capture_output=True, text=True, timeout=60, cwd=tmp_path, preexec_fn=_close_stdin
    )
    assert done.returncode == 1 and done.stdout == "", (done.returncode, done.stderr)
    said = refusal(done.stderr)
    assert said.error == "error: io_error: standard input is closed; the bridge serves MCP over stdin and stdout", said
    assert said.next.startswith("start rimthan-host serve from an MCP client"), said  # was internal_error


def _close_stdin() -> None:
    os.close(0)


def test_a_bridge_without_stdout_says_so_in_the_error_voice(tmp_path: Path) -> None:
    """fd 1 closed: was `internal_error: ... AttributeError: 'NoneType' object has no attribute 'buffer'`."""
    done = subprocess.run(
        [RIMTHAN_HOST, "serve"], stderr=subprocess.PIPE, text=True, timeout=60, cwd=tmp_path, preexec_fn=_close_stdout
    )
    assert done.returncode == 1, (done.returncode, done.stderr)
    said = refusal(done.stderr)
    assert said.error == "error: io_error: standard output is closed; the bridge serves MCP over stdin and stdout"
    assert not (tmp_path / ".rimthan").exists()


def _close_stdout() -> None:
    os.close(1)


_WITHOUT_VERIFIER = (
    "import site, sys\n"
    "site.addsitedir(sys.argv.pop(1))\n"  # the workspace's packages, from an interpreter with no rimthan-mcp beside it
    "sys.argv = ['rimthan-host', 'serve']\n"
    "from rimthan_host.serve import main\n"
    "main()\n"
)


def test_no_verifier_installed_is_an_io_error_naming_how_to_install_it(tmp_path: Path) -> None:
    """rimthan-host without rimthan-mcp beside it or on PATH: io_error, exit 1 (was `error: usage:`, exit 1)."""
    bare = tmp_path / "bin" / "python"
    bare.parent.mkdir()
    bare.symlink_to(sys._base_executable)  # type: ignore[attr-defined]  # (no venv: no console scripts beside it)
    env = {**os.environ, "PATH": str(bare.parent)}
    done = subprocess.run(
        [str(bare), "-S", "-c", _WITHOUT_VERIFIER, sysconfig.get_paths()["purelib"]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    said = refusal(done.stderr)
    assert said.error == "error: io_error: rimthan-mcp: not installed beside rimthan-host nor on PATH", said
    assert "--with-executables-from rimthan-workflow-mcp" in said.next and "--verifier-url" in said.next


@pytest.mark.parametrize("program", ["rimthan-host", "rimthan-pack", "rimthan-mcp"])
def test_every_cli_answers_h_help_and_version_and_says_its_exit_statuses(program: str, tmp_path: Path) -> None:
    """The three command lines keep one convention: ``-h`` is ``--help``, ``--version`` names the program, and the
    top-level help ends with the exit statuses (rimthan-host had neither -h nor --version, rimthan-pack's
    top-level help no exit statuses)."""
    cli = str(Path(sys.executable).with_name(program))
    run = [
        subprocess.run([cli, *a], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        for a in (["-h"], ["--help"], ["--version"])
    ]
    assert [r.returncode for r in run] == [0, 0, 0], [r.stderr for r in run]
    assert run[0].stdout == run[1].stdout and "Exit status:" in run[1].stdout, run[1].stdout
    assert run[2].stdout.startswith(f"{program}, version "), run[2].stdout
