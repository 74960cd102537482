"""A misspelt JSON Schema keyword in a catalogue is refused at build, wherever in the schema it sits.

Draft 2020-12 ignores a keyword it does not define, so ``"minItem": 1`` (for
``minItems``) would build, sign and serve a schema weaker than its author
meant. ``rimthan-pack build`` refuses it (``schema_invalid``) naming the file,
the JSON pointer and the keyword meant, with a ``next:`` line; an annotation
the author marks as theirs (``x-...``) builds, and so do property names and
data (``examples``) that merely look like keywords.

Every test drives the installed console script on a real source copied from
``catalogues/`` and real keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from jsonpointer import resolve_pointer
from rimthan_packager.source import read_source
from rimthan_workflow_registry.release import ReleaseLoader
from support.pack_cli import pack
from support.refusals import refusal
from support.releases import KeyPair, make_keypair, packaged_source

STATE = "schemas/confirmed-state.schema.json"
EVIDENCE = "schemas/evidence-log.schema.json"


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "author")


def _copy(tmp_path: Path) -> Path:
    source = tmp_path / "research-decision" / "1.3.0"
    shutil.copytree(packaged_source("1.3.0"), source)
    return source


def _edit(source: Path, name: str, edit: Any) -> None:
    path = source / name
    document = json.loads(path.read_text("utf-8"))
    edit(document)
    path.write_text(json.dumps(document, indent=2) + "\n", "utf-8")


def _rename(document: Any, pointer: str, old: str, new: str) -> None:
    schema = resolve_pointer(document, pointer)
    schema[new] = schema.pop(old)


# (file, the schema's JSON pointer, the keyword misspelt, the misspelling): top level, a nested property,
# inside items, inside $defs, and inside $defs > then > properties
TYPOS = [
    (STATE, "", "required", "requird"),
    (EVIDENCE, "/properties/searches", "minItems", "minItem"),
    (EVIDENCE, "/properties/searches/items", "properties", "propertes"),
    (EVIDENCE, "/$defs/date", "pattern", "patern"),
    (EVIDENCE, "/$defs/option_assessment/then/properties/evidence_ids", "minItems", "minItem"),
]


@pytest.mark.parametrize(("name", "pointer", "meant", "typo"), TYPOS)
def test_a_misspelt_keyword_is_refused_with_its_file_pointer_and_the_keyword_meant(
    signer: KeyPair, tmp_path: Path, name: str, pointer: str, meant: str, typo: str
) -> None:
    source = _copy(tmp_path)
    _edit(source, name, lambda document: _rename(document, pointer, meant, typo))

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1, built.stderr
    assert said.error.startswith(
        f"error: schema_invalid: {source / name}: unknown JSON Schema keyword {typo!r} (did you mean {meant!r}?) "
        f"at JSON pointer {pointer + '/' + typo!r} inside the schema"
    ), said.error
    assert said.next.startswith(f"rename it {meant!r}, or, for an annotation of your own, start its name with 'x-'")
    assert not (tmp_path / "rel").exists()


def test_an_unknown_keyword_close_to_none_is_refused_too(signer: KeyPair, tmp_path: Path) -> None:
    source = _copy(tmp_path)
    _edit(source, EVIDENCE, lambda document: document["properties"]["route"].update({"frobnicate": True}))

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1, built.stderr
    assert said.error.startswith(
        f"error: schema_invalid: {source / EVIDENCE}: unknown JSON Schema keyword 'frobnicate' "
        "at JSON pointer '/properties/route/frobnicate' inside the schema"
    ), said.error
    assert said.next.startswith("use a Draft 2020-12 keyword, or, for an annotation of your own")


def _annotate(document: Any) -> None:
    document["x-owner"] = {"team": "research", "minItem": 1}  # an annotation's value is never read as a schema
    searches = document["properties"]["searches"]
    searches["items"]["x-review"] = "quarterly"
    searches["examples"] = [[{"requird": "data, not a schema"}]]
    searches["items"]["properties"]["minItem"] = {"type": "integer", "x-unit": "results"}  # a property's name


def test_x_annotations_property_names_and_data_that_look_like_keywords_build(signer: KeyPair, tmp_path: Path) -> None:
    source = _copy(tmp_path)
    _edit(source, EVIDENCE, _annotate)

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize("version", ["1.2.0", "1.3.0"])
def test_the_packaged_catalogues_still_build(signer: KeyPair, tmp_path: Path, version: str) -> None:
    built = pack("build", packaged_source(version), "--key", signer.private_path, "--out", tmp_path / "rel")

    assert built.returncode == 0, built.stderr


def test_the_loader_still_loads_a_misspelt_keyword_so_signed_releases_keep_loading(tmp_path: Path) -> None:
    """The check is the build's alone: the loader a server runs on a signed release accepts the keyword."""
    source = _copy(tmp_path)
    schema = source / "schemas" / "evidence-log.schema.json"
    schema.write_text(schema.read_text("utf-8").replace('"minItems"', '"minItem"', 1), "utf-8")

    loaded = ReleaseLoader.load(read_source(source))

    assert "minItem" in json.dumps(loaded.schemas.documents["schemas/evidence-log.schema.json"])
