"""``pem_keys`` is cryptography's own PEM key functions, reached without its OpenSSH module.

The trust store and the packager's signing keys read and write PEM through
``rimthan_workflow_registry.pem_keys``. These tests hold it to two
things: every name is the very object ``cryptography.hazmat.primitives.serialization``
exports (so a cryptography upgrade that moves one fails here), and loading a
trust store and a signing key in a fresh interpreter never imports
``serialization`` or its OpenSSH key code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from rimthan_workflow_registry import pem_keys
from support.releases import KeyPair

SKIPPED_MODULES = (
    "cryptography.hazmat.primitives.serialization",
    "cryptography.hazmat.primitives.serialization.ssh",
    "bcrypt",
)


@pytest.mark.parametrize("name", pem_keys.__all__)
def test_each_name_is_the_object_serialization_exports(name: str) -> None:
    assert getattr(pem_keys, name) is getattr(serialization, name)


def test_loading_keys_never_imports_the_openssh_code(tmp_path: Path, trust: Path, keypair: KeyPair) -> None:
    """A trust store load and a signing-key load, each used for what it is for, in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from rimthan_workflow_registry.release.trust import load_trust\n"
        "from rimthan_packager.signing import load_signing_key\n"
        "store = load_trust(sys.argv[1])\n"
        "key = load_signing_key(sys.argv[2])\n"
        "print(json.dumps({'trusted': sorted(store.keys), 'signer': key.key_id, 'modules': sorted(sys.modules)}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(trust), str(keypair.private_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(run.stdout)
    assert report["trusted"] == [keypair.key_id]
    assert report["signer"] == keypair.key_id
    assert not set(SKIPPED_MODULES) & set(report["modules"])
