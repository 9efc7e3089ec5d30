"""nbgrader for this course, with failures that cannot pass for a zero.

nbgrader alone has three quiet failure modes this module turns into loud ones:

- ``nbgrader validate`` exits 0 even when a notebook fails;
- a submission whose kernel dies is removed and later exports as 0.0, the same
  as a genuine zero;
- when ``helpers`` cannot be imported, every graded cell fails and every
  learner gets 0, which looks like a class that did nothing.

Command line (run from the course root, where nbgrader_config.py is)::

    python -m helpers.grading release              # solutions/ -> notebooks/
    python -m helpers.grading autograde [LESSON]   # grading/submitted/<student>/<lesson>/
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from helpers.data import REPO_ROOT


# nbgrader runs the `alembic` command to set up its gradebook; make the one installed
# next to this Python findable even when the virtual environment is not activated.
_BIN = str(Path(sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")


# nbgrader 0.9.6's gradebook triggers this SQLAlchemy warning on every autograde; it is harmless noise.
warnings.filterwarnings("ignore", message="Object of type <Submitted", module="nbgrader")


class GradingError(RuntimeError):
    """The grading run itself is broken (not the learner's work): stop and fix it."""


@dataclass(frozen=True)
class SubmissionResult:
    """What the autograder made of one learner's notebook for one lesson.

    status is one of:
        "graded"           the notebook ran to the end; ``score`` is its mark
        "timed out"        a cell ran past the time limit and was interrupted
        "kernel died"      the notebook crashed Python; nbgrader could not grade it
        "helpers missing"  ``import helpers`` failed: an environment problem, not the learner's
        "unreadable"       the submitted file is not a valid notebook (truncated, hand-edited JSON)
    """

    student: str
    lesson: str
    status: str
    score: float | None
    max_score: float
    detail: str = ""

    @property
    def needs_attention(self) -> bool:
        return self.status != "graded"


def load_config(course_root: Path, overrides: Config | None = None) -> Config:
    """nbgrader_config.py of ``course_root``, with the root made absolute."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_root)).load_config()
    config.CourseDirectory.root = str(course_root)
    config.CourseDirectory.db_url = f"sqlite:///{course_root / 'grading' / 'gradebook.db'}"
    if overrides is not None:
        config.merge(overrides)
    return config


def _api(course_root: Path, overrides: Config | None = None):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    (course_root / "grading").mkdir(exist_ok=True)
    config = load_config(course_root, overrides)
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def lessons(course_root: Path = REPO_ROOT) -> list[str]:
    """Lesson (assignment) names: the folders of solutions/ that hold a notebook."""
    return sorted(p.parent.name for p in (course_root / "solutions").glob("*/*.ipynb"))


def release(course_root: Path = REPO_ROOT, names: list[str] | None = None) -> None:
    """Regenerate notebooks/<lesson>/ from solutions/<lesson>/ with nbgrader."""
    api = _api(course_root)
    for name in names or lessons(course_root):
        result = api.generate_assignment(name, force=True, create=True)
        if not result["success"]:
            raise GradingError(f"nbgrader could not generate {name}:\n{result.get('error') or result.get('log')}")


def _error_outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


def classify(notebook: nbformat.NotebookNode | None) -> tuple[str, str]:
    """(status, detail) of an autograded notebook; None means nbgrader produced none."""
    if notebook is None:
        return "kernel died", "nbgrader could not execute the notebook (the kernel died or it would not run)"
    for error in _error_outputs(notebook):
        if error.ename in ("ModuleNotFoundError", "ImportError") and "helpers" in error.evalue:
            return "helpers missing", f"{error.ename}: {error.evalue}"
    for error in _error_outputs(notebook):
        if error.ename == "CellTimeoutError" or "Timeout" in error.ename:
            return "timed out", "a cell ran past the time limit and was interrupted"
    return "graded", ""


def autograde(
    lesson: str,
    course_root: Path = REPO_ROOT,
    students: list[str] | None = None,
    overrides: Config | None = None,
) -> list[SubmissionResult]:
    """Autograde every submission of ``lesson`` and say what happened to each.

    Steps:
        1. Run nbgrader's autograde for each student's submitted folder.
        2. Read the autograded notebooks and classify them (graded, timed out,
           kernel died, helpers missing).
        3. Read each score from the gradebook.

    Raises:
        GradingError: when ``helpers`` could not be imported in any notebook, because
            then every score is a meaningless 0.
    """
    api = _api(course_root, overrides)
    submitted = course_root / "grading" / "submitted"
    students = students or sorted(p.parent.name for p in submitted.glob(f"*/{lesson}"))
    results = []
    for student in students:
        unreadable = _unreadable(submitted / student / lesson)
        if unreadable:
            _, max_score = _gradebook_score(api.coursedir.db_url, lesson, student)
            results.append(SubmissionResult(student, lesson, "unreadable", None, max_score, unreadable))
            continue
        outcome = api.autograde(lesson, student, force=True, create=True)
        graded_dir = course_root / "grading" / "autograded" / student / lesson
        notebooks = sorted(graded_dir.glob("*.ipynb")) if outcome["success"] else []
        status, detail = classify(nbformat.read(notebooks[0], as_version=4) if notebooks else None)
        score, max_score = _gradebook_score(api.coursedir.db_url, lesson, student)
        if status == "kernel died":
            score = None  # nbgrader's 0 here would read as a genuine zero
        results.append(SubmissionResult(student, lesson, status, score, max_score, detail))
    broken = [r for r in results if r.status == "helpers missing"]
    if broken:
        raise GradingError(
            f"`helpers` failed to import while grading {lesson} for {len(broken)} submission(s) "
            f"({broken[0].detail}). Every score would be 0: install the course (pip install -e .) "
            "in the environment nbgrader runs in, then grade again."
        )
    return results


def _unreadable(folder: Path) -> str:
    """Why a submitted folder holds no gradable notebook, or "" when every notebook reads."""
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        return f"no notebook in {folder.name}/"
    for path in notebooks:
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as error:  # nbformat raises JSON, validation and version errors
            return f"{path.name} is not a valid notebook ({type(error).__name__}: {str(error)[:120]})"
    return ""


def _gradebook_score(db_url: str, lesson: str, student: str) -> tuple[float | None, float]:
    """(the student's score or None when the gradebook has none, the lesson's maximum)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        max_score = gradebook.find_assignment(lesson).max_score
        try:
            return gradebook.find_submission(lesson, student).score, max_score
        except MissingEntry:
            return None, max_score


def copy_course(dest: Path, folders: tuple[str, ...] = ("solutions",), lessons: list[str] | None = None,
                source: Path = REPO_ROOT) -> Path:
    """Copy nbgrader_config.py and the named course folders into ``dest`` (which must exist).

    Copies every lesson, or only ``lessons``, leaving out the files nbgrader ignores
    (TensorBoard runs, checkpoints, lesson sources), so that grading a copy never
    touches the course itself.
    """
    ignore = shutil.ignore_patterns(*load_config(source).CourseDirectory.ignore)
    shutil.copy(source / "nbgrader_config.py", dest)
    for folder in folders:
        names = lessons or sorted(p.name for p in (source / folder).iterdir() if p.is_dir())
        for name in names:
            shutil.copytree(source / folder / name, dest / folder / name, ignore=ignore)
    return dest


def format_table(results: list[SubmissionResult]) -> str:
    lines = [f"{'student':<16} {'lesson':<22} {'score':>11}  status"]
    for r in results:
        score = "-" if r.score is None else f"{r.score:g}"
        note = f"{r.status}: {r.detail}" if r.needs_attention else r.status
        lines.append(f"{r.student:<16} {r.lesson:<22} {score:>5} / {r.max_score:<3g}  {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.grading")
    sub = parser.add_subparsers(dest="command", required=True)
    release_cmd = sub.add_parser("release", help="regenerate notebooks/ from solutions/")
    release_cmd.add_argument("lessons", nargs="*")
    grade = sub.add_parser("autograde", help="autograde grading/submitted/*/<lesson>")
    grade.add_argument("lessons", nargs="*")
    grade.add_argument("--timeout", type=int, help="seconds a cell may run (default: nbgrader_config.py's)")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if not (root / "nbgrader_config.py").exists():
        print("error: run this from the course root (where nbgrader_config.py is)", file=sys.stderr)
        return 2
    try:
        if args.command == "release":
            names = args.lessons or lessons(root)
            release(root, names)
            print(f"released {len(names)} lesson(s) to notebooks/: {', '.join(names)}")
            return 0
        overrides = Config()
        if args.timeout:
            overrides.Execute.timeout = args.timeout
        all_results = [r for lesson in (args.lessons or lessons(root)) for r in autograde(lesson, root, overrides=overrides)]
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_table(all_results))
    attention = [r for r in all_results if r.needs_attention]
    if attention:
        print(f"\n{len(attention)} submission(s) need a person to look at them (not graded as 0).")
    return 1 if attention else 0


if __name__ == "__main__":
    raise SystemExit(main())
