"""The release side: what a signed release is, and the one path that verifies it.

Modules, in the order a release is read:

``format`` / ``paths`` / ``manifest_parse`` / ``dir_name``
    The on-disk layout (``manifest.json``, ``SHA256SUMS``, ``signatures/``,
    ``catalogue/``) and the manifest records; the rules for the catalogue's
    file paths; the closed manifest schema and its strict parser; a directory
    name that claims a release identity (imported only for a name that could:
    never for a build's hidden work directory).
``trust``
    The trust store: trusted Ed25519 public keys, key ids and the k-of-n threshold.
``verify``
    :func:`verify_release` - the one verification path, shared by the packager's
    self-check, ``rimthan-pack verify`` and the server's load and refresh.
``wrong_path``
    Before it starts: a path given as a release that is no release at all (a
    catalogue source, a releases directory) said as the wrong path it is, with
    what to pass instead.
``inspection``
    :func:`inspect_release`: the same steps, for ``rimthan-pack inspect`` and a co-signer (signatures listed,
    checked only against a trust store given).
``release_diff``
    What changed from an older release of a catalogue to a newer (``inspect --against``): files added,
    removed and changed, and each workflow whose version changed, or kept while its files changed.
``tree_walk``
    Its first step: the walk of the release directory, refusing links, special
    files, clashing names and anything outside the layout.
``signature_check``
    Its signature step: each signature file checked alone (name, size, then the
    signature), every failure said, and enough distinct trusted keys signed the
    exact manifest bytes.
``parallel`` / ``file_pipeline``
    Its file checks on both cores: batches in manifest order with the GIL
    switch interval shortened meanwhile, one thread reading (each file opened
    in its directory's descriptor) while another hashes; the first failure in
    manifest order is the one reported. The cyclic collector is paused while a
    release is verified.
``verified``
    ``VerifiedRelease``: a release that passed :func:`verify_release`; every read
    of a file is digest-checked again.
``catalogue`` / ``catalogue_parse`` / ``catalogue_rules`` / ``catalogue_references`` / ``catalogue_routes`` /
``catalogue_bounds`` / ``confirmable_values`` / ``write_paths`` / ``loader``
    The catalogue model (workflows, steps, assets, host adapters), the
    authoring rules build and load share (``catalogue_references``: host
    adapters, and every step, asset, validator and artifact a workflow names,
    resolve; ``write_paths``: every file a run
    writes, outputs and installed assets, has a path of its own;
    ``catalogue_routes``: every route to a step that reads an artifact passes
    the step that produces it;
    ``catalogue_bounds``: every value a catalogue declares fits the tool
    schemas' bounds, and every value it asks a client to confirm fits a
    confirmed state; ``confirmable_values``: every
    question choice takes a branch, and every choice and branch value is one
    its field's schema accepts), and ``ReleaseLoader`` that applies them
    (``ReleaseLoader._validate_workflow_catalogue``); ``schema_checks``
    remembers which catalogue schemas (and values) already passed, and
    ``catalogue_schema`` checks values against them (Python jsonschema's
    verdict, jsonschema-rs's speed); ``schema_refs`` keeps every ``$ref``
    inside its own schema, so no check ever fetches anything;
    ``schema_vocabulary`` (build only) refuses a keyword Draft 2020-12 does
    not define (a misspelling), allowing the author's ``x-`` annotations;
    ``schema_patterns`` refuses a schema pattern whose matching can backtrack
    exponentially (build and load).
``oci`` / ``oci_artifact`` / ``oci_install`` / ``oci_client`` / ``oci_bounds`` / ``oci_stop`` / ``oci_limits`` /
``oci_unpullable``
    A release pushed as one OCI manifest (``oci_artifact``: its layout, rendered
    as push puts it, and its size said by build and check without a registry);
    pulled from an OCI registry into a temporary directory, then the
    one verification path (``oci_limits``: the files, bytes per file and bytes
    in all a pull takes, and the manifest's bound, which ``rimthan-pack build`` and ``rimthan-pack check``
    warn of; ``oci_unpullable``: the warning's type, imported only for a
    release past a bound); the verified pull moved into the releases directory
    (a damaged copy there replaced only when the caller asks); the registry client (oras, with credentials and
    its errors made refusals with a code); every registry answer bounded in
    bytes, time and tag pages, and uploads and credentials kept on the
    registry, so a dishonest registry cannot wedge a puller or a pusher; a sync
    stopped at once when its server stops (its sockets cut, its download removed).

``__all__`` below is the public surface; anything not listed is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rimthan_workflow_registry.lazy_exports import first_use_getattr

if TYPE_CHECKING:
    from rimthan_workflow_registry.release.catalogue import (
        DELIVERY_KINDS,
        ID_PATTERN,
        WRITE_POLICIES,
        AssetDefinition,
        Catalogue,
        HostAdapter,
        Question,
        StepDefinition,
        WorkflowDefinition,
        is_semver,
        next_version,
        semver_key,
    )
    from rimthan_workflow_registry.release.catalogue_bounds import identity_problem
    from rimthan_workflow_registry.release.catalogue_parse import parse_catalogue_manifest, parse_workflow
    from rimthan_workflow_registry.release.catalogue_rules import MAX_SEGMENT_BYTES, check_text_sizes
    from rimthan_workflow_registry.release.dir_name import RELEASE_DIR_NAME
    from rimthan_workflow_registry.release.format import (
        CATALOGUE_DIR,
        CATALOGUE_MANIFEST_NAME,
        CHECKSUMS_NAME,
        MANIFEST_NAME,
        MAX_MANIFEST_BYTES,
        OPEN_NOFOLLOW,
        SIGNATURES_DIR,
        FileEntry,
        Manifest,
        manifest_for,
        media_type_for,
        render_checksums,
        signature_name,
        sorted_entries,
    )
    from rimthan_workflow_registry.release.inspection import ReleaseInspection, inspect_release
    from rimthan_workflow_registry.release.loader import LoadedCatalogue, ReleaseLoader
    from rimthan_workflow_registry.release.manifest_parse import parse_manifest
    from rimthan_workflow_registry.release.oci import (
        OciReference,
        fetch_manifest,
        parse_reference,
        pull_release,
        release_layers,
        tagged_manifest,
        version_tags,
    )
    from rimthan_workflow_registry.release.oci_artifact import (
        ARTIFACT_TYPE,
        CHECKSUMS_LAYER_TYPE,
        DIGEST_ANNOTATION,
        EMPTY_CONFIG,
        EMPTY_CONFIG_TYPE,
        FILE_LAYER_TYPE,
        MANIFEST_LAYER_TYPE,
        MAX_OCI_MANIFEST_BYTES,
        OCI_MANIFEST_TYPE,
        RELEASE_ANNOTATION,
        SIGNATURE_LAYER_TYPE,
        TITLE,
        VERSION_ANNOTATION,
        artifact_manifest,
        descriptor,
        manifest_bytes,
    )
    from rimthan_workflow_registry.release.oci_bounds import (
        PUSH_DEADLINE,
        SYNC_DEADLINE,
        registry_deadline,
    )
    from rimthan_workflow_registry.release.oci_client import guarded, open_registry, registry_call
    from rimthan_workflow_registry.release.oci_limits import MANIFEST_PAST_NEXT, OwnFiles, manifest_past, unpullable
    from rimthan_workflow_registry.release.oci_stop import Stopped, StopSignal, stoppable
    from rimthan_workflow_registry.release.oci_unpullable import Unpullable
    from rimthan_workflow_registry.release.parallel import first_failure
    from rimthan_workflow_registry.release.paths import (
        HIDDEN_PROBLEM,
        first_unsafe_path,
        is_hidden_name,
        is_leftover_name,
        path_problem,
        path_set_problem,
    )
    from rimthan_workflow_registry.release.release_diff import (
        ReleaseDiff,
        WorkflowChange,
        changed_workflow_files,
        diff_releases,
        file_digests,
        workflow_files,
    )
    from rimthan_workflow_registry.release.schema_checks import (
        SCHEMA_CHECKS,
        SCHEMA_CHECKS_FILE,
        canonical_form_version,
    )
    from rimthan_workflow_registry.release.schema_vocabulary import check_schema_keywords
    from rimthan_workflow_registry.release.signature_check import NOT_TRUSTED, untrusted_manifest
    from rimthan_workflow_registry.release.trust import (
        MAX_KEY_FILE_BYTES,
        TrustStore,
        key_id_for,
        load_trust,
        public_key_pem,
    )
    from rimthan_workflow_registry.release.verified import VerifiedRelease, copy_threads
    from rimthan_workflow_registry.release.verify import verify_release

__all__ = [
    "ReleaseDiff",
    "WorkflowChange",
    "changed_workflow_files",
    "diff_releases",
    "file_digests",
    "workflow_files",
    "parse_catalogue_manifest",
    "parse_workflow",
    "identity_problem",
    "MAX_SEGMENT_BYTES",
    "MAX_OCI_MANIFEST_BYTES",
    "EMPTY_CONFIG",
    "artifact_manifest",
    "descriptor",
    "manifest_bytes",
    "OwnFiles",
    "MANIFEST_PAST_NEXT",
    "manifest_past",
    "Unpullable",
    "unpullable",
    "release_layers",
    "is_hidden_name",
    "is_leftover_name",
    "HIDDEN_PROBLEM",
    "MAX_KEY_FILE_BYTES",
    "ID_PATTERN",
    "DELIVERY_KINDS",
    "WRITE_POLICIES",
    "ARTIFACT_TYPE",
    "CATALOGUE_DIR",
    "CATALOGUE_MANIFEST_NAME",
    "CHECKSUMS_LAYER_TYPE",
    "CHECKSUMS_NAME",
    "DIGEST_ANNOTATION",
    "EMPTY_CONFIG_TYPE",
    "FILE_LAYER_TYPE",
    "MANIFEST_LAYER_TYPE",
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "NOT_TRUSTED",
    "OCI_MANIFEST_TYPE",
    "OPEN_NOFOLLOW",
    "RELEASE_ANNOTATION",
    "RELEASE_DIR_NAME",
    "SCHEMA_CHECKS",
    "SCHEMA_CHECKS_FILE",
    "SIGNATURES_DIR",
    "SIGNATURE_LAYER_TYPE",
    "PUSH_DEADLINE",
    "SYNC_DEADLINE",
    "StopSignal",
    "Stopped",
    "TITLE",
    "VERSION_ANNOTATION",
    "AssetDefinition",
    "Catalogue",
    "FileEntry",
    "HostAdapter",
    "LoadedCatalogue",
    "Manifest",
    "OciReference",
    "Question",
    "ReleaseInspection",
    "ReleaseLoader",
    "StepDefinition",
    "TrustStore",
    "VerifiedRelease",
    "WorkflowDefinition",
    "fetch_manifest",
    "guarded",
    "copy_threads",
    "first_failure",
    "inspect_release",
    "canonical_form_version",
    "check_schema_keywords",
    "check_text_sizes",
    "is_semver",
    "key_id_for",
    "load_trust",
    "manifest_for",
    "first_unsafe_path",
    "media_type_for",
    "open_registry",
    "parse_manifest",
    "parse_reference",
    "path_problem",
    "path_set_problem",
    "public_key_pem",
    "pull_release",
    "registry_deadline",
    "stoppable",
    "registry_call",
    "render_checksums",
    "next_version",
    "semver_key",
    "signature_name",
    "sorted_entries",
    "tagged_manifest",
    "untrusted_manifest",
    "verify_release",
    "version_tags",
]

# Each public name is imported from its module on first use, so importing one light module of this
# package (trust, say) does not import the verifier and jsonschema (CLI start-up).
_HOME = {
    "ReleaseDiff": "rimthan_workflow_registry.release.release_diff",
    "WorkflowChange": "rimthan_workflow_registry.release.release_diff",
    "diff_releases": "rimthan_workflow_registry.release.release_diff",
    "changed_workflow_files": "rimthan_workflow_registry.release.release_diff",
    "file_digests": "rimthan_workflow_registry.release.release_diff",
    "workflow_files": "rimthan_workflow_registry.release.release_diff",
    "identity_problem": "rimthan_workflow_registry.release.catalogue_bounds",
    "MAX_SEGMENT_BYTES": "rimthan_workflow_registry.release.catalogue_rules",
    "MAX_OCI_MANIFEST_BYTES": "rimthan_workflow_registry.release.oci_artifact",
    "EMPTY_CONFIG": "rimthan_workflow_registry.release.oci_artifact",
    "artifact_manifest": "rimthan_workflow_registry.release.oci_artifact",
    "descriptor": "rimthan_workflow_registry.release.oci_artifact",
    "manifest_bytes": "rimthan_workflow_registry.release.oci_artifact",
    "release_layers": "rimthan_workflow_registry.release.oci",
    "OwnFiles": "rimthan_workflow_registry.release.oci_limits",
    "MANIFEST_PAST_NEXT": "rimthan_workflow_registry.release.oci_limits",
    "manifest_past": "rimthan_workflow_registry.release.oci_limits",
    "Unpullable": "rimthan_workflow_registry.release.oci_unpullable",
    "unpullable": "rimthan_workflow_registry.release.oci_limits",
    "is_hidden_name": "rimthan_workflow_registry.release.paths",
    "is_leftover_name": "rimthan_workflow_registry.release.paths",
    "HIDDEN_PROBLEM": "rimthan_workflow_registry.release.paths",
    "MAX_KEY_FILE_BYTES": "rimthan_workflow_registry.release.trust",
    "ID_PATTERN": "rimthan_workflow_registry.release.catalogue",
    "DELIVERY_KINDS": "rimthan_workflow_registry.release.catalogue",
    "WRITE_POLICIES": "rimthan_workflow_registry.release.catalogue",
    "ARTIFACT_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "AssetDefinition": "rimthan_workflow_registry.release.catalogue",
    "CATALOGUE_DIR": "rimthan_workflow_registry.release.format",
    "CATALOGUE_MANIFEST_NAME": "rimthan_workflow_registry.release.format",
    "CHECKSUMS_LAYER_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "CHECKSUMS_NAME": "rimthan_workflow_registry.release.format",
    "Catalogue": "rimthan_workflow_registry.release.catalogue",
    "DIGEST_ANNOTATION": "rimthan_workflow_registry.release.oci_artifact",
    "EMPTY_CONFIG_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "FILE_LAYER_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "FileEntry": "rimthan_workflow_registry.release.format",
    "HostAdapter": "rimthan_workflow_registry.release.catalogue",
    "LoadedCatalogue": "rimthan_workflow_registry.release.loader",
    "MANIFEST_LAYER_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "MANIFEST_NAME": "rimthan_workflow_registry.release.format",
    "MAX_MANIFEST_BYTES": "rimthan_workflow_registry.release.format",
    "Manifest": "rimthan_workflow_registry.release.format",
    "NOT_TRUSTED": "rimthan_workflow_registry.release.signature_check",
    "untrusted_manifest": "rimthan_workflow_registry.release.signature_check",
    "OCI_MANIFEST_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "OPEN_NOFOLLOW": "rimthan_workflow_registry.release.format",
    "OciReference": "rimthan_workflow_registry.release.oci",
    "PUSH_DEADLINE": "rimthan_workflow_registry.release.oci_bounds",
    "SYNC_DEADLINE": "rimthan_workflow_registry.release.oci_bounds",
    "StopSignal": "rimthan_workflow_registry.release.oci_stop",
    "Stopped": "rimthan_workflow_registry.release.oci_stop",
    "Question": "rimthan_workflow_registry.release.catalogue",
    "RELEASE_ANNOTATION": "rimthan_workflow_registry.release.oci_artifact",
    "RELEASE_DIR_NAME": "rimthan_workflow_registry.release.dir_name",
    "ReleaseInspection": "rimthan_workflow_registry.release.inspection",
    "ReleaseLoader": "rimthan_workflow_registry.release.loader",
    "SCHEMA_CHECKS": "rimthan_workflow_registry.release.schema_checks",
    "SCHEMA_CHECKS_FILE": "rimthan_workflow_registry.release.schema_checks",
    "SIGNATURES_DIR": "rimthan_workflow_registry.release.format",
    "SIGNATURE_LAYER_TYPE": "rimthan_workflow_registry.release.oci_artifact",
    "StepDefinition": "rimthan_workflow_registry.release.catalogue",
    "TITLE": "rimthan_workflow_registry.release.oci_artifact",
    "TrustStore": "rimthan_workflow_registry.release.trust",
    "VERSION_ANNOTATION": "rimthan_workflow_registry.release.oci_artifact",
    "VerifiedRelease": "rimthan_workflow_registry.release.verified",
    "WorkflowDefinition": "rimthan_workflow_registry.release.catalogue",
    "fetch_manifest": "rimthan_workflow_registry.release.oci",
    "guarded": "rimthan_workflow_registry.release.oci_client",
    "canonical_form_version": "rimthan_workflow_registry.release.schema_checks",
    "check_schema_keywords": "rimthan_workflow_registry.release.schema_vocabulary",
    "check_text_sizes": "rimthan_workflow_registry.release.catalogue_rules",
    "parse_catalogue_manifest": "rimthan_workflow_registry.release.catalogue_parse",
    "parse_workflow": "rimthan_workflow_registry.release.catalogue_parse",
    "copy_threads": "rimthan_workflow_registry.release.verified",
    "first_failure": "rimthan_workflow_registry.release.parallel",
    "inspect_release": "rimthan_workflow_registry.release.inspection",
    "is_semver": "rimthan_workflow_registry.release.catalogue",
    "key_id_for": "rimthan_workflow_registry.release.trust",
    "load_trust": "rimthan_workflow_registry.release.trust",
    "manifest_for": "rimthan_workflow_registry.release.format",
    "first_unsafe_path": "rimthan_workflow_registry.release.paths",
    "media_type_for": "rimthan_workflow_registry.release.format",
    "open_registry": "rimthan_workflow_registry.release.oci_client",
    "parse_manifest": "rimthan_workflow_registry.release.manifest_parse",
    "parse_reference": "rimthan_workflow_registry.release.oci",
    "path_problem": "rimthan_workflow_registry.release.paths",
    "path_set_problem": "rimthan_workflow_registry.release.paths",
    "public_key_pem": "rimthan_workflow_registry.release.trust",
    "pull_release": "rimthan_workflow_registry.release.oci",
    "registry_deadline": "rimthan_workflow_registry.release.oci_bounds",
    "stoppable": "rimthan_workflow_registry.release.oci_stop",
    "registry_call": "rimthan_workflow_registry.release.oci_client",
    "render_checksums": "rimthan_workflow_registry.release.format",
    "next_version": "rimthan_workflow_registry.release.catalogue",
    "semver_key": "rimthan_workflow_registry.release.catalogue",
    "signature_name": "rimthan_workflow_registry.release.format",
    "sorted_entries": "rimthan_workflow_registry.release.format",
    "tagged_manifest": "rimthan_workflow_registry.release.oci",
    "verify_release": "rimthan_workflow_registry.release.verify",
    "version_tags": "rimthan_workflow_registry.release.oci",
}


__getattr__ = first_use_getattr(__name__, _HOME, globals())
