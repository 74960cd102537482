"""The host repository's write policy, and whether a step's writes conflict with it.

The harness sends its policy (``writable_paths`` and ``protected_paths``,
fnmatch-style globs where ``*`` also crosses ``/``). A step conflicts when any
path it must write is not writable or is protected: the run is refused before
anything is written, instead of failing halfway through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.failures import Failure


def conflict(policy: Mapping[str, Any], paths: Iterable[str]) -> list[Failure]:
    """One ``repository_policy_conflict`` failure per path the policy forbids."""
    writable = list(policy.get("writable_paths", ()))
    protected = list(policy.get("protected_paths", ()))
    failures: list[Failure] = []
    for path in sorted(set(paths)):
        blocked_by = next((g for g in protected if fnmatchcase(path, g)), None)
        if blocked_by is not None:
            failures.append(
                Failure(
                    FailureCode.REPOSITORY_POLICY_CONFLICT,
                    f"{path} is protected by the repository policy ({blocked_by})",
                    path=path,
                )
            )
        elif not any(fnmatchcase(path, g) for g in writable):
            failures.append(
                Failure(
                    FailureCode.REPOSITORY_POLICY_CONFLICT,
                    f"{path} is not writable under the repository policy; allow it in writable_paths or stop the run",
                    path=path,
                )
            )
    return failures
