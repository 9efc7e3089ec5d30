"""The check framework every lesson's checks are built on.

A check calls the learner's function on several inputs, compares each result
with the reference implementation's, and either prints one pass line or raises
:class:`CheckError` with a message that names the mistake. Known mistakes are
recognised by running a deliberately wrong twin of the reference on the same
input: if the learner's answer equals the wrong twin's, the message says which
mistake it is, instead of a bare "values differ".

A lesson's check module looks like::

    from helpers.checks import Mistake, call, expect_tensor, passed
    from helpers.reference import tensors as ref

    def check_flatten_batch(fn, inputs=None):
        inputs = inputs or [torch.randn(2, 3, 4)]
        for x in inputs:
            got = call(fn, x.clone())
            expect_tensor(got, ref.flatten_batch(x), what=f"flatten_batch(x of shape {list(x.shape)})",
                          mistakes=[Mistake("you flattened the batch dimension too", lambda: x.flatten())])
        passed("flatten_batch", len(inputs))

Graded cells call the same check with extra, hidden ``inputs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

__all__ = [
    "CheckError",
    "Mistake",
    "call",
    "describe",
    "expect",
    "expect_close",
    "expect_tensor",
    "passed",
    "same_tensor",
]


class CheckError(AssertionError):
    """A learner's answer is wrong; the message says how and what to try."""


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer and the message that explains it.

    Args:
        message: what the learner did wrong and how to fix it.
        wrong_answer: a zero-argument function that computes what the mistaken
            code would return for the current input. Exceptions inside it mean
            "this mistake cannot produce this answer".
        matches: instead of ``wrong_answer``, a predicate on the learner's result.
    """

    message: str
    wrong_answer: Callable[[], Any] | None = None
    matches: Callable[[Any], bool] | None = None

    def explains(self, got: Any) -> bool:
        try:
            if self.matches is not None:
                return bool(self.matches(got))
            if self.wrong_answer is not None:
                return same_value(got, self.wrong_answer())
        except Exception:  # a mistake that cannot even be computed here is not this one
            return False
        return False


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a learner's function, turning a crash into a readable CheckError."""
    name = getattr(fn, "__name__", repr(fn))
    if not callable(fn):
        raise CheckError(f"expected a function, got {type(fn).__name__}: pass the function itself, not its result")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckError(
            f"{name} is not written yet: replace `raise NotImplementedError()` with your code"
        ) from None
    except CheckError:
        raise
    except Exception as error:
        shown = ", ".join([describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()])
        raise CheckError(f"{name}({shown}) raised {type(error).__name__}: {error}") from error


def describe(value: Any) -> str:
    """A short, learner-readable description of a value (tensors by shape and dtype)."""
    if isinstance(value, torch.Tensor):
        return f"tensor(shape={list(value.shape)}, dtype={value.dtype}, device={value.device.type})"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__  # not "<function f at 0x7f...>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def same_value(a: Any, b: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Equal shape, dtype and (close) values for tensors; == or isclose for the rest."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype or a.device.type != b.device.type:
            return False
        if a.device.type == "meta":
            return True
        if a.is_floating_point() or a.is_complex():
            return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
        return bool(torch.equal(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)
        except (TypeError, ValueError):
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k], atol, rtol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y, atol, rtol) for x, y in zip(a, b))
    return a == b


def _first_explained(got: Any, mistakes: Iterable[Mistake]) -> Mistake | None:
    return next((m for m in mistakes if m.explains(got)), None)


def expect(condition: bool, message: str) -> None:
    """Raise CheckError(message) unless ``condition`` holds."""
    if not condition:
        raise CheckError(message)


def expect_tensor(
    got: Any,
    expected: torch.Tensor,
    *,
    what: str,
    mistakes: Sequence[Mistake] = (),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    check_dtype: bool = True,
) -> None:
    """Check that ``got`` equals the reference tensor ``expected``.

    Steps:
        1. If ``got`` matches one of the known ``mistakes``, raise its message.
        2. Otherwise compare type, shape, dtype, device and values, in that
           order, and raise a message for the first that differs.
    """
    if not isinstance(got, torch.Tensor) or same_value(got, expected, atol, rtol) is False:
        mistake = _first_explained(got, mistakes)
        if mistake is not None:
            raise CheckError(f"{what}: {mistake.message}")
    if not isinstance(got, torch.Tensor):
        raise CheckError(f"{what} should return a tensor, but returned {describe(got)}")
    if got.shape != expected.shape:
        raise CheckError(f"{what} should have shape {list(expected.shape)}, but yours has shape {list(got.shape)}")
    if check_dtype and got.dtype != expected.dtype:
        raise CheckError(f"{what} should have dtype {expected.dtype}, but yours has dtype {got.dtype}")
    if got.device.type != expected.device.type:
        raise CheckError(f"{what} should be on device '{expected.device.type}', but yours is on '{got.device.type}'")
    if expected.device.type == "meta":
        return
    if not same_value(got.to(expected.dtype), expected, atol, rtol):
        if expected.is_floating_point():
            diff = (got.to(expected.dtype) - expected).abs()
            worst = int(diff.nan_to_num(float("inf")).argmax())
            raise CheckError(
                f"{what} has the right shape and dtype but wrong values: at flat index {worst} "
                f"it is {got.flatten()[worst].item():.6g}, expected {expected.flatten()[worst].item():.6g}"
            )
        mismatch = int((got.to(expected.dtype) != expected).flatten().nonzero()[0])
        raise CheckError(
            f"{what} has the right shape and dtype but wrong values: at flat index {mismatch} "
            f"it is {got.flatten()[mismatch].item()}, expected {expected.flatten()[mismatch].item()}"
        )


def expect_close(
    got: Any, expected: float, *, what: str, mistakes: Sequence[Mistake] = (), atol: float = 1e-5, rtol: float = 1e-4
) -> None:
    """Check a Python number (or a one-element tensor) against the reference number."""
    mistake = None if same_value(_as_number(got), expected, atol, rtol) else _first_explained(got, mistakes)
    if mistake is not None:
        raise CheckError(f"{what}: {mistake.message}")
    number = _as_number(got)
    if not isinstance(number, (int, float)) or isinstance(number, bool):
        raise CheckError(f"{what} should be a number, but is {describe(got)}")
    if not same_value(float(number), float(expected), atol, rtol):
        raise CheckError(f"{what} should be {expected:.6g}, but yours is {number:.6g}")


def _as_number(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share storage (writing one changes the other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def passed(name: str, n_checks: int) -> None:
    """Print the one line a learner sees when a check passes."""
    plural = "s" if n_checks != 1 else ""
    print(f"✔ {name}: passed {n_checks} check{plural}")
