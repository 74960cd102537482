"""Compact JSON encoders built once: ``json.JSONEncoder(...).encode`` without the per-call set-up.

Every ``JSONEncoder.encode`` of a ``dict`` or ``list`` builds a fresh C
encoder (``json.encoder.c_make_encoder``), and a markers dict for its cycle
check, through two Python frames. :func:`compact_encoder` builds that C
encoder once per configuration, with the arguments the stdlib passes, so a
call is one C call and writes the same text, character for character.

The prebuilt encoder has no markers (a markers dict shared between calls
could keep stale ids after a failed encode, and one per call is the cost
saved), so a value that contains itself recurses until ``RecursionError``;
that error (a cycle, or nesting too deep) sends the value to the stdlib's
``encode``, which raises exactly what it raised before: ``ValueError``
("Circular reference detected") for a cycle, ``RecursionError`` for depth.
Where the C encoder is missing (another Python), the stdlib's ``encode`` is
used as it is.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from functools import cache
from typing import Any

_SEPARATORS = (",", ":")


@cache
def compact_encoder(*, sort_keys: bool, ensure_ascii: bool) -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=..., ensure_ascii=..., separators=(",", ":"), allow_nan=False).encode``.

    Built once per configuration (every caller gets the same callable); the text and the errors are the stdlib's.
    """
    stdlib = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=_SEPARATORS, allow_nan=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return stdlib.encode
    # What JSONEncoder.iterencode passes for a one-shot encode, but no markers (no cycle check).
    encoder = make(
        None,
        stdlib.default,
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
        stdlib.indent,
        stdlib.key_separator,
        stdlib.item_separator,
        stdlib.sort_keys,
        stdlib.skipkeys,
        stdlib.allow_nan,
    )
    fallback = stdlib.encode

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return fallback(value)  # the stdlib's own path for a string: one C call already
        try:
            return "".join(encoder(value, 0))
        except RecursionError:  # a cycle or nesting too deep: the stdlib's encode raises what it always raised
            return fallback(value)

    return encode
