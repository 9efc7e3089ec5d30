"""Lesson 08's distributed cells, 3 times in a row in one kernel: no failure, no hang (`make soak` runs 20)."""

from __future__ import annotations

import pytest

from tests import soak_distributed

pytestmark = pytest.mark.slow


def test_every_launch_of_lesson_08_three_times():
    result = soak_distributed.soak(runs=3, verbose=False)
    table = soak_distributed.format_table(result)
    print(table)
    assert result["records"], "no cell of lesson 08 launches processes: the soak finds nothing to repeat"
    assert all(len(r.seconds) == 3 for r in result["records"]), table
    assert not any(r.failures or r.hangs for r in result["records"]), table


def _cell_that_printed(text: str):
    import nbformat
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return cell


def test_a_failed_launch_is_recorded_by_its_root_cause():
    summary = ("terminate called without an active exception\n"
               "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
               "Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 7)  (SIGTERM)\n"
               "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
               "  exitcode  : -6 (pid: 8)  (SIGABRT)\n")
    assert soak_distributed._printed_error(_cell_that_printed(summary)) == (
        "rank 1 exit code -6 (pid: 8)  (SIGABRT) | terminate called without an active exception")
    assert soak_distributed._printed_error(_cell_that_printed("Traceback\nRuntimeError: boom\n")) == "RuntimeError: boom"
    assert soak_distributed._printed_error(_cell_that_printed("epoch 0: mean loss 1.112\n")) == ""
