"""A synthetic class for the grading benchmark and tests, built from what the tests already have.

Every learner submits every lesson, as one of these profiles:

- ``full``:       the release with every solution cell from solutions/ (full marks);
- ``blank``:      the release as handed out (0);
- ``partial``:    tests/partial_submissions/lesson_<lesson>.py's wrong cells (its EXPECTED_SCORE);
- ``wrong:<name>``: the solutions with one function replaced by a wrong answer from
  tests/wrong_answers/<topic>.py, the same code the check must reject by message;
- ``crash``:      the first solution cell kills Python (nbgrader cannot grade it: needs a person);
- ``unreadable``: a truncated upload (not a valid notebook: needs a person).

Profiles are dealt in a fixed order, so the same size always makes the same class.
It reads the repository's ``tests`` package (partial submissions, wrong answers).
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import nbformat

from helpers.data import REPO_ROOT

FIRST_PROFILES = ["full", "blank", "partial", "unreadable", "crash"]


@dataclass(frozen=True)
class WrongAnswer:
    """A wrong answer from tests/wrong_answers and the message fragment its check must say."""

    name: str
    function: str  # the learner's function it replaces
    source: str
    expect: str


def tests_module(name: str) -> ModuleType:
    """``tests.<name>`` from this repository, wherever Python was started."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.append(str(REPO_ROOT))
    return importlib.import_module(f"tests.{name}")


def solution_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def check_topic(solution: nbformat.NotebookNode) -> str | None:
    """The helpers.checks module a lesson uses (``from helpers.checks import start as check`` -> "start")."""
    for cell in solution.cells:
        match = re.search(r"from helpers\.checks import (\w+)", cell.source)
        if match:
            return match.group(1)
    return None


def wrong_answers(solution: nbformat.NotebookNode) -> list[WrongAnswer]:
    """The lesson's wrong answers that can stand in for a learner's function in the notebook.

    Only plain functions that need nothing but ``torch`` from their module qualify,
    so that the notebook fails the check for the same reason the test does.
    """
    topic = check_topic(solution)
    try:
        module = tests_module(f"wrong_answers.{topic}")
    except ImportError:
        return []
    Reject = tests_module("wrong_answers").Reject

    found = []
    for case in module.CASES:
        answer = case.answer
        if not isinstance(case, Reject) or not inspect.isfunction(answer) or answer.__name__ == "<lambda>":
            continue
        if set(inspect.getclosurevars(answer).globals) - {"torch"}:
            continue
        function = case.check.__name__.removeprefix("check_")
        defining = [c for c in solution_cells(solution).values() if re.search(rf"^def {function}\(", c.source, re.M)]
        if defining:
            found.append(WrongAnswer(answer.__name__, function, inspect.getsource(answer), case.expect))
    return found


def profiles(lesson: str, solution: nbformat.NotebookNode, size: int) -> list[str]:
    """The profile of each of ``size`` learners for ``lesson``."""
    wrong = [f"wrong:{w.name}" for w in wrong_answers(solution)]
    rest = itertools.cycle(["full", *wrong, "partial"] if wrong else ["full", "partial", "blank"])
    return (FIRST_PROFILES + [next(rest) for _ in range(max(0, size - len(FIRST_PROFILES)))])[:size]


def learner_name(index: int) -> str:
    return f"learner{index + 1:03d}"


def submission(course_root: Path, lesson: str, profile: str) -> str:
    """The text of the notebook a learner with ``profile`` submits for ``lesson``."""
    release = nbformat.read(course_root / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    solution = nbformat.read(course_root / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    answers = solution_cells(solution)
    cells = solution_cells(release)
    if profile != "blank":
        for grade_id, cell in cells.items():
            cell.source = answers[grade_id].source
    if profile == "partial":
        spec = tests_module(f"partial_submissions.lesson_{lesson}")
        for grade_id, source in spec.WRONG_CELLS.items():
            cells[grade_id].source = source
    elif profile == "crash":
        next(iter(cells.values())).source = "import os\nos._exit(1)\n"
    elif profile.startswith("wrong:"):
        wrong = next(w for w in wrong_answers(solution) if w.name == profile.removeprefix("wrong:"))
        cell = next(c for c in cells.values() if re.search(rf"^def {wrong.function}\(", c.source, re.M))
        # The learner's own (wrong) version replaces the right one under the same name.
        cell.source += f"\n\n\n{wrong.source}\n{wrong.function} = {wrong.name}\n"
    text = nbformat.writes(release)
    return text[:500] if profile == "unreadable" else text


def build_class(course_root: Path, lessons: list[str], size: int = 20) -> dict[tuple[str, str], str]:
    """Write ``size`` learners' submissions of ``lessons`` into grading/submitted/.

    Returns:
        {(learner, lesson): profile}
    """
    dealt = {}
    for lesson in lessons:
        solution = nbformat.read(course_root / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
        for index, profile in enumerate(profiles(lesson, solution, size)):
            folder = course_root / "grading" / "submitted" / learner_name(index) / lesson
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{lesson}.ipynb").write_text(submission(course_root, lesson, profile))
            dealt[learner_name(index), lesson] = profile
    return dealt


def expected_score(lesson: str, profile: str, max_score: float) -> float | None:
    """The score a profile must get, where it is known exactly (None: needs a person; nan: a wrong answer)."""
    if profile == "full":
        return max_score
    if profile == "blank":
        return 0.0
    if profile == "partial":
        return tests_module(f"partial_submissions.lesson_{lesson}").EXPECTED_SCORE
    if profile in ("crash", "unreadable"):
        return None
    return float("nan")
