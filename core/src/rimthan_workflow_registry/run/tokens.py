"""Checkpoint and validation-bundle tokens: HS256 JWS with key ids and an unencoded JSON payload.

All run state lives in these tokens, so they are the server's only defence
against forged progress. A token is a JWS in the Compact Serialization with
the RFC 7797 unencoded payload (``"b64": false``, listed in ``crit``): a
base64url header, the claims' compact JSON as it is, and a base64url HS256
signature over ``header.payload``. The claims' JSON never holds a period
(every ``.`` inside a string is written as the JSON escape ``\\u002e``, and no
claim is a fractional number), as RFC 7797 section 5.2 requires of an
unencoded payload in the Compact Serialization. PyJWT (a maintained library)
computes the signature (it signs the payload detached;
:meth:`CheckpointKeyring.sign_payload` puts the payload between the two
segments it writes) and its HS256 verifies it. We add the checks a token kind
needs: the header holds exactly what ``sign`` writes (``typ`` pins the token
kind), the header and signature are canonical base64url (a re-encoded token is
refused even when it decodes to the same bytes; ``run/token_wire`` splits a
token's characters), and every claim set is validated against a closed shape
by the caller. Key ids let keys rotate: several keys verify, one signs. HMAC
comparison is constant-time (``hmac.compare_digest`` in PyJWT). The payload,
the part that grows with a run, is never base64-decoded: the MAC covers its
exact characters, and only then is it parsed, once, by ``json.loads``.
:meth:`CheckpointKeyring.admit` makes the header checks,
:meth:`AdmittedToken.authentic` the MAC; in between, a caller that remembers
issuing these exact characters under the very key admitted may answer without
the MAC (``run/issued_tokens``).
Tokens of the earlier format (a base64url payload) are refused with a
precise message: their runs cannot continue on this server. A token of a later
format names its number in ``typ`` alone (``token_wire.NUMBERED_TYPE``); it is
refused saying a newer version issued it, read from nothing but that ``typ``.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.errors import FailureCode, KeyringError, TokenError
from rimthan_workflow_registry.limits import CLOCK_SKEW_SECONDS
from rimthan_workflow_registry.run.key_file import read_key_file, write_key_file
from rimthan_workflow_registry.run.token_wire import (
    TOKEN_FORMAT,
    TokenSegments,
    b64url_encode,
    claims_payload,
    newer_token_format,
    split_token,
)
from rimthan_workflow_registry.state_formats import ROLLBACK_NEXT, newer_format

if TYPE_CHECKING:
    from jwt.algorithms import HMACAlgorithm

CHECKPOINT_TYPE = "rimthan-checkpoint+jwt"
BUNDLE_TYPE = "rimthan-validation-bundle+jwt"
ALGORITHM = "HS256"
KEY_BYTES = 32
KEYRING_FORMAT = "rimthan.checkpoint-keys/1"
_FILE_MEMBERS = frozenset({"format", "signing_key_id", "keys", "retired", "archived"})  # what save() writes
_ENTRY_MEMBERS = frozenset({"id", "key"})
_HEADER_MEMBERS = frozenset({"alg", "b64", "crit", "kid", "typ"})  # what sign() writes; any other member is refused
_EARLIER_HEADER_MEMBERS = frozenset({"alg", "kid", "typ"})  # the earlier format's header (base64url payload)
_UNENCODED = "b64"  # RFC 7797: the payload is carried as it is, not base64url-encoded
RETIRED_KEY_NEXT = (
    "start a new run: checkpoints of a key retired with `rimthan-mcp keys retire` are refused for good "
    "(the key file keeps it only for `rimthan-mcp audit`, which still verifies the runs it signed)"
)

NEWER_TOKEN_NEXT = (
    "send this run's calls to a replica of the Rimthan version that issued the token, or finish the upgrade "
    "(every replica on that version): this version cannot read that token format"
)


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

    detached = api_jws.encode(b"", key, algorithm=ALGORITHM, headers={"kid": kid, "typ": token_type, _UNENCODED: False})
    return detached.split(".")[0].encode("ascii")


def _newer_format(header: Mapping[str, Any], token_type: str) -> int | None:
    """The later format a header of exactly this version's members names in its ``typ`` for ``token_type``."""
    return newer_token_format(header["typ"], token_type) if set(header) == _HEADER_MEMBERS else None


def issued_by_newer_version(token: str, token_type: str) -> int | None:
    """The later token format ``token`` is of, as :meth:`CheckpointKeyring.admit` refuses it ("issued by a newer
    Rimthan version"), else None: from its header alone (UNVERIFIED; for words about a refusal only)."""
    segments = split_token(token)
    return _newer_format(segments.header, token_type) if segments is not None else None


