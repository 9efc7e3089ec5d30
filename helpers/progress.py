"""Your progress through the course: which exercises pass, which fail and why, which wait for you.

Each lesson's notebook in ``notebooks/`` is run the way nbgrader's Validate
button runs it (a fresh kernel, top to bottom, nbgrader's time limit per cell),
but on a copy in a temporary folder: your notebooks are never changed. Each
graded cell that runs without an error earns its points, as when your work is
graded (hidden tests excepted: your instructor's grading runs more cases).

Some points cannot be measured here at all: the capstone's accuracy tiers (lesson
10) are graded on held-out digits that only the autograder has. Such a cell prints
``[graded by the autograder only]``; its points are counted as earned by nobody
yet, and the table says so, with what your validation accuracy predicts.

Command line, from the course folder (``make progress`` runs it)::

    python -m helpers.progress                 # every lesson (a few minutes)
    python -m helpers.progress 01_tensors      # only the lessons named

In a notebook: ``show_progress(["01_tensors"])`` prints the table and draws the chart.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
from nbgrader.utils import determine_grade, is_grade, is_solution, setenv
from traitlets.config.loader import PyFileConfigLoader

from helpers.data import REPO_ROOT
from helpers.starters import is_untouched_starter

NOTEBOOKS = REPO_ROOT / "notebooks"
STUB = "raise NotImplementedError()"
PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
AUTOGRADER = "autograder only"
# What a graded cell prints when its points are graded only by the autograder's hidden tests (the same
# text as helpers.checks.capstone.AUTOGRADER_ONLY, which a test keeps equal).
AUTOGRADER_ONLY = "[graded by the autograder only]"
MESSAGE_WIDTH = 90


@dataclass(frozen=True)
class Exercise:
    """One exercise of a lesson: its graded cells' points and what running them showed.

    status is ``passed`` (every graded cell ran without an error), ``not attempted``
    (its cell still holds ``raise NotImplementedError()`` and a graded cell failed),
    ``failed``, or ``autograder only`` (every graded cell that ran here passed, but
    some points are graded only by the autograder: they are not counted in
    ``points``); ``message`` is the first failing graded cell's error, or what the
    autograder-only cells said.
    """

    lesson: str
    name: str
    status: str
    points: float
    max_points: float
    message: str = ""


def lesson_notebooks(folder: Path = NOTEBOOKS, names: list[str] | None = None) -> list[Path]:
    """``folder/<lesson>/<lesson>.ipynb`` for every lesson, or for the lessons named."""
    found = sorted(p for p in folder.glob("*/*.ipynb") if p.stem == p.parent.name)
    if names:
        missing = set(names) - {p.stem for p in found}
        if missing:
            raise SystemExit(f"no notebook in {folder} for: {', '.join(sorted(missing))}")
        found = [p for p in found if p.stem in names]
    return found


def run_like_validate(notebook: Path, progress_bar=None) -> nbformat.NotebookNode:
    """Execute a copy of ``notebook`` as nbgrader's Validate does, and return the executed copy.

    Steps:
        1. Copy the lesson's folder (without what nbgrader ignores) to a temporary folder.
        2. Run nbgrader's own preprocessors (check the cell metadata, clear the
           outputs, execute) there, with the course's nbgrader configuration and
           the NBGRADER_VALIDATING / NBGRADER_EXECUTION variables Validate sets.
    """
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    ignore = shutil.ignore_patterns(*config.CourseDirectory.ignore)
    with tempfile.TemporaryDirectory(prefix="course-progress-") as tmp:
        copy = Path(shutil.copytree(notebook.parent, Path(tmp) / notebook.parent.name, ignore=ignore))
        nb = nbformat.read(copy / notebook.name, as_version=nbformat.NO_CONVERT)
        resources = {"metadata": {"path": str(copy)}}
        with setenv(NBGRADER_VALIDATING="1", NBGRADER_EXECUTION="validate"):
            for step in (CheckCellMetadata(config=config), ClearOutput(config=config),
                         CountedExecute(config=config, progress_bar=progress_bar)):
                nb, resources = step.preprocess(nb, resources)
    return nb


class CountedExecute(Execute):
    """nbgrader's Execute (what Validate and autograde run), advancing a progress bar as each cell finishes."""

    def __init__(self, progress_bar=None, **kwargs):
        # Only the kernel's log level differs from Validate: its start-up warnings are not the learner's.
        kwargs.setdefault("extra_arguments", ["--IPKernelApp.log_level=ERROR"])
        super().__init__(**kwargs)
        self.progress_bar = progress_bar

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        if self.progress_bar is not None:
            self.progress_bar.update(1)


def _error(cell: nbformat.NotebookNode) -> str:
    """The cell's error in one line: a CheckError's symptom (its hints are for the notebook), else ``Type: message``."""
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            text = output.evalue if output.ename == "CheckError" else f"{output.ename}: {output.evalue}"
            if output.ename == "CheckError":
                from helpers.checks import symptom_of  # here: the table needs torch only when a check failed

                text = symptom_of(text)
            return " ".join(text.split())
    return "printed to stderr" if cell.get("outputs") else "failed"


def _autograder_only(cell: nbformat.NotebookNode) -> str | None:
    """The line a graded cell printed to say its points are graded only by the autograder, or None."""
    for output in cell.get("outputs", []):
        for line in output.get("text", "").splitlines() if output.get("output_type") == "stream" else []:
            if line.startswith(AUTOGRADER_ONLY):
                return line.removeprefix(AUTOGRADER_ONLY).strip()
    return None


