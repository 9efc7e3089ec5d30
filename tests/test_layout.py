"""Two packages: `helpers` holds exactly what notebooks import (and `progress`), `coursetools` the rest.

- No module of `helpers` imports `coursetools` (the sandbox mounts only `helpers`).
- Every module of `helpers` is reached from a notebook's imports or from `helpers.progress`
  (following imports inside `helpers`), so nothing of the course's tooling hides in it.
- No notebook imports `coursetools`.
- `coursetools` has no import cycles, counting the imports inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from helpers.data import REPO_ROOT

PACKAGES = ("helpers", "coursetools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((REPO_ROOT / package).rglob("*.py"))}


def imported(tree: ast.AST, modules: dict[str, Path], current: str = "") -> set[str]:
    """The course's modules a piece of code imports (anywhere in it, functions included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative import
                package = current.rsplit(".", node.level)[0]
                base = f"{package}.{base}"
            # `from a.b import c` imports the module a.b.c when there is one, else names of a.b
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imported(ast.parse(path.read_text()), modules, name) - {name} for name, path in modules.items()}


def notebook_imports() -> set[str]:
    modules, found = all_modules(), set()
    for path in sorted((REPO_ROOT / "notebooks").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                try:
                    found |= imported(ast.parse(cell.source), modules)
                except SyntaxError:  # a cell with IPython magics: not where the course's imports are
                    continue
    return found


def test_helpers_never_imports_coursetools():
    edges = graph()
    wrong = {name: sorted(t for t in targets if t.startswith("coursetools"))
             for name, targets in edges.items() if name.startswith("helpers")}
    assert not {k: v for k, v in wrong.items() if v}, "the learner package must not need the course's tooling"


def test_notebooks_import_only_helpers():
    assert not {m for m in notebook_imports() if m.startswith("coursetools")}


def test_every_helpers_module_is_used_by_a_notebook_or_progress():
    edges = graph()
    reached, todo = set(), list(notebook_imports() | {"helpers.progress"})
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += edges.get(name, ())
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(parent)  # importing a submodule runs its package's __init__
    unused = sorted(name for name in edges if name.startswith("helpers") and name not in reached)
    assert not unused, f"modules of helpers that no notebook (nor progress) needs belong in coursetools: {unused}"


def test_coursetools_has_no_import_cycles():
    edges = {name: {t for t in targets if t.startswith("coursetools")}
             for name, targets in graph().items() if name.startswith("coursetools")}
    # a package's __init__ imported by its own submodules is how packages work, not a cycle
    edges = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in edges.items()}
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
