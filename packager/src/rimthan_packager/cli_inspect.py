"""``rimthan-pack inspect`` and ``verify``: a release shown whole, and a release verified as the server loads it.

``inspect`` shows identity, files, signers, workflows and their steps.
Registered on the ``rimthan-pack`` group when the group first looks one of
them up (:data:`~rimthan_packager.cli_options.COMMANDS_ELSEWHERE`): a build
does not import this module. The verifier is imported only when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rimthan_clikit import emit_json, reports_refusals
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE

from .cli_options import _JSON, _TRUST_HELP, _epilog, _trust_option, cli
from .user_cache import remembered_checks

if TYPE_CHECKING:
    from rimthan_workflow_registry.release import ReleaseDiff, ReleaseInspection, TrustStore, WorkflowChange


def _inspection_json(found: ReleaseInspection, trust: TrustStore | None) -> dict[str, Any]:
    catalogue = found.loaded.catalogue
    return {
        "ok": True,
        "release": str(found.root),
        "identity": found.manifest.release.to_json(),
        "description": catalogue.description,
        "manifest_digest": found.manifest_digest,
        "files": {
            "count": len(found.manifest.files),
            "bytes": found.manifest.total_size,
            "entries": [
                {"path": f.path, "size": f.size, "sha256": f.sha256, "media_type": f.media_type}
                for f in found.manifest.files
            ],
        },
        "signatures": [
            {
                "key_id": k,
                "verified": None if found.verified_signers is None else k in found.verified_signers,
                "name": trust.names.get(k) if trust is not None else None,
            }
            for k in found.signature_key_ids
        ],
        "threshold": None
        if trust is None or found.verified_signers is None
        else {"required": trust.threshold, "verified": len(set(found.verified_signers))},
        "workflows": [
            {
                "id": w.id,
                "version": w.version,
                "owner": w.owner,
                "title": w.title,
                "entry_aliases": list(w.entry_aliases),
                "host_adapters": list(w.host_adapters),
                "steps": [
                    {
                        "id": s.id,
                        "title": s.title,
                        "gated": s.gated,
                        "terminal": s.terminal,
                        "next": list(s.targets),
                        "outputs": [o.id for o in s.outputs],
                        "output_details": [
                            {"id": o.id, "path": o.path, "media_type": o.media_type, "max_bytes": o.max_bytes}
                            for o in s.outputs
                        ],
                        "validators": list(s.validators),
                        "branches": [
                            {"target": b.target, "field": b.when.field, "operator": b.when.operator}
                            | {"values": list(b.when.values)}
                            for b in s.branches
                        ],
                        "question": s.question.to_json() if s.question is not None else None,
                    }
                    for s in w.steps
                ],
            }
            for w in catalogue.workflows
        ],
        "host_adapters": [
            {"id": a.id, "version": a.version, "harness": a.harness, "title": a.title} for a in catalogue.host_adapters
        ],
    }


def _step_details(step: dict[str, Any]) -> list[str]:
    """One line per output, validator, branch and question of a step (what ``inspect`` shows)."""
    lines = [
        f"output {o['id']}: {o['path']} ({o['media_type']}, <= {_size(o['max_bytes'])})" for o in step["output_details"]
    ]
    lines += [f"validator {v}" for v in step["validators"]]
    lines += [f"branch -> {b['target']} when {b['field']} {b['operator']} {_operand(b)}" for b in step["branches"]]
    if step["question"] is not None:
        q = step["question"]
        lines.append(f"question {q['field']}: {q['prompt']} choices {json.dumps(q['choices'])}")
    return lines


def _operand(branch: dict[str, Any]) -> str:
    """A predicate's value as the catalogue writes it: ``equals = "x"`` one value, ``one_of = [...]`` a list."""
    values = branch["values"]
    return json.dumps(values[0] if branch["operator"] == "equals" else values)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


