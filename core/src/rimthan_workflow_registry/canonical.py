"""Canonical JSON (RFC 8785) and SHA-256 digests.

Everything Rimthan signs or digests goes through here, so a value has exactly
one byte form: manifests, confirmed-state digests, receipts, contracts.
Canonicalisation is delegated to the ``rfc8785`` library (the stdlib's C
encoder only where it provably writes the same bytes; an object's bytes
composed from its members' where its members' digests are wanted too); this
module only adds digest helpers (strict parsing, duplicate keys and non-finite
numbers refused, is :mod:`.strict_json`'s). ``rfc8785`` is imported on its
first use: a build writes no value outside the C encoder's subset.

SHA-256 comes from ``cryptography`` (:func:`sha256_hex`, :class:`Sha256`), not
``hashlib``: every process that hashes a release also checks or makes an
Ed25519 signature, so cryptography's OpenSSL is loaded anyway, and ``hashlib``
would load the system's libcrypto a second time (4-6 ms of a 1 MiB build's
85-100 ms, measured A/B on 5 December 2026). Both release the GIL while hashing.
The one exception is the check of a large release's files on two threads
(:mod:`.release.file_pipeline`), where ``hashlib``'s fewer GIL-holding calls
per file pay for its load many times over.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Callable, Iterable, Mapping
from functools import cache, lru_cache
from types import MappingProxyType, ModuleType
from typing import Any, TypeVar

from cryptography.hazmat.primitives.hashes import SHA256, Hash

from rimthan_workflow_registry.json_encoders import compact_encoder
from rimthan_workflow_registry.limits import MAX_JSON_SAFE_INTEGER

DIGEST_PREFIX = "sha256:"
SHA256_HEX_PATTERN = "[0-9a-f]{64}"
"""A SHA-256 digest as text (64 lowercase hex digits; key ids too): a regular expression without anchors.

Python code matches it with ``fullmatch``: ``re``'s ``$`` also matches before a final newline, so ``^...$``
with ``match`` takes ``"<digest>\\n"``. A JSON Schema anchors it as ``^...$``, for ECMA-262's ``$``.
"""
DIGEST_PATTERN = DIGEST_PREFIX + SHA256_HEX_PATTERN
"""A prefixed digest (``sha256:`` and 64 lowercase hex digits), as :data:`SHA256_HEX_PATTERN` is matched."""
_RECURRING_ENTRIES = 256  # distinct objects remembered by recurring_member_digests (least recently used dropped)
_RECURRING_KEY_BYTES = 64 * 1024  # a larger value is digested on every call, never remembered
_V = TypeVar("_V")
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))  # U+0020-U+007E: what printable_ascii_string_bytes takes
_IN_PLACE = frozenset({int, bool, float, type(None)})  # scalar types CanonicalParts leaves to rfc8785 in place
_STR_ONLY = frozenset({str})
# The stdlib's C encoder with RFC 8785's separators and key order, built once: for plain_json_bytes' subset only.
_C_ENCODE = compact_encoder(sort_keys=True, ensure_ascii=False)


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value: the stdlib's C encoder's where they provably agree, ``rfc8785``'s otherwise.

    A value in :func:`plain_json_bytes`' subset (a release manifest, nearly
    every confirmed state) is written by the C encoder: a 10,000-file
    manifest in 18 against 62 ms. Any other value, and every value with no
    canonical form, goes to ``rfc8785`` with its own bytes and errors.
    """
    return plain_json_bytes(value) or _rfc8785_dumps()(value)


def canonicalization_error() -> type[ValueError]:
    """``rfc8785.CanonicalizationError``, what :func:`canonical_bytes` raises for a value with no canonical form."""
    from rfc8785 import CanonicalizationError

    return CanonicalizationError


def _rfc8785_dumps() -> Callable[[Any], bytes]:
    """``rfc8785.dumps``, the library imported on first use: a build's values are all in the C encoder's subset."""
    dumps: Callable[[Any], bytes] = _rfc8785().dumps
    return dumps


@cache  # the import statement once: a server serialises such values on every call
def _rfc8785() -> ModuleType:
    import rfc8785

    return rfc8785


