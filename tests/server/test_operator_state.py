"""An operator's keys, floors and state directory, lived through the installed ``rimthan-mcp``.

Real servers and real CLI processes over a real state directory: rotating and
retiring checkpoint keys keeps finished runs auditable, activation floors stay
within their deployment, and the key/state edge cases answer with one line
that names the file and the next step.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.harness import RunResult, WorkflowHarness, client_caller
from rimthan_host.runlog import RunLog
from rimthan_workflow_mcp.floor import ActivationFloor, deployment_of
from support.processes import http_server_process
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, ServerWorld, build_world, http_client_for, scenario, server_env
from support.small_disk import read_only_view

HTTP = ("--transport", "http", "--port", "0")
FAILS_ONCE = frozenset({"decision-critic@1.1.0"})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("operator-state"))


def _mcp(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIMTHAN_MCP, *map(str, args)], capture_output=True, text=True, timeout=120, env=env or server_env()
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert done.returncode == 1 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[1].startswith("next: "), done.stderr
    assert done.stdout == "", done.stdout  # a refusal prints nothing before it: no half an answer
    return " ".join(lines)


def _serve(world: ServerWorld, releases: Path, state: Path, *extra: str, trust: Path | None = None) -> Any:
    args = ["serve", "--releases-dir", str(releases), "--trust", str(trust or world.trust), "--state-dir", str(state)]
    return http_server_process([RIMTHAN_MCP, *args, *extra, *HTTP], env=server_env())


def _floors(state: Path) -> dict[str, Any]:
    floors: dict[str, Any] = json.loads((state / "activation-floor.json").read_text("utf-8"))["catalogues"]
    return floors


def _refused(releases: Path, trust: Path, state: Path) -> tuple[str, list[dict[str, Any]]]:
    """A default serve that must refuse to start: its error line, and the floor it logged as inherited."""
    done = _mcp("serve", "--releases-dir", releases, "--trust", trust, "--state-dir", state)
    logged = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return _one_line(done), [r for r in logged if r["event"] == "activation floor inherited"]


# --------------------------------------------------------------------------- audit across key rotation


def test_a_finished_run_stays_auditable_after_rotate_and_retire(world: ServerWorld, tmp_path: Path) -> None:
    releases, state, project = tmp_path / "releases", tmp_path / "state", tmp_path / "project"
    world.publish("1.3.0", releases)
    log = RunLog(project, "run-before-rotation")
    with _serve(world, releases, state) as server:

        async def finish() -> tuple[RunResult, WorkflowHarness]:
            async with http_client_for(server.url) as client:
                once = scenario(fail_once=FAILS_ONCE)  # the critic fails the first round; the host repairs
                run = WorkflowHarness(client_caller(client), once, project_dir=project, run_log=log)
                return await run.run(await run.start("research", initial_version="1.3.0")), run

        final, run = anyio.run(finish)
    assert final.status == "completed"
    old_key = json.loads((state / "checkpoint-keys.json").read_text("utf-8"))["signing_key_id"]

    assert _mcp("keys", "rotate", "--state-dir", state).returncode == 0
    retired = _mcp("keys", "retire", old_key, "--state-dir", state)
    assert retired.returncode == 0 and "for `rimthan-mcp audit` only" in retired.stdout
    listed = _mcp("keys", "list", "--state-dir", state).stdout
    assert f"{old_key}\tretired (archived for audit)" in listed

    audited = _mcp("audit", log.log_path, "--state-dir", state)
    assert audited.returncode == 0, audited.stderr
    assert f"key {old_key} is retired: it no longer verifies live calls" in audited.stdout
    assert "1 failed validation round(s): " in audited.stdout and "ended at step " in audited.stdout
    as_json = json.loads(_mcp("audit", log.log_path, "--state-dir", state, "--json").stdout)
    assert as_json["ok"] is True and as_json["retired_keys"] == [old_key]
    assert len(as_json["final"]["failed_validation_rounds"]) == 1 and as_json["final"]["migrated"] is False

    with _serve(world, releases, state) as server:  # a live call with the retired key is refused

        async def resume() -> Any:
            async with http_client_for(server.url) as client:
                return await client.call_tool(
                    "rimthan.continue_workflow",
                    {"checkpoint": log.tokens()[-1], "confirmed_state": run.state.projection()},
                )

        refused = anyio.run(resume)
    assert refused.is_error and refused.structured_content["error"]["code"] == "checkpoint_key_unknown"
    assert "retired" in refused.structured_content["error"]["message"]


def test_auditing_with_a_replica_s_state_dir_that_holds_no_keys_names_the_keys_it_ran_with(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A replica started with ``--checkpoint-keys FILE`` (as fleet.md says) keeps no key file in its state
    directory. Auditing with that ``--state-dir`` said to ``create new keys with `rimthan-mcp keys rotate```,
    which verify none of the run's tokens; it now says to pass the keys the server ran with."""
    releases, state, project, keys = tmp_path / "releases", tmp_path / "state", tmp_path / "p", tmp_path / "ck.json"
    world.publish("1.3.0", releases)
    assert _mcp("keys", "rotate", "--checkpoint-keys", keys).returncode == 0
    log = RunLog(project, "fleet-run")
    with _serve(world, releases, state, "--checkpoint-keys", str(keys)) as server:

        async def start() -> None:
            async with http_client_for(server.url) as client:
                run = WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=log)
                await run.start("research", initial_version="1.3.0")

        anyio.run(start)
    said = _one_line(_mcp("audit", log.log_path, "--state-dir", state))
    assert f"error: key_invalid: {state / 'checkpoint-keys.json'}: " in said, said
    assert "--checkpoint-keys" in said and "keys rotate" not in said, said
    assert _mcp("audit", log.log_path, "--checkpoint-keys", keys).returncode == 0


