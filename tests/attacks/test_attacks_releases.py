"""Release attack corpus: one good release, broken one way per case, refused with the precise reason.

Modelled on python-tuf's repository simulator tests. Once per session we build
real, signed releases with real Ed25519 keys:

* ``good``      demo@0.2.0 signed by alice and bob (the release under attack)
* ``old``       demo@0.1.0, same keys (for rollback and mix-and-match)
* ``other``     other@0.1.0, same keys (another catalogue, for mix-and-match)
* ``profile``   demo@0.2.0 for profile ``report-engine`` (trusted, wrong profile)
* ``scope``     demo@0.2.0 for scope ``example.elsewhere`` (trusted, wrong scope)

Every case copies ``good`` to ``<case>/demo-0.2.0``, breaks exactly one thing
and returns what must happen: the :class:`FailureCode` and the file the error
names. Each case is then checked through BOTH paths that load releases: the
in-process ``load_trust`` + ``verify_release`` the server runs at load, and the
installed ``rimthan-pack verify`` entry point as a subprocess (exit status 1 and
the same code and file in its one-line error). Where the attacker holds a
trusted key, the case re-signs the release (``resign_release`` or
``sign_raw``), so the refusal must come from the content rules, not the
signature. The CLI costs half a second of start-up per run, so the default
run sends one case per failure code through it and the ``slow`` sweep sends
every case; the selected CLI runs are started together on a small pool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import RegistryError, single_line
from rimthan_workflow_registry.release.format import FileEntry
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.release_attacks import (  # noqa: F401, E402, I001
    ED25519_L,
    NAME,
    Attack,
    Expect,
    F,
    Keys,
    World,
    all_cases,
    build_world,
    case,
    cat,
    first_size,
    manifest_path,
    manifest_text,
    manifest_value,
    replace_tree,
    resign_text,
    resign_value,
    short_socket,
    sig,
    sign_raw,
    size_or_digest,
)
from support.releases import (
    REPO_ROOT,
)

CASES = all_cases()


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory)


# --------------------------------------------------------------------------- running the corpus


def _cli() -> list[str]:
    """The installed ``rimthan-pack`` entry point of this environment."""
    local = Path(sys.executable).with_name("rimthan-pack")
    if local.exists():
        return [str(local)]
    return [str(REPO_ROOT / ".venv" / "bin" / "rimthan-pack")]


# One case per failure code (plus the crash regressions) runs through the CLI in the default run;
# the full CLI sweep over every case is marked slow (about half a second of interpreter start-up each).
CLI_SAMPLE = frozenset(
    {
        "content_byte_flipped_same_size",
        "endless_data_sparse_gigabyte",
        "listed_file_missing",
        "release_directory_missing",
        "manifest_missing",
        "manifest_lone_surrogate_escape",
        "size_beyond_interoperable_integers",
        "noncanonical_trailing_newline",
        "duplicate_key_inside_file_entry",
        "float_size",
        "path_dotdot_escape",
        "non_utf8_file_name",
        "extraneous_catalogue_file",
        "checksums_extra_line",
        "listed_file_symlinked_to_etc_passwd",
        "fifo_replacing_listed_file",
        "hard_linked_signatures_counted_twice",
        "signature_copied_under_its_name_and_a_newline",
        "no_signatures",
        "untrusted_signer_rewrites_content",
        "signature_malleated_s_plus_l",
        "below_threshold_one_of_two_required",
        "trust_file_counts_one_key_twice",
        "rollback_older_release_under_newer_name",
        "other_catalogue_under_this_name",
        "trusted_release_for_another_profile",
        "insider_invalid_json_schema",
        "insider_first_step_not_setup",
        "insider_referenced_file_removed",
        "insider_instruction_not_utf8",
    }
)
CLI_TEST = "test_attack_is_refused_by_rimthan_pack_verify"


def _in_process(release: Path, expect: Expect, trust: Path) -> tuple[RegistryError | None, str | None]:
    """The server's load path: the refusal, or (None, what it accepted / how it crashed)."""
    try:
        store = load_trust(trust)
        verified = verify_release(release, store, expected_profile=expect.profile, expected_scope=expect.scope)
    except RegistryError as exc:
        return exc, None
    except Exception as exc:  # a crash is a bug too: report it for this case only
        return None, f"CRASH {type(exc).__name__}: {exc}"
    return None, verified.release_id


def _run_cli(release: Path, expect: Expect, trust: Path) -> subprocess.CompletedProcess[str]:
    args = [*_cli(), "verify", str(release), "--trust", str(trust), "--profile", expect.profile or ""]
    if expect.scope is not None:
        args += ["--scope", expect.scope]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=release.parent.parent)


@pytest.fixture(scope="session")
def prepared(world: World) -> dict[str, tuple[Path, Expect]]:
    """Every case applied to its own copy of the good release: ``name -> (release path, expectation)``."""
    out: dict[str, tuple[Path, Expect]] = {}
    for name, attack in CASES.items():
        release = world.root / "cases" / name / NAME
        shutil.copytree(world.good, release)
        expect = attack(world, release)
        out[name] = (expect.release or release, expect)
    return out


