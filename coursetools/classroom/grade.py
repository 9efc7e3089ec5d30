"""Autograde a class: many submissions at once, one shard per machine, one shared gradebook.

Each (learner, lesson) submission is one job for :func:`coursetools.grading.autograde`.
Jobs run in worker processes (``jobs`` of them, one per core by default); the
results are the same as grading one after another because every job only
touches its own rows of the gradebook and its own ``grading/autograded/<learner>/<lesson>/``.

The gradebook stays consistent under concurrent writers because:

1. the lessons and the learners are written to the gradebook once, by this
   process, before any worker starts (nbgrader's autograde would otherwise
   create a learner's row from two workers at once and one would fail);
2. each worker then writes only its own submission's rows, in nbgrader's own
   short transactions; SQLite serialises them with its file lock (we give
   writers 60 s to get it instead of sqlite3's 5 s), PostgreSQL with row locks.

Several machines share one PostgreSQL gradebook through nbgrader's ``db_url``;
each grades the learners of its shard (``--shard i/n``, learners split by a hash
of their name, so every machine agrees without talking to the others).

Every result is also written to ``grading/results/<lesson>/<learner>.json``
(status and reason, which the gradebook has no place for) for ``report``.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import tempfile
import zlib
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from tqdm.auto import tqdm
from traitlets.config import Config

from coursetools import grading
from coursetools.grading import GradingError, SubmissionResult
from coursetools.results import course_id, gradebook_url, save_result

# A job that crashed the grader itself (not the learner's notebook) is reported with this status.
GRADER_FAILED = "grader failed"


def default_jobs() -> int:
    """One job per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_shard(text: str) -> tuple[int, int]:
    """"2/3" -> (2, 3): this machine grades the second of three shards."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes i/n, for example 1/3, not {text!r}") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text}: i must be between 1 and n")
    return index, count


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    """Whether ``student`` belongs to ``shard`` (None: the whole class).

    A stable hash of the name, not the position in a sorted list, so that machines
    whose copies of grading/submitted differ (a late upload) still agree.
    """
    if shard is None:
        return True
    index, count = shard
    return zlib.crc32(student.encode()) % count == index - 1


def submissions(course_root: Path, lessons: list[str], shard: tuple[int, int] | None = None,
                students: list[str] | None = None) -> list[tuple[str, str]]:
    """(student, lesson) of every submission to grade, lesson by lesson, students sorted."""
    submitted = course_root / "grading" / "submitted"
    jobs = []
    for lesson in lessons:
        found = sorted(p.parent.name for p in submitted.glob(f"*/{lesson}") if p.is_dir())
        jobs += [(s, lesson) for s in found if in_shard(s, shard) and (students is None or s in students)]
    return jobs


def prepare_gradebook(course_root: Path, lessons: list[str], students: list[str], overrides: Config) -> dict[str, float]:
    """Put the lessons and the learners in the gradebook before any worker writes to it.

    A lesson missing from the gradebook (a fresh PostgreSQL database, or a course
    that was never released here) is added with nbgrader's generate_assignment,
    released into a temporary folder so that notebooks/ is not touched.

    Returns:
        Each lesson's maximum score.
    """
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    url, course = overrides.CourseDirectory.db_url, course_id(course_root)
    with Gradebook(url, course) as gradebook:
        known = {a.name for a in gradebook.assignments}
    missing = [lesson for lesson in lessons if lesson not in known]
    if missing:
        with tempfile.TemporaryDirectory() as release:
            config = Config(overrides)
            config.CourseDirectory.release_directory = release
            config = grading.load_config(course_root, config)
            api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
            for lesson in missing:
                result = api.generate_assignment(lesson, force=True, create=True)
                if not result["success"]:
                    raise GradingError(f"nbgrader could not add {lesson} to the gradebook:\n{result.get('log')}")
    with Gradebook(url, course) as gradebook:
        for student in students:
            gradebook.update_or_create_student(student)
        return {lesson: gradebook.find_assignment(lesson).max_score for lesson in lessons}


def grade_one(course_root: str, student: str, lesson: str, overrides: Config) -> SubmissionResult:
    """Autograde one submission; a crash of the grader itself becomes a result that needs a person."""
    try:
        return grading.autograde(lesson, Path(course_root), [student], overrides)[0]
    except GradingError:
        raise
    except Exception as error:  # the grader broke on this submission: report it, grade the others
        return SubmissionResult(student, lesson, GRADER_FAILED, None, 0.0, f"{type(error).__name__}: {error}"[:300])


def _worker_init(threads: int) -> None:
    # Kernels inherit this: jobs x threads stays within the cores instead of oversubscribing them.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    grading._warned_before_grading = True  # grade_class said it once, before the progress bar


def grade_class(
    course_root: Path,
    lessons: list[str] | None = None,
    *,
    jobs: int | None = None,
    shard: tuple[int, int] | None = None,
    students: list[str] | None = None,
    db_url: str | None = None,
    overrides: Config | None = None,
    progress: bool = True,
) -> list[SubmissionResult]:
    """Autograde every submission of ``lessons`` (default: all) in ``jobs`` processes.

    Steps:
        1. List the submissions of this shard, lesson by lesson.
        2. Put the lessons and learners in the gradebook (one writer).
        3. Grade: in this process when ``jobs`` is 1, else in a pool of ``jobs``
           worker processes, never more jobs in flight than workers so that the
           progress bar names the learners and lessons being graded now.
        4. Save each result next to the gradebook, return them in the serial order.

    Raises:
        GradingError: ``helpers`` could not be imported (every score would be 0);
            the remaining jobs are cancelled.
    """
    course_root = Path(course_root).resolve()
    lessons = lessons or grading.lessons(course_root)
    jobs = max(1, jobs or default_jobs())
    config = Config(overrides or Config())
    config.CourseDirectory.db_url = gradebook_url(course_root, db_url)
    todo = submissions(course_root, lessons, shard, students)
    jobs = min(jobs, max(1, len(todo)))
    max_scores = prepare_gradebook(course_root, lessons, sorted({s for s, _ in todo}), config)
    grading._warn_before_grading()  # before grading starts, not inside the progress bar
    results: dict[tuple[str, str], SubmissionResult] = {}
    bar = tqdm(total=len(todo), desc="grading", unit="submission", disable=not progress, file=sys.stderr)

    def finish(job: tuple[str, str], result: SubmissionResult) -> None:
        if result.status == GRADER_FAILED:
            result = dataclasses.replace(result, max_score=max_scores.get(job[1], 0.0))
        results[job] = result
        save_result(course_root, result)
        bar.update()

    try:
        if jobs == 1:
            for student, lesson in todo:
                bar.set_postfix_str(f"learner {student}, lesson {lesson}")
                finish((student, lesson), grade_one(str(course_root), student, lesson, config))
        else:
            threads = max(1, default_jobs() // jobs)
            pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_worker_init, initargs=(threads,))
            with pool:
                pending, running = list(reversed(todo)), {}
                while pending or running:
                    while pending and len(running) < jobs:
                        job = pending.pop()
                        running[pool.submit(grade_one, str(course_root), *job, config)] = job
                    bar.set_postfix_str("; ".join(f"learner {s}, lesson {lesson}" for s, lesson in running.values()))
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        finish(running.pop(future), _result(future, pool, running))
    finally:
        bar.close()
    return [results[job] for job in todo]


def _result(future: Future, pool: ProcessPoolExecutor, running: dict) -> SubmissionResult:
    """A job's result; a broken grading run (helpers missing, a worker killed) stops every job."""
    try:
        return future.result()
    except (GradingError, BrokenProcessPool) as error:
        for other in running:
            other.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(error, BrokenProcessPool):
            raise GradingError("a grading worker process died (out of memory?): grade again with fewer --jobs") from error
        raise


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m coursetools.classroom")
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser("grade", help="autograde grading/submitted/*/<lesson> in parallel")
    grade.add_argument("lessons", nargs="*")
    grade.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: one per core)")
    grade.add_argument("--shard", type=parse_shard, help="grade only shard i of n, e.g. 2/3 (one per machine)")
    grade.add_argument("--db-url", help="gradebook, e.g. postgresql://user@host/gradebook (default: nbgrader_config.py's)")
    grade.add_argument("--timeout", type=int, help="seconds a cell may run (default: nbgrader_config.py's)")
    grade.add_argument("--students", nargs="+", help="grade only these learners")
    setup = sub.add_parser("setup", help="add the lessons to the gradebook (run once before the shards start)")
    setup.add_argument("lessons", nargs="*")
    setup.add_argument("--db-url")
    report = sub.add_parser("report", help="write the class report (HTML, PNG figures, CSV)")
    report.add_argument("lessons", nargs="*")
    report.add_argument("--db-url")
    report.add_argument("--out", type=Path, help="folder for the report (default: grading/report)")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if not (root / "nbgrader_config.py").exists():
        print("error: run this from the course root (where nbgrader_config.py is)", file=sys.stderr)
        return 2
    lessons = args.lessons or grading.lessons(root)
    try:
        if args.command == "setup":
            config = Config()
            config.CourseDirectory.db_url = gradebook_url(root, args.db_url)
            prepare_gradebook(root, lessons, [], config)
            print(f"gradebook has {len(lessons)} lesson(s): {', '.join(lessons)}")
            return 0
        if args.command == "report":
            from coursetools import report as class_report

            written = class_report.write_report(root, lessons, db_url=args.db_url, out=args.out)
            print(f"class report: {written}")
            return 0
        overrides = Config()
        if args.timeout:
            overrides.Execute.timeout = args.timeout
        results = grade_class(root, lessons, jobs=args.jobs, shard=args.shard, students=args.students,
                              db_url=args.db_url, overrides=overrides)
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(grading.format_table(results))
    attention = [r for r in results if r.needs_attention]
    if attention:
        print(f"\n{len(attention)} submission(s) need a person to look at them (not graded as 0).")
    return 1 if attention else 0
