"""A state directory a newer Rimthan version wrote, met by this one (a rollback, or a rolling upgrade's mixed fleet).

Each state file carries ``format`` ``<name>/<n>``; a newer version is simulated by a real state directory,
written by a real ``rimthan-mcp serve``, whose file is then given the next ``n`` and a member this version does
not know. The installed ``rimthan-mcp`` refuses the checkpoint keys (``key_invalid``) and the activation floor
(``rollback_refused``) saying a newer version wrote them, with a next step that neither advises new keys nor
moving the floor away (each loses what the newer version kept), and leaves every such file byte for byte as it
was: a cache (``schema-checks.json``, ``last-sync.json``) is read as empty and never rewritten in the older
format. A file of this version's own name that is damaged is still refused as damaged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_workflow_mcp.last_sync import LastSync
from support.refusals import Refusal, refusal
from support.releases import build_release, make_keypair, scaffold_source, trust_dir

RIMTHAN_MCP = str(Path(sys.executable).parent / "rimthan-mcp")
_NEWER = "it was written by a newer Rimthan version (format {0}/2; this version reads {0}/1)"
KEYS, FLOOR, CHECKS = "checkpoint-keys.json", "activation-floor.json", "schema-checks.json"


def _mcp(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIMTHAN_MCP, *map(str, args)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A releases directory holding one release, and the trust directory it verifies against."""
    root = tmp_path_factory.mktemp("newer-state")
    signer = make_keypair(root / "keys", "ops")
    release = build_release(scaffold_source(root / "demo"), root / "releases", [signer])
    return release.parent, trust_dir(root / "trust", signer)