@pytest.fixture(scope="session")
def cli_runs(
    request: pytest.FixtureRequest, world: World, prepared: dict[str, tuple[Path, Expect]]
) -> dict[str, subprocess.CompletedProcess[str]]:
    """``rimthan-pack verify`` for every selected CLI case, run concurrently (a small pool)."""
    wanted = {
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == CLI_TEST and hasattr(item, "callspec")
    }
    jobs = {n: prepared[n] for n in sorted(wanted) if prepared[n][1].skip is None}
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) * 2))) as pool:
        futures = {n: pool.submit(_run_cli, rel, exp, world.trusts[exp.trust]) for n, (rel, exp) in jobs.items()}
        return {n: f.result() for n, f in futures.items()}


def test_the_corpus_is_large_and_names_are_distinct() -> None:
    assert len(CASES) >= 60
    assert len(set(CASES.values())) == len(CASES)
    assert set(CASES) >= CLI_SAMPLE


def test_the_default_cli_sample_covers_every_failure_code(prepared: dict[str, tuple[Path, Expect]]) -> None:
    every = {expect.code for _, expect in prepared.values()}
    sampled = {prepared[name][1].code for name in CLI_SAMPLE}
    assert every == sampled, sorted(every - sampled)


@pytest.mark.parametrize("trust", ["alice", "k2of3"])
def test_the_unbroken_release_verifies_through_both_paths(world: World, tmp_path: Path, trust: str) -> None:
    """The control: without the one break, both paths accept, so every refusal below is the break's."""
    release = tmp_path / NAME
    shutil.copytree(world.good, release)
    error, accepted = _in_process(release, Expect(F.INTERNAL_ERROR, ""), world.trusts[trust])
    assert error is None and accepted == "demo@0.2.0"
    proc = _run_cli(release, Expect(F.INTERNAL_ERROR, ""), world.trusts[trust])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("verified demo@0.2.0 sha256:")


@pytest.mark.parametrize("name", sorted(CASES))
def test_attack_is_refused_by_verify_release(world: World, prepared: dict[str, tuple[Path, Expect]], name: str) -> None:
    """The server's load path (``load_trust`` + ``verify_release``) refuses with the precise code and file."""
    release, expect = prepared[name]
    if expect.skip is not None:
        pytest.skip(expect.skip)
    error, accepted = _in_process(release, expect, world.trusts[expect.trust])
    assert error is not None, f"{name}: not refused by verify_release: {accepted}"
    assert error.code is expect.code, f"{name}: {error.one_line()}"
    assert error.path == expect.where_text, f"{name}: {error.one_line()}"


@pytest.mark.parametrize(
    "name", [n if n in CLI_SAMPLE else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CASES)]
)
def test_attack_is_refused_by_rimthan_pack_verify(
    prepared: dict[str, tuple[Path, Expect]], cli_runs: dict[str, subprocess.CompletedProcess[str]], name: str
) -> None:
    """The installed CLI exits 1 with ``error: <code>: <file>: ...`` and a ``next:`` line, never a traceback."""
    _, expect = prepared[name]
    if expect.skip is not None:
        pytest.skip(expect.skip)
    proc = cli_runs[name]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, f"{name}: rimthan-pack verify exited {proc.returncode}: {proc.stderr}"
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"error: {expect.code.value}: {single_line(expect.where_text)}: "), f"{name}: {lines[0]}"
    assert lines[1].startswith("next: ")


@pytest.mark.parametrize("name", sorted(CASES))
def test_attack_gets_the_same_verdict_when_files_are_checked_on_threads(
    world: World, prepared: dict[str, tuple[Path, Expect]], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threaded file check (forced on, one file per batch) refuses exactly as the one-thread path does."""
    from rimthan_workflow_registry.release import verify

    release, expect = prepared[name]
    if expect.skip is not None:
        pytest.skip(expect.skip)
    one, _ = _in_process(release, expect, world.trusts[expect.trust])
    monkeypatch.setattr(verify, "verify_threads", lambda files, total: 2)
    monkeypatch.setattr(verify, "_HASH_BATCH", 1)
    two, accepted = _in_process(release, expect, world.trusts[expect.trust])
    assert one is not None and two is not None, f"{name}: not refused on threads: {accepted}"
    assert (two.code, two.path, two.message) == (one.code, one.path, one.message)
    assert two.code is expect.code and two.path == expect.where_text, f"{name}: {two.one_line()}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_attack_gets_the_same_verdict_from_the_batch_file_check_as_file_by_file(
    world: World, prepared: dict[str, tuple[Path, Expect]], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files checked a batch at a time (the default) are refused exactly as by ``check_file`` one at a time."""
    from rimthan_workflow_registry.release import verify
    from rimthan_workflow_registry.release.verified import check_file

    def one_by_one(base: str, entries: Sequence[FileEntry]) -> list[RegistryError]:
        for entry in entries:
            try:
                check_file(f"{base}/{entry.path}", entry, where=f"{base}/{entry.path}")
            except RegistryError as exc:
                return [exc]  # the first failure is all this compares
        return []

    release, expect = prepared[name]
    if expect.skip is not None:
        pytest.skip(expect.skip)
    batch, _ = _in_process(release, expect, world.trusts[expect.trust])
    monkeypatch.setattr(verify, "check_files", one_by_one)
    reference, accepted = _in_process(release, expect, world.trusts[expect.trust])
    assert batch is not None and reference is not None, f"{name}: not refused file by file: {accepted}"
    assert (batch.code, batch.path, batch.message) == (reference.code, reference.path, reference.message)
