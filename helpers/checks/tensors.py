"""Lesson 01 Tensors: checks for every exercise.

Each ``check_*`` takes the learner's function and, optionally, extra inputs
(the graded cells pass hidden ones). It prints one pass line or raises
CheckError naming the mistake.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
import unittest.mock
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from helpers.checks import CheckError, Mistake, call, describe, expect, expect_tensor, passed, substitute
from helpers.reference import tensors as ref


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _close_to(got: torch.Tensor, candidates: Sequence[torch.Tensor]) -> bool:
    """Whether ``got`` is (close to) one of the candidate answers."""
    return any(torch.allclose(got.double(), c.double(), atol=1e-5, rtol=1e-4) for c in candidates)


def _stops_before_end(got: object) -> bool:
    """An evenly spaced 1-D grid from 0 that stops short of 1 (what arange gives: its end is left out)."""
    if not isinstance(got, torch.Tensor) or got.dim() != 1 or len(got) < 2 or not got.is_floating_point():
        return False
    steps = got.double().diff()
    return abs(float(got[0])) < 1e-6 and bool((steps > 0).all()) and float(got[-1]) < 1 - 1e-6 \
        and bool(torch.allclose(steps, steps[0].expand_as(steps), atol=1e-5))


def _evenly_spaced(got: object, start: float, step: float | None = None) -> bool:
    """A 1-D tensor of at least two values from ``start``, evenly spaced (by ``step``, when given)."""
    if not isinstance(got, torch.Tensor) or got.dim() != 1 or len(got) < 2 or got.device.type == "meta":
        return False
    steps = got.double().diff()
    return abs(float(got[0]) - start) < 1e-6 and bool(torch.allclose(steps, steps[0].expand_as(steps), atol=1e-5)) \
        and (step is None or abs(float(steps[0]) - step) < 1e-6)


def _geometric(got: object) -> bool:
    """A 1-D tensor of positive values, each a constant multiple (not 1) of the one before: what logspace gives."""
    if not isinstance(got, torch.Tensor) or got.dim() != 1 or len(got) < 3 or not got.is_floating_point() \
            or got.device.type == "meta" or not bool((got > 0).all()):
        return False
    ratios = got.double()[1:] / got.double()[:-1]
    return abs(float(ratios[0]) - 1) > 1e-3 and bool(torch.allclose(ratios, ratios[0].expand_as(ratios), rtol=1e-4))


def _wrong_count(got: object, expected: torch.Tensor) -> bool:
    return isinstance(got, torch.Tensor) and got.dim() == 1 and len(got) != len(expected)


@contextlib.contextmanager
def _empty_filled(made: list[torch.Tensor]):
    """torch.empty and empty_like, with their memory filled (NaN, or 77 for integers) rather than left as it was.

    Uninitialised memory is often zeros, so a tensor from torch.empty can pass for one from torch.zeros by chance;
    filled, it cannot. Each tensor made is recorded in ``made``.
    """
    real_empty, real_like = torch.empty, torch.empty_like

    def fill(tensor: torch.Tensor) -> torch.Tensor:
        made.append(tensor)
        with torch.no_grad():
            return tensor.fill_(math.nan if tensor.is_floating_point() or tensor.is_complex() else 77)

    with unittest.mock.patch.object(torch, "empty", lambda *args, **kwargs: fill(real_empty(*args, **kwargs))), \
            unittest.mock.patch.object(torch, "empty_like", lambda *args, **kwargs: fill(real_like(*args, **kwargs))):
        yield


def check_make_starter_tensors(fn: Callable[[], dict]) -> None:
    made: list[torch.Tensor] = []
    with _empty_filled(made):
        got = call(fn)  # also catches torch.set_default_dtype(...) left changed for the whole notebook
    expected = ref.make_starter_tensors()
    expect(isinstance(got, dict), f"make_starter_tensors() should return a dict, not {describe(got)}",
           where="look at your return statement")
    missing = sorted(set(expected) - set(got))
    expect(not missing, f"make_starter_tensors() returned a dict with the keys {sorted(map(str, got))}; it is missing "
                        f"the key(s) {missing}", where="compare your keys, letter by letter, with the task's list")
    extra = sorted(map(str, set(got) - set(expected)))
    expect(not extra, f"make_starter_tensors() returned a dict with the keys {sorted(map(str, got))}; the task asks for "
                      f"exactly {sorted(expected)}, so {extra} should not be there",
           where="look at every key you put in the dict")
    hints = {
        "zeros": [Mistake("torch.zeros gives float32 by default; ask for dtype=torch.float64",
                          lambda: torch.zeros(2, 3),
                                where="look at the dtype of 'zeros'")],
        "identity": [Mistake("that is all ones; an identity matrix has ones only on the diagonal (torch.eye)",
                             lambda: torch.ones(3, 3),
                                where="look at how 'identity' is made")],
        "evens": [Mistake("arange's end is excluded, and the step is its third argument: arange(0, 10, 2)",
                          lambda: torch.arange(0, 12, 2),
                                where="look at the arguments of the call that makes 'evens'"),
                  # a count off by one or more: the values show which end arange stopped at
                  Mistake("arange(start, end, step) stops before `end` (the end is excluded): for the evens 0 to 8 "
                          "the end must lie past 8, e.g. arange(0, 10, 2)",
                          matches=lambda t: _wrong_count(t, expected["evens"]) and _evenly_spaced(t, 0.0, 2.0),
                          where="look at the end you pass to the call that makes 'evens': is it included?"),
                  Mistake("those are floats; torch.arange with integer arguments gives int64",
                          lambda: torch.arange(0.0, 10.0, 2.0),
                                where="look at the types of the numbers you pass for 'evens'")],
        "grid": [Mistake("your grid stops before the end point 1.0: arange leaves its end out (whatever the "
                         "step); torch.linspace(start, end, steps) includes both ends",
                         matches=_stops_before_end,
                         where="look at whether the call that makes 'grid' includes its end point"),
                 Mistake("your grid runs from 0 to 1 with the wrong number of points: linspace's `steps` is the "
                         "number of points, both ends included (5 points are 0, 0.25, 0.5, 0.75, 1), not the number "
                         "of gaps between them",
                         matches=lambda t: _wrong_count(t, expected["grid"]) and _evenly_spaced(t, 0.0)
                         and abs(float(t[-1]) - 1) < 1e-6,
                         where="look at the `steps` you pass to the call that makes 'grid': what does it count?"),
                 Mistake("your grid is spaced evenly in the exponent, not in value: each point is a constant "
                         "multiple of the one before, as torch.logspace(start, end, steps) makes (10**start to "
                         "10**end; logspace(0, 1, 5) runs from 1 to 10); evenly spaced points from 0 to 1 are "
                         "torch.linspace(0, 1, steps=5)",
                         matches=_geometric,
                         where="look at which function makes 'grid': linspace, or logspace?")],
        "sevens": [Mistake("torch.full infers int64 from 7; ask for dtype=torch.int32",
                           lambda: torch.full((2, 2), 7),
                                where="look at the dtype of 'sevens'")],
    }
    for key, want in expected.items():
        uninitialised = any(got[key] is tensor for tensor in made) and not torch.equal(got[key], want)
        expect(not uninitialised,
               f"starter tensor '{key}' comes from torch.empty (or empty_like), whose values are whatever was in that "
               "memory before: zeros on some runs, anything on others (this check fills that memory with NaN to show "
               "it)", where=f"look at the function that makes '{key}': does it set the values?",
               mistake="torch.empty only reserves memory; torch.zeros sets every element to 0")
        expect_tensor(got[key], want, what=f"starter tensor '{key}'", mistakes=hints[key])
    passed("make_starter_tensors", len(expected))


def check_share_numpy(fn: Callable[[np.ndarray], torch.Tensor], inputs: Sequence[np.ndarray] | None = None) -> None:
    # a strided view too: from_numpy shares it as it is, while making it contiguous first copies it
    inputs = inputs if inputs is not None else [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4),
                                                np.arange(12.0).reshape(3, 4)[:, ::2]]
    for array in inputs:
        layout = "" if array.flags.c_contiguous else ", not contiguous"
        # On a CPU-only grader the notebook's DEVICE is the CPU, where .to(DEVICE) changes nothing; on a GPU it
        # copies. With DEVICE set to "meta" (a device every machine has), a move to it shows on any machine.
        with substitute(fn, DEVICE=torch.device("meta")):
            got = call(fn, array)
        expect(not (isinstance(got, torch.Tensor) and got.device.type == "meta"),
               f"share_numpy(array of shape {array.shape}{layout}) returned a tensor on 'meta', the device the check "
               "put in the notebook's DEVICE: your tensor went to DEVICE. On a machine with a GPU that is a copy in "
               "the GPU's memory, not the array's memory",
               where="look at every step between the array and the tensor you return: does one move it to a device?",
               mistake=".to(DEVICE) (or device=DEVICE) copies the data whenever DEVICE is not the CPU; sharing memory "
                       "with a NumPy array needs a CPU tensor: torch.from_numpy(array) alone")
        expect_tensor(got, ref.share_numpy(array.copy()), what=f"share_numpy(array of shape {array.shape}{layout})",
                      mistakes=[Mistake("you changed the dtype; from_numpy keeps the array's dtype "
                                        f"({array.dtype}), which is what sharing memory needs",
                                        matches=lambda t: isinstance(t, torch.Tensor)
                                        and t.dtype != torch.from_numpy(array).dtype,
                                where='look at every conversion between the array and the tensor you return')])
        first = array.flat[0].copy()
        array.flat[0] = first + 100  # the caller's array: put back below
        seen = got.flatten()[0].item()
        array.flat[0] = first
        expect(seen == first + 100,
               f"share_numpy(array of shape {array.shape}{layout}): after the call, adding 100 to the array's first "
               f"element left your tensor's first element at {seen:g}: your tensor is a copy",
               where="look at every step between the array and the tensor you return, and whether it copies "
                     "(section 3)",
               mistake="something on the way copied the data: torch.tensor(...) always copies, and so do .copy() and "
                       "np.ascontiguousarray of a strided array; torch.from_numpy shares memory with any array")
    passed("share_numpy", len(inputs))


def check_to_channels_first(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # 8-bit images too: reordering dimensions keeps the dtype, whatever a layer will later want
    inputs = inputs if inputs is not None else [
        _randn(2, 4, 5, 3), _randn(1, 2, 2, 1, seed=1),
        torch.randint(0, 256, (2, 3, 2, 3), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)]
    for images in inputs:
        n, h, w, c = images.shape
        got = call(fn, images)
        orders = [p for p in itertools.permutations(range(4)) if p != (0, 3, 1, 2)]
        expect_tensor(got, ref.to_channels_first(images),
                      what=f"to_channels_first(images of shape {[n, h, w, c]}, {images.dtype})",
                      mistakes=[Mistake(f"the dimensions are in the right order but the dtype changed from "
                                        f"{images.dtype}: reordering keeps the images' dtype (a conversion such as "
                                        ".float() belongs where a layer needs it, not here)",
                                        matches=lambda t: isinstance(t, torch.Tensor) and t.dtype != images.dtype
                                        and t.shape == (n, c, h, w)
                                        and _close_to(t, [ref.to_channels_first(images)]),
                                        where="look at every conversion after the reordering"),
                                Mistake("you reshaped (or used view) instead of permuting: the shape is right but "
                                        "the pixels are scrambled. Use permute(0, 3, 1, 2)",
                                        lambda: images.reshape(n, c, h, w),
                                where='look at which operation moves the channels: does it move data, or regroup it?'),
                                Mistake("height and width are swapped (transpose(1, 3) does that as it moves the channels); "
                                        "use permute(0, 3, 1, 2)",
                                        lambda: images.transpose(1, 3),
                                where='look at where each of the four dimensions ends up'),
                                *[Mistake(f"your result is images.permute{p}: dimension i of the result is dimension "
                                          "p[i] of the input, so [N, H, W, C] to [N, C, H, W] is permute(0, 3, 1, 2)",
                                          matches=lambda t, p=p: isinstance(t, torch.Tensor)
                                          and t.shape == images.permute(p).shape and t.shape != (n, c, h, w)
                                          and _close_to(t, [images.permute(p)]),
                                          where="look at where each of the four dimensions ends up")
                                  for p in orders]])
    passed("to_channels_first", len(inputs))


def _lost_batch_of_one(got: object, x: torch.Tensor) -> bool:
    """A batch of one whose result holds x's values in order but not as [1, rest]."""
    return isinstance(got, torch.Tensor) and x.shape[0] == 1 and got.numel() == x.numel() > 0 \
        and (got.dim() != 2 or got.shape[0] != 1) and _close_to(got.flatten(), [x.flatten()])


