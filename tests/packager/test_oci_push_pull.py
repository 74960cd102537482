"""``rimthan-pack push`` / ``pull`` against a real registry (docker-registry on loopback)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.oci import one_line_error, pack, pull, push, tree_bytes
from support.registry import LocalRegistry
from support.releases import KeyPair, make_keypair, trust_dir, trust_file

REPO = "rimthan/research"


def test_push_then_pull_round_trips_byte_identical(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    release = packaged_releases["1.2.0"]
    digest = push(release, registry.ref(REPO), trust)

    by_tag = pull(registry.ref(REPO, "1.2.0"), trust, tmp_path / "by-tag")
    assert by_tag.returncode == 0, by_tag.stderr
    pulled = tmp_path / "by-tag" / release.name
    assert tree_bytes(pulled) == tree_bytes(release)
    assert [p.name for p in (tmp_path / "by-tag").iterdir()] == [release.name]  # no staging left

    again = pull(registry.ref(REPO, "1.2.0"), trust, tmp_path / "by-tag")
    assert again.returncode == 0 and again.stdout.startswith("already present"), again.stdout

    listed = pack(
        "pull", f"{registry.ref(REPO)}@{digest}", "--trust", trust, "--out", tmp_path / "d", "--plain-http", "--json"
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["oci_digest"] == digest
    assert tree_bytes(tmp_path / "d" / release.name) == tree_bytes(release)


def test_pulled_by_digest_verifies_with_sha256sum_and_openssl(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, keypair: KeyPair
) -> None:
    digest = push(packaged_releases["1.3.0"], registry.ref(REPO), trust)
    proc = pull(f"{registry.ref(REPO)}@{digest}", trust, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    pulled = tmp_path / "out" / "research-decision-1.3.0"

    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=pulled, capture_output=True, text=True, check=False)
    assert sums.returncode == 0 and "FAILED" not in sums.stdout, sums.stdout
    signature = pulled / "signatures" / f"{keypair.key_id}.sig"
    ossl = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(keypair.public_path), "-rawin",
         "-in", "manifest.json", "-sigfile", str(signature)],
        cwd=pulled, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ossl.returncode == 0 and "Signature Verified Successfully" in ossl.stdout, ossl.stdout + ossl.stderr


def test_push_never_moves_a_tag_to_another_release_unless_told(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    first = push(packaged_releases["1.2.0"], registry.ref(REPO, "stable"), trust)
    refused = pack("push", packaged_releases["1.3.0"], registry.ref(REPO, "stable"), "--trust", trust, "--plain-http")
    one_line_error(refused, "oci_tag_exists")

    moved = push(packaged_releases["1.3.0"], registry.ref(REPO, "stable"), trust, "--replace-tag")
    assert moved != first
    old = pull(f"{registry.ref(REPO)}@{first}", trust, tmp_path / "old")
    assert old.returncode == 0, old.stderr  # the replaced release's bytes stay addressable by digest
    assert (tmp_path / "old" / "research-decision-1.2.0").is_dir()


def test_a_later_cosignature_pushes_only_the_new_signature(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, keypair: KeyPair
) -> None:
    release = packaged_releases["1.2.0"]
    push(release, registry.ref(REPO), trust)
    bob = make_keypair(tmp_path / "bob-keys", "bob")
    both = trust_file(tmp_path / "two-of-two", [keypair, bob], threshold=2)
    signed = pack("sign", release, "--key", bob.private_path)
    assert signed.returncode == 0, signed.stderr

    again = pack("push", release, registry.ref(REPO), "--trust", both, "--plain-http", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["uploaded"] == 1  # just bob's signature; the rest was already there

    proc = pull(registry.ref(REPO, "1.2.0"), both, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert tree_bytes(tmp_path / "out" / release.name) == tree_bytes(release)


def test_a_pull_short_of_trusted_signatures_names_the_artifact_and_says_to_co_sign_and_push_again(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path, keypair: KeyPair
) -> None:
    """Not the download directory it has just deleted, nor a `sign RELEASE` of a release that is not there."""
    push(packaged_releases["1.2.0"], registry.ref(REPO), trust)
    bob = make_keypair(tmp_path / "bob-keys", "bob")
    both = trust_file(tmp_path / "two-of-two", [keypair, bob], threshold=2)
    short = pull(registry.ref(REPO, "1.2.0"), both, tmp_path / "out")
    assert short.returncode == 1
    error, next_step = short.stderr.splitlines()
    assert error.startswith(f"error: signature_threshold_not_met: {registry.ref(REPO, '1.2.0')}/signatures: ")
    assert next_step == (
        "next: have more trusted key holders co-sign the release where it was built (rimthan-pack sign RELEASE "
        "--key THEIR_KEY) and push it again, or pull with the --trust that names its signers"
    )
    assert not (tmp_path / "out").exists()


def test_bad_references_and_unreachable_registries_are_one_line_refusals(tmp_path: Path, trust: Path) -> None:
    one_line_error(pull("https://example.invalid/x", trust, tmp_path / "out"), "oci_reference_invalid")
    line = one_line_error(pull("oci://127.0.0.1:9/rimthan/x:1.0.0", trust, tmp_path / "out"), "oci_registry_error")
    assert line.endswith(": no connection to the registry (Connection refused)"), line  # not urllib3's pool text
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_missing_tag_is_refused(tmp_path: Path, registry: LocalRegistry, trust: Path) -> None:
    line = one_line_error(pull(registry.ref(REPO, "9.9.9"), trust, tmp_path / "out"), "oci_registry_error")
    assert "no such tag" in line


def test_a_repository_without_tag_or_digest_is_refused_naming_the_versions_it_holds(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """The repository ``serve --releases-from`` follows, pasted into ``pull``: it asked for ``latest``, which no
    push writes, and was refused as a missing tag of the repository, with no word of the version it lacks. The
    refusal now lists the version tags the registry holds, newest first, and the next step names the newest."""
    push(packaged_releases["1.2.0"], registry.ref(REPO), trust)
    push(packaged_releases["1.3.0"], registry.ref(REPO), trust)
    refused = pull(registry.ref(REPO), trust, tmp_path / "out")
    line = one_line_error(refused, "oci_reference_invalid")
    assert (
        line == f"error: oci_reference_invalid: {registry.ref(REPO)}: names a repository, not a release: a pull "
        "needs the release's version tag or OCI digest; it holds 1.3.0, 1.2.0"
    ), line
    assert f"`{registry.ref(REPO)}:1.3.0`" in refused.stderr.splitlines()[1]
    assert not (tmp_path / "out").exists()


def test_a_bare_repository_whose_tags_cannot_be_listed_is_still_refused(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """Fail closed: a repository nothing was pushed to, or a registry that does not answer, is refused with the
    listing's reason; nothing is pulled on a guess and no ``--out`` is made."""
    empty = pull(registry.ref("rimthan/nothing-here"), trust, tmp_path / "out")
    line = one_line_error(empty, "oci_reference_invalid")
    assert line.endswith(
        "its tags could not be listed (oci_registry_error: listing tags: the registry answered HTTP "
        "404 NAME_UNKNOWN; nothing was pushed to it yet, or its name is misspelt)"
    ), line
    assert "`" + registry.ref("rimthan/nothing-here") + ":<version>`" in empty.stderr.splitlines()[1]
    push(packaged_releases["1.2.0"], registry.ref(REPO), trust)
    registry.stop()
    gone = pull(registry.ref(REPO), trust, tmp_path / "out")
    assert "its tags could not be listed (oci_registry_error: listing tags: no connection to the registry" in (
        one_line_error(gone, "oci_reference_invalid")
    )
    assert not (tmp_path / "out").exists()


