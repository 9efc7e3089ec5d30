"""nbgrader for this course, with failures that cannot pass for a zero.

nbgrader alone has three quiet failure modes this module turns into loud ones:

- ``nbgrader validate`` exits 0 even when a notebook fails;
- a submission whose kernel dies is removed and later exports as 0.0, the same
  as a genuine zero;
- when ``helpers`` cannot be imported, every graded cell fails and every
  learner gets 0, which looks like a class that did nothing.

Command line (run from the course root, where nbgrader_config.py is)::

    python -m coursetools.grading release              # solutions/ -> notebooks/
    python -m coursetools.grading autograde [LESSON]   # grading/submitted/<student>/<lesson>/
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
        "graded"             the notebook ran to the end; ``score`` is its mark
        "timed out"          a cell, or the whole notebook, ran past its time limit and was stopped
        "kernel died"        the notebook crashed Python (or hit the memory limit); nbgrader could not grade it
        "refused"            nbgrader would not grade the notebook; ``detail`` has its reason
        "helpers missing"    ``import helpers`` failed: an environment problem, not the learner's
        "setup failed"       the locked setup cell failed in this notebook only (it imports in a clean Python)
        "unreadable"         the submitted file is not a valid notebook (truncated, hand-edited JSON)
        "suspicious"         the learner's code touches the checks, patches modules or IPython: look at it
        "needs manual grade" nbgrader's gradebook says a person must grade some cell
        "extra notebook"     graded, but another notebook was submitted beside the expected one
    Every status but "graded" needs a person; ``score`` is then nbgrader's score for a
    person to confirm, or None where there is none to trust.
    """

    student: str
    lesson: str
    status: str
    score: float | None
    max_score: float
    detail: str = ""
    reasons: tuple[str, ...] = ()  # every finding, one line each (detail is the first)
    sandboxed: bool | None = None  # whether the kernel ran in bubblewrap's sandbox (None: not run)
    # graded cells the grader also ran in its own process, with the learner's functions called in the kernel, and
    # that passed there (coursetools.grading.verify): their points do not rest on the kernel's word
    verified: tuple[str, ...] = ()

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


def _error_outputs(notebook: nbformat.NotebookNode, locked_only: bool = False) -> list[dict]:
    def wanted(cell) -> bool:
        meta = cell.metadata.get("nbgrader", {})
        return not locked_only or (meta.get("locked") and not meta.get("grade"))

    return [o for c in notebook.cells if c.cell_type == "code" and wanted(c)
            for o in c.get("outputs", []) if o.output_type == "error"]


def classify(notebook: nbformat.NotebookNode | None) -> tuple[str, str]:
    """(status, detail) of an autograded notebook; None means nbgrader produced none.

    Only an import error in a locked cell (the setup cell every learner has) says
    ``helpers`` is missing: the same error in a learner's own cell is their mistake.
    """
    if notebook is None:
        return "kernel died", "nbgrader could not execute the notebook (the kernel died or it would not run)"
    for error in _error_outputs(notebook, locked_only=True):
        if error.ename in ("ModuleNotFoundError", "ImportError") and "helpers" in error.evalue:
            return "helpers missing", f"{error.ename}: {error.evalue}"
    for error in _error_outputs(notebook):
        if error.ename in ("CellTimeoutError", "NotebookTimeoutError") or "Timeout" in error.ename:
            return "timed out", "a cell ran past the time limit and was interrupted"
    return "graded", ""


_warned_before_grading = False


def _warn_before_grading() -> None:
    global _warned_before_grading
    from coursetools.grading import sandbox

    if not _warned_before_grading:
        warning = sandbox.kernel_user_warning() if sandbox.sandboxed() else sandbox.unsandboxed_warning()
        if warning:
            _warned_before_grading = True
            print(warning, file=sys.stderr)


