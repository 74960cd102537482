"""The parts of a verifier's result the kit reads, checked for their types before anything reads them.

A rimthan-mcp verifier's results match its tools' output schemas (its SDK
checks them), but the kit cannot vouch for the verifier it talks to (a URL,
a proxy in front of one) and its tools may declare no schema. Each part the
kit reads (the step, its instruction, outputs and assets, the question, the
release, the validators, the failures) must have the type it is read as,
where it is present (``null`` counts as absent): otherwise the result is no
protocol result (:func:`shape_problem` says where), and nothing of it is used.
"""

from __future__ import annotations

from typing import Any

_TEXT = str
_OUTPUT = {"id": _TEXT, "path": _TEXT, "media_type": _TEXT}
_ASSET = {"id": _TEXT, "kind": _TEXT, "install_path": _TEXT, "media_type": _TEXT, "text": _TEXT, "sha256": _TEXT}
_FAILURE = {"code": _TEXT, "message": _TEXT}
SHAPE: dict[str, Any] = {
    "step": {
        "id": _TEXT,
        "title": _TEXT,
        "instruction": {"text": _TEXT},
        "outputs": [_OUTPUT],
        "host_assets": [_ASSET],
        "validators": [{}],
    },
    "question": {"field": _TEXT, "prompt": _TEXT, "choices": [(str, int, bool)]},
    "release": {"id": _TEXT},
    "workflow": {"id": _TEXT, "version": _TEXT},
    "validators": [{}],
    "failures": [_FAILURE],
    "findings": [{}],
    "migration": {"walked_again": [{"step": _TEXT, "outputs": [_TEXT]}]},
}
_NAMES = {str: "a string", dict: "an object", list: "an array"}


def shape_problem(result: dict[str, Any]) -> str | None:
    """Where ``result`` holds a part of another type than the kit reads it as (``/step/outputs is not an
    array``), or None."""
    return _problem(result, SHAPE, "")


def _problem(value: Any, shape: Any, where: str) -> str | None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where} is not an object"
        found = (_problem(value[k], s, f"{where}/{k}") for k, s in shape.items() if value.get(k) is not None)
        return next((p for p in found if p is not None), None)
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is not an array"
        found = (_problem(item, shape[0], f"{where}/{i}") for i, item in enumerate(value))
        return next((p for p in found if p is not None), None)
    if not isinstance(value, shape):
        kinds = shape if isinstance(shape, tuple) else (shape,)
        return f"{where} is not {' or '.join(_NAMES.get(k, k.__name__) for k in kinds)}"
    return None
