"""A checkpoint's receipts, kept as the claim tables the token carries.

Receipts are the part of a checkpoint that grows with a run (one artifact and
one validator receipt per gated step), so no call touches them one by one in
Python: a verified token's tables are wrapped as they came out of
``json.loads``, a call looks up only the few receipts its step needs (a
receipt object is built on lookup), and the next checkpoint is written from
the same tables, changed by dictionary operations that run in C (copy, merge,
pop the step's own entries, sort). Claim form: an artifact receipt is
``[sha256-hex, size]``, a validator receipt ``["pass", sha256-hex]``.

A table never changes after it is built: every change returns a new table,
because a verified checkpoint (and its tables) may be shared by the calls
that verify the same token.

A table read from a verified token also keeps its JSON text, exactly as the
token carries it (see :mod:`.receipt_text`): the next checkpoint's table is
that text with the few changed receipts spliced in by string operations in
C, so re-issuing a checkpoint does not serialise every receipt again. A
change the splice cannot make exactly drops the text, and the table is then
written by ``json.dumps`` as before: same bytes either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from rimthan_workflow_registry.run.receipt_text import claims_json, spliced

_DIGEST_PREFIX = "sha256:"


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
Claims = dict[str, list[Any]]


class _Table(Mapping[str, R], Generic[R]):
    """Receipts by name over their claim form; read-only, every change is a new table."""

    __slots__ = ("_claims", "_text")

    def __init__(self, claims: Claims | None = None, text: str | None = None) -> None:
        self._claims: Claims = {} if claims is None else claims
        self._text = text  # ``claims_json(self.claims())``, when known without writing it

    def _receipt(self, entry: list[Any]) -> R:
        raise NotImplementedError

    @classmethod
    def _entry(cls, receipt: R) -> list[Any]:
        raise NotImplementedError

    def __getitem__(self, name: str) -> R:
        return self._receipt(self._claims[name])

    def __contains__(self, name: object) -> bool:
        return name in self._claims

    def __iter__(self) -> Iterator[str]:
        return iter(self._claims)

    def __len__(self) -> int:
        return len(self._claims)

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._claims == other._claims
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._claims!r})"

    def claims(self) -> Claims:
        """The claim form, sorted by name (what a checkpoint token carries)."""
        return dict(sorted(self._claims.items()))

    def text(self) -> str:
        """The claim form as the checkpoint token's JSON carries it (sorted by name, compact)."""
        return self._text if self._text is not None else claims_json(self.claims())

    def merged(self, receipts: Mapping[str, R]) -> Self:
        """This table with ``receipts`` added or replaced."""
        changes = self._claims_of(receipts)
        return type(self)({**self._claims, **changes}, spliced(self._text, self._claims, changes, ()))

    def without(self, names: Iterable[str]) -> Self:
        """This table less the receipts ``names`` (absent names are ignored)."""
        kept = self._claims.copy()
        dropped = [name for name in names if kept.pop(name, None) is not None]
        return type(self)(kept, spliced(self._text, self._claims, {}, dropped))

    @classmethod
    def _claims_of(cls, receipts: Mapping[str, R]) -> Claims:
        if isinstance(receipts, _Table):
            return receipts._claims
        return {name: cls._entry(receipt) for name, receipt in receipts.items()}


class ArtifactTable(_Table[ArtifactReceipt]):
    """Artifact receipts by artifact id; claim form ``[sha256-hex, size]``."""

    __slots__ = ()

    def _receipt(self, entry: list[Any]) -> ArtifactReceipt:
        return ArtifactReceipt(entry[0], entry[1])

    @classmethod
    def _entry(cls, receipt: ArtifactReceipt) -> list[Any]:
        return [receipt.sha256, receipt.size]

    @classmethod
    def of(cls, receipts: Mapping[str, ArtifactReceipt]) -> ArtifactTable:
        return receipts if isinstance(receipts, ArtifactTable) else cls(cls._claims_of(receipts))


class ValidatorTable(_Table[ValidatorReceipt]):
    """Validator receipts by ``id@version``; claim form ``[outcome, sha256-hex]``."""

    __slots__ = ()

    def _receipt(self, entry: list[Any]) -> ValidatorReceipt:
        return ValidatorReceipt(entry[0], _DIGEST_PREFIX + entry[1])

    @classmethod
    def _entry(cls, receipt: ValidatorReceipt) -> list[Any]:
        return [receipt.outcome, receipt.input_digest.removeprefix(_DIGEST_PREFIX)]

    @classmethod
    def of(cls, receipts: Mapping[str, ValidatorReceipt]) -> ValidatorTable:
        return receipts if isinstance(receipts, ValidatorTable) else cls(cls._claims_of(receipts))
