"""Grading a class in parallel, and the class report, on a small synthetic class.

The same synthetic class (coursetools.classroom.synthetic: solutions, blank release,
partial submissions, the tests' wrong answers, a crash, a truncated upload) is
graded twice, on two copies of the course: one submission at a time, and with
more workers than cores writing to one SQLite gradebook. Both must agree on
every status and score. The report's numbers are then checked against what
each learner's profile must produce, and its page is opened in headless Chromium.
"""

from __future__ import annotations

import csv
import math
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from coursetools import grading
from coursetools import report
from coursetools.results import course_id, gradebook_url
from coursetools.classroom import grade, synthetic

pytestmark = pytest.mark.slow
LESSONS = ["00_start_here", "01_tensors"]  # the warm-up and a cheap lesson keep this test short
SIZE = 8  # full, blank, partial, unreadable, crash, full, and two wrong answers per lesson
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def make_class(root: Path) -> dict[tuple[str, str], str]:
    grading.copy_course(root, ("solutions", "notebooks"), lessons=LESSONS)
    return synthetic.build_class(root, LESSONS, SIZE)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> tuple[Path, list[grading.SubmissionResult]]:
    root = tmp_path_factory.mktemp("serial")
    make_class(root)
    return root, grade.grade_class(root, LESSONS, jobs=1, progress=False)


@pytest.fixture(scope="module")
def parallel(tmp_path_factory) -> tuple[Path, list[grading.SubmissionResult], dict]:
    root = tmp_path_factory.mktemp("parallel")
    dealt = make_class(root)
    return root, grade.grade_class(root, LESSONS, jobs=3, progress=False), dealt


def test_parallel_grading_gives_the_serial_results(serial, parallel):
    (_, serial_results), (_, parallel_results, dealt) = serial, parallel
    assert len(serial_results) == len(parallel_results) == SIZE * len(LESSONS)
    table = grading.format_table(parallel_results)
    for s, p in zip(serial_results, parallel_results):
        assert (s.student, s.lesson, s.status, s.score, s.max_score) == (p.student, p.lesson, p.status, p.score, p.max_score), \
            f"serial:\n{grading.format_table(serial_results)}\nparallel:\n{table}"
    for r in parallel_results:
        expected = synthetic.expected_score(r.lesson, dealt[r.student, r.lesson], r.max_score)
        if expected is None:
            assert r.needs_attention and r.score is None, table
        elif math.isnan(expected):  # a wrong answer: graded, and loses points
            assert r.status == "graded" and r.score < r.max_score, table
        else:
            assert r.status == "graded" and r.score == expected, table


def test_gradebook_is_intact_after_concurrent_writes(parallel):
    from nbgrader.api import Gradebook

    root, results, _ = parallel
    db = root / "grading" / "gradebook.db"
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Gradebook(gradebook_url(root), course_id(root)) as gradebook:
        for r in results:
            if r.status == "graded":
                assert gradebook.find_submission(r.lesson, r.student).score == r.score
        assert sorted(s.id for s in gradebook.students) == sorted({r.student for r in results})


def test_shards_split_the_class_without_overlap():
    students = [synthetic.learner_name(i) for i in range(300)]
    for count in (1, 2, 3, 7):
        shards = [{s for s in students if grade.in_shard(s, (i, count))} for i in range(1, count + 1)]
        assert sum(len(shard) for shard in shards) == len(students) and set().union(*shards) == set(students)
        assert min(len(shard) for shard in shards) > len(students) / count / 2, "shards far from even"
    with pytest.raises(ValueError, match="i/n"):
        grade.parse_shard("2")
    with pytest.raises(ValueError, match="between 1 and n"):
        grade.parse_shard("4/3")


