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

import linecache
import math
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Sequence

import torch

__all__ = [
    "CheckError",
    "Mistake",
    "call",
    "call_unchanged",
    "describe",
    "expect",
    "expect_close",
    "expect_mode",
    "expect_tensor",
    "HostTensor",
    "host_collate",
    "modes",
    "passed",
    "same_tensor",
    "same_value",
    "substitute",
]


_HELPERS = Path(__file__).resolve().parent.parent  # the helpers package folder
_RED, _BOLD, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


class CheckError(AssertionError):
    """A learner's answer is wrong; the message says how and what to try.

    In a notebook it shows as one short red message that names the exercise and
    the mistake, not as a traceback through helpers/: IPython renders an exception
    through its ``_render_traceback_`` method when it has one. When the learner's
    own code raised (the CheckError's ``__cause__``), the lines of the learner's
    cells it went through follow. It is still an exception: the cell fails, a
    graded cell scores 0, and the output's ``ename`` is ``CheckError``.
    """

    def exercise(self) -> str | None:
        """The exercise checked: ``name`` of the ``check_<name>`` in helpers.checks that raised this."""
        for frame, _ in traceback.walk_tb(self.__traceback__):
            code = frame.f_code
            if code.co_name.startswith("check_") and _in_helpers(code.co_filename):
                return code.co_name.removeprefix("check_")
        return None

    def headline(self) -> str:
        """The one line a learner sees: the exercise (unless the message starts with it) and the mistake."""
        message, exercise = str(self), self.exercise()
        named = exercise is None or message.startswith(exercise)
        return f"✘ {message}" if named else f"✘ {exercise}: {message}"

    def _render_traceback_(self) -> list[str]:
        lines = [f"{_RED}{_BOLD}{self.headline()}{_RESET}"]
        cause = self.__cause__
        frames = _cell_frames(cause.__traceback__) if cause is not None else []
        if frames:
            lines.append(f"{_RED}your code raised {type(cause).__name__} here:{_RESET}")
            lines += frames
        return lines


def _in_helpers(filename: str) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(_HELPERS)
    except (OSError, ValueError):
        return False


