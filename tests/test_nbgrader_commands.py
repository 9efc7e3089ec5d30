"""nbgrader's own commands on a fresh clone of the course, its feedback, and what a failing command leaves.

A fresh clone has no grading/ folder and no activated virtual environment: the
commands below run this environment's ``nbgrader`` with a PATH that does not
hold it, from the root of a copy of every file git would check out.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from coursetools import grading
from helpers.data import REPO_ROOT
from tests.test_roundtrip import submit

pytestmark = pytest.mark.slow
NBGRADER = str(Path(sys.executable).parent / "nbgrader")
LESSON = "00_start_here"


def fresh_clone(dest: Path) -> Path:
    """The files a clone of this checkout holds: tracked ones and new ones not ignored (about to be committed)."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        source = REPO_ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest / "grading").exists()
    return dest


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` from the course root, without the virtual environment on PATH."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    return subprocess.run([NBGRADER, *args], cwd=course, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    return fresh_clone(tmp_path_factory.mktemp("clone"))


def test_nbgrader_commands_work_on_a_fresh_clone(clone: Path):
    committed = (clone / "notebooks" / LESSON / f"{LESSON}.ipynb").read_bytes()
    generated = nbgrader(clone, "generate_assignment", LESSON, "--force")
    assert generated.returncode == 0, generated.stderr[-3000:]
    assert (clone / "grading" / "gradebook.db").exists()
    assert json.loads((clone / "notebooks" / LESSON / f"{LESSON}.ipynb").read_bytes()) == json.loads(committed), \
        "generating the committed release again changes nothing"
    released = nbgrader(clone, "release_assignment", LESSON)
    assert released.returncode == 0, released.stderr[-3000:]
    assert (clone / "grading" / "exchange" / "pytorch-course" / "outbound" / LESSON / f"{LESSON}.ipynb").exists()
    submit(clone, "alice", LESSON)
    for command in (["autograde", LESSON], ["generate_feedback", LESSON], ["export"]):
        result = nbgrader(clone, *command)
        assert result.returncode == 0, f"nbgrader {' '.join(command)}:\n{result.stderr[-3000:]}"
    assert "alice" in (clone / "grades.csv").read_text()
    with sqlite3.connect(clone / "grading" / "gradebook.db") as db:
        assert db.execute("select count(*) from assignment").fetchone()[0] >= 1


def test_a_failing_generate_keeps_the_committed_notebooks(clone: Path):
    """nbgrader deletes its output folder before converting and when converting fails: notebooks/ must survive."""
    lesson = "01_tensors"
    learner = clone / "notebooks" / lesson / f"{lesson}.ipynb"
    before = learner.read_bytes()
    source = clone / "solutions" / lesson / f"{lesson}.ipynb"
    good_source = source.read_bytes()
    nb = nbformat.read(source, as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    graded[1].metadata["nbgrader"]["grade_id"] = graded[0].metadata["nbgrader"]["grade_id"]  # a duplicate grade id
    nbformat.write(nb, source)
    try:
        broken_source = nbgrader(clone, "generate_assignment", lesson, "--force")
    finally:
        source.write_bytes(good_source)
    assert broken_source.returncode != 0
    assert learner.read_bytes() == before, "a failing generate_assignment deleted or changed notebooks/"

    gradebook = clone / "grading" / "gradebook.db"
    gradebook.unlink(missing_ok=True)
    gradebook.mkdir()  # the database cannot be opened: "There was an error accessing the nbgrader database"
    try:
        broken_database = nbgrader(clone, "generate_assignment", lesson, "--force")
    finally:
        gradebook.rmdir()
    assert broken_database.returncode != 0 and "database" in broken_database.stderr
    assert learner.read_bytes() == before, "a failing generate_assignment deleted or changed notebooks/"
    again = nbgrader(clone, "generate_assignment", lesson, "--force")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(learner.read_bytes()) == json.loads(before)


WRONG = {
    "forgot": ("def to_fahrenheit(celsius):\n    return celsius * 9 / 5\n", "you forgot to add 32"),
    "crashes": ("def to_fahrenheit(celsius):\n    offset = '32'\n    return celsius * 9 / 5 + offset\n",
                "raised TypeError"),
}


def test_feedback_shows_the_short_check_message(tmp_path: Path):
    """nbgrader's feedback HTML shows a failed check as its one message, not a traceback through helpers/."""
    course = grading.copy_course(tmp_path, lessons=[LESSON])
    grading.release(course, [LESSON])
    for student, (code, _) in WRONG.items():
        submit(course, student, LESSON, {"ex_to_fahrenheit": code})
    results = grading.autograde(LESSON, course)
    assert all(r.status == "graded" and r.score == 0 for r in results), grading.format_table(results)
    api = grading._api(course)
    assert api.generate_feedback(LESSON)["success"]
    for student, (_, message) in WRONG.items():
        html = (course / "grading" / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
        assert message in html and "✘" in html, f"{student}: the check's message is missing from the feedback"
        for traceback_sign in ("/helpers/", "site-packages", "Traceback (most recent call last)", "File &quot;"):
            assert traceback_sign not in html, f"{student}: the feedback shows a traceback ({traceback_sign})"
        graded = nbformat.read(course / "grading" / "autograded" / student / LESSON / f"{LESSON}.ipynb", as_version=4)
        errors = [o for c in graded.cells for o in c.get("outputs", []) if o.output_type == "error"]
        assert errors and all(e.ename == "CheckError" for e in errors), "a failed check is still an error"
    crashed = (course / "grading" / "feedback" / "crashes" / LESSON / f"{LESSON}.html").read_text()
    assert "return celsius * 9 / 5 + offset" in crashed and "line 3" in crashed, "the learner's own line is shown"