# --------------------------------------------------------------------------- floors per deployment


def test_floors_are_per_deployment_and_the_refusal_names_the_file_and_the_way_down(
    world: ServerWorld, tmp_path: Path
) -> None:
    state = tmp_path / "shared-state"  # what every server of one user shares by default
    ours, unrelated = tmp_path / "ours", tmp_path / "unrelated"
    world.publish("1.3.0", ours)
    with _serve(world, ours, state) as server:
        assert "activation floor" in server.stderr()
    other = make_keypair(tmp_path / "keys", "someone-else")
    build_release(packaged_source("1.2.0"), unrelated, [other])
    other_trust = trust_dir(tmp_path / "other-trust", other)
    with _serve(world, unrelated, state, trust=other_trust) as server:  # another trust store: its own floor
        assert "release research-decision@1.2.0 " in server.stderr()
        assert "activation floor inherited" not in server.stderr()
    explicit = _mcp("check", "--release", world.built["1.2.0"], "--trust", world.trust, "--state-dir", state)
    assert explicit.returncode == 1  # same trust key, same catalogue: a directory elsewhere inherits ours
    assert "for an earlier deployment sharing a trust key with this one" in explicit.stderr

    shutil.rmtree(ours / "research-decision-1.3.0")
    world.publish("1.2.0", ours)
    args = ("serve", "--releases-dir", ours, "--trust", world.trust, "--state-dir", state)
    line = _one_line(_mcp(*args))
    assert line.startswith("error: rollback_refused: ")
    assert f"below the activation floor 1.3.0 recorded in {state / 'activation-floor.json'}" in line
    assert "for this deployment (trust " in line and str(ours.resolve()) in line and "--lower-floor" in line

    with _serve(world, ours, state, "--lower-floor") as server:
        assert "release research-decision@1.2.0 " in server.stderr()
    floors = _floors(state)
    assert sorted(e["version"] for e in floors.values()) == ["1.2.0", "1.2.0"]
    assert all(name.startswith("research-decision@") and e["deployment"] for name, e in floors.items())
    assert sorted(e["trust_keys"] for e in floors.values()) == sorted([[world.key.key_id], [other.key_id]])