_KEY_ID = re.compile(r"[\x21-\x7e]{1,128}")


def _newer_key_file(raw: Any) -> KeyringError | None:
    """A key file a newer version wrote: ``key_invalid`` saying so, never advising new keys (or a rewrite)."""
    newer = newer_format(raw.get("format"), KEYRING_FORMAT) if isinstance(raw, dict) else None
    if newer is None:
        return None
    return KeyringError(
        FailureCode.KEY_INVALID,
        f"cannot read checkpoint keys: {newer.reason()}",
        next_step=f"{ROLLBACK_NEXT}; do not create new keys: the runs these keys signed would be refused",
    )


def _is_key_id(value: Any) -> bool:
    """A key id as the file holds it: visible ASCII, no space (``keys list`` prints one per line)."""
    return isinstance(value, str) and _KEY_ID.fullmatch(value) is not None


def _key_list(entries: Any, member: str) -> dict[str, bytes]:
    """``[{"id": ..., "key": <base64>}, ...]`` by id; a repeated id or anything else is refused."""
    if not isinstance(entries, list):
        raise ValueError(f"{member} is not a list")
    keys: dict[str, bytes] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != _ENTRY_MEMBERS:
            raise ValueError(f"{member}[{index}] is not an object of exactly an id and a key")
        kid, key = entry["id"], entry["key"]
        if not _is_key_id(kid) or not isinstance(key, str):
            raise ValueError(f"{member}: an entry's id is not a key id or its key is not base64 text")
        if kid in keys:
            raise ValueError(f"{member}: key id {kid!r} is listed twice")
        keys[kid] = _key_bytes(key, member, kid)
        if len(keys[kid]) < KEY_BYTES:  # archived keys too: audit verifies with them
            raise ValueError(f"{member}: key {kid!r} is shorter than {KEY_BYTES} bytes")
    return keys


def _one_id_per_key(entries: Iterable[tuple[str, bytes]]) -> None:
    """``key_invalid`` when two ids (live or archived) hold the same key: retiring one would leave it verifying
    under the other, so a retired (leaked) key would still sign and verify runs."""
    ids: dict[bytes, str] = {}
    for kid, key in entries:
        if key in ids:
            raise KeyringError(
                FailureCode.KEY_INVALID,
                f"key ids {ids[key]!r} and {kid!r} hold the same key: retiring one would leave it live under the other",
                next_step=f"remove the copied entry ({kid!r} or {ids[key]!r}) from the key file: each id needs a key "
                "of its own (`rimthan-mcp keys add` makes one)",
            )
        ids[key] = kid


