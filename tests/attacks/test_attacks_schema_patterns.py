"""A schema ``pattern`` whose matching backtracks exponentially: refused by ``rimthan-pack check`` and at load.

Found by fuzzing catalogue sources: ``^(a+)+$`` on a string a worked example
(or, once served, a model's artifact) holds as forty ``a`` and a ``!`` kept
``rimthan-pack check`` running for hours. Each test runs the installed
console script on real files, with a timeout far above any refusal: a
command still running then is matching the pattern.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_workflow_registry.release.schema_patterns import backtracking_pattern
from support.refusals import refusal
from support.releases import build_release, make_keypair, packaged_source, resign_release, trust_dir

BIN = Path(sys.executable).parent
HANG_SECONDS = 60  # a refusal takes a second or two; the pattern's match takes hours
SCHEMA = "schemas/evidence-log.schema.json"
CATASTROPHIC = "^(a+)+$"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / args[0]), *map(str, args[1:])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_SECONDS, stdin=subprocess.DEVNULL)


def _set_pattern(catalogue: Path, pattern: str) -> None:
    """The evidence log's ``searches[].where`` takes ``pattern``; the worked example's first one is its worst case."""
    schema = json.loads((catalogue / SCHEMA).read_text("utf-8"))
    schema["properties"]["searches"]["items"]["properties"]["where"]["pattern"] = pattern
    (catalogue / SCHEMA).write_text(json.dumps(schema, indent=2) + "\n", "utf-8")
    example = catalogue / "examples" / "evidence-log.json"
    if example.is_file():
        document = json.loads(example.read_text("utf-8"))
        document["searches"][0]["where"] = "a" * 40 + "!"
        example.write_text(json.dumps(document, indent=2) + "\n", "utf-8")


def test_check_refuses_a_pattern_that_backtracks_exponentially(tmp_path: Path) -> None:
    source = tmp_path / "research-decision" / "1.3.0"
    shutil.copytree(packaged_source("1.3.0"), source)
    _set_pattern(source, CATASTROPHIC)
    said = refusal(_run("rimthan-pack", "check", source).stderr)
    assert said.code == "schema_invalid" and f"{source / SCHEMA}: pattern '{CATASTROPHIC}'" in said.error, said
    assert "exponential time" in said.error, said


def test_a_signed_release_with_such_a_pattern_is_not_loaded(tmp_path: Path) -> None:
    """An insider's release (signed by a trusted key, the packager's checks skipped) is refused by the verifier."""
    key = make_keypair(tmp_path / "keys", "insider")
    release = build_release(packaged_source("1.3.0"), tmp_path / "releases", [key])
    resign_release(release, [key], edit=lambda catalogue: _set_pattern(catalogue, CATASTROPHIC))
    done = _run("rimthan-mcp", "check", "--release", release, "--trust", trust_dir(tmp_path / "trust", key))
    assert done.returncode == 1, done.stdout
    said = refusal(done.stderr)
    assert said.code == "schema_invalid" and "exponential time" in said.error, said


@pytest.mark.parametrize(
    "pattern",
    [
        "^(a+)+$",
        "^(a|a)*$",
        r"(\w+\s?)+$",
        "^(x*y*)*$",
        "((a+)b?)+",
        "^([a-z]+-?)+$",
        "(a*)*",
        "(.*a){2,}",
        "^(?i:(a+)+)$",
        r"(a+)\1*",
        "^(a?|b?)*$",
    ],
)
def test_a_pattern_that_can_split_a_text_two_ways_is_said(pattern: str) -> None:
    assert backtracking_pattern({"type": "string", "pattern": pattern}) is not None
    assert backtracking_pattern({"type": "object", "patternProperties": {pattern: True}}) is not None


@pytest.mark.parametrize(
    "pattern",
    [
        "^E[1-9][0-9]*$",
        "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$",
        "^[0-9a-f]{64}$",
        "^research/[a-z0-9-]+\\.(json|md)$",
        "^[a-z]+(-[a-z0-9]+)*$",
        r"^(\d{3}-)*\d{4}$",
        "((a+)b)*",
        "^(foo|bar)+$",
        r"^\S+@\S+$",
        r"^[^\s]+( [^\s]+)*$",
        "^(a|ab)*c$",
        "[",
    ],
)
def test_a_pattern_whose_repeats_cannot_split_a_text_two_ways_passes(pattern: str) -> None:
    """The packaged catalogues' patterns among them; an invalid one ("[") is the metaschema check's to refuse."""
    assert backtracking_pattern({"properties": {"id": {"type": "string", "pattern": pattern}}}) is None
