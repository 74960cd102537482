"""Catalogues that break one rule twice: each problem must be said, not the first alone.

Each break edits a copy of the packaged research-decision@1.2.0 source (or a release's catalogue folder) so
that one rule finds two problems or more; ``said`` is each failure the rule must raise, in order: its code,
file and the start of its message (a long value is quoted cut). Before, each of these rules stopped at its
first problem. ``tests/core/test_catalogue_rules_each_problem.py`` loads them with the release loader;
``tests/packager/test_pack_each_problem_of_a_rule.py`` with the installed ``rimthan-pack`` (check, and verify
of a signed release).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

WORKFLOW = "workflows/research-decision.toml"
STATE_SCHEMA = "schemas/confirmed-state.schema.json"
ADAPTERS = ("adapters/claude-code.toml", "adapters/opencode.toml")
KEY = "workflow research-decision@1.2.0"
LONG_VERSION = "1.0.0-" + "a" * 70  # past MAX_VERSION_CHARS (64)
HUGE = 300_000  # characters: one choice this long is past MAX_CONFIRMED_STATE_BYTES (256 KiB)
TOO_LARGE = 3_000_000  # bytes: past MAX_STEP_ARTIFACT_BYTES (2 MiB)

Said = tuple[str, str, str]
"""A failure: its code, its file (relative to the catalogue folder), and the start of its message."""


@dataclass(frozen=True)
class Break:
    name: str
    edit: Callable[[Path], None]
    said: list[Said]


def edit_toml(root: Path, rel: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = tomllib.loads((root / rel).read_text("utf-8"))
    change(data)
    (root / rel).write_text(tomli_w.dumps(data), "utf-8")


def _workflow(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_toml(root, WORKFLOW, change)


def _step(data: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in data["steps"] if s["id"] == step_id)


def _setup_outputs_and_delivery(data: dict[str, Any]) -> None:
    setup = _step(data, "setup-workspace")
    setup["outputs"].append(dict(setup["outputs"][0], id="extra", path=".rimthan/extra.json"))
    setup["host_assets"].remove("decision-critic")


def _shapes(data: dict[str, Any]) -> None:
    _step(data, "interview").update(validators=["evidence-auditor@1.0.0"], max_total_bytes=1024)
    _step(data, "confirm-contract").update(max_total_bytes=1024)


def _limbo(data: dict[str, Any]) -> None:
    data["steps"].append(
        {"id": "limbo", "title": "Limbo", "instruction": "assets/instructions/interview.md", "next": "limbo"}
    )


def _overlapping_branches(data: dict[str, Any]) -> None:
    when = _step(data, "select-route")["branches"][1]["when"]
    when["one_of"] = ["user-interviews", "desk-research", "experiment"]


def _clashing_outputs(data: dict[str, Any]) -> None:
    outputs = _step(data, "user-interviews")["outputs"]
    for output, other in zip(outputs, _step(data, "desk-research")["outputs"], strict=True):
        output["path"] = other["path"]


def _long_adapter_versions(root: Path) -> None:
    for adapter in ADAPTERS:
        edit_toml(root, adapter, lambda d: d.update(version=LONG_VERSION))
    edit_toml(root, WORKFLOW, lambda d: d.update(host_adapters=[f"{k}@{LONG_VERSION}" for k in _ADAPTER_IDS]))


def _many_capabilities(root: Path) -> None:
    """Claude Code's capabilities past the bound; the workflow's and OpenCode's each within it, but not together
    (38 names; 68 with Claude Code's)."""
    _add_names(root, ADAPTERS[0], "capabilities", [f"c.{i}" for i in range(40)])
    _add_names(root, ADAPTERS[1], "capabilities", [f"o.{i}" for i in range(10)])
    _add_names(root, WORKFLOW, "required_capabilities", [f"w.{i}" for i in range(25)])


def _add_names(root: Path, rel: str, key: str, names: list[str]) -> None:
    edit_toml(root, rel, lambda d: d.update({key: d[key] + names}))


def _long_field_names(root: Path) -> None:
    schema = json.loads((root / STATE_SCHEMA).read_text("utf-8"))
    schema["properties"].update({"x" * 129: {"type": "string"}, "y" * 130: {"type": "string"}})
    (root / STATE_SCHEMA).write_text(json.dumps(schema, indent=2), "utf-8")


def _huge_choices(data: dict[str, Any]) -> None:
    _step(data, "select-route")["question"]["choices"] += ["x" * HUGE, "y" * HUGE]


def _unconfirmable_requirements(data: dict[str, Any]) -> None:
    _step(data, "interview")["requires_confirmed"] = ["budget"]
    _step(data, "confirm-contract")["requires_confirmed"] = ["due-by"]


def _skipped_producers(data: dict[str, Any]) -> None:
    """Two route steps each reading what another route produces (the route to each skips its producer)."""
    _step(data, "user-interviews")["inputs"] = ["evidence-log"]
    _step(data, "experiment")["inputs"] = ["interview-report"]


def _many_outputs_and_validators(data: dict[str, Any]) -> None:
    """desk-research with 17 outputs and 17 validators (each list past its 16)."""
    data["validators"] += [dict(data["validators"][0], id=f"v{i}") for i in range(17)]
    desk = _step(data, "desk-research")
    desk["validators"] = [f"v{i}@1.0.0" for i in range(17)]
    desk["outputs"] += [
        dict(desk["outputs"][1], id=f"o{i}", path=f"research/o{i}.md", max_bytes=1024) for i in range(15)
    ]


def _large_outputs(data: dict[str, Any]) -> None:
    """Two outputs past the step bound on two steps: desk-research's cap past it too; user-interviews has no cap
    (its outputs' sum, past by either, is unsaid)."""
    for step_id in ("desk-research", "user-interviews"):
        for output in _step(data, step_id)["outputs"]:
            output["max_bytes"] = TOO_LARGE
    _step(data, "desk-research")["max_total_bytes"] = TOO_LARGE
    del _step(data, "user-interviews")["max_total_bytes"]


_ADAPTER_IDS = ("claude-code", "opencode")
_HUGE_CHOICE = "step select-route: question.choices[{}] '{}...[300000 chars, cut]'"
_PAST_STEP = "is past the 2097152 bytes a step's artifacts may total (MAX_STEP_ARTIFACT_BYTES)"

BREAKS = [
    Break("first step", _workflow(_setup_outputs_and_delivery), [
        ("first_step_not_setup", WORKFLOW, f"{KEY}: setup-workspace must declare exactly one JSON output "
         "'workspace-manifest'"),
        ("first_step_not_setup", WORKFLOW, f"{KEY}: setup-workspace must deliver every subagent a validator runs "
         "as; add decision-critic to its host_assets"),
    ]),
    Break("step shapes", _workflow(_shapes), [
        ("catalogue_invalid", WORKFLOW, "step interview has validators but no outputs to validate"),
        ("catalogue_invalid", WORKFLOW, "step interview caps total bytes but declares no outputs"),
        ("catalogue_invalid", WORKFLOW, "step confirm-contract caps total bytes but declares no outputs"),
    ]),
    Break("reachability", _workflow(_limbo), [
        ("terminal_unreachable", WORKFLOW, f"{KEY}: step(s) limbo can never be reached"),
        ("terminal_unreachable", WORKFLOW, f"{KEY}: no terminal step is reachable from limbo"),
    ]),
    Break("branches", _workflow(_overlapping_branches), [
        ("branch_ambiguous", WORKFLOW, "step select-route: value 'desk-research' matches both desk-research and "
         "user-interviews"),
        ("branch_ambiguous", WORKFLOW, "step select-route: value 'experiment' matches both user-interviews and "
         "experiment"),
    ]),
    Break("write paths", _workflow(_clashing_outputs), [  # said once, though both pinned adapters are checked
        ("catalogue_invalid", WORKFLOW, f"{KEY}: step desk-research output evidence-log writes "
         "'research/evidence-log.json' and step user-interviews output interview-synthesis writes "
         "'research/evidence-log.json': one would overwrite the other"),
        ("catalogue_invalid", WORKFLOW, f"{KEY}: step desk-research output findings writes 'research/findings.md' "
         "and step user-interviews output interview-report writes 'research/findings.md'"),
    ]),
    Break("input routes", _workflow(_skipped_producers), [
        ("terminal_unreachable", WORKFLOW, f"{KEY}: step {step} reads artifact {artifact!r}, but the route "
         f"setup-workspace -> interview -> confirm-contract -> select-route -> {step} reaches it without passing "
         f"{producer}, the step that produces it")
        for step, artifact, producer in (
            ("user-interviews", "evidence-log", "desk-research"),
            ("experiment", "interview-report", "user-interviews"),
        )
    ]),
    Break("declared counts", _workflow(_many_outputs_and_validators), [
        ("catalogue_invalid", WORKFLOW, f"step desk-research: it declares 17 {what}, past the 16 one tool call "
         "carries")
        for what in ("outputs", "validators")
    ]),
    Break("declared sizes", _workflow(_large_outputs), [
        ("catalogue_invalid", WORKFLOW, f"step {step}: {key} = {TOO_LARGE} {_PAST_STEP}")
        for step, key in (
            ("desk-research", "output evidence-log max_bytes"),
            ("desk-research", "output findings max_bytes"),
            ("desk-research", "max_total_bytes"),
            ("user-interviews", "output interview-synthesis max_bytes"),
            ("user-interviews", "output interview-report max_bytes"),
        )
    ]),
    Break("identities", _long_adapter_versions, [
        ("catalogue_invalid", adapter, "version is 76 characters, past the 64 a version may have in a tool call")
        for adapter in ADAPTERS
    ]),
    Break("host lists", _many_capabilities, [  # Claude Code's union with the workflow's: past by its own, unsaid
        ("catalogue_invalid", ADAPTERS[0], "capabilities makes 43 names, past the 32 a host object carries"),
        ("catalogue_invalid", WORKFLOW, "required_capabilities with host adapter opencode@1.0.0's capabilities "
         "makes 38 names, past the 32 a host object carries (MAX_LISTED_NAMES)"),
    ]),
    Break("state fields", _long_field_names, [
        ("catalogue_invalid", STATE_SCHEMA, f"top-level field '{c * 40}...[{n} chars, cut]' is {n} characters; a "
         "field name is 1 to 128 characters (MAX_NAME_CHARS)")
        for c, n in (("x", 129), ("y", 130))
    ]),
    Break("confirmable values", _workflow(_huge_choices), [
        *[("catalogue_invalid", WORKFLOW, _HUGE_CHOICE.format(i, c * 40) + " makes a state of at least 300058 "
           "bytes") for i, c in ((3, "x"), (4, "y"))],
        *[("branch_predicate_invalid", WORKFLOW, _HUGE_CHOICE.format(i, c * 40) + " matches no branch")
          for i, c in ((3, "x"), (4, "y"))],
        *[("branch_predicate_invalid", WORKFLOW, _HUGE_CHOICE.format(i, c * 40) + " is refused by the "
           "confirmed-state schema's 'research_route' (enum:") for i, c in ((3, "x"), (4, "y"))],
    ]),
    Break("required confirmed", _workflow(_unconfirmable_requirements), [
        ("reference_unresolved", WORKFLOW, f"step {step} requires confirmed field {field!r}, which the "
         f"confirmed-state schema {STATE_SCHEMA} does not declare")
        for step, field in (("interview", "budget"), ("confirm-contract", "due-by"))
    ]),
]  # fmt: skip


def said_as_expected(said: list[Said], expected: list[Said]) -> bool:
    """Whether ``said`` is ``expected`` failure for failure: same code and file, the message starting as given."""
    return len(said) == len(expected) and all(
        (code, file) == (want_code, want_file) and message.startswith(want)
        for (code, file, message), (want_code, want_file, want) in zip(said, expected, strict=True)
    )
