"""Lesson 02 Autograd: checks for every exercise.

Each ``check_*`` takes the learner's function and, optionally, extra inputs
(the graded cells pass hidden ones). It prints one pass line or raises
CheckError naming the mistake. Errors that autograd itself raises for the
mistakes this lesson teaches (a non-scalar backward, an in-place update of a
leaf outside ``no_grad``...) are translated into advice by :func:`_run`.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from fractions import Fraction
from typing import Any, Callable, Iterator, Sequence
from unittest import mock

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from helpers.checks import (Allow, CheckError, Mistake, backward_passes, call, describe, expect, expect_close, expect_tensor,
                           expected_raise, passed, runs_here, same_tensor)
from helpers.reference import autograd as ref

# The learning rate the notebook itself uses for the line fits; the checks use
# other rates, so a function that ignores its ``lr`` argument shows up.
NOTEBOOK_LR = 0.2
# Learning rates a learner may write in place of lr (the checks' own rates are among them: each check differs)
FIXED_LRS = (0.1, 0.01, 0.05, 0.001, 0.5)

# Messages from PyTorch (or Python) for the mistakes this lesson teaches, and what to do about each
# (matched as substrings of the error the learner's code raised).
KNOWN_ERRORS = [
    ("grad can be implicitly created only for scalar outputs",
     "backward() was called on a tensor with more than one element. Reduce it to a scalar first "
     "(e.g. .mean() or .sum()), or pass gradient=v to get a vector-Jacobian product"),
    ("a leaf Variable that requires grad is being used in an in-place operation",
     "you updated a parameter in place while autograd was recording. Put the update inside "
     "`with torch.no_grad():` so it is not part of the graph"),
    ("'NoneType' object has no attribute 'zero_'",
     "a .grad is None until the first backward() fills it, so .grad.zero_() before it fails: clear it with "
     "`w.grad = None` (or zero it only when it is not None)"),
    ("'NoneType'",
     "a value was None, usually a .grad: either backward() never reached that tensor, or `w = w - lr * w.grad` "
     "replaced the leaf w by a new tensor whose .grad is never filled. Update in place inside "
     "torch.no_grad(): `w -= lr * w.grad`"),
    ("does not require grad and does not have a grad_fn",
     "backward() found nothing that requires grad. Call .requires_grad_() on the tensor you differentiate "
     "with respect to; and inside torch.no_grad() update parameters in place (w -= ...), because "
     "`w = w - ...` there makes a new tensor that no longer requires grad"),
    ("Trying to backward through the graph a second time",
     "backward() was called twice through the same graph. Recompute the forward pass before each backward"),
    ("Can't call numpy() on Tensor that requires grad",
     "call .detach() before .numpy() (or use .item() for a single number)"),
    ("Inference tensors cannot be saved for backward",
     "a tensor made inside torch.inference_mode() was used in a computation autograd records; "
     "use torch.no_grad() there, or .clone() the tensor outside inference mode"),
    ("Jacobian mismatch",
     "gradcheck raises an error when the gradients disagree; pass raise_exception=False so it returns False"),
    ("gradcheck expects at least one input tensor to require gradient",
     "the float64 copy you pass to gradcheck must require grad: x.detach().double().requires_grad_()"),
]


def _run(fn: Callable[..., Any], *args: Any, allow: Allow = Allow(), nothing_random: bool = False) -> Any:
    """``call(fn, *args, allow=allow, nothing_random=...)``, naming the mistake behind the autograd errors this
    lesson teaches.

    Pass the caller's own tensors: a function that calls requires_grad_() on its
    input, or updates it in place, is told so.
    """
    try:
        with warnings.catch_warnings():
            # learners' mistakes (.grad of a non-leaf, float32 gradcheck) warn; the check explains instead
            warnings.simplefilter("ignore")
            return call(fn, *args, allow=allow, nothing_random=nothing_random)
    except CheckError as error:
        cause = str(error.__cause__ or "")
        advice = next((tip for pattern, tip in KNOWN_ERRORS if pattern in cause), None)
        if advice is None:
            raise
        first_line = error.symptom.splitlines()[0]  # gradcheck's error goes on to print whole Jacobians
        raise CheckError(first_line, where="look at the line of your code the error points to, and at what autograd "
                                           "needs there", mistake=advice) from error.__cause__


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=dtype)


@contextlib.contextmanager
def _optimizer_steps() -> Iterator[list[str]]:
    """The classes of the torch.optim optimizers stepped inside the block (PyTorch's global step hook)."""
    stepped: list[str] = []
    handle = register_optimizer_step_pre_hook(
        lambda optimizer, args, kwargs: stepped.append(type(optimizer).__name__))
    try:
        yield stepped
    finally:
        handle.remove()


def _same_floats(a: Any, b: Sequence[float]) -> bool:
    """Element-wise closeness of two number sequences, where NaN equals NaN (diverged runs)."""
    if not isinstance(a, (list, tuple)) or len(a) != len(b):
        return False
    for got, want in zip(a, b):
        got = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
        if not isinstance(got, (int, float)):
            return False
        if math.isnan(want) or math.isnan(got):
            if not (math.isnan(want) and math.isnan(got)):
                return False
        elif not math.isclose(got, want, rel_tol=1e-4, abs_tol=1e-5):
            return False
    return True


# ---------------------------------------------------------------- mean_square_grad

# An x whose gradient differs from element to element: on it a gradient taken at a constant tensor shows
VARIED = torch.tensor([-1.0, 0.5, 2.0])


def _probe_grad(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Any:
    """fn's answer for ``x``; None when fn fails there."""
    try:
        return _run(fn, x.clone())
    except CheckError:
        return None


def check_mean_square_grad(fn: Callable[[torch.Tensor], torch.Tensor],
                           inputs: Sequence[torch.Tensor] | None = None) -> None:
    inputs = inputs if inputs is not None else [torch.ones(2, 2), torch.tensor([-2.0, 0.0, 1.5]), _randn(3, 4),
                                                torch.tensor([0.5, -1.0], dtype=torch.float64)]
    for x in inputs:
        n = x.numel()
        what = f"mean_square_grad(x of shape {list(x.shape)}, {x.dtype})"
        with backward_passes() as backward_passes_run:
            got = _run(fn, x)
        expected = ref.mean_square_grad(x)
        at_new = [ref.mean_square_grad(fill(x)) for fill in (torch.ones_like, torch.zeros_like)]
        expect_tensor(got, expected, what=what,
                      given=x,
                      mistakes=[Mistake("you returned out itself (one number); return the gradient, x.grad",
                                        matches=lambda g: isinstance(g, torch.Tensor) and g.dim() == 0 and n > 1,
                                            where='look at what you return: the output, or a gradient?'),
                                Mistake("that is the gradient of the sum, not the mean: out = mean(...) divides "
                                        f"by the number of elements ({n})", lambda: 6 * (x + 2),
                                            where='look at how out reduces its elements'),
                                # on an x of 3 elements, 1/3 of the gradient is also a division by len(x) ** 2 = 9:
                                # the factor 3 is named only when a probe of other sizes agrees
                                Mistake("the factor 3 is missing: out = mean(3 * (x + 2) ** 2)",
                                        matches=lambda g: _near(g, 2 * (x + 2) / n) and _near(
                                            _probe_grad(fn, DIVISOR_PROBE), 2 * (DIVISOR_PROBE + 2) / DIVISOR_PROBE.numel()),
                                        where='look at every factor of out'),
                                *_divisor_mistakes(fn, x, expected),
                                # the gradient of the mean is 6 * (t + 2) / n: equal everywhere only where t is,
                                # and then the gradient at a new tensor of ones or zeros
                                Mistake("every element of your gradient is the same, as if every element of x were "
                                        "equal: it is the gradient at a new tensor of ones or zeros "
                                        "(torch.ones_like(x)?), not at a copy of x's values "
                                        "(x.detach().clone().requires_grad_())",
                                        matches=lambda g: any(isinstance(g, torch.Tensor) and g.shape == x.shape
                                                              and torch.allclose(g, a) for a in at_new) and (
                                            _constant_where_varied(g, expected)
                                            or _constant_where_varied(_probe_grad(fn, VARIED),
                                                                      ref.mean_square_grad(VARIED))),
                                        where="look at the tensor you differentiate with respect to: does it hold "
                                              "x's values?")])
        # task: "computed by autograd": the grader's stand-in runs the function elsewhere, where the kernel watches
        expect(not runs_here(fn) or backward_passes_run[0] > 0,
               f"{what} returned the right values, but autograd never ran: no backward() and no "
               "torch.autograd.grad during the call",
               where="look at how your function gets the gradient",
               mistake="the exercise asks autograd for it: compute out from a copy of x that requires grad, call "
                       "out.backward() and return the copy's .grad. A derivative worked out by hand is what autograd "
                       "spares you")
    passed("mean_square_grad", len(inputs))


# An x whose sizes all differ: len(x) = 2, x.shape[-1] = 3, x.numel() = 6, len(x) ** 2 = 4
DIVISOR_PROBE = torch.tensor([[-1.0, 0.5, 2.0], [1.0, -0.5, 0.0]])


def _near(got: Any, want: torch.Tensor) -> bool:
    """``got`` is a tensor of ``want``'s shape with about its values (a learner's float32 arithmetic)."""
    return (isinstance(got, torch.Tensor) and got.shape == want.shape
            and torch.allclose(got.detach().to(want.dtype), want, atol=1e-5, rtol=1e-4))


def _divisors(x: torch.Tensor) -> list[tuple[str, int]]:
    """What a learner may divide the summed squares by instead of the number of elements, each with its words."""
    if x.dim() == 0:
        return []
    return [("len(x) ** 2", len(x) ** 2), ("len(x), the length of the first dimension", len(x)),
            ("x.shape[-1], the length of the last dimension", x.shape[-1]), ("x.numel() ** 2", x.numel() ** 2)]


def _divisor_mistakes(fn: Callable, x: torch.Tensor, expected: torch.Tensor) -> list[Mistake]:
    """The mean written as a sum over another count: every value is numel / count of the expected one. Named when
    a probe whose sizes all differ (:data:`DIVISOR_PROBE`) shows the same count."""
    n = x.numel()
    mistakes = []
    for index, (words, count) in enumerate(_divisors(x)):
        if count == n:
            continue
        ratio = Fraction(n, count)

        def matches(g: Any, index: int = index, count: int = count) -> bool:
            probe_count = _divisors(DIVISOR_PROBE)[index][1]
            return _near(g, expected * n / count) and _near(
                _probe_grad(fn, DIVISOR_PROBE), ref.mean_square_grad(DIVISOR_PROBE) * DIVISOR_PROBE.numel() / probe_count)

        share = f"{ratio} of" if ratio.numerator == 1 else f"{ratio} times"
        mistakes.append(Mistake(f"every value is {share} the expected one: your out divides by {words} ({count} "
                                f"here), and a mean divides by the number of elements, x.numel() ({n}). Check what "
                                "you divide by (or use .mean())", matches=matches,
                                where="look at what out divides by"))
    return mistakes


def _constant_where_varied(got: Any, expected: torch.Tensor) -> bool:
    """``got`` has ``expected``'s shape and one value throughout, where ``expected`` has several."""
    return (isinstance(got, torch.Tensor) and got.shape == expected.shape and got.numel() > 1
            and bool((got == got.flatten()[0]).all()) and not bool((expected == expected.flatten()[0]).all()))


# ---------------------------------------------------------------- vector_jacobian_product

def _jacobian(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.jacobian(f, x)


def _vjp_examples() -> list[tuple[Callable, torch.Tensor, torch.Tensor]]:
    w = _randn(3, 3, seed=1)

    def square(x: torch.Tensor) -> torch.Tensor:
        return x ** 2

    def matrix_times(x: torch.Tensor) -> torch.Tensor:
        return w @ x

    w_rows = _randn(3, 2, seed=4)

    def rows_times(x: torch.Tensor) -> torch.Tensor:  # x [2, 3] -> [2, 2]: neither side is a vector
        return x @ w_rows

    return [(square, torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.5, -1.0])),
            (matrix_times, _randn(3, seed=2), _randn(3, seed=3)),
            (rows_times, _randn(2, 3, seed=5), _randn(2, 2, seed=6)),
            # the caller's x may itself require grad (a parameter, say): a copy of it that is not detached is no
            # leaf (its .grad stays None), and a backward through it writes into the caller's x.grad
            (matrix_times, _randn(3, seed=7).requires_grad_(True), _randn(3, seed=8))]


def check_vector_jacobian_product(
    fn: Callable, inputs: Sequence[tuple[Callable, torch.Tensor, torch.Tensor]] | None = None
) -> None:
    inputs = inputs if inputs is not None else _vjp_examples()
    for f, x, v in inputs:
        name = getattr(f, "__name__", "f")
        got = _run(fn, f, x, v)
        expect_tensor(got, ref.vector_jacobian_product(f, x, v),
                      what=f"vector_jacobian_product({name}, x of shape {list(x.shape)}, v of shape {list(v.shape)})",
                      mistakes=[Mistake("you backpropagated as if v were all ones (f(x).sum().backward()); "
                                        "pass the given vector: f(x).backward(gradient=v)",
                                        lambda: ref.vector_jacobian_product(f, x, torch.ones_like(v)),
                                            where='look at where v enters the backward pass'),
                                Mistake("you computed J @ v; backward(gradient=v) gives v @ J, "
                                        "the vector-Jacobian product", lambda: _jacobian(f, x) @ v,
                                            where='look at which side v multiplies the Jacobian from'),
                                Mistake("you multiplied v elementwise with the gradient of f(x).sum(); that equals "
                                        "v @ J only when each output depends on its own input alone. Pass v to "
                                        "backward: f(x).backward(gradient=v)",
                                        lambda: v * ref.vector_jacobian_product(f, x, torch.ones_like(v)),
                                        where="look at where v enters the backward pass")])
    passed("vector_jacobian_product", len(inputs))


# ---------------------------------------------------------------- per_batch_grads

def _copy_w(w: torch.Tensor) -> torch.Tensor:
    """A fresh leaf with the same values and the same leftover .grad (if any) as ``w``."""
    copy = w.detach().clone().requires_grad_(True)
    if w.grad is not None:
        copy.grad = w.grad.detach().clone()
    return copy


def _per_batch_examples(leftover: bool = False) -> list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]]:
    examples = []
    for seed, (d, n_batches) in enumerate([(3, 3), (2, 4)]):
        w = _randn(d, seed=10 + seed).requires_grad_(True)
        if leftover:
            w.grad = torch.full((d,), 5.0 - seed)
        batches = [(_randn(5, d, seed=20 + 10 * seed + i), _randn(5, seed=40 + 10 * seed + i)) for i in range(n_batches)]
        examples.append((w, batches))
    return examples


