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
