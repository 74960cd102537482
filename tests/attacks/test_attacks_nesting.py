"""Deeply nested input and junk release directories: a one-line refusal with a code, never a crash.

The limits live in ``rimthan_workflow_registry.limits`` (figures in
docs/security.md). Each is tested just below and just above, then through
``verify_release``, the installed ``rimthan-pack`` CLI and a real
``rimthan-mcp serve`` process: a deep manifest in an unsigned sibling
directory at start, and one that appears before a refresh (SIGHUP), must not
stop or kill a server that holds a verified release.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_host.harness import client_caller
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.limits import (
    MAX_ARGUMENT_DEPTH,
    MAX_JSON_DEPTH,
    MAX_TOML_DEPTH,
    MAX_TRUST_FILE_BYTES,
    depth_exceeds,
)
from rimthan_workflow_registry.release.catalogue_parse import _parse_toml as parse_toml
from rimthan_workflow_registry.release.format import MANIFEST_NAME, SIGNATURES_DIR, signature_name
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.artifact_checks import parse_json_artifact
from rimthan_workflow_registry.strict_json import parse_strict_json
from support.releases import (
    KeyPair,
    build_release,
    make_keypair,
    resign_release,
    scaffold_source,
    trust_dir,
    trust_file,
)
from support.servers import build_world, harness, http_client_for, http_server, serve_args

VERY_DEEP = 100_000


def nested_json(depth: int) -> str:
    """An object whose value is ``depth - 1`` nested arrays: exactly ``depth`` containers deep."""
    return '{"x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def nested_toml(depth: int) -> str:
    """A TOML document (the root table is depth 1) whose key ``x`` holds ``depth - 1`` nested arrays."""
    return "x = " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


# --------------------------------------------------------------------------- the limits themselves


def test_depth_limits_just_below_and_just_above() -> None:
    assert not depth_exceeds(json.loads(nested_json(MAX_JSON_DEPTH)), MAX_JSON_DEPTH)
    assert depth_exceeds(json.loads(nested_json(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH)
    parse_strict_json(nested_json(MAX_JSON_DEPTH), where="x.json", code=FailureCode.SCHEMA_INVALID)
    parse_json_artifact(nested_json(MAX_JSON_DEPTH).encode())
    parse_toml(nested_toml(MAX_TOML_DEPTH).encode(), "x.toml")
    for depth in (MAX_JSON_DEPTH + 1, VERY_DEEP):
        with pytest.raises(RegistryError) as err:
            parse_strict_json(nested_json(depth), where="x.json", code=FailureCode.SCHEMA_INVALID)
        assert err.value.code is FailureCode.SCHEMA_INVALID and "deeper than 64" in err.value.message
        with pytest.raises(ValueError, match="deeper than 64"):
            parse_json_artifact(nested_json(depth).encode())
    for depth in (MAX_TOML_DEPTH + 1, VERY_DEEP):
        with pytest.raises(RegistryError) as err:
            parse_toml(nested_toml(depth).encode(), "x.toml")
        assert err.value.code is FailureCode.CATALOGUE_INVALID and "deeper than 32" in err.value.message


class _Dict(dict[str, object]):
    pass


class _List(list[object]):
    pass


def _depth(value: object) -> int:
    """The reference: containers (``dict``/``list`` and their subclasses) counted recursively."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | st.tuples(st.integers())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(_List)
        | st.dictionaries(st.text(max_size=2), inner, max_size=4)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3).map(_Dict)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, limit=st.integers(min_value=0, max_value=8))
def test_depth_exceeds_is_the_recursive_depth_past_the_limit(value: object, limit: int) -> None:
    """Containers are exactly dicts and lists (subclasses too; a tuple is a scalar here), at any shape."""
    assert depth_exceeds(value, limit) is (_depth(value) > limit)
    assert depth_exceeds({"a": [value], "b": "x"}, limit) is (_depth(value) + 2 > limit)


# --------------------------------------------------------------------------- through verify_release


def _deep_manifest(release: Path, depth: int, key: KeyPair | None) -> None:
    data = nested_json(depth).encode()
    (release / MANIFEST_NAME).write_bytes(data)
    if key is not None:  # signed by the trusted key: the parse must still refuse it
        shutil.rmtree(release / SIGNATURES_DIR)
        (release / SIGNATURES_DIR).mkdir()
        (release / SIGNATURES_DIR / signature_name(key.key_id)).write_bytes(key.signing_key.sign(data))


@pytest.fixture
def signer(tmp_path: Path) -> KeyPair:
    return make_keypair(tmp_path / "keys", "signer")


