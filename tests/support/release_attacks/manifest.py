"""Release attacks on the manifest: the file itself, non-canonical bytes, duplicate keys, floats, schema, paths."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.release.format import Manifest

from support.release_attacks import (
    Attack,
    Expect,
    F,
    World,
    case,
    first_size,
    manifest_path,
    manifest_text,
    manifest_value,
    resign_text,
    resign_value,
    sig,
    sign_raw,
)
from support.releases import (
    resign_release,
)

# --------------------------------------------------------------------------- the manifest file itself


@case("manifest_missing")
def _(w: World, rel: Path) -> Expect:
    manifest_path(rel).unlink()
    return Expect(F.MANIFEST_MISSING, manifest_path(rel))


@case("manifest_empty_file")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, b""))


@case("manifest_empty_object")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, b"{}"))


@case("manifest_truncated")
def _(w: World, rel: Path) -> Expect:
    data = manifest_path(rel).read_bytes()
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, data[: len(data) // 2]))


@case("manifest_is_a_directory")
def _(w: World, rel: Path) -> Expect:
    manifest_path(rel).unlink()
    manifest_path(rel).mkdir()
    return Expect(F.FILE_UNLISTED, manifest_path(rel))


@case("manifest_edited_without_resigning")
def _(w: World, rel: Path) -> Expect:
    path = manifest_path(rel)
    path.write_bytes(path.read_bytes().replace(b'"title":"Demo"', b'"title":"Demx"', 1))
    return Expect(F.SIGNATURE_INVALID, sig(rel, w.keys.alice))


@case("manifest_not_utf8")
def _(w: World, rel: Path) -> Expect:
    data = manifest_path(rel).read_bytes().replace(b'"title":"Demo"', b'"title":"D\xe9mo"', 1)
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, data))


@case("manifest_utf16")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, manifest_text(rel).encode("utf-16")))


@case("manifest_utf8_bom")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, b"\xef\xbb\xbf" + manifest_path(rel).read_bytes()))


@case("manifest_nan")
def _(w: World, rel: Path) -> Expect:
    size = first_size(rel)
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, f'"size":{size}', '"size":NaN'))


@case("manifest_lone_surrogate_escape")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, '"title":"Demo"', '"title":"Demo\\ud800"'))


@case("manifest_json_with_trailing_garbage")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_INVALID, sign_raw(w, rel, manifest_path(rel).read_bytes() + b"{}"))


# --------------------------------------------------------------------------- non-canonical bytes (re-signed)


@case("noncanonical_trailing_newline")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, manifest_path(rel).read_bytes() + b"\n"))


@case("noncanonical_leading_space")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, b" " + manifest_path(rel).read_bytes()))


@case("noncanonical_pretty_printed")
def _(w: World, rel: Path) -> Expect:
    data = json.dumps(manifest_value(rel), indent=2, sort_keys=True, ensure_ascii=False).encode()
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, data))


@case("noncanonical_space_after_separators")
def _(w: World, rel: Path) -> Expect:
    data = json.dumps(manifest_value(rel), sort_keys=True, ensure_ascii=False).encode()
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, data))


@case("noncanonical_key_order")
def _(w: World, rel: Path) -> Expect:
    value = manifest_value(rel)
    data = json.dumps({k: value[k] for k in reversed(list(value))}, separators=(",", ":")).encode()
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, data))


@case("noncanonical_nested_key_order")
def _(w: World, rel: Path) -> Expect:
    value = manifest_value(rel)
    value["files"][0] = {k: value["files"][0][k] for k in reversed(list(value["files"][0]))}
    data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return Expect(F.MANIFEST_NOT_CANONICAL, sign_raw(w, rel, data))


@case("noncanonical_escaped_ascii_letter")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_NOT_CANONICAL, resign_text(w, rel, '"title":"Demo"', '"title":"D\\u0065mo"'))


@case("noncanonical_escaped_solidus")
def _(w: World, rel: Path) -> Expect:
    return Expect(F.MANIFEST_NOT_CANONICAL, resign_text(w, rel, '"path":"adapters/', '"path":"adapters\\/'))


@case("noncanonical_escaped_non_ascii")
def _(w: World, rel: Path) -> Expect:
    resign_value(w, rel, lambda v: v["release"].__setitem__("title", "Démo"))
    return Expect(F.MANIFEST_NOT_CANONICAL, resign_text(w, rel, '"title":"Démo"', '"title":"D\\u00e9mo"'))


@case("noncanonical_negative_zero")
def _(w: World, rel: Path) -> Expect:
    resign_value(w, rel, lambda v: v["release"].__setitem__("created", 0))
    return Expect(F.MANIFEST_NOT_CANONICAL, resign_text(w, rel, '"created":0', '"created":-0'))


# --------------------------------------------------------------------------- duplicate keys, floats, schema


@case("duplicate_top_level_key")
def _(w: World, rel: Path) -> Expect:
    where = resign_text(w, rel, '{"files":', '{"files":[],"files":')
    return Expect(F.MANIFEST_DUPLICATE_KEY, where)


@case("duplicate_key_inside_file_entry")
def _(w: World, rel: Path) -> Expect:
    # the parser would keep the second sha256: an attacker's way to smuggle a second digest past a reviewer
    where = resign_text(w, rel, '"sha256":', '"sha256":"' + "0" * 64 + '","sha256":')
    return Expect(F.MANIFEST_DUPLICATE_KEY, where)


@case("float_size")
def _(w: World, rel: Path) -> Expect:
    size = first_size(rel)
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, f'"size":{size}', f'"size":{size}.0'))


@case("float_size_exponent")
def _(w: World, rel: Path) -> Expect:
    size = first_size(rel)
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, f'"size":{size}', f'"size":{size}e0'))


@case("float_created")
def _(w: World, rel: Path) -> Expect:
    resign_value(w, rel, lambda v: v["release"].__setitem__("created", 5))
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, '"created":5', '"created":5.0'))


@case("size_beyond_interoperable_integers")
def _(w: World, rel: Path) -> Expect:
    size = first_size(rel)
    return Expect(F.MANIFEST_INVALID, resign_text(w, rel, f'"size":{size}', '"size":18446744073709551617'))


def _first_file(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda value: edit(value["files"][0])


def schema_break(edit: Callable[[dict[str, Any]], None]) -> Attack:
    """A canonical, re-signed manifest whose values break the closed manifest schema or its order rules."""

    def attack(w: World, rel: Path) -> Expect:
        return Expect(F.MANIFEST_INVALID, resign_value(w, rel, edit))

    return attack


for _name, _edit in {
    "size_as_string": _first_file(lambda f: f.update(size=str(f["size"]))),
    "size_negative": _first_file(lambda f: f.update(size=-1)),
    "size_boolean": _first_file(lambda f: f.update(size=True)),
    "size_null": _first_file(lambda f: f.update(size=None)),
    "digest_uppercase_hex": _first_file(lambda f: f.update(sha256=f["sha256"].upper())),
    "digest_with_prefix": _first_file(lambda f: f.update(sha256="sha256:" + f["sha256"])),
    "unknown_file_entry_field": _first_file(lambda f: f.update(mode=4095)),
    "wrong_media_type": _first_file(lambda f: f.update(media_type="text/html")),
    "unknown_manifest_field": lambda v: v.update(extra=1),
    "wrong_manifest_format": lambda v: v.update(format="rimthan.release-manifest/0"),
    "empty_files_list": lambda v: v.update(files=[]),
    "files_not_sorted": lambda v: v["files"].reverse(),
    "file_listed_twice": lambda v: v["files"].insert(0, v["files"][0]),
    "release_id_inconsistent": lambda v: v["release"].update(id="demo@9.9.9"),
    "path_overlong": lambda v: v["files"][-1].update(path="z/" * 600),
    "workflows_missing": lambda v: v.pop("workflows"),
}.items():
    case(_name)(schema_break(_edit))


# --------------------------------------------------------------------------- unsafe paths in a signed manifest


def listed_path(bad: str) -> Attack:
    """The manifest (re-signed by a trusted key) lists ``bad`` as a catalogue file."""

    def attack(w: World, rel: Path) -> Expect:
        def point(manifest: Manifest) -> Manifest:
            files = [*manifest.files, replace(manifest.files[0], path=bad)]
            return replace(manifest, files=tuple(sorted(files, key=lambda f: f.path)))

        resign_release(rel, w.signers, manifest_edit=point)
        return Expect(F.PATH_UNSAFE, manifest_path(rel))

    return attack


for _name, _bad in {
    "path_dotdot_escape": "../escape.md",
    "path_dotdot_into_signatures": "../signatures/x.sig",
    "path_dotdot_in_middle": "assets/../../manifest.json",
    "path_absolute": "/etc/passwd",
    "path_dot_segment": "assets/./brief.md",
    "path_empty_segment": "assets//brief.md",
    "path_trailing_slash": "assets/",
    "path_backslash": "assets\\..\\..\\escape.md",
    "path_nul_byte": "assets/a\x00.md",
    "path_control_character": "assets/a\x1b[2J.md",
    "path_not_nfc": "cafe\u0301.md",
    "path_case_colliding": "CATALOGUE.toml",
    "path_file_is_also_directory": "catalogue.toml/x.md",
}.items():
    case(_name)(listed_path(_bad))