def _broadcast_grads(w: torch.Tensor, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """Each batch's gradient of a loss whose [B, 1] prediction broadcast against the [B] targets to [B, B]."""
    grads = []
    for x, y in batches:
        leaf = w.detach().clone().requires_grad_(True)
        (((x @ leaf).unsqueeze(1) - y) ** 2).mean().backward()
        grads.append(leaf.grad)
    return grads


def check_per_batch_grads(fn: Callable, inputs: Sequence[tuple[torch.Tensor, list]] | None = None) -> None:
    inputs = inputs if inputs is not None else _per_batch_examples()
    for w, batches in inputs:
        leftover = w.grad.detach().clone() if w.grad is not None else torch.zeros_like(w)
        what = (f"per_batch_grads(w of shape {list(w.shape)}, {len(batches)} batches"
                f"{', w arriving with a leftover gradient' if w.grad is not None else ''})")
        expected = ref.per_batch_grads(_copy_w(w), batches)
        learner_w = _copy_w(w)
        # task: "For each batch compute the loss ..., backpropagate it": w.grad changes, w's values must not
        got = _run(fn, learner_w, batches, allow=Allow(changed=(learner_w,)))
        expect(learner_w.is_leaf and learner_w.requires_grad and torch.equal(learner_w.detach(), w.detach()),
               f"{what} changed w itself (its values, or its requires_grad); only its .grad may change",
               where="look for assignments to w or in-place operations on it")
        expect(isinstance(got, (list, tuple)), f"{what} should return a list of tensors, not {describe(got)}",
               where="look at what your function returns (every return statement)")
        if len(got) > len(batches):
            # more results than batches: a second identical call that returns still more carries the list over
            first_count = len(got)  # before the second call: a list kept between calls is the same object
            again_w = _copy_w(w)
            again = _run(fn, again_w, batches, allow=Allow(changed=(again_w,)))
            expect(not (isinstance(again, (list, tuple)) and len(again) > first_count),
                   f"{what} returned {first_count} gradients; expected one per batch ({len(batches)}). An identical "
                   f"second call returned {len(again)}: the list grows from call to call",
                   where="look for a list that lives between calls: a default argument (grads=[]) or a global",
                   mistake="the list is carried over from an earlier call (a default argument or a global): create "
                           "it inside the function, on every call (grads = [])")
        expect(len(got) == len(batches), f"{what} returned {len(got)} gradients; expected one per batch ({len(batches)})",
               where="look at where you append to the list: is it inside the loop over the batches, once per batch?",
               mistake=f"return one per batch: append a copy of w.grad after each batch's backward, {len(batches)} in all")
        odd = [g for g in got if not isinstance(g, torch.Tensor)]
        expect(not odd, f"{what} should return a list of tensors, but it holds {describe(odd[:1] and odd[0])}",
               where="look at what you append to the list at each batch")
        # tensors in the list that are w.grad itself (or each other): zeroing w.grad later changes them too
        shared = any(same_tensor(got[i], got[j]) for i in range(len(got)) for j in range(i)) or (
            learner_w.grad is not None and any(same_tensor(g, learner_w.grad) for g in got[:-1]))
        never_zeroed = [leftover + sum(expected[: i + 1]) for i in range(len(expected))]
        zeroed_after = [expected[0] + leftover] + list(expected[1:])
        for index, (g, want) in enumerate(zip(got, expected)):
            expect_tensor(g, want, what=f"{what}, gradient of batch {index}", mistakes=[
                Mistake("you stored w.grad itself, not a copy, so zeroing or refilling it later changed the "
                        "gradients already in your list. Append w.grad.clone()", matches=lambda _: shared,
                            where='look at what you append: a tensor that later changes?'),
                Mistake("you never cleared w.grad, so each gradient also holds the batches before it: backward() "
                        "adds into .grad. Zero it (w.grad = None or w.grad.zero_()) before each backward",
                        matches=lambda _: all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(got, never_zeroed)),
                            where='look at what happens to w.grad between batches'),
                Mistake(f"each gradient is the batch size ({len(batches[index][1])}) times the expected one: your "
                        "loss sums the squared errors, and the task's loss is their mean",
                        matches=lambda _: all(torch.allclose(a, b * len(batch[1]), atol=1e-5, rtol=1e-4)
                                              for a, b, batch in zip(got, expected, batches)),
                        where="look at how each batch's loss reduces its squared errors"),
                Mistake(f"your loss averages {len(batches[index][1])} x {len(batches[index][1])} squared differences: "
                        "a [B, 1] column minus a [B] vector broadcasts to [B, B], pairing every prediction with "
                        "every target; keep the prediction and y the same shape ([B])",
                        matches=lambda _: all(torch.allclose(a, b, atol=1e-5, rtol=1e-4)
                                              for a, b in zip(got, _broadcast_grads(w, batches))),
                        where="look at the shapes of the prediction and of y in each batch's loss (print them)"),
                Mistake("every gradient in your list is the gradient of all the batches together: one backward "
                        "through the summed losses; the task asks for one backward per batch",
                        matches=lambda _: len(got) > 1 and all(torch.allclose(a, sum(expected), atol=1e-5, rtol=1e-4)
                                                               for a in got),
                        where="look at how many times backward() runs, and on which loss"),
                Mistake("the first gradient includes the gradient w already held when your function was called: "
                        "clear w.grad before each backward, the first one too (zeroing after it is too late)",
                        matches=lambda _: w.grad is not None and all(
                            torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(got, zeroed_after)),
                                where='look at when w.grad is cleared, relative to backward()'),
            ])
    passed("per_batch_grads", len(inputs))


def check_per_batch_grads_leftover(fn: Callable, inputs: Sequence[tuple[torch.Tensor, list]] | None = None) -> None:
    """Like :func:`check_per_batch_grads`, but ``w`` arrives holding a gradient from earlier work."""
    inputs = inputs if inputs is not None else _per_batch_examples(leftover=True)
    missing = [i for i, (w, _) in enumerate(inputs) if w.grad is None]
    if missing:
        raise ValueError(f"check_per_batch_grads_leftover needs w.grad set in every input (not in {missing})")
    check_per_batch_grads(fn, inputs)


# ---------------------------------------------------------------- fitting a line

def _line_examples() -> list[tuple[torch.Tensor, torch.Tensor, float, int]]:
    x1 = torch.linspace(-1, 1, 20)
    x2 = torch.linspace(-2, 2, 30)
    x3 = torch.linspace(0, 2, 10)
    return [(x1, 2 * x1 - 1 + 0.1 * _randn(20, seed=50), 0.1, 60),
            (x2, -0.5 * x2 + 3 + 0.2 * _randn(30, seed=51), 0.05, 40),
            # two steps on x with a nonzero mean, far from converged: every update rule leaves its own trace
            (x3, 1.5 * x3 + 2 + 0.1 * _randn(10, seed=52), 0.1, 2)]


