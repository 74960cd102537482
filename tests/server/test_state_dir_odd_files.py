"""An operator's state directory and key file of the wrong kind, through the installed ``rimthan-mcp``.

A state directory that is a file, or an activation floor that is a FIFO, is
refused in one line at start: never read as "no floor recorded" (which would
skip the rollback check) and never waited on. Each command runs with stdin
closed and a timeout, so a command blocked on a FIFO fails the test. A
symlinked checkpoint key file is rotated at its target, never replaced.

A state directory the server's user may not enter, or a key file it may not read (a volume mounted with another
owner, a `chmod` gone wrong), is one ``io_error`` line naming the path and the access to give: never ``usage``
with ``--help`` (click's own readability check ran first), and never ``key_invalid`` advising ``keys rotate``,
which would have the operator make new keys and lose every run the old ones signed. Root passes every
permission check, so as root these commands run with ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH`` dropped
(``setpriv``): root then meets the modes as their owner, as a service user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import http_server_process
from support.refusals import Refusal, refusal
from support.releases import build_release, make_keypair, scaffold_source, trust_dir
from support.servers import server_env

RIMTHAN_MCP = str(Path(sys.executable).parent / "rimthan-mcp")
HANG_SECONDS = 30  # far above any of these refusals; a command still running then is waiting on a FIFO


def _mcp(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIMTHAN_MCP, *map(str, args)], capture_output=True, text=True, timeout=HANG_SECONDS, stdin=subprocess.DEVNULL
    )


def _refused(done: subprocess.CompletedProcess[str]) -> Refusal:
    assert done.returncode == 1, (done.stdout, done.stderr)
    return refusal(done.stderr, allow_before=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A release and the trust directory it verifies against."""
    root = tmp_path_factory.mktemp("state-odd")
    signer = make_keypair(root / "keys", "ops")
    release = build_release(scaffold_source(root / "demo"), root / "releases", [signer])
    return release, trust_dir(root / "trust", signer)


def test_check_refuses_a_state_dir_that_is_a_file(served: tuple[Path, Path], tmp_path: Path) -> None:
    release, trust = served
    state = tmp_path / "state"
    state.write_text("not a directory\n", encoding="utf-8")
    found = _refused(_mcp("check", "--release", release, "--trust", trust, "--state-dir", state))
    assert found.code == "io_error" and "the state directory is a file" in found.error


@pytest.mark.parametrize("command", ["check", "serve"])
def test_an_activation_floor_that_is_a_fifo_is_refused_never_waited_on(
    command: str, served: tuple[Path, Path], tmp_path: Path
) -> None:
    release, trust = served
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "activation-floor.json")
    found = _refused(_mcp(command, "--release", release, "--trust", trust, "--state-dir", state))
    assert found.code == "rollback_refused" and "not a regular file" in found.error
    assert (state / "activation-floor.json").is_fifo()  # left as it was


def test_a_schema_check_cache_that_is_a_fifo_is_never_waited_on(served: tuple[Path, Path], tmp_path: Path) -> None:
    """Found by fuzzing the state directory: ``serve`` blocked opening schema-checks.json, a FIFO, for ever.

    The cache only saves checks, so a FIFO there holds no passes: the release is checked in full and served.
    """
    release, trust = served
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "schema-checks.json")
    done = _mcp("serve", "--release", release, "--trust", trust, "--state-dir", state)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr  # stdin closed: served, then ended
    assert "transport stdio" in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_an_activation_floor_link_that_leads_nowhere_is_refused_never_read_as_no_floor(
    command: str, link: str, served: tuple[Path, Path], tmp_path: Path
) -> None:
    """A floor linked into a volume that is not mounted, or a link loop: once taken for "no floor recorded",
    which skipped the rollback check and let serve write a fresh floor over the link."""
    release, trust = served
    state = tmp_path / "state"
    state.mkdir()
    floor = state / "activation-floor.json"
    target = Path(floor.name) if link == "loop" else tmp_path / "unmounted" / floor.name
    floor.symlink_to(target)
    found = _refused(_mcp(command, "--release", release, "--trust", trust, "--state-dir", state))
    reason = "Too many levels of symbolic links" if link == "loop" else "No such file or directory"
    assert found.code == "rollback_refused" and f"the activation floor file is unreadable ({reason})" in found.error
    assert floor.is_symlink() and floor.readlink() == target  # left as it was


def test_keys_rotate_through_a_symlink_writes_its_target(tmp_path: Path) -> None:
    """Replicas share the target: rotating used to replace the link with a new file they never read."""
    shared = tmp_path / "shared-keys.json"
    assert _mcp("keys", "rotate", "--checkpoint-keys", shared).returncode == 0
    link = tmp_path / "checkpoint-keys.json"
    link.symlink_to(shared.name)
    assert _mcp("keys", "rotate", "--checkpoint-keys", link).returncode == 0
    assert link.is_symlink() and link.readlink() == Path(shared.name)
    listed = _mcp("keys", "list", "--checkpoint-keys", shared)
    assert listed.returncode == 0 and "signing" in listed.stdout and "verify-only" in listed.stdout, listed.stdout


