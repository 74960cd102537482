"""The package maps a newcomer reads name every module, and only modules that exist.

Two maps: each package's ``__init__`` docstring, and the package map of docs/architecture.md. A module is a
``.py`` file whose name has no leading underscore, or a sub-package (a folder with an ``__init__.py``).

A docstring names a module in double backticks: ``name``, ``name.attribute`` (``repository_policy.conflict``) or
with its package's own prefix (``rimthan_workflow_registry.release``). Every double-backticked lowercase name is
read as a module of that package (or another of our packages), so a docstring writes a function as
:func:`name` and a command as its command line (``rimthan-pack inspect``); a file name (``manifest.json``) is
none.

docs/architecture.md's map is the fenced block under its "Package map" heading: a section per package, its
label (``core/release``, ``server``) at the start of a line, then the package's modules separated by ``·``, what
each holds in parentheses. Outside the parentheses a section holds module names and nothing else; a sub-package
is named by its own section. Every ``*.py`` path the page shows in backticks is a file of the repository
(``...`` stands for folders). interop/, no package, is mapped by interop/run_interop.py's docstring: its
paragraph beginning "Modules" names each ``.py`` file of interop/ in double backticks.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "src" / "rimthan_workflow_registry"
PACKAGES = {  # the map's section label -> the package
    "core": CORE,
    "core/release": CORE / "release",
    "core/run": CORE / "run",
    "packager": REPO / "packager" / "src" / "rimthan_packager",
    "server": REPO / "server" / "src" / "rimthan_workflow_mcp",
    "host": REPO / "host" / "src" / "rimthan_host",
    "clikit": REPO / "clikit" / "src" / "rimthan_clikit",
}
# rimthan_clikit is one module, its __init__: its docstring describes it and maps nothing.
DOCSTRING_MAPS = tuple(label for label in PACKAGES if label != "clikit")
OURS = frozenset(path.name for path in PACKAGES.values() if path.parent.name == "src")
ARCHITECTURE = REPO / "docs" / "architecture.md"
MAP_HEADING = "## Package map"
SOURCE_ROOTS = ("core", "clikit", "packager", "server", "host", "tests", "benchmarks", "interop", "deploy")
MODULE_NAME = re.compile(r"[a-z][a-z0-9_]*(?:\.[A-Za-z_]\w*)*(?<!\.json)(?<!\.toml)(?<!\.log)(?<!\.lock)")
PARENTHESES = re.compile(r"\([^()]*\)")


def _modules(package: Path) -> set[str]:
    files = {p.stem for p in package.glob("*.py") if not p.name.startswith("_")}
    return files | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


def _dotted(package: Path) -> str:
    """``rimthan_workflow_registry.release`` for core/src/rimthan_workflow_registry/release."""
    return ".".join(package.relative_to(next(p for p in package.parents if p.name == "src")).parts)


def _docstring_names(package: Path) -> set[str]:
    """The first part of every double-backticked lowercase name in the package's docstring, its own prefix off."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text("utf-8"))) or ""
    prefix = _dotted(package) + "."
    names = (n.removeprefix(prefix) for n in re.findall(r"``([^`]+)``", doc) if MODULE_NAME.fullmatch(n))
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("label", DOCSTRING_MAPS)
def test_a_package_docstring_maps_every_module_and_only_modules(label: str) -> None:
    package = PACKAGES[label]
    where = (package / "__init__.py").relative_to(REPO)
    modules, named = _modules(package), _docstring_names(package)
    problems = [f"{where}: module {m} is not in its map" for m in sorted(modules - named)]
    problems += [f"{where}: ``{n}`` is no module of {_dotted(package)}" for n in sorted(named - modules - OURS)]
    assert not problems, "\n".join(problems)


def _map_sections() -> dict[str, str]:
    """Each section of docs/architecture.md's package map: its label -> its text, parentheses taken out."""
    after = ARCHITECTURE.read_text("utf-8").split(f"\n{MAP_HEADING}\n", 1)[-1]
    block = after.split("```", 2)[1] if after.count("```") >= 2 else ""
    sections: dict[str, str] = {}
    label = ""
    for line in block.splitlines()[1:]:
        if line[:1].strip():
            label, _, line = line.partition(" ")
            sections[label] = ""
        if label:
            sections[label] += " " + line
    for key, text in sections.items():
        while PARENTHESES.search(text):
            text = PARENTHESES.sub(" ", text)
        sections[key] = text
    return sections


@pytest.mark.parametrize("label", PACKAGES)
def test_the_architecture_map_lists_every_module_and_only_modules(label: str) -> None:
    sections = _map_sections()
    assert label in sections, f"docs/architecture.md's package map has no section {label} ({MAP_HEADING})"
    package = PACKAGES[label]
    modules = _modules(package)
    named = set(sections[label].replace("·", " ").split())
    own_sections = {m for m in modules if f"{label}/{m}" in sections}
    problems = [f"module {m} is missing" for m in sorted(modules - own_sections - named)]
    problems += [f"{n!r} is no module of {_dotted(package)}" for n in sorted(named - modules)]
    where = f"docs/architecture.md's package map, section {label}"
    assert not problems, "\n".join(f"{where}: {p}" for p in problems)


def test_every_python_file_the_architecture_page_names_exists() -> None:
    files = [p.relative_to(REPO).as_posix() for root in SOURCE_ROOTS for p in (REPO / root).rglob("*.py")]
    shown = sorted(set(re.findall(r"`([^`\s]+\.py)`", ARCHITECTURE.read_text("utf-8"))))
    missing = [
        name for name in shown if not any(fnmatch.fnmatch(f"/{f}", "*/" + name.replace("...", "*")) for f in files)
    ]
    assert not missing, f"docs/architecture.md names files that do not exist: {', '.join(missing)}"


def test_the_interop_docstring_maps_every_interop_module_and_only_modules() -> None:
    """interop/ is no package: interop/run_interop.py's docstring is its map (``make interop`` runs that file)."""
    interop = REPO / "interop"
    doc = ast.get_docstring(ast.parse((interop / "run_interop.py").read_text("utf-8"))) or ""
    map_paragraph = doc.split("\nModules", 1)[-1].split("\n\n", 1)[0] if "\nModules" in doc else ""
    named = set(re.findall(r"``([a-z][a-z0-9_]*)``", map_paragraph))
    modules = {p.stem for p in interop.glob("*.py")}
    problems = [f"module {m} is not in the map" for m in sorted(modules - named)]
    problems += [f"``{n}`` is no module of interop/" for n in sorted(named - modules)]
    assert not problems, "interop/run_interop.py's docstring: " + "; ".join(problems)