def _fit_by_hand_variant(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, *, zero: bool = True,
                         sign: float = 1.0, reduce: str = "mean", b_moves_by_w: bool = False,
                         one_at_a_time: bool = False, zero_only: str | None = None) -> tuple[float, float]:
    """The reference loop with one knob turned: ``zero=False`` never zeroes, ``sign=-1`` climbs, ``reduce="sum"``
    descends the summed squares, ``b_moves_by_w`` updates b with w's gradient, ``one_at_a_time`` moves w first and
    takes b's gradient at the moved w, ``zero_only="w"`` (or ``"b"``) zeroes that gradient alone."""
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    for _ in range(steps):
        if one_at_a_time:
            for p in (w, b):
                ((w * x + b - y) ** 2).mean().backward()
                with torch.no_grad():
                    p -= lr * p.grad
                w.grad, b.grad = None, None
            continue
        squares = (w * x + b - y) ** 2
        (squares.sum() if reduce == "sum" else squares.mean()).backward()
        with torch.no_grad():
            w -= sign * lr * w.grad
            b -= sign * lr * (w.grad if b_moves_by_w else b.grad)
        if zero:
            for name, p in (("w", w), ("b", b)):
                if zero_only in (None, name):
                    p.grad.zero_()
    return w.item(), b.item()


def _fit_line_mistakes(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, variant: Callable,
                       how_to_zero: str) -> list[Mistake]:
    mistakes = [
        Mistake("you never zeroed the gradients: every step used the sum of all gradients so far "
                f"(backward() adds into .grad). {how_to_zero}",
                matches=lambda got: _same_floats(got[:2], variant(x, y, lr, steps, zero=False)),
                    where='look at what happens to the gradients between steps'),
        Mistake("the parameters moved uphill: subtract the gradient (w -= lr * w.grad), it points the way "
                "the loss increases", matches=lambda got: _same_floats(got[:2], variant(x, y, lr, steps, sign=-1.0)),
                    where='look at the sign of the update'),
        Mistake("you stepped by the whole gradient: multiply it by the learning rate lr",
                matches=lambda got: lr != 1.0 and _same_floats(got[:2], variant(x, y, 1.0, steps)),
                    where='look at the size of the update'),
    ]
    if lr != NOTEBOOK_LR:
        mistakes.append(Mistake(f"you used the notebook's learning rate {NOTEBOOK_LR} instead of the lr argument ({lr})",
                                matches=lambda got: _same_floats(got[:2], variant(x, y, NOTEBOOK_LR, steps)),
                                where="look at which learning rate your update multiplies by"))
    # lr / 2 is a lost factor 2, named below
    for fixed in [rate for rate in FIXED_LRS if rate not in (lr, NOTEBOOK_LR, lr / 2)]:
        mistakes.append(Mistake(f"your w and b are those of learning rate {fixed}, not of the lr argument ({lr}): "
                                "use the lr your function is given",
                                matches=lambda got, fixed=fixed: _same_floats(got[:2], variant(x, y, fixed, steps)),
                                where="look at which learning rate your update multiplies by"))
    mistakes += [
        Mistake(f"your w and b are those after {steps - 1} updates; the task asks for {steps}",
                matches=lambda got: steps > 1 and _same_floats(got[:2], variant(x, y, lr, steps - 1)),
                where="look at how many times your loop runs (range's start and end)"),
        Mistake(f"your w and b are those after {steps + 1} updates; the task asks for {steps}",
                matches=lambda got: _same_floats(got[:2], variant(x, y, lr, steps + 1)),
                where="look at how many times your loop runs (range's start and end)"),
        Mistake("every update moved half as far as gradient descent with lr: a factor 2 is missing from the "
                "gradient (the derivative of (w*x + b - y)**2 is 2*(w*x + b - y) times the inner derivative)",
                matches=lambda got: _same_floats(got[:2], variant(x, y, lr / 2, steps)),
                where="look at the size of each update, and every factor of the gradient"),
    ]
    mistakes += [Mistake(f"your w and b are those of a fit on {words}: the task fits y ≈ w * x + b on the x and y "
                         "it is given, unchanged (w and b then describe the data as it is)",
                         matches=lambda got, moved=moved: _same_floats(got[:2], variant(*moved, lr, steps)),
                         where="look at what your function does to x and y before the loop")
                 for words, moved in _rescaled_data(x, y)]
    return mistakes


def _rescaled_data(x: torch.Tensor, y: torch.Tensor) -> list[tuple[str, tuple[torch.Tensor, torch.Tensor]]]:
    """The data a learner who "normalises first" fits instead of x and y, each with its words."""
    span = (x.max() - x.min()).clamp_min(1e-12)
    return [("x standardised ((x - mean) / std)", ((x - x.mean()) / x.std(), y)),
            ("x standardised ((x - mean) / std)", ((x - x.mean()) / x.std(correction=0), y)),
            ("x centred (x - mean)", (x - x.mean(), y)),
            ("x divided by its largest size", (x / x.abs().max().clamp_min(1e-12), y)),
            ("x scaled to [0, 1] ((x - min) / (max - min))", ((x - x.min()) / span, y)),
            ("y standardised ((y - mean) / std)", (x, (y - y.mean()) / y.std())),
            ("x and y standardised", ((x - x.mean()) / x.std(), (y - y.mean()) / y.std()))]


def _by_hand_mistakes(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> list[Mistake]:
    """Mistakes only a hand-written update can make."""
    return [
        Mistake("w and b never moved from 0, where they start: when your updates ran, the gradients were zero "
                "(zeroed between backward() and the update?), or the updates changed other tensors than those you "
                "return. The order in each step: backward(), the update, then zeroing",
                matches=lambda got: isinstance(got, (tuple, list)) and len(got) == 2 and all(
                    isinstance(v, (int, float)) and v == 0 for v in got),
                where="look at the order in each step: backward(), the update, then clearing the gradients"),
        Mistake("you moved w first and then took b's gradient at the new w (one parameter at a time); gradient "
                "descent moves both against the gradient of one loss, computed before either moves",
                matches=lambda got: _same_floats(got[:2], _fit_by_hand_variant(x, y, lr, steps, one_at_a_time=True)),
                where="look at how many backward() calls each step makes, and where the update of w sits"),
        *[Mistake(f"only {kept}.grad was zeroed after each update; {other}.grad kept adding up every step's gradient "
                  f"(backward() adds into .grad): zero {other}.grad too",
                  matches=lambda got, kept=kept: _same_floats(got[:2], _fit_by_hand_variant(x, y, lr, steps,
                                                                                           zero_only=kept)),
                  where="look at which gradients you clear after each update")
          for kept, other in (("w", "b"), ("b", "w"))],
        Mistake("b moved by w's gradient: each parameter moves against its own gradient (b -= lr * b.grad)",
                matches=lambda got: _same_floats(got[:2], _fit_by_hand_variant(x, y, lr, steps, b_moves_by_w=True)),
                where="look at the update of b"),
        Mistake(f"you descended the sum of the squared errors: its gradient is {len(x)} times the mean's, so the "
                "steps overshoot and grow. The loss is their mean (line_loss)",
                matches=lambda got: _same_floats(got[:2], _fit_by_hand_variant(x, y, lr, steps, reduce="sum")),
                where="look at how the loss reduces the squared errors"),
    ]


def _expect_float_pair(got: Any, expected: Sequence[float], what: str, mistakes: Sequence[Mistake]) -> None:
    if not _same_floats(got, expected):
        for mistake in mistakes:
            if mistake.explains(got):
                shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else describe(v) for v in got[:2])
                raise CheckError(f"{what} returned (w, b) = ({shown}), expected ({expected[0]:.6g}, {expected[1]:.6g})",
                                 where=mistake.where or "look at each step of the loop: the loss, backward(), the "
                                                        "update and what happens to the gradients after it",
                                 mistake=mistake.message)
    for name, value, want in zip(("w", "b"), got, expected):
        expect(isinstance(value, (int, float)) and not isinstance(value, bool),
               f"{what}: {name} should be a Python float, but it is {describe(value)}",
               where="look at how you turn w and b into the values you return",
               mistake="a one-element tensor is not a Python number: convert it with .item()")
        expect_close(value, want, what=f"{what}: {name}")


def check_fit_line_by_hand(fn: Callable, inputs: Sequence[tuple[torch.Tensor, torch.Tensor, float, int]] | None = None) -> None:
    inputs = inputs if inputs is not None else _line_examples()
    for x, y, lr, steps in inputs:
        what = f"fit_line_by_hand(x, y, lr={lr}, steps={steps})"
        # task: "starting from `w = b = 0`": nothing in the fit is random
        with _optimizer_steps() as stepped:
            try:
                got = _run(fn, x, y, lr, steps, nothing_random=True)
            except CheckError as error:
                # drew (without reseeding, which has its own advice): the task's start leaves nothing to draw
                if error.__cause__ is not None or error.mistake or "used the global random generator" not in error.symptom:
                    raise
                raise CheckError(error.symptom, where=error.where,
                                 mistake="the task starts from w = b = 0, and nothing else in the fit is random: make "
                                         "w and b with torch.zeros(()) (or torch.tensor(0.0)) and requires_grad=True, "
                                         "and draw no random numbers") from None
        expect(isinstance(got, (tuple, list)) and len(got) == 2, f"{what} should return a pair (w, b), not {describe(got)}",
               where="look at your return statement: it returns w and b, in that order")
        _expect_float_pair(got, ref.fit_line_by_hand(x, y, lr, steps), what,
                           _fit_line_mistakes(x, y, lr, steps, _fit_by_hand_variant,
                                              "Zero w.grad and b.grad after each update")
                           + _by_hand_mistakes(x, y, lr, steps))
        # task: "written by hand (no `torch.optim`)"
        expect(not stepped, f"{what} returned the right w and b, but a torch.optim optimizer ({stepped[:1] and stepped[0]}) "
                            f"made its updates ({len(stepped)} steps)",
               where="look at how your loop updates w and b",
               mistake="this exercise writes the update itself, inside torch.no_grad(): w -= lr * w.grad (and the "
                       "same for b), then zero the gradients; torch.optim.SGD is the next exercise")
    passed("fit_line_by_hand", len(inputs))


def _sgd_variant(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, *, zero: str = "first",
                 sign: float = 1.0, momentum: float = 0.0) -> tuple[float, float, list[float]]:
    """The reference SGD loop, zeroing "first" (right), "never", or "before_step" (after backward)."""
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=lr, maximize=sign < 0, momentum=momentum)
    losses = []
    for _ in range(steps):
        if zero == "first":
            optimizer.zero_grad()
        loss = ref.line_loss(w, b, x, y)
        loss.backward()
        if zero == "before_step":
            optimizer.zero_grad()
        optimizer.step()
        losses.append(loss.item())
    return w.item(), b.item(), losses


def _sgd_params(x, y, lr, steps, *, zero: bool = True, sign: float = 1.0) -> tuple[float, float]:
    return _sgd_variant(x, y, lr, steps, zero="first" if zero else "never", sign=sign)[:2]


