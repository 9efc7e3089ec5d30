"""Lesson 07 Training faster: checks for every exercise.

Each ``check_*`` takes the learner's function and, optionally, extra inputs
(the graded cells pass hidden ones), prints one pass line or raises
CheckError naming the mistake.

Timing is checked without timing anything: the checks hand the learner's
``median_time`` a fake device on a fake clock. On the fake GPU, ``fn()``
queues its work and returns at once, and ``torch.cuda.synchronize`` (patched
for the duration of the check) waits until the queued work is done, exactly
the behaviour that makes naive GPU timing wrong. Every clock read records
whether work was still running, so a missing synchronize, a missing warm-up
or a mean instead of a median is seen and named, deterministically, on any
machine.

The other checks observe behaviour through PyTorch's public hooks: forward
hooks count how often a checkpointed block ran, tensor hooks see the
autocast state during backward and whether ``.grad`` was ``None``,
optimizer step hooks count steps, and a GradScaler stand-in records
``scale``/``step``/``update``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import time
import statistics
import warnings
from typing import Any, Callable, Iterator, NamedTuple, NoReturn, Sequence
from unittest import mock

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointError

from helpers.checks import (WHERE_VALUES, WHERE_VALUES_NO_EXAMPLE, Allow, CheckError, Mistake, backward_passes, call, describe,
                            expect, expect_close, expect_tensor, leftover_gradients, passed, runs_here, substitute)
from helpers.reference import faster as ref

# ---------------------------------------------------------------- synchronize


@contextlib.contextmanager
def _patched_syncs(on_sync: Callable[[str, tuple, dict], None],
                   cuda_available: bool | None = None, current_gpu: int = 0) -> Iterator[_CurrentGpu]:
    """While open, torch.cuda/mps/accelerator.synchronize call ``on_sync(kind, args, kwargs)`` instead.

    ``torch.cuda.device``, ``current_device`` and ``set_device`` are stand-ins too (a correct answer may select
    the GPU first and then synchronize the current one); the stand-in for the current GPU is yielded.
    """
    accelerator = "cuda" if cuda_available else "mps"
    current = _CurrentGpu()
    current.index = current.initial = current_gpu  # the GPU the caller had selected before the call

    def spy(kind: str) -> Callable[..., None]:
        real = getattr(torch, kind).synchronize  # its parameters: the stand-in refuses what it refuses

        def sync(*args: Any, **kwargs: Any) -> None:
            try:
                _bind_like_the_real(real, args, kwargs)
                _reject_like_the_real(kind, accelerator, args, kwargs)
            except (TypeError, ValueError) as error:
                current.refused.append((kind, args, kwargs, error))
                raise
            if kind == "cuda" and not args and not kwargs:
                args = (current.index,)  # the current GPU, which torch.cuda.device(...) may have selected
            on_sync(kind, args, kwargs)
        return sync

    with contextlib.ExitStack() as stack:
        # torch.cuda.device / current_device / set_device: the GPU selection, without initialising CUDA
        stack.enter_context(mock.patch.object(torch.cuda, "device", current.selecting))
        stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: current.index))
        stack.enter_context(mock.patch.object(torch.cuda, "set_device", current.set))
        stack.enter_context(mock.patch.object(torch.cuda, "synchronize", spy("cuda")))
        stack.enter_context(mock.patch.object(torch.mps, "synchronize", spy("mps")))
        if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "synchronize"):
            stack.enter_context(mock.patch.object(torch.accelerator, "synchronize", spy("accelerator")))
        if cuda_available is not None:
            stack.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: cuda_available))
        yield current


class _CurrentGpu:
    """The current CUDA device of a stand-in machine with several GPUs (index 0 unless selected)."""

    def __init__(self) -> None:
        self.index = self.initial = 0
        self.set_by_learner = False
        self.refused: list[tuple[str, tuple, dict, Exception]] = []  # synchronize calls that raised, as the real ones

    def _index(self, device: Any) -> int:
        """The GPU index ``device`` names, raising what torch.cuda.device raises for a non-CUDA device."""
        if device is None:
            return self.index
        if isinstance(device, int):
            return device
        try:
            device = torch.device(device)
        except (TypeError, RuntimeError) as error:
            raise ValueError(f"Expected a torch.device, a str or an int, got {device!r}") from error
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return self.index if device.index is None else device.index

    @contextlib.contextmanager
    def selecting(self, device: Any) -> Iterator[None]:
        """torch.cuda.device(device): the given GPU is the current one inside the block."""
        index, before = self._index(device), self.index
        self.index = index
        try:
            yield
        finally:
            self.index = before

    def set(self, device: Any) -> None:
        """torch.cuda.set_device(device): the given GPU stays current after the call."""
        self.index = self._index(device)
        self.set_by_learner = True


def _refused_sync(what: str, device: torch.device, kind: str, args: tuple, kwargs: dict, error: Exception) -> NoReturn:
    """A synchronize call that raised (as the real one does for these arguments): which call, and why it cannot work."""
    given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    if kind == "mps":
        mistake = "torch.mps.synchronize() takes no argument: it waits for the one Apple GPU"
    elif isinstance(error, TypeError) and kwargs and not args:
        mistake = f"torch.{kind}.synchronize takes the device as its first argument, not by name: " \
                  f"torch.{kind}.synchronize(device)"
    elif device.type == "cpu":
        mistake = (f"torch.{kind}.synchronize waits for a GPU and refuses a CPU device; a CPU has nothing to wait for "
                   "(each CPU operation has finished when it returns), so call nothing when device.type == 'cpu'")
    elif device.type == "mps" and kind == "cuda":
        mistake = "torch.cuda.synchronize waits for CUDA GPUs only; for an 'mps' device call torch.mps.synchronize()"
    else:
        mistake = None
    raise CheckError(f"{what}: your call torch.{kind}.synchronize({given}) raised {type(error).__name__}: {error}",
                     where=f"look at which synchronize you call, and with what, when device.type == '{device.type}'",
                     mistake=mistake) from None


def _bind_like_the_real(real: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Raise the TypeError the real function raises for arguments its parameters do not take (torch.accelerator's
    device is positional-only)."""
    try:
        parameters = inspect.signature(real)
    except (TypeError, ValueError):  # no signature to read: the rules below still apply
        return
    try:
        parameters.bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"synchronize() {error}") from None


def _reject_like_the_real(kind: str, accelerator: str, args: tuple, kwargs: dict) -> None:
    """Raise what the real synchronize raises for these arguments (the spies are no more lenient than it)."""
    if kind == "mps":
        if args or kwargs:
            raise TypeError("synchronize() takes 0 positional arguments but 1 was given")
        return
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"device"}:
        raise TypeError(f"synchronize() got unexpected arguments {args} {kwargs}")
    device = kwargs.get("device", args[0] if args else None)
    if device is None or isinstance(device, int):
        return
    try:
        device_type = torch.device(device).type
    except (TypeError, RuntimeError) as error:
        raise ValueError(f"Expected a torch.device, a str or an int, got {device!r}") from error
    wanted = "cuda" if kind == "cuda" else accelerator
    if device_type != wanted:
        raise ValueError(f"Expected a {wanted} device, but got: {device}")


def _sync_index(args: tuple, kwargs: dict) -> int | None | str:
    """The GPU index a synchronize call names: an int, None (the current GPU), or 'other' (another type)."""
    device = kwargs.get("device", args[0] if args else None)
    if device is None:
        return None
    if isinstance(device, int):
        return device
    try:
        device = torch.device(device)
    except (TypeError, RuntimeError):
        return "other"
    return device.index if device.type == "cuda" else "other"


_WHERE_MACHINE = ("look at what your function's choice depends on: the device it was given, or the machine "
                  "(torch.cuda.is_available())?")
_BY_DEVICE = ("decide by the device you were given (device.type), not by what the machine has: a CPU device has "
              "nothing to wait for, even on a machine with a GPU")


def check_synchronize(fn: Callable[[torch.device], None], inputs: Sequence[torch.device] | None = None) -> None:
    """synchronize(device) waits on CUDA (that very GPU) and MPS, and does nothing on the CPU."""
    devices = inputs if inputs is not None else [torch.device("cpu"), torch.device("cuda"),
                                                 torch.device("cuda", 1), torch.device("mps")]
    # the CPU device also on a machine with CUDA: the device given decides, not what the machine has
    # and a CUDA device without an index while the caller has selected GPU 1: it means the current GPU
    runs = [(device, cuda, gpu) for device in devices
            for cuda in ([False, True] if device.type == "cpu" else [device.type == "cuda"])
            for gpu in ([0, 1] if device.type == "cuda" and device.index is None else [0])]
    for device, cuda_machine, selected in runs:
        seen: list[tuple[str, tuple, dict]] = []
        what = f"synchronize({device!r})" + (" on a machine with CUDA" if device.type == "cpu" and cuda_machine
                                              else f" while the caller has selected GPU {selected}" if selected
                                              else "")
        with _patched_syncs(lambda kind, args, kwargs: seen.append((kind, args, kwargs)),
                            cuda_available=cuda_machine, current_gpu=selected) as current:
            try:
                call(fn, device)
            except CheckError as error:  # a synchronize given the CPU device raises, as the real one does
                if device.type == "cpu" and cuda_machine and "Expected a cuda device" in error.symptom:
                    raise CheckError(f"{what}: {error.symptom} (on a machine without CUDA it called nothing)",
                                     where=_WHERE_MACHINE, mistake=_BY_DEVICE) from None
                if not current.refused:
                    raise
                _refused_sync(what, device, *current.refused[0])
        if current.set_by_learner and current.index != current.initial:
            raise CheckError(f"{what} left GPU {current.index} selected (torch.cuda.set_device) for the rest of the "
                             f"program, which expects GPU {current.initial} to stay the current one",
                             where="look at torch.cuda.set_device: its choice outlives your function",
                             mistake="pass the device to torch.cuda.synchronize(device), or select it only inside "
                                     "a `with torch.cuda.device(device):` block, which restores the current GPU")
        kinds = [kind for kind, _, _ in seen]
        if device.type == "cpu":
            if seen and cuda_machine:  # the same device on a machine without CUDA called nothing
                raise CheckError(f"{what} called torch.{kinds[0]}.synchronize; for the CPU it should call nothing "
                                 "(on a machine without CUDA it called nothing)", where=_WHERE_MACHINE,
                                 mistake=_BY_DEVICE)
            if seen:
                raise CheckError(f"{what} called torch.{kinds[0]}.synchronize; for the CPU it should call nothing",
                                 where="look at what your function does when device.type == 'cpu'",
                                 mistake="a CPU has nothing to wait for (each CPU operation has finished when it "
                                         "returns), and torch.cuda.synchronize() raises on a machine without CUDA")
        elif device.type == "cuda":
            cuda_calls = [(args, kwargs) for kind, args, kwargs in seen if kind in ("cuda", "accelerator")]
            expect("mps" not in kinds, f"{what} called torch.mps.synchronize; a CUDA device needs CUDA's",
                   where="look at which synchronize you call for device.type == 'cuda'",
                   mistake="torch.mps.synchronize waits for Apple's GPU only")
            expect(bool(cuda_calls), f"{what} synchronized nothing; a CUDA device needs a wait",
                   where="look at what your function does when device.type == 'cuda'",
                   mistake="for a CUDA device call torch.cuda.synchronize(device), which waits until the GPU has "
                           "finished its queued work")
            if device.index is None:
                others = {i for i in (_sync_index(args, kwargs) for args, kwargs in cuda_calls)
                          if isinstance(i, int) and i != current.initial}
                expect(not others, f"{what} waited for GPU {min(others) if others else ''}, but a CUDA device "
                       f"without an index means the current GPU (here GPU {current.initial})",
                       where="look at the GPU index your function passes to synchronize",
                       mistake="device.index is None for torch.device('cuda'), and `device.index or 0` (or a 0 "
                               "written in) picks GPU 0 whatever GPU is current: pass the device itself, "
                               "torch.cuda.synchronize(device), which waits for the current GPU when it has no index")
            if device.index is not None:
                indices = {_sync_index(args, kwargs) for args, kwargs in cuda_calls}
                called = "torch.accelerator" if all(kind == "accelerator" for kind in kinds) else "torch.cuda"
                expect(device.index in indices, f"{what} waited for the current GPU, not for GPU {device.index}",
                       where=f"look at the arguments of your {called}.synchronize call",
                       mistake=f"{called}.synchronize() without an argument waits for the current GPU, not for "
                               f"GPU {device.index}: pass the device")
        elif device.type == "mps":
            expect(any(kind in ("mps", "accelerator") for kind in kinds),
                   f"{what} synchronized nothing; an Apple GPU needs a wait",
                   where="look at what your function does when device.type == 'mps'",
                   mistake="for Apple's GPU (device type 'mps') call torch.mps.synchronize()")
            expect("cuda" not in kinds, f"{what} called torch.cuda.synchronize; an 'mps' device needs its own",
                   where="look at which synchronize you call for device.type == 'mps'",
                   mistake="CUDA's synchronize does not wait for Apple's GPU: use torch.mps.synchronize()")
    passed("synchronize", len(devices))