def autograde(
    lesson: str,
    course_root: Path = REPO_ROOT,
    students: list[str] | None = None,
    overrides: Config | None = None,
) -> list[SubmissionResult]:
    """Autograde every submission of ``lesson`` and say what happened to each.

    Steps:
        1. Read each submitted folder: an unreadable notebook, a missing or renamed
           one, or an extra one beside it is noted; the learner's cells are scanned
           (:mod:`coursetools.grading.scan`).
        2. Run nbgrader's autograde (in the sandbox: :mod:`coursetools.grading.autograder`).
        3. Classify the autograded notebook, with nbgrader's own log for the reason
           when it refused, and what the grader's guard found in the kernel.
        4. Read the score, and whether a cell needs manual grading, from the gradebook.

    Raises:
        GradingError: when the locked setup cell could not import ``helpers`` and a
            clean Python cannot either, because then every score is a meaningless 0.
    """
    from coursetools.grading import autograder, scan

    _warn_before_grading()
    api = _api(course_root, overrides)
    submitted = Path(api.coursedir.root) / api.coursedir.submitted_directory
    source_dir = Path(api.coursedir.root) / api.coursedir.source_directory / lesson
    students = students or sorted(p.parent.name for p in submitted.glob(f"*/{lesson}"))
    expected = _notebook_names(api.coursedir.db_url, lesson)
    results = []
    for student in students:
        folder = submitted / student / lesson
        unreadable = _unreadable(folder)
        if unreadable:
            _, max_score = _gradebook_score(api.coursedir.db_url, lesson, student)
            results.append(SubmissionResult(student, lesson, "unreadable", None, max_score, unreadable, (unreadable,)))
            continue
        present = sorted(p.stem for p in folder.glob("*.ipynb"))
        extra = [f"{name}.ipynb" for name in present if name not in expected]
        reasons = []
        for name in expected:
            if name in present:
                source = source_dir / f"{name}.ipynb"
                reasons += [f"suspicious: {r}" for r in scan.scan_file(folder / f"{name}.ipynb",
                                                                        source if source.exists() else None)]
        autograder.KERNEL_START_ERROR.clear()
        outcome = api.autograde(lesson, student, force=True, create=True)
        if autograder.KERNEL_START_ERROR:
            raise GradingError("the grading kernel could not start, so no notebook can be graded (nothing the "
                               f"learner wrote had run yet). The kernel said:\n{autograder.KERNEL_START_ERROR[-1]}")
        graded_dir = Path(api.coursedir.root) / api.coursedir.autograded_directory / student / lesson
        notebooks = [graded_dir / f"{name}.ipynb" for name in expected if (graded_dir / f"{name}.ipynb").exists()]
        notes = [autograder.NOTES.pop(str(p.resolve()), {}) for p in notebooks] if outcome["success"] else []
        status, detail = "graded", ""
        if not outcome["success"] or not notebooks:
            status, detail = _refusal(outcome.get("log") or "", expected, present)
        else:
            for path, note in zip(notebooks, notes):
                status, detail = classify(nbformat.read(path, as_version=4))
                if status == "helpers missing" and _imports_cleanly(nbformat.read(path, as_version=4)):
                    status, detail = "setup failed", (f"the locked setup cell failed ({detail}) in this notebook "
                                                       "only: it imports in a clean Python, so an earlier cell broke it")
                if note.get("timed_out"):
                    status, detail = "timed out", "the notebook ran past its whole-notebook time limit and was stopped"
                reasons += [f"suspicious: {p}" for p in note.get("problems", [])]
                # only noted: honest work the grader's own run cannot repeat (a model of the learner's own class)
                reasons += [f"judged by the kernel's run alone: {k}" for k in note.get("kernel_only", [])]
                if note.get("output_truncated"):
                    reasons.append("its output passed the grader's size limit and was cut")
                if status != "graded":
                    break
        reasons += _nbgrader_warnings(outcome.get("log") or "")
        score, max_score = _gradebook_score(api.coursedir.db_url, lesson, student)
        manual = _needs_manual_grade(api.coursedir.db_url, lesson, student) if outcome["success"] else []
        if manual:
            reasons.append(f"nbgrader needs a person to grade cell(s) {', '.join(manual)}")
        if extra:
            reasons.append(f"also submitted {', '.join(extra)} (not graded): look at it")
        reasons = list(dict.fromkeys(reasons))
        # what needs a person, in order; a restored cell or cut output is only noted
        attention = [r for r in reasons if r.startswith(("suspicious", "nbgrader needs", "also submitted"))]
        if status == "graded" and attention:
            first = attention[0]
            status = ("suspicious" if first.startswith("suspicious") else
                      "needs manual grade" if first.startswith("nbgrader needs") else "extra notebook")
            detail = first.removeprefix("suspicious: ")
            reasons.remove(first)
            reasons.insert(0, first)
        elif status == "refused" and attention and attention[0].startswith("suspicious"):
            detail = f"{attention[0].removeprefix('suspicious: ')} ({detail})"  # the cause, then nbgrader's words
        if status in ("kernel died", "refused", "helpers missing"):
            score = None  # nbgrader's 0 here would read as a genuine zero
        if status != "graded" and detail and not any(detail in r for r in reasons):
            reasons.insert(0, detail)
        sandboxed = notes[0].get("sandbox") == "bwrap" if notes and notes[0] else None
        verified = tuple(grade_id for note in notes for grade_id in note.get("verified", []))
        results.append(SubmissionResult(student, lesson, status, score, max_score, detail, tuple(reasons), sandboxed,
                                        verified))
    broken = [r for r in results if r.status == "helpers missing"]
    if broken:
        raise GradingError(
            f"`helpers` failed to import while grading {lesson} for {len(broken)} submission(s) "
            f"({broken[0].detail}). Every score would be 0: install the course (pip install -e .) "
            "in the environment nbgrader runs in, then grade again."
        )
    return results


