"""Unit tests of helpers.timing's comparison, peak-memory and table tools (lesson 07's measurement harness)."""

from __future__ import annotations

import pytest
import torch

from helpers.timing import Comparison, Results, _peak_from_trace, compare, peak_memory


def test_comparison_reports_median_spread_and_verdict():
    faster = Comparison(((2.0, 1.0), (3.0, 1.0), (1.5, 1.0)))
    assert faster.ratios == [2.0, 3.0, 1.5]
    assert (faster.speedup, faster.low, faster.high) == (2.0, 1.5, 3.0)
    assert faster.seconds_saved == 1.0
    assert faster.verdict() == "faster in every round"
    assert "2.00x" in str(faster) and "1.50x to 3.00x" in str(faster)
    assert Comparison(((1.0, 2.0), (1.0, 1.5))).verdict() == "slower in every round"
    mixed = Comparison(((1.0, 0.9), (1.0, 1.1), (1.0, 1.0)))
    assert mixed.verdict().startswith("no clear difference")
    assert mixed.seconds_saved == 0.0


def test_compare_warms_up_then_alternates():
    calls: list[str] = []
    result = compare(lambda: calls.append("technique"), lambda: calls.append("baseline"), rounds=3)
    assert calls == ["baseline", "technique"] * 4  # one warm-up of each, then one of each per round
    assert len(result.pairs) == 3 and all(b > 0 and t > 0 for b, t in result.pairs)
    with pytest.raises(ValueError):
        compare(lambda: None, lambda: None, rounds=0)


def test_peak_memory_on_the_cpu_sees_an_allocation():
    kept: list[torch.Tensor] = []

    def step() -> None:
        kept.append(torch.ones(1 << 20))  # 4 MiB of float32, kept alive
        kept.append(torch.ones(1 << 18))  # 1 MiB more
        kept.clear()

    peak = peak_memory(step, "cpu")
    assert peak is not None and 5 * 2**20 <= peak < 64 * 2**20


def test_peak_memory_is_none_where_it_cannot_measure():
    calls: list[int] = []
    assert peak_memory(lambda: calls.append(1), torch.device("meta")) is None
    assert calls == [1]  # the warm-up step still ran


def test_peak_from_trace_reads_only_memory_records():
    events = [{"name": "[memory]", "args": {"Total Allocated": 10}}, {"name": "aten::add", "args": {}},
              {"name": "[memory]", "args": {"Total Allocated": 30}}, {"name": "[memory]", "args": {}}]
    assert _peak_from_trace(events) == 30
    assert _peak_from_trace([]) == 0


def test_results_table_has_one_figure_per_row_and_names_the_skipped():
    results = Results()
    results.comparisons["bigger batch"] = Comparison(((2.0, 1.0), (2.2, 1.0), (1.8, 1.0)))
    results.comparisons["no_grad"] = Comparison(((1.0, 1.1), (1.0, 0.9), (1.0, 1.0)))
    results.peaks.update({"baseline": 2 * 2**20, "bigger batch": 8 * 2**20, "plain": 4 * 2**20, "no_grad": 2**20})
    results.baseline_of["no_grad"] = "plain"
    results.facts["bigger batch"] = "four times the batch"
    results.skipped["cudnn.benchmark"] = "no cuDNN here"
    lines = results.table().splitlines()
    assert lines[0].split()[:3] == ["technique", "speed-up", "rounds"]
    assert "2.00x" in lines[1] and "1.80-2.20x" in lines[1] and "8.0 vs 2.0" in lines[1]
    assert "faster in every round; four times the batch" in lines[1]
    assert "1.0 vs 4.0" in lines[2] and "rounds disagree" in lines[2]
    assert "not measured: no cuDNN here" in lines[3]