# ---------------------------------------------------------------- median_time on a fake device


class TimingCase(NamedTuple):
    """A timing case: the device type the fake device plays, warm-up calls, timed calls, and a seed for the work."""

    device: str = "cuda"
    warmup: int = 2
    repeat: int = 5
    seed: int = 0


# The work one call of fn() does, in seconds, by call number: the first call is slow (one-off costs), the
# other warm-up calls are slow too (caches still filling), one timed call is an outlier (another program took
# the CPU), the rest scatter a little. Warm-up calls slower than every timed one make a median that includes
# them differ from every statistic of the timed calls alone (when warmup >= 2 or the timed count is odd).
_FIRST_CALL = 3.0
_WARMUP_CALL = 1.0
_OUTLIER = 0.5
_HOST = 0.001  # the time fn() itself takes to queue the work and return


def _work(case: TimingCase, n: int) -> list[float]:
    g = torch.Generator().manual_seed(case.seed)
    steady = (0.020 + 0.010 * torch.rand(n, generator=g)).tolist()
    steady = [round(t, 4) for t in steady]
    for i in range(1, min(case.warmup, n)):
        steady[i] = _WARMUP_CALL
    steady[0] = _FIRST_CALL
    outlier = case.warmup + (case.repeat // 2)  # one of the timed calls
    if outlier < n:
        steady[outlier] = _OUTLIER
    return steady


class FakeDevice:
    """A device on a fake clock. On a GPU, fn() queues work and returns; synchronize() waits for the queue.

    On a CPU (``asynchronous=False``) fn() returns when its work is done and
    there is nothing to synchronize. Every event is recorded in order.
    """

    def __init__(self, case: TimingCase, calls_expected: int) -> None:
        self.work = _work(case, max(calls_expected, 1) * 3 + 5)
        self.asynchronous = case.device != "cpu"
        self.device_type = case.device
        self.now = 0.0
        self.busy_until = 0.0
        self.calls = 0
        self.events: list[tuple[str, bool]] = []  # (what, device busy at that moment)
        self.wrong_syncs: list[str] = []

    def fn(self) -> None:
        work = self.work[min(self.calls, len(self.work) - 1)]
        self.calls += 1
        self.now += _HOST
        if self.asynchronous:
            self.busy_until = max(self.busy_until, self.now) + work
        else:
            self.now += work
        self.events.append(("fn", self.busy))

    @property
    def busy(self) -> bool:
        return self.busy_until > self.now + 1e-12

    def synchronize(self, kind: str, args: tuple, kwargs: dict) -> None:
        if not self.asynchronous:
            self.wrong_syncs.append(kind)
            return
        if kind not in (self.device_type, "accelerator"):
            self.wrong_syncs.append(kind)
            return
        self.now = max(self.now, self.busy_until)
        self.events.append(("sync", False))

    def clock(self) -> float:
        self.events.append(("clock", self.busy))
        return self.now

    def timed_intervals(self, warmup: int) -> list[float]:
        """What a correct median_time measures: each timed call's host time plus its work."""
        return [_HOST + w for w in self.work[warmup:self.calls]]


def _run_timing(fn: Callable[..., float], case: TimingCase) -> tuple[Any, FakeDevice]:
    world = FakeDevice(case, case.warmup + case.repeat)
    device = torch.device(case.device)
    with substitute(fn, synchronize=ref.synchronize), \
            _patched_syncs(world.synchronize, cuda_available=case.device == "cuda"):
        got = call(fn, world.fn, device, warmup=case.warmup, repeat=case.repeat, clock=world.clock)
    return got, world


def _expect_calls(world: FakeDevice, case: TimingCase, what: str) -> None:
    expect(world.calls > 0, f"{what}: fn was never called",
           where="look at your loops: does each of them call fn()?")
    clock_reads = sum(1 for event, _ in world.events if event == "clock")
    expect(clock_reads > 0, f"{what}: the clock you were given was never read (the check passes a fake clock, so "
           "time.perf_counter() cannot be seen)",
           where="look at how you read the time around each timed call",
           mistake="time with the clock argument: start = clock() and clock() - start")
    expected = case.warmup + case.repeat
    if world.calls == case.repeat and case.warmup > 0:
        raise CheckError(f"{what}: fn ran {world.calls} times, all of them timed; expected {case.warmup} untimed "
                         f"calls first, then {case.repeat} timed ones",
                         where="look at what happens before your first clock read",
                         mistake=f"there is no warm-up. The first call pays one-off costs (here it took "
                                 f"{_FIRST_CALL:g} s instead of about 0.02 s); call fn warmup times before timing")
    expect(world.calls == expected, f"{what}: fn ran {world.calls} times; it should run warmup + repeat = "
           f"{case.warmup} + {case.repeat} = {expected} times (untimed warm-up calls first, then the timed ones)",
           where="look at the bounds of your two loops: the warm-up one and the timed one")


def check_median_time_sync(fn: Callable[..., float], inputs: Sequence[TimingCase] | None = None) -> None:
    """On a (fake) GPU, median_time warms up, and synchronizes before each clock read."""
    cases = inputs if inputs is not None else [TimingCase("cuda", 2, 5, 0), TimingCase("cuda", 1, 3, 1)]
    for case in cases:
        got, world = _run_timing(fn, case)
        what = f"median_time on a GPU (device '{case.device}', warmup={case.warmup}, repeat={case.repeat})"
        _expect_calls(world, case, what)
        syncs = sum(1 for event, _ in world.events if event == "sync")
        expect(syncs > 0, f"{what}: synchronize was never called; the timed runs measured about {_HOST * 1e3:g} ms "
               "instead of about 25 ms",
               where="look at what happens just before each clock read",
               mistake="on a GPU, fn() returns as soon as its work is queued, so without synchronize(device) before "
                       "each clock read you measure only the queueing")
        for i, (event, busy) in enumerate(world.events):
            if event != "clock" or not busy:
                continue
            starts_timing = any(e == "fn" for e, _ in world.events[i + 1:i + 2])
            if starts_timing:
                raise CheckError(f"{what}: you started the clock while earlier work (the warm-up) was still running "
                                 "on the GPU, so that time is added to the first timed run",
                                 where="look at what happens just before start = clock()",
                                 mistake="the GPU was still busy when the clock started: synchronize before "
                                         "starting the clock too, not only after fn()")
            raise CheckError(f"{what}: you read the clock after fn() before its work had finished, so you measured "
                             "only the time to queue it",
                             where="look at what happens between fn() and the second clock read",
                             mistake="fn() only queues its work on a GPU: wait for it (synchronize) before "
                                     "reading the clock again")
        reads = sum(1 for event, _ in world.events if event == "clock")
        if reads == 2 and case.repeat > 1 and _number(got) is not None:  # no median comes from one interval
            raise CheckError(f"{what}: returned {_number(got):.6g} s from one pair of clock reads around all "
                             f"{case.repeat} timed calls: that is their mean (the total divided by {case.repeat}), "
                             "not their median",
                             where="look at where you read the clock: before and after each timed call",
                             mistake="time each call on its own (synchronize, read the clock, fn(), synchronize, read "
                                     "the clock) and return statistics.median of those times")
        # The warm-up is untimed: a median that includes the warm-up calls is a warm-up mistake, seen only in
        # the value (timing every call and dropping the warm-up ones afterwards is right).
        warm_in = _warmup_in_median(got, world, case)
        if warm_in:
            times = world.timed_intervals(case.warmup)
            mean = statistics.mean(times)
            if abs(_number(got) - mean) > 1e-9 + 1e-6 * mean:
                raise CheckError(f"{what}: {warm_in}", where=_WHERE_WARMUP_TIMES, mistake=_WARMUP_TIMED)
            # here the mean of the timed calls is that same number: the value alone cannot tell which it is
            raise CheckError(f"{what}: returned {_number(got):.6g} s; the median of the {case.repeat} timed calls "
                             f"after the warm-up is {statistics.median(times):.6g} s",
                             where="look at which calls' times go into your result, and at how you combine them",
                             mistake=f"two mistakes give this same number here: the median of all calls with the "
                                     f"warm-up ones included, or the mean of the {case.repeat} timed calls. Time only "
                                     "the calls after the warm-up, and return statistics.median of their times")
    passed("median_time (warm-up and synchronize)", len(cases))


_WHERE_WARMUP_TIMES = "look at which calls' times go into your median"
_WARMUP_TIMED = ("the warm-up calls were timed too and are in your median, so their one-off costs count; the warm-up "
                 "calls are untimed: time only the repeat calls after them")


def _number(got: Any) -> float | None:
    value = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _warmup_in_median(got: Any, world: FakeDevice, case: TimingCase) -> str | None:
    """The symptom, when ``got`` is the median of all calls (warm-up included) and no statistic of the timed ones."""
    number = _number(got)
    if number is None or case.warmup == 0:
        return None
    times = world.timed_intervals(case.warmup)
    ordered = sorted(times)
    all_calls = [_HOST + w for w in world.work[:world.calls]]
    low, high = ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]
    if not _is_median(number, all_calls) or abs(number - low) <= 1e-9 or abs(number - high) <= 1e-9 \
            or abs(number - statistics.median(times)) <= 1e-9 + 1e-6 * statistics.median(times):
        return None
    warm = ", ".join(f"{t:g} s" for t in all_calls[:case.warmup])
    calls = "the warm-up call (it took" if case.warmup == 1 else f"the {case.warmup} warm-up calls (they took"
    return (f"returned {number:.6g} s, the median of all {len(all_calls)} calls including {calls} {warm}); "
            f"the median of the {case.repeat} timed calls after the warm-up is "
            f"{statistics.median(times):.6g} s")


