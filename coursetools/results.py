"""Where grading's results live, and how to read them: the one module grading and the class report share.

- the gradebook's address (:func:`gradebook_url`) and the course's id in it (:func:`course_id`);
- one JSON file per graded submission under ``grading/results/<lesson>/<student>.json``
  (:func:`save_result` writes it when a submission is graded; :func:`load_results` reads them all).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from coursetools import grading
from coursetools.grading import SubmissionResult

# Seconds a SQLite writer waits for another's lock before failing (sqlite3's default is 5).
SQLITE_LOCK_SECONDS = 60


def gradebook_url(course_root: Path, db_url: str | None = None) -> str:
    """The gradebook to use: ``db_url``, else nbgrader_config.py's ``CourseDirectory.db_url``.

    A relative SQLite path is made absolute (workers may run anywhere) and SQLite
    writers are given SQLITE_LOCK_SECONDS to wait for each other.
    """
    if db_url is None:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course_root)).load_config()
        db_url = config.CourseDirectory.db_url if "db_url" in config.CourseDirectory else "sqlite:///gradebook.db"
    if db_url.startswith("sqlite:///"):
        path, _, query = db_url.removeprefix("sqlite:///").partition("?")
        if not Path(path).is_absolute():
            path = str(course_root / path)
        if "timeout=" not in query:
            query = "&".join(filter(None, [query, f"timeout={SQLITE_LOCK_SECONDS}"]))
        db_url = f"sqlite:///{path}?{query}"
    return db_url


def course_id(course_root: Path) -> str:
    return grading.load_config(course_root).CourseDirectory.course_id


def results_path(course_root: Path, lesson: str, student: str) -> Path:
    return course_root / "grading" / "results" / lesson / f"{student}.json"


def save_result(course_root: Path, result: SubmissionResult) -> None:
    path = results_path(course_root, result.lesson, result.student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(result), indent=1))


def load_results(course_root: Path) -> dict[tuple[str, str], dict]:
    """{(student, lesson): saved result} of every submission graded on this machine."""
    return {(d["student"], d["lesson"]): d for d in
            (json.loads(p.read_text()) for p in sorted((course_root / "grading" / "results").glob("*/*.json")))}