def _drops_dim0(args: tuple, kwargs: dict) -> bool:
    """Whether squeeze(*args, **kwargs) removes dimension 0 of args[0] (a dimension of size 1)."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != 1:
        return False
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    if dims is None:
        return True  # squeeze() drops every dimension of size 1
    dims = dims if isinstance(dims, tuple | list) else (dims,)
    return any(isinstance(d, int) and d % x.dim() == 0 for d in dims)


def _recording_squeezes(fn: Callable, squeezed: list) -> Callable:
    """``fn``, recording (shape before, shape after) for each squeeze that drops a dimension 0 of size 1."""
    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if getattr(func, "__name__", "") == "squeeze" and args and isinstance(result, torch.Tensor) \
                    and _drops_dim0(args, kwargs):
                squeezed.append((list(args[0].shape), list(result.shape)))
            return result

    @functools.wraps(fn)
    def recorded(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the learner's signature
        with Recorder():
            return fn(*args, **kwargs)

    return recorded


_FIXED_SHAPE = re.compile(r"shape '\[(-?\d+), (-?\d+)\]' is invalid for input of size (\d+)")


def check_flatten_batch(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # a 4-D input too ("[N, d1, d2, ...]"), transposed so that it is not contiguous
    inputs = inputs if inputs is not None else [_randn(3, 2, 4), _randn(4, 3, 5, 2, seed=2).transpose(1, 2)]
    for x in inputs:
        label = f"flatten_batch(x of shape {list(x.shape)}{'' if x.is_contiguous() else ', not contiguous'})"
        squeezed: list[tuple[list[int], list[int]]] = []
        try:
            got = call(_recording_squeezes(fn, squeezed), x)
        except CheckError as error:
            cause = error.__cause__
            if squeezed and isinstance(cause, IndexError | RuntimeError) and not isinstance(cause, CheckError):
                before, after = squeezed[0]
                raise CheckError(f"{label} raised {type(cause).__name__}: {str(cause).splitlines()[0][:120]}",
                                 where="look at every operation that can drop a dimension of size 1 (squeeze, "
                                       "reshape with sizes taken from a squeezed tensor)",
                                 mistake=f"squeeze() turned a tensor of shape {before} into {after}: without a dim "
                                         "it drops every dimension of size 1, the batch of one included, so what "
                                         "follows no longer has the dimensions it expects; keep dimension 0 as it "
                                         "is, whatever its size") from cause
            if isinstance(error.__cause__, RuntimeError) and "view" in str(error.__cause__):
                raise CheckError(f"{label} raised RuntimeError: {str(error.__cause__).splitlines()[0][:120]}",
                                 where="look at the operation that changes the shape, and at what it needs from "
                                       "the memory layout (section 4)",
                                 mistake="view() needs a contiguous tensor and this one is not (it was transposed). "
                                         "Use reshape or flatten(start_dim=1)") from None
            asked = _FIXED_SHAPE.search(str(cause)) if isinstance(cause, RuntimeError) else None
            if asked and x.dim() > 3 and int(asked.group(2)) == x.shape[1] * x.shape[2]:
                raise CheckError(f"{label} raised RuntimeError: {str(cause).splitlines()[0][:120]}",
                                 where="look at the sizes you give reshape (or view): where does each come from?",
                                 mistake=f"the size you merged into is x.shape[1] * x.shape[2] ({asked.group(2)}), "
                                         f"which holds every dimension after the batch only for a 3-D input; this x "
                                         f"has {x.dim()} dimensions. flatten(start_dim=1) or reshape(x.shape[0], -1) "
                                         "merges all of them, however many there are") from cause
            raise
        expect_tensor(got, ref.flatten_batch(x), what=label, given=x,
                      mistakes=[Mistake("you flattened the batch dimension too; keep dimension 0 and flatten the rest",
                                        lambda: x.flatten() if x.shape[0] > 1 else None,
                                where='look at which dimensions you merge'),
                                # with N = 1 the values cannot show how the batch dimension was lost
                                Mistake("for a batch of one your result has the right values but no batch dimension "
                                        "of size 1 in front: squeeze() without a dim drops every dimension of size 1, "
                                        "the batch's too (and so does flattening everything); keep dimension 0 as it "
                                        "is, whatever its size",
                                        matches=lambda t: _lost_batch_of_one(t, x),
                                        where="look at every operation that can drop a dimension of size 1 (squeeze, "
                                              "flatten, reshape with sizes taken from a squeezed tensor)"),
                                Mistake("you flattened the dimensions in the wrong order (transposed first?); "
                                        "flatten(start_dim=1) keeps the element order", lambda: x.transpose(1, 2).flatten(1),
                                where='look at the order in which the dimensions are merged')])
    passed("flatten_batch", len(inputs))


def _column_offset_mistake(x: torch.Tensor, got: object) -> Mistake | None:
    """When ``got`` is x minus one value per column other than the column's mean: what that value is.

    A divisor is named only when the sizes tell it apart: on an input where N - 1 equals the number of columns D,
    the message says so instead of guessing which one was meant.
    """
    if not isinstance(got, torch.Tensor) or got.shape != x.shape or x.dim() != 2 or x.shape[0] < 2 \
            or not got.is_floating_point() or got.device.type == "meta" or x.device.type == "meta":
        return None
    n, d = x.shape
    subtracted = x.double() - got.detach().double()
    c = subtracted[0]
    if not torch.allclose(subtracted, c.expand_as(subtracted), atol=1e-5, rtol=1e-4) \
            or torch.allclose(c, x.double().mean(0), atol=1e-5, rtol=1e-4):
        return None
    where = "look at the value you subtract from each column: is it that column's mean?"
    sums = x.double().sum(0)
    used = c.abs() > 1e-6
    if bool(used.all()) and bool((sums.abs() > 1e-6).all()):
        k = sums / c
        k0 = float(k[0])
        if round(k0) >= 1 and abs(k0 - round(k0)) < 1e-3 and torch.allclose(k, torch.full_like(k, k0), rtol=1e-3):
            k0 = round(k0)
            unbiased = f"N - 1 = {k0} (the correction of an unbiased variance, which a mean does not have)"
            names = [name for size, name in ((n - 1, unbiased),
                                             (d, f"the number of columns D = {k0}")) if size == k0]
            divided = ("you subtracted each column's sum, not its mean" if k0 == 1
                       else f"you divided each column's sum by {k0}, which here is both N - 1 and the number of "
                            "columns D" if len(names) == 2 else f"you divided each column's sum by {names[0]}"
                       if names else f"you divided each column's sum by {k0}")
            return Mistake(f"{divided}; a column's mean divides by its number of rows N = {n}: mean(dim=0)",
                           matches=lambda _: True, where="look at what you divide the column sums by")
    medians = [x.double().median(dim=0).values, x.double().quantile(0.5, dim=0)]
    if any(torch.allclose(c, m, atol=1e-5, rtol=1e-4) for m in medians):
        return Mistake("you subtracted each column's median; centring subtracts each column's mean (mean(dim=0))",
                       matches=lambda _: True, where=where)
    return Mistake(f"you subtracted one value per column, but not the column's mean: yours subtracts "
                   f"{[round(v, 4) for v in c.tolist()[:6]]}, the column means are "
                   f"{[round(v, 4) for v in x.double().mean(0).tolist()[:6]]}", matches=lambda _: True, where=where)


def check_center_columns(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # N - 1 != D in the first input, so a sum divided by N - 1 and one divided by D show apart
    inputs = inputs if inputs is not None else [_randn(5, 3) + 5, torch.arange(6.0).reshape(3, 2)]
    for x in inputs:
        n, d = x.shape
        try:
            got = call(fn, x)
        except CheckError as error:
            cause = error.__cause__
            text = str(cause).splitlines()[0] if isinstance(cause, RuntimeError) else ""
            # the sizes in the error: one value per row (N) lined up with the D columns
            if n != d and "size of tensor" in text and f"({n})" in text and f"({d})" in text:
                raise CheckError(f"center_columns(x of shape {[n, d]}) raised RuntimeError: {text[:160]}",
                                 where="look at the dim you reduce over, and at the shape of what you subtract",
                                 mistake=f"something with one value per row ({n} of them) met the {d} columns: a "
                                         "reduction over dim=1 gives one value per row; each column's mean is a "
                                         "reduction over dim=0") from cause
            raise
        offset = _column_offset_mistake(x, got)
        expect_tensor(got, ref.center_columns(x), what=f"center_columns(x of shape {list(x.shape)})", given=x,
                      mistakes=[Mistake("you subtracted each row's mean (dim=1); columns run along dim=0",
                                        lambda: x - x.mean(dim=1, keepdim=True),
                                where='look at the dim you reduce over'),
                                Mistake("you subtracted the mean of the whole tensor; take the mean over dim=0 only",
                                        lambda: x - x.mean(),
                                where='look at the dim you reduce over'),
                                *([offset] if offset is not None else []),
                                Mistake("the means were computed in float32: the input is float64, and with values "
                                        f"near {float(x.abs().mean()):.3g} float32's 7 significant digits lose "
                                        "what centring keeps; compute in the input's dtype (x.mean(dim=0, "
                                        "keepdim=True) on x itself)",
                                        lambda: x - x.float().mean(dim=0, keepdim=True).to(x.dtype)
                                        if x.dtype == torch.float64 else None,
                                        where="look at the dtype your means are computed in"),
                                Mistake("you also divided by the standard deviation (standardising); centring only "
                                        "subtracts each column's mean",
                                        matches=lambda t: isinstance(t, torch.Tensor) and t.shape == x.shape
                                        and x.shape[0] > 1 and _close_to(t, [(x - x.mean(0)) / x.std(0, correction=c)
                                                                             for c in (0, 1)]),
                                        where="look at every operation after the subtraction")])
    passed("center_columns", len(inputs))


def check_pairwise_dot(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                       inputs: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        (_randn(3, 4), _randn(2, 4, seed=1)),
        (_randn(2, 5, seed=3), _randn(2, 5, seed=4)),
    ]
    for a, b in inputs:
        what = f"pairwise_dot(a {list(a.shape)}, b {list(b.shape)})"
        try:
            got = call(fn, a, b)
        except CheckError as error:
            cause = error.__cause__
            text = str(cause).splitlines()[0] if isinstance(cause, RuntimeError) else ""
            # einsum's own words: b's first size (M) met a's last (D) under one subscript, so b was read as [D, M]
            if text.startswith("einsum()") and a.shape[1] != b.shape[0] and f"has size {b.shape[0]} for operand 1" in text \
                    and f"previously seen size {a.shape[1]}" in text:
                raise CheckError(f"{what} raised RuntimeError: {text[:160]}",
                                 where="look at the subscripts you give einsum for b: which one names D?",
                                 mistake=f"your subscripts read b as [D, M] (as in 'nd,dm->nm'), but b is [M, D] "
                                         f"([{b.shape[0]}, {b.shape[1]}]), one row per vector like a: give b the "
                                         "subscripts 'md', torch.einsum('nd,md->nm', a, b), which is a @ b.T"
                                 ) from cause
            raise
        expect_tensor(got, ref.pairwise_dot(a, b), what=what, given=a,
                      mistakes=[Mistake("those are cosine similarities: the rows were divided by their lengths; "
                                        "the task asks for the plain dot products, a @ b.T",
                                        lambda: torch.nn.functional.normalize(a, dim=1)
                                        @ torch.nn.functional.normalize(b, dim=1).T,
                                        where="look at every operation besides the product: does one rescale the rows?"),
                                Mistake("your result is transposed: row i should hold a[i]'s dot products, so compute a @ b.T",
                                        lambda: b @ a.T,
                                where='look at which operand comes first in the product'),
                                Mistake("every element of yours is a[i].sum() * b[j].sum(), the product of the two "
                                        "rows' sums (torch.outer of the row sums): that multiplies every element of "
                                        "a[i] with every element of b[j]; a dot product multiplies the matching "
                                        "elements only, then sums: (a[i] * b[j]).sum(), for all pairs a @ b.T",
                                        lambda: torch.outer(a.sum(1), b.sum(1)),
                                        where="look at where you sum: before multiplying, or after?"),
                                Mistake("you multiplied a by b itself (a @ b, or einsum 'nd,dm->nm'), which pairs "
                                        "a[i] with the columns of b; b holds one vector per row, like a, so "
                                        "transpose it: a @ b.T (einsum 'nd,md->nm')",
                                        lambda: a @ b if b.shape[0] == b.shape[1] else None,
                                        where="look at how b enters the product: its rows, or its columns?"),
                                Mistake("that is the elementwise product; a dot product sums it over D: use a @ b.T",
                                        lambda: a * b,
                                where='look at the operator: elementwise or matrix product?')])
    passed("pairwise_dot", len(inputs))


def _default_dtype_mistake(x: torch.Tensor, expected: torch.Tensor, name: str = "x") -> Mistake:
    """The right values in PyTorch's default dtype (float32 or int64) where x's dtype was another."""
    def matches(got: object) -> bool:
        return isinstance(got, torch.Tensor) and got.dtype != x.dtype == expected.dtype \
            and got.dtype in (torch.get_default_dtype(), torch.int64) and got.shape == expected.shape \
            and _close_to(got, [expected])

    return Mistake(f"your values are right but in PyTorch's default dtype, not in {name}.dtype ({x.dtype}): a tensor built "
                   "from Python numbers (torch.tensor(a_list), .tolist(), .item()) gets the default dtype; select "
                   f"from {name} itself (or pass dtype={name}.dtype)", matches=matches,
                   where=f"look at how the result tensor is made: from {name}, or from Python numbers?")


def _raise_view_error(error: CheckError, what: str, fix: str) -> None:
    """Raise a CheckError naming view() when the learner's code raised view's error on a non-contiguous input."""
    cause = error.__cause__
    if isinstance(cause, RuntimeError) and not isinstance(cause, CheckError) \
            and "view size is not compatible with input tensor's size and stride" in str(cause):
        raise CheckError(f"{what} raised RuntimeError: {str(cause).splitlines()[0][:120]}",
                         where="look at the operation that changes the shape, and at what it needs from the memory "
                               "layout (section 4)",
                         mistake="view() needs a contiguous tensor (elements stored in row order), and this one is "
                                 f"not (it is a transposed view): use {fix}") from cause


def _positions_of(mask: torch.Tensor) -> list[torch.Tensor]:
    """Every usual way of writing down where ``mask`` is True: coordinates (one row each, or one tensor per dim,
    as nonzero, argwhere and torch.where(mask) give them) and flat indices."""
    coordinates = mask.nonzero()
    return [coordinates.flatten(), coordinates.T.flatten(), mask.flatten().nonzero().flatten()]


def _holds_positions(got: object, x: torch.Tensor) -> bool:
    """``got`` (a tensor, or a tuple of them as torch.where(mask) gives) holds the positions of x's positive
    elements instead of their values."""
    parts = list(got) if isinstance(got, tuple | list) else [got]
    if not parts or not all(isinstance(p, torch.Tensor) and not p.is_floating_point() and p.dtype != torch.bool
                            and p.device.type != "meta" for p in parts) or x.device.type == "meta":
        return False
    flat = torch.cat([p.flatten().long() for p in parts])
    values = x[x > 0]
    if flat.numel() == 0 or (flat.numel() == values.numel() and bool((flat == values.long()).all())
                             and bool((values == values.long()).all())):
        return False  # no positions at all, or the values themselves (whole numbers): no evidence
    return any(flat.numel() == p.numel() and bool((flat == p).all()) for p in _positions_of(x > 0))


def check_positive_values(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # an int32 input too: the selected values keep x's dtype, which the defaults (float32, int64) would hide
    # a transposed view too (not contiguous): "in their original order" is x's own order, whatever its memory
    inputs = inputs if inputs is not None else [torch.tensor([[1.0, -2.0, 0.0], [3.0, 0.0, -1.0]]),
                                                _randn(4, 3, seed=5).T,
                                                torch.tensor([[4, -1], [0, 9]], dtype=torch.int32)]
    for x in inputs:
        what = f"positive_values(x of shape {list(x.shape)}, {x.dtype}{'' if x.is_contiguous() else ', not contiguous'})"
        try:
            got = call(fn, x)
        except CheckError as error:
            _raise_view_error(error, what, "reshape(-1) or flatten() (they copy when they must), or index x with "
                                           "the mask directly: x[x > 0]")
            raise
        expect_tensor(got, ref.positive_values(x), what=what,
                      given=x,
                      mistakes=[_default_dtype_mistake(x, ref.positive_values(x)),
                                Mistake("your result holds positions (indices) into the input, where the "
                                        "positive elements are, not the values found there: nonzero(), "
                                        "argwhere() and torch.where(mask) give positions; indexing with the mask "
                                        "itself (x[x > 0]) gives the values",
                                        matches=lambda t: _holds_positions(t, x),
                                        where="look at what your result holds: where the positive values are, or "
                                              "the values themselves?"),
                                Mistake("you indexed x with the coordinates that nonzero() (or argwhere()) gives: "
                                        "one row [i, j, ...] per positive element, and a [k, x.dim()] integer "
                                        "tensor used as an index picks whole slices of x along dim 0 by each of "
                                        "those numbers, not the elements; index with the boolean mask itself: "
                                        "x[x > 0] (or x[torch.nonzero(x > 0, as_tuple=True)], one index per dim)",
                                        lambda: x[torch.nonzero(x > 0)],
                                        where="look at what you index x with: a boolean mask, or coordinates?"),
                                Mistake("you kept the zeros too; the task asks for strictly positive values (x > 0)",
                                        lambda: x[x >= 0],
                                where='look at the comparison in your mask'),
                                Mistake("you zeroed the negatives but kept the shape; a boolean mask x[x > 0] "
                                        "(or masked_select) returns only the selected values, as 1-D",
                                        lambda: x * (x > 0),
                                where='look at the shape the task asks for (1-D, only the selected values)')])
    passed("positive_values", len(inputs))


def _constant_factor(got: object, expected: torch.Tensor) -> float | None:
    """k when ``got`` is k times ``expected`` everywhere (k != 1, shown by at least one nonzero value), else None."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.device.type == "meta" \
            or got.is_complex() or got.dtype == torch.bool:
        return None
    e, g = expected.double(), got.detach().double()
    nonzero = e.abs() > 1e-6
    if not bool(nonzero.any()):
        return None
    k = float((g[nonzero] / e[nonzero]).mean())
    if k == 0 or abs(k - 1) < 1e-4 or not torch.allclose(g, k * e, atol=1e-5, rtol=1e-4):
        return None
    return k


