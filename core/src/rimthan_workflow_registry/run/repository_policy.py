"""The host repository's write policy, and whether a step's writes conflict with it.

The harness sends its policy (``writable_paths`` and ``protected_paths``,
fnmatch-style globs where ``*`` also crosses ``/``). A step conflicts when any
path it must write is not writable or is protected: the run is refused before
anything is written, instead of failing halfway through. A host checks the
paths a verifier names against its own policy with :func:`policy_refusal`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.failures import Failure


def policy_refusal(policy: Mapping[str, Any], path: str, whose: str = "the repository policy") -> str | None:
    """Why ``policy`` forbids writing ``path`` (``protected by the repository policy (GLOB)`` or ``not
    writable under the repository policy``; ``whose`` names the policy), or None if it allows it."""
    blocked_by = next((g for g in policy.get("protected_paths", ()) if fnmatchcase(path, g)), None)
    if blocked_by is not None:
        return f"protected by {whose} ({blocked_by})"
    if not any(fnmatchcase(path, g) for g in policy.get("writable_paths", ())):
        return f"not writable under {whose}"
    return None


def conflict(policy: Mapping[str, Any], paths: Iterable[str]) -> list[Failure]:
    """One ``repository_policy_conflict`` failure per path the policy forbids."""
    failures: list[Failure] = []
    for path in sorted(set(paths)):
        why = policy_refusal(policy, path)
        if why is not None:
            advice = "; allow it in writable_paths or stop the run" if why.startswith("not writable") else ""
            failures.append(Failure(FailureCode.REPOSITORY_POLICY_CONFLICT, f"{path} is {why}{advice}", path=path))
    return failures
