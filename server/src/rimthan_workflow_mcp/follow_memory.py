"""What a follower remembers of its registry beyond one sync: the publishes it refused, by OCI manifest digest.

A manifest digest names the same bytes forever, so a publish refused once is refused again for as long as the
trust store is the same: :class:`RefusedDigests` keeps each refusal for the process's life, and the follower
neither downloads nor verifies that digest again (under any tag), nor logs it again. A new digest is pulled and
verified as ever; a refusal is never turned into an accept: only a changed trust store (:meth:`forget`) lets a
refused digest be verified again. A refusal that depends on the tag it was pulled under (``oci_tag_mismatch``: the
release is another version) is kept for that tag alone. Bytes the registry served other than the digests name
(``oci_blob_mismatch``) are never remembered here: they say nothing of the release the digest names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rimthan_workflow_registry.errors import FailureCode, RegistryError

_TAG_BOUND = frozenset({FailureCode.OCI_TAG_MISMATCH})  # refused for the tag it was pulled under, not its bytes


@dataclass
class RefusedDigests:
    """Refused publishes by OCI manifest digest (and tag, for a refusal bound to it), for the process's life."""

    _refused: dict[tuple[str, str | None], RegistryError] = field(default_factory=dict)

    def known(self, digest: str, tag: str) -> RegistryError | None:
        """Why ``digest`` was refused before (pulled under ``tag`` now), or None: not refused, pull it."""
        return self._refused.get((digest, None)) or self._refused.get((digest, tag))

    def remember(self, digest: str, tag: str, exc: RegistryError) -> None:
        self._refused[(digest, tag if exc.code in _TAG_BOUND else None)] = exc

    def forget(self) -> None:
        """The trust store changed: a key added may vouch for a digest refused before, so each is verified again."""
        self._refused.clear()
