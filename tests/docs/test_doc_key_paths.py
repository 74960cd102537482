"""No doc a user reads names a private key (or a keygen prefix) inside a trust directory.

Private keys live outside the repository (``~/.config/rimthan/keys/me``) or
in the git-ignored ``private-keys/`` (``make demo``); a trust directory such
as ``keys/local/`` holds public keys only, so a doc naming ``keys/local/me``
or ``keys/local/dev.key`` teaches the old, refused place.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.doc_examples import reader_docs

ROOT = Path(__file__).parents[2]
DOCS = reader_docs(ROOT)
# a path under keys/local/ that is not a public key: a private key or the keygen prefix beside it
IN_TRUST_DIR = re.compile(r"keys/local/(?![\w.-]*\.pub\b)[\w.-]+")


def test_docs_never_put_a_private_key_in_the_trust_directory() -> None:
    found = [
        f"{doc.relative_to(ROOT)}:{number}: {hit.group(0)}"
        for doc in DOCS
        for number, line in enumerate(doc.read_text("utf-8").splitlines(), 1)
        for hit in IN_TRUST_DIR.finditer(line)
    ]
    assert found == [], "name private-keys/ or ~/.config/rimthan/keys/ instead: " + "; ".join(found)
