"""A refresh (SIGHUP) re-reads ``--trust``: keys/README's "rotate or remove a key, then refresh".

Real keys, real signed releases, the installed ``rimthan-mcp serve`` over HTTP, and ``kill -HUP``; for a
follower (``--releases-from``), a real registry.
"""

from __future__ import annotations

import json
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.harness import RunResult, WorkflowHarness, client_caller
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import load_trust, verify_release
from support.oci import push
from support.pack_cli import pack
from support.processes import HttpServer, http_server_process
from support.registry import LocalRegistry
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, flip_byte, harness, http_client_for, server_env


@dataclass
class Keys:
    old: KeyPair
    new: KeyPair
    built: dict[str, Path]  # "<version>-<signers>" -> a built release directory


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    root = tmp_path_factory.mktemp("trust-refresh")
    old, new = make_keypair(root / "keys", "old"), make_keypair(root / "keys", "new")
    builds = {"1.2.0-old": ("1.2.0", [old]), "1.3.0-old": ("1.3.0", [old]), "1.3.0-new": ("1.3.0", [new])}
    builds["1.3.0-both"] = ("1.3.0", [old, new])
    builds["1.2.0-new"] = ("1.2.0", [new])
    builds["1.2.0-both"] = ("1.2.0", [old, new])
    built = {name: build_release(packaged_source(v), root / name, signers) for name, (v, signers) in builds.items()}
    return Keys(old=old, new=new, built=built)


def _publish(keys: Keys, name: str, releases: Path) -> None:
    source = keys.built[name]
    shutil.copytree(source, releases / source.name)


def _serve(tmp_path: Path, trust: Path, *extra: str) -> Any:
    args = ["serve", "--releases-dir", str(tmp_path / "releases"), "--trust", str(trust)]
    args += ["--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0", *extra]
    return http_server_process([RIMTHAN_MCP, *args], env=server_env())


def _refresh(server: HttpServer) -> dict[str, Any]:
    """SIGHUP, then the ``refresh done`` record it logged (and every log line since, under ``"lines"``)."""
    seen = len(server.lines)
    server.process.send_signal(signal.SIGHUP)
    server.wait_for('"refresh done"', after=seen)
    records = [json.loads(line) for line in server.lines[seen:] if line.startswith("{")]
    done = next(r for r in records if r["event"] == "refresh done")
    return {**done, "lines": records}


def _events(refresh: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["event"]: r for r in refresh["lines"]}


def test_a_removed_key_vouches_for_no_new_release_after_refresh(keys: Keys, tmp_path: Path) -> None:
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)
    with _serve(tmp_path, trust) as server:
        trust_dir(trust, keys.new)
        (trust / keys.old.public_path.name).unlink()
        _publish(keys, "1.3.0-old", releases)  # signed only by the removed key
        done = _refresh(server)
    assert done["outcome"] == "rejected" and done["active"] == "research-decision@1.2.0", done
    assert done["rejected"][0]["path"].endswith("research-decision-1.3.0"), done
    held = _events(done)["active release no longer trusted; still served until restart"]
    assert held["release"] == "research-decision@1.2.0" and held["level"] == "error", held


