"""A real token with its header's ``typ`` naming a later token format, as a newer Rimthan version would type it."""

from __future__ import annotations

import base64
import json


def numbered(token: str, number: int) -> str:
    """``token`` with its header's ``typ`` given format ``number``; payload and signature as issued."""
    segment, rest = token.split(".", 1)
    header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    header["typ"] = header["typ"].replace("+jwt", f"-{number}+jwt")
    encoded = base64.urlsafe_b64encode(json.dumps(header, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{encoded}.{rest}"
