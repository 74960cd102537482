"""SHA-256 from cryptography (``canonical.sha256_hex`` and ``canonical.Sha256``) gives hashlib's digests.

hashlib is the oracle here: every release digest, checksum and receipt
written before the switch must still verify, so both spellings must agree
byte for byte, whole or fed in pieces, from bytes or from a memoryview.
"""

from __future__ import annotations

import hashlib
import os

import pytest
from cryptography.exceptions import AlreadyFinalized
from rimthan_workflow_registry.canonical import DIGEST_PREFIX, Sha256, digest_bytes, sha256_hex

SIZES = (0, 1, 55, 56, 63, 64, 65, 4096, 1024 * 1024 + 7)


@pytest.mark.parametrize("size", SIZES)
def test_sha256_hex_is_hashlibs(size: int) -> None:
    data = os.urandom(size)
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert sha256_hex(memoryview(data)) == hashlib.sha256(data).hexdigest()
    assert digest_bytes(data) == DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size", SIZES)
def test_sha256_fed_in_pieces_is_hashlibs(size: int) -> None:
    data = os.urandom(size)
    view = memoryview(data)
    cut = size // 3
    hasher = Sha256(view[:cut])
    for start in range(cut, size, 1000):
        hasher.update(view[start : start + 1000])
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_finished_hasher_takes_no_more_bytes() -> None:
    """``hexdigest`` finishes the hash: a later update or digest is refused, never a digest of part of the bytes."""
    hasher = Sha256(b"abc")
    assert hasher.hexdigest() == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(AlreadyFinalized):
        hasher.update(b"d")
    with pytest.raises(AlreadyFinalized):
        hasher.hexdigest()
