"""A checkpoint's receipts, kept in the columns the token carries.

Receipts are the part of a checkpoint that grows with a run (one artifact and
one validator receipt per gated step), so no call touches them one by one in
Python. A table is three columns, as the checkpoint's claims hold them:
the receipts' names, sorted and unique; their SHA-256 digests as one string
of 64 hex digits per receipt, in the same order; and, for artifacts, their
sizes. Claim forms::

    "artifacts":  {"names": [...], "sha256": "<hex><hex>...", "sizes": [...]}
    "validators": {"names": [...], "input_sha256": "<hex><hex>..."}

A validator table holds passes only (a receipt records a validator that
passed), so it needs no outcome column. A verified token's columns are kept
as they came out of ``json.loads``; a call looks up the few receipts its step
needs by bisection (a receipt object is built on lookup), and the next
checkpoint is written from the same columns, changed by list and string
slicing, all in C.

A table never changes after it is built: every change returns a new table,
because a verified checkpoint (and its tables) may be shared by the calls
that verify the same token.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from rimthan_workflow_registry.canonical import DIGEST_PREFIX, printable_ascii
from rimthan_workflow_registry.run.token_wire import claim_json

_HEX_DIGITS = 64
# When a change names more receipts than this, the table is rebuilt from a dictionary instead of sliced.
_SLICED_CHANGES = 8


@dataclass(frozen=True)
class ArtifactReceipt:
    sha256: str
    size: int


@dataclass(frozen=True)
class ValidatorReceipt:
    """A validator that passed, and the digest of the inputs it passed on."""

    outcome: str
    input_digest: str  # sha256:<hex>


R = TypeVar("R", ArtifactReceipt, ValidatorReceipt)
Entry = tuple[str, int]  # a receipt as its table stores it: the hex digest, and the size (0 for validators)


class _Table(Mapping[str, R], Generic[R]):
    """Receipts by name over their columns; read-only, every change is a new table."""

    __slots__ = ("_digests", "_names", "_sizes")
    _DIGESTS = "sha256"  # the claim member holding the digest column

    def __init__(self, names: list[str] | None = None, digests: str = "", sizes: list[int] | None = None) -> None:
        self._names: list[str] = [] if names is None else names
        self._digests = digests
        self._sizes: list[int] = [] if sizes is None else sizes

    def _receipt(self, digest: str, at: int) -> R:
        raise NotImplementedError

    @classmethod
    def _entry(cls, receipt: R) -> Entry:
        raise NotImplementedError

    def _at(self, name: object) -> int:
        """The index of ``name``, or -1."""
        names = self._names
        at = bisect_left(names, name) if isinstance(name, str) else len(names)
        return at if at < len(names) and names[at] == name else -1

    def _digest(self, at: int) -> str:
        return self._digests[at * _HEX_DIGITS : (at + 1) * _HEX_DIGITS]

    def __getitem__(self, name: str) -> R:
        at = self._at(name)
        if at < 0:
            raise KeyError(name)
        return self._receipt(self._digest(at), at)

    def __contains__(self, name: object) -> bool:
        return self._at(name) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return (self._names, self._digests, self._sizes) == (other._names, other._digests, other._sizes)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"

    def claims(self) -> dict[str, Any]:
        """The claim form: the columns a checkpoint token carries."""
        return {"names": self._names.copy(), self._DIGESTS: self._digests}

    def claims_json(self) -> str:
        """The claim form's JSON as ``json.dumps(self.claims(), separators=(",", ":"))`` writes it.

        A long table's JSON is mostly its digest and name columns, which the
        encoder scans character by character for escapes. JSON writes a string
        of ASCII letters and digits, and a string of printable ASCII without a
        quote or backslash, as it is between quotes: such columns are written
        directly (checked in C, each in one pass); any other goes to the encoder.
        """
        digests = self._digests
        plain = digests.isascii() and digests.encode("ascii").isalnum()  # bytes.isalnum: ASCII letters and digits
        written = f'"{digests}"' if plain else claim_json(digests)
        return f'{{"names":{_names_json(self._names)},"{self._DIGESTS}":{written}{self._more_json()}}}'

    def _more_json(self) -> str:
        """The JSON of the claim members after the digest column, each after a comma ("" when none)."""
        return ""

    def merged(self, receipts: Mapping[str, R]) -> Self:
        """This table with ``receipts`` added or replaced."""
        changes = {name: self._entry(receipt) for name, receipt in receipts.items()}
        if len(changes) > _SLICED_CHANGES:
            return self._built({**self._entries(), **changes})
        names, digests, sizes = self._names.copy(), self._digests, self._sizes.copy()
        for name, (digest, size) in changes.items():
            at = bisect_left(names, name)
            start = at * _HEX_DIGITS
            if at < len(names) and names[at] == name:
                digests = digests[:start] + digest + digests[start + _HEX_DIGITS :]
                sizes[at] = size
            else:
                names.insert(at, name)
                digests = digests[:start] + digest + digests[start:]
                sizes.insert(at, size)
        return type(self)(names, digests, sizes)

    def without(self, names: Iterable[str]) -> Self:
        """This table less the receipts ``names`` (absent names are ignored)."""
        kept, digests, sizes = self._names, self._digests, self._sizes
        for name in names:
            at = bisect_left(kept, name)
            if at < len(kept) and kept[at] == name:
                if kept is self._names:
                    kept, sizes = kept.copy(), sizes.copy()
                del kept[at], sizes[at]
                digests = digests[: at * _HEX_DIGITS] + digests[(at + 1) * _HEX_DIGITS :]
        return type(self)(kept, digests, sizes)

    def _entries(self) -> dict[str, Entry]:
        return {
            name: (self._digest(at), size) for at, (name, size) in enumerate(zip(self._names, self._sizes, strict=True))
        }

    @classmethod
    def _built(cls, entries: Mapping[str, Entry]) -> Self:
        ordered = sorted(entries.items())
        return cls([n for n, _ in ordered], "".join(e[0] for _, e in ordered), [e[1] for _, e in ordered])

    @classmethod
    def of(cls, receipts: Mapping[str, R]) -> Self:
        """``receipts`` as a table (a table is returned as it is)."""
        if isinstance(receipts, cls):
            return receipts
        return cls._built({name: cls._entry(receipt) for name, receipt in receipts.items()})


class ArtifactTable(_Table[ArtifactReceipt]):
    """Artifact receipts by artifact id; claim form ``{"names", "sha256", "sizes"}``."""

    __slots__ = ()

    def _receipt(self, digest: str, at: int) -> ArtifactReceipt:
        return ArtifactReceipt(digest, self._sizes[at])

    @classmethod
    def _entry(cls, receipt: ArtifactReceipt) -> Entry:
        return _hex_digest(receipt.sha256), receipt.size

    def claims(self) -> dict[str, Any]:
        return {**super().claims(), "sizes": self._sizes.copy()}

    def _more_json(self) -> str:
        return f',"sizes":{claim_json(self._sizes)}'

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> ArtifactTable:
        """The table of a claim form that passed the closed-shape check."""
        return cls(claims["names"], claims["sha256"], claims["sizes"])


class ValidatorTable(_Table[ValidatorReceipt]):
    """Validator passes by ``id@version``; claim form ``{"names", "input_sha256"}``."""

    __slots__ = ()
    _DIGESTS = "input_sha256"

    def _receipt(self, digest: str, at: int) -> ValidatorReceipt:
        return ValidatorReceipt("pass", DIGEST_PREFIX + digest)

    @classmethod
    def _entry(cls, receipt: ValidatorReceipt) -> Entry:
        if receipt.outcome != "pass":
            raise ValueError(f"a validator table holds passes only, not {receipt.outcome!r}")
        return _hex_digest(receipt.input_digest.removeprefix(DIGEST_PREFIX)), 0

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> ValidatorTable:
        """The table of a claim form that passed the closed-shape check."""
        names: list[str] = claims["names"]
        return cls(names, claims["input_sha256"], [0] * len(names))


def _names_json(names: list[str]) -> str:
    """``json.dumps(names)``; written directly when every name is printable ASCII without a quote or backslash."""
    joined = "".join(names)
    if names and printable_ascii(joined) and '"' not in joined and "\\" not in joined:
        return '["' + '","'.join(names) + '"]'
    return claim_json(names)


def _hex_digest(digest: str) -> str:
    """``digest``, if it can take its place in a digest column (64 characters), else ``ValueError``."""
    if len(digest) != _HEX_DIGITS:
        raise ValueError(f"a receipt's digest must be {_HEX_DIGITS} hex digits, not {digest!r}")
    return digest
