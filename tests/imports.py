"""The project's imports as the code spells them, read with ast, for the test that holds the floors
(tests/test_layers.py)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("parser", "linkgen", "db")


@dataclass(frozen=True)
class Import:
    module: str     # the absolute module imported: parser.fetch, or parser.fetch.Fetcher's module
    line: int
    deferred: bool  # inside a function or under `if TYPE_CHECKING:`, not at the module's top
    text: str       # the statement's source lines, with their comments


def module_name(path: Path, root: Path = ROOT) -> str:
    """parser/fetch/http.py -> parser.fetch; parser/adapters/__init__.py -> parser.adapters."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of parser/, linkgen/ and db/ (of the checkout at `root`) by its dotted name."""
    return {module_name(p, root): p for top in PACKAGES for p in sorted((root / top).rglob("*.py"))}


def project_imports(path: Path, modules: dict[str, Path], root: Path = ROOT) -> list[Import]:
    """The imports of parser/, linkgen/ and db/ modules in a file: `from . import x` names module x,
    `from .x import name` module x."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    deferred = _deferred(tree)
    package = _package(path, root)
    found = []
    for node in ast.walk(tree):
        for module in _targets(node, package, modules):
            statement = "\n".join(lines[node.lineno - 1:node.end_lineno])
            found.append(Import(module, node.lineno, node in deferred, statement))
    return found


def _package(path: Path, root: Path = ROOT) -> str:
    module = module_name(path, root)
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _resolve(node: ast.ImportFrom, package: str) -> str:
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
    return ".".join(part for part in (base, node.module or "") if part)


def _targets(node: ast.AST, package: str, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] in PACKAGES]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = _resolve(node, package)
    if base.split(".")[0] not in PACKAGES:
        return []
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
    names = len(submodules) < len(node.names)
    return submodules + ([base] if names else [])


def _deferred(tree: ast.AST) -> set[ast.AST]:
    """Imports in a function's body, or under `if TYPE_CHECKING:` (both would hide a circle)."""
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            found.update(n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found
