"""A catalogue rule that finds several problems says each, not its first alone.

The name rule (aliases), the host adapter rule (install paths, pins) and the reference rule (what a step
names, where its outputs go) raised at their first problem, so an author who made the same slip twice met the
second only after fixing the first and building again. Each problem is now a failure of its own (its code and
file, in the order the catalogue lists what it is about), at build and check on a source (the installed
``rimthan-pack``, a scaffold ``rimthan-pack init`` made) and at verify on a signed release (built and re-signed
with the real key): the packager and the release loader share these rules. So do the first-step, step-shape
(with a step's declared counts and sizes), reachability, input-route, branch, write-path, bound and
confirmable-value rules, which stopped at their first problem too:
each break of ``support.catalogue_breaks`` (a copy of the packaged research-decision@1.2.0) is said in full
by ``rimthan-pack check`` on the source and ``rimthan-pack verify`` on a signed release.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.catalogue_breaks import BREAKS, Break, Said, said_as_expected
from support.pack_cli import edit_text, init_scaffold, pack
from support.refusals import refusals
from support.releases import KeyPair, make_keypair, resign_release, trust_dir

PACKAGED = Path(__file__).resolve().parents[2] / "catalogues" / "research-decision" / "1.2.0"
WORKFLOW = "workflows/my-flow.toml"
ADAPTER = "adapters/claude-code.toml"
# (file, message) of each failure, in the order said: names, adapters, then what the workflow's steps name
ALIASES = [
    ("workflows/other.toml", "name 'plan-it' of workflow other-flow already names workflow my-flow for owner"),
    ("workflows/other.toml", "name 'summarise' of workflow other-flow already names workflow my-flow for owner"),
]
ADAPTER_PATHS = [
    (ADAPTER, "paths.prompt = '/etc/{id}.md' must be a project-local path containing {id} (absolute path)"),
    (ADAPTER, "paths.subagent = '../{id}.md' must be a project-local path containing {id} ('..' path segment)"),
]
REFERENCES = [
    (WORKFLOW, "step plan leads to unknown step 'write-sumary'"),
    (WORKFLOW, "step write-summary names unknown validator 'reviewer@1.0.1'"),
    (WORKFLOW, "output summary path '../summary.json' is not a project-local path: '..' path segment"),
    (WORKFLOW, "output notes path '/notes.md' is not a project-local path: absolute path"),
]


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("keys"), "author")


def _break_adapter_and_references(root: Path) -> None:
    """Two install paths outside the project; two unresolved references and two outputs outside the project."""
    edit_text(root / ADAPTER, 'prompt = ".claude/commands/{id}.md"', 'prompt = "/etc/{id}.md"')
    edit_text(root / ADAPTER, 'subagent = ".claude/agents/{id}.md"', 'subagent = "../{id}.md"')
    edit_text(root / WORKFLOW, 'next = "write-summary"', 'next = "write-sumary"')
    edit_text(root / WORKFLOW, '    "reviewer@1.0.0",\n]\n', '    "reviewer@1.0.1",\n]\n')
    edit_text(root / WORKFLOW, 'path = "out/summary.json"', 'path = "../summary.json"')
    (root / WORKFLOW).write_text(
        (root / WORKFLOW).read_text("utf-8")
        + '\n[[steps.outputs]]\nid = "notes"\npath = "/notes.md"\nmedia_type = "text/markdown"\nmax_bytes = 4096\n',
        "utf-8",
    )


def _break_aliases(root: Path) -> None:
    """A second workflow whose two entry aliases the first one's already are."""
    edit_text(root / WORKFLOW, "entry_aliases = []", 'entry_aliases = ["plan-it", "summarise"]')
    shutil.copy(root / WORKFLOW, root / "workflows/other.toml")
    edit_text(root / "workflows/other.toml", 'id = "my-flow"', 'id = "other-flow"')
    edit_text(
        root / "catalogue.toml", '"workflows/my-flow.toml",', '"workflows/my-flow.toml",\n    "workflows/other.toml",'
    )