def _release(tmp_path: Path, signer: KeyPair, name: str) -> Path:
    return build_release(scaffold_source(tmp_path / "src" / name), tmp_path / "rel" / name, [signer])


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_deep_manifest_is_manifest_invalid(tmp_path: Path, signer: KeyPair, signed: bool) -> None:
    trust = load_trust(trust_dir(tmp_path / "trust", signer))
    for depth in (MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 1_000, VERY_DEEP):
        release = _release(tmp_path, signer, f"m{depth}{signed}")
        _deep_manifest(release, depth, signer if signed else None)
        with pytest.raises(RegistryError) as err:
            verify_release(release, trust)
        assert err.value.code is FailureCode.MANIFEST_INVALID, err.value.one_line()
        # just below the limit the manifest is refused by its schema, not by the depth limit
        assert ("deeper than 64" in err.value.message) is (depth > MAX_JSON_DEPTH), err.value.message


def _deep_schema(depth: int):  # type: ignore[no-untyped-def]
    def edit(catalogue: Path) -> None:
        path = catalogue / "schemas" / "summary.schema.json"
        schema = json.loads(path.read_text("utf-8"))
        # ``default`` may hold any value: nest arrays there until the document is ``depth`` deep
        schema["default"] = json.loads(nested_json(depth))["x"]
        path.write_text(json.dumps(schema), "utf-8")

    return edit


def _deeper_schema_text(catalogue: Path) -> None:
    path = catalogue / "schemas" / "summary.schema.json"
    path.write_text(
        '{"type":"object","properties":' + '{"a":{"type":"object","properties":' * 600 + "{}" + "}}" * 600 + "}"
    )


def _deep_workflow_toml(depth: int):  # type: ignore[no-untyped-def]
    def edit(catalogue: Path) -> None:
        path = catalogue / "workflows" / "demo.toml"
        path.write_text(nested_toml(depth) + path.read_text("utf-8"), "utf-8")

    return edit


def test_deep_catalogue_files_signed_by_a_trusted_key_are_refused(tmp_path: Path, signer: KeyPair) -> None:
    trust = load_trust(trust_dir(tmp_path / "trust", signer))
    ok = _release(tmp_path, signer, "schema-at-limit")
    resign_release(ok, [signer], edit=_deep_schema(MAX_JSON_DEPTH))
    assert verify_release(ok, trust).release_id == "demo@0.1.0"
    cases = {
        "schema-past-limit": (_deep_schema(MAX_JSON_DEPTH + 1), FailureCode.SCHEMA_INVALID, "deeper than 64"),
        "schema-1200-deep": (_deeper_schema_text, FailureCode.SCHEMA_INVALID, "deeper than 64"),
        "toml-at-limit": (_deep_workflow_toml(MAX_TOML_DEPTH), FailureCode.CATALOGUE_INVALID, "unknown key"),
        "toml-past-limit": (_deep_workflow_toml(MAX_TOML_DEPTH + 1), FailureCode.CATALOGUE_INVALID, "deeper than 32"),
        "toml-very-deep": (_deep_workflow_toml(VERY_DEEP), FailureCode.CATALOGUE_INVALID, "deeper than 32"),
    }
    for name, (edit, code, words) in cases.items():
        release = _release(tmp_path, signer, name)
        resign_release(release, [signer], edit=edit)
        with pytest.raises(RegistryError) as err:
            verify_release(release, trust)
        assert err.value.code is code, (name, err.value.one_line())
        assert words in err.value.message, (name, err.value.message)


# --------------------------------------------------------------------------- through the installed CLIs


