"""Honest timing: warm up first, wait for the device, report the median."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until queued GPU work has finished; a no-op on the CPU.

    GPU calls return before the work is done, so a timer read without this
    measures only how long it took to *queue* the work.
    """
    device = torch.device(device) if device is not None else None
    if device is None or device.type == "cuda":
        if torch.cuda.is_available():
            torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclass(frozen=True)
class Timing:
    """Seconds per call over ``runs`` timed calls (after warm-up)."""

    median: float
    best: float
    runs: int

    def __str__(self) -> str:
        return f"{self.median * 1e3:.2f} ms median (best {self.best * 1e3:.2f} ms, {self.runs} runs)"


def time_call(
    fn: Callable[[], Any], *, warmup: int = 1, repeat: int = 5, device: torch.device | str | None = None
) -> Timing:
    """Time ``fn()`` the way the course teaches.

    Steps:
        1. Call ``fn`` ``warmup`` times untimed (first calls pay one-off costs).
        2. Time ``repeat`` calls, synchronising the device before each clock read.
        3. Report the median, which one slow run cannot skew, and the best.
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return Timing(median=statistics.median(times), best=min(times), runs=repeat)


# ------------------------------------------------- comparing two ways of doing the same work


def seconds_of(fn: Callable[[], Any], device: torch.device | str | None = None) -> float:
    """Seconds of one call of ``fn()``, with the device synchronised before each clock read."""
    return time_call(fn, warmup=0, repeat=1, device=device).median


@dataclass(frozen=True)
class Comparison:
    """A technique timed in alternation with its baseline: one (baseline, technique) pair of seconds per round."""

    pairs: tuple[tuple[float, float], ...]

    @property
    def ratios(self) -> list[float]:
        """Speed-up of every round: baseline seconds / technique seconds (above 1: the technique was faster)."""
        return [baseline / technique for baseline, technique in self.pairs]

    @property
    def speedup(self) -> float:
        """The median of the rounds' speed-ups."""
        return statistics.median(self.ratios)

    @property
    def low(self) -> float:
        return min(self.ratios)

    @property
    def high(self) -> float:
        return max(self.ratios)

    @property
    def seconds_saved(self) -> float:
        """The median over rounds of (baseline - technique) seconds: negative when the technique costs time."""
        return statistics.median(baseline - technique for baseline, technique in self.pairs)

    def verdict(self) -> str:
        """Faster (or slower) only when it was so in every round; otherwise the rounds disagree."""
        if self.low > 1:
            return "faster in every round"
        if self.high < 1:
            return "slower in every round"
        return "no clear difference: the rounds disagree"

    def __str__(self) -> str:
        return f"speed-up {self.speedup:.2f}x (rounds: {self.low:.2f}x to {self.high:.2f}x), {self.verdict()}"


def compare(technique: Callable[[], Any], baseline: Callable[[], Any], *, rounds: int = 5,
            device: torch.device | str | None = None) -> Comparison:
    """Time ``technique()`` and ``baseline()`` in alternation, one of each per round, after one warm-up each.

    Whatever else the machine does during a round slows both alike, so each round's ratio is fairer
    than a comparison with a baseline measured minutes earlier.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    baseline(), technique()  # warm-up
    pairs = tuple((seconds_of(baseline, device), seconds_of(technique, device)) for _ in range(rounds))
    return Comparison(pairs)


# ------------------------------------------------- peak memory of one step


def peak_memory(step: Callable[[], Any], device: torch.device | str) -> int | None:
    """Peak bytes allocated during one ``step()`` above what was allocated before (after one warm-up step).

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the profiler's memory records
    (``profile_memory=True``), which log the running total of PyTorch's CPU allocator. Other devices: None.
    """
    device = torch.device(device)
    step()  # optimizer state and the like are created once, in the first step
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if device.type != "cpu":
        return None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step()
    return _peak_from_trace(_trace_events(profiler))


def _trace_events(profiler: Any) -> list[dict]:
    """The events of a finished profiler run, read from its Chrome trace."""
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(trace))
        return json.loads(trace.read_text())["traceEvents"]


def _peak_from_trace(events: list[dict]) -> int:
    """The largest running total in the trace's memory records ("Total Allocated" counts from 0 at the start)."""
    totals = [event["args"]["Total Allocated"] for event in events
              if event.get("name") == "[memory]" and "Total Allocated" in event.get("args", {})]
    return max(totals, default=0)


# ------------------------------------------------- the table of results


@dataclass
class Results:
    """What every technique did: its comparison with the baseline, peak memory, facts found, or why it was skipped."""

    comparisons: dict[str, Comparison] = field(default_factory=dict)
    peaks: dict[str, int | None] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    baseline_of: dict[str, str] = field(default_factory=dict)  # row -> the name of its baseline's peak

    def table(self) -> str:
        """One line per technique: speed-up with its spread, peak memory against its baseline's, verdict."""
        lines = [f"{'technique':30} {'speed-up':>8} {'rounds':>13} {'peak MiB':>12}  verdict"]
        for name, comparison in self.comparisons.items():
            peak, base = self.peaks.get(name), self.peaks.get(self.baseline_of.get(name, "baseline"))
            memory = f"{peak / 2**20:.1f} vs {base / 2**20:.1f}" if peak is not None and base else ""
            fact = self.facts.get(name, "")
            words = comparison.verdict() + (f"; {fact}" if fact else "")
            spread = f"{comparison.low:.2f}-{comparison.high:.2f}x"
            lines.append(f"{name:30} {comparison.speedup:7.2f}x {spread:>13} {memory:>12}  {words}")
        lines += [f"{name:30} {'-':>8} {'-':>13} {'':>12}  not measured: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)