def test_tls_is_the_default_and_plain_http_only_on_request(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    refused = pack("push", packaged_releases["1.2.0"], registry.ref(REPO), "--trust", trust)
    line = one_line_error(refused, "oci_registry_error")  # the loopback registry speaks plain HTTP only
    assert line.endswith(": the registry did not answer in TLS (it may serve plain HTTP)"), line
    proc = pack("pull", registry.ref(REPO, "1.2.0"), "--trust", trust, "--out", tmp_path / "out")
    line = one_line_error(proc, "oci_registry_error")
    expected = f"error: oci_registry_error: {registry.ref(REPO, '1.2.0')}: fetching the manifest: "
    assert line == expected + "the registry did not answer in TLS (it may serve plain HTTP)", line  # no urllib3 text
    assert "--plain-http for a registry without TLS" in proc.stderr.splitlines()[1], proc.stderr
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_failed_pull_leaves_no_directory_it_made(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """As a failed build: ``--out`` and the parents the pull made are taken back (a missing tag, an untrusted
    signer); a directory that was there stays, and so does one that holds something."""
    push(packaged_releases["1.2.0"], registry.ref(REPO), trust)
    stranger = trust_dir(tmp_path / "stranger", make_keypair(tmp_path / "stranger-key", "stranger"))
    out = tmp_path / "there" / "not" / "yet"
    (tmp_path / "there").mkdir()
    missing = pull(registry.ref(REPO, "9.9.9"), trust, out)
    assert one_line_error(missing, "oci_registry_error") and not (tmp_path / "there" / "not").exists()
    untrusted = pull(registry.ref(REPO, "1.2.0"), stranger, out)
    assert one_line_error(untrusted, "signature_untrusted")
    assert list((tmp_path / "there").iterdir()) == []  # the pull's own staging went too
    assert pull(registry.ref(REPO, "1.2.0"), trust, out).returncode == 0  # and the same --out works
    assert [p.name for p in out.iterdir()] == [packaged_releases["1.2.0"].name]
