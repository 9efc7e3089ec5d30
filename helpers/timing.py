"""Honest timing: warm up first, wait for the device, report the median."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
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
