"""The release layout's file names are spelled once, in ``release/format.py``; every other module uses its constant.

Read from the parsed source (``ast``) of every module of the four packages: a
string literal that is exactly one of those names, anywhere but its one
definition, names the file, the line and the constant to use. Messages that
mention a name inside longer text (``"catalogue.toml is missing"``) are text,
not the name, and stay as written.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rimthan_workflow_registry.release import CATALOGUE_MANIFEST_NAME, CHECKSUMS_NAME, MANIFEST_NAME

REPO = Path(__file__).resolve().parents[2]
SOURCES = tuple(REPO / package / "src" for package in ("core", "packager", "server", "host"))
FORMAT = REPO / "core" / "src" / "rimthan_workflow_registry" / "release" / "format.py"
LAYOUT_NAMES = {
    CATALOGUE_MANIFEST_NAME: "CATALOGUE_MANIFEST_NAME",
    MANIFEST_NAME: "MANIFEST_NAME",
    CHECKSUMS_NAME: "CHECKSUMS_NAME",
}


def _spelled(path: Path) -> list[str]:
    """Each place in ``path`` that spells a layout name as a literal of its own, with the constant to use."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    return [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r} (use {LAYOUT_NAMES[node.value]})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in LAYOUT_NAMES
    ]


def test_each_release_layout_file_name_is_spelled_only_where_it_is_defined() -> None:
    modules = sorted(p for root in SOURCES for p in root.rglob("*.py") if p != FORMAT)
    assert len(modules) > 100  # the control: the four packages' modules were found
    problems = [place for path in modules for place in _spelled(path)]
    assert not problems, "\n".join(problems)


def test_the_layout_names_are_defined_once_in_the_format_module() -> None:
    defined = [line for line in FORMAT.read_text("utf-8").splitlines() if line.split(" = ")[0] in LAYOUT_NAMES.values()]
    assert len(defined) == len(LAYOUT_NAMES), defined