def test_keys_rotate_on_a_symlink_loop_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    loop = tmp_path / "checkpoint-keys.json"
    loop.symlink_to(loop.name)
    found = _refused(_mcp("keys", "rotate", "--checkpoint-keys", loop))
    assert found.code == "io_error" and "Too many levels of symbolic links" in found.error
    assert loop.is_symlink() and loop.readlink() == Path(loop.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [loop.name]


def test_keys_list_through_a_link_that_leads_nowhere_is_refused_not_told_no_keys_yet(tmp_path: Path) -> None:
    """A key file linked into a secrets volume that is not mounted: once "no checkpoint keys yet" (exit 0),
    while serve, add and rotate refuse the same link."""
    link = tmp_path / "checkpoint-keys.json"
    link.symlink_to(tmp_path / "unmounted" / "keys.json")
    found = _refused(_mcp("keys", "list", "--checkpoint-keys", link))
    assert found.code == "key_invalid" and "No such file or directory" in found.error
    assert "no checkpoint keys yet" not in found.error


# --------------------------------------------------------------------------- permissions

_DROP = ["--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]


def _service_user_prefix() -> list[str]:
    """What runs a command as a service user would: as root, with root's permission override dropped."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to drop root's permission override")
    return [setpriv, *_DROP]


def _as_service_user(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [*_service_user_prefix(), RIMTHAN_MCP, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=HANG_SECONDS, stdin=subprocess.DEVNULL)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A state directory holding a key file; its modes are put back so the test's directory can be removed."""
    directory = tmp_path / "state"
    created = subprocess.run([RIMTHAN_MCP, "keys", "rotate", "--state-dir", str(directory)], capture_output=True)
    assert created.returncode == 0, created.stderr
    yield directory
    directory.chmod(0o700)
    (directory / "checkpoint-keys.json").chmod(0o600)


def _serve(served: tuple[Path, Path], state: Path) -> list[str]:
    release, trust = served
    return ["serve", "--release", str(release), "--trust", str(trust), "--state-dir", str(state)]


@pytest.mark.parametrize("command", ["serve", "keys", "check"])
def test_a_state_directory_the_server_may_not_enter_is_named_with_the_access_to_give(
    command: str, served: tuple[Path, Path], state: Path
) -> None:
    args = {
        "serve": [*_serve(served, state), "--transport", "http", "--port", "0"],
        "keys": ["keys", "list", "--state-dir", str(state)],
        "check": ["check", "--release", str(served[0]), "--trust", str(served[1]), "--state-dir", str(state)],
    }[command]
    state.chmod(0o000)
    found = _refused(_as_service_user(*args))
    assert found.code == "io_error", found
    assert found.error == f"error: io_error: {state}: this user may not enter the state directory (permission denied)"
    assert f"access to {state}" in found.next and "chmod 700" in found.next, found.next


def test_a_key_file_the_server_may_not_read_is_an_access_problem_not_keys_to_replace(
    served: tuple[Path, Path], state: Path
) -> None:
    keys = state / "checkpoint-keys.json"
    keys.chmod(0o000)
    found = _refused(_as_service_user(*_serve(served, state), "--transport", "http", "--port", "0"))
    assert found.error == f"error: io_error: {keys}: cannot read checkpoint keys: Permission denied"
    assert f"read and write access to {keys}" in found.next and "do not create new keys" in found.next
    assert "keys rotate" not in found.next


def test_a_state_directory_the_server_may_write_but_not_read_serves_and_says_what_to_give(
    served: tuple[Path, Path], state: Path
) -> None:
    """Mode 0300 (write and enter, not list): the floor was written and renamed into place, then syncing the
    directory (which opens it for reading) failed, and serve refused to start with "cannot record ... in the
    activation floor (Permission denied); it is not activated" and "make the state directory writable", though it
    was writable and the floor recorded. The release now activates; one warning names the directory and the
    access to give (a crash just after the rename could lose it while the directory cannot be synced)."""
    state.chmod(0o300)
    argv = [*_service_user_prefix(), RIMTHAN_MCP, *_serve(served, state), "--transport", "http", "--port", "0"]
    with http_server_process(argv, env=server_env()) as server:
        warned = server.wait_for(r'"state directory not synced"')
    record = json.loads(warned.string)
    assert record["level"] == "warning" and record["path"] == str(state), record
    assert "chmod 700" in record["next"], record
    state.chmod(0o700)
    floors = json.loads((state / "activation-floor.json").read_text("utf-8"))["catalogues"]
    assert [e["version"] for e in floors.values()] == ["0.1.0"], floors


@pytest.mark.parametrize("copied_from", ["keys", "archived"])
def test_two_key_ids_holding_the_same_key_are_refused(tmp_path: Path, copied_from: str) -> None:
    """A key copied under a second id: retiring one id (a leaked key) would leave it signing and verifying runs
    under the other."""
    keys = tmp_path / "checkpoint-keys.json"
    for command in (["rotate"], ["rotate"]):
        assert _mcp("keys", *command, "--checkpoint-keys", keys).returncode == 0
    document = json.loads(keys.read_text("utf-8"))
    if copied_from == "archived":
        old = next(entry["id"] for entry in document["keys"] if entry["id"] != document["signing_key_id"])
        assert _mcp("keys", "retire", old, "--checkpoint-keys", keys).returncode == 0
        document = json.loads(keys.read_text("utf-8"))
    source = document[copied_from][0]
    copy = next(entry for entry in document["keys"] if entry["id"] != source["id"])
    copy["key"] = source["key"]
    keys.write_text(json.dumps(document), "utf-8")
    for command in (["list"], ["rotate"]):
        found = _refused(_mcp("keys", *command, "--checkpoint-keys", keys))
        assert found.code == "key_invalid" and "hold the same key" in found.error, found
        assert source["id"] in found.next and copy["id"] in found.next, found