def _relu_factor_mistake(x: torch.Tensor, expected: torch.Tensor) -> Mistake:
    """relu is elementwise: a result k times relu(x) scales what it keeps (x + |x| is 2 relu(x))."""
    return Mistake("your result is a constant multiple of relu(x): where x > 0 relu returns x itself, unscaled "
                   "(x + x.abs() is 2 times relu(x), so that form needs a / 2)",
                   matches=lambda t: _constant_factor(t, expected) is not None,
                   where="look at what your code returns where x > 0: x itself, or a multiple of it?")


def _nan_at_minus_inf(x: torch.Tensor, got: Any) -> bool:
    """``got`` is nan wherever ``x`` is -inf (and there is one)."""
    minus_inf = x.is_floating_point() and bool(torch.isneginf(x).any())
    return minus_inf and isinstance(got, torch.Tensor) and got.shape == x.shape and got.is_floating_point() \
        and bool(got[torch.isneginf(x)].isnan().all())


def _float32_trip_mistake(x: torch.Tensor) -> Mistake:
    """An integer x converted to float32 and back: the dtype is right, the integers above 2**24 are not."""
    def through_float32() -> torch.Tensor | None:
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            return None
        big = x.abs() > 2 ** 24
        return ref.relu(x.to(torch.float32)).to(x.dtype) if bool(big.any()) else None

    return Mistake("your integers above 2**24 (16777216) came back changed: a trip through float32 loses integers "
                   "above 2**24, since float32 keeps 24 bits of a number (2**40 + 3 comes back as 2**40); keep x's "
                   "integer dtype all the way: torch.where(x > 0, x, 0) or x.clamp(min=0), with no .float()",
                   through_float32, where="look at every conversion of x (.float(), .to(...)) on the way to the result")


