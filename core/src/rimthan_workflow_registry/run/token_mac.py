"""The MAC of a checkpoint or bundle token: PyJWT's HS256 signs it, and verifies it before its payload is read.

PyJWT (a maintained library) computes the signature: it signs the payload
detached, and :func:`signed_token` puts the payload between the two segments
it writes (the header, written once per key id and token kind, holds nothing
else). HMAC comparison is constant-time (``hmac.compare_digest`` in PyJWT).
:meth:`~rimthan_workflow_registry.run.tokens.CheckpointKeyring.admit` makes
the header checks and hands over an :class:`AdmittedToken`;
:meth:`AdmittedToken.authentic` checks the MAC, and only the
:class:`AuthenticToken` it returns parses the payload, once, by
``json.loads``: the payload, the part that grows with a run, is never
base64-decoded (the MAC covers its exact characters). Imported on a token's
first use (a server start, which only lists tools, signs and verifies none).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.limits import CLOCK_SKEW_SECONDS
from rimthan_workflow_registry.run.token_wire import ALGORITHM, UNENCODED, TokenSegments, b64url_encode

if TYPE_CHECKING:
    from jwt.algorithms import HMACAlgorithm


def signed_token(payload: bytes, key: bytes, kid: str, token_type: str) -> str:
    """The token of ``payload`` signed with ``key`` (id ``kid``): PyJWT's HS256 JWS, payload unencoded.

    PyJWT writes the header (once per key id and token kind) and computes the MAC over ``header.payload`` with
    the key it prepared once (:func:`_prepared_key`).
    """
    header = _header_segment(key, kid, token_type)
    signature = _hs256().sign(header + b"." + payload, _prepared_key(key))
    return f"{header.decode('ascii')}.{payload.decode('ascii')}.{b64url_encode(signature)}"


@cache
def _hs256() -> HMACAlgorithm:
    """PyJWT's HS256, imported on first use: PyJWT loads cryptography's x509 and RSA/EC code, which a
    server start (it only lists tools) does not need."""
    from jwt.algorithms import HMACAlgorithm

    return HMACAlgorithm(HMACAlgorithm.SHA256)


@lru_cache(maxsize=16)
def _prepared_key(key: bytes) -> bytes:
    """PyJWT's HS256 ``prepare_key`` of a keyring key (its checks that the bytes are no PEM, SSH, DER or JWK key
    cost more than the MAC of a token), made once per key: the result depends on the key's bytes alone."""
    return _hs256().prepare_key(key)


@lru_cache(maxsize=64)
def _header_segment(key: bytes, kid: str, token_type: str) -> bytes:
    """The base64url header PyJWT's ``api_jws.encode`` writes for a detached unencoded token of ``kid`` and
    ``token_type`` (the header holds no other member, so it is the same for every payload)."""
    from jwt import api_jws  # on first use (see _hs256)

    detached = api_jws.encode(b"", key, algorithm=ALGORITHM, headers={"kid": kid, "typ": token_type, UNENCODED: False})
    return detached.split(".")[0].encode("ascii")


@dataclass(frozen=True)
class AdmittedToken:
    """A token whose header follows the token rules and names ``key``, a live key of the keyring: MAC unchecked.

    Only :meth:`authentic` (the MAC) makes its payload readable. A caller that
    signed these exact characters with this exact key itself already knows
    what the MAC check would answer (see ``run/issued_tokens``).
    """

    segments: TokenSegments
    key: bytes = field(repr=False)
    what: str
    code: FailureCode

    def authentic(self) -> AuthenticToken:
        """The token once its MAC verifies with :attr:`key` (PyJWT HS256, constant-time), else ``TokenError``."""
        segments = self.segments
        if not _hs256().verify(segments.signing_input, _prepared_key(self.key), segments.signature):
            raise TokenError(self.code, f"the {self.what} token does not verify (InvalidSignatureError)")
        return AuthenticToken(segments.payload, self.what, self.code)


@dataclass(frozen=True)
class AuthenticToken:
    """A token whose MAC verified (PyJWT's HS256: HMAC-SHA256, constant-time compare): its payload, unread.

    The checks ``jwt.decode`` makes for these tokens after the signature - a
    JSON object payload, a required integer ``iat`` not in the future - are
    :meth:`claims` (what the payload's bytes decide) and
    :meth:`check_issued_at` (what the clock decides, so never remembered).
    """

    payload: str
    what: str
    code: FailureCode

    def claims(self) -> dict[str, Any]:
        """The payload's JSON object with an integer ``iat``, or ``TokenError``; the clock is not consulted."""
        try:
            claims = json.loads(self.payload)
        except ValueError:
            claims = None
        if not isinstance(claims, dict):
            raise TokenError(self.code, f"the {self.what} token does not verify (DecodeError)")
        issued = claims.get("iat")
        if "iat" not in claims:
            raise TokenError(self.code, f"the {self.what} token does not verify (MissingRequiredClaimError)")
        if not isinstance(issued, int) or isinstance(issued, bool):
            raise TokenError(self.code, f"the {self.what} token does not verify (InvalidIssuedAtError)")
        return claims

    def check_issued_at(self, issued: int) -> None:
        """``TokenError`` when the token says it was issued after now (another clock, or a clock set back)."""
        check_issued_at(issued, self.what, self.code)


def check_issued_at(issued: int, what: str, code: FailureCode) -> None:
    """``TokenError(code)`` when a ``what`` token's ``iat`` is after now: checked on every verification."""
    if issued > time.time() + CLOCK_SKEW_SECONDS:
        raise TokenError(code, f"the {what} token does not verify (ImmatureSignatureError)")
