"""A schema file kept with an ``x-rimthan-unreferenced`` that says no reason is refused, and the refusal says so.

Before, a mark of ``""`` or ``5`` was refused with the words of a file with no mark at all, and its next step
told the author to add the mark they had added. Now the refusal quotes the mark and says to give it a reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pack_cli import init_scaffold, pack
from support.refusals import refusal
from support.releases import KeyPair


@pytest.mark.parametrize(("mark", "shown"), [('""', '""'), ("5", "5"), ('"  "', '"  "'), ("null", "null")])
def test_a_mark_that_says_no_reason_is_named_in_the_refusal(
    keypair: KeyPair, tmp_path: Path, mark: str, shown: str
) -> None:
    source = init_scaffold(tmp_path / "src")
    schema = source / "schemas" / "x.json"  # no referenced name is close to it
    schema.write_text(f'{{"x-rimthan-unreferenced": {mark}, "type": "object"}}\n', "utf-8")
    out = tmp_path / "rel"
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 1 and not out.exists(), built.stdout
    said = refusal(built.stderr)
    assert said.error == (
        f"error: catalogue_invalid: {schema}: no workflow references this JSON Schema, so it would ship, signed, "
        f'and never check anything; its "x-rimthan-unreferenced" is {shown}, not a non-empty string saying why '
        "it ships"
    )
    assert said.next == (
        'set "x-rimthan-unreferenced" in it to a non-empty string saying why it ships, or delete the file'
    )
