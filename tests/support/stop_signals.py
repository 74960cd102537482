"""A stop asked from inside the work it stops (``oci_stop``): at a chosen look, never at a time."""

from __future__ import annotations

from rimthan_workflow_registry.release import StopSignal


class StopAtLook(StopSignal):
    """A stop asked as the work looks at it for the ``at``-th time (a verification: once per batch, before it
    reads the batch); ``looks`` counts the looks, so a test says which batches were read."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.looks = at, 0

    @property
    def asked(self) -> bool:
        self.looks += 1
        if self.looks == self.at:
            self.stop()
        return super().asked
