"""The floors of the code (issue 19): parser's modules stand in stage folders, FLOORS bottom to top.
A module imports its own floor and those below it, never one above; linkgen/ and db/ import only
parser's ground floors (core, fetch); no modules import each other, however far round; and an
import of ours inside a function (the way a circle is dodged) is there only with its reason in its
statement: `# imported on first use: ...` (start-up time or memory, never a circle).

A module's floor is the first folder under parser/ (parser/fetch/http.py: fetch), linkgen's and
db's their own; parser/__init__.py, which holds only the version, is the ground. The files still
flat in parser/ take theirs from FLAT (the plan the folders are moved by); any other flat file is
"top", where the command line and the loop live.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.imports import ROOT, Import, project_imports, project_modules

FLOORS = ["core", "fetch", "db", "adapters", "pipeline", "linkgen", "sources", "push", "settings", "jobs",
          "group", "feeds", "operate", "top"]
GROUND = {"core", "fetch"}  # all that linkgen/ and db/ may use of parser
DEFERRED_REASON = "# imported on first use"

# Files still flat in parser/ -> the folder they move to. Empty once the folders are made.
FLAT: dict[str, str] = {}


def floor_of(module: str, modules: dict[str, Path]) -> str:
    parts = module.split(".")
    if parts[0] != "parser":
        return parts[0]
    if len(parts) == 1:
        return "core"
    if len(parts) > 2 or modules[module].name == "__init__.py":
        return parts[1]
    return FLAT.get(parts[1], "top")


def all_imports(modules: dict[str, Path], root: Path = ROOT) -> Iterable[tuple[str, Import]]:
    for module, path in modules.items():
        for found in project_imports(path, modules, root):
            if found.module != module:
                yield module, found


def upward(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Each import of a floor above the importer's, as `importer (floor) -> imported (floor), line N`."""
    found = []
    for module, imp in all_imports(modules, root):
        low, high = floor_of(module, modules), floor_of(imp.module, modules)
        if FLOORS.index(high) > FLOORS.index(low):
            found.append(f"{module} ({low}) -> {imp.module} ({high}), line {imp.line}")
    return sorted(set(found))


def circles(modules: dict[str, Path], root: Path = ROOT) -> list[list[str]]:
    """Groups of modules that import each other, however far round (a package's __init__ too)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, imp in all_imports(modules, root):
        graph[module].add(imp.module)
    reach = {m: _reachable(graph, m) for m in graph}
    groups = {frozenset(o for o in reach[m] if m in reach[o]) | {m} for m in graph if m in reach[m]}
    return sorted(sorted(g) for g in groups)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return project_modules()


def test_every_folder_is_a_floor_and_every_flat_file_named_exists(modules):
    folders = {path.parent.name for m, path in modules.items() if m.count(".") >= 2 and m.startswith("parser.")}
    assert folders <= set(FLOORS), folders - set(FLOORS)
    flat = {path.stem for path in (ROOT / "parser").glob("*.py")}
    assert set(FLAT) <= flat, f"FLAT names files that are gone: {sorted(set(FLAT) - flat)}"
    assert set(FLAT.values()) <= set(FLOORS)


def test_no_module_imports_a_floor_above_its_own(modules):
    found = upward(modules)
    assert not found, "\n".join(found)


def test_linkgen_and_db_use_only_the_ground_floors_of_parser(modules):
    used = {f"{module} -> {imp.module} ({floor_of(imp.module, modules)})"
            for module, imp in all_imports(modules)
            if module.split(".")[0] in ("linkgen", "db") and imp.module.startswith("parser")
            and floor_of(imp.module, modules) not in GROUND}
    assert not used, "\n".join(sorted(used))


def test_no_import_circle(modules):
    found = circles(modules)
    assert not found, "\n".join(" <-> ".join(group) for group in found)


def hidden(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Imports of ours inside a function (or under TYPE_CHECKING) without the reason in their statement."""
    return sorted(f"{module}, line {imp.line}: {imp.text.splitlines()[0].strip()}"
                  for module, imp in all_imports(modules, root)
                  if imp.deferred and DEFERRED_REASON not in imp.text)


def test_an_import_inside_a_function_says_why(modules):
    found = hidden(modules)
    assert not found, "\n".join(found)


def test_the_checks_see_an_upward_import_a_hidden_one_and_a_circle(tmp_path):
    """The checks themselves, on a scratch checkout in folders: the ground importing the top is found,
    and the circle it makes (through an import in a function too), and that import without its reason."""
    files = {"parser/__init__.py": "", "parser/core/__init__.py": "",
             "parser/core/errors.py": "from ..cli import run\n",
             "parser/cli.py": "from .core import errors\n\n\ndef run():\n    from .fetch.http import Fetcher\n",
             "parser/fetch/__init__.py": "", "parser/fetch/http.py": "from ..core.errors import FetchError\n",
             "linkgen/__init__.py": "", "linkgen/harvest.py": "from parser.cli import run\n", "db/__init__.py": ""}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    modules = project_modules(tmp_path)
    assert floor_of("parser.fetch.http", modules) == "fetch" and floor_of("parser.cli", modules) == "top"
    assert upward(modules, tmp_path) == ["linkgen.harvest (linkgen) -> parser.cli (top), line 1",
                                          "parser.core.errors (core) -> parser.cli (top), line 1"]
    # the import in run() closes a circle too: cli -> fetch.http -> core.errors -> cli
    assert circles(modules, tmp_path) == [["parser.cli", "parser.core.errors", "parser.fetch.http"]]
    assert hidden(modules, tmp_path) == ["parser.cli, line 5: from .fetch.http import Fetcher"]