def _momentum_mistake(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, pick: Callable,
                      part: slice) -> Mistake:
    """Plain SGD was asked for (the fit of exercise 4); ``pick`` takes the compared part of the learner's result."""
    return Mistake("your run matches SGD with momentum (0.9); the fit of exercise 4 is plain SGD: "
                   "torch.optim.SGD(params, lr=lr) without momentum",
                   matches=lambda g: any(_same_floats(pick(g), _sgd_variant(x, y, lr, steps, momentum=m)[part])
                                         for m in (0.9, 0.5, 0.99)),
                   where="look at the arguments you build the optimizer with")


def _check_sgd_result(got: Any, what: str) -> None:
    expect(isinstance(got, (tuple, list)) and len(got) == 3,
           f"{what} should return a triple (w, b, losses), not {describe(got)}",
           where="look at your return statement: it returns w, b and the list of losses, in that order")


def check_fit_line_with_sgd(fn: Callable, inputs: Sequence[tuple[torch.Tensor, torch.Tensor, float, int]] | None = None) -> None:
    """Checks the learned w and b (the loss log has its own check, :func:`check_loss_log`)."""
    inputs = inputs if inputs is not None else _line_examples()
    for x, y, lr, steps in inputs:
        what = f"fit_line_with_sgd(x, y, lr={lr}, steps={steps})"
        # task: "the fit of exercise 4 (same start, same number of updates)": the start is fixed and nothing is drawn
        # at random, so drawing from the global generator (an nn.Linear's first weights, then set to 0) changes nothing
        got = _run(fn, x, y, lr, steps, allow=Allow(global_rng=True))
        _check_sgd_result(got, what)
        mistakes = _fit_line_mistakes(x, y, lr, steps, _sgd_params,
                                      "Call optimizer.zero_grad() at the start of every step")
        mistakes.insert(1, Mistake(
            "w and b never moved: optimizer.zero_grad() ran between loss.backward() and optimizer.step(), so the "
            "step saw zero gradients. Order: zero_grad, forward, backward, step",
            matches=lambda g: _same_floats(g[:2], _sgd_variant(x, y, lr, steps, zero="before_step")[:2]),
            where="look at the order of zero_grad, forward, backward and step in each iteration"))
        mistakes.append(_momentum_mistake(x, y, lr, steps, lambda g: g[:2], slice(0, 2)))
        _expect_float_pair(got[:2], ref.fit_line_with_sgd(x, y, lr, steps)[:2], what, mistakes)
    passed("fit_line_with_sgd", len(inputs))


def _running_average(logged: Sequence[float], losses: Sequence[float]) -> bool:
    """``logged`` starts with ``losses[0]`` and goes on as a running average of ``losses``: the mean so far, or an
    exponential moving average (any constant weight, also with Adam's bias correction)."""
    if len(logged) < 3 or len(logged) != len(losses) or _same_floats(list(logged), losses):
        return False
    if not math.isclose(logged[0], losses[0], rel_tol=1e-4, abs_tol=1e-6):
        return False
    mean_so_far = [sum(losses[: k + 1]) / (k + 1) for k in range(len(losses))]
    if _same_floats(list(logged), mean_so_far):
        return True
    if abs(logged[0] - losses[1]) > 1e-6:  # the weight that explains entry 1, tried on every later entry
        beta = (logged[1] - losses[1]) / (logged[0] - losses[1])
        if 0 < beta < 1 and _same_floats(list(logged), [logged[0], *(
                beta * before + (1 - beta) * now for before, now in zip(logged[:-1], losses[1:]))]):
            return True
    for beta in (0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999):
        average, corrected = 0.0, []
        for k, loss in enumerate(losses):
            average = beta * average + (1 - beta) * loss
            corrected.append(average / (1 - beta ** (k + 1)))
        if _same_floats(list(logged), corrected):
            return True
    return False


def check_loss_log(fn: Callable, inputs: Sequence[tuple[torch.Tensor, torch.Tensor, float, int]] | None = None) -> None:
    """Checks the third result of fit_line_with_sgd: one Python float per step, the loss before that step."""
    inputs = inputs if inputs is not None else _line_examples()
    for x, y, lr, steps in inputs:
        what = f"the losses from fit_line_with_sgd(x, y, lr={lr}, steps={steps})"
        # task: "the fit of exercise 4 (same start, same number of updates)": nothing random, see check_fit_line_with_sgd
        got = _run(fn, x, y, lr, steps, allow=Allow(global_rng=True))
        _check_sgd_result(got, what.replace("the losses from ", ""))
        losses = got[2]
        expect(isinstance(losses, list), f"{what} should be a list, not {describe(losses)}",
               where="look at how you build the losses you return: a Python list, one append per step")
        expect(len(losses) == steps, f"{what}: there are {len(losses)} values; expected {steps}",
               where="look at where you append to the list: does it run at every step of the loop?",
               mistake=f"log one loss per step ({steps}), not only some of them")
        tensors = [v for v in losses if isinstance(v, torch.Tensor)]
        expect(not any(t.grad_fn is not None for t in tensors),
               f"{what}: your list holds loss tensors that still carry their autograd graph (grad_fn)",
               where="look at what you append to the list at each step",
               mistake="every step's graph stays alive as long as the list does (section 7). Append loss.item(), "
                       "a plain Python float")
        expect(not tensors, f"{what}: your list holds tensors, expected Python floats",
               where="look at what you append to the list at each step",
               mistake="append loss.item(), a plain Python float")
        odd = [v for v in losses if not isinstance(v, float)]
        expect(not odd, f"{what} should all be Python floats, but one is {describe(odd[:1] and odd[0])}",
               where="look at what you append to the list at each step")
        expected = ref.fit_line_with_sgd(x, y, lr, steps)[2]
        if not _same_floats(losses, expected):
            worst = max(range(steps), key=lambda i: abs(losses[i] - expected[i]) if not math.isnan(losses[i]) else math.inf)
            symptom = (f"{what}: at step {worst} you logged {losses[worst]:.6g}, expected {expected[worst]:.6g} "
                       "(the loss computed at that step, before optimizer.step())")
            where = "look at each iteration: the order of zero_grad, forward, backward and step, and the optimizer"
            momentum = _momentum_mistake(x, y, lr, steps, lambda g: g, slice(2, 3))
            expect(not any(_same_floats(losses, _sgd_variant(x, y, lr, steps, momentum=m)[2]) for m in (0.9, 0.5, 0.99)),
                   symptom, where=momentum.where, mistake=momentum.message)
            expect(not _same_floats(losses, _sgd_variant(x, y, lr, steps, zero="never")[2]), symptom, where=where,
                   mistake="the losses are those of a run that never calls optimizer.zero_grad(), "
                           "so gradients accumulated across steps")
            expect(not _same_floats(losses, _sgd_variant(x, y, lr, steps, zero="before_step")[2]), symptom,
                   where=where, mistake="the loss never changes because optimizer.zero_grad() ran between backward() "
                                        "and step()")
            expect(not _running_average(losses, expected), symptom, where="look at the value you append to the list "
                                                                           "at each step",
                   mistake="your first entry is step 0's loss, and every later entry is a running average of the "
                           "losses so far (each mixes in the earlier ones): log each step's own loss.item(), not a "
                           "smoothed value")
            raise CheckError(symptom, where=where)
    passed("loss log of fit_line_with_sgd", len(inputs))


# ---------------------------------------------------------------- accuracy without a graph

