"""Checkpoint and validation-bundle tokens: HS256 JWS with key ids and an unencoded JSON payload.

All run state lives in these tokens, so they are the server's only defence
against forged progress. A token is a JWS in the Compact Serialization with
the RFC 7797 unencoded payload (``"b64": false``, listed in ``crit``): a
base64url header, the claims' compact JSON as it is, and a base64url HS256
signature over ``header.payload``. The claims' JSON never holds a period
(every ``.`` inside a string is written as the JSON escape ``\\u002e``, and no
claim is a fractional number), as RFC 7797 section 5.2 requires of an
unencoded payload in the Compact Serialization. PyJWT (a maintained library)
computes the signature and its HS256 verifies it (``run/token_mac``: the MAC,
and the claims once it verified). This module holds the keys
(:class:`CheckpointKeyring`; ``run/key_file`` reads and writes their file)
and the header rules. We add the checks a token kind
needs: the header holds exactly what ``sign`` writes (``typ`` pins the token
kind), the header and signature are canonical base64url (a re-encoded token is
refused even when it decodes to the same bytes; ``run/token_wire`` splits a
token's characters), and every claim set is validated against a closed shape
by the caller. Key ids let keys rotate: several keys verify, one signs.
:meth:`CheckpointKeyring.admit` makes the header checks,
:meth:`.token_mac.AdmittedToken.authentic` the MAC; in between, a caller that remembers
issuing these exact characters under the very key admitted may answer without
the MAC (``run/issued_tokens``).
Tokens of the earlier format (a base64url payload) are refused with a
precise message: their runs cannot continue on this server. A token of a later
format names its number in ``typ`` alone (``token_wire.NUMBERED_TYPE``); it is
refused saying a newer version issued it, read from nothing but that ``typ``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.errors import FailureCode, KeyringError, TokenError
from rimthan_workflow_registry.run.key_file import (
    KEY_BYTES,
    KeyDocument,
    key_document,
    parse_key_document,
    read_key_file,
    write_key_file,
)
from rimthan_workflow_registry.run.token_wire import (
    ALGORITHM,
    EARLIER_HEADER_MEMBERS,
    HEADER_MEMBERS,
    TOKEN_FORMAT,
    UNENCODED,
    claims_payload,
    newer_token_format,
    split_token,
)

if TYPE_CHECKING:
    from rimthan_workflow_registry.run.token_mac import AdmittedToken, AuthenticToken

CHECKPOINT_TYPE = "rimthan-checkpoint+jwt"
BUNDLE_TYPE = "rimthan-validation-bundle+jwt"
RETIRED_KEY_NEXT = (
    "start a new run: checkpoints of a key retired with `rimthan-mcp keys retire` are refused for good "
    "(the key file keeps it only for `rimthan-mcp audit`, which still verifies the runs it signed)"
)

NEWER_TOKEN_NEXT = (
    "send this run's calls to a replica of the Rimthan version that issued the token, or finish the upgrade "
    "(every replica on that version): this version cannot read that token format"
)


def _newer_format(header: Mapping[str, Any], token_type: str) -> int | None:
    """The later format a header of exactly this version's members names in its ``typ`` for ``token_type``."""
    return newer_token_format(header["typ"], token_type) if set(header) == HEADER_MEMBERS else None


def issued_by_newer_version(token: str, token_type: str) -> int | None:
    """The later token format ``token`` is of, as :meth:`CheckpointKeyring.admit` refuses it ("issued by a newer
    Rimthan version"), else None: from its header alone (UNVERIFIED; for words about a refusal only)."""
    segments = split_token(token)
    return _newer_format(segments.header, token_type) if segments is not None else None


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
        keys = parse_key_document(raw)
        return cls(keys.signing_key_id, keys.keys, keys.retired, keys.archived)

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
        return key_document(KeyDocument(self.signing_key_id, self.keys, self.retired, self.archived))

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
        """The token of ``payload`` (what :func:`claims_payload` writes): PyJWT's HS256 JWS, payload unencoded
        (:func:`.token_mac.signed_token`)."""
        from rimthan_workflow_registry.run.token_mac import signed_token  # on a token's first use

        if b"." in payload:
            raise ValueError("an unencoded compact JWS payload cannot hold a period (RFC 7797 section 5.2)")
        return signed_token(payload, self.signing_key, self.signing_key_id, token_type)

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
        if header.get("typ") == token_type and set(header) == EARLIER_HEADER_MEMBERS:
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
            or set(header) != HEADER_MEMBERS
            or header[UNENCODED] is not False
            or header["crit"] != [UNENCODED]
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
        from rimthan_workflow_registry.run.token_mac import AdmittedToken  # on a token's first use

        return AdmittedToken(segments, self.keys[kid], what, code)

    @property
    def signing_key(self) -> bytes:
        """The key :meth:`sign_payload` signs with."""
        return self.keys[self.signing_key_id]


def _new_key_id() -> str:
    return "ck-" + secrets.token_hex(8)
