"""The wire form of a checkpoint or bundle token: a compact JWS with an unencoded JSON payload (RFC 7797).

What a token's characters are, apart from any key: the payload a set of
claims is written as (:func:`claims_payload`, compact ASCII JSON with every
period escaped), the split of a token into its canonical base64url header and
signature around the payload (:func:`split_token`), the members its header
holds (:data:`HEADER_MEMBERS`), the digest that links a
checkpoint to its parent, the UNVERIFIED peeks offline tools use, and how a
later token format will name itself (:data:`NUMBERED_TYPE`,
:func:`newer_token_format`).
``run/tokens`` signs and verifies these forms with a keyring.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from rimthan_workflow_registry.canonical import digest_bytes
from rimthan_workflow_registry.json_encoders import compact_encoder
from rimthan_workflow_registry.limits import MAX_TOKEN_CHARS

_PERIOD_ESCAPE = "\\u002e"  # how the payload's JSON writes a period inside a string
TOKEN_FORMAT = 1  # the token format this version issues and reads; its types carry no number
ALGORITHM = "HS256"
UNENCODED = "b64"  # RFC 7797: the payload is carried as it is, not base64url-encoded
HEADER_MEMBERS = frozenset({"alg", "b64", "crit", "kid", "typ"})  # what a token's header holds; any other is refused
EARLIER_HEADER_MEMBERS = frozenset({"alg", "kid", "typ"})  # the earlier format's header (base64url payload)
# How a later token format N (>= 2) types its tokens: the kind, "-<N>", then "+jwt" (``rimthan-checkpoint-2+jwt``,
# ``rimthan-validation-bundle-2+jwt``). A decimal with no leading zero and nothing around it.
NUMBERED_TYPE = re.compile(r"(?P<kind>rimthan-[a-z]+(?:-[a-z]+)*)-(?P<format>[1-9][0-9]{0,8})\+jwt")

# The JSON of claims (or of one claim's value) as a token's payload writes it, before periods are escaped:
# ``json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode``, its C encoder built once.
claim_json = compact_encoder(sort_keys=False, ensure_ascii=True)


def claims_payload(claims: Mapping[str, Any]) -> bytes:
    """The payload a token carries for ``claims``: compact ASCII JSON, every period escaped (``\\u002e``).

    Claims hold no fractional numbers, so every period is inside a string,
    where the escape stands for the same character.
    """
    return claim_json(claims).replace(".", _PERIOD_ESCAPE).encode("ascii")


def composed_payload(members: Iterable[tuple[str, str]]) -> bytes:
    """:func:`claims_payload` of claims given member by member: ``(key, the JSON of its value)``, in order.

    Each value's JSON must be what ``json.dumps(value, separators=(",", ":"))``
    writes (:data:`claim_json`); the object around them is then the same text as that of the whole.
    """
    text = "{" + ",".join(f"{claim_json(key)}:{value}" for key, value in members) + "}"
    return text.replace(".", _PERIOD_ESCAPE).encode("ascii")


def newer_token_format(typ: object, token_type: str) -> int | None:
    """The format number ``typ`` names if it is ``token_type``'s kind numbered above :data:`TOKEN_FORMAT`, else None.

    ``typ`` is a header's ``typ``, read before any MAC: only its text decides, never a claim.
    """
    numbered = NUMBERED_TYPE.fullmatch(typ) if isinstance(typ, str) else None
    if numbered is None or f"{numbered['kind']}+jwt" != token_type or int(numbered["format"]) <= TOKEN_FORMAT:
        return None
    return int(numbered["format"])


def token_digest(token: str) -> str:
    """``sha256:<hex>`` of a token's exact characters: how parents are linked."""
    return digest_bytes(token.encode("ascii"))


def peek_claims(token: str) -> dict[str, Any] | None:
    """UNVERIFIED claims, for offline tools and tests only: never route or answer on them."""
    segments = split_token(token)
    if segments is None:
        return None
    try:
        claims = json.loads(segments.payload)
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def token_key_id(token: str) -> str | None:
    """The key id a well-formed token's header names (UNVERIFIED: for messages and audit records only)."""
    segments = split_token(token)
    kid = segments.header.get("kid") if segments is not None else None
    return kid if isinstance(kid, str) else None