def canonical_text(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


class CanonicalParts:
    """RFC 8785 bytes of values that embed recurring sub-values, each of those serialised by ``rfc8785`` once.

    RFC 8785 is compositional: a member's text depends only on its own value,
    and an object's member order only on its keys. So :meth:`dumps` has
    ``rfc8785`` serialise ``value`` with every kept part (found through nested
    objects, compared by identity) replaced by a placeholder string, and puts
    the part's own ``rfc8785`` bytes where the placeholder's text is. Every byte
    still comes from ``rfc8785``, but for strings of printable ASCII holding a
    quote or backslash (tokens): :func:`printable_ascii_string_bytes`, and for a
    skeleton in :func:`plain_json_bytes`' subset (the result envelope). A placeholder is 128 random bits drawn per
    instance, never sent; if the composed text does not hold each used
    placeholder exactly where expected, the whole value is serialised instead.

    A kept value is shared by every result that embeds it and must never be
    mutated; it stays referenced (so its identity stays its own) as long as
    this object lives.
    """

    def __init__(self) -> None:
        self._dumps: Callable[[Any], bytes] = _rfc8785_dumps()
        self._tag = os.urandom(16).hex()
        self._opening = self._dumps(self._tag + ":")[:-1]
        self._parts: dict[int, tuple[Any, bytes]] = {}

    def keep(self, value: _V) -> _V:
        """Remember ``value``'s canonical bytes; returns ``value``. It must not be mutated afterwards."""
        self.bytes_of(value)
        return value

    def bytes_of(self, value: Any) -> bytes:
        """``rfc8785.dumps(value)``, remembered: ``value`` is kept (and must not be mutated afterwards)."""
        part = self._parts.get(id(value))
        if part is None or part[0] is not value:
            part = self._parts[id(value)] = (value, self._dumps(value))
        return part[1]

    def dumps(self, value: Any) -> bytes:
        """``rfc8785.dumps(value)``, reusing the bytes of every kept part ``value`` embeds."""
        used: list[bytes] = []
        skeleton = self._skeleton(value, used)
        if not used:
            return plain_json_bytes(skeleton) or self._dumps(value)
        pieces = (plain_json_bytes(skeleton) or self._dumps(skeleton)).split(self._opening)
        if len(pieces) != len(used) + 1:
            return self._dumps(value)
        expected = {str(index).encode(): data for index, data in enumerate(used)}
        out = [pieces[0]]
        for piece in pieces[1:]:
            number, quote, rest = piece.partition(b'"')
            data = expected.pop(number, None)
            if data is None or not quote:
                return self._dumps(value)
            out += (data, rest)
        return b"".join(out)

    def _skeleton(self, value: Any, used: list[bytes]) -> Any:
        part = self._parts.get(id(value))
        if part is not None and part[0] is value:
            used.append(part[1])
            return f"{self._tag}:{len(used) - 1}"
        kind = type(value)
        if kind is str:
            data = printable_ascii_string_bytes(value) if '"' in value or "\\" in value else None
            if data is None:
                return value
            used.append(data)
            return f"{self._tag}:{len(used) - 1}"
        if kind is not dict:
            return value
        # Members that are numbers, booleans, null or strings needing no escape stay as they are (a kept one is then
        # serialised in place: the same bytes), without a call each.
        skeleton = self._skeleton
        return {
            key: item
            if type(item) in _IN_PLACE or (type(item) is str and '"' not in item and "\\" not in item)
            else skeleton(item, used)
            for key, item in value.items()
        }


def printable_ascii_string_bytes(text: str) -> bytes | None:
    """RFC 8785 bytes of ``text``, a string of printable ASCII only (U+0020-U+007E), its two escapes replaced in C.

    On these characters RFC 8785 (ECMAScript ``JSON.stringify``) and ``json.dumps``
    write the same text: each escapes exactly ``"`` and ``\\`` (as ``\\"`` and
    ``\\\\``) and writes every other character as it is; so the string's bytes are
    quoted with those two replaced (``bytes.replace``: a token of 900 characters in
    about three quarters of ``json.dumps``' instructions, which look at every
    character twice). ``rfc8785`` calls back into Python for every escape; a
    token's JSON payload holds a hundred. ``None`` for any other string (or a
    ``str`` subclass): that one goes to ``rfc8785``.
    """
    if type(text) is not str or not text.isascii():
        return None
    data = text.encode("ascii")
    if data.translate(None, _PRINTABLE_ASCII):
        return None
    return b'"' + data.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def printable_ascii(text: str) -> bool:
    """Whether ``text`` holds only U+0020-U+007E (two passes in C)."""
    return text.isascii() and not text.encode("ascii").translate(None, _PRINTABLE_ASCII)


def plain_json_bytes(value: Any) -> bytes | None:
    """RFC 8785 bytes of ``value`` by the stdlib's C encoder, if ``value`` lies in the subset where both agree.

    The subset, by exact type (no subclasses): ``dict`` with keys that are
    strings of printable ASCII (U+0020-U+007E: UTF-16 code-unit order, RFC 8785's
    key order, is then code-point order, ``sort_keys``'), ``list``, strings of
    printable ASCII (both escape exactly ``"`` and ``\\``), ``int`` with
    ``|n| <= 2**53 - 1`` (written as ``str(n)`` by both), ``bool`` and ``None``.
    No floats (RFC 8785 writes ECMAScript's number form, not ``repr``). ``None``
    for any other value: that one goes to ``rfc8785`` (and its errors are its own).
    """
    try:
        return _C_ENCODE(value).encode("ascii") if _in_plain_subset(value) else None
    except RecursionError:  # nested too deep (or a cycle): rfc8785 answers for it
        return None


def _in_plain_subset(value: Any) -> bool:
    """Whether ``value`` lies in :func:`plain_json_bytes`' subset (``RecursionError`` if nested too deep)."""
    texts: list[Any] = []
    ints: list[int] = []
    if not _plain_walk(value, texts, ints) or not set(map(type, texts)) <= _STR_ONLY:
        return False
    if ints and max(map(abs, ints)) > MAX_JSON_SAFE_INTEGER:
        return False
    return printable_ascii("".join(texts))


def _plain_walk(value: Any, texts: list[Any], ints: list[int]) -> bool:
    """Whether every node of ``value`` has one of the subset's exact types; collects strings, keys and ints."""
    kind = type(value)
    if kind is dict:
        texts += value  # the keys (their types are checked by the caller)
        items: Iterable[Any] = value.values()
    elif kind is list:
        items = value
    else:
        items = (value,)
    for item in items:
        kind = type(item)
        if kind is str:
            texts.append(item)
        elif kind is int:
            ints.append(item)
        elif kind is dict or kind is list:
            if not _plain_walk(item, texts, ints):
                return False
        elif kind is not bool and item is not None:
            return False
    return True


# Never fed: every digest starts from a copy of it, which skips the algorithm lookup a new ``Hash`` makes (half
# the fixed cost of a digest, which a verification pays per file).
_UNFED_SHA256 = Hash(SHA256())


def sha256_hex(data: bytes | memoryview) -> str:
    """Hex SHA-256 of ``data``."""
    hasher = _UNFED_SHA256.copy()
    hasher.update(data)
    return hasher.finalize().hex()


class Sha256:
    """SHA-256 fed in pieces: :meth:`update` any number of times, then :meth:`hexdigest` once."""

    __slots__ = ("_hash",)

    def __init__(self, data: bytes | memoryview = b"") -> None:
        self._hash = _UNFED_SHA256.copy()
        if data:
            self._hash.update(data)

    def update(self, data: bytes | memoryview) -> None:
        self._hash.update(data)

    def hexdigest(self) -> str:
        """The hex digest of everything fed; the hasher is then finished (``update`` raises ``AlreadyFinalized``)."""
        return self._hash.finalize().hex()


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes - the one digest spelling used on the wire."""
    return DIGEST_PREFIX + sha256_hex(data)


def digest_value(value: Any) -> str:
    """``sha256:<hex>`` of a JSON value's canonical bytes."""
    return digest_bytes(canonical_bytes(value))


def json_equal(one: Any, other: Any) -> bool:
    """Whether two JSON values are equal as JSON Schema's ``enum`` and ``const`` compare them (the verifier's checks).

    Numbers by value (``1`` equals ``1.0``; Python compares an ``int`` with a ``float`` exactly, so two different
    integers past 2**53 never compare equal through float rounding), a boolean only with a boolean (``true`` is not
    ``1``), strings and ``null`` as they are, arrays item by item and objects member by member, deep.
    """
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, (int, float)) and isinstance(other, (int, float)):
        return one == other
    if isinstance(one, (list, tuple)) and isinstance(other, (list, tuple)):
        return len(one) == len(other) and all(map(json_equal, one, other))
    if isinstance(one, Mapping) and isinstance(other, Mapping):
        return one.keys() == other.keys() and all(json_equal(item, other[key]) for key, item in one.items())
    return type(one) is type(other) and one == other


