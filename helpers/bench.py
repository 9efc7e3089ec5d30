"""Benchmark the course against its budgets and print a table.

For every solution notebook: the time to execute it from a fresh kernel and the
kernel's peak memory (resident set size). Then the time to autograde one
learner's whole-course submission with nbgrader. Budgets: 90 s and 1.5 GB per
notebook, 6 minutes for the whole course, 2 minutes to autograde a submission.

    python -m helpers.bench            (or: make bench)
    python -m helpers.bench --class    (or: make bench-class) grading a class: see helpers.classroom.bench
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from helpers.authoring import execute
from helpers.data import REPO_ROOT

NOTEBOOK_SECONDS = 90
NOTEBOOK_BYTES = 1.5 * 2**30
COURSE_SECONDS = 6 * 60
AUTOGRADE_SECONDS = 120


def run_one(path: Path) -> dict:
    """Execute one notebook in a fresh kernel; this process's only child is that kernel."""
    start = time.perf_counter()
    execute(nbformat.read(path, as_version=4), path.parent)
    seconds = time.perf_counter() - start
    # ru_maxrss of children: the largest resident set of the kernel (or a worker it started), in KiB on Linux.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"seconds": seconds, "peak_bytes": peak}


def measure(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "helpers.bench", "--one", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def autograde_seconds() -> float:
    """Seconds nbgrader takes to autograde one learner's submission of every lesson."""
    from helpers import grading

    with tempfile.TemporaryDirectory() as tmp:
        root = grading.copy_course(Path(tmp))
        grading.release(root)
        for lesson in grading.lessons(root):
            folder = root / "grading" / "submitted" / "learner" / lesson
            folder.mkdir(parents=True)
            shutil.copy(root / "solutions" / lesson / f"{lesson}.ipynb", folder)
        start = time.perf_counter()
        for lesson in grading.lessons(root):
            grading.autograde(lesson, root, ["learner"])
        return time.perf_counter() - start


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER BUDGET"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--class"]:
        from helpers.classroom import bench as class_bench

        return class_bench.main(argv[1:])
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(Path(argv[1]))))
        return 0
    notebooks = sorted((REPO_ROOT / "solutions").glob("*/*.ipynb"))
    print(f"{'notebook':<22} {'time (s)':>9} {'peak memory (MB)':>17}  budget")
    total, worst = 0.0, True
    for path in notebooks:
        result = measure(path)
        if "error" in result:
            print(f"{path.parent.name:<22} {'-':>9} {'-':>17}  FAILED: {result['error']}")
            worst = False
            continue
        ok = result["seconds"] <= NOTEBOOK_SECONDS and result["peak_bytes"] <= NOTEBOOK_BYTES
        worst &= ok
        total += result["seconds"]
        megabytes = result["peak_bytes"] / 2**20
        print(f"{path.parent.name:<22} {result['seconds']:>9.1f} {megabytes:>17.0f}  {verdict(ok)}", flush=True)
    print(f"{'whole course':<22} {total:>9.1f} {'':>17}  {verdict(total <= COURSE_SECONDS)}")
    grade = autograde_seconds()
    print(f"{'autograde 1 learner':<22} {grade:>9.1f} {'':>17}  {verdict(grade <= AUTOGRADE_SECONDS)}")
    return 0 if worst and total <= COURSE_SECONDS and grade <= AUTOGRADE_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
