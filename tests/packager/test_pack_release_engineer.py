"""A release engineer's ordinary days with the installed ``rimthan-pack``: versions, init, the scaffold.

Every test drives the console script in a subprocess (what the engineer
types), on real keys generated under ``tmp_path``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.harness import CatalogueExamples, RunResult, WorkflowHarness, client_caller
from rimthan_host.protocol import HostProfile
from rimthan_workflow_mcp.contract_schemas import VALIDATOR_REPORT
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_registry.release import load_trust, verify_release
from rimthan_workflow_registry.release.dir_name import RELEASE_DIR_NAME
from support.pack_cli import BIN, pack
from support.processes import stdio_client_process
from support.refusals import refusal, refusals
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir, trust_file

# Every shape semver allows: plain, pre-release (alphanumeric, numeric, dotted, hyphenated), build metadata, both.
SEMVER_FORMS = (
    "1.0.0",
    "1.0.0-rc.1",
    "1.0.0-alpha",
    "1.0.0-0.3.7",
    "1.0.0-x-y-z.--",
    "1.0.0+build.1",
    "1.0.0+20130313144700",
    "1.0.0-rc.1+build.5",
    "2.10.3-beta.11+exp.sha.5114f85",
)
BUILDS_PER_FORM = 2


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "release")


@pytest.fixture(scope="module")
def trust(signer: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trust_dir(tmp_path_factory.mktemp("trust"), signer)


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scaffold")
    made = pack("init", "catalogues/my-flow/0.1.0", cwd=root)
    assert made.returncode == 0, made.stderr
    return root / "catalogues" / "my-flow" / "0.1.0"


def _with_version(scaffold: Path, version: str, into: Path) -> Path:
    """A copy of the scaffold source whose catalogue declares ``version``."""
    shutil.copytree(scaffold, into)
    toml = into / "catalogue.toml"
    toml.write_text(re.sub(r'(?m)^version = ".*"$', f'version = "{version}"', toml.read_text("utf-8")), "utf-8")
    return into


# --------------------------------------------------------------------------- pre-release and build metadata


@pytest.mark.parametrize("version", SEMVER_FORMS)
def test_every_semver_form_builds_every_time(
    version: str, scaffold: Path, signer: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """The build's hidden work directory (random suffix) is never read as a version: no random failure."""
    source = _with_version(scaffold, version, tmp_path / "source")
    for attempt in range(BUILDS_PER_FORM):
        out = tmp_path / f"releases-{attempt}"
        built = pack("build", source, "--key", signer.private_path, "--out", out, "--json")
        assert built.returncode == 0, (version, attempt, built.stderr)
        assert json.loads(built.stdout)["release_id"] == f"my-flow@{version}"
        assert [p.name for p in out.iterdir()] == [f"my-flow-{version}"], "a work directory was left behind"
    checked = pack("verify", tmp_path / "releases-0" / f"my-flow-{version}", "--trust", trust, "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["release_id"] == f"my-flow@{version}"


@pytest.mark.parametrize("version", SEMVER_FORMS)
def test_a_hidden_work_directory_name_never_claims_a_release(version: str) -> None:
    """Thousands of names shaped like the packager's work directory: none reads as ``<catalogue>-<version>``."""
    names = [f".my-flow-{version}.building-{tempfile._RandomNameSequence().__next__()}" for _ in range(2000)]  # type: ignore[attr-defined]
    assert not [name for name in names if RELEASE_DIR_NAME.match(name)]
    assert RELEASE_DIR_NAME.match(f"my-flow-{version}")


def test_a_release_copied_under_a_hidden_name_still_verifies(
    scaffold: Path, signer: KeyPair, trust: Path, tmp_path: Path
) -> None:
    source = _with_version(scaffold, "1.0.0-rc.1", tmp_path / "source")
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel").returncode == 0
    hidden = tmp_path / "rel" / ".my-flow-1.0.0-rc.1.building-abc-def"
    (tmp_path / "rel" / "my-flow-1.0.0-rc.1").rename(hidden)
    assert verify_release(hidden, load_trust(trust)).release_id == "my-flow@1.0.0-rc.1"


# --------------------------------------------------------------------------- init and the scaffold


def _inspected(release: Path) -> dict[str, Any]:
    shown = pack("inspect", release, "--json")
    assert shown.returncode == 0, shown.stderr
    inspected: dict[str, Any] = json.loads(shown.stdout)
    return inspected


def test_init_in_a_version_folder_names_the_catalogue_after_its_parent(signer: KeyPair, tmp_path: Path) -> None:
    for version in ("0.1.0", "2.0.0-rc.1"):
        assert pack("init", f"catalogues/my-flow/{version}", cwd=tmp_path).returncode == 0
        built = pack("build", f"catalogues/my-flow/{version}", "--key", signer.private_path, cwd=tmp_path)
        assert built.returncode == 0, built.stderr
        identity = _inspected(tmp_path / "releases" / f"my-flow-{version}")["identity"]
        assert isinstance(identity, dict)
        assert (identity["catalogue"], identity["version"]) == ("my-flow", version)
    assert pack("init", "drafts/other-flow", cwd=tmp_path).returncode == 0
    assert 'name = "other-flow"' in (tmp_path / "drafts/other-flow/catalogue.toml").read_text("utf-8")


def test_init_refusals_say_what_to_type(tmp_path: Path) -> None:
    bad_parent = pack("init", "My Flows/0.1.0", cwd=tmp_path)
    said = refusal(bad_parent.stderr)
    assert bad_parent.returncode == 1 and said.code == "catalogue_invalid"
    assert said.next == "init the catalogue in a folder named after it: rimthan-pack init my-flow/0.1.0"
    bad_name = pack("init", "src", "--name", "Bad Name", cwd=tmp_path)
    said = refusal(bad_name.stderr)
    assert "expected lowercase letters, digits and hyphens" in said.error
    assert said.next == "choose a name such as my-flow: rimthan-pack init src --name my-flow"
    assert "catalogue file" not in said.next
    assert not (tmp_path / "src").exists() and not (tmp_path / "My Flows").exists()


def test_the_scaffold_speaks_the_report_schema_and_the_four_tools(scaffold: Path) -> None:
    subagent = (scaffold / "assets/subagents/reviewer.md").read_text("utf-8")
    outcomes = VALIDATOR_REPORT["properties"]["outcome"]["enum"]
    assert all(f"`{outcome}`" in subagent for outcome in outcomes)
    assert not re.search(r"\b(passed|failed)\b", subagent)
    adapter = (scaffold / "adapters/claude-code.md").read_text("utf-8")
    assert all(f"`{contract.name}`" in adapter for contract in workflow_engine_tool_contracts())
    assert len(adapter.splitlines()) > 30


def test_the_scaffold_runs_end_to_end_through_the_real_server(
    scaffold: Path, signer: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """init -> build -> rimthan-mcp serve -> the scripted host kit completes the run, validator included."""
    built = pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path / "releases")
    assert built.returncode == 0, built.stderr
    release = tmp_path / "releases" / "my-flow-0.1.0"
    args = ["serve", "--release", str(release), "--trust", str(trust)]
    args += ["--state-dir", str(tmp_path / "state"), "--log-level", "warning"]

    async def walk() -> RunResult:
        with (tmp_path / "server.log").open("w") as errlog:
            async with stdio_client_process(str(BIN / "rimthan-mcp"), args, errlog) as client:
                examples = CatalogueExamples({"0.1.0": release / "catalogue" / "examples"})
                host = HostProfile(writable_paths=(".claude/*", ".rimthan/*", "out/*"))  # the user's policy
                harness = WorkflowHarness(client_caller(client), examples, project_dir=tmp_path / "project", host=host)
                return await harness.run(await harness.start("my-flow", initial_version="0.1.0"))

    finished = anyio.run(walk)
    assert finished.status == "completed", finished
    written = json.loads((tmp_path / "project" / "out" / "summary.json").read_text("utf-8"))
    assert written["goal"] == json.loads((scaffold / "examples/confirmed-state.json").read_text("utf-8"))["goal"]


# --------------------------------------------------------------------------- advice that is right for the situation


def test_inspecting_a_source_says_build_it_first(scaffold: Path, trust: Path) -> None:
    for command in ("inspect", "verify"):
        shown = pack(command, scaffold, *(("--trust", trust) if command == "verify" else ()))
        said = refusal(shown.stderr)
        assert shown.returncode == 1 and said.code == "manifest_missing", shown.stderr
        assert "catalogue source, not a built release" in said.error
        assert said.next.startswith(f"build it first: rimthan-pack build {scaffold} --key KEY")
        assert "delete" not in said.next and "remove" not in said.next


@pytest.mark.parametrize("command", ["verify", "inspect", "sign", "push"])
def test_a_directory_of_releases_or_of_no_release_is_named_as_such(
    command: str, scaffold: Path, signer: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """The releases directory (and any directory with no release in it) was walked as a release: its releases
    were "not part of the release layout", and the next step was to delete them."""
    releases = tmp_path / "releases"
    assert pack("build", scaffold, "--key", signer.private_path, "--out", releases).returncode == 0
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("ship it\n", "utf-8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    extra = {
        "verify": ("--trust", trust),
        "inspect": (),
        "sign": ("--key", signer.private_path),
        "push": ("oci://127.0.0.1:9/rimthan/demo", "--trust", trust, "--plain-http"),
    }[command]
    for given, error, next_step in (
        (
            releases,
            f"error: manifest_missing: {releases}: this is a directory of releases (1), not a release (it has no "
            "manifest.json)",
            f"pass one release in it, such as {releases / 'my-flow-0.1.0'}",
        ),
        (
            tmp_path / "notes",
            f"error: manifest_missing: {tmp_path / 'notes'}: no release here: it holds no manifest.json, catalogue/ "
            "or signatures/, only other names (1, such as 'todo.md')",
            "check the path: a release is a directory named NAME-VERSION, made by `rimthan-pack build`",
        ),
    ):
        shown = pack(command, given, *extra)
        said = refusal(shown.stderr)
        assert shown.returncode == 1
        assert (said.error, said.next) == (error, next_step)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_build_short_of_the_threshold_is_discarded_and_says_so(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    colleague = make_keypair(tmp_path, "colleague")
    two_of_two = trust_file(tmp_path / "trust", [signer, colleague], threshold=2)
    built = pack("build", scaffold, "--key", signer.private_path, "--trust", two_of_two, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.code == "signature_threshold_not_met"
    assert "nothing was published" in said.error and said.next.startswith("build again with one --key per")
    assert "sign RELEASE" not in said.next
    assert not (tmp_path / "rel").exists()  # nor the --out the build made
    keys = ("--key", signer.private_path, "--key", colleague.private_path)
    assert pack("build", scaffold, *keys, "--trust", two_of_two, "--out", tmp_path / "rel").returncode == 0


def test_a_build_without_trust_says_a_k_of_n_verifier_needs_co_signatures_first(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Built with one key and no --trust, the release said nothing of the co-signatures a 2-of-2 trust file
    still wants: its closing next: line names sign, this release and how many more (k-1), and doing so verifies."""
    colleague = make_keypair(tmp_path / "k", "colleague")
    two_of_two = trust_file(tmp_path / "trust", [signer, colleague], threshold=2)
    built = pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path / "rel")
    assert built.returncode == 0, built.stderr
    release = tmp_path / "rel" / "my-flow-0.1.0"
    last = built.stdout.splitlines()[-1]
    assert last.startswith("next: checked against its own 1 signing key(s) only: ") and "k-1 more" in last, last
    assert f"`rimthan-pack sign {release} --key THEIR_KEY --trust TRUST`" in last
    assert refusal(pack("verify", release, "--trust", two_of_two).stderr).code == "signature_threshold_not_met"
    assert pack("sign", release, "--key", colleague.private_path, "--trust", two_of_two).returncode == 0
    assert pack("verify", release, "--trust", two_of_two).returncode == 0
    keys = ("--key", signer.private_path, "--key", colleague.private_path)
    checked = pack("build", scaffold, *keys, "--trust", two_of_two, "--out", tmp_path / "met")
    assert checked.returncode == 0 and "next:" not in checked.stdout, checked.stdout  # --trust checked the threshold


def test_signing_twice_or_with_an_untrusted_key_says_what_it_means(
    scaffold: Path, signer: KeyPair, trust: Path, tmp_path: Path
) -> None:
    assert pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path).returncode == 0
    release = tmp_path / "my-flow-0.1.0"
    again = pack("sign", release, "--key", signer.private_path)
    said = refusal(again.stderr)
    assert again.returncode == 1 and said.code == "destination_exists"
    assert said.next.startswith("nothing to do for this key") and "another path" not in said.next
    stranger = make_keypair(tmp_path / "k", "stranger")
    signed = pack("sign", release, "--key", stranger.private_path, "--trust", trust)
    assert signed.returncode == 0, signed.stderr
    written = release / "signatures" / f"{stranger.key_id}.sig"
    lines = signed.stderr.splitlines()
    assert lines[0] == (
        f"warning: signature_untrusted: {written}: key {stranger.key_id} is not in the trust store {trust}: "
        "its signature will not count toward the threshold"
    )
    assert lines[1].startswith(f"next: if that was the wrong key, delete {written} (nothing else"), lines[1]
    written.unlink()  # the undo the next line names: the release verifies as it did, and the key may sign again
    assert pack("verify", release, "--trust", trust).returncode == 0
    assert pack("sign", release, "--key", stranger.private_path).returncode == 0
    trusted = pack("sign", release, "--key", signer.private_path, "--trust", trust)
    assert "warning" not in trusted.stderr


def test_every_signature_file_that_fails_is_said_each_in_its_own_lines(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Two trusted signatures, each failing alone (one altered, one cut short), and a copy named otherwise: verify
    says each, in file order, with its own next step (``--json``: each under ``errors``), and no count of signers
    echoes them. Before, the first stopped the signature step and the others met the next run."""
    colleague = make_keypair(tmp_path / "k", "colleague")
    trust = trust_dir(tmp_path / "trust", signer, colleague)
    assert pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path).returncode == 0
    release = tmp_path / "my-flow-0.1.0"
    assert pack("sign", release, "--key", colleague.private_path, "--trust", trust).returncode == 0
    signatures = release / "signatures"
    altered, short = signatures / f"{signer.key_id}.sig", signatures / f"{colleague.key_id}.sig"
    copy = signatures / "copy.sig"
    copy.write_bytes(altered.read_bytes())
    altered.write_bytes(bytes([altered.read_bytes()[0] ^ 1]) + altered.read_bytes()[1:])
    short.write_bytes(short.read_bytes()[:-1])
    expected = {
        altered: "does not verify the manifest with trusted key",
        short: "is 63 bytes, an Ed25519 signature is 64",
        copy: "signature files must be named <key id>.sig (64 lowercase hex characters)",
    }

    in_order = sorted(expected, key=lambda path: path.name)  # (signature files are checked by name)

    verified = pack("verify", release, "--trust", trust)

    said = refusals(verified.stderr)
    assert verified.returncode == 1 and len(said) == len(in_order), verified.stderr
    for refused, path in zip(said, in_order, strict=True):
        assert refused.error.startswith(f"error: signature_invalid: {path}: {expected[path]}"), verified.stderr
    assert said[in_order.index(copy)].next.startswith("signatures/ holds nothing but signatures"), verified.stderr
    checked = json.loads(pack("verify", release, "--trust", trust, "--json").stdout)
    assert [(e["code"], e["path"]) for e in checked["errors"]] == [("signature_invalid", str(p)) for p in in_order]


def test_a_co_signer_checking_against_a_k_of_n_trust_file_signs_the_release_short_of_its_threshold(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """``sign --trust`` (its --help example) checks every trusted signature, not the threshold it helps reach."""
    colleague, third = make_keypair(tmp_path / "k", "colleague"), make_keypair(tmp_path / "k", "third")
    two_of_three = trust_file(tmp_path / "trust", [signer, colleague, third], threshold=2)
    assert pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path).returncode == 0
    release = tmp_path / "my-flow-0.1.0"
    assert refusal(pack("verify", release, "--trust", two_of_three).stderr).code == "signature_threshold_not_met"
    signed = pack("sign", release, "--key", colleague.private_path, "--trust", two_of_three)
    assert signed.returncode == 0, signed.stderr
    assert pack("verify", release, "--trust", two_of_three).returncode == 0
    first = release / "signatures" / f"{signer.key_id}.sig"
    first.write_bytes(bytes([first.read_bytes()[0] ^ 1]) + first.read_bytes()[1:])
    forged = pack("sign", release, "--key", third.private_path, "--trust", two_of_three)
    assert forged.returncode == 1 and refusal(forged.stderr).code == "signature_invalid"
    assert not (release / "signatures" / f"{third.key_id}.sig").exists()


def test_inspect_against_a_k_of_n_trust_file_shows_a_half_signed_release_and_how_short_it_is(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    colleague = make_keypair(tmp_path / "k", "colleague")
    two_of_two = trust_file(tmp_path / "trust", [signer, colleague], threshold=2)
    assert pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path).returncode == 0
    release = tmp_path / "my-flow-0.1.0"
    shown = pack("inspect", release, "--trust", two_of_two)
    assert shown.returncode == 0, shown.stderr
    assert f"  {signer.key_id} release  verified" in shown.stdout.splitlines()
    short = (
        "  threshold 2: 1 trusted signature(s) verified; short of it, so verify and the server refuse it "
        "until more sign"
    )
    assert short in shown.stdout.splitlines()
    assert json.loads(pack("inspect", release, "--trust", two_of_two, "--json").stdout)["threshold"] == {
        "required": 2,
        "verified": 1,
    }
    assert pack("sign", release, "--key", colleague.private_path).returncode == 0
    met = pack("inspect", release, "--trust", two_of_two).stdout.splitlines()
    assert "  threshold 2: 2 trusted signature(s) verified" in met


@pytest.mark.parametrize("name", [".DS_Store", ".git"])
def test_a_hidden_file_in_a_source_says_to_delete_or_move_it_not_to_rename_it(
    signer: KeyPair, tmp_path: Path, name: str
) -> None:
    source = tmp_path / "my-flow" / "0.1.0"
    assert pack("init", source).returncode == 0
    (source / name).mkdir() if name == ".git" else (source / name).write_bytes(b"\0")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.error.startswith(f"error: path_unsafe: {source / name}: hidden files")
    assert said.next == "delete it, or move it out of the catalogue source: renaming a hidden file would ship it"


def test_an_instruction_that_is_not_utf8_says_to_save_it_as_utf8_not_to_fix_a_toml_key(
    signer: KeyPair, tmp_path: Path
) -> None:
    source = tmp_path / "my-flow" / "0.1.0"
    assert pack("init", source).returncode == 0
    instruction = source / "assets" / "instructions" / "plan.md"
    instruction.write_bytes("Caf\u00e9 plan\n".encode("latin-1"))
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.error.startswith(f"error: catalogue_invalid: {instruction}: is not UTF-8")
    assert said.next == (
        "save assets/instructions/plan.md as UTF-8 (the editor's encoding setting, or iconv -f ITS_ENCODING -t "
        "UTF-8): byte 0xe9 at line 1, column 4 (byte offset 3) is not UTF-8"
    )


def test_the_typical_flow_in_rimthan_pack_help_runs_as_written(tmp_path: Path) -> None:
    """Each line of ``rimthan-pack --help``'s typical flow, with only NAME/VERSION substituted, succeeds."""
    help_text = pack("--help").stdout
    flow = help_text.split("Typical flow:", 1)[1].strip().splitlines()
    commands = [line.split("#", 1)[0].split() for line in flow if line.strip().startswith("rimthan-pack ")]
    assert [c[1] for c in commands] == ["keygen", "build", "sign", "verify"]
    assert pack("init", "catalogues/my-flow/0.1.0", cwd=tmp_path).returncode == 0
    co_signer = ("keygen", "--out", "private-keys/colleague", "--trust-dir", "keys/local")
    assert pack(*co_signer, cwd=tmp_path).returncode == 0  # the co-signer's key, trusted
    for words in commands:
        args = [w.replace("NAME", "my-flow").replace("VERSION", "0.1.0") for w in words[1:]]
        done = pack(*args, cwd=tmp_path)
        assert done.returncode == 0, (words, done.stderr)
    assert "signed by 2 trusted key(s)" in done.stdout


# --------------------------------------------------------------------------- inspect shows what the README says

PACKAGED = Path(__file__).resolve().parents[2] / "catalogues" / "research-decision" / "1.3.0"


def test_inspect_shows_files_steps_outputs_validators_branches_and_questions(signer: KeyPair, tmp_path: Path) -> None:
    assert pack("build", PACKAGED, "--key", signer.private_path, "--out", tmp_path).returncode == 0
    release = tmp_path / "research-decision-1.3.0"
    data = _inspected(release)
    files = data["files"]
    assert isinstance(files, dict)
    listed = sorted(e["path"] for e in files["entries"])
    on_disk = sorted(p.relative_to(PACKAGED).as_posix() for p in PACKAGED.rglob("*") if p.is_file())
    assert listed == on_disk and files["count"] == len(on_disk)
    (workflow,) = data["workflows"]
    steps = {s["id"]: s for s in workflow["steps"]}
    route = steps["select-route"]
    assert route["question"]["field"] == "research_route"
    assert {b["target"] for b in route["branches"]} == {"desk-research", "user-interviews", "experiment"}
    desk = steps["desk-research"]
    assert [o["path"] for o in desk["output_details"]] == ["research/evidence-log.json", "research/findings.md"]
    assert desk["validators"] == ["evidence-auditor@1.1.0"]
    text = pack("inspect", release).stdout
    assert "  workflows/research-decision.toml  " in text
    assert "output evidence-log: research/evidence-log.json (application/json" in text
    assert "validator evidence-auditor@1.1.0" in text
    assert "branch -> experiment when research_route equals" in text and "question research_route: " in text


def test_authoring_errors_say_what_form_is_expected(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    source = _with_version(scaffold, "0.2", tmp_path / "source")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.code == "catalogue_invalid"
    assert "'0.2' is not a valid version: expected MAJOR.MINOR.PATCH" in said.error


def test_a_schema_the_metaschema_refuses_names_the_file_and_the_json_pointer_inside_it(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    source = _with_version(scaffold, "0.1.0", tmp_path / "source")
    schema = sorted((source / "schemas").glob("*.schema.json"))[0]
    document = json.loads(schema.read_text("utf-8"))
    document["properties"] = {**document.get("properties", {}), "notes/raw": {"type": "strin"}}
    schema.write_text(json.dumps(document), "utf-8")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.code == "schema_invalid"
    assert f": {schema}: " in said.error  # the file, as the engineer named it on disk
    # RFC 6901: the "/" inside the property name is escaped as ~1
    assert "at JSON pointer '/properties/notes~1raw/type' inside the schema: 'strin' is not valid" in said.error


def test_a_schema_wrong_at_its_root_says_so(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    source = _with_version(scaffold, "0.1.0", tmp_path / "source")
    schema = sorted((source / "schemas").glob("*.schema.json"))[0]
    schema.write_text("[]", "utf-8")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusal(built.stderr)
    assert built.returncode == 1 and said.code == "schema_invalid" and f": {schema}: " in said.error
    assert "at the schema root (JSON pointer '')" in said.error


def test_a_release_copied_under_another_name_is_named_back_not_rebuilt(signer: KeyPair, tmp_path: Path) -> None:
    """A copy made to co-sign during a key rotation (`cp -r releases/research-decision-1.2.0 cosign-1.2.0`) is
    refused by sign and push for its name: the next step said to rebuild it from source, which makes another
    release; renaming the copy is the fix, and sign then adds the signature."""

    built = build_release(packaged_source("1.2.0"), tmp_path / "releases", [signer])
    copy = tmp_path / "cosign-1.2.0"
    shutil.copytree(built, copy)
    second = make_keypair(tmp_path / "keys", "second")
    found = refusal(pack("sign", copy, "--key", second.private_path).stderr)
    assert found.code == "manifest_invalid", found
    named = tmp_path / "research-decision-1.2.0"
    said = f"if this copy is meant to be research-decision@1.2.0, name it so (`mv {copy} {named}`)"
    assert found.next == f"{said}; nothing in it needs rebuilding", found
    copy.rename(named)
    assert pack("sign", named, "--key", second.private_path).returncode == 0
    verify_release(named, load_trust(trust_dir(tmp_path / "trust", second)))