def peek_manifest_digest(token: str) -> str | None:
    claims = peek_claims(token) if isinstance(token, str) else None
    release = claims.get("release") if claims else None
    digest = release.get("manifest_digest") if isinstance(release, dict) else None
    return digest if isinstance(digest, str) else None


@dataclass(frozen=True)
class TokenSegments:
    """A compact JWS split: the decoded header and signature; the payload and what the MAC signs, as needed.

    The token is ASCII, so the segments are its characters up to and after
    its first and last period (no copy of the part that grows is made until asked).
    """

    header: Mapping[str, Any]  # read-only: the parse of a header segment seen before is shared (``_header``)
    signature: bytes
    token: str = field(repr=False)
    first: int  # the first period's index
    last: int  # the last period's index

    @property
    def payload(self) -> str:
        """The unencoded payload: parsed only once the MAC over it has verified (or by ``peek_claims``)."""
        return self.token[self.first + 1 : self.last]

    @property
    def signing_input(self) -> bytes:
        """``header.payload``: what the MAC covers."""
        return self.token[: self.last].encode("ascii")


def split_token(token: object) -> TokenSegments | None:
    """The three segments of an ASCII token with a canonical JSON object header and signature, else ``None``.

    The header and the signature must be the unique base64url encoding of
    their bytes (decoded and re-encoded in C), so a re-encoded token is refused
    even when it decodes to the same bytes. The payload is the unencoded
    claims: the MAC covers its exact characters, and no claim is read before
    the MAC has verified.
    """
    if not isinstance(token, str):
        return None
    token = str.__str__(token)  # its characters as a plain str: a subclass's own methods never decide
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        return None
    first, last = token.find("."), token.rfind(".")  # memchr: the payload is the part that grows
    if not 0 < first < last - 1 or last == len(token) - 1 or token.find(".", first + 1, last) >= 0:
        return None
    header, signature = _header(token[:first]), _canonical_bytes(token[last + 1 :])
    if header is None or signature is None:
        return None
    return TokenSegments(header=header, signature=signature, token=token, first=first, last=last)


# A header is one of a few per server (one per key id and token kind, about 140 characters): the parse of a header
# segment up to this length is remembered, keyed by its exact characters, so the same text always gives the same
# answer. A longer segment (no header this server writes) is parsed every time, so the memory stays bounded.
_REMEMBERED_HEADER_CHARS = 256


def _header(segment: str) -> Mapping[str, Any] | None:
    """The JSON object a canonical base64url header segment encodes (read-only), else ``None``."""
    return _remembered_header(segment) if len(segment) <= _REMEMBERED_HEADER_CHARS else _parsed_header(segment)


@lru_cache(maxsize=64)
def _remembered_header(segment: str) -> Mapping[str, Any] | None:
    return _parsed_header(segment)


def _parsed_header(segment: str) -> Mapping[str, Any] | None:
    header_bytes = _canonical_bytes(segment)
    if header_bytes is None:
        return None
    try:
        header = json.loads(header_bytes)
    except ValueError:
        return None
    return MappingProxyType(header) if isinstance(header, dict) else None


def _b64url_decode(segment: str) -> bytes:
    """The bytes of an unpadded base64url segment (lenient: the canonical check is :func:`_canonical_bytes`)."""
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def b64url_encode(raw: bytes) -> str:
    """The unpadded base64url text of ``raw`` (as PyJWT's ``base64url_encode`` writes it)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _canonical_bytes(segment: str) -> bytes | None:
    """The bytes of a canonical base64url segment (no padding, no unused bits, no foreign characters), else ``None``."""
    try:
        raw = _b64url_decode(segment)
    except (ValueError, TypeError):
        return None
    return raw if b64url_encode(raw) == segment else None