def _cell_frames(tb: TracebackType | None) -> list[str]:
    """"Cell In[N], line L, in f" and the line itself, for each frame of ``tb`` in a notebook cell."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    if shell is None:
        return []
    shown = []
    for frame, line_number in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        cell = shell.compile.format_code_name(filename)  # None unless the file is a notebook cell
        if cell is None:
            continue
        line = linecache.getline(filename, line_number).strip()
        shown.append(f"  {cell[0]} {cell[1]}, line {line_number}, in {frame.f_code.co_name}\n      {line}")
    return shown


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
    except NotMovedError as error:
        raise CheckError(f"{name} used a batch without moving it to the device: call .to(device) on every tensor "
                         "of the batch before the model or the loss sees it. (Without a GPU nothing seems wrong; on "
                         "a GPU this is the error 'Expected all tensors to be on the same device'.)") from error
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
    given: torch.Tensor | None = None,
) -> None:
    """Check that ``got`` equals the reference tensor ``expected``.

    Steps:
        1. If ``got`` matches one of the known ``mistakes``, raise its message.
        2. Otherwise compare type, shape, dtype, device and values, in that
           order, and raise a message for the first that differs. A shape or
           value difference is diagnosed from how ``got`` relates to
           ``expected`` (and to the input ``given``, when the check passes
           it): transposed, a constant factor, rounded, reordered, shifted...
    """
    if not isinstance(got, torch.Tensor) or same_value(got, expected, atol, rtol) is False:
        mistake = _first_explained(got, mistakes)
        if mistake is not None:
            raise CheckError(f"{what}: {mistake.message}")
    if not isinstance(got, torch.Tensor):
        raise CheckError(f"{what} should return a tensor, but returned {describe(got)}")
    if got.shape != expected.shape:
        cause = _diagnose_shape(got, expected, given)
        raise CheckError(f"{what} should have shape {list(expected.shape)}, but yours has shape {list(got.shape)}"
                         + (f": {cause}" if cause else ""))
    if check_dtype and got.dtype != expected.dtype:
        cause = _diagnose_dtype(got, expected, given)
        raise CheckError(f"{what} should have dtype {expected.dtype}, but yours has dtype {got.dtype}"
                         + (f": {cause}" if cause else ""))
    if got.device.type != expected.device.type:
        raise CheckError(f"{what} should be on device '{expected.device.type}', but yours is on '{got.device.type}'")
    if expected.device.type == "meta":
        return
    if not same_value(got.to(expected.dtype), expected, atol, rtol):
        got = got.detach().to(expected.dtype)
        cause = _diagnose_values(got, expected, given, atol, rtol)
        if cause is None:
            if expected.is_floating_point():
                diff = (got - expected).abs()
                index = int(diff.nan_to_num(float("inf")).argmax())
                shown = f"{got.flatten()[index].item():.6g}, expected {expected.flatten()[index].item():.6g}"
            else:
                index = int((got != expected).flatten().nonzero()[0])
                shown = f"{got.flatten()[index].item()}, expected {expected.flatten()[index].item()}"
            cause = f"wrong values: at flat index {index} it is {shown}"
        raise CheckError(f"{what} has the right shape and dtype but {cause}{_example(got, expected, given)}")


# ---------------------------------------------------------------- diagnosis of a wrong tensor
# Each diagnosis names a relation between the learner's tensor and the reference
# that holds exactly (within tolerance), so the message says what is true of the
# answer; a likely cause is added only where that relation has one usual cause.

_EXAMPLE_ELEMENTS = 12


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    if a.shape != b.shape:
        return False
    if a.is_floating_point() or b.is_floating_point():
        return bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True))
    return bool(torch.equal(a, b))


def _show(t: torch.Tensor) -> str:
    values = t.detach().cpu()
    if values.is_floating_point():
        values = values.double().round(decimals=4)
    return str(values.tolist())


def _example(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str:
    """A small worked example (input, expected, yours) when the tensors are small enough to read."""
    if expected.numel() > _EXAMPLE_ELEMENTS or got.numel() > _EXAMPLE_ELEMENTS:
        return ""
    small_input = isinstance(given, torch.Tensor) and given.device.type != "meta" and given.numel() <= _EXAMPLE_ELEMENTS
    head = f"\n   input:    {_show(given)}" if small_input else ""
    return f"{head}\n   expected: {_show(expected)}\n   yours:    {_show(got)}"


def _factor_name(factor: float, given: torch.Tensor | None) -> str:
    """Words for a constant factor, naming the size it equals when one of the input's sizes fits."""
    if math.isclose(factor, -1.0, rel_tol=1e-4):
        return "every value has the opposite sign (the sign is flipped)"
    sizes: dict[int, str] = {}
    if isinstance(given, torch.Tensor) and given.dim() > 0:
        for d, size in enumerate(given.shape):
            sizes.setdefault(size, f"the size of the input's dim {d}")
        sizes.setdefault(given.numel(), "the input's number of elements")
    for k, word in ((factor, "times"), (1 / factor, "divided by")):
        n = round(k)
        if n >= 2 and math.isclose(k, n, rel_tol=1e-4):
            named = sizes.get(n)
            if named and word == "times":
                return (f"every value is {n} times the expected one; {n} is {named}: "
                        "a sum where a mean is wanted (a missing 1/N)?")
            if named:
                return (f"every value is the expected one divided by {n}; {n} is {named}: "
                        "a mean where a sum is wanted (an extra 1/N)?")
            return f"every value is the expected one {word} {n}: a constant factor is wrong or missing"
    return f"every value is {factor:.4g} times the expected one: a constant factor is wrong or missing"


