"""A setup the host library refuses tells its caller what to change: the library's call or argument, not the bridge's.

``HostSession.set_up_workspace`` refuses a user's file at an asset's path, a
damaged delivery record, and asset paths outside the session's repository
policy (:class:`~rimthan_host.delivered.AssetClash`); the bridge raises the same
refusals in its own words (its tools, its flags: ``bridge_words``, which the
bridge's own tests read through a real MCP client). Runs go through a real
engine over a real signed release.
"""

from __future__ import annotations

import pytest
from rimthan_host.delivered import RECORD_PATH, AssetClash
from rimthan_host.protocol import HostProfile
from rimthan_host.session import HostSession
from support.engines import Engines, TickingClock, example_state, make_engines, run

BRIDGE_ONLY = ("resume_run", "step_done", "--verifier-url", "the flags after --", "bridge", "Ask the user")


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("setupwords"), TickingClock())


def _at_setup(engines: Engines, name: str, host: HostProfile | None = None) -> HostSession:
    project = engines.work / "projects" / name
    project.mkdir(parents=True)
    session = HostSession(engines.call("1.3.0"), project_dir=project, host=host, clock=engines.clock)
    run(session.start("research", example_state("1.3.0")))
    return session


def _refused(session: HostSession) -> AssetClash:
    with pytest.raises(AssetClash) as refused:
        session.set_up_workspace()
    said = str(refused.value)
    assert "\n" not in said.split("\n")[0] and said.strip() == said
    for word in BRIDGE_ONLY:
        assert word not in said, (word, said)
    return refused.value


def test_a_users_file_at_an_asset_path_is_refused_in_the_librarys_words(engines: Engines) -> None:
    session = _at_setup(engines, "users-file")
    assert session.step is not None
    path = str(session.step.wire["host_assets"][0]["install_path"])
    mine = session.project_dir / path
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the user's own\n", "utf-8")
    clash = _refused(session)
    assert "the host kit found files it will not overwrite" in str(clash)
    assert str(clash).endswith(
        "\nMove or rename each of these files (keep their content elsewhere), then call "
        "HostSession.set_up_workspace again (the run waits at its setup step)."
    )
    assert "the bridge found files" in clash.bridge_words
    assert clash.bridge_words.endswith("then call resume_run to set up the workspace again.")
    assert mine.read_text("utf-8") == "the user's own\n"  # nothing delivered
    mine.rename(mine.with_name("kept-elsewhere.md"))
    assert session.set_up_workspace().path == ".rimthan/workspace-manifest.json"  # as it says: moved, called again


def test_a_damaged_delivery_record_is_refused_in_the_librarys_words(engines: Engines) -> None:
    session = _at_setup(engines, "damaged-record")
    record = session.project_dir / RECORD_PATH
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("not a record", "utf-8")
    clash = _refused(session)
    assert str(clash).startswith(f"{RECORD_PATH} is damaged (it is not a map of paths to SHA-256 digests)")
    assert str(clash).endswith("and try again: HostSession.set_up_workspace for a run at its setup step.")
    assert "resume_run for a run waiting at its setup" in clash.bridge_words


def test_asset_paths_outside_the_sessions_policy_name_the_host_argument(engines: Engines) -> None:
    host = HostProfile(writable_paths=(".rimthan/*", "research/*"))  # not where the release's host adapter installs
    session = _at_setup(engines, "policy", host)
    clash = _refused(session)
    said = str(clash)
    assert said.startswith(
        "The workspace was not set up and nothing was written (repository_policy_conflict): the verifier named "
        "paths the host kit does not write:\n- "
    )
    assert ": not writable under this session's repository policy\n" in said
    assert said.endswith(
        "The release delivers where this session's repository policy (the writable_paths and protected_paths of "
        "the HostProfile given as HostSession's host argument) does not let it write: allow those paths, or run a "
        "release whose host adapter installs elsewhere."
    )
    assert "this bridge's repository policy (its HostProfile's writable_paths" in clash.bridge_words
    assert not any(session.project_dir.glob(".claude"))  # nothing written
