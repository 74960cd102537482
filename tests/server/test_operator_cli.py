"""Operator polish of both CLIs: what ``serve`` says it loaded, ``check``, help texts, one-line errors.

``serve`` and usage errors run as real processes; help texts through click's
runner. Every refusal must be exactly one line on stderr that names the code
and says what to do next.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from rimthan_packager.cli import cli as pack_cli
from rimthan_workflow_mcp.cli import main as mcp_main
from support.processes import http_server_process
from support.refusals import refusal
from support.servers import RIMTHAN_MCP as RIMTHAN_MCP_SCRIPT
from support.servers import ServerWorld, build_world, flip_byte, http_server, serve_args, server_env

RIMTHAN_MCP = [sys.executable, "-m", "rimthan_workflow_mcp"]
MCP_COMMANDS = (["serve"], ["check"], ["audit"], ["keys"], ["keys", "list"], ["keys", "rotate"], ["keys", "retire"])
PACK_COMMANDS = (["keygen"], ["build"], ["sign"], ["verify"], ["inspect"], ["init"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("operator-world"))


def _digest(release: Path) -> str:
    return "sha256:" + hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()


def test_serve_over_http_prints_releases_digests_trust_ids_target_and_address(
    world: ServerWorld, tmp_path: Path
) -> None:
    active, target = world.built["1.2.0"], world.built["1.3.0"]
    args = serve_args(world, active, state_dir=tmp_path / "state", migration_target=target)
    with http_server(args) as server:
        said = server.stderr()
    assert f"rimthan-mcp: release research-decision@1.2.0 {_digest(active)} ({active}) [active]" in said
    assert f"rimthan-mcp: migration target research-decision@1.3.0 {_digest(target)} ({target})" in said
    assert f"threshold 1 of 1 key(s): release-engineer={world.key.key_id}" in said
    assert f"transport http (stateless Streamable HTTP) at {server.url}" in said
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
    assert f"checkpoint keys {tmp_path / 'state' / 'checkpoint-keys.json'} (created): signing ck-" in said


def test_serve_names_the_older_releases_it_holds_for_pinned_runs_on_its_start_lines(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A restarted replica named only its active release: whether the older one its runs are pinned to loaded
    (a run on it is refused otherwise) was not said, though ``check`` says it. Each held release is a line now."""
    releases = tmp_path / "releases"
    older, newer = world.publish("1.2.0", releases), world.publish("1.3.0", releases)
    argv = [RIMTHAN_MCP_SCRIPT, "serve", "--releases-dir", str(releases), "--trust", str(world.trust),
            "--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]  # fmt: skip
    with http_server_process(argv, env=server_env()) as server:
        said = server.stderr()
    assert f"rimthan-mcp: release research-decision@1.3.0 {_digest(newer)} ({newer}) [active]" in said
    assert f"rimthan-mcp: release research-decision@1.2.0 {_digest(older)} ({older}) [held for pinned runs]" in said


def test_serve_takes_an_ipv6_host_as_urls_write_it(world: ServerWorld, tmp_path: Path) -> None:
    """``--host [::1]`` (the form a URL carries) was looked up as a host name: ``io_error: Name or service not
    known``, with a next step to choose a --host this machine has. Now it is the address ``::1``."""
    argv = [RIMTHAN_MCP_SCRIPT, "serve", "--release", str(world.built["1.2.0"]), "--trust", str(world.trust),
            "--state-dir", str(tmp_path / "state"), "--transport", "http", "--host", "[::1]",
            "--port", "0"]  # fmt: skip
    with http_server_process(argv, env=server_env()) as server:
        health = server.url.replace("/mcp", "/healthz")
        with urllib.request.urlopen(health, timeout=30) as answer:
            said = json.loads(answer.read())
    assert server.url.startswith("http://[::1]:") and server.url.endswith("/mcp"), server.url
    assert said == {"status": "serving", "active": ["research-decision@1.2.0"]}, said


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``rimthan-mcp ARGS``, run to its end with no stdin."""
    return subprocess.run([RIMTHAN_MCP_SCRIPT, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=server_env(), check=False)  # fmt: skip


def test_plain_http_without_a_registry_to_follow_is_a_usage_mistake(world: ServerWorld, tmp_path: Path) -> None:
    """``--plain-http`` without ``--releases-from`` was ignored: the server started as if it meant something."""
    done = _script("serve", "--release", str(world.built["1.2.0"]), "--trust", str(world.trust),
                   "--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0",
                   "--plain-http")  # fmt: skip
    assert done.returncode == 2, done.stderr
    said = refusal(done.stderr)
    assert said.error == "error: usage: --plain-http says how to reach the registry --releases-from follows: give " \
        "--releases-from too", said  # fmt: skip


def test_a_follower_whose_releases_dir_is_a_file_says_so(world: ServerWorld, tmp_path: Path) -> None:
    """A file at ``--releases-dir`` was refused as ``io_error: DIR: File exists``, next step "check that the named
    path exists": it does. Now it says the path is no directory, before the registry is asked."""
    (taken := tmp_path / "releases").write_text("not a directory\n")
    done = _script("serve", "--releases-from", "oci://127.0.0.1:1/rimthan/any", "--plain-http", "--releases-dir",
                   str(taken), "--trust", str(world.trust), "--state-dir", str(tmp_path / "state"))  # fmt: skip
    assert done.returncode == 1, done.stderr
    said = refusal(done.stderr)
    assert said.error == f"error: io_error: {taken}: is not a directory: a follower pulls its releases into a " \
        "directory", said  # fmt: skip
    assert said.next == "give --releases-dir a directory (created if missing), or move that file away", said


def _mcp(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rimthan-mcp ARGS`` run to its end, with no stdin."""
    return subprocess.run(
        [*RIMTHAN_MCP, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env=env or server_env(),
    )


def _check(release: Path, trust: Path) -> subprocess.CompletedProcess[str]:
    return _mcp("check", "--release", str(release), "--trust", str(trust))


def test_check_verifies_as_serve_and_exits(world: ServerWorld, tmp_path: Path) -> None:
    release = world.built["1.3.0"]
    ok = _check(release, world.trust)
    assert ok.returncode == 0 and ok.stderr == ""
    first, *older = ok.stdout.splitlines()
    assert (
        first == f"ok research-decision@1.3.0 {_digest(release)} signed by release-engineer ({world.key.key_id[:16]}…)"
    )
    # serve would also hold the older releases beside it (for runs pinned to them): check verifies them too
    assert older == [
        f"ok research-decision@1.2.0 {_digest(world.built['1.2.0'])} signed by release-engineer "
        f"({world.key.key_id[:16]}…)"
    ]
    bad = world.publish("1.3.0", tmp_path / "releases")
    flip_byte(bad)
    refused = _check(bad, world.trust)
    assert refused.returncode == 1 and refused.stdout == ""
    said = refusal(refused.stderr)
    assert said.code == "file_digest_mismatch" and "restore the release from a good copy" in said.next


@pytest.mark.parametrize("command", MCP_COMMANDS, ids=" ".join)
def test_every_rimthan_mcp_command_has_a_man_page_quality_help(command: list[str]) -> None:
    result = CliRunner().invoke(mcp_main, [*command, "--help"], prog_name="rimthan-mcp")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith(f"Usage: rimthan-mcp {' '.join(command)}")
    assert re.search(r"Examples:\n +(rimthan-mcp|kill) ", text), text
    assert "Exit status:" in text and "  0  " in text and "  1  " in text and "  2  " in text
    assert "Options:" in text and "-h, --help" in text


def test_rimthan_mcp_help_states_defaults_and_meanings() -> None:
    serve = " ".join(CliRunner().invoke(mcp_main, ["serve", "--help"]).stdout.split())
    for fragment in (
        "default: keys/local]",
        "[default: stdio]",
        "[default: 127.0.0.1]",
        "[default: 8765]",
        "[default: info]",
        "STATE_DIR/checkpoint-keys.json",
        "$RIMTHAN_STATE_DIR",
        "--http-sessions",
        "kill -HUP <pid>",
        "manifest digest",
    ):
        assert fragment in serve, fragment
    audit = CliRunner().invoke(mcp_main, ["audit", "--help"]).stdout
    for fragment in ("one per line", "gap, reorder, fork, foreign", "--json", "No server and no server storage"):
        assert fragment in " ".join(audit.split()), fragment
    check = " ".join(CliRunner().invoke(mcp_main, ["check", "--help"]).stdout.split())
    assert "exactly as `serve` would load it" in check and "Nothing is served and nothing is written" in check


@pytest.mark.parametrize("command", PACK_COMMANDS, ids=" ".join)
def test_every_rimthan_pack_command_has_examples_and_exit_statuses(command: list[str]) -> None:
    result = CliRunner().invoke(pack_cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert re.search(r"Examples:\n +rimthan-pack ", text) and "Exit status:" in text
    assert "  1  " in text and "  2  " in text and "Options:" in text


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["serve", "--transport", "carrier-pigeon"], "Invalid value for '--transport'"),
        (["check"], "Missing option '--release'"),
        (["audit"], "Missing argument 'LOG'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["serve", "--port", "many"], "Invalid value for '--port'"),
        # these once started the server, which then stopped with internal_error
        (["serve", "--transport", "http", "--port", "70000"], "Invalid value for '--port'"),
        (["serve", "--refresh-interval", "-1"], "--refresh-interval -1: give a number of seconds above 0"),
        (["serve", "--refresh-interval", "nan"], "--refresh-interval nan: give a number of seconds above 0"),
        (["serve", "--stale-after", "0"], "--stale-after 0: give a number of seconds above 0"),
        (["serve", "--stale-after", "nan"], "--stale-after nan: give a number of seconds above 0"),
        # where it could never apply (no registry to lose, or no health check: stdio), it would silently do nothing
        (["serve", "--stale-after", "60"], "it needs --releases-from and --transport http"),
        (["serve", "--transport", "http", "--stale-after", "60"], "it needs --releases-from and --transport http"),
        # a followed registry is synced at every refresh: not many times a second
        (["serve", "--releases-from", "oci://127.0.0.1:1/x", "--refresh-interval", "0.5"], "give at least 1 second"),
        # HTTP options under stdio were silently ignored
        (["serve", "--http-sessions"], "--http-sessions applies to --transport http only"),
        (["serve", "--allowed-host", "rimthan.example"], "--allowed-host applies to --transport http only"),
        (["serve", "--forwarded-allow-ips", "10.0.0.5"], "--forwarded-allow-ips applies to --transport http only"),
        (["serve", "--transport", "stdio", "--port", "9000"], "--port applies to --transport http only"),
        (["serve", "--host", "::1"], "--host applies to --transport http only"),
        # --release with --releases-from pulled into ./releases, then refused for the empty directory
        (["serve", "--release", "r", "--releases-from", "oci://127.0.0.1:1/x"], "give one of them"),
    ],
)
def test_usage_mistakes_are_one_line_with_the_help_to_read(args: list[str], expect: str, tmp_path: Path) -> None:
    done = _mcp(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    said = refusal(done.stderr)
    assert said.error.startswith("error: usage: ") and expect in said.error and said.next.endswith("--help'")


def test_no_release_says_how_to_build_or_pull_one_into_the_directory_it_names(tmp_path: Path) -> None:
    """A bridge project or an operator's directory has no Makefile of ours: the words say how to build or pull a
    release with rimthan-pack into the very directory, and name `make demo` only as what a checkout runs."""
    default = refusal(_mcp("serve", cwd=tmp_path).stderr)
    assert "rimthan-pack pull oci://HOST/REPO:TAG --trust KEYS --out releases`" in default.error, default
    assert "docs/host-kit.md" in default.error and "in a Rimthan checkout, `make demo`" in default.error, default
    other = refusal(_mcp("serve", "--releases-dir", "built", cwd=tmp_path).stderr)
    assert "--out built`" in other.error, other


def test_refusals_are_one_line_saying_what_to_do_next(world: ServerWorld, tmp_path: Path) -> None:
    cases = {
        "no releases": (
            ["serve"],
            "release_not_found",
            ["build a release into it with `rimthan-pack build SOURCE --key KEY --out releases`", "check the path"],
        ),
        "bad trust": (
            ["check", "--release", str(world.built["1.2.0"]), "--trust", str(tmp_path / "none")],
            "trust_store_invalid",
            ["next: point --trust at a directory of *.pub files"],
        ),
        "unknown key": (
            ["keys", "retire", "ck-0000000000000000", "--state-dir", str(tmp_path / "s")],
            "key_invalid",
            ["checkpoint-keys.json", "next: pass the --checkpoint-keys"],
        ),
        "audit without keys": (
            ["audit", str(tmp_path / "run.log"), "--state-dir", str(tmp_path / "s")],
            "key_invalid",
            ["checkpoint-keys.json"],
        ),
    }
    for name, (args, code, fragments) in cases.items():
        done = _mcp(*args, cwd=tmp_path, env={**server_env(), "RIMTHAN_STATE_DIR": str(tmp_path / "s")})
        assert done.returncode == 1, (name, done.stderr)
        said = refusal(done.stderr)
        assert said.code == code, (name, said)
        assert all(fragment in f"{said.error}\nnext: {said.next}" for fragment in fragments), (name, said)
    with http_server(serve_args(world, world.built["1.2.0"], state_dir=tmp_path / "a")) as server:
        port = server.url.split(":")[2].split("/")[0]
        again = serve_args(world, world.built["1.2.0"], state_dir=tmp_path / "b")[2:]  # after -m rimthan_workflow_mcp
        taken = _mcp(*again, "--transport", "http", "--port", port)
    assert taken.returncode == 1
    said = refusal(taken.stderr, allow_before=True)
    assert said.code == "io_error" and said.next.startswith("choose a free --port")