def check_median_time_value(fn: Callable[..., float], inputs: Sequence[TimingCase] | None = None) -> None:
    """On a (fake) CPU, median_time returns the median, in seconds, of the timed calls after the warm-up."""
    # two warm-up calls: a median that includes them is then none of the timed calls' statistics (see _work)
    cases = inputs if inputs is not None else [TimingCase("cpu", 2, 5, 2), TimingCase("cpu", 2, 4, 3)]
    for case in cases:
        got, world = _run_timing(fn, case)
        what = f"median_time on the CPU (warmup={case.warmup}, repeat={case.repeat})"
        if world.wrong_syncs:
            raise CheckError(f"{what}: called torch.{world.wrong_syncs[0]}.synchronize for a CPU device, which "
                             "raises on a machine without CUDA",
                             where="look at how you wait for the device before reading the clock",
                             mistake="wait only on a GPU (use your synchronize(device))")
        _expect_calls(world, case, what)
        number = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
        expect(isinstance(number, (int, float)) and not isinstance(number, bool),
               f"{what} should return one number (seconds), but returned {describe(got)}",
               where="look at your return statement")
        times = world.timed_intervals(case.warmup)
        ordered = sorted(times)
        low, high = ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]
        # task: "the median of those times (`statistics.median`)": for an even count, the mean of the two middle ones
        if abs(number - statistics.median(times)) <= 1e-9 + 1e-6 * abs(statistics.median(times)):
            expect(not isinstance(got, torch.Tensor),
                   f"{what} should return a Python float, but returned {describe(got)} (its value, {number:.6g}, "
                   "is right)", where="look at your return statement",
                   mistake="a one-element tensor is not a Python number: .item() (or float()) converts it")
            continue
        warm_in = _warmup_in_median(number, world, case)
        if warm_in:
            raise CheckError(f"{what}: {warm_in}", where=_WHERE_WARMUP_TIMES, mistake=_WARMUP_TIMED)
        all_calls = [_HOST + w for w in world.work[:world.calls]]
        # With one warm-up call slower than all timed ones and an even timed count, the median of all calls IS the
        # upper middle timed value: one number cannot tell the two mistakes apart, so name both.
        both = case.warmup > 0 and abs(statistics.median(all_calls) - high) <= 1e-9
        mistakes = [
            Mistake(f"that is the upper of the two middle timed values, which here is also the median of all calls "
                    f"with the warm-up ones included: either the warm-up calls are in your median (time only the "
                    f"calls after the warm-up), or for an even number of timed runs ({case.repeat}) you took the upper "
                    "middle value (sorted(times)[len(times) // 2]) where statistics.median takes the mean of the two",
                    matches=lambda g: both and abs(g - high) <= 1e-9,
                    where="look at which calls' times go into your median, and at how you take the middle of an "
                          "even count"),
            Mistake(f"for an even number of timed runs ({case.repeat}) that is the lower of the two middle values "
                    "(torch's Tensor.median and median_low pick it); the median the task names, statistics.median, is "
                    "the mean of the two middle values", lambda: low,
                    where="look at how you take the middle of the sorted times when their count is even"),
            Mistake(f"for an even number of timed runs ({case.repeat}) that is the upper of the two middle values "
                    "(sorted(times)[len(times) // 2]); the median the task names, statistics.median, is the mean of "
                    "the two middle values", lambda: high,
                    where="look at how you take the middle of the sorted times when their count is even"),
            Mistake("that is the mean of the timed runs: one slow run (here one took 0.5 s) pulls the mean up; "
                    "return the median (statistics.median)", lambda: statistics.mean(times),
                    where="look at how you combine the timed runs into one number"),
            Mistake("that is the total of all timed runs; return the median of the single-run times",
                    lambda: sum(times),
                    where="look at how you combine the timed runs into one number"),
            Mistake("that is the fastest run (min), not the median", lambda: min(times),
                    where="look at how you combine the timed runs into one number"),
            Mistake("that is the slowest run (max), not the median", lambda: max(times),
                    where="look at how you combine the timed runs into one number"),
            Mistake("that is the median in milliseconds; return seconds",
                    matches=lambda g: _in_range(g / 1000, low, high),
                    where="look at the unit of what you return: clock() gives seconds"),
            Mistake("the warm-up calls were timed too and are in your median; time only the calls after the warm-up",
                    matches=lambda g: _is_median(g, all_calls),
                    where="look at which calls' times go into your median"),
        ]
        expect_close(number, statistics.median(times), what=what, mistakes=mistakes, atol=1e-9, rtol=1e-6)
    passed("median_time (the median in seconds)", len(cases))


def _in_range(value: float, low: float, high: float) -> bool:
    return low - 1e-9 <= value <= high + 1e-9


def _is_median(value: float, values: list[float]) -> bool:
    ordered = sorted(values)
    return _in_range(value, ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2])


# ---------------------------------------------------------------- the linear scaling rule


def check_scaled_learning_rate(fn: Callable[[float, int, int], float],
                               inputs: Sequence[tuple[float, int, int]] | None = None) -> None:
    """lr * batch_size / base_batch_size, for larger, smaller and non-multiple batch sizes."""
    cases = inputs if inputs is not None else [(0.1, 64, 256), (0.05, 256, 64), (0.01, 64, 96)]
    for base_lr, base_batch, batch in cases:
        got = call(fn, base_lr, base_batch, batch)
        ratio = batch / base_batch
        mistakes = [
            # base_lr back for a smaller batch: unchanged everywhere, or only scaled up (the evidence: a larger batch)
            Mistake("the learning rate did not change with the batch size: the linear rule multiplies it by "
                    "batch_size / base_batch_size",
                    matches=lambda g: _close_number(g, base_lr) and _close_number(_rate_at(fn, base_lr, base_batch, 4), base_lr),
                    where="look at how batch_size enters your formula"),
            Mistake(f"a smaller batch ({batch} < {base_batch}) kept base_lr while a larger one is scaled up: the "
                    "linear rule scales down too (no max(1, ...) or if around the ratio)",
                    matches=lambda g: _close_number(g, base_lr) and batch < base_batch and _close_number(
                        _rate_at(fn, base_lr, base_batch, 4), 4 * base_lr),
                    where="look at what your formula does when batch_size is smaller than base_batch_size"),
            Mistake("the ratio is upside down: a larger batch gets a larger learning rate "
                    "(multiply by batch_size / base_batch_size)", lambda: base_lr * base_batch / batch,
                    where="look at the ratio of the batch sizes: which one is on top?"),
            Mistake("that is the square-root rule (sometimes used for Adam); the linear rule multiplies by the "
                    "ratio itself", lambda: base_lr * math.sqrt(ratio),
                    where="look at how the ratio of the batch sizes enters your formula"),
            Mistake("integer division (//) rounded the ratio of batch sizes; use /",
                    lambda: base_lr * (batch // base_batch),
                    where="look at the division of the batch sizes"),
            Mistake("floor division (//) rounded base_lr * batch_size / base_batch_size down to a whole number; "
                    "use /", lambda: (base_lr * batch) // base_batch,
                    where="look at the division in your formula"),
            Mistake("that is base_lr multiplied by batch_size alone: the linear rule multiplies it by the ratio "
                    "batch_size / base_batch_size (divide by base_batch_size too)", lambda: base_lr * batch),
            Mistake("that is base_lr divided by base_batch_size alone: the linear rule multiplies it by the ratio "
                    "batch_size / base_batch_size (multiply by batch_size too)", lambda: base_lr / base_batch),
        ]
        # A formula none of those explains: the learner's function at other batch sizes is the evidence (an
        # added term grows by equal steps without being proportional); after the named ones, which come first.
        found = None if _close_number(got, ratio * base_lr) else _grows_by_steps(fn, base_lr, base_batch)
        if found:
            mistakes.append(Mistake(found, matches=lambda _: True,
                                    where="look at how the ratio of the batch sizes enters your formula: added or "
                                          "multiplied?"))
        expect_close(got, ref.scaled_learning_rate(base_lr, base_batch, batch),
                     what=f"scaled_learning_rate({base_lr}, {base_batch}, {batch})", mistakes=mistakes, rtol=1e-6)
    passed("scaled_learning_rate", len(cases))


def _close_number(got: Any, want: float) -> bool:
    number = _number(got)
    return number is not None and math.isclose(number, want, rel_tol=1e-6, abs_tol=1e-12)


def _rate_at(fn: Callable[[float, int, int], float], base_lr: float, base_batch: int, times: int) -> float | None:
    """The learner's rate for a batch ``times`` base_batch_size (an extra call; None if it fails)."""
    try:
        return _number(call(fn, base_lr, base_batch, times * base_batch))
    except Exception:  # a probe that fails says nothing about the mistake it looks for
        return None


def _grows_by_steps(fn: Callable[[float, int, int], float], base_lr: float, base_batch: int) -> str | None:
    """The named cause, when the learner's rate grows by equal steps as the batch size grows but is not proportional.

    The evidence: the learner's function at 1, 2 and 3 times base_batch_size (extra calls): equal differences
    with a non-zero value left at batch size 0 is an added term, where the linear rule multiplies.
    """
    try:
        values = [_number(call(fn, base_lr, base_batch, k * base_batch)) for k in (1, 2, 3)]
    except Exception:  # a probe that fails says nothing about this mistake
        return None
    if any(v is None for v in values):
        return None
    v1, v2, v3 = values
    step = v2 - v1
    at_zero = v1 - step
    scale = max(abs(v) for v in values) or 1.0
    if abs((v3 - v2) - step) > 1e-9 * scale or abs(step) <= 1e-12 * scale or abs(at_zero) <= 1e-9 * scale:
        return None
    sizes = " -> ".join(str(k * base_batch) for k in (1, 2, 3))
    return (f"with base_lr={base_lr} and batch sizes {sizes}, yours gives {v1:.6g}, {v2:.6g}, {v3:.6g}: it grows by "
            f"the same step ({step:.6g}) each time but is not proportional to batch_size (it would be {at_zero:.6g} "
            f"at batch size 0), so something is added; the linear rule multiplies: base_lr * batch_size / "
            f"base_batch_size gives {base_lr:.6g}, {2 * base_lr:.6g}, {3 * base_lr:.6g}")


# ---------------------------------------------------------------- small training setups


class StepCase(NamedTuple):
    """A small training case: seed, number of batches (or micro-batches) and samples in each."""

    seed: int = 0
    batches: int = 4
    size: int = 8


N_IN, N_HIDDEN, N_OUT = 6, 12, 3
LR = 0.1


def _model(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(N_IN, N_HIDDEN), nn.ReLU(), nn.Linear(N_HIDDEN, N_OUT))


def _initial_params(seed: int) -> list[torch.Tensor]:
    """The parameters a fresh setup starts from, leaving the caller's random state as it was."""
    with torch.random.fork_rng(devices=[]):
        return _params(_model(seed))


def _batches(case: StepCase) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(100 + case.seed)
    return [(torch.randn(case.size, N_IN, generator=g), torch.randint(0, N_OUT, (case.size,), generator=g))
            for _ in range(case.batches)]


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _same_params(a: list[torch.Tensor], b: list[torch.Tensor], atol: float = 1e-6, rtol: float = 1e-5) -> bool:
    return len(a) == len(b) and all(torch.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b))


def _count_steps(optimizer: torch.optim.Optimizer) -> list[int]:
    steps = [0]

    def count(*_: Any) -> None:
        steps[0] += 1

    optimizer.register_step_post_hook(count)
    return steps


# ---------------------------------------------------------------- gradient accumulation


class AccumulationRun(NamedTuple):
    """One accumulated step: what it returned and what the check saw."""

    result: Any
    params: list[torch.Tensor]  # after the step
    step_at: list[int]  # for each optimizer step, the number of losses loss_fn had computed before it
    losses: int  # the losses loss_fn computed in all
    largest: int  # the most samples one forward pass was given
    backwards: int | None  # the backward passes run (None: the function ran elsewhere, where none could be counted)