def _serve(served: tuple[Path, Path], state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``serve`` over stdio with stdin closed: it loads, records its state, serves, and ends at EOF."""
    return _mcp("serve", "--releases-dir", served[0], "--trust", served[1], "--state-dir", state, *extra)


def _from_newer_version(served: tuple[Path, Path], state: Path, name: str) -> bytes:
    """A state directory a real serve wrote, its ``name`` then rewritten as the next format would be; its bytes."""
    assert _serve(served, state).returncode == 0
    document = json.loads((state / name).read_text("utf-8"))
    base, number = document["format"].rsplit("/", 1)
    document.update(format=f"{base}/{int(number) + 1}", written_by="a newer rimthan")
    (state / name).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return (state / name).read_bytes()


def _refused(done: subprocess.CompletedProcess[str]) -> Refusal:
    assert done.returncode == 1, (done.stdout, done.stderr)
    return refusal(done.stderr, allow_before=True)


def _refused_as_newer(done: subprocess.CompletedProcess[str], code: str, name: str, *, never: str) -> Refusal:
    """A refusal with ``code`` saying a newer version wrote ``name``, its next step to run that version (or
    restore the backup), and never ``never`` (what would lose the newer version's file)."""
    found = _refused(done)
    assert found.code == code and _NEWER.format(name) in found.error, found
    assert found.next.startswith("run the Rimthan version that wrote it") and never not in found.next, found
    return found


def test_checkpoint_keys_of_a_newer_version_are_refused_as_such_and_left_as_they_are(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    kept = _from_newer_version(served, state, KEYS)
    for done in (
        _serve(served, state),
        _mcp("keys", "list", "--state-dir", state),
        _mcp("keys", "rotate", "--state-dir", state),
    ):
        found = _refused_as_newer(done, "key_invalid", "rimthan.checkpoint-keys", never="keys rotate")
        assert found.error.endswith("cannot read checkpoint keys: " + _NEWER.format("rimthan.checkpoint-keys"))
        assert "do not create new keys" in found.next, found
    assert (state / KEYS).read_bytes() == kept


@pytest.mark.parametrize("extra", [(), ("--lower-floor",)])
def test_an_activation_floor_of_a_newer_version_is_refused_as_such_and_left_as_it_is(
    extra: tuple[str, ...], served: tuple[Path, Path], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    kept = _from_newer_version(served, state, FLOOR)
    release = next(served[0].iterdir())
    for done in (
        _serve(served, state, *extra),
        _mcp("check", "--release", release, "--trust", served[1], "--state-dir", state),
    ):
        found = _refused_as_newer(done, "rollback_refused", "rimthan.activation-floor", never="afresh")
        assert found.error.endswith(
            "the activation floor file is not read: " + _NEWER.format("rimthan.activation-floor")
        )
        assert "do not move it away" in found.next, found
    assert (state / FLOOR).read_bytes() == kept


def test_a_schema_check_cache_of_a_newer_version_is_never_rewritten(served: tuple[Path, Path], tmp_path: Path) -> None:
    """Only a cache: the server starts, checks every schema, says why it keeps nothing, and leaves the file."""
    state = tmp_path / "state"
    kept = _from_newer_version(served, state, CHECKS)
    done = _serve(served, state)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "transport stdio" in done.stderr, done.stderr
    assert f"warning: schema-check cache {state / CHECKS}: it was written by a newer Rimthan version" in done.stderr
    assert (state / CHECKS).read_bytes() == kept


def test_a_damaged_state_file_of_this_version_is_still_refused_as_damaged(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    """Only the same file name at a higher number reads as newer: another format is not this version's file."""
    state = tmp_path / "state"
    assert _serve(served, state).returncode == 0
    for name, other in ((KEYS, "rimthan.checkpoint-keys/0"), (FLOOR, "rimthan.other-file/2")):
        document = json.loads((state / name).read_text("utf-8"))
        (state / name).write_text(json.dumps({**document, "format": other}), encoding="utf-8")
        found = _refused(_serve(served, state))
        assert "newer" not in found.error and "format is not rimthan." in found.error, found
        (state / name).write_text(json.dumps(document), encoding="utf-8")


def test_a_last_sync_of_a_newer_version_is_read_as_none_and_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "last-sync.json"
    text = json.dumps({"format": "rimthan-last-sync/2", "registry": "r/x", "synced": {"at": "2026-12-01T00:00:00Z"}})
    path.write_text(text, encoding="utf-8")
    kept = LastSync(path, "r/x")
    assert kept.read() is None
    kept.write("2026-12-07T00:00:00Z")
    assert path.read_text("utf-8") == text
    ours = LastSync(tmp_path / "ours.json", "r/x")  # this version's own file is still written and read back
    ours.write("2026-12-07T00:00:00Z")
    assert LastSync(tmp_path / "ours.json", "r/x").read() is not None


def test_floor_members_a_newer_version_added_survive_this_versions_rewrite(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    """A newer version adds a member under the same format (as ``trust_keys`` once was added): this version,
    rolled back to, rewrites the file when it records a floor, and keeps what it does not know."""
    state = tmp_path / "state"
    assert _serve(served, state).returncode == 0
    document = json.loads((state / FLOOR).read_text("utf-8"))
    (own,) = document["catalogues"]
    document["catalogues"][own]["approved_by"] = {"ticket": "OPS-1"}
    document["catalogues"]["demo@0123456789abcdef"] = {**document["catalogues"][own], "pinned_by": ["ops"]}
    document["written_by"] = "a newer rimthan"
    (state / FLOOR).write_text(json.dumps(document, indent=2), encoding="utf-8")
    moved = tmp_path / "releases"  # another releases directory: another deployment, whose floor is recorded
    shutil.copytree(served[0], moved)
    assert _mcp("serve", "--releases-dir", moved, "--trust", served[1], "--state-dir", state).returncode == 0
    rewritten = json.loads((state / FLOOR).read_text("utf-8"))
    assert len(rewritten["catalogues"]) == 3, rewritten  # the new deployment's entry was recorded
    assert rewritten["written_by"] == "a newer rimthan", rewritten
    assert rewritten["catalogues"][own]["approved_by"] == {"ticket": "OPS-1"}, rewritten
    assert rewritten["catalogues"]["demo@0123456789abcdef"]["pinned_by"] == ["ops"], rewritten
