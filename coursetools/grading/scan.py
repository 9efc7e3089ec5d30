"""A static scan of the code a learner wrote, for what no exercise needs and a cheat does.

The grader runs it on every submission before grading (grader side: nothing in the
learner's kernel can change it). It reads every code cell except the locked ones
(which nbgrader puts back from the source) and reports one line per finding:

- touching the course's checks or answers (``helpers.checks``, ``helpers.reference``);
- changing attributes of modules (``torch.allclose = ...``, ``setattr(np, ...)``,
  ``del check.check_x``) or of builtins;
- IPython's hooks (input and AST transformers, events, custom exception handlers);
- what the grader's guard in the kernel could otherwise be dug out with or worked
  around: ``sys.modules``, frames and tracing, the garbage collector's referrers,
  ``ctypes``, closures and code objects, ``exec``/``eval``/``compile``/``__import__``,
  and importlib's loaders (``importlib.util``, ``import_module`` of a computed name,
  ``reload`` of a course or torch module; ``importlib.reload`` of the learner's own
  module and ``importlib.metadata`` are honest).

Signalling or starting processes is not flagged: lessons do it (lesson 08 stops its
torchrun workers), and the sandbox keeps it from reaching the grader.

A finding does not change the score: the submission is reported as "suspicious: look
at it" with the reasons. No solution notebook of the course is flagged (tested).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator, NamedTuple

import nbformat

# Modules whose attributes a learner never needs to set, and the packages whose modules count too however the
# notebook names them (import torch.nn.functional as F). Other modules' settings are the learner's business
# (pd.options.display.max_rows = 20, sys.stdout = ..., logging.root.level = ...).
MODULE_NAMES = {"builtins", "__builtins__", "torch", "np", "numpy", "IPython", "helpers"}
WATCHED_PACKAGES = {"builtins", "torch", "numpy", "IPython", "helpers"}
# Attributes and names that give access to the kernel's machinery.
MACHINERY = {
    "input_transformers_cleanup": "IPython's input transformers",
    "input_transformers_post": "IPython's input transformers",
    "input_transformer_manager": "IPython's input transformers",
    "ast_transformers": "IPython's AST transformers",
    "events": "IPython's events",
    "set_custom_exc": "IPython's exception handlers",
    "custom_exceptions": "IPython's exception handlers",
    "register_magic_function": "IPython's magics",
    "modules": "sys.modules",
    "meta_path": "Python's import machinery",
    "path_hooks": "Python's import machinery",
    "settrace": "tracing", "setprofile": "tracing", "_getframe": "frames", "f_back": "frames",
    "f_globals": "frames", "f_locals": "frames", "tb_frame": "frames", "gi_frame": "frames",
    "__closure__": "closures", "__code__": "code objects", "__globals__": "function globals",
    "__builtins__": "builtins", "__subclasses__": "class internals", "excepthook": "sys.excepthook",
    "displayhook": "sys.displayhook", "__kwdefaults__": "function defaults", "__defaults__": "function defaults",
    "__self__": "builtins (a function's __self__)",
}
FORBIDDEN_CALLS = {"exec", "eval", "compile", "__import__", "setattr", "delattr", "breakpoint"}
FORBIDDEN_IMPORTS = {"builtins", "ctypes", "cffi", "imp", "runpy"}  # runpy: run the answer key's file


class Digging(NamedTuple):
    what: str  # what the functions reach, as a finding says it
    names: frozenset[str]  # the module's functions that reach it


# Modules honest code imports (gc.collect() to free memory, inspect.signature, importlib.reload of the learner's
# own module, importlib.metadata.version): only these of their functions reach other objects' frames, closures or
# referrers, which is what digging the guard out needs, or load a module by a name or a file the scan cannot read.
DIGGING = {"gc": Digging("other objects' referrers", frozenset({"get_referrers", "get_referents", "get_objects"})),
           "inspect": Digging("other objects' frames, closures or members", frozenset({
               "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getclosurevars",
               "getmembers", "getmembers_static", "getgeneratorlocals", "getcoroutinelocals"})),
           "importlib": Digging("loads a module by a name or from a file the scan cannot read", frozenset({
               "__import__", "util", "machinery", "_bootstrap", "_bootstrap_external", "abc"}))}
COURSE_PRIVATE = ("helpers.checks", "helpers.reference")
# Names a string may spell, in pieces ("__clo" + "sure__") or whole (vars(x)["__builtins__"]), to reach what the
# scan flags by attribute or call without naming it.
SPELLED = {*MACHINERY, *FORBIDDEN_CALLS, *FORBIDDEN_IMPORTS, *(name for digs in DIGGING.values() for name in digs.names),
           "reference", "__course_integrity__", "__dict__"}
DUNDER_STRINGS = {name for name in SPELLED if name.startswith("__") and name != "__dict__"}
# PyTorch's documented switches, which lessons set (torch.backends.cudnn.benchmark = True)
SETTINGS = ("torch.backends.", "torch._dynamo.config.", "torch._inductor.config.", "torch.set_float32_matmul_precision")
IPYTHON_OK = {"run_line_magic", "run_cell_magic", "system", "getoutput",  # what IPython's own %magics become
              "ast_node_interactivity"}  # show every expression's value: a display setting


def learner_cells(submitted: nbformat.NotebookNode, source: nbformat.NotebookNode | None = None) -> list[tuple[int, str]]:
    """(cell number, source) of every code cell the learner could write: all but the locked cells of ``source``."""
    locked = set()
    for cell in (source or submitted).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("locked") or meta.get("grade")) and not meta.get("solution"):
            locked.add(cell.source.strip())
    return [(i + 1, c.source) for i, c in enumerate(submitted.cells)
            if c.cell_type == "code" and c.source.strip() not in locked]


def _python(source: str) -> str:
    """The cell as Python, with IPython's %magics and !commands turned into the calls IPython makes."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # not IPython syntax either: parse what we have
        return source


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def scan_source(source: str, modules: set[str], locked: frozenset[str] = frozenset(),
                locked_imports: frozenset[str] = frozenset(), imported: frozenset[str] = frozenset(),
                aliases: dict[str, str] | None = None) -> list[str]:
    """Findings in one cell; ``modules`` are the names the notebook binds to the watched packages' modules
    (import torch.nn.functional as F), ``locked`` the names the locked cells import (``check``, which the graded
    cells call), ``locked_imports`` their import statements (``ast.dump``: the learner may run them again),
    ``imported`` every name the notebook imports (``from torch import compile`` is not the builtin), and
    ``aliases`` the names it gives the modules of :data:`DIGGING` and their functions (``import gc as g``)."""
    aliases = aliases or {}
    tree = _parsed(source)
    if tree is None:
        return []  # it will fail when run, and lose its own points
    found = []
    module_names = MODULE_NAMES | modules

    def root(node: ast.AST) -> str:
        return _dotted(node).split(".")[0]

    # `name in sys.modules` only asks whether a module is loaded
    asked = {id(c.comparators[0]) for c in ast.walk(tree) if isinstance(c, ast.Compare) and len(c.ops) == 1
             and isinstance(c.ops[0], (ast.In, ast.NotIn))}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) in locked_imports:
            continue  # the setup cell's own import, run again
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else names
            if isinstance(node, ast.ImportFrom) and node.module == "helpers":
                targets = [f"helpers.{n}" for n in names]
            if isinstance(node, ast.ImportFrom) and node.module in DIGGING:
                found += [f"imports {node.module}.{n} ({DIGGING[node.module].what})"
                          for n in names if n in DIGGING[node.module].names or n == "*"]
            found += [f"imports {target} ({DIGGING[target.split('.')[0]].what})" for target in targets
                      if target.split(".")[0] in DIGGING and target.count(".")
                      and target.split(".")[1] in DIGGING[target.split(".")[0]].names]
            for target in targets:
                if target.startswith(COURSE_PRIVATE):
                    found.append(f"imports {target} (the course's checks or answers)")
                elif target.split(".")[0] in FORBIDDEN_IMPORTS:
                    found.append(f"imports {target}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for item in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                    if isinstance(item, ast.Name) and item.id in locked:
                        found.append(f"rebinds {item.id} (imported by a locked cell; the graded cells use it)")
                    if isinstance(item, ast.Attribute) and root(item) in module_names \
                            and not _dotted(item).startswith(SETTINGS):
                        verb = "deletes" if isinstance(node, ast.Delete) else "sets"
                        found.append(f"{verb} {_dotted(item)} (an attribute of a module)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.split(".")[-1]
            if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS and node.func.id not in imported:
                if node.func.id in ("setattr", "delattr") and node.args and \
                        isinstance(node.args[0], (ast.Name, ast.Attribute)) and root(node.args[0]) not in module_names:
                    continue  # an object's attribute (setattr(self, f"layer{i}", ...)), not a module's
                found.append(f"calls {node.func.id}()")
            elif last in ("register", "unregister") and "events" in name:
                found.append(f"calls {name}() (IPython's events)")
        digging = aliases.get(root(node), root(node))
        if isinstance(node, ast.Attribute) and digging in DIGGING and node.attr in DIGGING[digging].names \
                and _dotted(node).count(".") == 1:
            found.append(f"uses {_dotted(node)} ({DIGGING[digging].what})")
        if isinstance(node, ast.Call) and _calls_importlib(node, "reload", aliases) and node.args \
                and root(node.args[0]) in module_names | set(locked):
            found.append(f"reloads {_dotted(node.args[0])} (a module of the course or of PyTorch)")
        if isinstance(node, ast.Call) and _calls_importlib(node, "import_module", aliases) and not (
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            # a name written out is read like an import statement (and a course module's name is flagged as a
            # string); a computed one the scan cannot read
            found.append(f"calls {_dotted(node.func)}() with a computed name (a module the scan cannot read)")
        if isinstance(node, ast.Attribute):
            if node.attr in MACHINERY and not (node.attr == "modules" and (root(node) not in ("sys",)
                                                                           or id(node) in asked)) \
                    and not (node.attr == "events" and "get_ipython" not in _dotted(node) and root(node) != "ip"):
                found.append(f"uses {_dotted(node)} ({MACHINERY[node.attr]})")
            elif root(node) == "get_ipython()" and node.attr not in IPYTHON_OK and _dotted(node).count(".") == 1:
                found.append(f"uses {_dotted(node)} (the IPython shell)")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "get_ipython") and not (
                isinstance(node.ctx, ast.Load) and node.id == "get_ipython"):
            found.append(f"uses {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                (any(p in node.value for p in COURSE_PRIVATE) or node.value in DUNDER_STRINGS):
            found.append(f"names {node.value[:40]!r} in a string")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            spelled = _folded(node)
            if spelled is not None and (spelled in SPELLED or any(p in spelled for p in COURSE_PRIVATE)):
                found.append(f"spells {spelled[:40]!r} in pieces")
    return list(dict.fromkeys(found))


def _calls_importlib(node: ast.Call, function: str, aliases: dict[str, str]) -> bool:
    """Whether the call is importlib's ``function`` (however the notebook named it: importlib.reload, il.reload,
    reload after ``from importlib import reload``)."""
    head, _, last = _dotted(node.func).rpartition(".")
    if not head:
        return aliases.get(last) == f"importlib.{function}"
    return last == function and aliases.get(head, head) == "importlib"


def _folded(node: ast.AST) -> str | None:
    """The string a sum of string literals makes ("__clo" + "sure__"), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        if left is not None and right is not None:
            return left + right
    return None


@functools.lru_cache(maxsize=512)
def _parsed(source: str) -> ast.Module | None:
    """The cell's syntax tree (as IPython would run it), or None when it does not parse; read, never changed."""
    try:
        return ast.parse(_python(source))
    except SyntaxError:
        return None


def _import_nodes(cells: list[str]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of the cells that parse."""
    for source in cells:
        tree = _parsed(source)
        if tree is not None:
            yield from (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def bound_modules(cells: list[str]) -> set[str]:
    """Names the notebook binds to modules (``import torch.nn as nn``, ``from helpers.checks import tensors as check``)."""
    names = set()
    for node in _import_nodes(cells):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif node.module and node.module.startswith(("helpers", "torch")):
            # the course imports modules this way: `from helpers.checks import tensors as check`
            names |= {a.asname or a.name for a in node.names if a.name[:1].islower()}
    return names


def imported_names(cells: list[str]) -> dict[str, str]:
    """Every name the cells bind by an import, with the module it comes from (``from torch import compile``:
    ``{"compile": "torch"}``)."""
    names: dict[str, str] = {}
    for node in _import_nodes(cells):
        if isinstance(node, ast.Import):
            names.update({a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                          for a in node.names})
        elif node.module:
            names.update({a.asname or a.name: node.module for a in node.names})
    return names


def digging_aliases(cells: list[str]) -> dict[str, str]:
    """The names the cells give :data:`DIGGING`'s modules and their functions, with what each names: ``import gc as
    g`` gives ``{"g": "gc"}``, ``from importlib import reload as rl`` gives ``{"rl": "importlib.reload"}``."""
    names: dict[str, str] = {}
    for node in _import_nodes(cells):
        if isinstance(node, ast.Import):
            names.update({a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] in DIGGING})
        elif node.module and node.module.split(".")[0] in DIGGING:
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return names


def scan_notebook(submitted: nbformat.NotebookNode, source: nbformat.NotebookNode | None = None) -> list[str]:
    """One line per finding, "cell N: ...", in the learner's cells of ``submitted``."""
    code = [c.source for c in submitted.cells if c.cell_type == "code"]
    imported = imported_names(code)
    modules = {name for name in bound_modules(code) if imported.get(name, name).split(".")[0] in WATCHED_PACKAGES}
    aliases = digging_aliases(code)
    mine = learner_cells(submitted, source)
    learner = {text for _, text in mine}
    locked_cells = [c.source for c in (source or submitted).cells
                    if c.cell_type == "code" and c.source not in learner and c.metadata.get("nbgrader", {}).get("locked")]
    locked = frozenset(bound_modules(locked_cells))
    locked_imports = frozenset(ast.dump(node) for node in _import_nodes(locked_cells))
    return [f"cell {number}: {finding}" for number, text in mine
            for finding in scan_source(text, modules, locked, locked_imports, frozenset(imported), aliases)]


def scan_file(path: Path, source: Path | None = None) -> list[str]:
    return scan_notebook(nbformat.read(path, as_version=4), nbformat.read(source, as_version=4) if source else None)
