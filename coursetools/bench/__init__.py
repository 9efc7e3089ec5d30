"""Benchmark the course against its budgets and print a table.

For every solution notebook: the time to execute it from a fresh kernel, the CPU
time the kernel and its processes used (on a shared machine the clock grows with
everyone else's work, the CPU time far less), and the peak memory of the kernel and every process it started, together (the sum of
their proportional set sizes: pages that processes share are counted once, so
lesson 08's process groups count in full). Then the time to autograde one
learner's whole-course submission with nbgrader, sandboxed (bubblewrap) and not,
in the same run. Budgets: 90 s and 1.5 GB per notebook, 6 minutes for the whole
course, 2 minutes to autograde a submission.

    python -m coursetools.bench                (or: make bench)
    python -m coursetools.bench --autograde    only the autograde rows
    python -m coursetools.bench --notebooks 05_training 10_capstone    only those notebooks' rows
    python -m coursetools.bench --class    (or: make bench-class) grading a class: see coursetools.bench.classroom
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import nbformat
import psutil

from coursetools.authoring import execute
from helpers.data import REPO_ROOT

NOTEBOOK_SECONDS = 90
NOTEBOOK_BYTES = 1.5 * 2**30
COURSE_SECONDS = 6 * 60
AUTOGRADE_SECONDS = 120


class MemoryWatch:
    """Samples, in a thread, the summed PSS of a process's descendants (and itself, unless told not to); keeps the peak.

    PSS divides each shared page among the processes that map it, so the sum is the memory they take together:
    a forked worker costs only the pages it changed, a fresh interpreter everything it loaded.
    """

    def __init__(self, pid: int, every_s: float = 0.2, include_root: bool = True, ignore: frozenset[int] = frozenset()
                 ) -> None:
        self.root, self.every_s, self.include_root = psutil.Process(pid), every_s, include_root
        self.ignore = ignore  # processes not measured, with everything they start
        self.peak = self.recent_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                processes = self.root.children(recursive=True) + ([self.root] if self.include_root else [])
            except psutil.Error:
                return
            for process in processes:
                try:
                    if self.ignore and {process.pid, *(parent.pid for parent in process.parents())} & self.ignore:
                        continue
                    total += process.memory_full_info().pss
                except psutil.Error:  # it ended between the listing and the reading
                    pass
            self.peak, self.recent_peak = max(self.peak, total), max(self.recent_peak, total)
            self._stop.wait(self.every_s)

    def __enter__(self) -> "MemoryWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_one(path: Path) -> dict:
    """Execute one notebook in a fresh kernel; every process this one starts is that kernel or one of its own.

    The kernel's CPU time is read from this process's finished children: the kernel has ended and been waited
    for when ``execute`` returns, and it waited for its own processes (lesson 08's), so they count too.
    """
    start, before = time.perf_counter(), _children_cpu()
    # processes this one had started before (a test run's servers and kernels) are not the notebook's
    earlier = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    with MemoryWatch(os.getpid(), include_root=False, ignore=earlier) as memory:
        execute(nbformat.read(path, as_version=4), path.parent)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": _children_cpu() - before,
            "peak_bytes": memory.peak}


def _children_cpu() -> float:
    """User and system CPU seconds of this process's finished, waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "coursetools.bench", "--one", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def autograde_seconds(sandbox: bool, jobs: int = 1) -> dict[str, float]:
    """Seconds to autograde one learner's submission of every lesson, in the sandbox or not.

    One job: lesson after lesson with coursetools.grading, a time per lesson. More: the whole course at once
    with coursetools.classroom (what `make grade` runs), one time for it all.
    """
    from coursetools import grading
    from coursetools.grading import sandbox as sandboxing
    from coursetools.classroom import grade

    with mock.patch.dict(os.environ, {sandboxing.ENV_SANDBOX: "bwrap" if sandbox else "none"}):
        with tempfile.TemporaryDirectory() as tmp:
            root = grading.copy_course(Path(tmp))
            grading.release(root)
            lessons = grading.lessons(root)
            for lesson in lessons:
                folder = root / "grading" / "submitted" / "learner" / lesson
                folder.mkdir(parents=True)
                shutil.copy(root / "solutions" / lesson / f"{lesson}.ipynb", folder)
            if jobs > 1:
                start = time.perf_counter()
                grade.grade_class(root, lessons, jobs=jobs, students=["learner"], progress=False)
                return {"whole course": time.perf_counter() - start}
            seconds = {}
            for lesson in lessons:
                start = time.perf_counter()
                grading.autograde(lesson, root, ["learner"])
                seconds[lesson] = time.perf_counter() - start
            return seconds


def autograde_table() -> tuple[list[str], float]:
    """Rows timing one learner's whole course autograded, unsandboxed and sandboxed, lesson by lesson and as
    `make grade` runs it (all cores); returns them and the time the budget is judged on (`make grade`'s)."""
    from coursetools.grading import sandbox as sandboxing
    from coursetools.classroom import grade

    boxing = sandboxing.bwrap() is not None
    plain = autograde_seconds(sandbox=False)
    boxed = autograde_seconds(sandbox=True) if boxing else None
    rows = [f"{'autograde 1 learner':<22} {'plain (s)':>9} {'sandboxed (s)':>17}  ratio"]
    for lesson in plain:
        after = f"{boxed[lesson]:>17.1f}  {boxed[lesson] / plain[lesson]:.2f}x" if boxed else f"{'-':>17}"
        rows.append(f"  {lesson:<20} {plain[lesson]:>9.1f} {after}")
    whole, whole_boxed = sum(plain.values()), sum(boxed.values()) if boxed else None
    after = f"{whole_boxed:>17.1f}  {whole_boxed / whole:.2f}x" if boxed else f"{'-':>17}  (bwrap missing: not sandboxed)"
    rows.append(f"  {'one lesson at a time':<20} {whole:>9.1f} {after}")
    jobs = grade.default_jobs()
    if jobs > 1:
        parallel = autograde_seconds(sandbox=boxing, jobs=jobs)["whole course"]
        label = f"make grade, {jobs} jobs"
        rows.append(f"  {label:<20} {'':>9} {parallel:>17.1f}" if boxing else f"  {label:<20} {parallel:>9.1f}")
    else:
        parallel = whole_boxed if boxed else whole
    rows.append(f"  {'budget (make grade)':<20} {AUTOGRADE_SECONDS:>9} {'':>17}  {verdict(parallel <= AUTOGRADE_SECONDS)}")
    return rows, parallel


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER BUDGET"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--class"]:
        from coursetools.bench import classroom as class_bench

        return class_bench.main(argv[1:])
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(Path(argv[1]))))
        return 0
    if argv[:1] == ["--autograde"]:
        rows, grade = autograde_table()
        print("\n".join(rows))
        return 0 if grade <= AUTOGRADE_SECONDS else 1
    notebooks = sorted((REPO_ROOT / "solutions").glob("*/*.ipynb"))
    only = argv[1:] if argv[:1] == ["--notebooks"] else None
    if only is not None:
        notebooks = [path for path in notebooks if any(name in path.parent.name for name in only)]
    print(f"{'notebook':<22} {'time (s)':>9} {'CPU (s)':>8} {'peak memory (MB)':>17}  budget"
          "  (CPU and memory: kernel + its processes; memory as PSS)")
    total, worst = 0.0, True
    for path in notebooks:
        result = measure(path)
        if "error" in result:
            print(f"{path.parent.name:<22} {'-':>9} {'-':>8} {'-':>17}  FAILED: {result['error']}")
            worst = False
            continue
        ok = result["seconds"] <= NOTEBOOK_SECONDS and result["peak_bytes"] <= NOTEBOOK_BYTES
        worst &= ok
        total += result["seconds"]
        megabytes = result["peak_bytes"] / 2**20
        print(f"{path.parent.name:<22} {result['seconds']:>9.1f} {result['cpu_seconds']:>8.1f} {megabytes:>17.0f}"
              f"  {verdict(ok)}", flush=True)
    if only is not None:
        return 0 if worst else 1
    print(f"{'whole course':<22} {total:>9.1f} {'':>8} {'':>17}  {verdict(total <= COURSE_SECONDS)}")
    rows, grade = autograde_table()
    print("\n".join(rows))
    return 0 if worst and total <= COURSE_SECONDS and grade <= AUTOGRADE_SECONDS else 1

