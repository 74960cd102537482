"""The audit command a completed run names, from the flags its child verifier was started with.

The bridge's child runs in the project, so the command is told relative to it
and carries what audit needs to say how the run ended: the releases (serve's
default ``releases`` when none was given), the trust store and the state
directory the checkpoint keys are in. (The real bridge's completion, run as
told: ``test_bridge_standin.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rimthan_host.audit_command import audit_command, audit_program

LOG = ".rimthan/runs/run-1.log"
SAID = " verifies it and says how the run ended"


@pytest.fixture(autouse=True)
def _no_verifier_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's environment is the bridge's: none of the variables audit_command reads, unless a test sets it."""
    for variable in ("RIMTHAN_RELEASES_DIR", "RIMTHAN_TRUST", "RIMTHAN_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(variable, raising=False)


def test_a_child_on_serve_s_defaults_is_audited_with_serve_s_releases_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIMTHAN_RELEASES_DIR", raising=False)
    assert audit_command(LOG, ()) == f"rimthan-mcp audit {LOG} --releases-dir releases{SAID}"
    monkeypatch.setenv("RIMTHAN_RELEASES_DIR", "/srv/rel eases")  # the child's environment is the bridge's
    assert audit_command(LOG, ()) == f"rimthan-mcp audit {LOG} --releases-dir '/srv/rel eases'{SAID}"


def test_the_flags_audit_shares_are_repeated_in_either_form_and_the_others_left_out() -> None:
    args = ["--trust=keys/t.toml", "--transport", "stdio", "--state-dir", "st", "--releases-dir", "r", "--log-level"]
    assert (
        audit_command(LOG, args) == f"rimthan-mcp audit {LOG} --trust keys/t.toml --state-dir st --releases-dir r{SAID}"
    )


def test_a_two_release_child_is_audited_with_both_releases() -> None:
    args = ["--release", "a-1.2.0", "--migration-target", "a-1.3.0", "--checkpoint-keys", "k.json"]
    expected = f"rimthan-mcp audit {LOG} --release a-1.2.0 --release a-1.3.0 --checkpoint-keys k.json{SAID}"
    assert audit_command(LOG, args) == expected


def test_a_verifier_by_url_is_its_operator_s_to_audit() -> None:
    said = audit_command(LOG, None)
    assert said.startswith("the verifier's operator verifies it") and "--" not in said, said


def test_what_the_child_took_from_the_environment_is_said_as_a_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``.mcp.json``'s ``env`` reaches the child, not the user's shell: the command names those values itself."""
    monkeypatch.delenv("RIMTHAN_RELEASES_DIR", raising=False)
    monkeypatch.setenv("RIMTHAN_STATE_DIR", "/srv/state")
    monkeypatch.setenv("RIMTHAN_TRUST", "keys/team")
    assert audit_command(LOG, ()) == (
        f"rimthan-mcp audit {LOG} --releases-dir releases --trust keys/team --state-dir /srv/state{SAID}"
    )
    args = ["--release", "a-1.2.0", "--trust", "t", "--checkpoint-keys", "k.json"]  # flags given: the child's own
    assert (
        audit_command(LOG, args)
        == f"rimthan-mcp audit {LOG} --release a-1.2.0 --trust t --checkpoint-keys k.json{SAID}"
    )


def test_the_verifier_is_named_by_its_path_unless_the_name_on_path_is_the_same_program(tmp_path: Path) -> None:
    tool = tmp_path / "tools" / "rimthan-host" / "bin"
    tool.mkdir(parents=True)
    (tool / "rimthan-mcp").write_text("#!/bin/sh\n")
    linked = tmp_path / "local-bin"
    linked.mkdir()
    (linked / "rimthan-mcp").symlink_to(tool / "rimthan-mcp")  # (as uv tool install links it)
    other = tmp_path / "other" / "rimthan-mcp"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    started = str(tool / "rimthan-mcp")
    assert audit_program(started, str(linked / "rimthan-mcp")) == "rimthan-mcp"
    assert audit_program(started, None) == started  # (not on PATH)
    assert audit_program(started, str(other)) == started  # (another rimthan-mcp on PATH)
    assert audit_command(LOG, (), audit_program(started, None)).startswith(f"{started} audit {LOG} ")