def exercises(lesson: str, executed: nbformat.NotebookNode) -> list[Exercise]:
    """Group an executed notebook's graded cells by the exercise (solution cell) above them."""
    groups: dict[str, dict] = {}
    current = {"name": "", "source": ""}
    for cell in executed.cells:
        if is_solution(cell) and cell.cell_type == "code":
            current = {"name": cell.metadata["nbgrader"]["grade_id"], "source": cell.source,
                       "untouched": is_untouched_starter(cell)}
        elif is_grade(cell):
            score, max_score = determine_grade(cell)
            group = groups.setdefault(current["name"] or cell.metadata["nbgrader"]["grade_id"],
                                      {"source": current["source"], "untouched": current.get("untouched"),
                                       "points": 0.0, "max": 0.0, "errors": [], "autograder": []})
            group["max"] += max_score
            only = _autograder_only(cell) if (score or 0.0) >= max_score else None
            if only is not None:
                group["autograder"].append((max_score, only))
                continue
            group["points"] += score or 0.0
            if (score or 0.0) < max_score:
                group["errors"].append(_error(cell))
    result = []
    for name, group in groups.items():
        if not group["errors"] and group["autograder"]:
            unknown = sum(points for points, _ in group["autograder"])
            status = AUTOGRADER
            message = (f"{unknown:g} points graded only by the autograder; from your validation accuracy: "
                       + ", ".join(said for _, said in group["autograder"]))
        elif not group["errors"]:
            status, message = PASSED, ""
        elif STUB in group["source"]:
            status, message = NOT_ATTEMPTED, f"replace `{STUB}` with your code"
        elif group["untouched"]:
            status, message = NOT_ATTEMPTED, "fix the broken program in the exercise's cell"
        else:
            status, message = FAILED, group["errors"][0]
        result.append(Exercise(lesson, name.removeprefix("ex_"), status, group["points"], group["max"], message))
    return result


def progress(names: list[str] | None = None, folder: Path = NOTEBOOKS) -> list[Exercise]:
    """Run every lesson's notebook in ``folder`` (or the lessons named) and report each exercise."""
    from tqdm.auto import tqdm

    notebooks = lesson_notebooks(folder, names)
    cells = sum(sum(c.cell_type == "code" for c in nbformat.read(nb, as_version=4).cells) for nb in notebooks)
    results: list[Exercise] = []
    with tqdm(total=cells, unit="cell", desc="running your notebooks") as bar:
        for notebook in notebooks:
            bar.set_postfix_str(notebook.stem)
            results += exercises(notebook.stem, run_like_validate(notebook, bar))
    return results


def format_table(results: list[Exercise]) -> str:
    """One table: every exercise with its lesson, points and status, then the totals."""
    lines = [f"{'lesson':<16} {'exercise':<28} {'points':>7}  status", "-" * 70]
    for r in results:
        width = MESSAGE_WIDTH * 2 if r.status == AUTOGRADER else MESSAGE_WIDTH  # the estimate is the message
        message = r.message if len(r.message) <= width else r.message[: width - 3] + "..."
        lines.append(f"{r.lesson:<16} {r.name:<28} {r.points:>3g} / {r.max_points:<3g} {r.status}"
                     + (f": {message}" if message else ""))
    counts = {s: sum(r.status == s for r in results) for s in (PASSED, FAILED, NOT_ATTEMPTED, AUTOGRADER)}
    counts = {s: n for s, n in counts.items() if n or s != AUTOGRADER}
    lines += ["-" * 70, f"{'total':<45} {sum(r.points for r in results):>3g} / {sum(r.max_points for r in results):<3g} "
              + ", ".join(f"{n} {s}" for s, n in counts.items())]
    return "\n".join(lines)


def plot(results: list[Exercise]):
    """A bar per lesson: points earned, points lost to failing exercises, points not attempted."""
    import matplotlib.pyplot as plt

    lessons = list(dict.fromkeys(r.lesson for r in results))
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.45 * len(lessons)), layout="constrained")
    left = [0.0] * len(lessons)
    for label, status, color in (("passed", PASSED, "tab:green"), ("failing", FAILED, "tab:red"),
                                 ("not attempted", NOT_ATTEMPTED, "lightgrey"),
                                 ("graded by the autograder only", AUTOGRADER, "tab:blue")):
        if status == PASSED:
            widths = [sum(r.points for r in results if r.lesson == lesson) for lesson in lessons]
        elif status == AUTOGRADER:
            widths = [sum(r.max_points - r.points for r in results if r.lesson == lesson and r.status == status)
                      for lesson in lessons]
        else:
            widths = [sum(r.max_points - r.points for r in results if r.lesson == lesson and r.status == status)
                      for lesson in lessons]
        ax.barh(lessons, widths, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("points")
    ax.set_title("Your points per lesson")
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    return fig


def show_progress(names: list[str] | None = None, folder: Path = NOTEBOOKS) -> None:
    """In a notebook: run the lessons named (all by default), print the table and show the chart.

    Does nothing while nbgrader itself runs the notebook (Validate, grading, or this
    report), so that a notebook calling it never runs the course inside itself.
    """
    if os.environ.get("NBGRADER_EXECUTION"):
        print("(progress is not measured while nbgrader runs this notebook)")
        return
    import matplotlib.pyplot as plt

    results = progress(names, folder)
    print(format_table(results))
    plot(results)
    plt.show()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.progress", description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson folders, e.g. 01_tensors (default: all)")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="folder of lesson folders (default: notebooks/)")
    parser.add_argument("--chart", type=Path, default=REPO_ROOT / ".cache" / "progress.png",
                        help="where to save the bar chart (default: .cache/progress.png)")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    results = progress(args.lessons or None, args.notebooks)
    print(format_table(results))
    args.chart.parent.mkdir(parents=True, exist_ok=True)
    plot(results).savefig(args.chart, dpi=120)
    print(f"\nchart: {args.chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