def test_normalize_groups_the_same_mistake():
    a = "to_fahrenheit([0.0, 100.0]): the ratio is upside down: multiply by 9/5, not 5/9"
    b = "to_fahrenheit([[-40.0, 37.0], [20.0, 25.5]]): the ratio is upside down: multiply by 9/5, not 5/9"
    assert report.normalize(a) == report.normalize(b)
    assert report.normalize("x should have dtype torch.float32") != report.normalize("x should have dtype torch.float64")
    assert report.normalize("at flat index 3 it is 35.6, expected -1e-05") == "at flat index # it is #, expected #"


def test_report_numbers(parallel):
    root, results, dealt = parallel
    data = report.collect(root, LESSONS, progress=False)
    for lesson in LESSONS:
        profiles = {student: p for (student, les), p in dealt.items() if les == lesson}
        graded = [r for r in results if r.lesson == lesson and r.status == "graded"]
        assert sorted(data.graded_scores(lesson)) == sorted(r.score for r in graded)
        solution = nbformat.read(root / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
        wrong = {w.name: w for w in synthetic.wrong_answers(solution)}
        partial = synthetic.tests_module(f"partial_submissions.lesson_{lesson}").WRONG_CELLS
        for summary in (e for e in data.exercises if e.lesson == lesson):
            assert summary.attempts == len(graded)
            # Who fails this exercise: blank learners, partial ones where it was replaced, wrong answers to it.
            failing = Counter("blank" if p == "blank" else "partial" if p == "partial" and summary.exercise in partial
                              else p if p.startswith("wrong:") and _exercise_of(wrong[p[6:]], solution) == summary.exercise
                              else "pass" for p in profiles.values() if p not in ("crash", "unreadable"))
            assert summary.passed == failing["pass"], summary
            messages = {example: count for _, count, example in summary.mistakes}
            if failing["blank"]:
                assert _count(messages, "is not written yet") == failing["blank"], summary.mistakes
            for name, answer in wrong.items():
                if _exercise_of(answer, solution) == summary.exercise and failing[f"wrong:{name}"]:
                    assert _count(messages, answer.expect) == failing[f"wrong:{name}"], (name, summary.mistakes)
        assert [e.pass_rate for e in data.exercises] == sorted(e.pass_rate for e in data.exercises), "worst first"
    attention = {(s.student, s.lesson): s.status for s in data.needing_a_person()}
    assert attention == {(s, les): {"crash": "kernel died", "unreadable": "unreadable"}[p]
                         for (s, les), p in dealt.items() if p in ("crash", "unreadable")}


def _exercise_of(answer: synthetic.WrongAnswer, solution) -> str:
    return next(grade_id for grade_id, cell in synthetic.solution_cells(solution).items()
                if f"def {answer.function}(" in cell.source)


def _count(messages: dict[str, int], fragment: str) -> int:
    """How many learners got a message saying ``fragment`` (the largest group that says it)."""
    return max((count for example, count in messages.items() if fragment in example), default=0)


def test_report_page_figures_and_csv(parallel, tmp_path):
    root, results, _ = parallel
    page = report.write_report(root, LESSONS, out=tmp_path, progress=False)
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == sorted([f"scores_{lesson}.png" for lesson in LESSONS] + ["pass_rate.png"])
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in pngs)
    text = page.read_text()
    assert "src=\"file:" not in text and text.count("data:image/png;base64,") == len(pngs), "figures must be embedded"
    rows = list(csv.DictReader((tmp_path / "scores.csv").open()))
    by_job = {(r["student_id"], r["assignment"]): r for r in rows}
    assert len(rows) == len(results)
    for r in results:
        row = by_job[r.student, r.lesson]
        assert row["score"] == ("needs a person" if r.needs_attention else f"{r.score:g}"), row
        assert row["status"] == r.status
    wide = {row["student_id"]: row for row in csv.DictReader((tmp_path / "gradebook_import.csv").open())}
    assert len(wide) == len({r.student for r in results})
    for r in results:
        cell = next(v for k, v in wide[r.student].items() if k.startswith(f"{r.lesson} (of "))
        assert cell == ("" if r.needs_attention else f"{r.score:g}"), (r, wide[r.student])
        assert (f"{r.lesson} ({r.status})" in wide[r.student]["needs a person"]) == r.needs_attention
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs the Debian package `chromium`")
        pytest.skip("Chromium is not installed (apt-get install chromium) - CI runs this test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            view = browser.new_page()
            view.goto(page.as_uri())
            view.wait_for_load_state("load")
            widths = view.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
            heading = view.inner_text("h1")
        finally:
            browser.close()
    assert heading == "Class report"
    assert len(widths) == len(pngs) and all(w > 0 for w in widths), widths


def test_grade_command_shows_progress_and_exit_code(parallel, monkeypatch, capsys):
    root, _, dealt = parallel
    unreadable = next(s for (s, les), p in dealt.items() if les == LESSONS[0] and p == "unreadable")
    monkeypatch.chdir(root)
    code = grade.main(["grade", LESSONS[0], "--jobs", "2", "--students", "learner001", unreadable])
    captured = capsys.readouterr()
    assert code == 1 and "need a person" in captured.out
    assert f"lesson {LESSONS[0]}" in captured.err and "learner learner001" in captured.err, "no progress bar"


def test_report_survives_files_a_learners_kernel_planted(parallel):
    """A kernel can write into its autograded folder: a notebook that is not JSON, or one with made-up failures."""
    root, results, _ = parallel
    graded = next(r for r in results if r.status == "graded")
    folder = root / "grading" / "autograded" / graded.student / graded.lesson
    planted = [folder / "zz_bad.ipynb", folder / "zz_fake.ipynb"]
    planted[0].write_text("{not json")
    fake = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "error", ename="CheckError", evalue="PLANTED MESSAGE", traceback=[])], metadata={
        "nbgrader": {"grade": True, "grade_id": "planted_tests", "points": 1}})])
    nbformat.write(fake, planted[1])
    try:
        data = report.collect(root, LESSONS, progress=False)
    finally:
        for path in planted:
            path.unlink()
    assert not any("PLANTED" in example for e in data.exercises for _, _, example in e.mistakes)