MemberDigests = tuple[str, Mapping[str, str], int]
"""An object's digest, its members' (read-only) and the length of its canonical bytes, as :func:`member_digests`
gives them."""


def member_digests(value: dict[str, Any]) -> MemberDigests:
    """:func:`digest_value` of an object and of each of its members, every member serialised once, and its size.

    An object in :func:`plain_json_bytes`' subset (a confirmed state of
    printable ASCII text) has each member written by the stdlib's C encoder
    (they lie in the subset too) and its own bytes composed from theirs, as
    that encoder writes an object: the members in code-point order of their
    keys (printable ASCII: RFC 8785's order), each as the key's string, ``:``
    and the member's bytes, joined by ``,`` within braces; so no member is
    encoded twice. Any other object is composed from its members' ``rfc8785``
    bytes (:func:`_composed_member_digests`).
    """
    try:
        plain = _in_plain_subset(value)
        parts = [(key, _C_ENCODE(value[key]).encode("ascii")) for key in sorted(value)] if plain else []
    except RecursionError:  # nested too deep (or a cycle): rfc8785 answers for it
        parts = []
    if not parts:  # outside the subset, or no members (``{}``, which the composition writes the same)
        return _composed_member_digests(value)
    return _joined_digests(parts)


def _joined_digests(parts: list[tuple[str, bytes]]) -> MemberDigests:
    """:func:`member_digests` of an object from its members' bytes, in RFC 8785's order already: each as the key's
    string, ``:`` and the member's bytes, joined by ``,`` within braces (RFC 8785 3.2.3)."""
    quoted = printable_ascii_string_bytes  # (None for a key outside printable ASCII: rfc8785 writes it)
    whole = b"{" + b",".join((quoted(key) or _rfc8785_dumps()(key)) + b":" + part for key, part in parts) + b"}"
    return digest_bytes(whole), MappingProxyType({key: digest_bytes(part) for key, part in parts}), len(whole)


