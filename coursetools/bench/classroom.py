"""Benchmark grading a class: learners per minute one at a time vs in parallel.

Grades the same synthetic class (coursetools.classroom.synthetic) twice on a
temporary copy of the course, serially (1 job) and in parallel (``--jobs``,
default one per core), each into a fresh gradebook, checks that both gave every
submission the same status and score, and prints a table with the projected
time for 100 and 1,000 learners.

    python -m coursetools.bench --class [--learners 20] [--jobs N] [--lessons 00_start_here 01_tensors]
    (or: make bench-class)
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from coursetools import grading
from coursetools import results
from coursetools.classroom import grade, synthetic


def grade_fresh(root: Path, lessons: list[str], jobs: int) -> tuple[float, list[grading.SubmissionResult]]:
    """Seconds to grade every submission of ``lessons`` with ``jobs`` workers, from an empty gradebook."""
    shutil.rmtree(root / "grading" / "autograded", ignore_errors=True)
    shutil.rmtree(root / "grading" / "results", ignore_errors=True)
    (root / "grading" / "gradebook.db").unlink(missing_ok=True)
    grade.prepare_gradebook(root, lessons, [], _config(root))  # the lessons, as `make release` would have
    start = time.perf_counter()
    results = grade.grade_class(root, lessons, jobs=jobs)
    return time.perf_counter() - start, results


def _config(root: Path):
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.db_url = results.gradebook_url(root)
    return config


def differences(serial: list[grading.SubmissionResult], parallel: list[grading.SubmissionResult]) -> list[str]:
    """Each submission whose status or score differs between the two runs."""
    by_job = {(r.student, r.lesson): r for r in parallel}
    return [f"{r.student}/{r.lesson}: serial {r.status} {r.score}, parallel {p.status} {p.score}"
            for r in serial for p in [by_job.get((r.student, r.lesson))]
            if p is None or (r.status, r.score, r.max_score) != (p.status, p.score, p.max_score)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.bench --class")
    parser.add_argument("--learners", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=grade.default_jobs())
    parser.add_argument("--lessons", nargs="+", help="default: every lesson")
    args = parser.parse_args(argv)
    lessons = args.lessons or grading.lessons()
    with tempfile.TemporaryDirectory() as tmp:
        root = grading.copy_course(Path(tmp), ("solutions", "notebooks"), lessons=lessons)
        synthetic.build_class(root, lessons, args.learners)
        load_before = os.getloadavg()[0]
        serial_seconds, serial = grade_fresh(root, lessons, 1)
        serial_load = os.getloadavg()[0]
        parallel_seconds, parallel = grade_fresh(root, lessons, args.jobs)
        parallel_load = os.getloadavg()[0]
    print(f"\n{args.learners} learners x {len(lessons)} lesson(s) ({', '.join(lessons)}) = {len(serial)} submissions, "
          f"{os.cpu_count()} cores; 1-minute load average {load_before:.1f} before the runs")
    print(f"{'run':<18} {'seconds':>8} {'learners/min':>13} {'100 learners':>13} {'1,000 learners':>15} {'load after':>11}")
    runs = (("serial (1 job)", serial_seconds, serial_load), (f"parallel ({args.jobs} jobs)", parallel_seconds, parallel_load))
    for name, seconds, load in runs:
        per_learner = seconds / args.learners
        print(f"{name:<18} {seconds:>8.1f} {60 / per_learner:>13.2f} {_duration(100 * per_learner):>13} "
              f"{_duration(1000 * per_learner):>15} {load:>11.1f}")
    print(f"speed-up {serial_seconds / parallel_seconds:.2f}x")
    diff = differences(serial, parallel)
    print("same status and score for every submission: " + ("yes" if not diff else "NO\n" + "\n".join(diff)))
    return 1 if diff else 0


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"
