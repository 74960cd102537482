"""A file of a catalogue's examples folder no workflow takes: what a build's refusal of it names.

Defined apart from :mod:`rimthan_workflow_registry.run.catalogue_examples`,
which finds such files on every build, and imported only when one is found:
a build with none never defines the type (each frozen dataclass costs a
process its generated methods' compilation).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StrayExample:
    """A file of the examples folder no workflow takes as an example, and the example name it most likely misspells."""

    path: str
    closest: str | None

    def describe(self) -> str:
        return f"{self.path} (closest example name: {self.closest})" if self.closest else self.path
