"""Where the bridge writes on the verifier's word: inside its own repository policy, never over its own files.

Setup writes each asset at the install path the verifier's step names and
the workspace manifest at the path of the step's output. A rimthan-mcp
verifier refuses a setup whose paths the host's repository policy forbids
(``repository_policy_conflict``), but only after the bridge wrote them, and the bridge cannot
vouch for the verifier it talks to (a URL, a proxy, a stand-in): it checks
every such path against the policy it sent and against its own files
(``.rimthan/runs``, the delivery record and its texts, schema copies, the
lock, ``.rimthan/.gitignore``, a temporary file) before anything is written. A later step's files (the
model writes them; the bridge reads them back and may rewrite one) are checked
the same way before the model is told to write them or anything is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, quoted
from rimthan_workflow_registry.run import policy_refusal

from .delivered import BRIDGE_WRITER, LIBRARY_WRITER, RECORD_PATH, STORE_DIR, AssetClash
from .own_folder import IGNORE_NAME, OWN_FOLDER, TMP_SUFFIX
from .protocol import HarnessError, HostProfile
from .runlog import RUNS_DIR
from .schemas import SCHEMA_DIR
from .workspace_lock import LOCK_PATH

# The bridge's own directories (nothing under them is written on the verifier's word) and files.
OWN_DIRS = (RUNS_DIR.as_posix(), STORE_DIR, SCHEMA_DIR)
OWN_FILES = (RECORD_PATH, f"{RECORD_PATH}.tmp", LOCK_PATH.as_posix(), f"{OWN_FOLDER}/{IGNORE_NAME}")


@dataclass(frozen=True)
class Voice:
    """Who a refusal is told to: the bridge's user (its flags, its tools) or a caller of the host library (its
    arguments). ``writer``: who writes; ``policy``: whose repository policy; ``change``: how to change that policy;
    ``verifier``: how to check the verifier."""

    writer: str
    policy: str
    change: str
    verifier: str

    def check_the_verifier(self) -> str:
        return f"check that {self.verifier} is rimthan-mcp serving a release you trust."


BRIDGE = Voice(
    BRIDGE_WRITER,
    "this bridge's repository policy",
    "its HostProfile's writable_paths and protected_paths",
    "the bridge's verifier (--verifier-url, or the flags after --)",
)
LIBRARY = Voice(
    LIBRARY_WRITER,
    "this session's repository policy",
    "the writable_paths and protected_paths of the HostProfile given as HostSession's host argument",
    "the verifier your ToolCaller calls",
)


def _policy(voice: Voice, what: str, where: str) -> str:
    return (
        f"{what} where {voice.policy} ({voice.change}) does not let it write: allow those paths, or run a release "
        f"whose {where} elsewhere."
    )


def setup_paths(step: Mapping[str, Any]) -> list[str]:
    """Every path the setup step has the bridge write: its assets' install paths and its outputs' paths."""
    return [str(a["install_path"]) for a in step["host_assets"]] + [str(o["path"]) for o in step["outputs"]]


@dataclass(frozen=True)
class Refused:
    """Why the bridge does not write a path the verifier named, and whether its own policy is why (the user's to
    change) rather than a path no honest verifier names (outside the project, the bridge's own files)."""

    why: str
    by_policy: bool


def refusal(host: HostProfile, path: str, voice: Voice = BRIDGE) -> Refused | None:
    """Why ``voice``'s writer does not write ``path`` (project-relative, as the verifier named it), or None."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
        return Refused("not a path inside the project", by_policy=False)
    normal = "/".join(parts)
    folded = normal.casefold()  # as a case-insensitive file system (macOS, Windows) finds it
    own = folded in OWN_FILES or any(folded.startswith(f"{d.casefold()}/") for d in OWN_DIRS)
    if own or parts[-1].endswith(TMP_SUFFIX):
        return Refused(f"{voice.writer}'s own file", by_policy=False)
    policy = host.to_json()["repository_policy"]
    why = policy_refusal(policy, normal, voice.policy) or policy_refusal(
        {**policy, "writable_paths": ["*"]}, folded, voice.policy
    )
    return None if why is None else Refused(why, by_policy=True)


def check_targets(host: HostProfile, paths: Iterable[str]) -> None:
    """:class:`AssetClash` naming each of ``paths`` the host does not write (:func:`refusal`); nothing written.
    Its text is the host library's (:data:`LIBRARY`), its ``bridge_words`` the bridge's."""
    paths = list(paths)
    said = _setup_refusal(host, paths, LIBRARY)
    if said is not None:
        raise AssetClash(said, bridge=_setup_refusal(host, paths, BRIDGE))


def _setup_refusal(host: HostProfile, paths: Iterable[str], voice: Voice) -> str | None:
    head = (
        "The workspace was not set up and nothing was written (repository_policy_conflict): the verifier named "
        f"paths {voice.writer} does not write:"
    )
    return refusal_words(host, paths, head, _policy(voice, "The release delivers", "host adapter installs"), voice)


def step_files_refusal(host: HostProfile, step: Mapping[str, Any]) -> str | None:
    """Why the bridge neither reads nor writes the files ``step`` names (its outputs, each :func:`refusal`), or
    None: said as a setup's paths are (:func:`check_targets`), so the model is never told to write there."""
    return outputs_refusal(host, step.get("outputs") or [])


def outputs_refusal(host: HostProfile, outputs: Iterable[Mapping[str, Any]], voice: Voice = BRIDGE) -> str | None:
    """:func:`step_files_refusal` of ``outputs`` (a step's, or one of them), in ``voice``'s words: the bridge's,
    or the host library's (:class:`StepFilesRefused`)."""
    head = (
        "Nothing was read, written or checked (repository_policy_conflict): the verifier names this step's files "
        f"at paths {voice.writer} does not read or write:"
    )
    policy = _policy(voice, "The step writes", "steps write")
    return refusal_words(host, (str(o["path"]) for o in outputs), head, policy, voice)


class StepFilesRefused(HarnessError):
    """The host library's refusal of a step's files named where the host neither reads nor writes
    (:func:`outputs_refusal`, in the library's words): nothing was read or written, the run waits at the step."""

    code = FailureCode.REPOSITORY_POLICY_CONFLICT  # (the closed list's: docs/failure-codes.md)

    def __init__(self, said: str, step: str) -> None:
        self.step = step
        super().__init__(
            f"{said}\nnext: the run waits at step {step}; once that is fixed, resume it from its log (a new "
            "HostSession's resume) and write the step's files again."
        )


def check_outputs(host: HostProfile, outputs: Iterable[Mapping[str, Any]], step: str) -> None:
    """:class:`StepFilesRefused` if ``host`` neither reads nor writes one of ``outputs`` (:func:`outputs_refusal`)
    of ``step``; nothing is read or written here."""
    said = outputs_refusal(host, outputs, LIBRARY)
    if said is not None:
        raise StepFilesRefused(said, step)


def refusal_words(host: HostProfile, paths: Iterable[str], head: str, policy: str, voice: Voice) -> str | None:
    """``head``, then each of ``paths`` ``voice``'s writer does not write and why, then what to do: ``policy`` if the
    host's own policy refused them all (the user's to change), else check the verifier. None if none is refused."""
    refused = {p: r for p in dict.fromkeys(paths) if (r := refusal(host, p, voice)) is not None}
    if not refused:
        return None
    lines = [f"- {quoted(p)}: {r.why}" for p, r in refused.items()]
    by_policy = all(r.by_policy for r in refused.values())
    own = f"{voice.writer[0].upper()}{voice.writer[1:]} keeps these paths for itself; {voice.check_the_verifier()}"
    return head + "\n" + "\n".join(lines) + "\n" + (policy if by_policy else own)