def _one_line_refusal(proc: subprocess.CompletedProcess[str], code: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and code in errors[0], proc.stderr


def test_the_clis_refuse_deep_releases_in_one_line(tmp_path: Path, signer: KeyPair) -> None:
    trust = trust_dir(tmp_path / "trust", signer)
    deep_manifest = _release(tmp_path, signer, "cli-manifest")
    _deep_manifest(deep_manifest, VERY_DEEP, signer)
    deep_schema = _release(tmp_path, signer, "cli-schema")
    resign_release(deep_schema, [signer], edit=_deeper_schema_text)
    for release, code in ((deep_manifest, "manifest_invalid"), (deep_schema, "schema_invalid")):
        verify = subprocess.run(
            [str(Path(sys.executable).parent / "rimthan-pack"), "verify", str(release), "--trust", str(trust)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        _one_line_refusal(verify, code)
        serve = subprocess.run(
            [sys.executable, "-m", "rimthan_workflow_mcp", "serve", "--release", str(release), "--trust", str(trust)]
            + ["--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert serve.returncode != 0 and "Traceback" not in serve.stderr, serve.stderr
        assert code in serve.stderr, serve.stderr


def _trust_file_with(tmp_path: Path, signer: KeyPair, extra: str) -> Path:
    """A real k-of-n trust file naming ``signer`` whose ``threshold`` line is replaced by ``extra``."""
    path = trust_file(tmp_path / "trust-file", [signer], threshold=1)
    lines = [line for line in path.read_text("utf-8").splitlines() if not line.startswith("threshold")]
    path.write_text(extra + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_deep_or_huge_trust_file_is_refused_in_one_line(tmp_path: Path, signer: KeyPair) -> None:
    """The operator's trust.toml has the catalogue TOML's limits: 32 deep parses, 33 and deeper are refused."""
    at_limit = _trust_file_with(tmp_path / "at", signer, "threshold = " + nested_toml(MAX_TOML_DEPTH)[4:])
    with pytest.raises(RegistryError) as below:
        load_trust(at_limit)
    # parsed: refused by the trust file's own rule, not by the depth limit
    assert below.value.code is FailureCode.TRUST_STORE_INVALID and "threshold must be an integer" in below.value.message
    assert load_trust(_trust_file_with(tmp_path / "ok", signer, "threshold = 1\n")).threshold == 1
    for depth in (MAX_TOML_DEPTH + 1, 20_000):  # 20,000 deep: past tomllib's recursion, inside the size limit
        deep = _trust_file_with(tmp_path / f"deep-{depth}", signer, "threshold = " + nested_toml(depth)[4:])
        with pytest.raises(RegistryError) as err:
            load_trust(deep)
        assert err.value.code is FailureCode.TRUST_STORE_INVALID and "deeper than 32" in err.value.message
    just_fits = _trust_file_with(tmp_path / "fits", signer, "threshold = 1\n")
    padding = MAX_TRUST_FILE_BYTES - len(just_fits.read_bytes()) - 1
    just_fits.write_text(just_fits.read_text("utf-8") + "#" * padding + "\n", encoding="utf-8")
    assert len(just_fits.read_bytes()) == MAX_TRUST_FILE_BYTES and load_trust(just_fits).threshold == 1
    too_big = _trust_file_with(tmp_path / "big", signer, "threshold = 1\n")
    too_big.write_text(just_fits.read_text("utf-8") + "#\n", encoding="utf-8")
    with pytest.raises(RegistryError) as big:
        load_trust(too_big)
    assert big.value.code is FailureCode.TRUST_STORE_INVALID and str(MAX_TRUST_FILE_BYTES) in big.value.message
    release = _release(tmp_path, signer, "trusted")
    verify = subprocess.run(
        [str(Path(sys.executable).parent / "rimthan-pack"), "verify", str(release), "--trust", str(deep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    _one_line_refusal(verify, "trust_store_invalid")


# --------------------------------------------------------------------------- a real server process


def _junk(releases: Path, name: str, signer: KeyPair) -> Path:
    """A directory named like a release of the catalogue, holding a manifest 100,000 levels deep."""
    junk = releases / name
    (junk / SIGNATURES_DIR).mkdir(parents=True)
    (junk / "catalogue").mkdir()
    _deep_manifest(junk, VERY_DEEP, signer)
    return junk


def test_junk_at_start_and_at_refresh_never_stops_or_kills_the_server(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    releases = tmp_path / "releases"
    good = world.publish("1.2.0", releases)
    _junk(releases, "research-decision-1.1.0", world.key)  # an older sibling: loaded to be held at start
    args = serve_args(world, good, state_dir=tmp_path / "state", releases_dir=releases)
    with http_server(args) as server:

        async def call() -> str:
            async with http_client_for(server.url) as client:
                run = harness(client_caller(client), tmp_path / f"p{len(server.lines)}")
                started = await run.start("research", initial_version="1.2.0")
                return str(started.release)

        assert anyio.run(call) == "research-decision@1.2.0"
        _junk(releases, "research-decision-1.9.0", world.key)  # a newer sibling: tried at refresh
        mark = len(server.lines)
        server.process.send_signal(signal.SIGHUP)
        done = server.wait_for(r'"event": "refresh done".*', after=mark)
        assert '"outcome": "rejected"' in done.group(0) and "manifest_invalid" in done.group(0)
        assert anyio.run(call) == "research-decision@1.2.0"
        assert server.process.poll() is None
    assert "Traceback" not in server.stderr()
    assert "RecursionError" not in server.stderr()


def test_deep_tool_arguments_are_invalid_arguments(tmp_path: Path) -> None:
    from rimthan_workflow_mcp.server import create_mcp_application
    from support.checked_client import CheckedClient
    from support.servers import structured_error

    world = build_world(tmp_path / "world")
    app = create_mcp_application(world.provider("1.2.0"))

    def state(depth: int) -> dict[str, object]:
        # arguments -> confirmed_state -> state -> objective -> nested arrays
        value = json.loads(nested_json(depth - 3))
        return {"state": {"objective": value}, "confirmations": {}}

    async def scenario() -> None:
        async with CheckedClient(app) as client:
            run = harness(client_caller(client), tmp_path / "p")
            host = run.host.to_json()
            for depth, deep in ((MAX_ARGUMENT_DEPTH, False), (MAX_ARGUMENT_DEPTH + 1, True), (150, True)):
                result = await client.call_tool(
                    "rimthan.start_workflow", {"workflow": "research", "confirmed_state": state(depth), "host": host}
                )
                error = structured_error(result)
                assert error["code"] != "internal_error", error
                assert ("deeper than 64" in error["message"]) is deep, error

    anyio.run(scenario)