def _composed_member_digests(value: dict[str, Any]) -> MemberDigests:
    """:func:`member_digests` of an object outside :func:`plain_json_bytes`' subset, from its members' bytes.

    RFC 8785 (3.2.3) writes an object as its members sorted by the UTF-16 code
    units of their keys (``rfc8785``'s own sort key), each as the key's string,
    ``:`` and the member's own bytes, joined by ``,`` within braces; so the
    object's bytes are composed from the members' bytes. Members are
    serialised in that order, each one in :func:`plain_json_bytes`' subset by
    the C encoder (``rfc8785`` would write the same bytes, and raise nothing),
    any other by ``rfc8785``; so a value with no canonical form raises
    ``rfc8785``'s first error, as ``digest_value(value)`` would. An object
    whose keys are not all exact ``str`` is serialised whole, then member by member.
    """
    dumps = _rfc8785_dumps()
    if not all(type(key) is str for key in value):
        whole = dumps(value)  # outside the subset already: no second walk
        return digest_bytes(whole), MappingProxyType({k: digest_value(v) for k, v in value.items()}), len(whole)
    members = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16be"))
    return _joined_digests([(key, plain_json_bytes(item) or dumps(item)) for key, item in members])


def recurring_member_digests(value: dict[str, Any], scope: str) -> MemberDigests:
    """:func:`member_digests` of an object that recurs from call to call (a client's confirmed state), remembered.

    Remembered per ``scope`` and exact value, and only when the object's
    digest is ``scope``. ``scope`` is what the caller already trusts the value
    to be (the state digest a MAC-verified checkpoint binds, for the state
    sent as that checkpoint's), so a remembered answer can only be reached
    again by a caller holding a checkpoint of that same state, whose values it
    already has; a value sent with a checkpoint of another state is never kept.
    The key is the value's ``marshal`` bytes (format 2: no back-references),
    which encode exact built-in types only (``1``, ``True``, ``1.0`` and ``"1"``
    differ; a subclass or any other type is not marshalled and is digested
    directly), and the remembered digests are computed from ``marshal.loads``
    of that key, so they are those of exactly the value the key encodes.
    Errors (a value with no RFC 8785 form) are ``rfc8785``'s own and never remembered.
    """
    try:
        key = marshal.dumps(value, 2)
    except ValueError:  # a type marshal does not encode exactly (subclasses included), or nesting past its bound
        return member_digests(value)
    if len(key) > _RECURRING_KEY_BYTES:
        return member_digests(value)
    try:
        return _digests_of_marshalled(scope, key)
    except _NotRemembered as other:
        return other.digests


class _NotRemembered(Exception):
    """Digests of an object whose digest is not the scope: raised so that ``lru_cache`` keeps nothing."""

    def __init__(self, digests: MemberDigests) -> None:
        super().__init__(digests[0])
        self.digests = digests


@lru_cache(maxsize=_RECURRING_ENTRIES)
def _digests_of_marshalled(scope: str, key: bytes) -> MemberDigests:
    digests = member_digests(marshal.loads(key))
    if digests[0] != scope:
        raise _NotRemembered(digests)
    return digests