def test_an_older_release_the_old_store_refused_is_held_once_its_key_is_added(keys: Keys, tmp_path: Path) -> None:
    """A release directory is verified once per change of its own; a changed trust store tries them all again."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.3.0-old", releases)
    with _serve(tmp_path, trust) as server:
        _publish(keys, "1.2.0-new", releases)  # put back for pinned runs, signed by a key not trusted yet
        refused = _refresh(server)
        trust_dir(trust, keys.new)
        held = _refresh(server)
    assert _events(refused)["older release not held"]["error"]["code"] == "signature_untrusted", refused
    assert _events(held)["older release held for pinned runs"]["release"] == "research-decision@1.2.0", held
    assert held["active"] == "research-decision@1.3.0", held


def test_a_follower_pulls_a_tag_it_refused_once_its_key_is_added(
    keys: Keys, tmp_path: Path, registry: LocalRegistry
) -> None:
    """The follower remembered the refused manifest and skipped it until the tag moved, whatever the store said."""
    ref = registry.ref("rimthan/retrust")
    push(keys.built["1.2.0-old"], ref, trust_dir(tmp_path / "publisher-trust", keys.old, keys.new))
    push(keys.built["1.3.0-new"], ref, tmp_path / "publisher-trust")
    trust = trust_dir(tmp_path / "trust", keys.old)
    with _serve(tmp_path, trust, "--releases-from", ref, "--plain-http") as server:
        refused = _refresh(server)
        trust_dir(trust, keys.new)  # keys/README "Add a key", then refresh
        pulled = _refresh(server)
    assert refused["active"] == "research-decision@1.2.0" and refused["outcome"] == "rejected", refused
    assert refused["rejected"][0]["error"]["code"] == "signature_untrusted", refused
    assert pulled["outcome"] == "activated" and pulled["activated"] == ["research-decision@1.3.0"], pulled
    assert _events(pulled)["trust store changed; pulling refused tags again"]["tags"] == ["1.3.0"], pulled
    assert sorted(p.name for p in (tmp_path / "releases").iterdir()) == [
        "research-decision-1.2.0",
        "research-decision-1.3.0",
    ]


def test_a_follower_repairs_a_copy_damaged_while_it_serves_at_the_next_refresh(
    keys: Keys, tmp_path: Path, registry: LocalRegistry
) -> None:
    """The follower pulled a tag once and never looked at its directory again: an edit stayed until a restart."""
    ref = registry.ref("rimthan/repair-live")
    push(keys.built["1.2.0-old"], ref, trust := trust_dir(tmp_path / "trust", keys.old))
    copy = tmp_path / "releases" / "research-decision-1.2.0"
    with _serve(tmp_path, trust, "--releases-from", ref, "--plain-http") as server:
        flip_byte(copy)
        done = _refresh(server)
    replaced = _events(done)["damaged copy replaced"]
    assert replaced["path"] == str(copy) and replaced["why"].startswith("file_digest_mismatch: "), replaced
    assert done["active"] == "research-decision@1.2.0", done
    verify_release(copy, load_trust(trust))


def test_a_follower_s_copy_a_removed_key_signed_is_replaced_by_a_co_signed_push_as_no_damage(
    keys: Keys, tmp_path: Path, registry: LocalRegistry
) -> None:
    """A key rotation: the copy stops verifying under the new store, the publisher pushes the tag again co-signed,
    and the follower replaces the copy. That was logged as "damaged copy replaced" (a warning of damage no one did)."""
    ref = registry.ref("rimthan/rotate")
    push(keys.built["1.2.0-old"], ref, trust_dir(tmp_path / "publisher-trust", keys.old, keys.new))
    trust = trust_dir(tmp_path / "trust", keys.old)
    copy = tmp_path / "releases" / "research-decision-1.2.0"
    with _serve(tmp_path, trust, "--releases-from", ref, "--plain-http") as server:
        trust_dir(trust, keys.new)
        (trust / keys.old.public_path.name).unlink()
        _refresh(server)
        push(keys.built["1.2.0-both"], ref, tmp_path / "publisher-trust")
        done = _refresh(server)
    events = _events(done)
    assert "damaged copy replaced" not in events, done
    replaced = events["copy the trust store no longer vouches for replaced"]
    assert replaced["level"] == "info" and replaced["path"] == str(copy), replaced
    assert replaced["why"].startswith("signature_untrusted: "), replaced
    verify_release(copy, load_trust(trust))
    again = [event for event in events if event.startswith("release trusted again")]  # no restart needed
    assert again and events[again[0]]["release"] == "research-decision@1.2.0", done


def test_an_added_key_vouches_for_new_releases_after_refresh(keys: Keys, tmp_path: Path) -> None:
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)
    with _serve(tmp_path, trust) as server:
        trust_dir(trust, keys.new)
        _publish(keys, "1.3.0-new", releases)
        done = _refresh(server)
    assert done["outcome"] == "activated" and done["activated"] == ["research-decision@1.3.0"], done


def test_a_trust_store_that_no_longer_loads_keeps_the_one_loaded_before(keys: Keys, tmp_path: Path) -> None:
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)
    with _serve(tmp_path, trust) as server:
        (trust / "half-copied.pub").write_text("-----BEGIN PUBLIC KEY-----\n", encoding="utf-8")
        _publish(keys, "1.3.0-old", releases)
        done = _refresh(server)
    error = _events(done)["trust store not reloaded"]
    assert error["level"] == "error" and error["error"]["code"] == "key_invalid", error
    assert "the trust store loaded before stays in force" in error["error"]["message"], error
    assert done["activated"] == ["research-decision@1.3.0"], done  # verified against the store loaded before
    assert any(r["path"] == str(trust) for r in done["rejected"]), done


def test_a_trust_store_refusal_is_said_as_it_always_was(keys: Keys, tmp_path: Path) -> None:
    """The refusal of a trust store that no longer loads, byte for byte in both log lines that say it: the
    loader's words, what stays in force, and the step to fix it (``next_step``), in that order."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)
    with _serve(tmp_path, trust) as server:
        (trust / "half-copied.pub").write_text("-----BEGIN PUBLIC KEY-----\n", encoding="utf-8")
        seen = len(server.lines)
        _refresh(server)
        said = server.lines[seen:]
    with pytest.raises(RegistryError) as loading:
        load_trust(trust)
    error = {
        "code": "key_invalid",
        "message": f"{loading.value.message}; the trust store loaded before stays in force until it loads again",
        "path": str(trust / "half-copied.pub"),
        "next_step": f"fix {trust} (as `rimthan-mcp check --trust {trust}` reads it), then refresh again",
    }
    not_reloaded = next(line for line in said if '"trust store not reloaded"' in line)
    assert f'"path": {json.dumps(str(trust))}, "error": {json.dumps(error)}}}' in not_reloaded, not_reloaded
    done = next(line for line in said if '"refresh done"' in line)
    assert f'"rejected": [{json.dumps({"path": str(trust), "error": error})}]' in done, done