def test_adding_a_co_signer_key_to_the_trust_store_keeps_the_floor(world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    world.publish("1.2.0", releases)
    world.publish("1.3.0", releases)
    with _serve(world, releases, state):
        pass  # floor 1.3.0 for trust {release-engineer}
    floors = _floors(state)  # as a server before trust_keys was recorded wrote it: the keys only in the label
    for entry in floors.values():
        del entry["trust_keys"], entry["mode"]
    (state / "activation-floor.json").write_text(
        json.dumps({"format": "rimthan.activation-floor/1", "catalogues": floors})
    )
    shutil.rmtree(releases / "research-decision-1.3.0")
    co_signer = make_keypair(tmp_path / "keys", "co-signer")
    trust = trust_dir(tmp_path / "trust", world.key, co_signer)  # keys/README "Add a key", step 2

    line, inherited = _refused(releases, trust, state)
    assert line.startswith("error: rollback_refused: ") and "below the activation floor 1.3.0" in line, line
    assert f"for an earlier deployment sharing a trust key with this one (trust {world.key.key_id}; releases " in line
    assert [(r["floor"], r["from_deployment"]) for r in inherited] == [
        ("1.3.0", next(iter(floors.values()))["deployment"])
    ]

    with _serve(world, releases, state, "--lower-floor", trust=trust) as server:  # a deliberate rollback still works
        assert "release research-decision@1.2.0 " in server.stderr()
    assert [(e["version"], e["trust_keys"]) for e in _floors(state).values()] == [
        ("1.2.0", sorted([world.key.key_id, co_signer.key_id]))
    ]  # the earlier deployment's 1.3.0 gave way with it
    with _serve(world, releases, state) as server:  # the earlier trust store inherits the lowered floor
        assert "release research-decision@1.2.0 " in server.stderr()


def test_an_inherited_floor_at_the_active_version_starts_on_a_read_only_state_directory(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Copying an inherited floor to a new deployment raises nothing: a state directory it cannot be written
    to (a read-only mount) still serves the release at that floor, with a warning, as before floors were
    inherited; a rollback there is still refused by the earlier deployment's floor."""
    releases, state = tmp_path / "releases", tmp_path / "state"
    world.publish("1.2.0", releases)
    world.publish("1.3.0", releases)
    with _serve(world, releases, state):
        pass  # floor 1.3.0 for trust {release-engineer}
    before = _floors(state)
    trust = trust_dir(tmp_path / "trust", world.key, make_keypair(tmp_path / "keys", "co-signer"))
    with read_only_view(state, tmp_path / "view") as view:
        with _serve(world, releases, view, trust=trust) as server:
            assert "release research-decision@1.3.0 " in server.stderr()
            server.wait_for("inherited activation floor not recorded for this deployment")
        shutil.rmtree(releases / "research-decision-1.3.0")
        line, _ = _refused(releases, trust, view)
        assert line.startswith("error: rollback_refused: ") and "below the activation floor 1.3.0" in line, line
    assert _floors(state) == before


def test_a_re_pointed_or_moved_releases_directory_keeps_the_floor(world: ServerWorld, tmp_path: Path) -> None:
    blue, green, link, state = tmp_path / "blue", tmp_path / "green", tmp_path / "releases", tmp_path / "state"
    world.publish("1.3.0", blue)
    world.publish("1.2.0", green)
    link.symlink_to(blue)
    with _serve(world, link, state) as server:
        assert "release research-decision@1.3.0 " in server.stderr()
    link.unlink()
    link.symlink_to(green)  # blue/green: the symlink now points at a directory holding only 1.2.0
    moved = tmp_path / "mounted-elsewhere"
    shutil.copytree(green, moved)  # the same volume mounted at another path
    for releases in (link, moved):
        line, inherited = _refused(releases, world.trust, state)
        assert line.startswith("error: rollback_refused: ") and "below the activation floor 1.3.0" in line, line
        assert f"releases {blue.resolve()})" in line and [r["floor"] for r in inherited] == ["1.3.0"]
    assert [e["version"] for e in _floors(state).values()] == ["1.3.0"]  # a refusal records nothing


def test_an_entry_whose_label_does_not_hash_to_its_id_binds_only_itself(world: ServerWorld, tmp_path: Path) -> None:
    """Keys are read from a pre-trust_keys label only when the label is the one its deployment id was made from."""
    path, key = tmp_path / "activation-floor.json", world.key.key_id
    honest, forged = deployment_of([key], tmp_path / "a"), deployment_of(["f" * 64], tmp_path / "b")
    entry = {"version": "1.3.0", "manifest_digest": "sha256:" + "0" * 64, "activated_at": 1}
    for deployment in (honest, forged):
        label = honest.label.replace("/a", "/b") if deployment is forged else honest.label  # b's id, a's keys
        catalogues = {f"research-decision@{deployment.id}": {**entry, "deployment": label}}
        path.write_text(json.dumps({"format": "rimthan.activation-floor/1", "catalogues": catalogues}))
        floor = ActivationFloor(path, deployment_of([key, "e" * 64], tmp_path / "c"))
        found = floor.get("research-decision")
        assert (found.version if found else None) == ("1.3.0" if deployment is honest else None)


def test_check_answers_for_the_floor_the_default_serve_of_the_releases_directory_keeps(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A planned rollback pre-flighted with check: check must not say ok to what serve then refuses."""
    releases, state = tmp_path / "releases", tmp_path / "state"
    older = world.publish("1.2.0", releases)
    world.publish("1.3.0", releases)
    with _serve(world, releases, state):
        pass  # the default serve activated 1.3.0 and recorded its floor
    shutil.rmtree(releases / "research-decision-1.3.0")
    line = _one_line(_mcp("check", "--release", older, "--trust", world.trust, "--state-dir", state))
    assert line.startswith("error: rollback_refused: "), line
    assert f"`serve --releases-dir {releases}` would refuse it" in line and "below the activation floor 1.3.0" in line
    served = _one_line(_mcp("serve", "--releases-dir", releases, "--trust", world.trust, "--state-dir", state))
    assert "rollback_refused" in served  # what check foretold


def test_the_explicit_two_release_mode_has_its_own_floor(world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    older, newer = world.publish("1.2.0", releases), world.publish("1.3.0", releases)
    with _serve(world, releases, state) as server:  # the default serve: 1.3.0 active, floor 1.3.0 recorded
        assert "release research-decision@1.3.0 " in server.stderr()
    explicit = ("--release", older, "--migration-target", newer, "--trust", world.trust, "--state-dir", state)
    checked = _mcp("check", *explicit)
    assert checked.returncode == 0 and checked.stdout.startswith("ok research-decision@1.2.0 "), checked.stderr
    with http_server_process([RIMTHAN_MCP, "serve", *map(str, explicit), *HTTP], env=server_env()) as server:
        assert "release research-decision@1.2.0 " in server.stderr()  # the help's own example is not refused
        assert "migration target research-decision@1.3.0 " in server.stderr()

    with http_server_process([RIMTHAN_MCP, "serve", "--release", str(newer), *map(str, explicit[4:]), *HTTP]):
        pass  # explicit mode now activates 1.3.0: its own floor rises to 1.3.0
    line = _one_line(_mcp("serve", *explicit))  # a real rollback within the explicit mode is still refused
    assert line.startswith("error: rollback_refused: ") and "below the activation floor 1.3.0" in line
    assert "explicit --release mode" in line and "--lower-floor" in line
    assert _mcp("check", *explicit).returncode == 1
    floors = json.loads((state / "activation-floor.json").read_text("utf-8"))["catalogues"]
    assert sorted(("explicit --release mode" in e["deployment"], e["version"]) for e in floors.values()) == [
        (False, "1.3.0"),
        (True, "1.3.0"),
    ]


# --------------------------------------------------------------------------- keys and state edge cases


def test_keys_on_a_fresh_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "fresh"
    listed = _mcp("keys", "list", "--state-dir", state)
    assert listed.returncode == 0 and "no checkpoint keys yet" in listed.stdout, listed.stderr
    created = _mcp("keys", "rotate", "--state-dir", state)
    assert created.returncode == 0 and created.stdout.startswith(f"created {state / 'checkpoint-keys.json'}")
    keys = _mcp("keys", "list", "--state-dir", state).stdout.splitlines()
    assert len(keys) == 2 and keys[1].endswith("\tsigning")  # no orphan verify-only key

    unknown = _one_line(_mcp("keys", "retire", "ck-0000000000000000", "--state-dir", state))
    assert unknown.startswith(f"error: key_invalid: {state / 'checkpoint-keys.json'}: ")
    assert "ck-0000000000000000" in unknown and "keys list" in unknown


_KEY = base64.b64encode(b"k" * 32).decode()


def _key_file(**members: Any) -> dict[str, Any]:
    """A key file as ``keys rotate`` writes it (signing ck-new, ck-old verify-only), with ``members`` replaced."""
    return {
        "format": "rimthan.checkpoint-keys/1",
        "signing_key_id": "ck-new",
        "keys": [{"id": "ck-new", "key": _KEY}, {"id": "ck-old", "key": _KEY}],
        "retired": [],
        "archived": [],
        **members,
    }


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(_key_file(keys=[{"id": "ck-new", "key": _KEY}, {"id": 7, "key": _KEY}])),
        json.dumps(_key_file(retired="ck-old")),  # read as the ids "c", "k", "-", ...: ck-old stayed live
        json.dumps(_key_file(retired=["ck-new"])),  # the server would sign every token with a key it refuses
        json.dumps(_key_file(retired=["ck-old"])),  # live and retired: which one holds?
        json.dumps(_key_file()).replace(
            '"signing_key_id": "ck-new"', '"signing_key_id": "ck-new", "signing_key_id": "ck-old"'
        ),
        json.dumps(_key_file(retired=[1e300])).replace("1e+300", "1e999"),
        json.dumps(_key_file(archived=[{"id": "ck-gone", "key": ""}])),  # audit would verify with an empty key
        json.dumps(_key_file(keys=[{"id": "ck-new", "key": _KEY}, {"id": "ck-\nforged\tsigning", "key": _KEY}])),
        "[]",
        "[" * 100_000 + "]" * 100_000,  # deeper than the stack: a RecursionError traceback
    ],
    ids=[
        "id-a-number",
        "retired-a-string",
        "signing-key-retired",
        "live-key-retired",
        "signing-key-id-twice",
        "retired-overflows",
        "archived-key-empty",
        "id-with-newline",
        "array",
        "nested-past-the-stack",
    ],
)
def test_a_key_file_not_as_keys_writes_it_is_refused_in_one_line(tmp_path: Path, content: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "checkpoint-keys.json").write_text(content, "utf-8")
    for command in (["list"], ["rotate"], ["retire", "ck-old"]):
        line = _one_line(_mcp("keys", *command, "--state-dir", state))
        assert line.startswith(f"error: key_invalid: {state / 'checkpoint-keys.json'}: cannot read checkpoint keys: ")
        assert "restore the key file" in line
        assert (state / "checkpoint-keys.json").read_text("utf-8") == content  # never rewritten


_NOT_AN_ENTRY = "is not an object of exactly an id and a key"


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (_key_file(keys=[{"id": "ck-new", "key": _KEY}, 7]), f"keys[1] {_NOT_AN_ENTRY}"),
        (_key_file(archived=["ck-gone"]), f"archived[0] {_NOT_AN_ENTRY}"),
        (_key_file(keys=[{"id": "ck-new", "key": _KEY, "note": "x"}]), f"keys[0] {_NOT_AN_ENTRY}"),
        (_key_file(retierd=["ck-old"]), "unknown member(s) 'retierd'"),  # ck-old stayed live
        (_key_file(keys=[{"id": "ck-new", "key": _KEY.rstrip("=")}]), "keys: key 'ck-new' is not base64 (Incorrect"),
    ],
    ids=["entry-a-number", "archived-entry-a-string", "entry-member-unknown", "member-misspelt", "key-unpadded"],
)
def test_a_key_file_of_another_shape_is_refused_in_its_own_words(
    tmp_path: Path, document: dict[str, Any], reason: str
) -> None:
    """Was "'int' object is not subscriptable" (Python's words), or a misspelt member read as absent."""
    state = tmp_path / "state"
    state.mkdir()
    content = json.dumps(document)
    (state / "checkpoint-keys.json").write_text(content, "utf-8")
    for command in (["list"], ["rotate"]):
        line = _one_line(_mcp("keys", *command, "--state-dir", state))
        assert line.startswith(f"error: key_invalid: {state / 'checkpoint-keys.json'}: cannot read checkpoint keys: "
                               f"{reason}"), line  # fmt: skip
        assert (state / "checkpoint-keys.json").read_text("utf-8") == content  # never rewritten


def test_a_state_dir_that_is_a_file_is_named_as_such(world: ServerWorld, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("oops\n", encoding="utf-8")
    for args in (
        ("keys", "list", "--state-dir", not_a_dir),
        ("keys", "rotate", "--state-dir", not_a_dir),
        ("serve", "--release", world.built["1.3.0"], "--trust", world.trust, "--state-dir", not_a_dir),
    ):
        line = _one_line(_mcp(*args))
        assert line.startswith(f"error: io_error: {not_a_dir}: the state directory is a file"), line
        assert "give --state-dir" in line


def test_check_honours_rimthan_trust_as_serve_does(world: ServerWorld, tmp_path: Path) -> None:
    env = {**server_env(), "RIMTHAN_TRUST": str(world.trust)}
    done = _mcp("check", "--release", world.built["1.3.0"], env=env)
    assert done.returncode == 0 and done.stdout.startswith("ok research-decision@1.3.0 "), done.stderr


def test_a_periodic_refresh_logs_only_changes_at_info(world: ServerWorld, tmp_path: Path) -> None:
    releases, state = tmp_path / "releases", tmp_path / "state"
    world.publish("1.2.0", releases)
    extra = ("--refresh-interval", "0.2", "--log-level", "debug")
    with _serve(world, releases, state, *extra) as server:
        mark = len(server.lines)
        for _ in range(3):  # three quiet rescans
            server.wait_for(r'"level": "debug".*"event": "refresh done"', after=mark)
            mark = len(server.lines)
        world.publish("1.3.0", releases)
        server.wait_for(r'"level": "info".*"event": "refresh done".*"outcome": "activated"', after=mark)
        said = server.stderr()
    quiet = [line for line in said.splitlines() if '"refresh done"' in line and '"unchanged"' in line]
    assert quiet and all('"level": "debug"' in line for line in quiet)


def test_a_checkpoint_key_file_others_can_read_or_write_is_named_with_the_fix(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Its HMAC keys sign checkpoints: reading them forges as well as writing them. A file 0644 was loaded without
    a word, and a writable one was warned of in a line with no failure code, in another shape than the packager's."""
    state, releases = tmp_path / "state", tmp_path / "releases"
    world.publish("1.3.0", releases)
    key_file = state / "checkpoint-keys.json"
    assert _mcp("keys", "rotate", "--state-dir", state).returncode == 0
    cases = (
        (0o644, "readable by group and others", "read"),
        (0o666, "readable and writable by group and others", "read or write"),
        (0o620, "writable by group", "write"),
        (0o600, None, ""),
    )
    for mode, opened, verb in cases:
        key_file.chmod(mode)
        warning = f"{key_file}: checkpoint key file is {opened} (mode {mode:04o}): whoever can {verb} it can forge"
        fix = f"chmod 600 {key_file}  (the server writes it 0600)"
        _assert_warned(world, releases, state, [f"{warning} checkpoints", fix] if opened else [])


def test_a_state_directory_others_can_write_is_named_with_the_fix(world: ServerWorld, tmp_path: Path) -> None:
    """Whoever can write the directory can rename another key file over the one there, 0600 or not, and forge
    checkpoints: a state directory 0777 was loaded without a word. A sticky one (as /tmp) lets only the owner
    replace the file, and one only its owner writes is said nothing of."""
    state, releases = tmp_path / "state", tmp_path / "releases"
    world.publish("1.3.0", releases)
    assert _mcp("keys", "rotate", "--state-dir", state).returncode == 0
    for mode, opened in ((0o777, "group and others"), (0o720, "group"), (0o1777, None), (0o755, None)):
        state.chmod(mode)
        warning = f"{state}: the directory holding the checkpoint key file is writable by {opened} (mode {mode:04o})"
        fix = f"chmod 700 {state}  (only the server's user writes its state directory)"
        replace = "whoever can write it can replace the key file, whatever its mode, and forge checkpoints"
        _assert_warned(world, releases, state, [f"{warning}: {replace}", fix] if opened else [])


def _assert_warned(world: ServerWorld, releases: Path, state: Path, expected: list[str]) -> None:
    """`keys list` and a `serve` start on ``state`` each say exactly one ``key_file_exposed`` warning: ``expected``
    (its file and message, then its next step), or none."""
    listed = _mcp("keys", "list", "--state-dir", state)
    with _serve(world, releases, state) as server:
        said = server.stderr()
    for stderr in (listed.stderr, said):
        lines = stderr.splitlines()
        warned = [line for i, line in enumerate(lines) if "key_file_exposed" in (line + lines[i - 1] * (i > 0))]
        said = [f"warning: key_file_exposed: {expected[0]}", f"next: {expected[1]}"] if expected else []
        assert warned == said, stderr