def _key_bytes(text: str, member: str, kid: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:  # binascii.Error: bad padding, a character outside base64
        raise ValueError(f"{member}: key {kid!r} is not base64 ({exc})") from None


@dataclass(frozen=True)
class CheckpointKeyring:
    """HMAC keys by key id; ``signing_key_id`` signs, every key verifies.

    ``retired`` ids are kept so that tokens signed with them are refused
    with a precise reason (retired) rather than "unknown". ``archived`` keeps
    a retired key's material for offline audit only: a finished run's history
    must stay verifiable after rotation, but no live call verifies with it
    (:meth:`for_audit` is the only way it verifies anything).
    """

    signing_key_id: str
    keys: Mapping[str, bytes]
    retired: frozenset[str] = frozenset()
    archived: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.signing_key_id not in self.keys:
            raise KeyringError(FailureCode.KEY_INVALID, f"signing key {self.signing_key_id!r} is not in the keyring")
        for kid, key in self.keys.items():
            if len(key) < KEY_BYTES:
                raise KeyringError(FailureCode.KEY_INVALID, f"checkpoint key {kid!r} is shorter than {KEY_BYTES} bytes")

    # -- persistence ------------------------------------------------------------------

    @classmethod
    def generate(cls) -> CheckpointKeyring:
        kid = _new_key_id()
        return cls(signing_key_id=kid, keys={kid: secrets.token_bytes(KEY_BYTES)})

    @classmethod
    def load(cls, path: Path) -> CheckpointKeyring:
        """The key file as :meth:`save` writes it; anything else (a repeated key, a member of another type, a
        signing key that is also retired) is ``key_invalid``: these keys decide which runs are genuine."""
        return read_key_file(path, cls._from_json)

    @classmethod
    def _from_json(cls, raw: Any) -> CheckpointKeyring:
        if not isinstance(raw, dict) or raw.get("format") != KEYRING_FORMAT:
            raise _newer_key_file(raw) or ValueError(f"format is not {KEYRING_FORMAT}")
        if unknown := sorted(set(raw) - _FILE_MEMBERS):  # a misspelt "retired" would leave its keys live
            raise ValueError(f"unknown member(s) {', '.join(map(repr, unknown))}")
        keys, archived = _key_list(raw["keys"], "keys"), _key_list(raw.get("archived", []), "archived")
        retired = raw.get("retired", [])
        if not isinstance(retired, list) or not all(_is_key_id(k) for k in retired):
            raise ValueError("retired is not a list of key ids")
        signing = raw["signing_key_id"]
        if not _is_key_id(signing):
            raise ValueError(f"signing_key_id {signing!r} is not a key id")
        if both := sorted(set(keys) & (set(retired) | set(archived))):
            raise ValueError(f"key {both[0]!r} is listed both as live and as retired")
        _one_id_per_key({**archived, **keys}.items())
        return cls(
            signing_key_id=signing, keys=keys, retired=frozenset(retired) | frozenset(archived), archived=archived
        )

    @classmethod
    def load_or_create(cls, path: Path) -> CheckpointKeyring:
        return cls.opened(path)[0]

    @classmethod
    def opened(cls, path: Path) -> tuple[CheckpointKeyring, bool]:
        """The key file at ``path``, created with one signing key when absent, and whether this call created it.

        Replicas starting together on one state directory all find no file: the first to put its file in place
        creates it and every other loads that one, never replacing it (a replaced file would leave the first
        replica signing with a key no other replica, nor its own restart, knows).
        """
        path = Path(path)
        if not path.exists():
            keyring = cls.generate()
            try:
                write_key_file(keyring._document(), path, exclusive=True)
                return keyring, True
            except FileExistsError:
                pass
        return cls.load(path), False

    def save(self, path: Path) -> None:
        """Write atomically with mode 0600: these keys can forge any run (:func:`.key_file.write_key_file`)."""
        write_key_file(self._document(), path, exclusive=False)

    def _document(self) -> dict[str, Any]:
        """The key file's JSON, as :meth:`load` reads it."""
        return {
            "format": KEYRING_FORMAT,
            "signing_key_id": self.signing_key_id,
            "keys": [{"id": k, "key": base64.b64encode(v).decode()} for k, v in sorted(self.keys.items())],
            "retired": sorted(self.retired),
            "archived": [{"id": k, "key": base64.b64encode(v).decode()} for k, v in sorted(self.archived.items())],
        }

    def rotated(self) -> CheckpointKeyring:
        """A new signing key at once (one server); old keys keep verifying until retired."""
        added, kid = self.adding()
        return added.promoting(kid)

    def adding(self) -> tuple[CheckpointKeyring, str]:
        """A new verify-only key and its id: every replica given this file verifies it, none signs with it.

        The first phase of a fleet's rotation; :meth:`promoting` is the second.
        """
        kid = _new_key_id()
        keys = {**self.keys, kid: secrets.token_bytes(KEY_BYTES)}
        return CheckpointKeyring(self.signing_key_id, keys, self.retired, self.archived), kid

    def promoting(self, kid: str) -> CheckpointKeyring:
        """``kid``, a live key, signs from now on; the key that signed before stays verify-only."""
        self._live(kid, "promote", "run `rimthan-mcp keys add`, restart every replica with that file, then promote it")
        return CheckpointKeyring(kid, self.keys, self.retired, self.archived)

    def retiring(self, kid: str) -> CheckpointKeyring:
        """Retire ``kid``: live tokens it signed stop verifying; its material is archived for audit only.

        The signing key cannot be retired.
        """
        if kid == self.signing_key_id:
            raise KeyringError(
                FailureCode.KEY_INVALID,
                "rotate to a new signing key before retiring this one",
                next_step="run `rimthan-mcp keys add`, restart every replica, `keys promote` the new id, restart "
                "every replica again, then retire this key (one server: `rimthan-mcp keys rotate`)",
            )
        self._live(kid, "retire", "")
        keys = {k: v for k, v in self.keys.items() if k != kid}
        return CheckpointKeyring(
            signing_key_id=self.signing_key_id,
            keys=keys,
            retired=self.retired | {kid},
            archived={**self.archived, kid: self.keys[kid]},
        )

    def _live(self, kid: str, action: str, retired_next: str) -> None:
        """``key_invalid`` unless ``kid`` is a live key (``retired_next``: the next step when it is retired)."""
        if kid in self.retired and retired_next:
            raise KeyringError(
                FailureCode.KEY_INVALID,
                f"cannot {action} {kid!r}: it is retired, and a retired key never verifies or signs again",
                next_step=retired_next,
            )
        if kid not in self.keys:
            known = ", ".join(sorted(self.keys)) or "none"
            raise KeyringError(
                FailureCode.KEY_INVALID,
                f"cannot {action} {kid!r}: no live checkpoint key has this id (live keys: {known})",
                next_step="pick a key id shown by `rimthan-mcp keys list`",
            )

    def for_audit(self) -> CheckpointKeyring:
        """Every key that ever signed here, archived ones included: for verifying logged runs offline only."""
        return CheckpointKeyring(
            signing_key_id=self.signing_key_id,
            keys={**self.archived, **self.keys},
            retired=self.retired - frozenset(self.archived),
        )

    # -- tokens -----------------------------------------------------------------------

    def sign(self, claims: Mapping[str, Any], token_type: str) -> str:
        return self.sign_payload(claims_payload(claims), token_type)

    def sign_payload(self, payload: bytes, token_type: str) -> str:
        """The token of ``payload`` (what :func:`claims_payload` writes): PyJWT's HS256 JWS, payload unencoded.

        PyJWT writes the header (once per key id and token kind: it holds nothing else) and computes the MAC
        over ``header.payload`` with the key it prepared once (:func:`_prepared_key`).
        """
        if b"." in payload:
            raise ValueError("an unencoded compact JWS payload cannot hold a period (RFC 7797 section 5.2)")
        key = self.signing_key
        header = _header_segment(key, self.signing_key_id, token_type)
        signature = _hs256().sign(header + b"." + payload, _prepared_key(key))
        return f"{header.decode('ascii')}.{payload.decode('ascii')}.{b64url_encode(signature)}"

    def verify(self, token: str, token_type: str, code: FailureCode) -> dict[str, Any]:
        """Claims of a token this keyring signed, or ``TokenError(code)``."""
        authentic = self.authenticate(token, token_type, code)
        claims = authentic.claims()
        authentic.check_issued_at(claims["iat"])
        return claims

    def authenticate(self, token: str, token_type: str, code: FailureCode) -> AuthenticToken:
        """``token`` once its header follows the token rules and its MAC verifies with a live key of this keyring.

        Nothing of the payload is read: :meth:`AuthenticToken.claims` parses it.
        """
        return self.admit(token, token_type, code).authentic()

    def admit(self, token: str, token_type: str, code: FailureCode) -> AdmittedToken:
        """``token`` once its header follows the token rules and names a live key of this keyring; MAC unchecked.

        :meth:`AdmittedToken.authentic` checks the MAC. Nothing of the payload is read.
        """
        what = "checkpoint" if token_type == CHECKPOINT_TYPE else "validation bundle"
        segments = split_token(token)
        if segments is None:
            raise TokenError(code, f"the {what} token is malformed; send the token exactly as the server issued it")
        header = segments.header
        kid = header.get("kid")
        if header.get("typ") == token_type and set(header) == _EARLIER_HEADER_MEMBERS:
            raise TokenError(
                code,
                f"the {what} token is in the format of an earlier server version (base64url payload), "
                "which this server no longer accepts; start a new run",
            )
        if newer := _newer_format(header, token_type):
            raise TokenError(
                code,
                f"the {what} token was issued by a newer Rimthan version "
                f"(format {newer}; this one reads format {TOKEN_FORMAT})",
                next_step=NEWER_TOKEN_NEXT,
            )
        if (
            header.get("typ") != token_type
            or header.get("alg") != ALGORITHM
            or set(header) != _HEADER_MEMBERS
            or header[_UNENCODED] is not False
            or header["crit"] != [_UNENCODED]
        ):
            raise TokenError(code, f"the token is not a {what} token")
        if not isinstance(kid, str):
            raise TokenError(FailureCode.CHECKPOINT_KEY_UNKNOWN, f"the {what} token names no key id")
        if kid in self.retired:
            raise TokenError(
                FailureCode.CHECKPOINT_KEY_UNKNOWN,
                f"the {what} token was signed with retired key {kid!r}; start a new run",
                next_step=RETIRED_KEY_NEXT,
            )
        if kid not in self.keys:
            raise TokenError(
                FailureCode.CHECKPOINT_KEY_UNKNOWN,
                f"the {what} token was signed with a key this server does not hold ({kid!r})",
            )
        return AdmittedToken(segments, self.keys[kid], what, code)

    @property
    def signing_key(self) -> bytes:
        """The key :meth:`sign_payload` signs with."""
        return self.keys[self.signing_key_id]


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


def _new_key_id() -> str:
    return "ck-" + secrets.token_hex(8)