def test_nbgrader_export_says_needs_a_person(parallel, tmp_path):
    """nbgrader export (the course's plugin) writes "needs a person", not 0.0, where grading did not finish."""
    from nbgrader.api import Gradebook

    from coursetools.export import CourseCsvExport

    root, results, _ = parallel
    out = tmp_path / "grades.csv"
    with Gradebook(gradebook_url(root), course_id(root)) as gradebook:
        CourseCsvExport(to=str(out), course_root=str(root)).export(gradebook)
    rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(out.open())}
    for result in results:
        row = rows[result.student, result.lesson]
        if result.needs_attention:
            assert row["score"] == f"needs a person: {result.status}", row
        else:
            assert float(row["score"]) == result.score, row


@pytest.mark.parametrize("platform, names", [
    ("canvas", {"doejane": "doejane_12345_67890_{lesson}.ipynb", "roeric": "roeric_LATE_222_333_{lesson}-1.ipynb"}),
    ("moodle", {"123456": "Jane Doe_123456_assignsubmission_file_/{lesson}.ipynb",
                "654321": "Ric Roe_654321_assignsubmission_file_{lesson}.ipynb"}),
])
def test_collect_a_learning_platforms_download(tmp_path, platform, names):
    """A Canvas or Moodle "download all submissions" zip ends up as grading/submitted/<learner>/<lesson>/."""
    import zipfile

    from coursetools.classroom.collect import collect

    lesson = LESSONS[0]
    root = tmp_path / "course"
    root.mkdir()
    grading.copy_course(root, ("solutions", "notebooks"), lessons=[lesson])
    notebook = (root / "notebooks" / lesson / f"{lesson}.ipynb").read_bytes()
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in names.values():
            zipped.writestr(name.format(lesson=lesson), notebook)
        zipped.writestr("stray_readme.txt", "not a submission")
    assert collect(root, lesson, [archive], platform) == sorted(names)
    for learner in names:
        assert (root / "grading" / "submitted" / learner / lesson / f"{lesson}.ipynb").read_bytes() == notebook