def check_relu(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # the integer input: torch.where keeps x's dtype only if the other branch is an int (or zeros_like(x))
    # the infinite input: "0 elsewhere" holds for -inf too, where arithmetic on the mask makes nan
    # 2**40 + 3 in the integer input: "for every value" holds for integers float32 cannot hold (above 2**24)
    inputs = inputs if inputs is not None else [torch.tensor([[1.0, -2.0], [0.5, -0.1]]), _randn(2, 3, 4, seed=6),
                                                torch.tensor([-2, 0, 3, 2 ** 40 + 3]),
                                                torch.tensor([-math.inf, -1.5, 0.0, 2.5, math.inf])]
    for x in inputs:
        got = call(fn, x)
        # integers are compared exactly: a tolerance relative to 2**40 would call 2**40 "close" to 2**40 + 3
        exact = {} if x.is_floating_point() else {"atol": 0, "rtol": 0}
        expect_tensor(got, ref.relu(x), what=f"relu(x of shape {list(x.shape)}, {x.dtype})", given=x, **exact,
                      mistakes=[Mistake("that is 1/0 (the mask), not the values: torch.where(x > 0, x, 0)",
                                        lambda: (x > 0).to(x.dtype),
                                where='look at what you put where the mask is True'),
                                _relu_factor_mistake(x, ref.relu(x)),
                                Mistake("where x is -inf your result is nan, and relu gives 0 there: arithmetic on "
                                        "the mask makes nan from -inf (x * (x > 0) computes -inf * 0, x + x.abs() "
                                        "computes -inf + inf); pick the values instead: torch.where(x > 0, x, 0) or "
                                        "x.clamp(min=0)",
                                        matches=lambda t: _nan_at_minus_inf(x, t),
                                        where="look at how your code makes the zeros: by arithmetic, or by picking?"),
                                Mistake("you returned only the positive values; relu keeps x's shape, with 0 "
                                        "where x <= 0", lambda: x[x > 0],
                                where="look at the shape the task asks for (x's shape)"),
                                _float32_trip_mistake(x)])
    passed("relu", len(inputs))


def _label_used_as_row(text: str, labels: torch.Tensor, n_rows: int) -> bool:
    """The error names dim 0 and a label at least ``n_rows``: a label was used to pick a row."""
    return "dimension 0" in text and int(labels.max()) >= n_rows \
        and any(f"index {v} " in text + " " for v in labels.tolist() if v >= n_rows)


def _flat_pick_by_rows(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
    """scores flattened, indexed with i * N + labels[i]: each row's offset counted in rows (N), not columns (C)."""
    n, c = scores.shape
    return scores.flatten()[torch.arange(n) * n + labels] if n != c else None


def check_pick_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      inputs: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        (torch.arange(12.0).reshape(3, 4), torch.tensor([0, 3, 1])),
        (_randn(3, 5, seed=7).T, torch.tensor([2, 2, 0, 1, 0])),  # a transposed view: not contiguous
        (_randn(1, 3, seed=9), torch.tensor([2])),  # a batch of one: squeeze() without a dim drops N too
        (_randn(4, 2, seed=10).double(), torch.tensor([1, 0, 0, 1])),  # picking scores keeps their dtype
    ]
    for scores, labels in inputs:
        what = (f"pick_scores(scores {list(scores.shape)} {scores.dtype}"
                f"{'' if scores.is_contiguous() else ' (not contiguous)'}, labels {labels.tolist()[:8]}"
                f"{' ...' if len(labels) > 8 else ''})")
        try:
            got = call(fn, scores, labels)
        except CheckError as error:
            _raise_view_error(error, what, "reshape(-1) or flatten() (they copy when they must), torch.take (which "
                                           "reads any tensor in row order), or no flattening at all: "
                                           "scores.gather(1, labels[:, None]).squeeze(1)")
            cause = error.__cause__
            if not isinstance(cause, IndexError | RuntimeError) or isinstance(cause, CheckError):
                raise
            text = str(cause).splitlines()[0]
            as_row = _label_used_as_row(text, labels, scores.shape[0])
            raise CheckError(f"{what} raised {type(cause).__name__}: {text[:160]}", where=error.where,
                             mistake="a label was used as a row number (the index into dim 0, which has N rows); "
                                     "labels pick columns (dim 1): row i with column labels[i]" if as_row else None
                             ) from cause
        expect_tensor(got, ref.pick_scores(scores, labels), given=scores, what=what,
                      mistakes=[_default_dtype_mistake(scores, ref.pick_scores(scores, labels), "scores"),
                                Mistake("every value you picked comes from row 0 of scores (scores[0, labels[i]]): "
                                        "row i must pick with labels[i]. With gather the index needs one row per "
                                        "example, shape [N, 1]; with torch.take (which reads scores flattened) each "
                                        "label needs its row's offset, i * C",
                                        lambda: scores[0, labels] if scores.shape[0] > 1 else None,
                                        where="look at the shape of the index you give gather (or of the indices you "
                                              "index with)"),
                                Mistake(f"you offset row i by i * {scores.shape[0]}, the number of rows N: in the "
                                        f"flattened scores each row is C = {scores.shape[1]} values long, so row i "
                                        "starts at i * C: torch.arange(N) * C + labels (or gather along dim 1, with "
                                        "no offsets at all)",
                                        lambda: _flat_pick_by_rows(scores, labels),
                                        where="look at the offset you add to each label to find its row in the "
                                              "flattened scores"),
                                Mistake("you gathered along dim 0: element i is scores[labels[i], 0], a label used "
                                        "as a row number; the labels pick columns, so gather along dim 1",
                                        lambda: scores.gather(0, labels.unsqueeze(1)).squeeze(1),
                                        where="look at the dim you gather along"),
                                Mistake("scores[:, labels] picks every label for every row (shape [N, N]); "
                                        "pair row i with labels[i]: scores[torch.arange(N), labels] or gather",
                                        lambda: scores[:, labels],
                                where='look at how the row index and the label are paired'),
                                Mistake("you kept the extra dimension from gather; squeeze(1) to get shape [N]",
                                        lambda: scores.gather(1, labels.unsqueeze(1)),
                                where='look at the shape after gather'),
                                Mistake("you picked the largest score of each row; use the given labels",
                                        lambda: scores.max(dim=1).values,
                                where='look at where the labels come in'),
                                Mistake("for a batch of one, squeeze() without a dimension also drops the batch "
                                        "dimension; squeeze(1) removes only the one gather added",
                                        lambda: scores.gather(1, labels.unsqueeze(1)).squeeze(),
                                where='look at which dimension you remove after gather')])
    passed("pick_scores", len(inputs))


def _every_label_in_every_row(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """What out[:, labels] = 1 makes: each row has a 1 in every column that appears among the labels."""
    out = torch.zeros(len(labels), num_classes)
    out[:, labels] = 1
    return out


def _labels_as_rows(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """What out[labels] = 1 makes: the rows numbered by the labels are all ones."""
    out = torch.zeros(len(labels), num_classes)
    out[labels] = 1
    return out


def _shows_empty_fill(got: object, expected: torch.Tensor, made: list[torch.Tensor]) -> bool:
    """A wrong result holding what _empty_filled put in torch.empty's memory (NaN, or 77 for integers), when the
    function made a tensor with torch.empty: values it never set."""
    if not made or not isinstance(got, torch.Tensor) or got.device.type == "meta" or got.is_complex() \
            or (got.shape == expected.shape and got.dtype == expected.dtype and torch.equal(got, expected)):
        return False
    with torch.no_grad():
        return bool((got == 77).any()) or (got.is_floating_point() and bool(got.isnan().any()))


def check_one_hot(fn: Callable[[torch.Tensor, int], torch.Tensor],
                  inputs: Sequence[tuple[torch.Tensor, int]] | None = None) -> None:
    inputs = inputs if inputs is not None else [(torch.tensor([0, 2, 1, 2]), 3), (torch.tensor([4]), 6)]
    for labels, num_classes in inputs:
        what = f"one_hot(labels {labels.tolist()}, {num_classes})"
        made: list[torch.Tensor] = []
        try:
            with _empty_filled(made):
                got = call(fn, labels, num_classes)
        except CheckError as error:
            cause = error.__cause__
            if not isinstance(cause, IndexError | RuntimeError) or isinstance(cause, CheckError):
                raise
            text = str(cause).splitlines()[0]
            raise CheckError(f"{what} raised {type(cause).__name__}: {text[:160]}", where=error.where,
                             mistake="a label was used as a row number (the index into dim 0, which has one row per "
                                     "example); a label picks the column of its own row: row i, column labels[i]"
                             if _label_used_as_row(text, labels, len(labels)) else None) from cause
        pairing = "pair row i with labels[i]: out[torch.arange(N), labels] = 1, or index the rows of torch.eye"
        expected = ref.one_hot(labels, num_classes)
        expect(not _shows_empty_fill(got, expected, made),
               f"{what}: your result comes from torch.empty (or empty_like), whose values are whatever was in that "
               "memory before: zeros on some runs, anything on others (this check fills that memory with NaN to show "
               "it)", where="look at how you make the tensor you put the ones in: does something set every other "
                             "value to 0?",
               mistake="torch.empty only reserves memory (uninitialised: it does not zero it); torch.zeros sets "
                       "every element to 0")
        expect_tensor(got, expected, what=what,
                      mistakes=[Mistake("every row of yours has a 1 in every column that appears among the labels, "
                                        "not only in its own label's column: that is what out[:, labels] = 1 does "
                                        f"(the ':' takes every row for each label); {pairing}",
                                        lambda: _every_label_in_every_row(labels, num_classes)
                                        if len(labels.unique()) > 1 else None,
                                        where="look at how the row index and the label are paired"),
                                Mistake("you scattered along dim 0: with the index labels[:, None] (shape [N, 1]), "
                                        "scatter_(0, index, 1.0) sets out[labels[i], 0], so the labels pick rows "
                                        "and only column 0 gets ones; scatter along dim=1, "
                                        "out.scatter_(1, labels[:, None], 1.0), sets out[i, labels[i]]",
                                        lambda: torch.zeros(len(labels), num_classes).scatter_(0, labels[:, None], 1.0),
                                        where="look at the dim you scatter along"),
                                Mistake(f"the labels were used as row numbers (out[labels] = 1 fills whole rows); "
                                        f"a label picks a column: {pairing}",
                                        lambda: _labels_as_rows(labels, num_classes),
                                        where="look at which dimension the labels index"),
Mistake("the values are right but the dtype is int64; losses want float32, "
                                        "so convert with .float()",
                                        lambda: torch.nn.functional.one_hot(labels, num_classes),
                                where='look at the dtype of your result'),
                                Mistake("you used the largest label + 1 as the number of classes; use num_classes",
                                        lambda: torch.eye(int(labels.max()) + 1)[labels],
                                where='look at where the number of classes comes from')])
    passed("one_hot", len(inputs))


def _norm_plus_eps_mistake(x: torch.Tensor, got: object) -> Mistake | None:
    """When ``got`` is x divided by each row's norm plus one small constant (an eps against dividing by zero)."""
    if not isinstance(got, torch.Tensor) or got.shape != x.shape or x.dim() != 2 or not got.is_floating_point() \
            or not x.is_floating_point() or got.device.type == "meta" or x.device.type == "meta":
        return None
    g, v = got.detach().double(), x.double()
    norms = torch.linalg.vector_norm(v, dim=1, keepdim=True)
    used = (g.abs() > 1e-6) & (v.abs() > 1e-6)
    if not bool(used.any()) or not bool((norms > 0).all()):
        return None
    eps = float((v[used] / g[used] - norms.expand_as(v)[used]).median())
    if not 1e-7 < eps < 0.5 * float(norms.min()) or not torch.allclose(g, v / (norms + eps), atol=1e-6, rtol=1e-5):
        return None
    return Mistake(f"you divided each row by its norm plus {eps:.2g} (an eps against dividing by zero), so every "
                   "row's length is a little under 1; the task asks for length 1: divide by the norm itself (to "
                   "guard a row of zeros, clamp the norm with clamp(min=eps), which leaves every other row exact, "
                   "or use F.normalize(x, dim=1), which does that)",
                   matches=lambda _: True, where="look at what you add to the norm before dividing")


def check_normalize_rows(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    # a negative value: a row's sum, the sum of its absolute values and its length all differ
    inputs = inputs if inputs is not None else [torch.tensor([[3.0, -4.0], [1.0, 0.0]]), _randn(4, 3, seed=8)]
    for x in inputs:
        got = call(fn, x)
        eps = _norm_plus_eps_mistake(x, got)
        expect_tensor(got, ref.normalize_rows(x), what=f"normalize_rows(x of shape {list(x.shape)})", given=x,
                      mistakes=[Mistake("you divided by each row's squared length (the sum of squares); the "
                                        "length is its square root: torch.linalg.vector_norm(x, dim=1, keepdim=True)",
                                        lambda: x / (x ** 2).sum(dim=1, keepdim=True),
                                        where="look at what you divide by: the length, or its square?"),
                                Mistake("you divided by each row's sum"
                                        + (" (or by the sum of its absolute values, the L1 norm: with no negative "
                                           "values here the two agree)" if bool((x >= 0).all()) else "")
                                        + "; length means the Euclidean norm, "
                                        "torch.linalg.vector_norm(x, dim=1, keepdim=True)",
                                        lambda: x / x.sum(dim=1, keepdim=True),
                                where='look at what you divide by: which length?'),
                                Mistake("you divided by the sum of each row's absolute values (the L1 norm, ord=1); "
                                        "length means the Euclidean norm (ord=2, vector_norm's default): "
                                        "torch.linalg.vector_norm(x, dim=1, keepdim=True)",
                                        lambda: x / x.abs().sum(dim=1, keepdim=True),
                                        where='look at what you divide by: which length?'),
                                Mistake("you divided by the norm of the whole tensor; take one norm per row "
                                        "(dim=1, keepdim=True)", lambda: x / torch.linalg.vector_norm(x),
                                where='look at the dim of the norm'),
                                Mistake("you divided by the column norms (dim=0); rows run along dim=1",
                                        lambda: x / torch.linalg.vector_norm(x, dim=0, keepdim=True),
                                where='look at the dim of the norm'),
                                Mistake("you divided each row by its largest absolute value (the max norm, "
                                        "ord=inf): that makes the largest entry +1 or -1, not the row's length 1; "
                                        "length means the Euclidean norm: torch.linalg.vector_norm(x, dim=1, "
                                        "keepdim=True)",
                                        lambda: x / x.abs().amax(dim=1, keepdim=True),
                                        where="look at what you divide by: which length?"),
                                Mistake("you divided every row by the same number, the largest row length "
                                        f"({float(torch.linalg.vector_norm(x.double(), dim=1).max()):.4g}), so only "
                                        "that row gets length 1; divide each row by its own length: "
                                        "torch.linalg.vector_norm(x, dim=1, keepdim=True), with no .max()",
                                        lambda: x / torch.linalg.vector_norm(x, dim=1, keepdim=True).max(),
                                        where="look at what happens to the row lengths before you divide"),
                                *([eps] if eps is not None else []),
                                Mistake("the row norms have shape [N] without keepdim=True, so they broadcast along "
                                        "the columns (row i was divided by the norm of row j); keep the dimension: "
                                        "vector_norm(x, dim=1, keepdim=True)",
                                        lambda: x / torch.linalg.vector_norm(x, dim=1),
                                where='look at the shape of the norms you divide by')])
    passed("normalize_rows", len(inputs))


def _recording_moves(fn: Callable, moves: list) -> Callable:
    """``fn``, recording each .to / .cuda / .cpu call it makes as (tensor, method, target device or None)."""
    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in ("to", "cuda", "cpu") and args and isinstance(args[0], torch.Tensor):
                target = None
                with contextlib.suppress(Exception):
                    target = torch.device("cuda" if name == "cuda" else "cpu") if name != "to" \
                        else torch._C._nn._parse_to(*args[1:], **kwargs)[0]
                moves.append((args[0], name, target))
            return func(*args, **kwargs)

    @functools.wraps(fn)
    def recorded(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the learner's signature
        with Recorder():
            return fn(*args, **kwargs)

    return recorded


_OTHER_DEVICE = ("your code moved it to another device than the one it was given (a global such as the notebook's "
                 "DEVICE, or a device written out): use the `device` argument, which the caller chose")


def _why_not_moved(key: str, value: torch.Tensor, moved: object, batch: dict,
                   got: dict, moves: list) -> tuple[str, str | None]:
    """Where to look and (when the recorded moves show it) the mistake, for batch[key] not on 'meta'."""
    targets = [target for t, _, target in moves if t is value]
    if any(target is not None and target.type != "meta" for target in targets):
        return "look at the device you pass to .to: the argument, or another name?", _OTHER_DEVICE
    if moved is value and any(target is not None and target.type == "meta" for target in targets):
        return ("look at what happens to the result of .to(device): where does it go?",
                "tensor.to(device) returns a new tensor (it does not move the old one in place): put that new "
                "tensor in the dict you return")
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    on_meta = {k for k in tensors if isinstance(got.get(k), torch.Tensor) and got[k].device.type == "meta"}
    floats = {k for k, v in tensors.items() if v.is_floating_point()}
    if not targets and on_meta and on_meta == floats:
        return ("look at the test that decides which values move",
                f"only the floating-point tensors moved; batch['{key}'] is {value.dtype}: a test on the type or dtype "
                "(torch.FloatTensor, is_floating_point(), a dtype) leaves the others behind, and every tensor of a "
                "batch moves, labels too: test isinstance(value, torch.Tensor)")
    return "look at which values your code moves: is this one among them?", None


def check_batch_to(fn: Callable[[dict, torch.device], dict], inputs: Sequence[dict] | None = None) -> None:
    # The "meta" device exists on every machine: tensors there have a shape and
    # dtype but no data, so this check proves the move without needing a GPU.
    inputs = inputs if inputs is not None else [
        {"images": torch.zeros(2, 1, 4, 4), "labels": torch.tensor([1, 0]), "names": ["a", "b"]},
        {"x": torch.ones(3), "epoch": 4},
    ]
    device = torch.device("meta")
    for batch in inputs:
        moves: list[tuple[torch.Tensor, str, torch.device | None]] = []
        try:
            got = call(_recording_moves(fn, moves), batch, device)
        except CheckError as error:
            to_cuda = [how for _, how, target in moves if target is not None and target.type == "cuda"]
            if any(word in str(error.__cause__) for word in ("CUDA", "cuda", "NVIDIA")) and to_cuda:
                raise CheckError("batch_to(batch, device='meta') tried to use CUDA, a device it was not asked for",
                                 where="look at how each tensor is moved: to which device?",
                                 mistake=".cuda() always moves to the GPU; .to(device) moves to the device you are "
                                         "given" if "cuda" in to_cuda else _OTHER_DEVICE) from None
            raise
        expect(isinstance(got, dict), f"batch_to should return a dict, not {describe(got)}",
               where="look at your return statement")
        expect(got.keys() == batch.keys(), f"batch_to returned keys {sorted(got)}; expected {sorted(batch)}",
               where="look at which values your new dict keeps: every key of the batch belongs in it")
        for key, value in batch.items():
            if isinstance(value, torch.Tensor):
                moved = got[key]
                elsewhere = [target for t, how, target in moves if t is value and target is not None
                             and target.type != "meta"]
                cuda_call = any(t is value and how == "cuda" for t, how, _ in moves)
                expect(not isinstance(moved, torch.Tensor) or moved.device.type in ("meta", value.device.type),
                       f"batch_to(batch, device='meta'): batch['{key}'] went to "
                       f"{moved.device if isinstance(moved, torch.Tensor) else ''}, not to 'meta'",
                       where="look at how each tensor is moved: to which device?",
                       mistake=".cuda() always moves to the GPU; .to(device) moves to the device you are given"
                       if cuda_call else _OTHER_DEVICE if elsewhere else None)
                where, mistake = _why_not_moved(key, value, moved, batch, got, moves)
                expect(isinstance(moved, torch.Tensor) and moved.device.type == "meta",
                       f"batch_to(batch, device='meta'): batch['{key}'] of your result is {describe(moved)}, "
                       "expected a tensor on 'meta'", where=where, mistake=mistake)
                expect_tensor(moved, value.to(device), what=f"batch['{key}']")
            else:
                expect(not isinstance(got[key], torch.Tensor),
                       f"batch_to: batch['{key}'] ({describe(value)}) is not a tensor, so it should come back as it "
                       f"is, but your result holds {describe(got[key])}",
                       where="look at what your code does with values that are not tensors",
                       mistake="only tensors move: turning other values into tensors (torch.tensor, as_tensor) "
                               "changes what the rest of the program gets; check isinstance(value, torch.Tensor) "
                               "and keep the others as they are")
                expect(got[key] is value or got[key] == value,
                       f"batch_to: batch['{key}'] ({describe(value)}) is not a tensor, so it should come back as it "
                       f"is, but your result holds {describe(got[key])}",
                       where="look at what your code does with values that are not tensors")
    passed("batch_to", len(inputs))


# ---------------------------------------------------------------- put it together: class means

def _class_means_examples() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    # float64 far from 0 in the second: each class's +1e8 and -1e8 rows cancel, so its mean is small while its sum
    # passes through 1e8, where float32 (7 significant digits) loses the mean altogether
    offsets = torch.tensor([1e8, 1e8, -1e8, 0.0, 0.0, -1e8], dtype=torch.float64)[:, None]
    return [
        # class 1 empty; classes of 3 and 1 examples: a count off by one is no constant factor
        (torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [9.0, 13.0]]), torch.tensor([0, 2, 0, 0]), 3),
        (_randn(6, 4, seed=11).double() + offsets, torch.tensor([1, 0, 1, 1, 2, 0]), 3),
        # more examples than 3 per class: a read per example shows apart from a check per class
        (_randn(13, 3, seed=12), torch.tensor([2, 0, 2, 2, 1, 0, 2, 1, 2, 0, 0, 2, 1]), 3),
    ]


def _only_first_column(got: object, expected: torch.Tensor) -> bool:
    """Column 0 right and every other column 0, where the expected ones are not: an index of one column."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dim() != 2 or got.shape[1] < 2 \
            or got.device.type == "meta" or not got.is_floating_point():
        return False
    rest = expected[:, 1:]
    return bool((got[:, 1:] == 0).all()) and bool((rest != 0).any()) and _close_to(got[:, :1], [expected[:, :1]])


def _through_float32(got: object, features: torch.Tensor, expected: torch.Tensor) -> bool:
    """Wrong means that are all float32 numbers, off by no more than float32's rounding of float64 features that
    float32 cannot hold (values above 2**24): the work went through float32."""
    if features.dtype != torch.float64 or not isinstance(got, torch.Tensor) or got.shape != expected.shape \
            or got.dtype not in (torch.float32, torch.float64) or got.device.type == "meta":
        return False
    largest = float(features.abs().max())
    if largest < 2 ** 24 or _close_to(got, [expected]):
        return False
    g = got.detach().double()
    spacing = 2.0 ** (math.frexp(largest)[1] - 24)  # float32's step between neighbours near the largest value
    return bool(torch.equal(g, g.float().double())) \
        and float((g - expected).abs().max()) <= 4 * len(features) * spacing


def _meta_device_problem(fn: Callable, features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> str | None:
    """What goes wrong when the inputs live on another device ("meta", present on every machine), or None.

    An answer whose operations the meta device cannot run (data-dependent ones: bincount, boolean masks,
    .item()) proves nothing either way, so it is not blamed.
    """
    meta_features, meta_labels = features.to("meta"), labels.to("meta")
    # not through `call`: the rules already held on the real call, and a meta tensor has no values to compare
    moves = _CpuMoves()
    try:
        with warnings.catch_warnings(), moves:
            warnings.simplefilter("ignore")
            got = fn(meta_features, meta_labels, num_classes)
    except Exception as error:  # noqa: BLE001 - the learner's code, on a device it may not support
        text = str(error)
        if moves.seen:  # .cpu() of a meta tensor raises "Cannot copy out of meta tensor": the move is the mistake
            return f"it moved {moves.seen[0]}"
        if "device" in text and ("cpu" in text or "meta" in text):
            return f"it raised {type(error).__name__}: {text.splitlines()[0][:160]}"
        return None
    if isinstance(got, torch.Tensor) and got.device.type != "meta":
        return f"it returned a tensor on '{got.device.type}'" + (f" (it moved {moves.seen[0]})" if moves.seen else "")
    return None


class _CpuMoves(TorchFunctionMode):
    """Records the inputs' moves to the CPU (``x.cpu()``, ``x.to("cpu")``) while a function runs on meta tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            name = getattr(func, "__name__", "")
            target = [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, (str, torch.device))]
            if name == "cpu" or (name == "to" and any(torch.device(t).type == "cpu" for t in target)):
                self.seen.append(f"a tensor to the CPU (.{name}({', '.join(repr(str(t)) for t in target)}))")
        return func(*args, **kwargs)


class _HostReads(TorchFunctionMode):
    """Records each time a tensor's values are read into Python (on a GPU, a copy to the CPU and a wait for it)."""

    SCALAR = ("item", "__int__", "__float__", "__bool__", "__index__", "__complex__")
    BULK = ("tolist", "numpy")

    def __init__(self) -> None:
        super().__init__()
        self.scalars = 0  # single values read: x.item(), int(x), if x.any():
        self.bulk: list[str] = []  # whole tensors read: x.tolist(), x.numpy()
        self.printing = 0  # inside print(tensor): a debugging line, not the computation

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("__repr__", "__str__", "__format__"):
            self.printing += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                self.printing -= 1
        if args and isinstance(args[0], torch.Tensor) and not self.printing:
            if name in self.SCALAR:
                self.scalars += 1
            elif name in self.BULK and args[0].numel() > 1:
                self.bulk.append(f"a tensor of {args[0].numel()} values into Python with .{name}()")
        return func(*args, **(kwargs or {}))


def _host_reads_problem(fn: Callable, features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> str | None:
    """How the function copies the inputs' values into Python (a trip through the CPU on a GPU), or None.

    A few single values (a check per class, such as ``if counts[c] > 0``) are not blamed; a read per example, or a
    whole tensor read at once, is: that is the data itself making the trip.
    """
    reads = _HostReads()
    try:
        with warnings.catch_warnings(), reads:
            warnings.simplefilter("ignore")
            fn(features.clone(), labels.clone(), num_classes)
    except Exception:  # noqa: BLE001 - the real call ran already; a second one that fails proves nothing here
        return None
    if reads.bulk:
        return f"it copied {reads.bulk[0]}"
    if len(labels) > 3 * num_classes and reads.scalars >= len(labels):
        return f"it read {reads.scalars} single values into Python for {len(labels)} examples (one per example)"
    return None


def check_class_means(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
                      inputs: Sequence[tuple[torch.Tensor, torch.Tensor, int]] | None = None) -> None:
    inputs = inputs if inputs is not None else _class_means_examples()
    for features, labels, num_classes in inputs:
        what = (f"class_means(features {list(features.shape)} {features.dtype}, labels {labels.tolist()[:8]}"
                f"{' ...' if len(labels) > 8 else ''}, num_classes={num_classes})")
        members = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
        sums, counts = members.T @ features, members.sum(dim=0)
        empty = [c for c in range(num_classes) if counts[c] == 0]
        filled = [c for c in range(num_classes) if counts[c] > 0]
        expected = ref.class_means(features, labels, num_classes)
        try:
            got = call(fn, features, labels, num_classes)
        except CheckError as error:
            cause = error.__cause__
            if not isinstance(cause, Exception) or isinstance(cause, CheckError):
                raise
            from_labels = int(labels.max()) + 1
            # the error's sizes show a tensor sized from the labels (max + 1) meeting one sized num_classes
            sized_by_labels = bool(empty) and from_labels != num_classes and "size of tensor" in str(cause) \
                and f"({from_labels})" in str(cause) and f"({num_classes})" in str(cause)
            # the error's sizes show the per-class counts ([C]) meeting the sums' columns ([C, D]) when divided
            features_dim = features.shape[1] if features.dim() == 2 else None
            counts_by_columns = not sized_by_labels and features_dim not in (None, num_classes) \
                and "size of tensor" in str(cause) and f"({features_dim})" in str(cause) \
                and f"({num_classes})" in str(cause)
            # the error's sizes show a label indexing a tensor with one row per example (N), fewer than the classes
            n = len(labels)
            rows_per_example = not sized_by_labels and not counts_by_columns and n < num_classes \
                and f"out of bounds for dimension 0 with size {n}" in str(cause)
            raise CheckError(f"{what} raised {type(cause).__name__}: {str(cause).splitlines()[0][:160]}"
                             + (f" (here class(es) {empty} have no examples)" if empty and not counts_by_columns
                                else ""),
                             where="look at the size of each tensor you index (or add into) by class: how many rows "
                                   "does it have?" if rows_per_example else error.where,
                             mistake=f"a label indexed a tensor with {n} row{'s' if n != 1 else ''}, one per "
                                     "example: here there are fewer "
                                     f"examples ({n}) than classes ({num_classes}). A tensor of sums (or counts) per "
                                     "class needs num_classes rows: make it with torch.zeros(num_classes, D, "
                                     "dtype=features.dtype, device=features.device), not from features "
                                     "(zeros_like(features[:num_classes]) has only N rows when N < num_classes)"
                             if rows_per_example else
                                     f"a tensor sized from the labels has {from_labels} entries (the largest label + "
                                     f"1), not num_classes = {num_classes}: bincount without minlength=, "
                                     "labels.max() + 1 and unique() all miss the empty classes after the largest "
                                     "label" if sized_by_labels else
                                     f"the sizes are the {features_dim} features and the {num_classes} classes: one "
                                     "operation lined up a size per class with a size per feature. Where you divide "
                                     f"the [{num_classes}, {features_dim}] sums by the counts (one per class), give "
                                     f"the counts shape [{num_classes}, 1] (counts[:, None], or keepdim=True) so each "
                                     "row is divided by its own class's count" if counts_by_columns else None) from cause
        expect_tensor(got, expected, what=what, mistakes=[
            Mistake(f"class(es) {empty} have no examples and your rows for them are NaN (0 / 0); the task asks for "
                    "zeros there", matches=lambda g: isinstance(g, torch.Tensor) and bool(empty)
                    and g.shape == sums.shape and bool(g[empty].isnan().any()),
                    where="look at what your division does for a class with no examples (a count of 0)"),
            Mistake(f"class(es) {empty} have no examples, and your rows for them are not zeros (the task asks for "
                    "zeros there); the other classes' means are right",
                    matches=lambda g: isinstance(g, torch.Tensor) and bool(empty) and g.shape == sums.shape
                    and g.device.type != "meta" and not bool(g[empty].isnan().any())
                    and not bool((g[empty] == 0).all()) and _close_to(g[filled], [expected[filled]]),
                    where="look at what your code puts in the row of a class with no examples"),
            Mistake(f"your means are right but {torch.get_default_dtype()}, not the features' {features.dtype}: a "
                    "tensor made without dtype= (torch.zeros) or converted with .float() (one_hot(...).float()) is "
                    f"{torch.get_default_dtype()}; make each new tensor with dtype=features.dtype, or convert with "
                    ".to(features.dtype)",
                    matches=lambda g: isinstance(g, torch.Tensor) and g.dtype == torch.get_default_dtype()
                    != features.dtype and g.shape == sums.shape and g.device.type != "meta"
                    and _close_to(g, [expected]),
                    where="look at the dtype of each tensor your function makes or converts"),
            Mistake("each class's sum was divided by its count + 1: scatter_reduce(..., reduce=\"mean\") (or "
                    "index_reduce_) with include_self=True, the default, counts the 0 already in the output as one "
                    "more value of every class; pass include_self=False (and if you added 1 to the counts to avoid "
                    "dividing by zero, use counts.clamp(min=1) instead)",
                    lambda: sums / (counts + 1)[:, None],
                    where="look at how many values each class's mean is taken over"),
            Mistake("only column 0 of your result holds the class means; the other columns are 0: scatter_add_ (and "
                    "scatter_reduce) along dim 0 with the index labels[:, None] (shape [N, 1]) writes only where the "
                    "index has entries, column 0. Give the index features' shape, labels[:, None].expand_as(features), "
                    "or use index_add_(0, labels, features), which takes the [N] labels as they are",
                    matches=lambda g: _only_first_column(g, expected),
                    where="look at the shape of the index you give scatter_add_ (or scatter_reduce)"),
            Mistake(f"you divided every class's sum by the number of examples ({len(labels)}); "
                    "a mean divides by that class's own count", lambda: sums / len(labels),
                    where="look at what you divide each class's sum by"),
            Mistake("those are the sums of each class's features, not their means", lambda: sums,
                    where="look at the last step: from each class's sum to its mean"),
            Mistake("your result is transposed: one row per class, one column per feature",
                    lambda: (sums / counts.clamp(min=1)[:, None]).T,
                    where="look at which dim of the result runs over the classes"),
            Mistake(f"you took the number of classes from the largest label ({int(labels.max()) + 1}); use num_classes "
                    f"({num_classes}): a class may have no examples", matches=lambda g: isinstance(g, torch.Tensor)
                    and g.dim() == 2 and g.shape[0] == int(labels.max()) + 1 != num_classes,
                    where="look at where the number of rows comes from: the num_classes argument, or the labels?"),
            Mistake("the counts were divided along the wrong dimension: they have one value per class, so they must "
                    "line up with the rows (shape [C, 1]), not with the columns",
                    lambda: sums / counts.clamp(min=1),
                    where="look at the shape of the counts when you divide: do they line up with the rows?"),
            Mistake(f"the means were computed in float32: the features are {features.dtype}, and with values near "
                    f"{float(features.abs().max()):.3g} float32's 7 significant digits lose what a class's mean keeps "
                    "(your values are all float32 numbers); compute in the features' dtype: make each tensor with "
                    "dtype=features.dtype, and convert nothing with .float()",
                    matches=lambda g: _through_float32(g, features, expected),
                    where="look at the dtype of each tensor your function makes or converts"),
        ], given=features)
        trip = _host_reads_problem(fn, features, labels, num_classes)
        expect(trip is None, f"{what}: {trip}; the task asks for no trip through the CPU, and on a GPU each read "
                             "copies values from the GPU to the CPU and waits for them",
               where="look at each .tolist(), .numpy(), .item(), int(...) and float(...) of a tensor in your function, "
                     "and at each tensor in an if",
               mistake="count and sum with tensor operations on the device (a comparison with torch.arange, one_hot, "
                       "bincount(labels, minlength=num_classes), index_add_): a label read into Python is a copy from "
                       "the device" if trip is not None and "single values" in trip else
                       "keep the values in tensors on their device: a list or a NumPy array made from a tensor is a "
                       "copy of it on the CPU")
        problem = _meta_device_problem(fn, features, labels, num_classes)
        moved = problem is not None and "it moved" in problem
        expect(problem is None, f"{what}, with the same inputs on another device ('meta'): {problem}; "
                                + ("the work stays on the features' device, with no trip through the CPU" if moved
                                   else "the result must be on the features' device"),
               where="look at each .cpu() or .to('cpu') in your function: it takes a tensor off the GPU it is on"
               if moved else "look at every tensor your function creates (torch.arange, torch.zeros, torch.eye ...): "
                             "on which device is it made?",
               mistake="work on the tensors where they are: leave the inputs on their device (on a GPU, copying "
                       "them to the CPU and the result back costs more than the computation), and make each new "
                       "tensor with device=features.device" if moved else
                       "a tensor made without device= lives on the CPU; pass device=features.device (and the "
                       "dtype you need) when you create one")
    passed("class_means", len(inputs))