def _accumulation_run(step: Callable[..., Any], case: StepCase, stale: bool = True,
                      learner: bool = True) -> AccumulationRun:
    """Run one accumulated step on a fresh setup."""
    with torch.random.fork_rng(devices=[]):
        model = _model(case.seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        losses = [0]
        step_at: list[int] = []
        optimizer.register_step_post_hook(lambda *_: step_at.append(losses[0]))
        largest = [0]  # the most samples one forward pass was given

        def note(module: nn.Module, args: tuple) -> None:
            if args and isinstance(args[0], torch.Tensor) and args[0].dim():
                largest[0] = max(largest[0], len(args[0]))

        model.register_forward_pre_hook(note)
        if stale:
            leftover_gradients(model, 900 + case.seed, record=False)  # an earlier step's, as mid-training
        micro = _batches(case)

        def loss_fn(*args: Any, **kwargs: Any) -> torch.Tensor:  # cross_entropy, counted
            losses[0] += 1
            return nn.functional.cross_entropy(*args, **kwargs)

        # task: "makes one optimizer step from the list of k equal-sized (inputs, targets) micro-batches"
        with backward_passes() as backwards:
            result = call(step, model, optimizer, loss_fn, micro,
                          allow=Allow(changed=(model, optimizer))) if learner else step(model, optimizer, loss_fn, micro)
        return AccumulationRun(result, _params(model), step_at, losses[0], largest[0],
                               backwards[0] if runs_here(step) else None)


def _expect_step_after_all(step_at: list[int], n_losses: int, k: int, what: str) -> None:
    """The one step comes after every micro-batch's loss (made with the loss_fn given): an earlier one leaves the
    later gradients out."""
    if step_at and n_losses >= k and step_at[0] < k:
        raise CheckError(f"{what}: the optimizer stepped after {step_at[0]} of the {k} micro-batches' losses, so the "
                         "gradients of the rest never reached it",
                         where="look at when optimizer.step() runs: the condition or the place that decides it",
                         mistake=f"step once, after all {k} backward passes (after the loop over the micro-batches)")


def _large_batch(case: StepCase) -> tuple[float, list[torch.Tensor]]:
    """The step accumulation must equal: one SGD step on all micro-batches at once."""
    with torch.random.fork_rng(devices=[]):
        model = _model(case.seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        micro = _batches(case)
        inputs, targets = torch.cat([x for x, _ in micro]), torch.cat([y for _, y in micro])
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item(), _params(model)


def _variant(case: StepCase, divide: bool, zero_each: bool, zero_first: bool,
             by_size: bool = False) -> list[torch.Tensor]:
    """Parameters after a wrong twin of accumulated_step (one step at the end; ``by_size``: loss / micro-batch size)."""
    def step(model, optimizer, loss_fn, micro):
        if zero_first:
            optimizer.zero_grad()
        for inputs, targets in micro:
            if zero_each:
                optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            (loss / (len(inputs) if by_size else len(micro)) if divide else loss).backward()
        optimizer.step()
    return _accumulation_run(step, case, learner=False).params


def _divided_by(ratio: float, k: int) -> str | None:
    """What a result ``ratio`` times the right one says about the number the micro-batch losses were divided by
    (each should be divided by k): None when it is no whole number, or is k."""
    if not math.isfinite(ratio) or ratio <= 0:
        return None
    divisor = k / ratio
    if abs(divisor - round(divisor)) > 1e-3 * max(1.0, divisor) or round(divisor) in (0, k):
        return None
    twice = " (divided by k twice?)" if round(divisor) == k * k else ""
    return (f"every micro-batch's loss was divided by {round(divisor)}{twice}, where it should be divided by k = {k}, "
            "the number of micro-batches (len of the list you were given)")


def _update_ratio(got: list[torch.Tensor], want: list[torch.Tensor], before: list[torch.Tensor]) -> float | None:
    """r when the learner's update is r times the right one (plain SGD is linear in the gradient), else None."""
    right = torch.cat([(w - b).flatten() for w, b in zip(want, before)])
    mine = torch.cat([(g - b).flatten() for g, b in zip(got, before)])
    ratio = float(mine @ right / (right @ right))
    return ratio if torch.allclose(mine, ratio * right, atol=1e-6, rtol=1e-3) else None


def check_accumulation_update(fn: Callable[..., float], inputs: Sequence[StepCase] | None = None) -> None:
    """The parameters after accumulated_step equal those after one SGD step on the whole large batch."""
    cases = inputs if inputs is not None else [StepCase(0, 4, 8), StepCase(1, 3, 5)]
    for case in cases:
        run = _accumulation_run(fn, case)
        got, step_at, n_losses = run.params, run.step_at, run.losses
        steps = len(step_at)
        what = f"accumulated_step over {case.batches} micro-batches of {case.size}"
        expect(steps > 0, f"{what}: optimizer.step() was never called, so the parameters did not change",
               where="look at the end of your function, after the loop over the micro-batches",
               mistake="call optimizer.step() once, after all k backward passes")
        expect(steps == 1, f"{what}: the optimizer stepped {steps} times"
               + (", once per micro-batch" if steps == case.batches else "") + "; expected once",
               where="look at where optimizer.step() is: inside the loop over the micro-batches, or after it?",
               mistake="accumulation means one optimizer.step() after all k backward passes")
        _expect_step_after_all(step_at, n_losses, case.batches, what)
        expect(run.largest <= case.size,
               f"{what}: one forward pass was given {run.largest} samples; accumulation runs each micro-batch "
               f"of {case.size} through the model on its own",
               where="look at what you pass to the model: one micro-batch at a time, or several joined?",
               mistake="joining the micro-batches (torch.cat) gives the same step, but needs the memory of the large "
                       "batch, which is what accumulation avoids: forward and backward each micro-batch in turn")
        expect(run.backwards is None or run.backwards >= case.batches or case.batches == 1,
               f"{what}: backward ran {run.backwards} time(s) for {case.batches} micro-batches; accumulation runs "
               "one backward per micro-batch",
               where="look at where backward() is called: once per micro-batch, inside the loop?",
               mistake="one backward on the sum of the micro-batches' losses gives the same step, but keeps every "
                       "micro-batch's graph (its activations) in memory until then, the memory of the large batch "
                       "that accumulation avoids: call (loss / k).backward() for each micro-batch in turn")
        _, want = _large_batch(case)
        if _same_params(got, want):
            continue
        k = case.batches
        wrong = [
            ("the update is k = {k} times too large: divide each micro-batch's loss by k (the number of "
             "micro-batches), so the summed gradients are the mean over the large batch",
             lambda: _variant(case, divide=False, zero_each=False, zero_first=True)),
            ("only the last micro-batch's gradient reached the step: zero_grad() inside the loop wipes the "
             "gradients the earlier micro-batches added; clear them once, before the loop",
             lambda: _variant(case, divide=True, zero_each=True, zero_first=True)),
            ("only the last micro-batch's gradient reached the step (zero_grad() inside the loop), and its loss "
             "was not divided by k: clear the gradients once, before the loop, and divide each loss by k",
             lambda: _variant(case, divide=False, zero_each=True, zero_first=True)),
            ("the update includes the gradients that were already in .grad when your function started: call "
             "optimizer.zero_grad() once before the first micro-batch",
             lambda: _variant(case, divide=True, zero_each=False, zero_first=False)),
            ("the loss was not divided by k, and the gradients already in .grad were added too: call "
             "optimizer.zero_grad() before the first micro-batch and divide each loss by k",
             lambda: _variant(case, divide=False, zero_each=False, zero_first=False)),
            ("each micro-batch's loss was divided by the micro-batch size ({size}), not by k = {k}, the number of "
             "micro-batches (loss_fn already averages over the samples of a micro-batch): divide by k",
             lambda: _variant(case, divide=True, zero_each=False, zero_first=True, by_size=True)),
        ]
        symptom = (f"{what}: the parameters after your step differ from one SGD step on all {k * case.size} "
                   f"samples at once (largest difference {max((a - b).abs().max().item() for a, b in zip(got, want)):.3g})")
        where = "look at how the micro-batch losses are scaled and where the gradients are cleared"
        for message, twin in wrong:
            if _same_params(got, twin()):
                raise CheckError(symptom, where=where, mistake=message.format(k=k, size=case.size))
        before = _initial_params(case.seed)
        ratio = _update_ratio(got, want, before)
        raise CheckError(symptom, where=where, mistake=_divided_by(ratio, k) if ratio is not None else None)
    passed("accumulated_step (equals one large-batch step)", len(cases))


def check_accumulation_steps(fn: Callable[..., float], inputs: Sequence[StepCase] | None = None) -> None:
    """accumulated_step steps the optimizer once and returns the large batch's mean loss as a float."""
    cases = inputs if inputs is not None else [StepCase(2, 4, 6), StepCase(3, 2, 7)]
    for case in cases:
        run = _accumulation_run(fn, case)
        got, step_at, n_losses = run.result, run.step_at, run.losses
        steps = len(step_at)
        what = f"accumulated_step over {case.batches} micro-batches of {case.size}"
        if steps == case.batches and steps > 1:
            raise CheckError(f"{what}: the optimizer stepped after every micro-batch ({steps} steps); expected "
                             "one step",
                             where="look at where optimizer.step() is: inside the loop over the micro-batches, or "
                                   "after it?",
                             mistake=f"that is {steps} small-batch steps, not one large-batch step. Call "
                                     "optimizer.step() once, after the loop")
        expect(steps == 1, f"{what}: the optimizer stepped {steps} times; it must step exactly once",
               where="look at every optimizer.step() in your function")
        _expect_step_after_all(step_at, n_losses, case.batches, what)
        want, want_params = _large_batch(case)
        k = case.batches
        # the update right: the losses backward saw were divided right, and only the number returned is off
        update_right = _same_params(run.params, want_params)

        def divided_by(value: Any) -> str | None:
            """The number the micro-batch losses were divided by, named, when ``value`` shows one."""
            number = _number(value)
            if number is None or not want:
                return None
            ratio = number / want
            if update_right and ratio > 0 and math.isfinite(ratio) and ratio != 1:
                factor = 1 / ratio if ratio < 1 else ratio
                whole = abs(factor - round(factor)) < 1e-3 * factor
                return (f"the step is right (the losses you backpropagated were divided by k), but the number you "
                        f"return is {round(factor) if whole else f'{factor:.3g}'} times too "
                        f"{'small' if ratio < 1 else 'large'}: the large batch's mean loss is the sum of the divided "
                        "losses, with nothing more done to it")
            return _divided_by(ratio, k)
        expect_close(got, want, what=f"{what}, the loss you returned", python_number=True, rtol=1e-4, mistakes=[
            Mistake(f"that is k = {k} times the mean: return the sum of the divided losses (loss / k), which is "
                    "the large batch's mean loss", lambda: want * k,
                    where="look at how you combine the micro-batches' losses into the number you return"),
            Mistake("that is the last micro-batch's loss only; return the large batch's mean loss "
                    "(the sum of the divided losses)",
                    lambda: nn.functional.cross_entropy(_model(case.seed)(_batches(case)[-1][0]),
                                                        _batches(case)[-1][1]).item() / k,
                    where="look at where the loss you return is computed: inside the loop, or after it?"),
            Mistake("that is the last micro-batch's loss only (not divided by k); return the large batch's mean "
                    "loss (the sum of the divided losses)",
                    lambda: nn.functional.cross_entropy(_model(case.seed)(_batches(case)[-1][0]),
                                                        _batches(case)[-1][1]).item(),
                    where="look at where the loss you return is computed: inside the loop, or after it?"),
            Mistake(f"that is the sum of the micro-batch losses divided by the micro-batch size ({case.size}), "
                    f"not by k = {k}, the number of micro-batches: divide each loss by k",
                    lambda: want * k / case.size, where="look at what you divide each micro-batch's loss by"),
            Mistake(divided_by(got) or "", matches=lambda value: divided_by(value) is not None,
                    where="look at the number you return, and what you divide it by" if update_right else
                    "look at what you divide each micro-batch's loss by"),
        ])
    passed("accumulated_step (one step, the large batch's loss)", len(cases))


# ---------------------------------------------------------------- mixed precision


class AmpCase(NamedTuple):
    """A mixed-precision case: seed, batch size, and the autocast dtype asked for."""

    seed: int = 0
    size: int = 16
    dtype: torch.dtype = torch.bfloat16


class AutocastSpy(nn.Module):
    """An identity layer that records the autocast state in the forward pass and, via a tensor hook, in backward."""

    def __init__(self, device_type: str = "cpu") -> None:
        super().__init__()
        self.device_type = device_type
        self.forward_states: list[tuple[bool, torch.dtype, bool]] = []
        self.backward_states: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        other = "cuda" if self.device_type != "cuda" else "cpu"
        self.forward_states.append((torch.is_autocast_enabled(self.device_type),
                                    torch.get_autocast_dtype(self.device_type),
                                    torch.is_autocast_enabled(other)))
        if x.requires_grad:
            x.register_hook(self._in_backward)
        return x

    def _in_backward(self, grad: torch.Tensor) -> None:
        self.backward_states.append(torch.is_autocast_enabled(self.device_type))


class ScalerSpy:
    """A stand-in for torch.amp.GradScaler that really scales (by a fixed factor) and records each call.

    ``scale(loss)`` multiplies by the factor; ``step(optimizer)`` divides the
    gradients by it (unless ``unscale_`` already did) and steps only when every
    gradient is finite; ``update()`` is recorded.
    """

    def __init__(self, factor: float = 1024.0, enabled: bool = True) -> None:
        self.enabled = enabled
        self.factor = factor if enabled else 1.0  # a disabled GradScaler scales by nothing
        self.calls: list[str] = []
        self._unscaled: set[int] = set()

    def scale(self, outputs: torch.Tensor) -> torch.Tensor:
        self.calls.append("scale")
        return outputs * self.factor

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self.calls.append("unscale_")
        if id(optimizer) in self._unscaled:
            return
        self._unscaled.add(id(optimizer))
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.div_(self.factor)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("step")
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
            self.calls.pop()  # an unscale_ inside step is not the learner's call
        self._unscaled.discard(id(optimizer))
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        if all(torch.isfinite(grad).all() for grad in grads):
            return optimizer.step(*args, **kwargs)
        return None

    def update(self, new_scale: Any = None) -> None:
        self.calls.append("update")

    def get_scale(self) -> float:
        return self.factor

    def is_enabled(self) -> bool:
        return self.enabled


def _amp_model(seed: int) -> tuple[nn.Sequential, AutocastSpy]:
    torch.manual_seed(seed)
    spy = AutocastSpy("cpu")
    return nn.Sequential(nn.Linear(N_IN, 32), spy, nn.ReLU(), nn.Linear(32, N_OUT)), spy


def _amp_data(case: AmpCase) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(300 + case.seed)
    return torch.randn(case.size, N_IN, generator=g), torch.randint(0, N_OUT, (case.size,), generator=g)


class AmpRun(NamedTuple):
    result: Any
    params: list[torch.Tensor]
    before: list[torch.Tensor]
    spy: AutocastSpy
    scaler: ScalerSpy
    steps: int
    warnings: list[str]
    loss_under_autocast: list[bool]  # for each call of loss_fn: was autocast on for the inputs' device?
    arrivals: list[str]  # .grad of each parameter as its gradient arrived: "none", "zeros" or "values"
    cleared_at_step: list[bool]  # for each optimizer step: was every .grad None or zeros when it began?


def _amp_run(fn: Callable[..., float], case: AmpCase, factor: float) -> AmpRun:
    with torch.random.fork_rng(devices=[]):
        model, spy = _amp_model(case.seed)
        before = _params(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        steps = _count_steps(optimizer)
        cleared_at_step: list[bool] = []
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: cleared_at_step.append(all(
            p.grad is None or not bool(p.grad.any()) for group in opt.param_groups for p in group["params"])))
        arrivals = leftover_gradients(model, 900 + case.seed)  # an earlier step's, which this one must not add to
        under_autocast: list[bool] = []

        def loss_fn(*args: Any, **kwargs: Any) -> torch.Tensor:  # cross_entropy, watched
            under_autocast.append(torch.is_autocast_enabled("cpu"))
            return nn.functional.cross_entropy(*args, **kwargs)
        # as in the lesson: a working scaler for float16, a disabled one (enabled=False) for bfloat16
        scaler = ScalerSpy(factor, enabled=case.dtype == torch.float16)
        inputs, targets = _amp_data(case)
        given: list[torch.dtype] = []  # the dtype of what each forward pass was given
        model.register_forward_pre_hook(lambda _, args: given.extend(a.dtype for a in args[:1]
                                                                     if isinstance(a, torch.Tensor)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # task: "one training step with automatic mixed precision" (scaler.update() adapts the scaler)
            try:
                result = call(fn, model, optimizer, loss_fn, inputs, targets, scaler, case.dtype,
                              allow=Allow(changed=(model, optimizer, scaler)))
            except CheckError as error:
                if error.__cause__ is None or case.dtype not in given:
                    raise
                raise CheckError(str(error), where="look at what your function does to inputs before the forward "
                                 "pass", mistake=f"the model was given inputs of dtype {case.dtype}: you cast them "
                                 "yourself, while the model's weights stay float32. Leave the inputs as they are: "
                                 "torch.autocast casts inside each operation that gains from it") from error.__cause__
        return AmpRun(result, _params(model), before, spy, scaler, steps[0], [str(w.message) for w in caught],
                      under_autocast, arrivals.kinds(), cleared_at_step)


def _expect_fresh_gradients(arrivals: list[str], what: str, clear: str, cleared_at_step: Sequence[bool] = ()) -> None:
    """Backward must not add to gradients already in .grad when the function was called (the task's rule), and the
    step must find the gradients backward wrote (not cleared between backward and the step)."""
    if any(cleared_at_step) and arrivals:
        raise CheckError(f"{what}: when the optimizer stepped, every gradient was None or zero, though backward had "
                         "written them", where="look at what runs between backward and the step",
                         mistake=f"{clear} between backward and the step clears what backward wrote, so the step "
                                 f"changes nothing: call it at the start, before the forward pass")
    if "values" in arrivals:
        raise CheckError(f"{what}: the parameters' .grad already held gradients from an earlier step when your "
                         "function was called, and backward added the new gradients to them",
                         where="look at what happens to the gradients before backward",
                         mistake=f"backward adds to .grad; call {clear} before backward so that the gradients of "
                                 "earlier steps do not leak into this one")


def _float32_step(case: AmpCase) -> tuple[float, list[torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        model, _ = _amp_model(case.seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        inputs, targets = _amp_data(case)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item(), _params(model)


def _relative_update_error(got: list[torch.Tensor], want: list[torch.Tensor], before: list[torch.Tensor]) -> float:
    diff = sum(((g - w) ** 2).sum() for g, w in zip(got, want)) ** 0.5
    size = sum(((w - b) ** 2).sum() for w, b in zip(want, before)) ** 0.5
    return float(diff / size)


AMP_TOLERANCE = 0.05  # relative error of the update against float32; bfloat16 keeps about 3 significant digits


def check_amp_autocast(fn: Callable[..., float], inputs: Sequence[AmpCase] | None = None) -> None:
    """Forward and loss under autocast (the inputs' device type, the dtype asked), backward outside, close to float32."""
    cases = inputs if inputs is not None else [AmpCase(0, 16, torch.float16), AmpCase(1, 12, torch.bfloat16)]
    for case in cases:
        run = _amp_run(fn, case, factor=1.0)
        what = f"mixed_precision_step (dtype={case.dtype}, inputs on the CPU)"
        expect(bool(run.spy.forward_states), f"{what}: the model was never called",
               where="look for the forward pass model(inputs) in your function")
        enabled, dtype, other_enabled = run.spy.forward_states[0]
        if not enabled:
            cuda_asked = other_enabled or any("CUDA is not available" in w for w in run.warnings)
            raise CheckError(f"{what}: the forward pass did not run under autocast for the inputs' device 'cpu'"
                             + (" (you asked for device_type='cuda')" if cuda_asked else ""),
                             where="look at the `with torch.autocast(...)` block: its device_type, and whether the "
                                   "forward pass is inside it",
                             mistake="wrap the forward pass and the loss in "
                                     "torch.autocast(device_type=inputs.device.type, dtype=dtype)")
        expect(dtype == case.dtype, f"{what}: autocast ran in {dtype}, but the dtype you were given is {case.dtype}",
               where="look at the arguments of torch.autocast",
               mistake="pass dtype=dtype (float16 on CUDA, bfloat16 on the CPU)")
        expect(bool(run.loss_under_autocast) and all(run.loss_under_autocast),
               f"{what}: loss_fn was called outside the autocast block"
               + ("" if run.loss_under_autocast else " (or never called)")
               + "; the task asks for the forward pass and the loss under autocast",
               where="look at where the loss is computed: inside the `with torch.autocast(...)` block, next to the "
                     "forward pass")
        if any(run.spy.backward_states):
            unscaled = case.dtype == torch.float16 and "scale" not in run.scaler.calls
            raise CheckError(f"{what}: backward ran inside the autocast block"
                             + (" on the unscaled float16 loss: small float16 gradients underflow to zero."
                                if unscaled else "."),
                             where="look at the indentation of the backward call: is it inside the `with` block?",
                             mistake="autocast is for the forward pass and the loss only: end the with block, then "
                                     "call scaler.scale(loss).backward()")
        expect(run.steps == 1, f"{what}: the optimizer stepped {run.steps} times; one training step steps it once "
               "(through scaler.step(optimizer))",
               where="look at every optimizer.step() and scaler.step(optimizer) in your function")
        _expect_fresh_gradients(run.arrivals, what, "optimizer.zero_grad()", run.cleared_at_step)
        want_loss, want = _float32_step(case)
        error = _relative_update_error(run.params, want, run.before)
        expect(error < AMP_TOLERANCE, f"{what}: the parameter update differs from the float32 step by "
               f"{error:.1%} (mixed precision should stay within {AMP_TOLERANCE:.0%})",
               where="look at each step of the training step: zero_grad, forward and loss under autocast, backward, "
                     "step")
        expect_close(run.result, want_loss, what=f"{what}, the loss you returned", python_number=True, rtol=2e-2,
                     atol=1e-3)
    passed("mixed_precision_step (autocast)", len(cases))


def check_amp_scaler(fn: Callable[..., float], inputs: Sequence[AmpCase] | None = None) -> None:
    """scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update(), in that order; the update unscaled."""
    cases = inputs if inputs is not None else [AmpCase(2, 16, torch.float16), AmpCase(3, 8, torch.bfloat16)]
    for case in cases:
        run = _amp_run(fn, case, factor=1024.0)
        what = f"mixed_precision_step with a GradScaler (dtype={case.dtype})"
        calls = run.scaler.calls
        _expect_fresh_gradients(run.arrivals, what, "optimizer.zero_grad()", run.cleared_at_step)
        converted = sorted({str(p.dtype) for p in run.params} - {str(p.dtype) for p in run.before})
        expect(not converted, f"{what}: after your step the model's weights are {', '.join(converted)}; they were "
               f"{run.before[0].dtype}",
               where="look for .to(dtype), .half() or .bfloat16() on the model",
               mistake="autocast computes in the low precision while the weights stay float32 (the optimizer "
                       "updates them in full precision): do not convert the model")
        if not run.scaler.is_enabled():  # bfloat16: a disabled scaler, which an answer may also leave unused
            expect(run.steps == 1, f"{what}, a disabled scaler: the optimizer stepped {run.steps} times; "
                   "one training step steps it once",
                   where="look at every optimizer.step() and scaler.step(optimizer) in your function")
            _, want = _float32_step(case)
            error = _relative_update_error(run.params, want, run.before)
            expect(error < AMP_TOLERANCE, f"{what}, a disabled scaler: the parameter update differs from the "
                   f"float32 step by {error:.1%}",
                   where="look at the scaler calls: with a disabled scaler they must pass the loss and the step "
                         "through unchanged (scaler.scale(loss).backward(), scaler.step(optimizer))")
            continue
        expect("scale" in calls, f"{what}: scaler.scale(loss) was never called, so backward ran on the unscaled "
               "loss",
               where="look at what you call backward() on",
               mistake="in float16, small gradients underflow to zero. Call scaler.scale(loss).backward()")
        if "step" not in calls:
            expect(run.steps == 0, f"{what}: scaler.step(optimizer) was never called, and the optimizer stepped "
                   f"{run.steps} time(s)",
                   where="look at how your function steps the optimizer",
                   mistake="you called optimizer.step() directly: the gradients are still multiplied by the scale "
                           "(1024 here), and steps with inf/NaN gradients are not skipped. Call scaler.step(optimizer)")
            raise CheckError(f"{what}: the optimizer never stepped",
                             where="look at the end of your training step, after backward",
                             mistake="call scaler.step(optimizer)")
        expect("update" in calls, f"{what}: scaler.update() was never called",
               where="look at the end of your training step, after scaler.step(optimizer)",
               mistake="the scale never adapts, so after a float16 overflow it is not lowered (every later step "
                       "would be skipped) and it never grows back. Call scaler.update() after scaler.step(optimizer)")
        expect(calls.index("scale") < calls.index("step") < len(calls) - 1 - calls[::-1].index("update"),
               f"{what}: the calls came in the order {calls}",
               where="look at the order of the scaler calls in your training step",
               mistake="scale the loss and backward, then scaler.step(optimizer), then scaler.update()")
        expect(run.steps == 1, f"{what}: the optimizer stepped {run.steps} times; expected once",
               where="look at every optimizer.step() and scaler.step(optimizer) in your function",
               mistake="step it once, through scaler.step(optimizer)")
        _, want = _float32_step(case)
        error = _relative_update_error(run.params, want, run.before)
        expect(error < AMP_TOLERANCE, f"{what}: the parameter update differs from the float32 step by {error:.1%}",
               where="look at each step of the training step: zero_grad, forward and loss under autocast, "
                     "scaler.scale(loss).backward(), scaler.step, scaler.update")
        expect_close(run.result, _float32_step(case)[0], what=f"{what}, the loss you returned", python_number=True,
                     rtol=2e-2, atol=1e-3, mistakes=[Mistake("that is the scaled loss (multiplied by the scale "
                                                              "factor, 1024 here); return loss.item()",
                                                              lambda: _float32_step(case)[0] * 1024,
                                                              where="look at which loss you return: the one "
                                                                    "before or after scaler.scale")])
    passed("mixed_precision_step (GradScaler)", len(cases))


# ---------------------------------------------------------------- activation checkpointing


class CheckpointCase(NamedTuple):
    """A checkpointing case: seed, batch size, number of blocks, and whether the input requires grad."""

    seed: int = 0
    size: int = 5
    blocks: int = 3
    input_requires_grad: bool = False


def _blocks(case: CheckpointCase) -> nn.Sequential:
    torch.manual_seed(case.seed)
    width = 10
    layers = [nn.Sequential(nn.Linear(N_IN if i == 0 else width, width), nn.Tanh()) for i in range(case.blocks)]
    return nn.Sequential(*layers, nn.Linear(width, N_OUT))


def _ckpt_input(case: CheckpointCase) -> torch.Tensor:
    g = torch.Generator().manual_seed(500 + case.seed)
    return torch.randn(case.size, N_IN, generator=g).requires_grad_(case.input_requires_grad)


def _plain_grads(case: CheckpointCase) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
    blocks, x = _blocks(case), _ckpt_input(case)
    out = blocks(x)
    _weighted(out).backward()
    return out.detach(), [p.grad.clone() for p in blocks.parameters()], x.grad


def _weighted(out: torch.Tensor) -> torch.Tensor:
    weights = torch.linspace(-1.0, 2.0, out.numel()).reshape(out.shape)
    return (out * weights).sum()


def _entry_counted(forward: Callable[..., Any], order: list[int], index: int) -> Callable[..., Any]:
    """``forward``, appending ``index`` to ``order`` each time it starts."""
    @functools.wraps(forward)
    def counted(*args: Any, **kwargs: Any) -> Any:
        order.append(index)
        return forward(*args, **kwargs)
    return counted


def _nested_visits(blocks: nn.Sequential) -> dict[str, bool]:
    """Watch how ``blocks`` is run: "whole" once a block is given what the Sequential itself returned, "stray" once
    a layer inside a block runs outside its block's forward (what a loop over ``blocks.modules()`` does)."""
    seen = {"whole": False, "stray": False}
    active = [0]
    whole = blocks.forward
    made_by_whole: list[torch.Tensor] = []  # held, so that no id is reused

    def run_whole(*args: Any, **kwargs: Any) -> Any:
        out = whole(*args, **kwargs)
        made_by_whole.append(out)
        return out

    def inside(forward: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if active[0] == 0 and args and any(args[0] is out for out in made_by_whole):
                seen["whole"] = True
            active[0] += 1
            try:
                return forward(*args, **kwargs)
            finally:
                active[0] -= 1
        return run

    def note(*_: Any) -> None:
        seen["stray"] = seen["stray"] or active[0] == 0

    blocks.forward = run_whole
    for block in blocks:
        block.forward = inside(block.forward)
        for layer in block.modules():
            if layer is not block:
                layer.register_forward_pre_hook(note)
    return seen


def check_checkpointed_forward(fn: Callable[..., torch.Tensor], inputs: Sequence[CheckpointCase] | None = None) -> None:
    """Same output and gradients as the plain forward; every block recomputed in backward; works for inputs without grad."""
    cases = inputs if inputs is not None else [CheckpointCase(0, 5, 3, False), CheckpointCase(1, 4, 2, False)]
    for case in cases:
        with torch.random.fork_rng(devices=[]):
            want_out, want_grads, want_x_grad = _plain_grads(case)
            blocks, x = _blocks(case), _ckpt_input(case)
            order: list[int] = []  # every block's forward, in the order they ran (forward, then recomputations)
            for i, block in enumerate(blocks):
                # counted on entry: recomputation stops early (inside forward) once it has rebuilt what backward
                # needs. The block's own forward is wrapped, not hooked, so that block(x) and a checkpoint given
                # block.forward (which skips the hooks) both count
                block.forward = _entry_counted(block.forward, order, i)
            visits = _nested_visits(blocks)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                what = f"checkpointed_forward({len(blocks)} blocks, input requires_grad={case.input_requires_grad})"
                try:
                    out = call(fn, blocks, x)
                    # task: "Output and gradients must equal the plain blocks(inputs)": the output keeps its graph
                    expect_tensor(out.detach() if isinstance(out, torch.Tensor) else out, want_out, what=what,
                                  check_dtype=True)
                except CheckError as error:
                    if not (visits["whole"] or visits["stray"]):
                        raise
                    ran = ("the whole network (the Sequential you were given) ran as one step of your loop, and its "
                           "blocks ran again after it" if visits["whole"] else
                           "layers inside a block also ran on their own, outside their block")
                    raise CheckError(error.symptom, where="look at what your loop goes over",
                                     mistake=f"{ran}: blocks.modules() yields the Sequential itself, then every block, "
                                             "then every layer inside them. Loop over the blocks alone (for block in "
                                             "blocks, or blocks.children())") from error.__cause__
                said = " ".join(str(w.message) for w in caught)
                reentrant = "None of the inputs have requires_grad=True" in said
                implicit = "use_reentrant parameter should be passed explicitly" in said
                advice = (" You did not pass use_reentrant, and it still defaults to True." if implicit else "")
                if not out.requires_grad:
                    expect(not reentrant, f"{what}: the output does not require grad, so no parameter can get a "
                           "gradient",
                           where="look at the arguments of your checkpoint calls",
                           mistake="checkpoint with use_reentrant=True passes gradients only to inputs that "
                                   "require grad, and the input of the first block does not." + advice
                           + " Pass use_reentrant=False")
                    raise CheckError(f"{what}: the output does not require grad, so no parameter can get a gradient",
                                     where="look for .detach(), torch.no_grad() or a new tensor between the blocks "
                                           "and your return (is it detached, or computed under torch.no_grad()?)")
                forward_runs = len(order)
                try:
                    _weighted(out).backward()
                except CheckpointError as error:
                    first = str(error).strip().splitlines()[0]
                    raise CheckError(f"{what}: backward failed while recomputing a checkpointed block: the "
                                     f"recomputation did not match the forward pass ({first})",
                                     where="checkpoint runs the function you pass it again during backward: it "
                                           "must compute the same thing then as in the forward pass (a lambda that "
                                           "reads a loop variable sees that variable's last value)") from None
            missing = sorted({name.split(".")[0] for name, p in blocks.named_parameters() if p.grad is None})
            if missing:
                expect(not reentrant, f"{what}: the parameters of block(s) {', '.join(missing)} got no gradient",
                       where="look at the arguments of your checkpoint calls",
                       mistake="checkpoint with use_reentrant=True passes gradients only through inputs that require "
                               "grad, and that block's input does not." + advice + " Pass use_reentrant=False")
                raise CheckError(f"{what}: the parameters of block(s) {', '.join(missing)} got no gradient",
                                 where=f"look at how block(s) {', '.join(missing)} are called: is the output built "
                                       "from them, without .detach() or torch.no_grad()?")
            for (name, p), want in zip(blocks.named_parameters(), want_grads):
                expect_tensor(p.grad, want, what=f"{what}: the gradient of {name}")
            if case.input_requires_grad:
                expect(x.grad is not None, f"{what}: the input requires grad but got no gradient",
                       where="look for .detach() or a copy of the input before the first block")
                expect_tensor(x.grad, want_x_grad, what=f"{what}: the input's gradient")
            # recomputed: run again during backward (a block run twice in the forward pass is not)
            once = [str(i) for i in range(len(blocks)) if i not in order[forward_runs:]]
            twice_forward = forward_runs >= 2 * len(blocks)
            if len(once) == len(blocks):
                raise CheckError(f"{what}: " + ("nothing was recomputed in backward: every block ran twice in the "
                                                "forward pass, and the output you return comes from the plain "
                                                "run, whose graph stores every activation" if twice_forward else
                                                "every block ran only once, so nothing was recomputed in backward "
                                                "and all activations were stored as usual"),
                                 where="look at which tensor you return: the one your checkpointed loop built?"
                                 if twice_forward else "look at how each block is called in your loop",
                                 mistake="return the output of the checkpointed loop itself" if twice_forward else
                                 "wrap each block, x = checkpoint(block, x, use_reentrant=False)")
            expect(not once, f"{what}: block(s) {', '.join(once)} were not recomputed in backward (not checkpointed)",
                   where=f"look at how block(s) {', '.join(once)} are called",
                   mistake="wrap every block, x = checkpoint(block, x, use_reentrant=False)")
            _expect_one_block_per_checkpoint(order[forward_runs:], len(blocks), what)
    passed("checkpointed_forward", len(cases))


def _expect_one_block_per_checkpoint(recomputed: list[int], n_blocks: int, what: str) -> None:
    """Backward recomputes each checkpoint on its own, last block first; blocks recomputed in forward order share one.

    task: "runs the blocks ... one after another, each under checkpoint(...)": a checkpoint around several blocks
    rebuilds all their activations at once in backward (the memory the lesson saves per block is not saved).
    """
    together: list[list[int]] = []
    for i in recomputed:
        if together and together[-1][-1] < i:  # the next block of the same recomputation
            together[-1].append(i)
        else:
            together.append([i])
    shared = [run for run in together if len(run) > 1]
    if not shared:
        return
    whole = len(shared[0]) == n_blocks
    raise CheckError(f"{what}: in backward, blocks {', '.join(map(str, shared[0]))} were recomputed together, in one "
                     "go; a block under its own checkpoint is recomputed alone, when backward reaches it (the last "
                     "block first)",
                     where="look at what you pass to checkpoint: the task asks for each block under checkpoint",
                     mistake=("one checkpoint around the whole Sequential" if whole else
                              "one checkpoint around several blocks")
                     + " keeps only its input, but backward then rebuilds the activations of all those blocks at "
                       "once, so they are all in memory together again, as without checkpointing: call checkpoint "
                       "once per block")


# ---------------------------------------------------------------- losses on the device, one sync

_PRINTED = "print or f-string of a tensor"
_SYNC_METHODS = {"item": ".item()", "cpu": ".cpu()", "tolist": ".tolist()", "numpy": ".numpy()",
                 "__float__": "float()", "__int__": "int()",
                 # an if (or while, and, not) on a tensor asks for its truth value: a read (the notebook lists it)
                 "__bool__": "an if on a tensor (bool())",
                 # printing or formatting a tensor reads its values too (the notebook lists print(t) as a sync point)
                 "__format__": _PRINTED, "__repr__": _PRINTED}
_WHERE_SYNCS = ("look inside your loop for .item(), float(), .cpu() or .tolist(), for a tensor printed or put in "
                "an f-string (print(loss), f\"{loss}\"), and for an if on a tensor (if torch.isfinite(loss):)")


class SyncRead(NamedTuple):
    """One read of a tensor's value (a sync point on a GPU): how, on what, and when."""

    how: str  # ".item()", "float()", ...
    requires_grad: bool  # the tensor read was still part of an autograd graph
    after_losses: int  # how many losses had been computed by then
    made_by: str = ""  # the autograd node that made the tensor read (NllLossBackward0: a loss itself, not a total)


@contextlib.contextmanager
def _counting_syncs(losses_so_far: Callable[[], int] = lambda: 0) -> Iterator[list[SyncRead]]:
    """While open, every call of Tensor.item/cpu/tolist/numpy/float()/int() and every print or format is recorded.

    A read made inside another recorded one (``print(t)`` calls ``.item()`` or ``.tolist()`` itself) is not
    counted again, nor is a read of what ``.cpu()`` returned (``t.cpu().item()``: on a GPU, only the copy waits).
    """
    seen: list[SyncRead] = []
    depth = [0]
    on_host: list[torch.Tensor] = []  # what .cpu() returned (held, so that no id is reused)

    def counting(name: str) -> Callable[..., Any]:
        original = getattr(torch.Tensor, name)

        def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0 and not any(self is copy for copy in on_host):
                seen.append(SyncRead(_SYNC_METHODS[name], self.requires_grad, losses_so_far(),
                                     type(self.grad_fn).__name__ if self.grad_fn is not None else ""))
            depth[0] += 1
            try:
                result = original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
            if name == "cpu" and isinstance(result, torch.Tensor):
                # on this CPU-only machine .cpu() returns the tensor itself; on a GPU it is a new one
                result = result.view_as(result) if result is self else result
                on_host.append(result)
            return result
        return method

    with contextlib.ExitStack() as stack:
        for name in _SYNC_METHODS:
            stack.enter_context(mock.patch.object(torch.Tensor, name, counting(name)))
        yield seen


class EpochRun(NamedTuple):
    result: Any
    params: list[torch.Tensor]
    syncs: list[SyncRead]
    arrivals: list[str]  # .grad of each parameter as its gradient arrived, in order: "none", "zeros", "values"
    n_params: int
    losses: list[torch.Tensor]  # every loss loss_fn returned, detached, in order
    sizes: list[int]  # the number of samples in each batch
    emptied: int  # calls of torch.cuda.empty_cache()


def _last_smaller(case: StepCase) -> int:
    """The size of the epoch's last batch: smaller than the others, as a loader's last batch often is."""
    return max(1, case.size // 2)


def _epoch_run(fn: Callable[..., float], case: StepCase, learner: bool = True) -> EpochRun:
    """Train one epoch on a fresh setup whose .grad holds an earlier step's leftovers, watching syncs and .grad."""
    with torch.random.fork_rng(devices=[]):
        model = _model(case.seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        # gradients from before the call: a correct epoch clears them before backward
        arrivals = leftover_gradients(model, 900 + case.seed)
        batches = _batches(case)
        inputs, targets = batches[-1]  # a smaller last batch: the mean per batch and per sample then differ
        batches[-1] = (inputs[:_last_smaller(case)].clone(), targets[:_last_smaller(case)].clone())
        losses: list[torch.Tensor] = []

        def loss_fn(*args: Any, **kwargs: Any) -> torch.Tensor:  # cross_entropy, recorded
            loss = nn.functional.cross_entropy(*args, **kwargs)
            losses.append(loss.detach())
            return loss

        # section 9: empty_cache() belongs nowhere in a training loop (on a CPU it does nothing, so it is counted)
        with _counting_syncs(lambda: len(losses)) as syncs, \
                mock.patch.object(torch.cuda, "empty_cache", wraps=torch.cuda.empty_cache) as empty_cache:
            # task: "trains on every (inputs, targets) in batches"
            result = call(fn, model, optimizer, loss_fn, batches, allow=Allow(changed=(model, optimizer))) \
                if learner else fn(model, optimizer, loss_fn, batches)
        return EpochRun(result, _params(model), syncs, arrivals.kinds(), len(list(model.parameters())), losses,
                        [len(x) for x, _ in batches], empty_cache.call_count)


@functools.cache
def _loss_node() -> str:
    """The name of a cross-entropy loss's autograd node (what the check's loss_fn returns), asked of torch once."""
    loss = nn.functional.cross_entropy(torch.zeros(1, 2, requires_grad=True), torch.zeros(1, dtype=torch.long))
    return type(loss.grad_fn).__name__


def check_train_epoch_on_device(fn: Callable[..., float], inputs: Sequence[StepCase] | None = None) -> None:
    """Trains like the reference, returns the mean loss per batch, syncs once, and frees gradients (set_to_none)."""
    cases = inputs if inputs is not None else [StepCase(4, 5, 6), StepCase(5, 3, 4)]
    for case in cases:
        run = _epoch_run(fn, case)
        want_run = _epoch_run(ref.train_epoch_on_device, case, learner=False)
        want, want_params = want_run.result, want_run.params
        got, syncs = run.result, run.syncs
        what = (f"train_epoch_on_device over {case.batches} batches of {case.size} samples"
                + (f" (the last one {_last_smaller(case)})" if _last_smaller(case) < case.size else ""))
        n = case.batches
        expect(not run.emptied, f"{what}: torch.cuda.empty_cache() was called {run.emptied} time(s)",
               where="look for torch.cuda.empty_cache() in your function",
               mistake="it hands PyTorch's cached GPU memory back, which the next step must then request again, "
                       "slowly: it belongs nowhere in a training loop (section 9)")
        if len(syncs) >= n:
            shown = ", ".join(sorted({sync.how for sync in syncs}))
            in_loop = [sync for sync in syncs if sync.after_losses < n]
            counted = (f"{len(syncs)} reads of tensor values ({shown})" if any(sync.how == _PRINTED for sync in syncs)
                       else f"{len(syncs)} calls of {shown}")
            symptom = (f"{what}: {counted} for {n} batches, "
                       + (f"{len(in_loop)} of them before the last batch's loss" if in_loop
                          else "all after the last batch's loss")
                       + ": each one makes the CPU wait until the GPU has finished (a sync point)")
            if in_loop and all(sync.how == _PRINTED for sync in in_loop):
                raise CheckError(symptom, where=_WHERE_SYNCS,
                                 mistake="printing a tensor (print(loss), f\"{loss}\") copies its value to the CPU, "
                                         "so it waits for the GPU like .item(): print the total once, after the "
                                         "loop, or drop the print")
            if in_loop:
                raise CheckError(symptom, where=_WHERE_SYNCS,
                                 mistake="keep a running total on the device (add loss.detach() to it) and read it "
                                         "once, after the loop")
            raise CheckError(symptom, where="look after your loop for code that reads tensors one at a time: "
                                            "torch.tensor(list of tensors), sum() or statistics over a list of "
                                            "tensors, a loop of .item()",
                             mistake="combine the losses on the device first (a running total, or torch.stack), "
                                     "then read that one tensor once")
        expect(len(syncs) <= 1, f"{what}: {len(syncs)} sync points ({', '.join(sync.how for sync in syncs)}); "
               "expected at most one",
               where="look at every line that reads a tensor's value into Python (.item(), float(), print)",
               mistake="one .item() after the loop is enough")
        # reading a loss itself is no leak (its graph goes with the next one); a total made from the losses is
        if any(sync.requires_grad and sync.made_by != _loss_node() for sync in syncs):
            raise CheckError(f"{what}: the tensor you read with {syncs[0].how} at the end still requires grad: it is "
                             "built from the losses themselves, so the autograd graph of every step stayed alive "
                             "until then", where="look at how you add each loss to the running total",
                             mistake="add loss.detach() to the total: the total needs the loss's value, not its graph "
                                     "(a total built from the losses keeps every step's graph in memory)")
        before = _initial_params(case.seed)
        expect(not _same_params(run.params, before, atol=0, rtol=0),
               f"{what}: the parameters are unchanged after the epoch: no step updated them",
               where="look at the order of each batch's steps: zero_grad, forward, loss, backward, step",
               mistake="optimizer.step() applies the gradients in .grad: call it after backward, with no zero_grad "
                       "between them (zero_grad clears what backward wrote)")
        values_at = sorted({i // run.n_params for i, arrival in enumerate(run.arrivals) if arrival == "values"})
        if values_at and values_at != [0]:
            raise CheckError(f"{what}: backward added to gradients left over from the previous step "
                             f"(batch {values_at[-1]})", where="look at where you clear the gradients",
                             mistake="call optimizer.zero_grad(set_to_none=True) at the start of every step")
        if values_at:
            raise CheckError(f"{what}: the parameters' .grad already held gradients from an earlier step when your "
                             "function was called, and the first batch's backward added to them",
                             where="look at where you clear the gradients: before or after backward?",
                             mistake="call optimizer.zero_grad(set_to_none=True) at the start of every step, before "
                                     "backward, not after the step")
        expect("zeros" not in run.arrivals, f"{what}: the gradients were tensors of zeros when backward wrote the new "
               "ones",
               where="look at how you clear the gradients",
               mistake="optimizer.zero_grad(set_to_none=True) sets them to None instead, so backward writes fresh "
                       "gradients (no memory spent on zeros, no extra addition)")
        expect(_same_params(run.params, want_params), f"{what}: the parameters after your epoch differ from "
               "training on every batch in order (zero_grad, forward, loss, backward, step)",
               where="look at each batch's steps: moved to the device, zero_grad, forward, loss, backward, step")
        expect(not isinstance(got, torch.Tensor), f"{what} should return a Python float, but returned "
               f"{describe(got)}",
               where="look at the value you return",
               mistake="call .item() on it once, at the end")
        losses, sizes = [loss.item() for loss in want_run.losses], want_run.sizes
        expect_close(got, want, what=f"{what}, the loss you returned", python_number=True, mistakes=[
            Mistake(f"that is the sum over the {n} batches; return the mean loss per batch", lambda: want * n,
                    where="look at the last step: from the total to a mean per batch"),
            Mistake(f"that is the sum of the {n} batch losses divided by {n - 1}, one less than the number of "
                    f"batches (an index counted from 0 ends at {n - 1}); divide by the number of batches",
                    lambda: sum(losses) / (n - 1), where="look at what you divide the total by"),
            Mistake("that is the last batch's loss only; return the mean loss per batch: the sum of all the batch "
                    "losses divided by the number of batches", lambda: losses[-1],
                    where="look at what you return: the loss of the last step, or a total of every step's"),
            Mistake("that is the mean loss per sample (each batch's loss weighted by its size); the task asks for "
                    "the mean loss per batch: the sum of the batch losses divided by the number of batches",
                    lambda: sum(loss * size for loss, size in zip(losses, sizes)) / sum(sizes),
                    where="look at what you add to the total and what you divide it by"),
        ])
    passed("train_epoch_on_device", len(cases))


# ---------------------------------------------------------------- put it together: the same training, faster


class TrainCase(NamedTuple):
    """A training run: seed, training and validation images, epochs and batch size."""

    seed: int
    n_train: int
    n_val: int
    epochs: int
    batch_size: int


SPEED_GOAL = 1.3  # the task: "at least 1.3x faster"
SPEED_ROUNDS = 5


def _train_model(seed: int, batch_norm: bool = True) -> nn.Sequential:
    """A small CNN; with BatchNorm (for the results) the mode matters: train mode in validation changes them."""
    torch.manual_seed(seed)
    if not batch_norm:  # for timing only: cheaper, so the speed cell stays well inside the grader's time limit
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(8 * 14 * 14, 10))
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


class _ModeSpy:
    """Records, for every forward pass of a model, (train mode, grad enabled), autocast, and backward in eval mode."""

    def __init__(self, model: nn.Module) -> None:
        self.calls: list[tuple[bool, bool]] = []
        self.autocast: list[bool] = []  # the forward ran under torch.autocast (CPU or CUDA)
        self.eval_backward: list[bool] = []  # a gradient reached the output of a forward made in eval mode
        self.inputs: list[tuple[bool, int, float]] = []  # each forward's (training: train mode with gradients on,
        # batch size, smallest value)
        self.optimizers = 0  # AdamW optimizers created during the call (counted by the check)
        model.register_forward_pre_hook(lambda module, _: self.calls.append((module.training,
                                                                             torch.is_grad_enabled())))
        model.register_forward_pre_hook(self._watch_input)
        model.register_forward_pre_hook(lambda *_: self.autocast.append(
            torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")))
        model.register_forward_hook(self._watch_backward)

    def _watch_backward(self, module: nn.Module, _: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad and not module.training:
            output.register_hook(lambda grad: self.eval_backward.append(True))  # returns None: grad unchanged

    def _watch_input(self, module: nn.Module, args: tuple) -> None:
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if x is not None and x.numel():
            self.inputs.append((module.training and torch.is_grad_enabled(), len(x), x.detach().min().item()))

    def explains(self, batch_size: int | None = None, n_train: int | None = None) -> str | None:
        """The cause of different results that the recorded forward passes show, if any."""
        if self.optimizers > 1:
            return (f"your function created {self.optimizers} AdamW optimizers: a new one (once per epoch?) starts "
                    "with empty moving averages; slow_train creates one before the loop, and its state carries "
                    "across the epochs")
        for training, step in ((True, "training"), (False, "validation")):
            seen = [low for trains, _, low in self.inputs if trains == training]
            if seen and min(seen) >= 0:  # the images are in [0, 1]: normalised, some values are below 0
                return (f"your {step} images reached the model unnormalised (every value in [0, 1]); slow_train "
                        "normalises every image, (image - MNIST_MEAN) / MNIST_STD, for training and for validation")
        sizes = sorted({size for trains, size, _ in self.inputs if trains})
        if batch_size and n_train:
            want = sorted({batch_size if n_train >= batch_size else n_train} | ({n_train % batch_size} - {0}))
            if sizes and sizes != want:
                return (f"your training batches held {', '.join(map(str, sizes))} images; slow_train's hold "
                        f"batch_size={batch_size}" + (f" (the last one {n_train % batch_size})"
                                                       if n_train % batch_size else ""))
        if any(self.autocast):
            return ("your forward passes ran under torch.autocast, in lower precision, which changes the results; "
                    "slow_train computes in float32 throughout, and a speed-up must keep its results: leave "
                    "autocast out")
        if self.eval_backward:
            return ("backward ran through forward passes made with the model in eval mode: model.eval() (for "
                    "validation) stays in force until model.train() is called again; call model.train() at the "
                    "start of every epoch, as slow_train does")
        return None

    @property
    def validated_in_train_mode(self) -> bool:
        """A forward pass without gradients (validation) while the model was in train mode."""
        return any(training and not grad for training, grad in self.calls)


# a speed-up must leave the arithmetic alone: where to look when the numbers differ
_SAME_ARITHMETIC = ("look for what your speed-up changed besides speed: slow_train's batches in the order given (the "
                    "last one may be smaller), float32 throughout (no autocast), the mean over the batches, AdamW "
                    "with lr=1e-3, model.train() for training and model.eval() for validation")


def _train_data(case: TrainCase) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(700 + case.seed)
    return (torch.rand(case.n_train, 1, 28, 28, generator=g), torch.randint(0, 10, (case.n_train,), generator=g),
            torch.rand(case.n_val, 1, 28, 28, generator=g), torch.randint(0, 10, (case.n_val,), generator=g))


def _train_what(case: TrainCase) -> str:
    return (f"fast_train({case.n_train} images, {case.n_val} validation images, epochs={case.epochs}, "
            f"batch_size={case.batch_size})")


def _slow_train_variant(case: TrainCase, keep: int | None = None) -> list[Any]:
    """slow_train's history on a fresh setup (its first ``keep`` training images only, when given), as patched by the caller."""
    with torch.random.fork_rng(devices=[]):
        train_x, train_y, *val = _train_data(case)
        return ref.slow_train(_train_model(case.seed), train_x[:keep], train_y[:keep], *val, epochs=case.epochs,
                              batch_size=case.batch_size)


def _per_epoch_once(compute: Callable[[], list[float]]) -> Callable[[int], float]:
    """``compute``'s value for one epoch, computing the whole list the first time it is asked for."""
    cache: list[list[float]] = []

    def at(epoch: int) -> float:
        if not cache:
            cache.append(compute())
        return cache[0][epoch]
    return at


def _expect_same_training(fn: Callable[..., Any], case: TrainCase) -> None:
    """The learner's run gives slow_train's history and final weights (up to float rounding)."""
    what = _train_what(case)
    with torch.random.fork_rng(devices=[]):
        want_model, got_model = _train_model(case.seed), _train_model(case.seed)
        data = _train_data(case)
        want = ref.slow_train(want_model, *data, epochs=case.epochs, batch_size=case.batch_size)
        modes = _ModeSpy(got_model)
        # task: "trains model in place, exactly as slow_train does": in place, and (as slow_train) drawing nothing
        made = torch.optim.AdamW.__init__

        def counted(optimizer: torch.optim.AdamW, *args: Any, **kwargs: Any) -> None:
            modes.optimizers += 1
            made(optimizer, *args, **kwargs)

        start = [p.detach().clone() for p in got_model.parameters()]
        try:
            with mock.patch.object(torch.optim.AdamW, "__init__", counted):
                got = call(fn, got_model, *data, epochs=case.epochs, batch_size=case.batch_size,
                           allow=Allow(changed=(got_model,)), nothing_random=True)
        except CheckError as error:
            if "global random generator" not in error.symptom:
                raise
            raise CheckError(f"{error.symptom}; slow_train draws no random numbers",
                             where="look for shuffle=True in a DataLoader, torch.randperm, a random split or "
                                   "dropout: slow_train takes the batches in the order given, and a run with the "
                                   "same results does too") from None
    expect(isinstance(got, list) and len(got) == len(want),
           f"{what} returned {describe(got)}; slow_train returns a list of {len(want)} (loss, accuracy) pairs, "
           "one per epoch", where="look at what you return: one pair per epoch, as slow_train does")
    n_batches = math.ceil(case.n_train / case.batch_size)
    full = case.n_train - case.n_train % case.batch_size
    def without_last_batch() -> list[float]:
        """Each epoch's loss when the last, smaller batch is left out (slow_train on the full batches only)."""
        if not 0 < full < case.n_train:
            raise ValueError("every batch is full")
        return [loss for loss, _ in _slow_train_variant(case, keep=full)]

    def without_zero_grad() -> list[float]:
        """Each epoch's loss when the gradients are never cleared (slow_train without zero_grad)."""
        with mock.patch.object(torch.optim.Optimizer, "zero_grad", lambda *args, **kwargs: None):
            return [loss for loss, _ in _slow_train_variant(case)]

    def mean_per_sample() -> list[float]:
        """Each epoch's training loss as a mean per image (each batch's loss weighted by its size)."""
        if not 0 < full < case.n_train:
            raise ValueError("every batch is full: the two means are equal")
        seen: list[tuple[float, int]] = []
        real = nn.functional.cross_entropy

        def recording(scores: torch.Tensor, targets: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            out = real(scores, targets, *args, **kwargs)
            seen.append((out.item(), len(targets)))
            return out

        with mock.patch.object(nn.functional, "cross_entropy", recording):
            _slow_train_variant(case)
        epochs = [seen[e * n_batches:(e + 1) * n_batches] for e in range(case.epochs)]
        return [sum(value * size for value, size in batches) / sum(size for _, size in batches) for batches in epochs]

    # each variant trains once, and only when a wrong loss asks for it
    without_last_batch, without_zero_grad, mean_per_sample = (
        _per_epoch_once(variant) for variant in (without_last_batch, without_zero_grad, mean_per_sample))

    try:
        for epoch, (pair, (loss, accuracy)) in enumerate(zip(got, want)):
            expect(isinstance(pair, (tuple, list)) and len(pair) == 2,
                   f"{what}: epoch {epoch} gave {describe(pair)}, not a (loss, accuracy) pair",
                   where="look at what you append to the history at the end of each epoch")
            expect_close(pair[0], loss, what=f"{what}: epoch {epoch}'s mean training loss", rtol=1e-4, atol=1e-6,
                         mistakes=[
                Mistake(f"that is the summed loss divided by the number of images ({case.n_train}); slow_train "
                        f"divides by the number of batches ({n_batches})", lambda: loss * n_batches / case.n_train,
                        where="look at what you divide the epoch's summed loss by"),
                Mistake(f"that is the mean over the full batches only: the last batch (the {case.n_train - full} "
                        "images left over) was left out, and slow_train trains on it too",
                        lambda e=epoch: without_last_batch(e),
                        where="look at your loop over the batches: does it include the last, smaller one?"),
                Mistake(f"that is the summed loss divided by {case.n_train // case.batch_size} (the number of "
                        f"images // batch_size, rounded down); there are {n_batches} batches, the last one smaller",
                        lambda: loss * n_batches / (case.n_train // case.batch_size)
                        if case.n_train // case.batch_size != n_batches else None),
                Mistake(f"that is the mean loss per image (each batch's loss weighted by its size, the last batch "
                        f"has {case.n_train - full} images); slow_train's is the mean per batch: the sum of the "
                        f"{n_batches} batch losses divided by {n_batches}",
                        lambda e=epoch: mean_per_sample(e),
                        where="look at what you add to the epoch's total for each batch, and what you divide it by"),
                Mistake("that is the loss of a training whose gradients were never cleared: backward adds into .grad, "
                        "so each step used the sum of every gradient so far. Call optimizer.zero_grad() before each "
                        "backward, as slow_train does", lambda e=epoch: without_zero_grad(e),
                        where="look at what happens to the gradients between steps"),
            ])
            if modes.validated_in_train_mode and isinstance(pair[1], (int, float)) and abs(pair[1] - accuracy) > 1e-6:
                raise CheckError(f"{what}: epoch {epoch}'s validation accuracy should be {accuracy:.6g}, but yours is "
                                 f"{pair[1]:.6g}, and your validation ran (without gradients) with the model in train "
                                 "mode", where="look at the model's mode when you validate",
                                 mistake="in train mode BatchNorm normalises with the validation batch's own "
                                         "statistics (and dropout drops values): call model.eval() before "
                                         "validating, as slow_train does, and model.train() before training")
            expect_close(pair[1], accuracy, what=f"{what}: epoch {epoch}'s validation accuracy", rtol=0, atol=1e-6)
    except CheckError as error:
        if error.where not in (WHERE_VALUES, WHERE_VALUES_NO_EXAMPLE):
            raise
        raise CheckError(error.symptom, where=_SAME_ARITHMETIC,
                         mistake=error.mistake or modes.explains(case.batch_size, case.n_train)) from None
    expect(not all(torch.equal(p.detach(), q) for p, q in zip(got_model.parameters(), start)),
           f"{what}: the model you were given has the weights it came with: your history is right, but the training "
           "changed another model",
           where="look at which model your loop trains and gives to the optimizer",
           mistake="fast_train trains `model` in place, as slow_train does: a copy (copy.deepcopy) or a new model "
                   "leaves the caller's untrained")
    for (name, got_p), want_p in zip(got_model.named_parameters(), want_model.parameters()):
        expect(torch.allclose(got_p.detach(), want_p.detach(), rtol=1e-4, atol=1e-5),
               f"{what}: after training, parameter {name} differs from slow_train's by up to "
               f"{(got_p.detach() - want_p.detach()).abs().max().item():.2g}",
               where=_SAME_ARITHMETIC, mistake=modes.explains(case.batch_size, case.n_train))


def check_fast_train_results(fn: Callable[..., Any], inputs: Sequence[TrainCase] | None = None) -> None:
    """fast_train gives slow_train's (loss, accuracy) history and final weights."""
    cases = inputs if inputs is not None else [TrainCase(0, 40, 12, 2, 16)]
    for case in cases:
        _expect_same_training(fn, case)
    passed("fast_train (the same results)", len(cases))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread while timing: CPU time then measures work, not threads waiting for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _cpu_seconds(fn: Callable[..., Any], case: TrainCase) -> float:
    model, data = _train_model(case.seed, batch_norm=False), _train_data(case)
    start = time.process_time()
    # not through `call`: the rules already held on the same call in _expect_same_training, and their
    # bookkeeping (snapshots of the model before and after) must not be timed
    fn(model, *data, epochs=case.epochs, batch_size=case.batch_size)
    return time.process_time() - start


def paired_speedup(fn: Callable[..., Any], case: TrainCase, rounds: int = SPEED_ROUNDS) -> list[float]:
    """slow_train's CPU seconds / fn's, in ``rounds`` alternating rounds after one warm-up of each."""
    with _one_thread(), torch.random.fork_rng(devices=[]):
        _cpu_seconds(ref.slow_train, case), _cpu_seconds(fn, case)
        return [_cpu_seconds(ref.slow_train, case) / max(_cpu_seconds(fn, case), 1e-9) for _ in range(rounds)]


def check_fast_train_speed(fn: Callable[..., Any], inputs: Sequence[TrainCase] | None = None) -> None:
    """fast_train gives slow_train's results and takes at most 1/1.3 of its CPU time (median of paired rounds)."""
    cases = inputs if inputs is not None else [TrainCase(0, 96, 64, 2, 16)]
    for case in cases:
        # a speed-up that changes the results does not count: the timed case, and a small one whose last
        # batch is partial (the timed case's batches divide the images evenly)
        _expect_same_training(fn, case)
        _expect_same_training(fn, TrainCase(case.seed + 1, 2 * case.batch_size + 3, 5, 1, case.batch_size))
        ratios = paired_speedup(fn, case)
        speedup = statistics.median(ratios)
        expect(speedup >= SPEED_GOAL,
               f"{_train_what(case)}: {speedup:.2f}x as fast as slow_train (CPU time, median of {len(ratios)} "
               f"paired rounds: {min(ratios):.2f}x to {max(ratios):.2f}x); the goal is at least {SPEED_GOAL}x",
               where="profile slow_train (section 3) or time its parts, and look for work that does not change "
                     "the results: work repeated every epoch, syncs, debugging tools, autograd where no "
                     "gradient is needed")
    passed(f"fast_train (at least {SPEED_GOAL}x faster)", len(cases))
