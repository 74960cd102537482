"""``rfc8785`` is imported on its first use: a value in the C encoder's subset never loads it, and its bytes and
errors are still the library's for every other value."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from rimthan_workflow_registry.canonical import canonical_bytes, canonicalization_error

_PROBE = """
import json, sys
from rimthan_workflow_registry.canonical import canonical_bytes
plain = canonical_bytes({"b": [1, "x"], "a": None})
before = "rfc8785" in sys.modules
other = canonical_bytes({"\\u00e9": 1.5})
print(json.dumps([plain.decode(), before, other.decode(), "rfc8785" in sys.modules]))
"""


def test_a_plain_value_never_loads_the_library_and_any_other_does() -> None:
    run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(run.stdout) == ['{"a":null,"b":[1,"x"]}', False, '{"\u00e9":1.5}', True]


def test_a_value_with_no_canonical_form_raises_the_library_error() -> None:
    import rfc8785

    assert canonicalization_error() is rfc8785.CanonicalizationError
    with pytest.raises(canonicalization_error()):
        canonical_bytes({"n": 2**60})