def _accuracy_examples() -> list[tuple[nn.Module, torch.Tensor, torch.Tensor]]:
    examples = []
    for seed, (n, classes) in enumerate([(40, 4), (25, 3)]):
        with torch.random.fork_rng(devices=[]):  # seed the layers without disturbing the notebook's random stream
            torch.manual_seed(60 + seed)
            model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, classes))
        if seed == 0:  # a frozen first layer (as in fine-tuning): the call must leave requires_grad as it found it
            model[1].requires_grad_(False)
        images = _randn(n, 1, 4, 4, seed=70 + seed)
        labels = torch.randint(0, classes, (n,), generator=_gen(80 + seed))
        # make the model right on about half the images, so counting and scaling mistakes show
        with torch.no_grad():
            labels[: n // 2] = model(images[: n // 2]).argmax(dim=1)
        examples.append((model, images, labels))
    return examples


def _is(got: Any, value: float) -> bool:
    number = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
    return isinstance(number, (int, float)) and not isinstance(number, bool) and math.isclose(
        number, value, rel_tol=1e-5, abs_tol=1e-7)


def _argmax_over_images(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """Accuracies from argmax over the images (dim 0), compared with as many labels as there are classes."""
    with torch.no_grad():
        predicted = model(images).argmax(dim=0)
    hits = predicted == labels[: len(predicted)]
    return [hits.float().mean().item(), hits.sum().item() / len(labels)]


def _broadcast_table_mean(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction an [N, 1] against [N] comparison gives: every prediction against every label."""
    with torch.no_grad():
        predicted = model(images).argmax(dim=1)
    return (predicted.unsqueeze(1) == labels).float().mean().item()


def _probe(fn: Callable, labels: list[int], logits: list[list[float]]) -> Any:
    """fn's accuracy for a model whose output is ``logits`` (the images themselves); None when fn fails there."""
    try:
        # task: "The model here has no dropout, so its train/eval mode does not matter yet"
        return _run(fn, nn.Sequential(nn.Flatten()), torch.tensor(logits), torch.tensor(labels), allow=Allow(modes=True))
    except CheckError:
        return None


def _run_on_model(fn: Callable, model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> Any:
    """``accuracy(model, images, labels)``; a parameter that arrived frozen and leaves requiring grad is named."""
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    try:
        # task: "The model here has no dropout, so its train/eval mode does not matter yet"
        return _run(fn, model, images, labels, allow=Allow(modes=True))
    except CheckError as error:
        thawed = [name for name in frozen if model.get_parameter(name).requires_grad]
        if error.__cause__ is not None or not thawed:
            raise
        raise CheckError(error.symptom, where="look at every line that sets requires_grad on the model's parameters, "
                                              "and at what it sets them back to",
                         mistake=f"a parameter that arrived frozen (requires_grad=False) now requires grad "
                                 f"({thawed[0]!r}): switching every parameter back on with requires_grad_(True) "
                                 "un-freezes the ones the caller had frozen. Leave requires_grad alone: torch.no_grad() "
                                 "turns recording off without touching the model") from None


# Every prediction right (accuracy 1), while argmax over the images picks image indices 3 to 5, no class at all
ALL_RIGHT = ([0, 1, 2, 0, 1, 2], [[1.0, 0, 0], [0, 2, 0], [0, 0, 3], [4, 0, 0], [0, 5, 0], [0, 0, 6]])
# Every prediction wrong (accuracy 0), while argmax over the images (dim 0) gives exactly the labels
ONLY_DIM_0_RIGHT = ([1, 2, 0], [[0, 0, 7.0], [5, 0, 0], [0, 6, 0]])


def check_accuracy(fn: Callable, inputs: Sequence[tuple[nn.Module, torch.Tensor, torch.Tensor]] | None = None) -> None:
    """Checks the value: a Python float, the fraction of correct predictions."""
    inputs = inputs if inputs is not None else _accuracy_examples()
    for model, images, labels in inputs:
        what = f"accuracy(model, images of shape {list(images.shape)}, labels)"
        with torch.no_grad():
            correct = (model(images).argmax(dim=1) == labels).sum().item()
        probes: dict[str, Any] = {}  # fn on two small cases, run only when a wrong value needs telling apart

        def on(name: str, case: tuple) -> Any:
            if name not in probes:
                probes[name] = _probe(fn, *case)
            return probes[name]

        try:
            got = _run_on_model(fn, model, images, labels)
        except CheckError as error:
            # argmax over dim 0 gives one index per class, which fails to compare with one label per image unless
            # there are as many images as classes: a square case where only dim 0 is right tells it apart
            if not _is(on("dim 0", ONLY_DIM_0_RIGHT), 1.0):
                raise
            with torch.no_grad():
                classes = model(images).shape[1]
            raise CheckError(error.symptom, where="look at the dimension argmax reduces: dim 1 holds the classes, "
                                                  "dim 0 the images",
                             mistake="your predictions come from argmax over dim 0, the images: that gives one index "
                                     f"per class ({classes} here), not one class per image "
                                     f"({len(labels)}); take argmax(dim=1)") from error.__cause__
        floor_divided = float(correct // len(labels))
        over_images = _argmax_over_images(model, images, labels)

        def floor_division(g: Any) -> bool:
            return _is(g, floor_divided) and (not any(_is(g, v) for v in over_images)
                                              or _is(on("all right", ALL_RIGHT), 1.0))

        def wrong_dim(g: Any) -> bool:
            return any(_is(g, v) for v in over_images) and _is(on("dim 0", ONLY_DIM_0_RIGHT), 1.0)

        expect_close(got, ref.accuracy(model, images, labels), what=what, mistakes=[
            Mistake(f"that is {correct} correct // {len(labels)} images: // is integer (floor) division, which "
                    "rounds every fraction below 1 down to 0. Divide with /", matches=floor_division,
                    where="look at the last step: how the count of correct predictions becomes a fraction"),
            Mistake("your predictions come from argmax over the wrong dimension: the model's output is [images, "
                    "classes], so argmax(dim=1) gives one class per image; argmax(dim=0) gives, for each class, the "
                    "index of the image that scores it highest",
                    matches=wrong_dim,
                    where="look at the dimension argmax reduces: dim 1 holds the classes, dim 0 the images"),
            Mistake(f"you returned the number of correct predictions ({correct}); divide by the number of images "
                    f"({len(labels)}) to get a fraction", lambda: correct,
                    where="look at the last step: how the count of correct predictions becomes a fraction"),
            Mistake("your comparison of predictions with labels broadcast to an [N, N] table (one of them of shape "
                    "[N, 1]: keepdim=True, or labels.unsqueeze(1)), which compares every prediction with every label; "
                    "compare two tensors of shape [N]",
                    lambda: _broadcast_table_mean(model, images, labels),
                    where="look at the shapes of the two tensors you compare (print them)"),
            Mistake("you returned a percentage; return a fraction between 0 and 1",
                    lambda: 100.0 * correct / len(labels),
                    where="look at the last step: how the count of correct predictions becomes a fraction"),
        ])
        expect(isinstance(got, float), f"{what} should return a Python float, not {describe(got)}",
               where="look at the value you return: how the count of correct predictions becomes a fraction",
               mistake="a tensor (or an int) is not a Python float: .item() turns a one-element tensor into one")
    passed("accuracy", len(inputs))


def check_accuracy_no_graph(fn: Callable, inputs: Sequence[tuple[nn.Module, torch.Tensor, torch.Tensor]] | None = None) -> None:
    """Checks how: the forward pass records no graph (the framework checks that nothing is left changed)."""
    inputs = inputs if inputs is not None else _accuracy_examples()
    for model, images, labels in inputs:
        what = f"accuracy(model, images of shape {list(images.shape)}, labels)"
        recording: list[bool] = []
        hooks = [m.register_forward_hook(lambda *_: recording.append(torch.is_grad_enabled()))
                 for m in model.modules() if not list(m.children())]
        try:
            _run_on_model(fn, model, images, labels)
        finally:
            for hook in hooks:
                hook.remove()
        expect(recording, f"{what} returned without running the model's layers",
               where="look for the call model(images)")
        expect(not any(recording),
               f"{what}: the model's layers ran with gradient recording on, so PyTorch built a graph (and kept every "
               "activation for it) that nobody uses",
               where="look at what surrounds the forward pass model(images)",
               mistake="calling .detach() or .item() afterwards is too late: the graph was built during the forward "
                       "pass. Run the model inside `with torch.no_grad():` (or torch.inference_mode())")
        # task: the call "must not change ... autograd's global state": also when the caller has recording off (an
        # evaluation loop inside no_grad), which a function that switches recording on at its end changes
        with torch.no_grad():
            _run_on_model(fn, model, images, labels)
    passed("accuracy builds no graph", len(inputs))


# ---------------------------------------------------------------- custom function and gradcheck

def _softplus_examples() -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.linspace(-3, 3, 7, dtype=torch.float64), _randn(7, seed=90, dtype=torch.float64)),
            (_randn(2, 3, seed=91, dtype=torch.float64), _randn(2, 3, seed=92, dtype=torch.float64)),
            # large |x|: a formula with exp(x) overflows there (exp(800) is inf even in float64)
            (torch.tensor([-800.0, -30.0, 0.0, 30.0, 800.0], dtype=torch.float64), torch.ones(5, dtype=torch.float64))]


def _close_to(got: Any, want: torch.Tensor) -> bool:
    return (isinstance(got, torch.Tensor) and got.shape == want.shape
            and torch.allclose(got.detach().to(want.dtype), want, atol=1e-7, rtol=1e-5))


def check_softplus_backward(fn: Callable, inputs: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
    inputs = inputs if inputs is not None else _softplus_examples()
    for x, grad_output in inputs:
        try:
            with torch.no_grad():  # as autograd runs a Function's backward (create_graph=False): recording off
                got = _run(fn, x, grad_output)
        except CheckError as error:
            if "does not require grad" not in str(error.__cause__ or ""):
                raise
            raise CheckError(f"softplus_backward(x of shape {list(x.shape)}, grad_output), called with gradient "
                             f"recording off: {error.symptom}",
                             where="look at how you compute the derivative: with autograd inside your function?",
                             mistake="autograd runs a Function's backward with gradient recording off (the check "
                                     "calls your function that way too), so a graph built inside it records nothing: "
                                     "compute the derivative with its formula") from error.__cause__
        precise = x.dtype == torch.float64  # task: "Keep the dtype of x": float64's precision, not only its name
        want = ref.softplus_backward(x, grad_output)
        if (precise and isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
                and torch.allclose(got, want, rtol=1e-5, atol=1e-7) and not torch.allclose(got, want, rtol=1e-9, atol=1e-12)):
            i = int(((got - want).abs() / want.abs().clamp_min(1e-300)).flatten().argmax())
            g, w = got.flatten()[i].item(), want.flatten()[i].item()
            raise CheckError(f"softplus_backward(x of shape {list(x.shape)}, grad_output): at flat index {i} (x = "
                             f"{x.flatten()[i].item():g}) it is {g:.17g}, expected {w:.17g}: a relative error of "
                             f"{abs(g - w) / abs(w):.1g}, where float64 keeps about 16 significant digits",
                             where="look at the dtype of every tensor your formula computes with",
                             mistake="part of your computation ran in float32 (a .float(), or a float32 tensor you "
                                     "made), which keeps about 7 digits: compute in x's dtype throughout")
        expect_tensor(got, want, given=x, atol=1e-12 if precise else 1e-5, rtol=1e-9 if precise else 1e-4,
                      what=f"softplus_backward(x of shape {list(x.shape)}, grad_output)", mistakes=[
                          Mistake("you forgot the chain rule: multiply the local derivative by grad_output",
                                  lambda: torch.sigmoid(x), where='look at where grad_output enters'),
                          Mistake("you added grad_output to the local derivative; the chain rule multiplies them",
                                  lambda: grad_output + torch.sigmoid(x), where="look at where grad_output enters"),
                          Mistake("the sign is wrong: d/dx log(1 + exp(x)) = exp(x) / (1 + exp(x)) = sigmoid(x) > 0",
                                  lambda: -grad_output * torch.sigmoid(x), where='look at the sign of the derivative'),
                          Mistake("that is sigmoid(-x) = 1 - sigmoid(x); the derivative is exp(x) / (1 + exp(x)) "
                                  "= sigmoid(x)", lambda: grad_output * torch.sigmoid(-x),
                                      where='look at the derivative on paper: exp(x) over what?'),
                          Mistake("you differentiated only the exp(x) inside; the log adds a factor 1 / (1 + exp(x))",
                                  lambda: grad_output * torch.exp(x), where='look at the derivative of the outer log'),
                          Mistake("that is ReLU's derivative (0 below zero, 1 above) times grad_output; softplus "
                                  "is smooth, and its derivative exp(x) / (1 + exp(x)) lies strictly between 0 and 1",
                                  matches=lambda g: any(_close_to(g, grad_output * step)
                                                        for step in ((x > 0).to(x.dtype), (x >= 0).to(x.dtype))),
                                  where="look at the derivative on paper: softplus is smooth, unlike ReLU"),
                          Mistake("that is softplus itself (the forward value), not its derivative",
                                  lambda: grad_output * torch.nn.functional.softplus(x),
                                      where='look at whether you return the function or its derivative'),
                      ])
    passed("softplus_backward", len(inputs))


def make_function(forward: Callable[[torch.Tensor], torch.Tensor],
                  backward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str) -> Callable:
    """An autograd Function from a forward and a hand-written backward(x, grad_output); returns its ``apply``."""

    def _forward(ctx, x):
        ctx.save_for_backward(x)
        return forward(x)

    def _backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return backward(x, grad_output)

    function = type(name, (torch.autograd.Function,),
                    {"forward": staticmethod(_forward), "backward": staticmethod(_backward)})
    return function.apply


# A backward that is wrong only above x = 4 (the sign flips there), right everywhere else: the verdict at a point of
# the wrong region (WRONG_REGION_X) is False, at a point of the right one (RIGHT_REGION_X) True. A test run at some
# other point than the given x (a random one), or an answer kept from an earlier call for the same f, shows.
EXP_WRONG_SIGN_ABOVE_FOUR = make_function(
    torch.exp, lambda x, g: torch.where(x > 4, -g, g) * torch.exp(x), "ExpWrongSignAboveFour")
WRONG_REGION_X = torch.tensor([4.5, 5.0, 5.5, 6.0])
RIGHT_REGION_X = _randn(4, seed=96)


def _gradcheck_examples() -> list[tuple[Callable, torch.Tensor, bool]]:
    softplus = torch.nn.functional.softplus
    good = make_function(softplus, ref.softplus_backward, "Softplus")
    no_chain_rule = make_function(softplus, lambda x, g: torch.sigmoid(x), "SoftplusNoChainRule")
    wrong_sign = EXP_WRONG_SIGN_ABOVE_FOUR
    # 5% too large: gradcheck's default tolerances see it; tolerances loosened to 10% do not
    slightly_off = make_function(softplus, lambda x, g: 1.05 * g * torch.sigmoid(x), "SoftplusFivePercentOff")
    # The task's rule is gradcheck at a float64 copy, with its default tolerances (atol=1e-5, rtol=1e-3). Two
    # examples make that rule observable. A right gradient of a function whose values are large: in float32 the
    # finite differences lose it (ulp(1e4) is about 1e-3) unless the tolerances are loosened far, ...
    large_values = make_function(lambda x: torch.sin(x) + 1e4, lambda x, g: g * torch.cos(x), "SinePlus10000")
    # ... and a gradient 0.15% too large (|cos| > 0.5 on [-1, 1]): gradcheck's default rtol of 0.1% in float64 sees
    # it, any tolerance loosened to 0.15% or more does not
    barely_off = make_function(torch.sin, lambda x, g: 1.0015 * g * torch.cos(x), "SineOffByPointFifteenPercent")
    return [(good, _randn(6, seed=93), True), (no_chain_rule, _randn(6, seed=94), False),
            (torch.tanh, _randn(2, 3, seed=95), True), (wrong_sign, WRONG_REGION_X, False),
            (torch.tanh, _randn(5, seed=97, dtype=torch.float64), True),  # float64 already: .double() is x itself
            (slightly_off, _randn(5, seed=98), False),
            (large_values, torch.linspace(-1, 1, 5), True),
            (barely_off, torch.linspace(-1, 0.9, 6), False)]


def gradcheck_says(f: Callable, x: torch.Tensor) -> bool:
    """False when gradcheck, with its default tolerances on a float64 copy of x, finds f's backward wrong."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return not torch.autograd.gradcheck(f, (x.detach().double().requires_grad_(True),), raise_exception=False)


def _watched(f: Callable) -> tuple[Callable, list[tuple[torch.dtype, bool, torch.Tensor | None]]]:
    """``f`` that records the (dtype, requires_grad, values) of every input it is called with."""
    seen: list[tuple[torch.dtype, bool, torch.Tensor | None]] = []

    def watched(x: torch.Tensor, *rest: Any) -> Any:
        seen.append((x.dtype, x.requires_grad, x.detach().clone()) if isinstance(x, torch.Tensor)
                    else (None, False, None))
        return f(x, *rest)

    watched.__name__ = getattr(getattr(f, "__self__", f), "__name__", "f")  # the name messages show
    return watched, seen


def _fails(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("this f always raises")


def _true_when_f_raises(fn: Callable, x: torch.Tensor) -> bool:
    """Whether the learner's function answers True for an f that raises (an except that says True)."""
    try:
        return _run(fn, _fails, x) is True
    except CheckError:
        return False


def _at(value: torch.Tensor | None, x: torch.Tensor) -> bool:
    """``value`` holds x's values (in any floating dtype): gradcheck's first call of f is at its input itself."""
    return (isinstance(value, torch.Tensor) and value.shape == x.shape and value.is_floating_point()
            and torch.allclose(value.double(), x.detach().double(), rtol=1e-5, atol=1e-6))


def _diagnose_gradcheck(fn: Callable, f: Callable, x: torch.Tensor, correct: bool,
                        seen: list[tuple[torch.dtype, bool, torch.Tensor | None]], what: str, name: str,
                        second_order: bool = False) -> None:
    """The learner's answer was wrong: say what the inputs f saw (and a probe) show."""
    float32 = any(dtype == torch.float32 for dtype, _, _ in seen) and torch.float64 not in {d for d, _, _ in seen}
    elsewhere = bool(seen) and not any(_at(value, x) for _, _, value in seen)
    elsewhere_mistake = ("your function never ran f at x's values (f saw other points, a random one?): the verdict "
                         "does not fit the given x: check at x itself, on a float64 copy of it "
                         "(x.detach().double().requires_grad_())")
    float32_mistake = ("gradcheck needs float64, and yours ran f on float32 inputs (f saw no float64 input): in "
                       "float32 the finite "
                       "differences are too coarse, so correct gradients look wrong, and tolerances loosened until "
                       "they look right let small errors through; check a copy made with "
                       "x.detach().double().requires_grad_()")
    if correct:
        symptom = f"{what} returned False for {name}, whose gradients are right"
        if float32:
            raise CheckError(symptom, where="look at the dtype of the tensor you pass to gradcheck",
                             mistake=float32_mistake)
        if elsewhere:
            raise CheckError(symptom, where="look at the point you pass to gradcheck", mistake=elsewhere_mistake)
        if not any(requires for _, requires, _ in seen):
            # f never ran on an input that requires grad: try the function once with an x that already requires grad
            probe_f, _ = _watched(f)
            try:
                probe = _run(fn, probe_f, x.detach().double().requires_grad_(True))
            except CheckError:
                probe = None
            raise CheckError(symptom + " (f never ran on an input that requires grad)",
                             where="look at the copy you pass to gradcheck: gradcheck refuses to run when no input "
                                   "requires grad, and an except around it turns that refusal into False",
                             mistake="given an x that already requires grad, your function returns True: the copy "
                                     "you pass to gradcheck requires grad only when x did. Make it with "
                                     "x.detach().double().requires_grad_()" if probe is True else None)
        raise CheckError(symptom + " (gradcheck with its default tolerances, on a float64 copy, returns True)",
                         where="look at the arguments you pass to gradcheck (any tolerance you changed) and at how "
                               "its answer becomes the value you return")
    if gradcheck_says(f, x):
        symptom = (f"{what} returned True for {name}, whose backward is wrong (torch.autograd.gradcheck with its "
                   "default tolerances, on a float64 copy, returns False)")
        if elsewhere:
            raise CheckError(symptom, where="look at the point you pass to gradcheck", mistake=elsewhere_mistake)
        if not float32 and second_order:
            raise CheckError(symptom, where="look at which test your function calls",
                             mistake="your function called torch.autograd.gradgradcheck, which tests second "
                                     "derivatives (the gradient of the gradient); the first derivative, the one "
                                     "backward computes, is torch.autograd.gradcheck's")
        if not float32 and _true_when_f_raises(fn, x):
            raise CheckError(symptom, where="look at what your function returns when gradcheck raises",
                             mistake="your function also returns True for an f that raises an error: an `except` "
                                     "that returns True, or passes on to a `return True`, turns every failure into "
                                     "a pass. gradcheck raises GradcheckError when the gradients disagree; "
                                     "raise_exception=False makes it return False instead")
        raise CheckError(symptom, where="look at the arguments you pass to gradcheck: the dtype, and any tolerance "
                                        "(atol, rtol, eps) you changed",
                         mistake=float32_mistake if float32 else None)
    raise CheckError(f"{what} returned {not correct}, but the gradients of {name} are wrong",
                     where="look at what decides the value you return",
                     mistake="return the result of torch.autograd.gradcheck(f, (x64,), raise_exception=False)")


def check_gradients_are_correct(fn: Callable, inputs: Sequence[tuple[Callable, torch.Tensor, bool]] | None = None) -> None:
    inputs = inputs if inputs is not None else _gradcheck_examples()
    for index, (f, x, correct) in enumerate(inputs):
        what = f"gradients_are_correct(f, x of dtype {x.dtype}) for example {index}"
        name = getattr(getattr(f, "__self__", f), "__name__", "f")
        watched, seen = _watched(f)  # the inputs f sees show the dtype gradcheck ran at
        with mock.patch.object(torch.autograd, "gradgradcheck", wraps=torch.autograd.gradgradcheck) as second:
            got = _run(fn, watched, x)
        expect(isinstance(got, bool), f"{what} should return True or False, not {describe(got)}",
               where="look at what you return: gradcheck's own answer is a bool")
        if got != correct:
            _diagnose_gradcheck(fn, f, x, correct, seen, what, name, second_order=second.called)
    _expect_verdict_per_call(fn)
    passed("gradients_are_correct", len(inputs))


def _expect_verdict_per_call(fn: Callable) -> None:
    """One f (the same object) at two points where the verdicts differ: an answer kept from the first call shows."""
    f, name = EXP_WRONG_SIGN_ABOVE_FOUR, "ExpWrongSignAboveFour"
    watched, _ = _watched(f)
    answers = []
    for x, correct in ((WRONG_REGION_X, False), (RIGHT_REGION_X, True)):
        what = f"gradients_are_correct(f, x) for {name} at x = {[round(v, 2) for v in x.tolist()]}"
        again, seen = _watched(f)
        got = _run(fn, watched, x.clone())
        answers.append(got)
        if got is correct:
            continue
        fresh = _run(fn, again, x.clone())
        expect(not (answers[:-1] and fresh is correct and got is answers[0]),
               f"{what} returned {got}, the answer of the call before it for the same f at x = "
               f"{[round(v, 2) for v in WRONG_REGION_X.tolist()]}; the gradients are right at this x (its backward is "
               f"wrong only above 4), and the same call with a new but identical f returns {fresh}",
               where="look for anything your function keeps between calls: a dict or cache keyed by f, a global",
               mistake="state kept between calls: your function gives the answer it found for this f at an earlier x. "
                       "Run gradcheck at the given x on every call")
        _diagnose_gradcheck(fn, f, x, correct, seen, what, name)



# ---------------------------------------------------------------- put it together: fit to a target

class _Runaway(Exception):
    """Raised by the predict spy when the learner's loop runs far past max_steps."""


def _poly3(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """A cubic: params = [c] with c of shape [4]."""
    (c,) = params
    return c[0] + c[1] * x + c[2] * x ** 2 + c[3] * x ** 3


def _tanh_net(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """One hidden tanh layer: params = [w1 [1, H], b1 [H], w2 [H], b2 []]."""
    w1, b1, w2, b2 = params
    return torch.tanh(x[:, None] @ w1 + b1) @ w2 + b2


def _line(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """A line: params = [w, b], two scalars."""
    w, b = params
    return w * x + b


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def _fit_examples() -> list[tuple[Callable, list[torch.Tensor], torch.Tensor, torch.Tensor, float, float, int]]:
    """(predict, initial params, x, y, lr, target, max_steps); gradient descent reaches each target well in time."""
    x1 = torch.linspace(-1, 1, 40)
    y1 = 0.5 - x1 + 2 * x1 ** 3 + 0.1 * _randn(40, seed=120)
    x2 = torch.linspace(-2, 2, 30)
    y2 = 1.5 * x2 - 0.5 + 0.2 * _randn(30, seed=121)
    line_start = _leaves(torch.tensor(0.5), torch.tensor(-1.0))
    # the target first met by the last allowed update: a loop that stops checking one update early misses it
    last = _descend(_line, line_start, x2, y2, 0.1, 12)
    # a small network (one hidden tanh layer of 4) on the same points, with a large lr: its error goes up after
    # update 2 and reaches the target after update 9; a loop that changes lr when the error goes up leaves the path
    net_start = _leaves(0.5 * _randn(1, 4, seed=139), torch.zeros(4), 0.5 * _randn(4, seed=149), torch.tensor(0.0))
    net = _descend(_tanh_net, net_start, x2, y2, 0.5, 9)
    net_target = math.sqrt(net[-1][1] * min(error for _, error in net[:-1]))  # between updates 8 and 9
    # two outputs per sample: y of shape [N, 2], whose mean squared error divides by N * 2
    x3 = torch.linspace(-1, 1, 25)
    y3 = torch.stack([2 * x3 + 1, 0.5 - x3], dim=1) + 0.1 * _randn(25, 2, seed=123)
    return [(_poly3, _leaves(torch.zeros(4)), x1, y1, 0.3, 0.02, 1000),
            (_tanh_net, net_start, x2, y2, 0.5, net_target, 200),
            (_line, line_start, x2, y2, 0.1, (last[-1][1] + last[-2][1]) / 2, 12),
            (_two_lines, _leaves(torch.zeros(2), torch.zeros(2)), x3, y3, 0.2, 0.03, 500)]


def _two_lines(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Two lines at once: column j is w[j] * x + b[j], predictions of shape [N, 2]."""
    w, b = params
    return x[:, None] * w + b


def _descend(predict: Callable, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, lr: float,
             steps: int, *, zero: bool = True, reduce: str = "mean", on_rise: float = 1.0
             ) -> list[tuple[list[torch.Tensor], float]]:
    """The gradient-descent path: (params, error) before each of ``steps`` updates and after the last.

    ``zero=False`` never clears the gradients, ``reduce="sum"`` differentiates the summed squares,
    ``reduce="rows"`` their sum over len(y), ``on_rise`` multiplies lr whenever the error went up: the paths of
    usual mistakes.
    """
    current = _leaves(*params)
    path = []
    for step in range(steps + 1):
        squares = (predict(current, x) - y) ** 2
        path.append(([p.detach().clone() for p in current], squares.mean().item()))
        if step == steps or not math.isfinite(path[-1][1]):
            break
        if step > 0 and path[-1][1] > path[-2][1]:
            lr *= on_rise
        if zero:
            for p in current:
                p.grad = None
        {"sum": squares.sum, "rows": lambda: squares.sum() / len(y)}.get(reduce, squares.mean)().backward()
        with torch.no_grad():
            for p in current:
                p -= lr * p.grad
    return path


def _same_params(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return all(p.shape == q.shape and torch.allclose(p.detach(), q, atol=1e-4, rtol=1e-3) for p, q in zip(a, b))


def _spy(predict: Callable, limit: int) -> tuple[Callable, list[int]]:
    """``predict`` that counts its calls and stops a loop that runs far past ``limit`` calls."""
    calls = [0]

    def spied(params, x):
        calls[0] += 1
        if calls[0] > limit:
            raise _Runaway()
        return predict(params, x)

    spied.__name__ = getattr(predict, "__name__", "predict").lstrip("_")
    return spied, calls


def _call_fit(fn: Callable, predict: Callable, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
              lr: float, target: float, max_steps: int, what: str) -> Any:
    spied, _ = _spy(predict, 4 * (max_steps + 1) + 20)
    try:
        # task: "Change the tensors in `params` in place"
        return _run(fn, spied, params, x, y, lr, target, max_steps, allow=Allow(changed=(params, *params)))
    except CheckError as error:
        if isinstance(error.__cause__, _Runaway):
            raise CheckError(f"{what} was still calling predict after {max_steps} steps",
                             where="look at the condition that ends your loop: what happens when max_steps updates "
                                   "are done and the target is still not met?",
                             mistake="the loop must end after at most max_steps updates (raise RuntimeError then)"
                             ) from None
        raise


def _expect_unchanged_data(params: Sequence[torch.Tensor], predict: Callable, start: Sequence[torch.Tensor],
                           x: torch.Tensor, y: torch.Tensor, lr: float, max_steps: int, symptom: str) -> None:
    """The params lie on the gradient-descent path of rescaled data (y standardised, x centred...): say so."""
    for words, (new_x, new_y) in _rescaled_data(x, y):
        if new_x.shape != x.shape or new_y.shape != y.shape or (
                torch.allclose(new_x, x, rtol=1e-4, atol=1e-5) and torch.allclose(new_y, y, rtol=1e-4, atol=1e-5)):
            continue  # the same data (x already centred, say): its path is gradient descent's own
        if any(_same_params(params, p) for p, _ in _descend(predict, start, new_x, new_y, lr, max_steps)[1:]):
            aims = ("your fit aims at values other than the y you were given" if words.startswith("y")
                    else "your fit predicts from other inputs than the x you were given")
            raise CheckError(f"{symptom}; your params are on the path of a fit on {words}",
                             where="look at what your function does to x and y before the loop",
                             mistake=f"{aims}: use x and y unchanged (the task's error is the mean squared error of "
                                     "predict(params, x) against y as given)")


def _kept_between_calls(fn: Callable, predict: Callable, start: Sequence[torch.Tensor], x: torch.Tensor,
                        y: torch.Tensor, lr: float, max_steps: int) -> int | None:
    """A budget at which two identical calls (a target out of reach: no error is below -1) end at different params:
    the function counts steps (or keeps anything) from earlier calls. While both calls make no update at all (a
    count kept from earlier calls already past the budget) the budget grows, up to a bound; None when the two
    calls agree."""
    budget = max(max_steps, 1)
    while budget <= 2 ** 16:
        ends = []
        for _ in range(2):
            params = _leaves(*start)
            with contextlib.suppress(CheckError):
                _call_fit(fn, predict, params, x, y, lr, -1.0, budget, "a probe")
            ends.append([p.detach().clone() for p in params])
        if not all(torch.equal(p, q) for p, q in zip(*ends)):
            return budget
        if not all(torch.equal(p, q) for p, q in zip(ends[0], start)):
            return None  # it made updates, the same ones both times
        budget *= 4
    return None


def _diagnose_gave_up(fn: Callable, params: Sequence[torch.Tensor], predict: Callable, start: Sequence[torch.Tensor],
                      x: torch.Tensor, y: torch.Tensor, lr: float, target: float, max_steps: int, first: int, what: str,
                      error: CheckError) -> None:
    """The learner's function raised RuntimeError on a target gradient descent reaches: say what its params show."""
    symptom = (f"{what} raised RuntimeError ({str(error.__cause__)[:80]}), but plain gradient descent with lr={lr} "
               f"reaches the target after {first} steps")
    if all(torch.isfinite(p.detach()).all() for p in params):
        # where on gradient descent's path the learner's params stopped shows which part of the loop is wrong
        path = _descend(predict, start, x, y, lr, max_steps)
        at = next((k for k in range(len(path)) if _same_params(params, path[k][0])), None)
        if at is not None and at >= first:
            raise CheckError(symptom + f"; your params are those after {at} updates, whose error "
                             f"({path[at][1]:.6g}) is already at most the target",
                             where="look at where your loop compares the error with the target: does a comparison "
                                   f"run after the last allowed update (update {max_steps})?" if at == max_steps else
                                   "look at how your loop compares the error with the target",
                             mistake=f"the updates are right, but the error after update {max_steps} is never "
                                     "compared with the target: compare after every update, the last one included"
                                     if at == max_steps else None) from None
        if at is not None:
            symptom += f"; your params are those after {at} updates, and the task allows {max_steps}"
            budget = _kept_between_calls(fn, predict, start, x, y, lr, max_steps)
            if budget is not None:
                raise CheckError(symptom + f". Two identical calls (max_steps={budget}, a target out of reach) "
                                 "ended at different params",
                                 where="look for anything that lives between calls: a step counter in a global (a "
                                       "module-level list or dict) or in a default argument",
                                 mistake="your function counts steps from an earlier call, so each call gets what "
                                         "the calls before it left of the budget: count the updates inside the "
                                         "function, from 0 on every call") from None
            raise CheckError(symptom, where="look at how many updates your loop makes before it gives up (range's "
                                            "start and end)") from None
        _expect_unchanged_data(params, predict, start, x, y, lr, max_steps, symptom)
        never_zeroed = _descend(predict, start, x, y, lr, max_steps, zero=False)
        named = "you never cleared the gradients, so every step used the sum of all gradients so far" \
            if _same_params(params, never_zeroed[-1][0]) else None
        raise CheckError(symptom, mistake=named,
                         where="look at the update: its direction (against the gradient), its size (lr times the "
                               "gradient) and whether it changes the given tensors in place") from None
    candidates = [message for message, variant in (
        ("you descended the sum of the squared errors; the task says their mean (the gradient of the sum is "
         f"{y.numel()} times larger)", _descend(predict, start, x, y, lr, max_steps, reduce="sum")),
        ("you never cleared the gradients, so every step used the sum of all gradients so far",
         _descend(predict, start, x, y, lr, max_steps, zero=False))) if not math.isfinite(variant[-1][1])]
    raise CheckError(symptom + "; your params ended as NaN or infinity (the steps grew instead of shrinking)",
                     where="look at what makes each step larger than lr times the gradient of the mean squared error",
                     mistake=" or ".join(candidates) or None) from None


def check_fit_to_target(fn: Callable, inputs: Sequence[tuple] | None = None) -> None:
    """Behaviour: the params end where gradient descent with lr first reaches the target; the true error is returned."""
    inputs = inputs if inputs is not None else _fit_examples()
    for predict, start, x, y, lr, target, max_steps in inputs:
        what = (f"fit_to_target({getattr(predict, '__name__', 'predict').lstrip('_')}, params, x {list(x.shape)}, "
                f"y, lr={lr}, target={target}, max_steps={max_steps})")
        path = _descend(predict, start, x, y, lr, max_steps)
        first = next(k for k, (_, error) in enumerate(path) if error <= target)  # the examples reach their target
        params = _leaves(*start)
        x_before, y_before = x.clone(), y.clone()
        objects = list(params)
        try:
            got = _call_fit(fn, predict, params, x, y, lr, target, max_steps, what)
        except CheckError as error:
            if any(p in str(error.__cause__) for p, _ in KNOWN_ERRORS) or not expected_raise(error, RuntimeError):
                raise
            _diagnose_gave_up(fn, params, predict, start, x, y, lr, target, max_steps, first, what, error)
        expect(torch.equal(x, x_before) and torch.equal(y, y_before), f"{what} changed x or y, which belong to the caller",
               where="look for in-place operations on x or y (x -= ..., y[...] = ..., methods ending in _)")
        expect(torch.is_grad_enabled(), f"{what} left gradient recording switched off",
               where="look for torch.set_grad_enabled(...) or a mode entered without a `with` block")
        expect(len(params) == len(objects) and all(p is q for p, q in zip(params, objects)),
               f"{what}: the list params no longer holds the tensors it was given",
               where="look for assignments to params[i] (or to the list) in your update",
               mistake="change those tensors in place (p -= ... under torch.no_grad()), do not replace them")
        expect(all(p.is_leaf and p.requires_grad for p in params),
               f"{what}: after your call the params are no longer leaves that require grad",
               where="look at the update of the params: where it runs (inside torch.no_grad()?) and how (in place?)",
               mistake="update them in place under torch.no_grad()")
        with torch.no_grad():
            final = ((predict(params, x) - y) ** 2).mean().item()
        expect(not isinstance(got, torch.Tensor),
               f"{what} returned {describe(got)}; expected the error as a Python float",
               where="look at the value you return",
               mistake="return the error as a Python float (.item()), not a tensor")
        expect(isinstance(got, float), f"{what} should return the final error as a Python float, not {describe(got)}",
               where="look at the value you return")
        if not _same_params(params, path[first][0]) and not any(
                _same_params(params, path[k][0]) and path[k][1] <= target * (1 + 1e-5)
                for k in (first - 1, first + 1) if 0 <= k < len(path)):
            if _same_params(params, start) and first > 0:
                raise CheckError(f"{what}: the params are exactly where they started, but gradient descent needs "
                                 f"{first} steps to reach the target",
                                 where="look at the line that updates each parameter: does it change the tensor "
                                       "in the list, or make a new one?",
                                 mistake="update the given tensors in place (p -= lr * p.grad inside "
                                         "torch.no_grad()); `p = p - ...` only rebinds a name")
            variants = [("you never cleared the gradients, so every step used the sum of all gradients so far",
                         _descend(predict, start, x, y, lr, max_steps, zero=False)),
                        ("you descended the sum of the squared errors; the task says their mean (the gradient of "
                         f"the sum is {y.numel()} times larger)", _descend(predict, start, x, y, lr, max_steps, reduce="sum"))]
            if y.dim() > 1 and y[0].numel() > 1:
                variants.append((f"you divided the summed squares by len(y) ({len(y)}, the rows); y has "
                                 f"{y.numel()} elements, and their mean divides by all of them: use .mean()",
                                 _descend(predict, start, x, y, lr, max_steps, reduce="rows")))
            for message, variant in variants:
                if any(_same_params(params, p) for p, _ in variant):
                    raise CheckError(f"{what}: your final params are not on the path of plain gradient descent with "
                                     f"lr={lr} from the given params",
                                     where="look at the gradient each step uses: where it is cleared, and the loss "
                                           "it comes from",
                                     mistake=message)
            # the path's error goes up at some step before the target (a nonlinear predict): a loop that cuts lr
            # there leaves the path
            rise = next((k for k in range(1, first + 1) if path[k][1] > path[k - 1][1]), None)
            if rise is not None:
                for factor in (0.5, 0.1):
                    variant = _descend(predict, start, x, y, lr, max_steps, on_rise=factor)
                    # up to the rise the variant is gradient descent itself
                    expect(not any(_same_params(params, p) for p, _ in variant[rise + 1:]),
                           f"{what}: your final params are not on the path of plain gradient descent with lr={lr} "
                           f"from the given params; they are on the path of a run that multiplies lr by {factor} "
                           f"whenever the error goes up (gradient descent's own error goes up after update {rise})",
                           where="look at every line that changes lr (or the optimizer's learning rate) inside the loop",
                           mistake="the learning rate changed during the fit: plain gradient descent keeps lr, even "
                                   "when the error goes up for a step")
            _expect_unchanged_data(params, predict, start, x, y, lr, max_steps, f"{what}: your final params are not "
                                   f"on the path of plain gradient descent with lr={lr} from the given params")
            earlier = [k for k in range(0, first) if _same_params(params, path[k][0])]
            if earlier:
                raise CheckError(f"{what}: your params are those after {earlier[0]} updates, whose error "
                                 f"({path[earlier[0]][1]:.6g}) is still above the target {target}; gradient descent "
                                 f"first reaches it after {first} updates",
                                 where="look at the comparison that stops your loop: what exactly does it compare "
                                       "with the target (a rounded error? < or <=?)")
            later = [k for k in range(first + 2, len(path)) if _same_params(params, path[k][0])]
            if later:
                raise CheckError(f"{what}: your params are those of step {later[0]}, but the error was already at "
                                 f"most {target} after step {first}",
                                 where="look at where your loop tests the error against the target: before or after "
                                       "each update?",
                                 mistake="stop as soon as the target is reached")
            raise CheckError(f"{what}: your final params are not on the path of plain gradient descent with "
                             f"lr={lr} from the given params (it reaches the target after {first} steps, error "
                             f"{path[first][1]:.6g}); your params give error {final:.6g}",
                             where="look at one update by hand: p minus lr times p.grad, with the gradient of the "
                                   "mean squared error, cleared before each backward")
        if not math.isclose(got, final, rel_tol=1e-4, abs_tol=1e-7):
            stale = any(math.isclose(got, error, rel_tol=1e-4, abs_tol=1e-7) for _, error in path)
            raise CheckError(f"{what} returned {got:.6g}, but the error of the params it leaves is {final:.6g}",
                             where="look at which error you return: computed before or after the last update?",
                             mistake="that is the error computed before the last update; return the error of the "
                                     "final params" if stale else None)
    passed("fit_to_target", len(inputs))


def _edge_examples() -> list[tuple[str, tuple]]:
    x = torch.linspace(-1, 1, 20)
    y = 2 * x + 0.3 * _randn(20, seed=122)
    start = _leaves(torch.tensor(2.0), torch.tensor(0.0))
    start_error = ((2 * x - y) ** 2).mean().item()
    exact = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0])  # 2 * x + 0.5 is exact here: the error is 0.0 in any formula
    return [("already", (_line, start, x, y, 0.1, start_error * 1.01, 50)),  # zero steps: leave the params alone
            ("already", (_line, _leaves(torch.tensor(2.0), torch.tensor(0.5)), exact, 2 * exact + 0.5, 0.1, 0.0, 5)),
            ("unreachable", (_line, _leaves(torch.tensor(0.0), torch.tensor(0.0)), x, y, 0.1, 1e-6, 30)),  # noise
            ("no steps", (_line, _leaves(torch.tensor(0.0), torch.tensor(0.0)), x, y, 0.1, 0.5, 0))]


def _one_update_short() -> tuple[str, tuple]:
    """A target that gradient descent reaches at update 9, with max_steps=8: out of reach by one update."""
    x = torch.linspace(-1, 1, 20)
    y = 2 * x + 0.3 * _randn(20, seed=122)
    start = _leaves(torch.tensor(0.0), torch.tensor(0.0))
    path = _descend(_line, start, x, y, 0.1, 9)
    target = path[9][1] * (1 + 1e-6)  # met by update 9 even with another rounding, never by update 8
    return ("unreachable", (_line, start, x, y, 0.1, target, 8))


def check_fit_to_target_edges(fn: Callable, inputs: Sequence[tuple[str, tuple]] | None = None) -> None:
    """Edge cases: params that already meet the target stay as they are; a target out of reach raises RuntimeError
    (also one reached only by the update after max_steps)."""
    inputs = inputs if inputs is not None else _edge_examples()
    for kind, (predict, start, x, y, lr, target, max_steps) in [*inputs, _one_update_short()]:
        what = f"fit_to_target(..., lr={lr}, target={target:.4g}, max_steps={max_steps})"
        params = _leaves(*start)
        with torch.no_grad():
            error = ((predict(params, x) - y) ** 2).mean().item()
        if error <= target:
            try:
                got = _call_fit(fn, predict, params, x, y, lr, target, max_steps, what)
            except CheckError as raised:
                cause = raised.__cause__
                if not isinstance(cause, Exception) or any(p in str(cause) for p, _ in KNOWN_ERRORS):
                    raise
                raise CheckError(f"{what} raised {type(cause).__name__} ({str(cause)[:80]}), but the params already "
                                 f"met the target: their error, {error:.6g}, is at most {target:.4g}",
                                 where="look at how your loop compares the error with target ('at most' includes "
                                       "equal), and at whether it compares before the first update",
                                 mistake="the error equals the target exactly, and 'at most' includes equal: compare "
                                         "with <=, not <" if error == target else None) from None
            changed = f"{what}: the params already met the target (error {error:.6g} <= {target:.4g}) but your call " \
                      "changed them"
            if not _same_params(params, start):
                _expect_unchanged_data(params, predict, start, x, y, lr, max_steps, changed)
            expect(_same_params(params, start) and all(torch.equal(p.detach(), q) for p, q in zip(params, start)),
                   changed,
                   where="look at the order in your loop: is the error compared with the target before the first "
                         "update?",
                   mistake="check the error before updating")
            expect(isinstance(got, float) and math.isclose(got, error, rel_tol=1e-4, abs_tol=1e-7),
                   f"{what}: the params already met the target; expected their error {error:.6g} as a float, "
                   f"got {describe(got)}",
                   where="look at what you return when no update is needed")
            continue
        try:
            got = _call_fit(fn, predict, params, x, y, lr, target, max_steps, what)
        except CheckError as raised:
            cause = raised.__cause__
            if expected_raise(raised, RuntimeError):
                continue
            if not isinstance(cause, Exception) or any(p in str(cause) for p, _ in KNOWN_ERRORS):
                raise
            tb = cause.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            own = tb is not None and tb.tb_frame.f_code is getattr(fn, "__code__", None)  # your own raise statement
            raise CheckError(f"{what} raised {type(cause).__name__} ({str(cause)[:80]}): {max_steps} steps of gradient "
                             f"descent do not bring the error to {target:.4g} (it starts at {error:.6g}), and for that "
                             "the task asks for a RuntimeError",
                             where="look at the exception your function raises when it gives up",
                             mistake=f"raise RuntimeError, not {type(cause).__name__}: the caller catches the kind of "
                                     "error the task names" if own else None) from None
        symptom = (f"{what} returned {describe(got)}, but {max_steps} steps of gradient descent do not bring the "
                   f"error to {target:.4g} (it starts at {error:.6g}); expected a RuntimeError")
        if isinstance(got, float) and got <= target:  # it got there: by other steps than plain gradient descent's
            beyond = _descend(predict, start, x, y, lr, max_steps + 1)
            if _same_params(params, beyond[-1][0]):
                raise CheckError(symptom + f"; your params are those after {max_steps + 1} updates",
                                 where="look at the condition that lets your loop make one more update: when does it "
                                       "give up?",
                                 mistake=f"you made max_steps + 1 updates: the task allows at most max_steps "
                                         f"({max_steps}), and then raises RuntimeError if the target is not met")
            raise CheckError(symptom, where="look at each update: plain gradient descent with lr, its gradients "
                                            "zeroed before each backward",
                             mistake="your steps reached the target where plain gradient descent does not, so they "
                                     "are not its steps (momentum, or gradients never cleared, move further); "
                                     "the exercise's first graded cell names the difference")
        raise CheckError(symptom, where="look at what your function does after its last allowed step when the target "
                                        "is still not met",
                         mistake="raise a RuntimeError saying so")
    passed("fit_to_target edge cases", len(inputs))
