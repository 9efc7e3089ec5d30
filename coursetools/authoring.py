"""Build the instructor notebooks in solutions/ from their diff-friendly sources.

Each lesson is written as a percent-format script, ``solutions/NN_topic/NN_topic.pct.py``
(jupytext's format: ``# %%`` starts a code cell, ``# %% [markdown]`` a text cell).
Four short cell markers become nbgrader's cell metadata:

==============================  =====================================================
``# %% locked="setup"``         read-only cell (imports, data): restored when grading
``# %% solution="ex_name"``     learner's cell; ``### BEGIN/END SOLUTION`` is stubbed
``# %% check="ex_name_check"``  visible self-check, read-only, worth no points
``# %% graded="ex_name_tests" points=2``  autograder tests (may hold HIDDEN TESTS)
==============================  =====================================================

``# %% starter="ex_name"`` right above a solution cell holds the broken program a
fix-the-bug exercise hands out instead of the stub (see ``helpers.starters``).

``tags=["nbval-ignore-output"]`` marks a cell whose output changes from run to run
(timings, paths) so nbval does not compare it.

Command line::

    python -m coursetools.authoring build [LESSON ...]   # .pct.py -> executed .ipynb
    python -m coursetools.authoring check                # stored .ipynb match their .pct.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from helpers.data import REPO_ROOT
from helpers.starters import KEY as STARTER

SOLUTIONS = REPO_ROOT / "solutions"
NBGRADER_SCHEMA = 3
MARKERS = ("locked", "solution", "check", "graded")
CELL_TIMEOUT_S = 600


def lesson_sources(names: list[str] | None = None) -> list[Path]:
    """The ``.pct.py`` source of every lesson, or of the lessons named (e.g. ``01_tensors``)."""
    sources = sorted(SOLUTIONS.glob("*/*.pct.py"))
    if names:
        sources = [s for s in sources if s.parent.name in names]
        missing = set(names) - {s.parent.name for s in sources}
        if missing:
            raise SystemExit(f"no lesson source for: {', '.join(sorted(missing))}")
    return sources


def notebook_path(source: Path) -> Path:
    return source.with_name(source.name.removesuffix(".pct.py") + ".ipynb")


def nbgrader_metadata(metadata: dict) -> dict | None:
    """Translate one cell's marker (see the module docstring) into nbgrader metadata."""
    found = [m for m in MARKERS if m in metadata]
    if not found:
        return None
    if len(found) > 1:
        raise ValueError(f"a cell has more than one marker: {found}")
    marker = found[0]
    grade_id = str(metadata[marker])
    meta = {
        "grade": marker == "graded",
        "grade_id": grade_id,
        "locked": marker != "solution",
        "schema_version": NBGRADER_SCHEMA,
        "solution": marker == "solution",
        "task": False,
    }
    if marker == "graded":
        meta["points"] = metadata.get("points") or _fail(f"graded cell {grade_id!r} needs points=N")
    return meta


def _fail(message: str):
    raise ValueError(message)


def source_to_notebook(source: Path) -> nbformat.NotebookNode:
    """Read a ``.pct.py`` source into an (unexecuted) nbgrader notebook."""
    nb = jupytext.read(source)
    starters = {}
    for cell in [c for c in nb.cells if STARTER in c.metadata]:
        starters[str(cell.metadata[STARTER])] = cell.source  # its solution cell carries it (helpers/starters.py)
        nb.cells.remove(cell)
    grade_ids: set[str] = set()
    for index, cell in enumerate(nb.cells):
        # Stable ids keep rebuilt notebooks' diffs to what really changed.
        cell.id = f"cell-{index:03d}"
        marker_meta = {k: cell.metadata.pop(k) for k in (*MARKERS, "points") if k in cell.metadata}
        cell.metadata.pop("lines_to_next_cell", None)
        meta = nbgrader_metadata(marker_meta)
        if meta is not None:
            if meta["grade_id"] in grade_ids:
                raise ValueError(f"{source.name}: grade_id {meta['grade_id']!r} is used twice")
            grade_ids.add(meta["grade_id"])
            cell.metadata["nbgrader"] = meta
            cell.id = meta["grade_id"][:64]
            if meta["solution"] and meta["grade_id"] in starters:
                cell.metadata[STARTER] = starters.pop(meta["grade_id"])
    if starters:
        raise ValueError(f"{source.name}: starter cells without a solution cell below them: {sorted(starters)}")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, workdir: Path) -> nbformat.NotebookNode:
    """Run every cell in ``workdir`` (the lesson folder), as a learner would."""
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return nb


def build(source: Path) -> float:
    """Write the executed notebook next to its source; return the seconds it took."""
    start = time.perf_counter()
    nb = execute(source_to_notebook(source), source.parent)
    # Execution timestamps, and prints split into chunks by timing, would make every rebuild a diff.
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    CoalesceStreamsPreprocessor().preprocess(nb, {})
    nb.metadata.pop("widgets", None)  # progress-bar widget state: random ids, no teaching value
    nbformat.write(nb, notebook_path(source))
    return time.perf_counter() - start


def comparable(nb: nbformat.NotebookNode) -> list[tuple]:
    return [(c.cell_type, c.source, c.metadata.get("nbgrader"), c.metadata.get("tags"), c.metadata.get(STARTER))
            for c in nb.cells]


def out_of_sync(source: Path) -> str | None:
    """Why the stored notebook does not match its source, or None when it does."""
    stored = notebook_path(source)
    if not stored.exists():
        return f"{stored.relative_to(REPO_ROOT)} is missing"
    want, have = comparable(source_to_notebook(source)), comparable(nbformat.read(stored, as_version=4))
    if len(want) != len(have):
        return f"{stored.relative_to(REPO_ROOT)} has {len(have)} cells, its source {len(want)}"
    for index, (w, h) in enumerate(zip(want, have)):
        if w != h:
            return f"{stored.relative_to(REPO_ROOT)} cell {index} differs from its source"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.authoring")
    sub = parser.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="convert and execute lesson sources")
    build_cmd.add_argument("lessons", nargs="*")
    sub.add_parser("check", help="fail if a stored notebook differs from its source")
    args = parser.parse_args(argv)
    if args.command == "build":
        if not os.environ.get("COURSE_DATA"):
            print("note: COURSE_DATA is not set; `make solutions` points it at the offline fixture", file=sys.stderr)
        for source in lesson_sources(args.lessons):
            print(f"built {notebook_path(source).relative_to(REPO_ROOT)} in {build(source):.1f} s", flush=True)
        return 0
    problems = [p for p in map(out_of_sync, lesson_sources()) if p]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