def _said(stderr: str, root: Path) -> list[tuple[str, str]]:
    """(file, message) of each refusal, the file relative to ``root``."""
    said = []
    for refusal in refusals(stderr):
        where, message = refusal.error.split(": ", 2)[2].split(": ", 1)
        said.append((Path(where).relative_to(root).as_posix(), message))
    return said


def _is(said: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    return len(said) == len(expected) and all(
        file == want_file and message.startswith(want)
        for (file, message), (want_file, want) in zip(said, expected, strict=True)
    )


def test_a_build_says_each_problem_of_each_rule(signer: KeyPair, tmp_path: Path) -> None:
    """Two problems of each kind (the second workflow is copied before the first's references break): eight
    refusals in two lines each, and eight errors under ``--json``; before, one of each rule (three in all)."""
    source = init_scaffold(tmp_path / "src")
    _break_aliases(source)
    _break_adapter_and_references(source)

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    expected = ALIASES + ADAPTER_PATHS + REFERENCES
    assert built.returncode == 1 and _is(_said(built.stderr, source), expected), built.stderr
    assert not (tmp_path / "rel").exists()
    checked = json.loads(pack("check", source, "--json").stdout)
    codes = (
        ["alias_collision"] * 2 + ["catalogue_invalid"] * 2 + ["reference_unresolved"] * 2 + ["catalogue_invalid"] * 2
    )
    assert [e["code"] for e in checked["errors"]] == codes, checked


def test_verify_says_each_problem_of_a_signed_release(signer: KeyPair, tmp_path: Path) -> None:
    """The release loader runs the same rules: a signed release breaking them (re-signed as an insider could)
    is refused with each problem said, each naming the release's file."""
    source = init_scaffold(tmp_path / "src")
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "out").returncode == 0
    release = tmp_path / "out" / "my-flow-0.1.0"
    resign_release(release, [signer], edit=_break_adapter_and_references)

    verified = pack("verify", release, "--trust", trust_dir(tmp_path / "trust", signer))

    said = _said(verified.stderr, release / "catalogue")
    assert verified.returncode == 1 and _is(said, ADAPTER_PATHS + REFERENCES), verified.stderr


@pytest.fixture(scope="module")
def packaged_release(signer: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged research-decision@1.2.0, built and signed once (each test breaks a copy)."""
    out = tmp_path_factory.mktemp("packaged")
    assert pack("build", PACKAGED, "--key", signer.private_path, "--out", out).returncode == 0
    return out / "research-decision-1.2.0"


def _each_said(stderr: str, root: Path) -> list[Said]:
    """Code, file (relative to ``root``) and message of each refusal."""
    said = []
    for refusal in refusals(stderr):
        code, where, message = refusal.error.removeprefix("error: ").split(": ", 2)
        said.append((code, Path(where).relative_to(root).as_posix(), message))
    return said


@pytest.mark.parametrize("broken", BREAKS, ids=[b.name for b in BREAKS])
def test_check_and_verify_say_each_problem_of_a_rule(
    broken: Break, signer: KeyPair, packaged_release: Path, tmp_path: Path
) -> None:
    """Two problems (or more) one rule finds, at check on the source and at verify on the signed release: each
    its own refusal, in order, naming its file (before, the first alone)."""
    source = tmp_path / "src"
    shutil.copytree(PACKAGED, source)
    broken.edit(source)
    checked = pack("check", source)
    assert checked.returncode == 1 and said_as_expected(_each_said(checked.stderr, source), broken.said), checked.stderr

    release = tmp_path / "release"
    shutil.copytree(packaged_release, release)
    resign_release(release, [signer], edit=broken.edit)
    verified = pack("verify", release, "--trust", trust_dir(tmp_path / "trust", signer))
    said = _each_said(verified.stderr, release / "catalogue")
    assert verified.returncode == 1 and said_as_expected(said, broken.said), verified.stderr