def _diagnose_values(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None,
                     atol: float, rtol: float) -> str | None:
    """What is true of ``got`` compared with ``expected`` (same shape and dtype), or None."""
    if got.numel() == 0:
        return None
    bad = ~torch.isfinite(got.double()) & torch.isfinite(expected.double())
    if bad.any():
        where = ""
        if isinstance(given, torch.Tensor) and given.shape == got.shape and given.device.type != "meta":
            at = given.detach()[bad].double()
            where = f" (where the input is {_show(at[:3])}{' ...' if at.numel() > 3 else ''})"
            if at.abs().min() > 80:
                where += ": an exp() (or a power) that overflows for inputs this large? Rewrite it in a stable form"
        return (f"your result is nan or inf at {int(bad.sum())} of {bad.numel()} elements "
                f"where the expected values are finite{where}")
    if not torch.isfinite(got.double()).all() or not torch.isfinite(expected.double()).all():
        return None
    e, g = expected.double(), got.double()
    # a constant factor (includes the sign flip)
    if e.abs().max() > atol:
        factor = float((g * e).sum() / (e * e).sum())
        if factor != 0 and not math.isclose(factor, 1.0, rel_tol=1e-4) and _close(g, factor * e, atol, rtol):
            return _factor_name(factor, given)
    # transposed (square matrices, or the last two dimensions of a batch)
    if got.dim() >= 2 and got.shape[-1] == got.shape[-2] and _close(got, expected.transpose(-1, -2), atol, rtol):
        return "your result is the transpose of the expected one (rows and columns swapped)"
    # whole numbers where the expected values are not
    if expected.is_floating_point():
        for name, op in (("rounded to whole numbers", torch.round), ("rounded down (floor)", torch.floor),
                         ("rounded towards zero (an int conversion?)", torch.trunc),
                         ("rounded up (ceil)", torch.ceil)):
            if _close(got, op(expected), atol, rtol):
                return f"your values are the expected ones {name}"
    # the right values, in the wrong place
    for d in range(got.dim()):
        if got.shape[d] < 2:
            continue
        for shift in (1, -1):
            if _close(got, expected.roll(shift, dims=d), atol, rtol):
                return (f"your values are the expected ones shifted by one position along dim {d} "
                        "(an off-by-one index?)")
    if _close(got.flatten().sort().values, expected.flatten().sort().values, atol, rtol):
        return "you have the right values, but in the wrong order"
    # an offset: every value off by the same amount
    offset = float((g - e).mean())
    if abs(offset) > atol and _close(g, e + offset, atol, rtol):
        return f"every value is off by the same amount ({offset:+.4g})"
    # wrong only on part of the input's domain
    wrong = ~torch.isclose(g, e, atol=atol, rtol=rtol)
    if isinstance(given, torch.Tensor) and given.shape == got.shape and given.device.type != "meta" \
            and not given.is_complex() and not given.dtype == torch.bool:
        x = given.detach().double()
        for name, region in (("negative", x < 0), ("zero", x == 0), ("positive", x > 0),
                             ("negative or zero", x <= 0), ("positive or zero", x >= 0)):
            if region.any() and not region.all() and torch.equal(wrong, region):
                return (f"your values are right except where the input is {name} "
                        f"({int(wrong.sum())} of {wrong.numel()} elements): that part of the domain needs another look")
    if wrong.sum() < wrong.numel() and got.numel() > 1:
        index = int(wrong.flatten().nonzero()[0])
        return (f"wrong values: at flat index {index} it is {got.flatten()[index].item():.6g}, expected "
                f"{expected.flatten()[index].item():.6g} ({int(wrong.sum())} of {wrong.numel()} elements are wrong)")
    return None


