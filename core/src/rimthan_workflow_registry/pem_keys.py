"""PEM key reading and writing, without cryptography's OpenSSH key support.

``cryptography.hazmat.primitives.serialization`` imports its OpenSSH module
(with the cipher, RSA, EC, DSA and bcrypt code it needs) as soon as any of
its names is used. Rimthan reads and writes only PEM Ed25519 keys, and that
code cost every ``rimthan-pack build`` about 8 ms (8% of a small catalogue's
build, measured A/B). So the names below are taken from where cryptography
defines them and the public package re-exports them: the same objects, not a
second implementation. ``tests/core/test_pem_keys.py`` proves they are identical to
``serialization``'s, so an upgrade that moves one fails CI, not a key load.
"""

from __future__ import annotations

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.bindings._rust import openssl as _rust_openssl
from cryptography.hazmat.primitives._serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

__all__ = [
    "Encoding",
    "NoEncryption",
    "PrivateFormat",
    "PublicFormat",
    "load_pem_private_key",
    "load_pem_public_key",
]

load_pem_private_key = _rust_openssl.keys.load_pem_private_key
load_pem_public_key = _rust_openssl.keys.load_pem_public_key

KEY_LOAD_ERRORS = (ValueError, TypeError, UnsupportedAlgorithm)
"""What the loaders raise for bytes that are not a key they read: ``UnsupportedAlgorithm`` (not a
``ValueError``) for a well-formed key of an algorithm or curve cryptography lacks, e.g. an SM2 key."""
