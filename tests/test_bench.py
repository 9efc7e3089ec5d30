"""The benchmark counts the memory and CPU time of every process a notebook starts, not only the kernel's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from coursetools import bench

MB = 2**20
# A child process that holds 400 MB of its own pages for two seconds (longer than the 0.2 s sampling period).
CHILD = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time; block = bytearray(400 * 2**20); time.sleep(2)"], check=True)
"""


def notebook(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)
    return path


@pytest.mark.slow
def test_peak_memory_counts_processes_the_kernel_starts(tmp_path: Path) -> None:
    # a process this one started earlier (as a test run's servers and kernels are) is not the notebook's: it holds
    # 400 MB through both runs and must count in neither
    earlier = subprocess.Popen([sys.executable, "-c", "import time; block = bytearray(400 * 2**20); time.sleep(120)"])
    try:
        time.sleep(1)  # let it take its pages
        alone = bench.run_one(notebook(tmp_path, "x = 1"))
        with_child = bench.run_one(notebook(tmp_path, CHILD))
    finally:
        earlier.kill()
        earlier.wait()
    assert alone["peak_bytes"] < 300 * MB, alone  # a bare kernel
    assert with_child["peak_bytes"] - alone["peak_bytes"] > 350 * MB, (alone, with_child)


# A child process that spins one CPU for three seconds of its own CPU time, however busy the machine is.
SPINNING_CHILD = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 3.0: pass"], check=True)
"""


@pytest.mark.slow
def test_cpu_time_counts_processes_the_kernel_starts(tmp_path: Path) -> None:
    alone = bench.run_one(notebook(tmp_path, "x = 1"))
    with_child = bench.run_one(notebook(tmp_path, SPINNING_CHILD))
    # a kernel's own start-up CPU time varies by a few tenths of a second from one kernel to the next (0.39 to
    # 0.48 s in three runs on a quiet 2-core machine): the child's 3 s stand well clear of that
    assert with_child["cpu_seconds"] - alone["cpu_seconds"] > 2.5, (alone, with_child)


def test_autograde_table_names_the_sandbox_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    timings = {(False, 1): {"00_start_here": 2.0, "01_tensors": 4.0}, (True, 1): {"00_start_here": 3.0, "01_tensors": 5.0},
               (True, 2): {"whole course": 5.5}}
    monkeypatch.setattr(bench, "autograde_seconds", lambda sandbox, jobs=1: timings[sandbox, jobs])
    monkeypatch.setattr("coursetools.grading.sandbox.bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr("coursetools.classroom.grade.default_jobs", lambda: 2)
    rows, judged = bench.autograde_table()
    assert judged == 5.5
    assert any("one lesson at a time" in row and "6.0" in row and "8.0" in row and "1.33x" in row for row in rows), rows
    assert any("make grade, 2 jobs" in row and "5.5" in row for row in rows), rows


def test_autograde_table_without_bubblewrap_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "autograde_seconds", lambda sandbox, jobs=1: {"00_start_here": 2.0})
    monkeypatch.setattr("coursetools.grading.sandbox.bwrap", lambda: None)
    monkeypatch.setattr("coursetools.classroom.grade.default_jobs", lambda: 1)
    rows, judged = bench.autograde_table()
    assert judged == 2.0
    assert "bwrap missing" in rows[-2], rows
