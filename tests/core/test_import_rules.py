"""The import rules docs/architecture.md states, read from every module's own ``import`` statements.

Each rule is a set of packages (or modules) a group of files must not import,
checked on the parsed source (``ast``), so an import inside a function counts
as much as one at the top. A rule that is broken names the file, the line and
the import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "src" / "rimthan_workflow_registry"
PACKAGER = REPO / "packager" / "src" / "rimthan_packager"
SERVER = REPO / "server" / "src" / "rimthan_workflow_mcp"
HOST = REPO / "host" / "src" / "rimthan_host"
INTEROP = REPO / "interop"
SDK_AND_CLI = ("mcp", "click", "starlette", "uvicorn", "anyio")


def _imports(path: Path, *, names: bool = True) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in ``path``, relative ones resolved against its package; with
    ``names``, ``from M import N`` also yields ``M.N`` (``N`` may be a module)."""
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            yield node.lineno, base
            if names:
                yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def _module_name(path: Path) -> str:
    src = next((p for p in path.parents if p.name == "src"), path.parent)
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _broken(files: list[Path], forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in files
        for line, name in _imports(path)
        if _within(name, forbidden) and not _within(name, allowed)
    )


def _inside(files: list[Path], packages: tuple[str, ...]) -> list[str]:
    """Imports of a module inside one of ``packages`` (not of the package itself)."""
    return sorted(
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in files
        for line, name in _imports(path, names=False)
        if any(name.startswith(p + ".") for p in packages)
    )


def _py(root: Path, *, but: tuple[str, ...] = ()) -> list[Path]:
    """Our Python files under ``root`` (never the npm tools' that ``make interop`` installs in node_modules)."""
    found = (p for p in sorted(root.rglob("*.py")) if "node_modules" not in p.relative_to(root).parts)
    return [p for p in found if not any(p.match(pattern) for pattern in but)]


RULES = {
    "the core imports no MCP SDK, no click, no HTTP stack and no adapter": (
        _py(CORE),
        (*SDK_AND_CLI, "rimthan_workflow_mcp", "rimthan_packager", "rimthan_host", "rimthan_clikit"),
        (),
    ),
    "release code never imports run code": (_py(CORE / "release"), ("rimthan_workflow_registry.run",), ()),
    "the packager never imports the MCP SDK, the server or the host kit": (
        _py(PACKAGER),
        ("mcp", "rimthan_workflow_mcp", "rimthan_host"),
        (),
    ),
    "the server never imports signing code or the packager": (
        _py(SERVER),
        ("rimthan_packager", "rimthan_host", "cryptography.hazmat.primitives.serialization.load_pem_private_key"),
        (),
    ),
    "the host kit uses only the server's stdio wire (serving, drain, guard), message shapes, wire contracts and "
    "protocol eras, not its internals or the packager": (
        _py(HOST),
        ("rimthan_workflow_mcp", "rimthan_packager"),
        (
            "rimthan_workflow_mcp.stdio_serve",
            "rimthan_workflow_mcp.stdio_drain",
            "rimthan_workflow_mcp.stdio_guard",
            "rimthan_workflow_mcp.message_shape",
            "rimthan_workflow_mcp.eras",
            "rimthan_workflow_mcp.contract_schemas",
        ),
    ),
    "only the command lines use rimthan_clikit": (
        [*_py(PACKAGER, but=("cli*.py",)), *_py(SERVER, but=("cli*.py",)), *_py(HOST, but=("serve.py",))],
        ("rimthan_clikit",),
        (),
    ),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_architecture_import_rules_hold(rule: str) -> None:
    files, forbidden, allowed = RULES[rule]
    assert files, rule
    assert _broken(files, forbidden, allowed) == [], rule


def test_adapters_import_the_cores_release_and_run_names_from_the_sub_package() -> None:
    """Never from a module inside it: ``__all__`` of ``release`` and ``run`` is their public surface (benchmarks
    may time an internal part on its own, and do)."""
    adapters = [*_py(PACKAGER), *_py(SERVER), *_py(HOST), *_py(INTEROP)]
    assert _inside(adapters, ("rimthan_workflow_registry.release", "rimthan_workflow_registry.run")) == []
