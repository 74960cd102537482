"""Setup: deliver the release's host assets byte for byte and attest them in the workspace manifest.

Every asset's text is checked against its pinned SHA-256 *before* it is
written (a mismatch is refused, nothing is delivered), and every path is
checked to be one the host's policy lets it write and no file of the bridge's own
(:mod:`rimthan_host.write_targets`) and to hold nothing of the user's (:mod:`rimthan_host.delivered`), before
any is written; each is written through a
symlink-free path, read back and hashed; the manifest lists what was read
back, in canonical JSON, so the verifier can compare it with the release.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rimthan_workflow_registry.canonical import canonical_text, sha256_hex
from rimthan_workflow_registry.errors import quoted

from .delivered import MAX_ASSET_BYTES, AssetClash, check_free, keep_release, load_record, save_record
from .project_files import ProjectFiles, WrittenFile
from .protocol import HarnessError, HostProfile
from .write_targets import BRIDGE, LIBRARY, Voice, check_targets, setup_paths


def deliver_assets(
    files: ProjectFiles,
    step: Mapping[str, Any],
    on_delivered: Callable[[Mapping[str, Any]], None] | None = None,
    *,
    release: str = "",
) -> list[dict[str, Any]]:
    """Write every host asset of the setup step; the delivered entries, as read back.

    Nothing is written unless every asset matches its pinned digest and every
    path is free to write (:func:`~rimthan_host.delivered.check_free`); each
    file written is then added to the delivery record, and ``release``'s
    (manifest digest) subagents kept for its validators.
    """
    assets = step["host_assets"]
    _check_sizes(assets)
    for asset in assets:
        if sha256_hex(asset["text"].encode("utf-8")) != asset["sha256"]:
            raise HarnessError(f"asset {asset['id']} text does not match its pinned sha256; not delivering it")
    record = load_record(files)
    check_free(files, assets, record)
    delivered = []
    for asset in assets:
        written = files.write(asset["id"], asset["install_path"], asset["media_type"], asset["text"])
        record.delivered[written.path] = written.sha256
        save_record(files, record)
        entry = {"asset": asset["id"], "kind": asset["kind"], "path": written.path, "sha256": written.sha256}
        delivered.append(entry)
        if on_delivered is not None:
            on_delivered(entry)
    if release:
        keep_release(files, record, release, assets)
    return delivered


def _check_sizes(assets: list[dict[str, Any]]) -> None:
    """:class:`AssetClash` naming each asset larger than any catalogue file (the verifier's word), nothing written."""
    sizes = {str(a["id"]): len(a["text"].encode("utf-8")) for a in assets}
    large = [f"- {quoted(i)} is {n} bytes" for i, n in sizes.items() if n > MAX_ASSET_BYTES]
    if large:
        raise AssetClash(_too_large(large, LIBRARY), bridge=_too_large(large, BRIDGE))


def _too_large(large: list[str], voice: Voice) -> str:
    return (
        "The workspace was not set up and nothing was written: the verifier sent assets larger than any "
        f"catalogue file ({MAX_ASSET_BYTES} bytes):\n" + "\n".join(large) + "\nA rimthan-mcp verifier serves "
        f"only verified releases' files; {voice.check_the_verifier()}"
    )


def workspace_manifest(host: HostProfile, delivered: list[dict[str, Any]]) -> dict[str, Any]:
    """The workspace manifest the setup step's single output carries."""
    return {
        "harness": host.harness,
        "adapter": {"id": host.adapter_id, "version": host.adapter_version},
        "capabilities": sorted(host.capabilities),
        "delivered": sorted(delivered, key=lambda d: (d["kind"], d["asset"])),
        "symlink_free": True,
    }


def set_up_workspace(
    files: ProjectFiles,
    step: Mapping[str, Any],
    host: HostProfile,
    on_delivered: Callable[[Mapping[str, Any]], None] | None = None,
    *,
    release: str = "",
) -> WrittenFile:
    """Deliver the assets, then write and attest the workspace manifest (the step's output).

    Every path is first checked against the host's own policy and the bridge's own files
    (:func:`~rimthan_host.write_targets.check_targets`): the verifier named them.
    """
    check_targets(host, setup_paths(step))
    delivered = deliver_assets(files, step, on_delivered, release=release)
    (output,) = step["outputs"]
    text = canonical_text(workspace_manifest(host, delivered)) + "\n"
    return files.write(output["id"], output["path"], output["media_type"], text)
