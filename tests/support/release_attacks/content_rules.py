"""Release attacks by an insider: content the catalogue rules refuse, re-signed with trusted keys."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rimthan_workflow_registry.release.format import Manifest

from support.release_attacks import (
    Expect,
    F,
    World,
    case,
    cat,
    manifest_path,
)
from support.releases import (
    resign_release,
)

# --------------------------------------------------------------------------- content rules with a trusted key


@case("insider_manifest_identity_differs_from_catalogue")
def _(w: World, rel: Path) -> Expect:
    resign_release(rel, w.signers, manifest_edit=lambda m: replace(m, release=replace(m.release, title="Other")))
    return Expect(F.MANIFEST_INVALID, manifest_path(rel))


@case("insider_manifest_workflow_alias_added")
def _(w: World, rel: Path) -> Expect:
    def alias(m: Manifest) -> Manifest:
        return replace(m, workflows=tuple(replace(x, entry_aliases=("admin",)) for x in m.workflows))

    resign_release(rel, w.signers, manifest_edit=alias)
    return Expect(F.MANIFEST_INVALID, manifest_path(rel))


@case("insider_manifest_claims_newer_version")
def _(w: World, rel: Path) -> Expect:
    def bump(m: Manifest) -> Manifest:
        return replace(m, release=replace(m.release, version="9.0.0"))

    resign_release(rel, w.signers, manifest_edit=bump)
    return Expect(F.MANIFEST_INVALID, manifest_path(rel))


@case("insider_invalid_json_schema")
def _(w: World, rel: Path) -> Expect:
    target = cat(rel, "schemas/summary.schema.json")
    resign_release(rel, w.signers, edit=lambda c: target.write_text('{"type": "not-a-type"}'))
    return Expect(F.SCHEMA_INVALID, target)


@case("insider_schema_with_duplicate_keys")
def _(w: World, rel: Path) -> Expect:
    target = cat(rel, "schemas/summary.schema.json")
    resign_release(rel, w.signers, edit=lambda c: target.write_text('{"type": "object", "type": "string"}'))
    return Expect(F.SCHEMA_INVALID, target)


@case("insider_schema_number_overflowing_to_infinity")
def _(w: World, rel: Path) -> Expect:  # Python reads 1e999 as inf: the strict parser took what it calls non-JSON
    target = cat(rel, "schemas/summary.schema.json")
    resign_release(rel, w.signers, edit=lambda c: target.write_text('{"type": "number", "maximum": 1e999}'))
    return Expect(F.SCHEMA_INVALID, target)


@case("insider_schema_ref_to_a_url")
def _(w: World, rel: Path) -> Expect:  # loaded, then the verifier fetched the URL on a call and let it decide
    target = cat(rel, "schemas/summary.schema.json")
    resign_release(rel, w.signers, edit=lambda c: target.write_text('{"$ref": "http://127.0.0.1:9/summary.json"}'))
    return Expect(F.SCHEMA_INVALID, target)


@case("insider_schema_ref_to_nothing")
def _(w: World, rel: Path) -> Expect:  # loaded, then failed every check that reached it
    target = cat(rel, "schemas/summary.schema.json")
    resign_release(rel, w.signers, edit=lambda c: target.write_text('{"items": {"$ref": "#/$defs/none"}}'))
    return Expect(F.SCHEMA_INVALID, target)


@case("insider_toml_integer_past_json")
def _(w: World, rel: Path) -> Expect:  # built and verified, then every start failed to serialise its step
    target = cat(rel, "workflows/demo.toml")
    big = f"max_bytes = {2**53}"
    resign_release(
        rel, w.signers, edit=lambda c: target.write_text(target.read_text().replace("max_bytes = 65536", big))
    )
    return Expect(F.CATALOGUE_INVALID, target)


@case("insider_toml_integer_of_5000_digits")
def _(w: World, rel: Path) -> Expect:  # tomllib's int() raised ValueError, past every refusal
    target = cat(rel, "catalogue.toml")
    resign_release(
        rel,
        w.signers,
        edit=lambda c: target.write_text(target.read_text().replace("format = 1", "format = " + "1" * 5000)),
    )
    return Expect(F.CATALOGUE_INVALID, target)


@case("insider_first_step_not_setup")
def _(w: World, rel: Path) -> Expect:
    target = cat(rel, "workflows/demo.toml")
    resign_release(
        rel, w.signers, edit=lambda c: target.write_text(target.read_text().replace('"setup-workspace"', '"setup"'))
    )
    return Expect(F.FIRST_STEP_NOT_SETUP, target)


@case("insider_referenced_file_removed")
def _(w: World, rel: Path) -> Expect:
    resign_release(rel, w.signers, edit=lambda c: (c / "assets/instructions/plan.md").unlink())
    return Expect(F.REFERENCE_UNRESOLVED, cat(rel, "workflows/demo.toml"))


@case("insider_catalogue_toml_not_toml")
def _(w: World, rel: Path) -> Expect:
    target = cat(rel, "catalogue.toml")
    resign_release(rel, w.signers, edit=lambda c: target.write_text("format = = 1\n"))
    return Expect(F.CATALOGUE_INVALID, target)


@case("insider_instruction_not_utf8")
def _(w: World, rel: Path) -> Expect:
    target = cat(rel, "assets/instructions/plan.md")
    resign_release(rel, w.signers, edit=lambda c: target.write_bytes(b"# Plan\n\n\xff\xfe broken text\n"))
    return Expect(F.CATALOGUE_INVALID, target)
