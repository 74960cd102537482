"""A harness author's own Scenario, in the shape the protocol has now and in the one it had before ``workflow=``.

``initial_state`` and ``migration_state`` gained the keyword ``workflow``; a
scenario written for the older signature still drives a run to its end
(started, migrated, completed on the target) through real engine modules over
real signed releases, with one DeprecationWarning naming the keyword.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.harness import WorkflowHarness
from support.engines import Engines, ExamplesScenario, TickingClock, drive_migrated, example_state, make_engines


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("shapes"), TickingClock())


class OlderScenario(ExamplesScenario):
    """Written before ``workflow=``: neither method takes it."""

    def initial_state(self, workflow_version: str) -> dict[str, Any]:  # type: ignore[override]
        return example_state(workflow_version or "1.2.0")

    def migration_state(self, values: Mapping[str, Any], target_version: str) -> dict[str, Any]:  # type: ignore[override]
        return {**example_state(target_version), "research_route": self.route}


class KeywordsScenario(ExamplesScenario):
    """Takes whatever keywords come (``**kwargs``): given ``workflow``, and the workflow it is given is the run's."""

    def __init__(self) -> None:
        super().__init__("desk-research")
        self.workflows: list[str] = []

    def initial_state(self, workflow_version: str, **kwargs: Any) -> dict[str, Any]:
        self.workflows.append(kwargs["workflow"])
        return example_state(workflow_version or "1.2.0")

    def migration_state(self, values: Mapping[str, Any], target_version: str, **kwargs: Any) -> dict[str, Any]:
        self.workflows.append(kwargs["workflow"])
        return {**example_state(target_version), "research_route": self.route}


def test_a_scenario_of_the_older_signature_still_runs_and_migrates_warned_once(engines: Engines) -> None:
    with pytest.warns(DeprecationWarning, match="initial_state and migration_state take no keyword 'workflow'"):
        driven = drive_migrated(engines, name="older", scenario=OlderScenario("desk-research"))
    assert driven.harness.record.final is not None
    assert driven.harness.record.final["release"]["id"] == "research-decision@1.3.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per scenario class: a second harness is not warned again
        WorkflowHarness(engines.call("1.3.0"), OlderScenario("desk-research"), project_dir=Path("unused"))


@pytest.mark.parametrize("scenario", [ExamplesScenario("desk-research"), KeywordsScenario()], ids=["named", "kwargs"])
def test_a_scenario_that_takes_workflow_is_given_it_and_not_warned(engines: Engines, scenario: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driven = drive_migrated(engines, name=f"current-{type(scenario).__name__}", scenario=scenario)
    assert driven.harness.record.final is not None
    assert driven.harness.record.final["release"]["id"] == "research-decision@1.3.0"
    if isinstance(scenario, KeywordsScenario):
        assert scenario.workflows == ["research", "research-decision"]