def _diagnose_dtype(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str | None:
    if given is not None and isinstance(given, torch.Tensor) and given.dtype == expected.dtype \
            and not expected.is_floating_point() and got.is_floating_point():
        return (f"the input was {given.dtype} and your code turned it into floats "
                "(for example a float literal such as 0.0 in torch.where)")
    if expected.is_floating_point() and not got.is_floating_point() and got.device.type != "meta" \
            and expected.device.type != "meta" and got.shape == expected.shape:
        if _close(got.to(expected.dtype), expected.trunc(), 1e-5, 1e-4) and not _close(expected, expected.trunc()):
            return "your values are whole numbers: they were truncated by a conversion to an integer type"
    return None


def _diagnose_shape(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str | None:
    """What the shapes (and, where they line up, the values) say about the mistake, or None."""
    same_data = got.numel() == expected.numel() and got.device.type != "meta" and expected.device.type != "meta" \
        and got.dtype == expected.dtype
    if same_data and got.dim() == expected.dim() and _close(got, expected.transpose(-1, -2) if got.dim() >= 2 else got):
        return "your result is the transpose of the expected one (rows and columns swapped)"
    if same_data and _close(got.squeeze(), expected.squeeze()):
        if got.dim() > expected.dim():
            return "the values are right but there is an extra dimension of size 1 (keepdim=True, or a missing squeeze)"
        return "the values are right but a dimension of size 1 is missing (keepdim=True keeps it)"
    if same_data:
        return "the values are right but arranged in another shape: reshape (or view) it" \
            if _close(got.flatten(), expected.flatten()) else None
    if got.dim() == expected.dim() + 1 and got.dim() >= 2 and got.device.type != "meta" \
            and torch.broadcast_shapes(expected.shape, expected.unsqueeze(-1).shape) == got.shape \
            and got.dtype == expected.dtype and _close(torch.diagonal(got, dim1=-2, dim2=-1), expected):
        return ("a [N] tensor combined with a [N, 1] one broadcasts to [N, N]; your values sit on its diagonal. "
                "Keep the shapes aligned (keepdim=True, or squeeze the [N, 1] one)")
    if isinstance(given, torch.Tensor) and given.dim() >= 2:
        def reduced(d: int, keep: bool) -> list[int]:
            shape = list(given.shape)
            return shape[:d] + [1] + shape[d + 1:] if keep else shape[:d] + shape[d + 1:]
        right = [(d, k) for d in range(given.dim()) for k in (False, True) if reduced(d, k) == list(expected.shape)]
        wrong = [(d, k) for d in range(given.dim()) for k in (False, True) if reduced(d, k) == list(got.shape)]
        if len(right) == 1 and len(wrong) == 1:
            (d_right, k_right), (d_wrong, _) = right[0], wrong[0]
            if d_right != d_wrong:
                return f"that is the input reduced over dim {d_wrong}; reduce over dim {d_right}"
            return "keepdim=True is needed here" if k_right else "keepdim=True is not wanted here"
    return None


def expect_close(
    got: Any, expected: float, *, what: str, mistakes: Sequence[Mistake] = (), atol: float = 1e-5, rtol: float = 1e-4,
    python_number: bool = False, given: torch.Tensor | None = None,
) -> None:
    """Check a Python number (or, unless ``python_number``, a one-element tensor) against the reference number.

    A wrong number is diagnosed like a wrong tensor: a constant factor (naming
    the input's size it equals, when ``given`` is passed) or a flipped sign.
    """
    mistake = None if same_value(_as_number(got), expected, atol, rtol) else _first_explained(got, mistakes)
    if mistake is not None:
        raise CheckError(f"{what}: {mistake.message}")
    if python_number and isinstance(got, torch.Tensor):
        raise CheckError(f"{what} should be a Python number, but is {describe(got)}; "
                         "convert a one-element tensor with .item()")
    number = _as_number(got)
    if not isinstance(number, (int, float)) or isinstance(number, bool):
        raise CheckError(f"{what} should be a number, but is {describe(got)}")
    if not same_value(float(number), float(expected), atol, rtol):
        cause = ""
        if expected != 0 and number != 0 and math.isfinite(number) and math.isfinite(expected):
            # one number matching a multiple is weak evidence: say so only for a sign or a size of the input
            words = _factor_name(number / expected, given)
            if "sign" in words or " is the size" in words or "number of elements" in words:
                cause = ": " + words.replace("every value is", "it is").replace("every value has", "it has")
        raise CheckError(f"{what} should be {expected:.6g}, but yours is {number:.6g}{cause}")


def _as_number(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


# ---------------------------------------------------------------- what a call must leave as it was

def _snapshot(value: Any, depth: int = 0) -> Any:
    """What the caller can observe of an argument: tensor values and flags, container contents."""
    if isinstance(value, torch.Tensor):
        data = None if value.device.type == "meta" else value.detach().clone()
        return ("tensor", value.shape, value.dtype, value.device, value.requires_grad, data)
    if depth < 3 and isinstance(value, dict):
        return ("dict", {k: (id(v), _snapshot(v, depth + 1)) for k, v in value.items()})
    if depth < 3 and isinstance(value, list):
        return ("list", [(id(v), _snapshot(v, depth + 1)) for v in value])
    if depth < 3 and isinstance(value, tuple):
        return ("tuple", [_snapshot(v, depth + 1) for v in value])
    if type(value).__module__ == "numpy" and hasattr(value, "copy") and hasattr(value, "dtype"):
        return ("array", value.copy())
    return None


def _change(before: Any, after: Any) -> str | None:
    """How an argument changed between two snapshots, in words, or None."""
    if before is None or after is None or before[0] != after[0]:
        return None
    kind = before[0]
    if kind == "tensor":
        _, shape, dtype, device, requires_grad, data = before
        if (shape, dtype, device) != after[1:4]:
            return "it was reshaped or converted in place (set_, resize_, or similar)"
        if requires_grad != after[4]:
            return ("its requires_grad was switched " + ("on" if after[4] else "off")
                    + "; work on a copy (x.detach().clone().requires_grad_()) instead")
        if data is not None and not _close(data, after[5], 0.0, 0.0):
            return ("its values were overwritten: an in-place operation (x -= ..., x[...] = ..., a method ending "
                    "in _) writes into the caller's tensor; compute a new tensor instead")
        return None
    if kind == "array":
        import numpy as np

        return None if np.array_equal(before[1], after[1], equal_nan=True) else \
            "its values were overwritten (an in-place change of the caller's array)"
    if kind == "dict":
        old, new = before[1], after[1]
        if old.keys() != new.keys():
            added, removed = sorted(map(str, new.keys() - old.keys())), sorted(map(str, old.keys() - new.keys()))
            return ("keys were " + " and ".join(part for part in (f"added {added}" if added else "",
                                                                   f"removed {removed}" if removed else "") if part)
                    + ": build and return a new dict instead")
        for key in old:
            if old[key][0] != new[key][0]:
                return f"the value under {key!r} was replaced: build and return a new dict instead"
            inner = _change(old[key][1], new[key][1])
            if inner:
                return f"the value under {key!r} changed: {inner}"
        return None
    if kind == "list":
        old, new = before[1], after[1]
        if len(old) == len(new) and sorted(a[0] for a in old) == sorted(b[0] for b in new) \
                and any(a[0] != b[0] for a, b in zip(old, new)):
            return "it was reordered in place (list.sort()?); sorted(...) returns a sorted copy instead"
        if len(old) != len(new) or any(a[0] != b[0] for a, b in zip(old, new)):
            return "items were added, removed or replaced: build and return a new list instead"
        return next((f"item {i} changed: {c}" for i, (a, b) in enumerate(zip(old, new)) if (c := _change(a[1], b[1]))),
                    None)
    if kind == "tuple":
        return next((f"item {i} changed: {c}" for i, (a, b) in enumerate(zip(before[1], after[1]))
                     if (c := _change(a, b))), None)
    return None


def _global_state() -> dict[str, Any]:
    return {"grad": torch.is_grad_enabled(), "inference": torch.is_inference_mode_enabled(),
            "dtype": torch.get_default_dtype(), "anomaly": torch.is_anomaly_enabled()}


def modes(model: torch.nn.Module) -> dict[str, bool]:
    """``training`` of the model and every submodule, by name ("" is the model itself)."""
    return {name: module.training for name, module in model.named_modules()}


def call_unchanged(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call`` on the caller's own arguments, then verify the call left them, and PyTorch's global state, as they were.

    Pass the originals (not clones): a function that writes into the caller's
    tensor, dict or list, switches requires_grad on an argument, or leaves
    gradient tracking or the default dtype changed for the caller fails with a
    message that says which. Modules are not compared here (see :func:`modes`);
    use plain :func:`call` where the task asks for a change in place.
    """
    name = getattr(fn, "__name__", "your function")
    snapshots = [(f"argument {i + 1}", a, _snapshot(a)) for i, a in enumerate(args)]
    snapshots += [(f"argument {k}", v, _snapshot(v)) for k, v in kwargs.items()]
    state = _global_state()
    try:
        result = call(fn, *args, **kwargs)
    finally:
        changed_state = _global_state()
        torch.set_grad_enabled(state["grad"])  # give the caller (and the rest of the check) its state back
        torch.set_default_dtype(state["dtype"])
        torch.autograd.set_detect_anomaly(state["anomaly"])
    for label, value, before in snapshots:
        change = _change(before, _snapshot(value))
        if change:
            raise CheckError(f"{name} changed its {label} ({describe(value)}), which belongs to the caller: {change}")
    if changed_state["grad"] != state["grad"]:
        switched = "off" if state["grad"] else "on"
        raise CheckError(f"{name} left gradient tracking switched {switched} for the rest of the program "
                         f"(torch.set_grad_enabled({not state['grad']}) outlives the call). Use a `with torch.no_grad():` "
                         "block, which restores the caller's setting when it ends")
    if changed_state["anomaly"] != state["anomaly"]:
        raise CheckError(f"{name} left anomaly detection switched {'on' if changed_state['anomaly'] else 'off'} for "
                         "the rest of the program (torch.autograd.set_detect_anomaly outlives the call; it makes every "
                         "backward several times slower). Use the `with torch.autograd.detect_anomaly():` block")
    if changed_state["dtype"] != state["dtype"]:
        raise CheckError(f"{name} changed the default dtype for the rest of the program "
                         f"({state['dtype']} -> {changed_state['dtype']}); pass dtype= to the functions that need it")
    return result


def expect_mode(model: torch.nn.Module, training: bool, what: str, when: str = "afterwards") -> None:
    """Every submodule of ``model`` is in training (True) or eval (False) mode; name the ones that are not."""
    wrong = [(name or type(model).__name__, type(m).__name__) for name, m in model.named_modules()
             if m.training != training]
    if not wrong:
        return
    top_ok = model.training == training
    shown = ", ".join(f"{name} ({kind})" for name, kind in wrong[:3]) + (" ..." if len(wrong) > 3 else "")
    mode, method = ("training", "train") if training else ("eval", "eval")
    if top_ok:
        raise CheckError(f"{what}: {when} the model itself is in {mode} mode but its submodule(s) {shown} are not: "
                         f"setting model.training by hand changes only the top-level flag; model.{method}() "
                         "sets it on every submodule")
    raise CheckError(f"{what}: {when} the model is not in {mode} mode ({shown}); call model.{method}()")


def substitute(fn: Any, **replacements: Any) -> Any:
    """Context manager: while it is open, names in the learner's notebook (``fn``'s globals) refer to ``replacements``.

    Hidden tests use it so an exercise built on an earlier one is graded with
    the reference version of the earlier one: one bug loses one exercise's points.
    """
    import contextlib

    @contextlib.contextmanager
    def swapped():
        namespace = _globals_of(fn)
        if namespace is None:
            yield
            return
        missing = object()
        saved = {k: namespace.get(k, missing) for k in replacements}
        namespace.update(replacements)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is missing:
                    namespace.pop(k, None)
                else:
                    namespace[k] = v

    return swapped()


def _globals_of(fn: Any) -> dict | None:
    """The module namespace a function, or a class's methods, look names up in."""
    if hasattr(fn, "__globals__"):
        return fn.__globals__
    for attr in vars(fn).values() if isinstance(fn, type) else ():
        target = getattr(attr, "__func__", attr)
        if hasattr(target, "__globals__"):
            return target.__globals__
    return None


# ---------------------------------------------------------------- a device stand-in for a grader without a GPU

class NotMovedError(RuntimeError):
    """Raised when a batch that was never moved with ``.to(device)`` meets the model's tensors."""


class HostTensor(torch.Tensor):
    """A batch tensor still "on the host": a stand-in for a CPU batch when the model is on a GPU.

    On a machine without a GPU, forgetting ``batch.to(device)`` changes nothing,
    so no check could see it. A HostTensor makes it visible everywhere: it
    behaves like an ordinary tensor on its own, ``.to(device)`` (or ``.cuda()``)
    returns an ordinary tensor, and combining a HostTensor with an ordinary
    tensor (the model's weights, a moved batch) raises :class:`NotMovedError`,
    as PyTorch raises for two devices. Checks hand learners loaders whose
    batches are HostTensors (``collate_fn=host_collate``).
    """

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("to", "cuda", "cpu"):
            moves = name in ("cuda", "cpu") or "device" in kwargs or any(
                isinstance(a, (torch.device, str)) or (isinstance(a, torch.Tensor) and not isinstance(a, cls))
                for a in args[1:])
            if moves:
                with torch._C.DisableTorchFunctionSubclass():
                    out = func(*args, **kwargs)
                return out.as_subclass(torch.Tensor) if isinstance(out, cls) else out
        with torch._C.DisableTorchFunctionSubclass():  # looking at the tensors must not come back here
            tensors = [t for t in _tensors_in(args) + _tensors_in(list(kwargs.values())) if t.dim() > 0]
        if any(isinstance(t, cls) for t in tensors) and any(not isinstance(t, cls) for t in tensors):
            raise NotMovedError(f"{name or 'an operation'} got a batch tensor that was never moved to the device "
                                "together with tensors that were (the model's parameters or a moved batch)")
        return super().__torch_function__(func, types, args, kwargs)


def _tensors_in(values: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_tensors_in(value))
    return found


def host_collate(samples: list) -> Any:
    """``default_collate``, with every tensor of the batch a :class:`HostTensor`."""
    from torch.utils.data import default_collate

    def wrap(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.as_subclass(HostTensor)
        if isinstance(value, (list, tuple)):
            return type(value)(wrap(v) for v in value)
        return value

    return wrap(default_collate(samples))


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share storage (writing one changes the other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def passed(name: str, n_checks: int) -> None:
    """Print the one line a learner sees when a check passes."""
    plural = "s" if n_checks != 1 else ""
    print(f"✔ {name}: passed {n_checks} check{plural}")