@cli.command(
    name="inspect",
    epilog=_epilog(
        "rimthan-pack inspect releases/research-decision-1.3.0",
        "rimthan-pack inspect RELEASE --trust keys/local --json",
        "rimthan-pack inspect releases/research-decision-1.3.0 --against releases/research-decision-1.2.0",
    ),
)
@click.argument("release", type=click.Path(path_type=Path))
@_trust_option("Without it signatures are listed but not checked.")
@click.option(
    "--against",
    "against",
    type=click.Path(path_type=Path),
    help="An older release of the catalogue, verified the same way: also show what changed since it.",
)
@_JSON
@reports_refusals
@remembered_checks()
def inspect_command(release: Path, trust_path: Path | None, against: Path | None, as_json: bool) -> None:
    """Show a release: identity, digest, every file, signers, workflows and their steps.

    Per step: its outputs (path, media type, size limit), validators, branch
    predicates and question. --json gives the same, files under files.entries.

    Files, manifest and catalogue are verified as by 'verify'; signatures only
    when --trust is given: each trusted one must verify, and a release short
    of the threshold is shown as such (verify refuses it), not refused.

    With --against OLD: files added, removed and changed since OLD, and each
    workflow whose version changed, was added or dropped, or kept its version
    while a file it names changed (its runs on OLD could not migrate).
    """
    from rimthan_workflow_registry.release import inspect_release, load_trust

    trust = load_trust(trust_path) if trust_path is not None else None
    found = inspect_release(release, trust, require_threshold=False)  # a half-signed release is shown, as it is
    data = _inspection_json(found, trust)
    changes = _changes(found, inspect_release(against, trust, require_threshold=False)) if against else None
    if as_json:
        emit_json(data | ({"changes": _changes_json(changes)} if changes is not None else {}))
        return
    ident = found.manifest.release
    rows = [
        ("release", ident.id),
        ("title", ident.title),
        ("path", str(found.root)),
        ("digest", found.manifest_digest),
        ("scope", f"{ident.scope_name} (profile {ident.scope_profile})"),
        ("created", str(ident.created) if ident.created is not None else "not recorded"),
        ("files", f"{len(found.manifest.files)} ({_size(found.manifest.total_size)})"),
    ]
    for label, value in rows:
        click.echo(f"{label:<11}{value}")
    for entry in data["files"]["entries"]:
        click.echo(f"  {entry['path']}  {_size(entry['size'])}  sha256:{entry['sha256'][:16]}")
    click.echo("signatures")
    for sig in data["signatures"]:
        status = {None: "not checked (pass --trust)", True: "verified", False: "not trusted"}[sig["verified"]]
        name = f" {sig['name']}" if sig["name"] else ""
        click.echo(f"  {sig['key_id']}{name}  {status}")
    if data["threshold"] is not None:
        required, verified = data["threshold"]["required"], data["threshold"]["verified"]
        short = "" if verified >= required else "; short of it, so verify and the server refuse it until more sign"
        click.echo(f"  threshold {required}: {verified} trusted signature(s) verified{short}")
    click.echo("workflows")
    for workflow in data["workflows"]:
        aliases = ", ".join(workflow["entry_aliases"]) or "none"
        click.echo(f"  {workflow['id']}@{workflow['version']}  owner {workflow['owner']}  aliases {aliases}")
        for index, step in enumerate(workflow["steps"], 1):
            kind = "terminal" if step["terminal"] else "-> " + ", ".join(step["next"])
            gate = " gated" if step["gated"] else ""
            click.echo(f"    {index}. {step['id']}{gate}  {kind}")
            for line in _step_details(step):
                click.echo(f"         {line}")
    click.echo("host adapters")
    for adapter in data["host_adapters"]:
        click.echo(f"  {adapter['id']}@{adapter['version']}  harness {adapter['harness']}")
    if changes is not None:
        for line in _changes_lines(changes):
            click.echo(line)