def test_a_held_release_only_the_removed_key_signed_is_dropped(keys: Keys, tmp_path: Path) -> None:
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old, keys.new)
    _publish(keys, "1.2.0-old", releases)
    _publish(keys, "1.3.0-both", releases)

    async def manifests(url: str) -> set[str]:
        async with http_client_for(url) as client:
            return {str(r.name) for r in (await client.list_resources()).resources if "manifest" in str(r.name)}

    with _serve(tmp_path, trust) as server:
        before = anyio.run(manifests, server.url)
        (trust / keys.old.public_path.name).unlink()
        done = _refresh(server)
        after = anyio.run(manifests, server.url)
    dropped = _events(done)["release no longer trusted; dropped"]
    assert dropped["release"] == "research-decision@1.2.0", dropped
    assert "research-decision@1.2.0 manifest" in before and "research-decision@1.2.0 manifest" not in after
    assert "research-decision@1.3.0 manifest" in after
    assert "active release no longer trusted; still served until restart" not in _events(done)


def test_a_release_put_back_serves_its_pinned_runs_after_a_refresh(keys: Keys, tmp_path: Path) -> None:
    """pinned_release_unavailable's next step (put the release back) works with a refresh, not only a restart."""
    on_a, on_b, trust = tmp_path / "a", tmp_path / "b", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", on_a / "releases")
    _publish(keys, "1.3.0-old", on_b / "releases")
    shared = ("--checkpoint-keys", str(tmp_path / "checkpoint-keys.json"))  # two replicas of one fleet
    run: WorkflowHarness | None = None

    async def start(url: str) -> RunResult:
        nonlocal run
        async with http_client_for(url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            return await run.start("research", initial_version="1.2.0")

    async def resume(url: str, checkpoint: str) -> Any:
        assert run is not None
        async with http_client_for(url) as client:
            arguments = {"checkpoint": checkpoint, "confirmed_state": run.state.projection()}
            return await client.call_tool("rimthan.continue_workflow", arguments)

    with _serve(on_a, trust, *shared) as server:
        started = anyio.run(start, server.url)
    with _serve(on_b, trust, *shared) as server:
        refused = anyio.run(resume, server.url, started.wire["checkpoint"])
        error = refused.structured_content["error"]
        assert (
            error["code"] == "pinned_release_unavailable"
            and error["details"]["release_id"] == "research-decision@1.2.0"
        )
        assert (
            "pinned to release research-decision@1.2.0 (sha256:" in error["message"] and "refresh" in error["message"]
        )
        _publish(keys, "1.2.0-old", on_b / "releases")  # the next step: put it back
        done = _refresh(server)
        served = anyio.run(resume, server.url, started.wire["checkpoint"])
    assert done["outcome"] == "unchanged" and done["active"] == "research-decision@1.3.0", done
    assert _events(done)["older release held for pinned runs"]["release"] == "research-decision@1.2.0"
    assert not served.is_error and served.structured_content["step"]["id"] == "setup-workspace", served
    floors = json.loads((on_b / "state" / "activation-floor.json").read_text("utf-8"))["catalogues"]
    assert [e["version"] for e in floors.values()] == ["1.3.0"]  # held for pinned runs, never activated


async def _pinned_run_then_1_3_0(
    client: Any, server: HttpServer, keys: Keys, tmp_path: Path
) -> tuple[WorkflowHarness, RunResult]:
    """A run on 1.2.0 left at its interview, then 1.3.0 published and activated, and the new key trusted."""
    run = harness(client_caller(client), tmp_path / "project")
    result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
    _publish(keys, "1.3.0-old", tmp_path / "releases")
    assert _refresh(server)["activated"] == ["research-decision@1.3.0"]
    trust_dir(tmp_path / "trust", keys.new)
    return run, result


def _co_sign_in_place(keys: Keys, releases: Path) -> None:
    for release in sorted(releases.iterdir()):
        signed = pack("sign", release, "--key", keys.new.private_path)
        assert signed.returncode == 0, signed.stderr


def test_keys_readme_s_rotation_keeps_every_release_and_the_run_pinned_to_the_older_one(
    keys: Keys, tmp_path: Path
) -> None:
    """keys/README "Rotate or remove a key" as written: add the new key, co-sign every release in service in place
    (`rimthan-pack sign`), remove the old key, refresh. The server held each release by the signatures it had
    when loaded (the old key's alone), so it dropped the older one (its pinned run refused) and called the active
    one no longer trusted, though both on disk were signed by the new key."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)

    async def week(server: HttpServer) -> RunResult:
        async with http_client_for(server.url) as client:
            run, result = await _pinned_run_then_1_3_0(client, server, keys, tmp_path)
            _refresh(server)
            _co_sign_in_place(keys, releases)
            (trust / keys.old.public_path.name).unlink()
            rotated.update(_events(_refresh(server)))
            return await run.run(result)

    rotated: dict[str, dict[str, Any]] = {}
    with _serve(tmp_path, trust) as server:
        finished = anyio.run(week, server)
    assert "release no longer trusted; dropped" not in rotated, rotated
    assert "active release no longer trusted; still served until restart" not in rotated, rotated
    assert rotated["release still trusted: co-signed since it was loaded"]["signers"] == [keys.new.key_id]
    assert finished.status == "completed" and "1.2.0" in json.dumps(finished.release), finished.release


def test_a_follower_takes_the_co_signature_pushed_during_a_rotation_and_keeps_the_pinned_run(
    keys: Keys, tmp_path: Path, registry: LocalRegistry
) -> None:
    """The same rotation for a fleet: the publisher co-signs and pushes every tag again before the old key goes.
    The follower found its copy already present (it verified) and kept it without the new signature, so removing
    the old key dropped the older release (its pinned run refused) and left the active one "no longer trusted"."""
    ref, publisher = registry.ref("rimthan/cosign"), trust_dir(tmp_path / "publisher-trust", keys.old, keys.new)
    trust = trust_dir(tmp_path / "trust", keys.old)
    push(keys.built["1.2.0-old"], ref, publisher)

    async def week(server: HttpServer) -> RunResult:
        async with http_client_for(server.url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
            push(keys.built["1.3.0-old"], ref, publisher)
            assert _refresh(server)["activated"] == ["research-decision@1.3.0"]
            trust_dir(trust, keys.new)
            push(keys.built["1.2.0-both"], ref, publisher)
            push(keys.built["1.3.0-both"], ref, publisher)
            _refresh(server)
            (trust / keys.old.public_path.name).unlink()
            rotated.update(_events(_refresh(server)))
            return await run.run(result)

    rotated: dict[str, dict[str, Any]] = {}
    with _serve(tmp_path, trust, "--releases-from", ref, "--plain-http") as server:
        finished = anyio.run(week, server)
    assert "release no longer trusted; dropped" not in rotated, rotated
    assert "active release no longer trusted; still served until restart" not in rotated, rotated
    assert finished.status == "completed" and "1.2.0" in json.dumps(finished.release), finished.release
    for version in ("1.2.0", "1.3.0"):
        copy = tmp_path / "releases" / f"research-decision-{version}"
        assert {p.stem for p in (copy / "signatures").iterdir()} == {keys.old.key_id, keys.new.key_id}
        verify_release(copy, load_trust(trust))


def test_a_held_release_deleted_from_disk_is_warned_of_once_and_its_pinned_run_still_finishes(
    keys: Keys, tmp_path: Path
) -> None:
    """An operator deletes a release still pinned by a run. The server serves the run from what it verified at
    load, but nothing said that a restart would refuse it (`pinned_release_unavailable`) while it could still be
    put back: one warning now says so, at the first refresh after, and none at the next."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)
    gone = "held release gone from disk; a restart will not hold it"

    async def week(server: HttpServer) -> RunResult:
        async with http_client_for(server.url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
            _publish(keys, "1.3.0-old", releases)
            assert gone not in _events(_refresh(server))
            shutil.rmtree(releases / "research-decision-1.2.0")
            said.update(_events(_refresh(server)))
            assert gone not in _events(_refresh(server))  # once
            return await run.run(result)

    said: dict[str, dict[str, Any]] = {}
    with _serve(tmp_path, trust) as server:
        finished = anyio.run(week, server)
    warned = said[gone]
    assert warned["level"] == "warning" and warned["release"] == "research-decision@1.2.0", warned
    assert warned["next"].startswith("put research-decision-1.2.0 back in the releases directory"), warned
    assert finished.status == "completed" and "1.2.0" in json.dumps(finished.release), finished.release


def test_co_signing_after_the_old_key_was_removed_takes_effect_at_the_next_refresh(keys: Keys, tmp_path: Path) -> None:
    """keys/README's rotation in the other order: the old key is removed first (the older release dropped, its run
    refused; the active one "still served until restart"), and only then is every release co-signed in place. A
    refresh re-checked held releases only when the trust store changed, and looked at a release directory again
    only when its own inode or mtime changed (a signature added under signatures/ changes neither): the dropped
    release came back, and the active one stopped being "no longer trusted", only at a restart."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)

    async def week(server: HttpServer) -> tuple[Any, RunResult]:
        async with http_client_for(server.url) as client:
            run, result = await _pinned_run_then_1_3_0(client, server, keys, tmp_path)
            (trust / keys.old.public_path.name).unlink()
            removed.update(_events(_refresh(server)))
            arguments = {"checkpoint": result.wire["checkpoint"], "confirmed_state": run.state.projection()}
            refused = await client.call_tool("rimthan.continue_workflow", arguments)
            _co_sign_in_place(keys, releases)
            co_signed.extend(r for r in _refresh(server)["lines"] if r["event"].startswith("release trusted again"))
            return refused, await run.run(result)

    removed: dict[str, dict[str, Any]] = {}
    co_signed: list[dict[str, Any]] = []
    with _serve(tmp_path, trust) as server:
        refused, finished = anyio.run(week, server)
    assert removed["release no longer trusted; dropped"]["release"] == "research-decision@1.2.0", removed
    assert "active release no longer trusted; still served until restart" in removed, removed
    error = refused.structured_content["error"]
    assert error["code"] == "pinned_release_unavailable", refused
    # the release is still in the releases directory: "put it back" sent the operator the wrong way; the refusal
    # says why it was dropped and that a co-signature by a trusted key (what this test then does) brings it back
    assert (
        "which this server dropped: its trust store no longer vouches for the release's signatures"
        in (error["message"])
    ), error
    assert error["next"].startswith("have a key holder the trust store trusts co-sign the pinned release"), error
    assert error["details"]["untrusted"] is True, error
    assert sorted(r["release"] for r in co_signed) == ["research-decision@1.2.0", "research-decision@1.3.0"]
    assert all(r["level"] == "info" and r["signers"] == [keys.new.key_id] for r in co_signed), co_signed
    assert finished.status == "completed" and "1.2.0" in json.dumps(finished.release), finished.release


def test_an_older_release_refused_for_its_signer_is_held_once_co_signed_in_place(keys: Keys, tmp_path: Path) -> None:
    """An older release put back for pinned runs, refused because no trusted key signed it, then co-signed in place
    (`rimthan-pack sign`, which adds a file under signatures/ and leaves the release directory's own inode and mtime
    as they were): it was tried again only when the trust store changed, so its pinned runs were refused until a
    restart. Its signatures directory is looked at too, as for a held release found untrusted."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.new)
    _publish(keys, "1.3.0-new", releases)
    with _serve(tmp_path, trust) as server:
        _publish(keys, "1.2.0-old", releases)  # signed only by a key this store does not trust
        refused = _refresh(server)
        older = releases / keys.built["1.2.0-old"].name
        signed = pack("sign", older, "--key", keys.new.private_path)
        assert signed.returncode == 0, signed.stderr
        held = _refresh(server)
    assert _events(refused)["older release not held"]["error"]["code"] == "signature_untrusted", refused
    assert _events(held)["older release held for pinned runs"]["release"] == "research-decision@1.2.0", held
    assert held["active"] == "research-decision@1.3.0", held


def test_a_restarted_server_refuses_a_run_pinned_to_a_release_it_dropped_as_untrusted_the_same_way(
    keys: Keys, tmp_path: Path
) -> None:
    """A run pinned to 1.2.0 (signed by the old key only); 1.3.0 signed by the new key activated; the old key
    removed: the refresh drops 1.2.0 and the pinned run is refused as untrusted (``details.untrusted``). Only the
    running process knew it: after a restart the same call got "put it back in the releases directory", though the
    release was there. Now the restarted server, finding the directory refused for its signatures alone, refuses
    the run the same way, and never serves it."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", keys.old)
    _publish(keys, "1.2.0-old", releases)

    async def pinned(server: HttpServer) -> dict[str, Any]:
        async with http_client_for(server.url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
            _publish(keys, "1.3.0-new", releases)
            trust_dir(trust, keys.new)
            assert _refresh(server)["activated"] == ["research-decision@1.3.0"]
            (trust / keys.old.public_path.name).unlink()
            _refresh(server)
            arguments["call"] = {"checkpoint": result.wire["checkpoint"], "confirmed_state": run.state.projection()}
            return await _continue(server, arguments["call"])

    async def _continue(server: HttpServer, call: dict[str, Any]) -> dict[str, Any]:
        async with http_client_for(server.url) as client:
            refused = await client.call_tool("rimthan.continue_workflow", call)
        error: dict[str, Any] = refused.structured_content["error"]
        return error

    arguments: dict[str, dict[str, Any]] = {}
    with _serve(tmp_path, trust) as server:
        before = anyio.run(pinned, server)
    with _serve(tmp_path, trust) as server:
        after = anyio.run(_continue, server, arguments["call"])
        said = server.stderr()
    assert before["details"]["untrusted"] is True, before
    assert after["code"] == before["code"] == "pinned_release_unavailable", after
    assert after["details"] == before["details"] and after["next"] == before["next"], (before, after)
    assert "its trust store no longer vouches for the release's signatures" in after["message"], after
    assert '"older release not held"' in said and "signature_untrusted" in said, said
