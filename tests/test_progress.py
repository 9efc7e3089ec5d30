"""`make progress` / helpers.progress: the blank release, the solutions and a partial submission.

Each runs real notebooks the way nbgrader's Validate does, on copies: the
learner's files must come out byte for byte unchanged.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from helpers import progress
from helpers.data import REPO_ROOT
from tests.test_roundtrip import solution_cells

pytestmark = pytest.mark.slow
LESSONS = sorted(p.parent.name for p in (REPO_ROOT / "notebooks").glob("*/*.ipynb"))
QUICK = ["00_start_here", "01_tensors"]  # the solutions and partial runs: two quick lessons


def learner_folder(tmp_path: Path, lessons: list[str], source: str = "notebooks",
                   replacements: dict[str, dict[str, str]] | None = None) -> Path:
    """A notebooks/ folder as a learner has it: the release, or the release with solution cells filled in."""
    folder = tmp_path / "notebooks"
    for lesson in lessons:
        (folder / lesson).mkdir(parents=True)
        if source == "notebooks":
            shutil.copy(REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", folder / lesson)
            continue
        release = nbformat.read(REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
        answers = solution_cells(nbformat.read(REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4))
        wrong = (replacements or {}).get(lesson, {})
        for grade_id, cell in solution_cells(release).items():
            cell.source = wrong.get(grade_id, answers[grade_id].source)
        nbformat.write(release, folder / lesson / f"{lesson}.ipynb")
    return folder


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def points(lesson: str) -> float:
    nb = nbformat.read(REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    return sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in nb.cells)


def test_blank_release_is_all_not_attempted(tmp_path: Path):
    folder = learner_folder(tmp_path, LESSONS)
    before = snapshot(folder)
    results = progress.progress(folder=folder)
    assert snapshot(folder) == before, "progress must never change the learner's notebooks"
    assert sorted({r.lesson for r in results}) == LESSONS
    assert results and all(r.status == progress.NOT_ATTEMPTED and r.points == 0 for r in results), \
        progress.format_table(results)
    for lesson in LESSONS:
        assert sum(r.max_points for r in results if r.lesson == lesson) == points(lesson)


def test_solutions_all_pass(tmp_path: Path):
    results = progress.progress(folder=learner_folder(tmp_path, QUICK, source="solutions"))
    table = progress.format_table(results)
    assert all(r.status == progress.PASSED and r.points == r.max_points for r in results), table
    assert sum(r.points for r in results) == sum(points(lesson) for lesson in QUICK)
    assert f"{len(results)} passed, 0 failed, 0 not attempted" in table


def returns_none(solution_source: str) -> str:
    """A wrong answer for any function exercise: the solution, then the function redefined to return None."""
    name = re.search(r"^def (\w+)", solution_source, re.MULTILINE).group(1)
    return f"{solution_source}\n\ndef {name}(*args, **kwargs):\n    return None\n"


def test_partial_submission_exact_counts(tmp_path: Path):
    """Lesson 00 wrong, lesson 01 with one exercise left as the stub and one wrong, everything else right."""
    release = nbformat.read(REPO_ROOT / "notebooks" / "01_tensors" / "01_tensors.ipynb", as_version=4)
    answers = solution_cells(nbformat.read(REPO_ROOT / "solutions" / "01_tensors" / "01_tensors.ipynb", as_version=4))
    stub, wrong = list(solution_cells(release))[:2]
    replacements = {
        "00_start_here": {"ex_to_fahrenheit": "def to_fahrenheit(celsius):\n    return celsius * 9 / 5\n"},
        "01_tensors": {stub: solution_cells(release)[stub].source, wrong: returns_none(answers[wrong].source)},
    }
    results = progress.progress(folder=learner_folder(tmp_path, QUICK, "solutions", replacements))
    table = progress.format_table(results)
    by_name = {(r.lesson, r.name): r for r in results}
    fahrenheit = by_name[("00_start_here", "to_fahrenheit")]
    assert (fahrenheit.status, fahrenheit.points, fahrenheit.max_points) == ("failed", 0, 2), table
    assert "expected: [32.0, 212.0]" in fahrenheit.message  # progress shows the symptom only (the ladder's first rung)
    assert by_name[("01_tensors", stub.removeprefix("ex_"))].status == progress.NOT_ATTEMPTED, table
    failed = by_name[("01_tensors", wrong.removeprefix("ex_"))]
    assert failed.status == progress.FAILED and failed.points == 0 and "None" in failed.message, table
    exercises_01 = len([r for r in results if r.lesson == "01_tensors"])
    assert f"{exercises_01 - 2} passed, 2 failed, 1 not attempted" in table
    lost = sum(r.max_points for r in results if r.status != progress.PASSED)
    assert sum(r.points for r in results) == sum(points(lesson) for lesson in QUICK) - lost
    assert all(r.points == r.max_points for r in results if r.status == progress.PASSED)


def test_command_prints_the_table_and_saves_the_chart(tmp_path: Path, capsys):
    folder = learner_folder(tmp_path, ["00_start_here"])
    chart = tmp_path / "chart.png"
    assert progress.main(["--notebooks", str(folder), "--chart", str(chart), "00_start_here"]) == 0
    out = capsys.readouterr().out
    assert "to_fahrenheit" in out and "0 / 2" in out and "1 not attempted" in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_has_one_bar_per_lesson_and_status():
    results = [progress.Exercise("00_start_here", "a", "passed", 2, 2),
               progress.Exercise("01_tensors", "b", "failed", 1, 2, "wrong"),
               progress.Exercise("01_tensors", "c", "not attempted", 0, 3, "stub")]
    fig = progress.plot(results)
    ax = fig.axes[0]
    widths = {(c.get_label(), round(bar.get_y())): bar.get_width() for c in ax.containers for bar in c}
    assert widths[("passed", 0)] == 2 and widths[("passed", 1)] == 1
    assert widths[("failing", 1)] == 1 and widths[("not attempted", 1)] == 3


def test_not_measured_inside_nbgrader(monkeypatch, capsys):
    """Lesson 00 runs show_progress: under Validate or grading it must not run the course inside itself."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    progress.show_progress(["00_start_here"])
    assert "not measured" in capsys.readouterr().out