def _changes(found: ReleaseInspection, older: ReleaseInspection) -> ReleaseDiff:
    """What changed from ``older`` to ``found``; refused unless both are releases of one catalogue."""
    from rimthan_workflow_registry.errors import FailureCode, RegistryError
    from rimthan_workflow_registry.release import diff_releases

    name, other = found.manifest.release.catalogue, older.manifest.release.catalogue
    if name != other:
        raise RegistryError(
            FailureCode.CATALOGUE_INVALID,
            f"is a release of catalogue {other}, not {name}: --against takes an older release of the same catalogue",
            path=str(older.root),
            next_step=f"pass --against a release of {name} (releases/{name}-VERSION)",
        )
    return diff_releases(older.manifest, older.manifest_digest, found.manifest, found.loaded.catalogue)


def _changes_json(diff: ReleaseDiff) -> dict[str, Any]:
    return {
        "against": diff.against,
        "against_digest": diff.against_digest,
        "files": {"added": list(diff.added), "removed": list(diff.removed), "changed": list(diff.changed)},
        "workflows": [
            {"id": w.id, "before": w.before, "after": w.after, "changed_files": list(w.changed_files)}
            for w in diff.workflows
        ],
    }


def _changes_lines(diff: ReleaseDiff) -> list[str]:
    """``inspect --against``'s section: the files, then the workflows, that differ."""
    lines = [f"changes since {diff.against} ({diff.against_digest})"]
    files = [("added", diff.added), ("removed", diff.removed), ("changed", diff.changed)]
    lines += [f"  {what:<8} {path}" for what, paths in files for path in paths]
    if not any(paths for _, paths in files):
        lines.append("  no file changed")
    return lines + [f"  workflow {w.id}  {_workflow_change(w)}" for w in diff.workflows]


def _workflow_change(change: WorkflowChange) -> str:
    if change.after is None:
        return f"dropped (was {change.before})"
    if change.before is None:
        return f"added at {change.after}"
    if change.kept_but_changed:
        return f"kept {change.before} but {', '.join(change.changed_files)} changed: its runs cannot migrate"
    return f"{change.before} -> {change.after}"


@cli.command(
    epilog=_epilog(
        "rimthan-pack verify releases/research-decision-1.3.0 --trust keys/local",
        "rimthan-pack verify RELEASE --trust keys/trust.toml --scope rimthan.research --json",
    )
)
@click.argument("release", type=click.Path(path_type=Path))
@click.option("--trust", "trust_path", required=True, type=click.Path(path_type=Path), help=_TRUST_HELP)
@click.option(
    "--profile",
    default=WORKFLOW_ENGINE_PROFILE,
    show_default=True,
    help="Scope profile the release must declare (empty string: any).",
)
@click.option("--scope", default=None, help="Scope name the release must declare (default: any).")
@_JSON
@reports_refusals
@remembered_checks()
def verify(release: Path, trust_path: Path, profile: str, scope: str | None, as_json: bool) -> None:
    """Verify a release exactly as the server does at load.

    Checks, in order: layout (no symlinks, hard links, special files or extra
    files), the canonical manifest, signatures against the trust store and its
    threshold, SHA256SUMS, every file's size and SHA-256, scope/profile, and
    the catalogue rules. Exits 1 naming the file and reason on any failure.
    """
    from rimthan_workflow_registry.release import load_trust, verify_release

    trust = load_trust(trust_path)
    verified = verify_release(release, trust, expected_profile=profile or None, expected_scope=scope)
    signers = [trust.describe(k) for k in verified.signer_key_ids]
    if as_json:
        emit_json(
            {
                "ok": True,
                "release": str(release),
                "release_id": verified.release_id,
                "manifest_digest": verified.manifest_digest,
                "signers": list(verified.signer_key_ids),
                "threshold": trust.threshold,
            }
        )
        return
    click.echo(f"verified {verified.release_id} {verified.manifest_digest}")
    click.echo(f"signed by {len(signers)} trusted key(s), threshold {trust.threshold}: {', '.join(signers)}")