def _notebook_names(db_url: str, lesson: str) -> list[str]:
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gradebook:
        return sorted(nb.name for nb in gradebook.find_assignment(lesson).notebooks)


def _needs_manual_grade(db_url: str, lesson: str, student: str) -> list[str]:
    """grade_ids of the cells the gradebook says a person must grade."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        try:
            submission = gradebook.find_submission(lesson, student)
        except MissingEntry:
            return []
        return [g.name for nb in submission.notebooks for g in nb.grades if g.needs_manual_grade]


def _imports_cleanly(notebook: nbformat.NotebookNode) -> bool:
    """Whether the modules the locked cells import load in a fresh Python (from an empty folder)."""
    import subprocess
    import tempfile

    from coursetools.grading.autograder import locked_names

    modules = sorted({m for m, _ in locked_names(notebook).values()})
    code = "import importlib\nfor m in %r:\n    importlib.import_module(m)" % (modules,)
    with tempfile.TemporaryDirectory() as empty:
        return subprocess.run([sys.executable, "-c", code], cwd=empty, capture_output=True).returncode == 0


# nbgrader's log lines that mean it changed or ignored part of a submission, in a person's words
_NBGRADER_WARNINGS = [
    (r"Cell with id '(.+)' exists multiple times", "suspicious: cell id {0} appears more than once (duplicated cell?)"),
    (r"Attribute '(points|locked|cell_type)' for cell (.+) has changed",
     "suspicious: the notebook's nbgrader metadata was edited (cell {1}'s {0}); nbgrader restored it"),
    (r"Missing grade cell (.+) encountered", "graded cell {0} was deleted or lost its metadata; nbgrader put it back"),
]


def _nbgrader_warnings(log: str) -> list[str]:
    import re

    found = []
    for pattern, text in _NBGRADER_WARNINGS:
        for match in re.finditer(pattern, log):
            found.append(text.format(*match.groups()))
    return list(dict.fromkeys(found))


def _refusal(log: str, expected: list[str], present: list[str]) -> tuple[str, str]:
    """(status, one line) for a notebook nbgrader did not grade, from its log."""
    import re

    if not any(name in present for name in expected):
        found = ", ".join(f"{p}.ipynb" for p in present)
        return "refused", f"no {' or '.join(n + '.ipynb' for n in expected)} in the submission (found {found}: renamed?)"
    if re.search(r"DeadKernelError|Kernel died", log):
        return "kernel died", "the kernel died (a crash, os._exit, or the memory limit)"
    if "partial credit cannot be greater" in log:
        return "refused", "a graded cell's output claimed more points than the cell is worth"
    if re.search(r"CellTimeoutError|TimeoutError|Timeout waiting", log):
        return "timed out", "a cell ran past its time limit and could not be interrupted"
    errors = re.findall(r"^\s*(\w+(?:Error|Exception)): (.+)$", log, flags=re.M)
    if errors:
        name, message = errors[-1]
        return "refused", f"nbgrader: {name}: {message.strip()[:200]}"
    lines = [line for line in log.splitlines() if line.startswith("[ERROR]") and "There was an error" not in line
             and "Please see" not in line]
    return "refused", (lines[-1].removeprefix("[ERROR] ") if lines else "nbgrader could not grade it")[:200]


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
        if r.sandboxed is False:  # every learner's code ran with the grader's rights: say so on its row
            note = f"UNSANDBOXED {note}"
        if r.needs_attention and len(r.reasons) > 1:
            note += f" (+{len(r.reasons) - 1} more: {'; '.join(r.reasons[1:3])})"
        lines.append(f"{r.student:<16} {r.lesson:<22} {score:>5} / {r.max_score:<3g}  {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grading")
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

