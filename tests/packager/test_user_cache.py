"""``rimthan-pack`` remembers metaschema passes between runs in the user's cache directory.

Each run is a fresh process of the real CLI (through ``main``, as the console
script runs it), with ``catalogue_rules.check_schemas`` wrapped to record
which schemas it was asked to check. A schema whose exact bytes passed in an
earlier run is not checked again; bytes never seen are; a schema that fails is
refused every time and never written down; a malformed or unwritable cache
only costs the checks again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from rimthan_packager.user_cache import CACHE_SUBDIR, cache_dir
from rimthan_workflow_registry.release import schema_checks
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS_FILE, check_key, validator_version
from support.pack_probe import pack_probe
from support.releases import KeyPair, make_keypair

_COUNTING = """
from rimthan_workflow_registry.release import catalogue_rules
report["checked"] = []
real = catalogue_rules.check_schemas
def counting(schemas):
    report["checked"].extend(schemas)
    return real(schemas)
catalogue_rules.check_schemas = counting
"""


def _pack(env: dict[str, str], *argv: str | Path) -> tuple[int, list[str], str]:
    """Exit code, the schemas checked against the metaschema, and stderr of one fresh ``rimthan-pack`` run."""
    run = pack_probe(*argv, prelude=_COUNTING, env=env)
    return run.code, sorted(run.report["checked"]), run.stderr


def _schemas(source: Path) -> dict[str, bytes]:
    return {p.relative_to(source).as_posix(): p.read_bytes() for p in sorted(source.rglob("*.schema.json"))}


def _remembered(cache: Path) -> set[str]:
    return set(json.loads((cache / CACHE_SUBDIR / SCHEMA_CHECKS_FILE).read_text("utf-8"))["passed"])


def test_a_rebuild_checks_only_bytes_never_seen(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    schemas = _schemas(scaffold)
    assert len(schemas) >= 2

    code, checked, err = _pack(env, "build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "a")
    assert code == 0, err
    assert checked == sorted(schemas)
    assert {check_key(data) for data in schemas.values()} <= _remembered(tmp_path / "cache")

    code, checked, err = _pack(env, "build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "b")
    assert code == 0, err
    assert checked == []

    changed = sorted(schemas)[0]
    (scaffold / changed).write_bytes(schemas[changed] + b"\n")  # same schema, other bytes: checked again
    code, checked, err = _pack(env, "build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "c")
    assert code == 0, err
    assert checked == [changed]


@pytest.mark.parametrize("command", ["verify", "inspect", "sign"])
def test_every_command_that_checks_a_catalogue_uses_and_fills_the_same_cache(
    tmp_path: Path, signed_release: Path, trust: Path, command: str
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}

    def argv(attempt: int) -> tuple[str | Path, ...]:
        if command == "sign":  # a new co-signer each time: a key signs a release once
            return (
                "sign",
                signed_release,
                "--key",
                make_keypair(tmp_path / "keys", f"co-signer-{attempt}").private_path,
            )
        return (command, signed_release, "--trust", trust)

    code, first, err = _pack(env, *argv(1))
    assert code == 0, err
    assert first
    assert {check_key(data) for data in _schemas(signed_release / "catalogue").values()} <= _remembered(
        tmp_path / "cache"
    )
    code, second, err = _pack(env, *argv(2))
    assert (code, second) == (0, []), err


def test_a_failing_schema_is_refused_every_time_and_never_remembered(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    bad = sorted(_schemas(scaffold))[0]
    (scaffold / bad).write_text(json.dumps({"type": "not-a-type"}), encoding="utf-8")
    for attempt in range(2):
        code, checked, err = _pack(env, "build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "r")
        assert code == 1, err
        assert "error: schema_invalid: " in err and "Traceback" not in err
        assert bad in checked, attempt
    cache_file = tmp_path / "cache" / CACHE_SUBDIR / SCHEMA_CHECKS_FILE
    assert not cache_file.exists() or check_key((scaffold / bad).read_bytes()) not in _remembered(tmp_path / "cache")
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.parametrize("content", ["not json", "[]", json.dumps({"format": "other", "passed": []})])
def test_a_malformed_cache_is_ignored_then_rewritten(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, content: str
) -> None:
    cache_file = tmp_path / "cache" / CACHE_SUBDIR / SCHEMA_CHECKS_FILE
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(content, encoding="utf-8")
    code, checked, err = _pack(
        {"XDG_CACHE_HOME": str(tmp_path / "cache")}, "build", scaffold, "--key", keypair.private_path, "--out", tmp_path
    )
    assert code == 0, err
    assert checked == sorted(_schemas(scaffold))
    assert {check_key(data) for data in _schemas(scaffold).values()} <= _remembered(tmp_path / "cache")


def test_a_cache_a_newer_version_wrote_is_left_as_it_is(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """Its passes are not trusted (every schema is checked), and it is never rewritten in this version's format: the
    build that finds it reads the format rules then (``state_formats``, which a passing rebuild never imports)."""
    cache_file = tmp_path / "cache" / CACHE_SUBDIR / SCHEMA_CHECKS_FILE
    cache_file.parent.mkdir(parents=True)
    newer = {"format": "rimthan.schema-checks/2", "passed": sorted(check_key(d) for d in _schemas(scaffold).values())}
    cache_file.write_text(json.dumps(newer), encoding="utf-8")
    kept = cache_file.read_bytes()
    argv = ("build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "r"))
    run = pack_probe(*argv, prelude=_COUNTING, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert run.code == 0, run.stderr
    assert sorted(run.report["checked"]) == sorted(_schemas(scaffold))
    assert cache_file.read_bytes() == kept
    assert "rimthan_workflow_registry.state_formats" in run.modules


def test_an_unwritable_cache_only_costs_the_checks(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file where the cache directory would be", encoding="utf-8")
    for out in ("a", "b"):
        code, checked, err = _pack(
            {"XDG_CACHE_HOME": str(not_a_dir)},
            "build",
            scaffold,
            "--key",
            keypair.private_path,
            "--out",
            tmp_path / out,
        )
        assert code == 0, err
        assert checked == sorted(_schemas(scaffold))
        assert "Traceback" not in err


def test_the_cache_directory_follows_xdg_and_home(tmp_path: Path) -> None:
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / CACHE_SUBDIR
    relative = cache_dir({"XDG_CACHE_HOME": "relative/dir"})  # not absolute: ignored, as the XDG spec says
    assert relative == Path.home() / ".cache" / CACHE_SUBDIR


@pytest.fixture
def fresh_validator_version() -> Iterator[None]:
    validator_version.cache_clear()
    yield
    validator_version.cache_clear()


def test_the_check_key_binds_the_installed_distributions(
    monkeypatch: pytest.MonkeyPatch, fresh_validator_version: None
) -> None:
    """A format is checkable only while its library is installed: removing one must invalidate every pass."""
    installed = schema_checks._installed_distributions()
    assert any(name.startswith("rfc3986_validator-") for name in installed)
    with_all = validator_version()
    without = tuple(name for name in installed if not name.startswith("rfc3986_validator-"))
    monkeypatch.setattr(schema_checks, "_installed_distributions", lambda: without)
    validator_version.cache_clear()
    assert validator_version() != with_all
    assert validator_version().startswith(f"jsonschema-{metadata.version('jsonschema')}:")
