"""Lesson 03 Datasets and DataLoaders: checks for every exercise.

Each ``check_*`` takes the learner's function or class and, optionally, extra
inputs (the graded cells pass hidden ones). It prints one pass line or raises
CheckError naming the mistake. Checks with a ``part`` argument can test one
separable part of an exercise, so graded cells can give partial credit.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import statistics
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler, Subset, TensorDataset

from helpers.checks import (Allow, CheckError, Mistake, call, describe, expect, expect_close, expect_tensor,
                           passed, same_value, substitute)
from helpers.reference import datasets as ref

ClipSpec = tuple[dict[str, np.ndarray], int, Sequence[str]]
WHERE_RETURN = "look at your return statement"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _not_this() -> Any:
    """Inside a Mistake's wrong_answer: this mistake cannot apply to this input (raising reads as "not this one")."""
    raise LookupError("this mistake does not apply to this input")


def _check_part(part: str, allowed: Sequence[str]) -> None:
    if part not in allowed:
        raise ValueError(f"part must be one of {list(allowed)}, not {part!r}")


def _expect_class(cls: Any, name: str) -> None:
    expect(isinstance(cls, type), f"the check was given {describe(cls)}; expected the class {name} itself",
           where="look at the argument of the check cell", mistake=f"pass the class without brackets: ({name})")
    expect(issubclass(cls, Dataset), f"{name} is not a subclass of torch.utils.data.Dataset",
           where=f"look at the line class {name}(...)", mistake=f"write class {name}(Dataset):")


def _length(dataset: Any, name: str) -> int:
    """len(dataset), with a readable message when __len__ is missing or returns a non-int."""
    expect(hasattr(dataset, "__len__"), f"len({name}) failed: {name} has no __len__ method",
           where="a map-style dataset needs __len__ as well as __getitem__")
    n = call(dataset.__len__)
    expect(isinstance(n, int) and not isinstance(n, bool),
           f"{name}.__len__() returned {describe(n)}; expected an int, the number of samples",
           where="look at what __len__ returns")
    return n


def _item(dataset: Any, index: int, n: int, name: str) -> Any:
    """dataset[index], naming the len/getitem disagreement when it raises IndexError."""
    try:
        return dataset[index]
    except IndexError as error:
        raise CheckError(
            f"len({name}) is {n}, but {name}[{index}] raised IndexError ({error})",
            where="__len__ and __getitem__ must agree: __len__ counts exactly the samples __getitem__ can return",
            mistake="__len__ counts one too many" if index == n - 1 else None) from None
    except NotImplementedError as error:
        # Name the function that is still a stub: __getitem__ itself, or one it calls (fix_length).
        tb = error.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        stub = tb.tb_frame.f_code.co_name
        stub = f"{name}.__getitem__" if stub == "__getitem__" else stub
        raise CheckError(f"{name}[{index}] stopped at NotImplementedError: {stub} is not written yet",
                         where=f"replace `raise NotImplementedError()` in {stub} with your code") from None
    except CheckError:
        raise
    except Exception as error:
        raise CheckError(f"{name}[{index}] raised {type(error).__name__}: {error}",
                         where="look at your __getitem__ (the lines of your code it went through are shown below)"
                         ) from error


def _not_converted(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray, float, int, np.generic)) and not isinstance(value, bool)


# ---------------------------------------------------------------- PointsDataset

def _squeezed(dataset: Any, features: list, labels: list) -> str | None:
    """What squeeze() dropped, when ``dataset`` holds the features (or labels) as a tensor whose dimensions of size
    1 are gone (one sample, or one feature per sample), or None."""
    n, d = len(labels), len(features[0]) if features else 0
    for what, full in (("features", torch.tensor(features, dtype=torch.float64)),
                       ("labels", torch.tensor(labels, dtype=torch.float64))):
        if 1 not in full.shape:
            continue
        for name, value in getattr(dataset, "__dict__", {}).items():
            if isinstance(value, torch.Tensor) and value.shape == full.squeeze().shape and value.numel() == full.numel() \
                    and torch.equal(value.detach().double().flatten(), full.flatten()):
                dropped = ("N (one sample) and D (one feature)" if n == 1 and d == 1 and what == "features" else
                           "N (one sample)" if n == 1 else "D (one feature per sample)")
                return (f"self.{name} holds the {what} with shape {list(value.shape)}, not {list(full.shape)}: "
                        f"squeeze() drops every dimension of size 1, here {dropped}. Convert without squeeze(): "
                        "features stay [N, D] and labels [N] whatever N and D are")
    return None


def _expect_own_data(cls: type, dataset: Any, n: int, n_features: int) -> None:
    """A second PointsDataset, of other data, built after ``dataset``, leaves ``dataset`` as it was."""
    before_n = _length(dataset, "dataset")
    before = _item(dataset, 0, before_n, "dataset") if before_n > 0 else None
    m = n + 1
    call(cls, [[-9.5] * n_features for _ in range(m)], [7] * m)
    after_n = _length(dataset, "dataset")
    after = _item(dataset, 0, after_n, "dataset") if after_n > 0 else None
    changed = (f"len(dataset) went from {before_n} to {after_n}" if after_n != before_n else
               f"dataset[0] went from {describe(before)} to {describe(after)}" if not same_value(before, after) else
               None)
    if changed is not None:
        raise CheckError(f"building a second PointsDataset (of {m} other samples) changed the first one, of {n} "
                         f"samples: {changed}; expected each dataset to keep its own data",
                         where="look at where __init__ stores the tensors: on self, or on the class "
                               "(PointsDataset.x = ..., or a list defined in the class body)",
                         mistake="state kept between instances: data stored on the class is shared by every "
                                 "dataset, so the newest one's data replaces (or joins) every other's; store it on "
                                 "self (self.features = ..., self.labels = ...)")


def check_points_dataset(cls: type, inputs: Sequence[tuple[list, list]] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        ([[0.5, 1.0], [2.0, -1.0], [3.5, 0.0]], [0, 1, 1]),
        ([[1], [4], [7], [10], [13]], [2, 0, 1, 0, 2]),  # one feature per sample: [N, 1], which squeeze() drops
    ]
    _expect_class(cls, "PointsDataset")
    checks = 0
    for features, labels in inputs:
        given_features, given_labels = [list(row) for row in features], list(labels)
        dataset = call(cls, given_features, given_labels)
        try:
            checks += _check_points(cls, dataset, features, labels, given_features, given_labels)
        except CheckError as error:
            squeezed = _squeezed(dataset, features, labels)
            if squeezed is None or not any(word in error.symptom for word in ("shape", "len(", "raised")):
                raise
            raise CheckError(error.symptom, where="look at the squeeze() in __init__",
                             mistake=squeezed) from error.__cause__
    passed("PointsDataset", checks)


def _check_points(cls: type, dataset: Any, features: list, labels: list, given_features: list,
                  given_labels: list) -> int:
    """The checks of one input of check_points_dataset; the number of samples checked."""
    checks = 0
    expected = ref.PointsDataset(features, labels)
    # The caller's lists change after __init__: a dataset that converted them once does not notice;
    # one that kept the lists (and converts in __getitem__, on every read) does.
    given_features[0][0], given_labels[0] = 1000.0, 1000
    n, n_features = len(expected), len(features[0])
    got_n = _length(dataset, "dataset")
    if got_n != n:
        raise CheckError(f"len(dataset) is {got_n} for {n} samples of {n_features} features; expected {n}",
                         where="look at what __len__ counts: samples, which is how many indices __getitem__ "
                               "accepts",
                         mistake=("__len__ counts one too many, so dataset[n] would raise IndexError"
                                  if got_n == n + 1 else
                                  "__len__ counts one too few, so the last sample is never read"
                                  if got_n == n - 1 and got_n != n_features else
                                  "that is the number of features per sample: count samples (the labels)"
                                  if got_n == n_features and got_n != n - 1 else
                                  f"that is both the number of features per sample and one less than the number "
                                  f"of samples: count the samples (the labels), all {n} of them"
                                  if got_n == n_features else None))
    for i in range(n):
        item = _item(dataset, i, n, "dataset")
        expect(isinstance(item, (tuple, list)) and len(item) == 2,
               f"dataset[{i}] is {describe(item)}; expected a pair (features, label)",
               where="look at what __getitem__ returns")
        x, y = item
        if i == 0 and ((isinstance(x, torch.Tensor) and x.numel() > 0 and x.flatten()[0].item() == 1000.0)
                       or (isinstance(y, torch.Tensor) and y.numel() == 1 and y.item() == 1000)):
            raise CheckError("dataset[0] changed when the caller changed the lists after creating the "
                             "dataset; expected the dataset to be independent of the caller's lists",
                             where="look at when the lists become tensors",
                             mistake="your dataset keeps the Python lists and converts them in __getitem__, "
                                     "again on every read; convert both lists to tensors once, in __init__")
        if isinstance(x, torch.Tensor) and _not_converted(y):
            kept = i == 0 and y == 1000  # the caller's list, changed after __init__, shows through
            raise CheckError(f"dataset[{i}] holds a Tensor (the features) and a Python {type(y).__name__} (the label, "
                             f"{y!r}); expected two tensors, the label a 0-d int64 tensor",
                             where="look at how the label reaches __getitem__'s return: indexing a tensor gives "
                                   "a 0-d tensor, while .item(), int() or indexing a Python list give a number",
                             mistake="your dataset keeps the caller's list of labels and indexes it; convert the "
                                     "labels to a tensor once, in __init__" if kept else
                             "return the label as the tensor indexing gives, without turning it into a Python "
                             "number (no .item() or int()), and make sure the labels were converted to a tensor "
                             "in __init__")
        if _not_converted(x) or _not_converted(y):
            raise CheckError(f"dataset[{i}] holds a {type(x).__name__} and a {type(y).__name__}; expected two "
                             "tensors", where="look at __init__: where the lists become tensors",
                             mistake="you forgot to convert the lists to tensors; do it once in __init__, with "
                                     "the dtype the task names")
        want_x, want_y = expected[i]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dim() == 0 and y.dim() == 1:
            raise CheckError(f"dataset[{i}] is (a 0-d tensor, a tensor of shape {list(y.shape)}); expected "
                             "(features, label)", where="look at the order of the pair __getitem__ returns",
                             mistake="dataset[i] is (label, features); return (features, label)")
        expect_tensor(x, want_x, what=f"dataset[{i}][0], the features",
                      mistakes=[Mistake("the features are int64 because the lists held integers: "
                                        "convert with torch.tensor(features, dtype=torch.float32), "
                                        "since layers compute in float32",
                                        lambda: torch.tensor(features)[i],
                                        where="look at how the features are turned into a tensor (its dtype)"),
                                _slice_mistake(want_x, "features")])
        expect_tensor(y, want_y, what=f"dataset[{i}][1], the label",
                      mistakes=[Mistake("labels are class indices and must be int64 (torch.long), which "
                                        "is what CrossEntropyLoss expects", lambda: want_y.float(),
                                        where="look at how the label is turned into a tensor (its dtype)"),
                                _slice_mistake(want_y, "labels")])
        checks += 1
    _expect_own_data(cls, dataset, n, n_features)
    return checks


def _slice_mistake(want: torch.Tensor, name: str) -> Mistake:
    """Row i of ``name`` returned as a one-row slice, t[i:i + 1]: the right values with a dimension of size 1 more."""
    return Mistake(f"that is a one-row slice of the {name} ([1, ...]): a slice such as {name}[i:i + 1] keeps the "
                   f"dimension it slices, even for one row; index with {name}[i], which drops it",
                   lambda: want.unsqueeze(0), where="look at how __getitem__ indexes the tensors")


# ---------------------------------------------------------------- uninitialised memory

@contextlib.contextmanager
def _filled_empty() -> Iterator[None]:
    """While the learner's function runs, memory torch.empty (new_empty, resize_, empty_like) hands out is filled
    with NaN (floats) or the largest integer, as PyTorch's deterministic mode does, instead of whatever was there
    (which may happen to be zeros): an answer that never writes its padding fails every time, and recognisably."""
    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), \
        torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _unwritten(part: torch.Tensor) -> bool:
    """Whether ``part`` holds the value _filled_empty gives memory nobody wrote."""
    if part.numel() == 0:
        return False
    if part.is_floating_point():
        return bool(part.isnan().any())
    if part.dtype in (torch.bool, torch.uint8) or part.is_complex():
        return False
    return bool((part == torch.iinfo(part.dtype).max).any())


_UNWRITTEN = ("the padding holds values nobody wrote there (NaN, or the largest integer, is what the check gives "
              "unwritten memory): torch.empty, new_empty and resize_ give memory as it was left, not zeros; make "
              "the padding with zeros (torch.zeros, new_zeros, F.pad)")


def _unwritten_mistake(regions: Callable[[torch.Tensor], list[torch.Tensor]]) -> Mistake:
    """The padding holds values nobody wrote (torch.empty, new_empty, resize_)."""
    return Mistake(_UNWRITTEN, matches=lambda t: isinstance(t, torch.Tensor) and any(_unwritten(p) for p in regions(t)),
                   where="look at how the padding's memory is created")


# ---------------------------------------------------------------- fix_length

def _padded_both_sides(got: Any, signal: torch.Tensor, length: int) -> bool:
    """``got`` is ``signal`` with zeros before and after it (at least one on each side), ``length`` in all."""
    n = len(signal)
    return isinstance(got, torch.Tensor) and got.shape == (length,) and any(
        torch.equal(got, torch.nn.functional.pad(signal, (before, length - n - before)).to(got.dtype))
        for before in range(1, length - n))


def _cropped_inside(got: Any, signal: torch.Tensor, length: int) -> bool:
    """``got`` is a window of ``length`` samples of ``signal`` that neither starts at its start nor ends at its end."""
    return isinstance(got, torch.Tensor) and got.shape == (length,) and length > 0 and any(
        torch.equal(got, signal[start:start + length].to(got.dtype)) for start in range(1, len(signal) - length))


def check_fix_length(fn: Callable[[torch.Tensor, int], torch.Tensor],
                     inputs: Sequence[tuple[torch.Tensor, int]] | None = None, part: str = "both") -> None:
    """``part``: "crop" tests only signals at least ``length`` long, "pad" only shorter ones."""
    _check_part(part, ("both", "crop", "pad"))
    inputs = inputs if inputs is not None else [
        (torch.arange(1.0, 11.0), 6),
        (torch.randn(20, generator=_gen(0)), 20),
        (torch.tensor([1.0, 2.0, 3.0]), 5),
        (torch.randn(7, generator=_gen(1)), 12),
        # "The result keeps the signal's dtype": padding int64 and float64 signals shows zeros of another dtype.
        (torch.tensor([4, -2, 7]), 6),
        (torch.randn(2, dtype=torch.float64, generator=_gen(2)), 5),
    ]
    chosen = [(s, n) for s, n in inputs
              if part == "both" or (part == "crop") == (len(s) >= n)]
    expect(chosen, f"no inputs to test for part={part!r}",
           where="look at the inputs the check was called with (its part= argument)")
    for signal, length in chosen:
        try:
            with _filled_empty():
                got = call(fn, signal, length)
        except CheckError as error:
            # resize_ on the caller's signal: PyTorch refuses to grow a storage it does not own
            if not (isinstance(error.__cause__, RuntimeError) and "resize" in str(error.__cause__).lower()):
                raise
            raise CheckError(error.symptom, where="look at the resize_ call: it works on the tensor it is called on",
                             mistake="resize_ changes the caller's tensor in place (here its memory cannot grow, "
                                     "hence the error): the signal belongs to the caller, who still uses it. Build a "
                                     "new tensor instead: F.pad(signal, (0, length - len(signal))), or torch.cat "
                                     "with zeros") from error.__cause__
        n = len(signal)
        expect_tensor(got, ref.fix_length(signal, length), what=f"fix_length(signal of {n} samples, {length})",
                      given=signal if n == length else None,
                      mistakes=[_unwritten_mistake(lambda t: [t[n:]] if t.dim() == 1 else []),
                                Mistake(f"your result is empty for a signal that already has length={length} "
                                        "samples: a crop written signal[:-(n - length)] ends at -0 when n == length, "
                                        "and -0 is 0, so it is signal[:0], empty. Crop with signal[:length], which "
                                        "keeps the whole signal when nothing is to be cropped",
                                        matches=lambda t: isinstance(t, torch.Tensor) and t.shape == (0,)
                                        and n == length > 0,
                                        where="look at the slice you crop with, for a signal of exactly length "
                                              "samples"),
                                Mistake("you kept the last samples; crop from the start, signal[:length]",
                                        lambda: signal[-length:] if n > length else None,
                                        where="look at which end of the signal you keep when it is too long"),
                                Mistake("you padded at the start; pad with zeros at the end (right side), "
                                        "e.g. F.pad(signal, (0, length - len(signal)))",
                                        lambda: torch.nn.functional.pad(signal, (length - n, 0)) if n < length else None,
                                        where="look at which side the zeros go when the signal is too short"),
                                Mistake("you put zeros on both sides of the signal (centred it); the task pads "
                                        "with zeros at the end only, so the signal starts at sample 0",
                                        matches=lambda t: _padded_both_sides(t, signal, length),
                                        where="look at which side the zeros go when the signal is too short"),
                                Mistake("you kept samples from the middle of the signal; crop from the start, "
                                        "signal[:length]",
                                        matches=lambda t: _cropped_inside(t, signal, length),
                                        where="look at which samples you keep when the signal is too long"),
                                Mistake("you filled the missing samples by repeating the signal from its start; "
                                        "the task pads with zeros",
                                        lambda: signal.repeat(length // n + 1)[:length] if 0 < n < length else None,
                                        where="look at what fills the samples after the end of a short signal"),
                                Mistake("you filled the missing samples with the signal's last value (replicate "
                                        "padding); the task pads with zeros",
                                        lambda: torch.cat([signal, signal[-1:].repeat(length - n)])
                                        if 0 < n < length and signal[-1] != 0 else None,
                                        where="look at what fills the samples after the end of a short signal"),
                                Mistake("your last sample is 0 where the signal has a value: you cropped one sample "
                                        "too many (signal[:length - 1]) and a zero took its place; keep "
                                        "signal[:length], the first length samples",
                                        lambda: torch.cat([signal[:length - 1], signal.new_zeros(1)])
                                        if n >= length > 0 and signal[length - 1] != 0 else None,
                                        where="look at the end of the slice you crop with"),
                                Mistake(f"the signal came back unchanged ({n} samples); it must have exactly "
                                        f"{length}", lambda: signal if n != length else None,
                                        where="look at the branch for a signal whose length is not the wanted one"),
                                Mistake(f"your result is {torch.get_default_dtype()}, PyTorch's default dtype "
                                        "(what torch.zeros and torch.empty make without dtype=, and what .float() "
                                        f"converts to), not the signal's {signal.dtype}: make the zeros you pad "
                                        "with, or the tensor you fill, with dtype=signal.dtype (signal.new_zeros "
                                        "does that), or use F.pad, and leave the result's dtype as it is",
                                        matches=lambda t: isinstance(t, torch.Tensor)
                                        and t.dtype == torch.get_default_dtype() != signal.dtype
                                        and t.shape == (length,) and torch.equal(t, ref.fix_length(signal, length)
                                                                                 .to(t.dtype)),
                                        where="look at how your result is made: the dtype= of a new tensor, or "
                                              "a conversion such as .float()"),
                                Mistake(f"the zeros you appended are {torch.get_default_dtype()} (the default of "
                                        f"torch.zeros), so the {signal.dtype} signal was promoted: make the zeros "
                                        "with the signal's dtype (dtype=signal.dtype), or use F.pad",
                                        matches=lambda t: isinstance(t, torch.Tensor) and n < length
                                        and t.dtype != signal.dtype and t.shape == (length,)
                                        and t.dtype == torch.promote_types(signal.dtype,
                                                                           torch.get_default_dtype()),
                                        where="look at the dtype of the zeros you pad with"),
                                Mistake(f"your result has {n + length} samples: you added length={length} zeros "
                                        f"to the {n} samples instead of the {length - n} that are missing "
                                        "(length - len(signal))",
                                        matches=lambda t: isinstance(t, torch.Tensor) and 0 < n < length
                                        and t.shape == (n + length,),
                                        where="look at how many zeros you add"),
                                Mistake(f"your result has {length - 1} samples, one fewer than length={length}",
                                        matches=lambda t: isinstance(t, torch.Tensor) and t.shape == (length - 1,),
                                        where="look at how many zeros you add (length - len(signal)) and where your "
                                              "slice ends (signal[:length])"),
                                Mistake(f"your result has {length + 1} samples, one more than length={length}",
                                        matches=lambda t: isinstance(t, torch.Tensor) and t.shape == (length + 1,),
                                        where="look at how many zeros you add (length - len(signal)) and where your "
                                              "slice ends (signal[:length])")])
    passed(f"fix_length ({part})" if part != "both" else "fix_length", len(chosen))


# ---------------------------------------------------------------- ClipDataset

def _default_clips() -> list[ClipSpec]:
    rng = np.random.default_rng(3)
    first = {
        "low_000.npy": rng.standard_normal(30).astype(np.float32),
        "high_001.npy": rng.standard_normal(80).astype(np.float32),
        "low_002.npy": rng.standard_normal(50).astype(np.float32),
        "high_003.npy": rng.standard_normal(12).astype(np.float32),
        "low_004_take_2.npy": rng.standard_normal(61).astype(np.float32),  # <anything> may hold underscores
    }
    second = {  # float64 on disk, three classes, names that sort differently from the write order
        "dog_10.npy": rng.standard_normal(25),
        "bobcat_02.npy": rng.standard_normal(9),  # a class name that holds another ("cat")
        "cat_07_dog.npy": rng.standard_normal(40),  # <anything> may hold another class's name
    }
    return [(first, 50, ["low", "high"]), (second, 20, ["cat", "dog", "bobcat"])]


def _write_clips(folder: Path, clips: dict[str, np.ndarray]) -> None:
    """Write the clips in reverse name order, with file times that follow that order,
    plus three files that are not clips (real folders have them too): the last a backup of a clip, whose name
    holds ".npy" without ending in it."""
    for k, (name, array) in enumerate(sorted(clips.items(), reverse=True)):
        np.save(folder / name, array)
        os.utime(folder / name, (1_700_000_000 + k, 1_700_000_000 + k))
    (folder / "README.txt").write_text("these are not clips\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    name, array = sorted(clips.items())[0]
    with open(folder / f"{name}.bak", "wb") as backup:  # a file object: np.save adds no .npy to its name
        np.save(backup, array)


def _expect_same_len(dataset: Any, before: int, other: str) -> None:
    """len(dataset) is still ``before`` now that another ClipDataset (``other``) was built."""
    after = _length(dataset, "dataset")
    expect(after == before,
           f"len(dataset) was {before}; after another ClipDataset was built ({other}), it is {after}; expected a "
           "dataset's len to change only with its own folder",
           where="look at where __init__ keeps the file list: on self, or on the class (a list in the class body)",
           mistake="state kept between instances: a file list that lives on the class (files = [] in the class "
                   "body, or ClipDataset.files = ...) is shared by every ClipDataset, so each __init__ changes "
                   "every dataset's; make the list in __init__ and store it on self (self.files = sorted(...))")


def check_clip_dataset(cls: type, inputs: Sequence[ClipSpec] | None = None, part: str = "both") -> None:
    """``part``: "len" tests __len__ and that every index returns (tensor, int);
    "items" also compares every clip and label with the answer key."""
    _check_part(part, ("both", "len", "items"))
    _expect_class(cls, "ClipDataset")
    inputs = inputs if inputs is not None else _default_clips()
    checks = 0
    for clips, length, classes in inputs:
        with tempfile.TemporaryDirectory(prefix="check-clips-") as tmp:
            folder = Path(tmp)
            _write_clips(folder, clips)
            with substitute(cls, fix_length=ref.fix_length):
                dataset = call(cls, folder, length, list(classes))
            # Rewrite the first clip after __init__: __getitem__ must load from disk, so it sees the new one.
            first = sorted(folder.glob("*.npy"))[0]
            stale = ref.ClipDataset(folder, length, classes)[0][0]
            np.save(first, -np.load(first))
            expected = ref.ClipDataset(folder, length, classes)
            n = len(expected)
            got_n = _length(dataset, "dataset")
            if got_n != n:
                # a second dataset of the same folder: a list kept on the class grows with every dataset built
                with substitute(cls, fix_length=ref.fix_length):
                    call(cls, folder, length, list(classes))
                _expect_same_len(dataset, got_n, f"of the same folder, {n} clips")
                every = len(os.listdir(folder))
                holding = sorted(name for name in os.listdir(folder) if ".npy" in name and not name.endswith(".npy"))
                raise CheckError(f"len(dataset) is {got_n} for a folder of {every} files, {n} of them .npy clips; "
                                 f"expected {n}", where="look at which files __init__ keeps and what __len__ counts",
                                 mistake=(f"you counted every file in the folder ({every}), but only the {n} .npy "
                                          "files are clips" if got_n == every else
                                          f"the folder also holds {', '.join(holding)}: its name contains \".npy\" "
                                          "but does not end in it, so it is not a .npy file; keep the names that end "
                                          "in .npy" if holding and got_n == n + len(holding) else None))
            names = [path.name for path in expected.files]
            items = []
            with substitute(cls, fix_length=ref.fix_length):
                for i in range(n):
                    try:
                        items.append(_item(dataset, i, n, "dataset"))
                    except CheckError as error:
                        cause = error.__cause__
                        if "_" in Path(names[i]).stem.partition("_")[2] and isinstance(cause, (ValueError, KeyError)):
                            raise CheckError(f"dataset[{i}], the file {names[i]}, raised {type(cause).__name__}: "
                                             f"{cause}; expected a clip and the label of its class "
                                             f"'{names[i].partition('_')[0]}'",
                                             where="look at how the class name is taken from the file name: the "
                                                   "task's <class name>_<anything>.npy allows '_' in <anything>",
                                             mistake="the class name is the part before the first '_'; the rest "
                                                     "may hold more underscores (str.partition, or split('_')[0])"
                                             ) from cause
                        raise
            wanted = [expected[i] for i in range(n)]
            for i, item in enumerate(items):
                expect(isinstance(item, (tuple, list)) and len(item) == 2,
                       f"dataset[{i}] is {describe(item)}; expected a pair (clip, label)",
                       where="look at what __getitem__ returns")
                clip, label = item
                if i == 0 and isinstance(clip, torch.Tensor) and clip.shape == stale.shape \
                        and not torch.equal(stale, expected[0][0]) and torch.equal(clip.to(stale.dtype), stale):
                    raise CheckError(f"dataset[0] is {names[0]} as it was when the dataset was created, not as it is "
                                     "on disk now; expected the clip to be read when dataset[0] asks for it",
                                     where="look at where np.load runs",
                                     mistake="you loaded the clips in __init__; keep only the file list there and "
                                             "load clip i in __getitem__, so a dataset larger than memory works")
                if isinstance(clip, np.ndarray):
                    raise CheckError(f"dataset[{i}][0] is a NumPy array; expected a float32 tensor",
                                     where="look at what happens to the array np.load returns",
                                     mistake="you forgot to convert it to a tensor (torch.from_numpy)")
                expect(isinstance(clip, torch.Tensor), f"dataset[{i}][0] is {describe(clip)}; expected a tensor",
                       where="look at what __getitem__ returns")
                if isinstance(label, str):
                    raise CheckError(f"dataset[{i}][1] is the string {label!r}; expected its class index (an int)",
                                     where="look at how the label is computed from the file name",
                                     mistake="you returned the class name; return its index in classes")
                # task: "`label`, the int index of the file's class name" (a tensor or a NumPy integer is not one)
                if isinstance(label, np.integer) or (isinstance(label, torch.Tensor) and label.numel() == 1
                                                     and not label.is_floating_point()):
                    raise CheckError(f"dataset[{i}][1] is {describe(label)}; expected the class index as a Python int",
                                     where="look at the type of the label __getitem__ returns",
                                     mistake="the task asks for an int: .item() (or int(...)) turns a one-element "
                                             "tensor or a NumPy integer into one; list.index already returns an int")
                expect(isinstance(label, int) and not isinstance(label, bool),
                       f"dataset[{i}][1] is {describe(label)}; expected the class index (an int)",
                       where="look at how the label is computed from the file name")
            # a dataset of another folder, built once this one's items were read: a file list kept on the class
            # (a list in the class body, or ClipDataset.files = ...) changes every dataset's
            with tempfile.TemporaryDirectory(prefix="check-clips-other-") as other:
                np.save(Path(other) / f"{classes[0]}_other.npy", np.zeros(3, dtype=np.float32))
                with substitute(cls, fix_length=ref.fix_length):
                    call(cls, Path(other), length, list(classes))
            _expect_same_len(dataset, n, "of another folder, 1 clip")
            if part == "len":
                checks += 1
                continue
            for i, ((clip, label), (want_clip, want_label)) in enumerate(zip(items, wanted)):
                others = [j for j, (other, other_label) in enumerate(wanted)
                          if j != i and other.shape == clip.shape and other_label == label
                          and torch.allclose(other, clip.to(other.dtype))]
                if others and not (clip.shape == want_clip.shape and torch.allclose(want_clip, clip.to(want_clip.dtype))):
                    raise CheckError(f"dataset[{i}] is the clip from {names[others[0]]}; expected {names[i]}, file "
                                     f"{i} in the sorted order of the names",
                                     where="look at the order in which __init__ keeps the files",
                                     mistake="sort the file names, so that an index means the same file on every "
                                             "machine (folder listings come in no fixed order)")
                raw = torch.from_numpy(np.load(expected.files[i]))
                expect_tensor(clip, want_clip, what=f"dataset[{i}][0], the clip from {names[i]} ({len(raw)} samples)",
                              mistakes=[Mistake(f"every clip must have exactly {length} samples: crop or pad it "
                                                "with fix_length", lambda: raw.float() if len(raw) != length else None,
                                                where="look at where each clip gets its length"),
                                        Mistake("the file holds float64; convert the clip to float32 with .float()",
                                                lambda: want_clip.double(),
                                                where="look at the clip's dtype after loading the file"),
                                        Mistake("you kept the last samples; crop from the start",
                                                lambda: raw[-length:].float() if len(raw) > length else None,
                                                where="look at which end of the clip you keep when it is too long"),
                                        Mistake("you padded at the start; pad at the end",
                                                lambda: torch.nn.functional.pad(raw, (length - len(raw), 0)).float()
                                                if len(raw) < length else None,
                                                where="look at which side the zeros go when the clip is too short")])
                stem = Path(names[i]).stem
                inside = [c for c in classes if c in stem and c != stem.partition("_")[0]]
                expect(label == want_label,
                       f"dataset[{i}] ({names[i]}) has label {label}, expected {want_label}: the label is the index "
                       f"of the file name's class (the part before '_') in classes={list(classes)}",
                       where="look at how the label is computed from the file name",
                       mistake=(f"the name {names[i]!r} also holds {inside[0]!r} where it is not the class: compare "
                                "the whole part before the first '_' with each class name, not whether a class name "
                                "occurs in the file name") if inside and 0 <= label < len(classes)
                       and classes[label] in inside else None)
            checks += 1
    passed(f"ClipDataset ({part})" if part != "both" else "ClipDataset", checks)


# ---------------------------------------------------------------- padding collate

def _default_batches() -> list[list[torch.Tensor]]:
    return [
        [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0]), torch.tensor([5.0, 6.0])],
        [torch.tensor([7, 3, 9, 2]), torch.tensor([5, 1]), torch.tensor([8, 8, 8, 8, 8, 1])],
        [torch.tensor([0.5, 0.0]), torch.tensor([0.0, 2.0, 0.0, 1.5])],  # data may hold zeros, even at the end
    ]


def _left_padded(batch: list[torch.Tensor]) -> torch.Tensor:
    return pad_sequence(batch, batch_first=True, padding_side="left")


def _pair(got: Any, name: str, size: int = 2) -> tuple:
    parts = "(padded, lengths)" if size == 2 else "(padded, lengths, labels)"
    expect(isinstance(got, (tuple, list)) and len(got) == size, f"{name} should return {parts}, not {describe(got)}",
           where=f"look at your return statement: it returns {parts}, in that order")
    return tuple(got)


def _expect_order(name: str, got: tuple, want: tuple, parts: Sequence[str]) -> None:
    """Name a result whose parts are all right but returned in another order (the task fixes the order)."""
    if all(same_value(g, w) for g, w in zip(got, want)):
        return
    for order in itertools.permutations(range(len(want))):
        if list(order) != list(range(len(want))) and all(same_value(got[i], want[j]) for i, j in enumerate(order)):
            returned = ", ".join(parts[j] for j in order)
            raise CheckError(f"{name} returned ({returned}): each part is right, but in another order; expected "
                             f"({', '.join(parts)})", where="look at the order of the parts in your return statement",
                             mistake=f"return them in the task's order, ({', '.join(parts)})")


def _padded_mistakes(batch: list[torch.Tensor], want: torch.Tensor) -> list[Mistake]:
    longest = want.shape[1]

    def prefix_matches(t: Any) -> bool:
        return (isinstance(t, torch.Tensor) and t.dim() == want.dim() and t.shape[0] == len(batch)
                and t.shape[1] >= longest and torch.equal(t[:, :longest].to(want.dtype), want))

    first = len(batch[0]) if batch else 0
    return [
        Mistake(f"the padded batch is as wide as the first sequence ({first}), not as the longest ({longest}): "
                "the sequences of a batch come in any order; take the width from all of them, "
                "max(len(s) for s in batch)",
                matches=lambda t: isinstance(t, torch.Tensor) and first < longest and t.dim() == want.dim()
                and t.shape[0] == len(batch) and t.shape[1] == first
                and torch.equal(t.to(want.dtype), want[:, :first]),
                where="look at where the number of columns comes from"),
        Mistake("you padded on the left; put the zeros at the end of each sequence (right side)",
                lambda: _left_padded(batch),
                where="look at which end of each row the sequence is copied to"),
        Mistake("your padded batch is time-first ([longest, batch]: one column per sequence) instead of one row "
                "per sequence; pad_sequence does that by default: pass batch_first=True", lambda: pad_sequence(batch),
                where="look at the pad_sequence call's arguments, or at which dim of your zeros runs over the "
                      "batch"),
        _unwritten_mistake(lambda t: [row[len(s):] for row, s in zip(t, batch)]
                           if t.dim() == want.dim() and t.shape[0] == len(batch) else []),
        Mistake(f"off by one: this batch's longest sequence has {longest} elements, so the padded batch "
                f"needs exactly {longest} columns, no more, no fewer",
                matches=lambda t: isinstance(t, torch.Tensor) and t.dim() == want.dim()
                and t.shape[0] == len(batch) and abs(t.shape[1] - longest) == 1,
                where="look at how you compute the number of columns of the padded batch"),
        Mistake(f"you padded to a fixed length instead of to this batch's longest sequence ({longest}): "
                "compute the longest length from the batch itself",
                matches=lambda t: prefix_matches(t) and t.shape[1] > longest + 1,
                where="look at where the number of columns comes from: this batch, or a constant?"),
        Mistake(f"the padded batch has dtype {torch.float32} but the sequences are {want.dtype}: create the "
                "zeros with dtype=batch[0].dtype", lambda: want.float() if want.dtype != torch.float32 else None,
                where="look at how the padded tensor is created (its dtype=)"),
        Mistake("the padding value must be 0", matches=lambda t: isinstance(t, torch.Tensor) and t.shape == want.shape
                and not torch.equal(t, want) and all(torch.equal(t[i, :len(s)], want[i, :len(s)])
                                                      for i, s in enumerate(batch)),
                where="look at how the padded tensor is created: the value it starts with"),
    ]


def _lengths_mistakes(lengths: list[int], longest: int, numels: list[int] | None = None,
                      padded: torch.Tensor | None = None, last_dims: list[int] | None = None) -> list[Mistake]:
    # Time steps that hold a non-zero value: what counting "real" entries of the padded batch gives.
    nonzero = None if padded is None else (padded != 0).flatten(2).any(dim=2).sum(dim=1) if padded.dim() > 2 \
        else (padded != 0).sum(dim=1)
    mistakes = [
        Mistake("you counted the non-zero values of each padded row, but a sequence may hold zeros itself (this "
                "batch's do): take each sequence's length before padding, len(sequence)",
                lambda: nonzero if nonzero is not None and nonzero.tolist() != lengths else _not_this(),
                where="look at where the lengths come from"),
        Mistake("lengths should be a tensor: torch.tensor([...]) (int64)",
                matches=lambda t: isinstance(t, (list, tuple)) and list(t) == lengths,
                where="look at how you build the lengths you return"),
        Mistake(f"those are the lengths after padding (all {longest}): record each sequence's own length",
                lambda: torch.full((len(lengths),), longest) if len(set(lengths)) > 1 else None,
                where="look at where the lengths come from: each sequence before padding"),
    ]
    if last_dims is not None and last_dims != lengths:
        mistakes.append(Mistake("those are the sizes of each sequence's last dimension (its features per time "
                                "step); a sequence is [time steps, features], so its length is its first size, "
                                "sequence.shape[0] or len(sequence)", lambda: torch.tensor(last_dims),
                                where="look at which dimension of one sequence you measure"))
    if numels is not None and numels != lengths:
        mistakes.append(Mistake("you counted elements (numel); a sequence's length is its number of time steps, "
                                "len(sequence) or sequence.shape[0]", lambda: torch.tensor(numels),
                                where="look at how you measure one sequence's length"))
    return mistakes


def check_pad_collate(fn: Callable[[list[torch.Tensor]], tuple[torch.Tensor, torch.Tensor]],
                      inputs: Sequence[list[torch.Tensor]] | None = None, part: str = "both") -> None:
    """``part``: "padded" tests only the padded batch, "lengths" only the lengths."""
    _check_part(part, ("both", "padded", "lengths"))
    inputs = inputs if inputs is not None else _default_batches()
    for batch in inputs:
        want_padded, want_lengths = ref.pad_collate(batch)
        shown = [len(s) for s in batch]
        with _filled_empty():
            padded, lengths = _pair(call(fn, batch), "pad_collate")
        _expect_order("pad_collate", (padded, lengths), (want_padded, want_lengths), ("padded", "lengths"))
        if part in ("both", "padded"):
            expect_tensor(padded, want_padded, what=f"the padded batch for sequences of lengths {shown}",
                          mistakes=[*_padded_mistakes(batch, want_padded),
                                    Mistake("your rows are the sequences sorted by length, longest first; keep the "
                                            "batch's order (row i is sequence i, as the lengths are): sorting is "
                                            "only for pack_padded_sequence with enforce_sorted=True",
                                            matches=lambda t: _sorted_longest_first(t, batch),
                                            where="look at the order in which the sequences go into the batch")])
        if part in ("both", "lengths"):
            expect_tensor(lengths, want_lengths, what=f"the lengths returned for sequences of lengths {shown}",
                          mistakes=_lengths_mistakes(shown, want_padded.shape[1], padded=want_padded))
    passed(f"pad_collate ({part})" if part != "both" else "pad_collate", len(inputs))


def _sorted_longest_first(got: Any, sequences: list[torch.Tensor]) -> bool:
    """``got`` is the padded batch of ``sequences`` sorted by length, longest first, where that order differs."""
    ordered = sorted(sequences, key=len, reverse=True)
    if not isinstance(got, torch.Tensor) or all(a is b for a, b in zip(ordered, sequences)):
        return False
    return any(got.shape == p.shape and torch.equal(got, p.to(got.dtype))
               for p in (pad_sequence(ordered, batch_first=True),
                         pad_sequence([sequences[i] for i in torch.argsort(torch.tensor([len(q) for q in sequences]),
                                                                             descending=True)], batch_first=True)))


def _explain_feature_padding(error: CheckError, sequences: list[torch.Tensor]) -> None:
    """Name F.pad(s, (0, k)) on [T, F] sequences: the pair pads the last dim (features), so stacking the results
    fails with sizes that show it, [T, F + longest - T]."""
    cause = error.__cause__
    if not (isinstance(cause, RuntimeError) and "stack expects each tensor to be equal size" in str(cause)):
        return
    longest = max(len(s) for s in sequences)
    padded_features = {(len(s), s.shape[1] + longest - len(s)) for s in sequences if s.dim() == 2}
    got = {tuple(int(v) for v in shape.split(", ")) for shape in re.findall(r"\[(\d+(?:, \d+)*)\]", str(cause))}
    if not got or not got <= padded_features:
        return
    raise CheckError(error.symptom, where="look at which dimension your padding extends",
                     mistake="F.pad's pairs start from the last dimension: (0, k) adds k features to each time step "
                             "of a [T, F] sequence, not k time steps. Pad the time steps with (0, 0, 0, k), or let "
                             "pad_sequence(..., batch_first=True) do it") from cause


def check_collate_sequences(fn: Callable[[list[tuple[torch.Tensor, int]]], tuple],
                            inputs: Sequence[list[tuple[torch.Tensor, int]]] | None = None) -> None:
    g = _gen(5)
    inputs = inputs if inputs is not None else [
        [(torch.tensor([1.0, 2.0, 3.0]), 0), (torch.tensor([4.0]), 2), (torch.tensor([5.0, 6.0]), 1)],
        [(torch.randn(4, 2, generator=g), 1), (torch.randn(6, 2, generator=g), 0), (torch.randn(2, 2, generator=g), 1)],
        [(torch.tensor([[0.5, 0.0], [0.0, 0.0]]), 2), (torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]), 0)],  # zeros
    ]
    for batch in inputs:
        sequences = [s for s, _ in batch]
        want_padded, want_lengths, want_labels = ref.collate_sequences(batch)
        shapes = [list(s.shape) for s in sequences]
        try:
            with _filled_empty():
                padded, lengths, labels = _pair(call(fn, batch), "collate_sequences", 3)
        except CheckError as error:
            _explain_feature_padding(error, sequences)
            raise
        _expect_order("collate_sequences", (padded, lengths, labels), (want_padded, want_lengths, want_labels),
                      ("padded", "lengths", "labels"))
        expect_tensor(padded, want_padded, what=f"the padded batch for sequences of shapes {shapes}",
                      mistakes=[Mistake("pad_sequence puts time first by default ([longest, batch, ...]); "
                                        "pass batch_first=True", lambda: pad_sequence(sequences),
                                        where="look at the pad_sequence call's arguments"),
                                Mistake(".T reverses every dimension of a tensor: on pad_sequence's time-first "
                                        "[longest, batch, features] it gives [features, batch, longest], not "
                                        "[batch, longest, features] (for 1-D sequences the two agree). Pass "
                                        "batch_first=True to pad_sequence (or swap only the first two dims, "
                                        "transpose(0, 1))",
                                        lambda: pad_sequence(sequences).permute(2, 1, 0)
                                        if want_padded.dim() == 3 else _not_this(),
                                        where="look at how the time-first result is turned into batch-first"),
                                *_padded_mistakes(sequences, want_padded),
                                Mistake("your rows are the sequences sorted by length, longest first; keep the "
                                        "batch's order (row i is sample i, as the labels are): sorting is only for "
                                        "pack_padded_sequence with enforce_sorted=True",
                                        matches=lambda t: _sorted_longest_first(t, sequences),
                                        where="look at the order in which the sequences go into the batch")])
        expect_tensor(lengths, want_lengths, what=f"the lengths for sequences of shapes {shapes}",
                      mistakes=_lengths_mistakes([len(s) for s in sequences], want_padded.shape[1],
                                                 [s.numel() for s in sequences], padded=want_padded,
                                                 last_dims=[s.shape[-1] for s in sequences]))
        label_list = [y for _, y in batch]
        expect_tensor(labels, want_labels, what=f"the labels {label_list}",
                      mistakes=[Mistake("the labels are still a tuple or list: you forgot to convert them "
                                        "to a tensor, torch.tensor(labels)",
                                        matches=lambda t: isinstance(t, (list, tuple)) and list(t) == label_list,
                                        where="look at what you return as the labels: a list, or a tensor?")])
    passed("collate_sequences", len(inputs))


# ---------------------------------------------------------------- mean_std

def _image_set(n: int, size: int, seed: int, channels: int = 1) -> TensorDataset:
    """Images in [0, 1] that get brighter with the index, so per-image and per-batch
    statistics differ clearly from those over all pixels."""
    g = _gen(seed)
    brightness = torch.linspace(0.1, 0.9, n).view(n, 1, 1, 1)
    images = (torch.rand(n, channels, size, size, generator=g) * brightness).clamp(0, 1)
    return TensorDataset(images, torch.randint(0, 10, (n,), generator=g))


def _sensor_set(n: int, size: int, seed: int) -> TensorDataset:
    """Raw sensor-like float32 images: readings around 1000 with a spread of about 0.3. sum(x**2) / n is then
    near 10**6, so totals kept in float32 (about 7 significant digits) lose the variance entirely. The readings
    drift upwards image by image (as a warming sensor's do), so batches differ in their means."""
    g = _gen(seed)
    drift = torch.linspace(0.0, 0.5, n).view(n, 1, 1, 1)
    images = 1000 + drift + torch.rand(n, 1, size, size, generator=g)
    return TensorDataset(images, torch.randint(0, 10, (n,), generator=g))


def _std_squares_in_float32(dataset: Dataset, batch_size: int) -> float:
    """The std from float64 totals of squares that were computed in float32 ((images * images).double())."""
    total = total_sq = 0.0
    count = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        total += images.double().sum().item()
        total_sq += (images * images).double().sum().item()
        count += images.numel()
    mean = total / count
    return math.sqrt(max(total_sq / count - mean ** 2, 0.0))


def _large_offset(images: torch.Tensor) -> bool:
    return float(images.abs().mean()) > 100 * float(images.std())


def _stats_mistakes(dataset: TensorDataset, batch_size: int, which: str, fetched: int | None = None) -> list[Mistake]:
    """What a wrong mean or std can come from; ``fetched``: how many images the learner's DataLoader gave."""
    images = dataset.tensors[0].double()
    batches = list(images.split(batch_size))
    pixels = images[0].numel()
    n, short = len(images), len(images) % batch_size
    unseen = [Mistake(f"your DataLoader gave {fetched} of the {n} images: the last, smaller batch of {short} was "
                      "never counted (drop_last=True drops it); go through every image"
                      if fetched == n - short and short else
                      f"your DataLoader gave {fetched} of the {n} images; go through every image",
                      matches=lambda _: fetched is not None and 0 < fetched < n,
                      where="look at the DataLoader you build and at your loop over it")]
    # n counted as batch_size images for every batch: the last, smaller batch counted as a full one
    full = len(batches) * batch_size * pixels
    full_mean = float(images.sum()) / full
    counted_full = [Mistake(f"that is what n = batch_size x batches x pixels gives: {len(batches)} batches of "
                            f"batch_size={batch_size}, but the last batch holds only {short} images, so n counts "
                            f"{len(batches) * batch_size - n} images that are not there; add each batch's own count "
                            "(images.numel())", lambda: value if short else _not_this(),
                            where="look at what your count n adds up per batch")
                    for value in ((full_mean if which == "mean" else
                                   math.sqrt(max(float(images.square().sum()) / full - full_mean ** 2, 0.0))),)]
    if which == "mean":
        return [*counted_full,
                Mistake("you averaged the per-batch means, but the last batch is smaller, so its pixels count "
                        "too much: add up sums and pixel counts over all batches, then divide once",
                        lambda: sum(b.mean().item() for b in batches) / len(batches),
                        where="look at how the batches' results are combined: per batch, or by running totals?"),
                Mistake(f"that is the mean times {pixels}, the number of pixels per image: you counted images "
                        "(len(images)), not pixels; n must count every pixel (images.numel())",
                        lambda: images.sum().item() / len(images) if pixels > 1 else _not_this(),
                        where="look at what your count n adds up per batch"),
                Mistake("that is the mean of the first batch only; go through the whole dataset",
                        lambda: batches[0].mean().item() if len(batches) > 1 else None,
                        where="look at your loop over the loader: does it run over every batch?"),
                *unseen]
    per_image = [torch.stack([img.std(correction=c) for img in images]).mean().item() for c in (0, 1)]
    per_batch = [sum(b.std(correction=c).item() for b in batches) / len(batches) for c in (0, 1)]
    # each batch's std weighted by its number of pixels: still misses how much the batches differ
    per_batch += [sum(b.std(correction=c).item() * b.numel() for b in batches) / images.numel() for c in (0, 1)]
    # the root of the mean per-image variance: misses how much images differ from each other
    per_image_rms = [images.flatten(1).var(dim=1, correction=c).mean().sqrt().item() for c in (0, 1)]
    per_pixel = [images.std(dim=0, correction=c).mean().item() for c in (0, 1)]
    within = sum(float((b - b.mean()).square().sum()) for b in batches)  # each pixel from its own batch's mean
    pooled = [math.sqrt(within / (images.numel() - c)) for c in (0, 1)]
    return [
        *unseen,
        *counted_full,
        *[Mistake("you measured each pixel's distance from its own batch's mean: that misses how much the batch "
                  "means differ from each other. Measure every pixel from the one mean of all pixels (a first pass "
                  "for the mean, or running sums of x and x**2)", (lambda v=v: v),
                  where="look at which mean each pixel's squared distance is taken from") for v in pooled
          if len(batches) > 1],
        *[Mistake("you computed a std per image and averaged them: that misses how much images differ from "
                  "each other. Compute one std over all pixels of all images", (lambda v=v: v),
                  where="look at which pixels each std is computed over") for v in per_image],
        *[Mistake("that is the square root of the mean of the per-image variances: each image's variance is "
                  "measured from its own mean, which misses how much images differ from each other. Compute one "
                  "std over all pixels of all images", (lambda v=v: v),
                  where="look at which pixels each variance is computed over") for v in per_image_rms],
        *[Mistake("you averaged per-batch stds (each measured from its own batch's mean, which misses how much "
                  "the batches differ); compute one std over all pixels (accumulate the sum of squares across "
                  "batches)", (lambda v=v: v),
                  where="look at how the batches' results are combined: per batch, or by running totals?")
          for v in per_batch if len(batches) > 1],
        *[Mistake("you took the std across images at each pixel position, then averaged: compute one std "
                  "over all pixels at once", (lambda v=v: v),
                  where="look at which pixels each std is computed over") for v in per_pixel],
        Mistake("that is the variance; the standard deviation is its square root",
                lambda: images.var(correction=0).item(),
                where="look at the last step, from the variance to the std"),
        Mistake("your std is 0: with n counting images instead of pixels, sum(x**2) / n - (sum(x) / n)**2 comes out "
                "negative here, and clamping it to 0 hides that; n must count every pixel (images.numel())",
                matches=lambda got: got == 0 and pixels > 1 and (images.square().sum() / len(images)
                                                                 - (images.sum() / len(images)) ** 2).item() < 0,
                where="look at the count you divide the sums by"),
        Mistake("your variance came out negative, so its square root is complex: sum(x**2) / n - mean**2 is never "
                "negative when the sums and n describe the same pixels; n must count every pixel (images.numel())",
                matches=lambda got: isinstance(got, complex), where="look at the count you divide the sums by"),
    ]


class _HeldMemory(TorchDispatchMode):
    """While active, remembers (weakly) every tensor of more than one element that torch makes, so that
    :meth:`bytes_alive` tells how much of that memory is still held: copies (``.double()``, ``.flatten()``...) and
    results (``torch.cat``) count, not only the batches a loader gave."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would otherwise wrap __torch_dispatch__ in dynamo.disable, importing torch._dynamo (many seconds)
        # on first use; nothing here is compiled
        return False

    def __init__(self) -> None:
        super().__init__()
        self.made: list[weakref.ref] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 (torch's signature)
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.numel() > 1:
                self.made.append(weakref.ref(t))
        return out

    def bytes_alive(self) -> int:
        self.made = [r for r in self.made if r() is not None]
        storages = {}
        for r in self.made:
            t = r()
            if t is not None:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return sum(storages.values())


def _batch_spy(tensors: Sequence[torch.Tensor], log: list[int], held: _HeldMemory | None = None,
               held_log: list[int] | None = None) -> TensorDataset:
    """A TensorDataset that records, in ``log`` (kept outside the dataset, so the dataset itself is unchanged),
    the size of every batch a DataLoader fetches from it (the loader asks ``__getitems__`` for a whole batch),
    and in ``held_log`` how many bytes ``held`` finds alive as each batch is fetched."""

    class BatchSpy(TensorDataset):
        def __getitems__(self, indices: list[int]) -> list:
            log.append(len(indices))
            if held is not None and held_log is not None:
                held_log.append(held.bytes_alive())
            return [self[i] for i in indices]

    return BatchSpy(*tensors)


def _grows_per_batch(held_log: list[int], sizes: list[int], batch_bytes: int) -> int | None:
    """The first batch k whose fetch ended three fetches of full batches in a row, each finding at least 3/4 of a
    batch more memory held than the one before: every batch, or a copy of it, was kept. None when not. (A loop
    that keeps running totals holds the same memory from its second batch on, whatever its temporaries.)"""
    for k in range(3, min(len(held_log), len(sizes))):
        window = range(k - 3, k + 1)
        if all(sizes[j] == sizes[0] for j in window) and all(
                held_log[j + 1] - held_log[j] >= 0.75 * batch_bytes for j in range(k - 3, k)):
            return k
    return None


def _holding_spy(held: list[int]) -> type:
    """A DataLoader that records, in ``held``, how many of the batches it gave earlier are still alive (held by
    the caller) each time it gives the next one: a loop that keeps only running totals holds at most one."""

    class DataLoader(torch.utils.data.DataLoader):
        def __iter__(self):
            given: list[weakref.ref] = []
            for batch in super().__iter__():
                held.append(sum(ref_() is not None for ref_ in given))
                first = batch[0] if isinstance(batch, (tuple, list)) and batch else batch
                if isinstance(first, torch.Tensor):
                    given.append(weakref.ref(first))
                yield batch

    return DataLoader


def check_mean_std(fn: Callable[[Dataset, int], tuple[float, float]],
                   inputs: Sequence[tuple[TensorDataset, int]] | None = None, part: str = "both") -> None:
    """``part``: "mean" or "std" tests only that number. Either form of the std is accepted:
    dividing by the pixel count, or by the count minus one (what tensor.std() does)."""
    _check_part(part, ("both", "mean", "std"))
    # task: "every pixel of every image": images of any shape, colour ones ([3, H, W]) too
    inputs = inputs if inputs is not None else [(_image_set(25, 6, 0), 10), (_image_set(12, 5, 1), 4),
                                                (_image_set(22, 3, 2, channels=3), 4), (_sensor_set(60, 8, 3), 8)]
    for dataset, batch_size in inputs:
        images = dataset.tensors[0].double()
        shown = f"mean_std({len(dataset)} images of shape {list(images.shape[1:])}, batch_size={batch_size})"
        batches: list[int] = []
        memory, held_bytes = _HeldMemory(), []
        spy = _batch_spy(dataset.tensors, batches, memory, held_bytes) if isinstance(dataset, TensorDataset) \
            else dataset
        # task: "Go through it with DataLoader(dataset, batch_size=batch_size)": iterating a DataLoader built
        # without a generator draws its base seed from the global generator, so that draw is allowed.
        held: list[int] = []
        try:
            with substitute(fn, DataLoader=_holding_spy(held)), memory:
                got = call(fn, spy, batch_size, allow=Allow(global_rng=True))
        except CheckError as error:
            # sums over some dims only (dim=(0, 2, 3)) keep one total per channel: .item() refuses more than one
            channels = images.shape[1] if images.dim() >= 4 else 1
            if not (channels > 1 and isinstance(error.__cause__, RuntimeError)
                    and f"Tensor with {channels} elements cannot be converted to Scalar" in str(error.__cause__)):
                raise
            cause = error.__cause__
            raise CheckError(f"{shown} raised {type(cause).__name__}: {cause}",
                             where=f"look at the dims your totals sum over: these images have "
                                                  f"{channels} channels ({list(images.shape[1:])}), and a sum over "
                                                  "some dims only (dim=(0, 2, 3)) keeps one total per channel; the "
                                                  "task's totals run over every pixel of every image (images.sum())"
                             ) from error.__cause__
        # task: "never hold more than one batch of images at a time" (the loop variable holds one while the next
        # is fetched; more than two means earlier batches were kept)
        if held and max(held) > 2:
            k = held.index(max(held))
            raise CheckError(f"{shown}: when your DataLoader gave batch {k}, {held[k]} earlier batches were still "
                             "held in memory; expected at most one batch held at a time",
                             where="look at what your loop keeps from each batch",
                             mistake="you kept every batch (in a list, or for torch.cat) to compute the statistics "
                                     "at the end: keep running totals (sums and a count) and let each batch go, so "
                                     "a dataset larger than memory works" if held[k] == k else None)
        batch_bytes = dataset.tensors[0][:batch_size].nbytes if isinstance(dataset, TensorDataset) else 0
        grown = _grows_per_batch(held_bytes, batches, batch_bytes) if batch_bytes else None
        if grown is not None:
            raise CheckError(f"{shown}: the memory your function held grew with every batch: when batch {grown} was "
                             f"fetched it held {held_bytes[grown] - held_bytes[grown - 3]} bytes more than at batch "
                             f"{grown - 3}, where "
                             f"one batch of images is {batch_bytes} bytes; expected about one batch held at a time",
                             where="look at what your loop keeps from each batch: a list of batches, or of copies "
                                   "of them (.double(), .flatten(), a list comprehension over the loader)",
                             mistake="you kept (a copy of) every batch, to compute the statistics at the end: keep "
                                     "running totals (sums and a count) and let each batch go, so a dataset larger "
                                     "than memory works")
        expect(isinstance(got, (tuple, list)) and len(got) == 2, f"{shown} should return (mean, std), not {describe(got)}",
               where="look at your return statement: it returns the mean and the std, in that order")
        # a rule of the method, as the memory rules above: both graded parts hold it
        if batches and len(dataset) >= batch_size:
            expect(max(batches) == batch_size,
                   f"{shown}: your DataLoader fetched batches of up to {max(batches)} images; expected batches of "
                   f"batch_size={batch_size}", where="look at the DataLoader you build",
                   mistake="pass the batch_size argument on, so the caller decides how much memory one batch takes")
        mean, std = got
        if part in ("both", "mean"):
            expect_close(mean, images.mean().item(), what=f"the mean from {shown}", python_number=True,
                         mistakes=_stats_mistakes(dataset, batch_size, "mean", sum(batches)))
        if part in ("both", "std"):
            population, sample = images.std(correction=0).item(), images.std(correction=1).item()
            number = std
            is_sample_std = (isinstance(number, (int, float)) and not isinstance(number, bool)
                             and math.isclose(number, sample, rel_tol=1e-4, abs_tol=1e-5))
            # task: "keep the running totals in float64": a dataset whose pixels are large next to their spread
            # (raw sensor readings) shows totals kept in float32; with the mean right, precision is the cause
            precision = [Mistake(
                "the mean is right, but the std is not: float32 keeps about 7 significant digits, and with pixels "
                f"around {float(images.mean()):.0f} the sums of squares are near {float((images**2).mean()):.3g} "
                "per pixel, so the variance (their difference from mean**2) is lost in the rounding. Convert each "
                "batch to float64 before summing (images.double())",
                matches=lambda _: isinstance(mean, float) and math.isclose(mean, images.mean().item(), rel_tol=1e-6),
                where="look at the dtype your sums and sums of squares are computed in")] \
                if _large_offset(images) else []
            # squares taken in float32 and only then converted ((x * x).double()): the rounding is done before the
            # float64 sum, and its small error can look like another mistake's, so it is tried first
            squared_first = [Mistake(
                "the squares were computed in float32 and converted to float64 only afterwards: with pixels around "
                f"{float(images.mean()):.0f} each square is rounded to float32's 7 significant digits before the "
                "sum, and the variance (a small difference of large numbers) loses its last digits. Convert the batch "
                "first, then square (x = images.double(); x * x)",
                lambda: _std_squares_in_float32(dataset, batch_size),
                where="look at the dtype each square is computed in")] if _large_offset(images) else []
            if not is_sample_std:
                expect_close(std, population, what=f"the std from {shown}", python_number=True,
                             mistakes=squared_first + _stats_mistakes(dataset, batch_size, "std", sum(batches))
                             + precision)
    passed(f"mean_std ({part})" if part != "both" else "mean_std", len(inputs))


# ---------------------------------------------------------------- state kept between calls

def _module_generators(fn: Any) -> list[str]:
    """The names of the module-level torch.Generator objects ``fn``'s code (or a function nested in it) reads: one
    generator made once, at import, that every call draws from, so each call goes on where the last one stopped."""
    namespace = getattr(fn, "__globals__", None)
    if not isinstance(namespace, dict):
        return []
    names, codes = [], [getattr(fn, "__code__", None)]
    while codes:
        code = codes.pop()
        if code is None:
            continue
        names += [name for name in code.co_names
                  if isinstance(namespace.get(name), torch.Generator) and name not in names]
        codes += [const for const in code.co_consts if hasattr(const, "co_names")]
    return names


# ---------------------------------------------------------------- split_train_val

def _indices(subset: Any) -> list[int]:
    return list(subset.indices) if isinstance(subset, Subset) else []


def _numpy_split(n: int, seed: int, train: Subset, val: Subset) -> bool:
    """The parts are a NumPy permutation of range(n), seeded with ``seed``, cut in two (either way round)."""
    got = _indices(train) + _indices(val)
    orders = [np.random.default_rng(seed).permutation(n).tolist(), np.random.RandomState(seed).permutation(n).tolist()]
    return any(got == order or _indices(val) + _indices(train) == order for order in orders)


def check_split_train_val(fn: Callable[[Dataset, float, int], tuple[Subset, Subset]],
                          inputs: Sequence[tuple[Dataset, float, int]] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        (TensorDataset(torch.arange(20)), 0.25, 0),
        (TensorDataset(torch.arange(103)), 0.1, 7),
        (TensorDataset(torch.arange(6)), 0.1, 2),  # int(0.6) = 0: an empty validation part
    ]
    for dataset, fraction, seed in inputs:
        n = len(dataset)
        n_val = int(n * fraction)
        shown = f"split_train_val({n} samples, val_fraction={fraction}, seed={seed})"
        # The framework rejects any use of the global generator (an unseeded random_split, torch.manual_seed).
        try:
            got = call(fn, dataset, fraction, seed)
        except CheckError as error:
            # random_split's own complaint shows the lengths passed to it do not add up to the dataset's
            if "Sum of input lengths does not equal" not in str(error.__cause__):
                raise
            raise CheckError(error.symptom, where=f"look at the lengths you pass to random_split: together they "
                                                  f"must be len(dataset) ({n})",
                             mistake=f"your lengths do not add up to {n}: compute n_val = int(n * val_fraction) and "
                                     "give training the rest, n - n_val (two parts each rounded down can fall one "
                                     "short)") from error.__cause__
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"{shown} returned {describe(got)}; expected a pair (train, val)", where=WHERE_RETURN)
        train, val = got
        expect(isinstance(train, Subset) and isinstance(val, Subset),
               f"{shown} returned {describe(train)} and {describe(val)}; expected the two Subset objects "
               "random_split gives", where="look at what random_split returns, and return its parts")
        if not (len(val) == n_val and len(train) == n - n_val):
            want_train, want_val = ref.split_train_val(dataset, fraction, seed)
            # The sizes alone cannot tell a swapped pair from a rounded n_val (7 * 0.5 gives 3 and 4 both ways):
            # the cause is named from the indices each part holds.
            swapped = _indices(train) == _indices(want_val) and _indices(val) == _indices(want_train)
            rounded = len(val) in (round(n * fraction), math.ceil(n * fraction)) and len(val) != n_val \
                and len(train) + len(val) == n
            raise CheckError(
                f"{shown} returned parts of {len(train)} and {len(val)} samples; expected {n - n_val} for "
                f"training and int({n} * {fraction}) = {n_val} for validation",
                where="look at how you compute n_val, the lengths you pass to random_split and the order you "
                      "return the parts in",
                mistake=("you returned (validation, training); return (train, val)" if swapped else
                         f"your validation part has {len(val)} samples: either {n} * {fraction} = {n * fraction:g} "
                         f"was rounded up, or the training size was rounded down (int({n} * (1 - {fraction})) = "
                         f"{len(train)}) and validation got the rest; the task rounds the validation size down, "
                         f"n_val = int(n * val_fraction) = {n_val}, and gives training the rest"
                         if rounded and len(train) == int(n * (1 - fraction)) else
                         f"your validation part has {len(val)} samples: {n} * {fraction} = {n * fraction:g} was "
                         f"rounded up; the task's int() rounds down, to {n_val}" if rounded else None))
        again = call(fn, dataset, fraction, seed)
        if _indices(again[1]) != _indices(val) or _indices(again[0]) != _indices(train):
            kept = _module_generators(fn)
            raise CheckError(f"{shown}, called twice, gave two different splits (validation indices starting "
                             f"{_indices(val)[:5]} and {_indices(again[1])[:5]}); the same seed must give the same "
                             "split" + (f"; your function draws from {kept[0]}, a generator made once at module "
                                        "level" if kept else ""),
                             where="look at how the generator you shuffle with is seeded"
                                   + (", and where it is made" if kept else ""),
                             mistake=f"state kept between calls: {kept[0]} is made once, when the cell runs, so each "
                                     "call draws where the previous one stopped (and a seed given later does not "
                                     "restart it); make a new generator in every call, "
                                     "torch.Generator().manual_seed(seed)" if kept else
                                     "the shuffle does not depend on the seed alone: the generator is never seeded "
                                     "with seed (a new Generator starts from a fixed default, g.seed() from the "
                                     "clock); make it with torch.Generator().manual_seed(seed)")
        other = call(fn, dataset, fraction, seed + 1)
        if _indices(other[0]) == _indices(train):
            in_order = sorted(_indices(train)) == _indices(train) and sorted(_indices(val)) == _indices(val)
            raise CheckError(f"{shown} and seed={seed + 1} give the same split; a different seed should give a "
                             "different one" + ("; both keep the dataset's order" if in_order else ""),
                             where="look at where the seed argument is used",
                             mistake="nothing shuffles the items: a random split draws them in an order made by a "
                                     "generator seeded with seed (random_split(..., generator=...))" if in_order else
                                     "your code ignores the seed argument: seed the generator with it")
        want_train, want_val = ref.split_train_val(dataset, fraction, seed)
        if _indices(train) != _indices(want_train) or _indices(val) != _indices(want_val):
            swapped = torch.utils.data.random_split(dataset, [n_val, n - n_val], generator=_gen(seed))
            raise CheckError(
                f"{shown}: the validation indices start {_indices(val)[:5]}; random_split(dataset, "
                f"[{n - n_val}, {n_val}]) with a generator seeded with {seed} gives {_indices(want_val)[:5]}",
                where="look at where the shuffled order is cut (random_split's lengths, in their order) and at "
                      "the generator",
                mistake=("your validation part is the start of the shuffled order and training the rest (what "
                         "random_split with the lengths [n_val, n_train] gives); the task's split is "
                         "random_split's with [n_train, n_val]: training takes the first n_train of the shuffled "
                         "order, validation the last n_val" if _indices(train) == list(swapped[1].indices) else
                         f"that is the split a NumPy permutation seeded with {seed} gives: NumPy's generator draws "
                         "other numbers than PyTorch's for the same seed; use random_split with "
                         "torch.Generator().manual_seed(seed)" if _numpy_split(n, seed, train, val) else None))
    passed("split_train_val", len(inputs))


# ---------------------------------------------------------------- make_loaders

def _global_draw_mistake(loader: DataLoader) -> str:
    """Why iterating ``loader`` drew from the global generator, from how the loader is built."""
    sampler = getattr(loader, "sampler", None)
    if loader.generator is None and getattr(sampler, "generator", None) is not None:
        return ("your sampler has its own generator, but the DataLoader itself still draws a base seed at the "
                "start of every epoch, from its generator= or, without one, from the global generator: give the "
                "DataLoader the seeded generator (generator=..., with shuffle=True)")
    return "give the DataLoader its own generator seeded with seed (generator=...); without one it draws from the " \
           "global generator"


def _shared_generator(a: DataLoader, b: DataLoader) -> bool:
    """Whether two loaders draw from one and the same generator object (their own, or their samplers')."""
    def generators(loader: DataLoader) -> list[torch.Generator]:
        found = [loader.generator, getattr(loader.sampler, "generator", None)]
        return [g for g in found if isinstance(g, torch.Generator)]
    return any(g is h for g in generators(a) for h in generators(b))


def _order(loader: DataLoader) -> list[list[int]]:
    return [batch[0].tolist() for batch in loader]


def check_make_loaders(fn: Callable[..., tuple[DataLoader, DataLoader]],
                       inputs: Sequence[tuple[int, int, int, int]] | None = None, part: str = "both") -> None:
    """``inputs``: (training size, validation size, batch_size, seed).
    ``part``: "train" or "val" tests only that loader."""
    _check_part(part, ("both", "train", "val"))
    inputs = inputs if inputs is not None else [(50, 13, 8, 0), (21, 10, 5, 3)]
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    rng_state = torch.get_rng_state()
    try:
        for n_train, n_val, batch_size, seed in inputs:
            train_set = TensorDataset(torch.arange(n_train))
            val_set = TensorDataset(torch.arange(100, 100 + n_val))
            shown = f"make_loaders({n_train} training and {n_val} validation samples, batch_size={batch_size}, seed={seed}"
            got = call(fn, train_set, val_set, batch_size, seed, cpu)
            expect(isinstance(got, (tuple, list)) and len(got) == 2,
                   f"{shown}, cpu) should return (train_loader, val_loader), not {describe(got)}",
                   where="look at your return statement: it returns the training loader, then the validation loader")
            expect(all(isinstance(loader, DataLoader) for loader in got),
                   f"{shown}, cpu) should return two DataLoader objects, not {describe(got[0])} and {describe(got[1])}",
                   where="look at what you build and return: torch.utils.data.DataLoader objects")
            on_cuda = call(fn, train_set, val_set, batch_size, seed, cuda)
            on_cuda1 = call(fn, train_set, val_set, batch_size, seed, torch.device("cuda", 1))  # a CUDA GPU too
            on_mps = call(fn, train_set, val_set, batch_size, seed, torch.device("mps"))  # a GPU that is not CUDA
            want_train, want_val = ref.make_loaders(train_set, val_set, batch_size, seed, cpu)
            which = {"train": [0], "val": [1], "both": [0, 1]}[part]
            pin_where = "look at the condition that decides pin_memory"
            for index in which:
                name = ("training", "validation")[index]
                loader = got[index]
                expect(loader.batch_size == batch_size,
                       f"{shown}): the {name} loader's batch_size is {loader.batch_size}; expected {batch_size}",
                       where="look at the batch_size you pass to the DataLoader")
                expect(not loader.pin_memory,
                       f"{shown}, cpu): the {name} loader pins memory; expected no pinning on the CPU",
                       where=pin_where, mistake="pinned memory only speeds up copies to a CUDA GPU")
                expect(not on_mps[index].pin_memory,
                       f"{shown}, mps): the {name} loader pins memory for Apple's 'mps' GPU; expected pinning for "
                       "CUDA only", where=pin_where,
                       mistake="'mps' shares its memory with the CPU, so there is nothing to speed up: pin only "
                               "when device.type is 'cuda'")
                expect(on_cuda[index].pin_memory,
                       f"{shown}, cuda): the {name} loader does not pin memory; expected pinning for a CUDA GPU",
                       where=pin_where,
                       mistake="pinned pages can be copied to a CUDA GPU faster and asynchronously: pin when "
                               "device.type is 'cuda'")
                expect(on_cuda1[index].pin_memory,
                       f"{shown}, cuda:1): the {name} loader does not pin memory for the CUDA GPU number 1; expected "
                       "pinning for every CUDA GPU", where=pin_where,
                       mistake="you pin for torch.device('cuda') but not for 'cuda:1': a test such as str(device) "
                               "== 'cuda' misses a GPU given with its index; device.type is 'cuda' for every CUDA GPU")
            if 0 in which:
                train = got[0]
                if not isinstance(train.sampler, RandomSampler):
                    epochs = [[i for batch in _order(train) for i in batch] for _ in range(2)]
                    # a sampler that is one shuffled list of indices: the same order, epoch after epoch
                    expect(epochs[0] == sorted(epochs[0]) or epochs[0] != epochs[1],
                           f"{shown}): the training loader gives the same shuffled order every epoch (both epochs "
                           f"start {epochs[0][:6]}); expected a new order every epoch",
                           where="look at the training loader's sampler: one list of indices is one order, repeated",
                           mistake="a permutation drawn once and passed as sampler= repeats itself every epoch; let "
                                   "the DataLoader shuffle (shuffle=True, generator=...), which draws a new order "
                                   "for every pass")
                expect(isinstance(train.sampler, RandomSampler),
                       f"{shown}): the training loader gives the samples in the dataset's order; expected a shuffled "
                       "order", where="look at the training loader's shuffle setting")
                expect(train.drop_last,
                       f"{shown}): the training loader's last batch holds "
                       f"{n_train % batch_size or batch_size} samples; expected the incomplete last batch dropped",
                       where="look at the training loader's drop_last setting")
                # task: "two loaders built with one seed give the same orders": the second is built before either
                # is iterated, so loaders that share one generator (made once, reseeded per call) show it
                second_loader = call(fn, train_set, val_set, batch_size, seed, cpu)[0]
                before = torch.get_rng_state()
                order = _order(train)
                second = _order(second_loader)
                if order != second:
                    shared = _shared_generator(train, second_loader)
                    kept = _module_generators(fn)
                    raise CheckError(f"{shown}): two training loaders built with the same seed, both built before "
                                     f"either is iterated, shuffle differently ({order[0]} and {second[0]} first); "
                                     "expected the same order"
                                     + ("; both draw from one and the same generator object" if shared else "")
                                     + (f" ({kept[0]}, made once at module level)" if shared and kept else ""),
                                     where="look at how the training loader's shuffle is seeded, and where its "
                                           "generator is made",
                                     mistake="state kept between calls: the two loaders share one generator object, "
                                             "made once outside the function (and perhaps reseeded on every call), "
                                             "so iterating one moves the other's order. Make a new "
                                             "torch.Generator().manual_seed(seed) in every call" if shared else
                                     "the shuffle is not seeded: give the DataLoader its own generator "
                                     "seeded with seed (generator=)" if train.generator is None else None)
                if not torch.equal(before, torch.get_rng_state()):
                    raise CheckError(f"{shown}): iterating your training loader changed PyTorch's global random "
                                     "state; expected it to draw from its own generator only",
                                     where="look at the generator the training loader gets",
                                     mistake=_global_draw_mistake(train))
                # task: "the training loader shuffles with its own generator": a validation pass in between
                # must not change the next training epoch's order
                train_again, val_again = call(fn, train_set, val_set, batch_size, seed, cpu)
                _order(val_again)
                after_validation = _order(train_again)
                if after_validation != order:
                    shares = val_again.generator is not None and val_again.generator is train_again.generator
                    raise CheckError(f"{shown}): after one pass over the validation loader, the training loader "
                                     f"shuffles differently ({after_validation[0]} first, not {order[0]}); expected "
                                     "the training order not to depend on the validation loader",
                                     where="look at the generator each loader gets",
                                     mistake="both loaders use one generator: every pass over a loader draws a seed "
                                             "from its generator, so validating moves the training order. Give the "
                                             "training loader its own generator; the validation loader does not "
                                             "shuffle and needs none" if shares else None)
                other = _order(call(fn, train_set, val_set, batch_size, seed + 1, cpu)[0])
                if other == order:
                    raise CheckError(f"{shown}) and seed={seed + 1} give the same order; expected the seed to "
                                     "decide the order", where="look at where the seed argument is used",
                                     mistake="your code ignores the seed argument")
                expect(order == _order(want_train),
                       f"{shown}): the first training batch is {order[0]}; a DataLoader that shuffles with its own "
                       f"generator seeded with {seed} gives {_order(want_train)[0]}",
                       where="look at how the generator reaches the DataLoader (the task says: to the DataLoader "
                             "itself, as generator=)")
            if 1 in which:
                val = got[1]
                expect(isinstance(val.sampler, SequentialSampler),
                       f"{shown}): the validation loader shuffles; expected the dataset's order",
                       where="look at the validation loader's shuffle setting",
                       mistake="the metric does not depend on the order, and a fixed order makes runs easier to "
                               "compare: do not shuffle the validation data")
                dropped = n_val % batch_size
                expect(not val.drop_last,
                       f"{shown}): the validation loader drops its last batch"
                       + (f", so {dropped} samples are never evaluated" if dropped else "")
                       + "; expected every sample", where="look at the validation loader's drop_last setting")
                expect(_order(val) == _order(want_val),
                       f"{shown}): the validation loader's batches are {_order(val)[:2]}...; expected "
                       f"{_order(want_val)[:2]}...", where="look at how the validation loader is built")
    finally:
        torch.set_rng_state(rng_state)
    passed(f"make_loaders ({part})" if part != "both" else "make_loaders", len(inputs))


# ---------------------------------------------------------------- reading the measurements (self-checks)

def check_choose_num_workers(fn: Callable[[dict], int], inputs: Sequence[dict] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        {(0, False): 5200.0, (0, True): 5100.0, (2, False): 3900.0, (2, True): 4000.0},
        {(0, False): 800.0, (0, True): 820.0, (4, False): 2900.0, (4, True): 3100.0, (8, False): 2500.0},
        # the fastest setting is not the best on average over pin_memory: the task asks for the fastest
        {(0, False): 1000.0, (0, True): 1000.0, (2, False): 3000.0, (2, True): 600.0, (4, False): 2000.0,
         (4, True): 1900.0, (6, False): 500.0},
    ]
    for speeds in inputs:
        shown = f"choose_num_workers({ {k: round(v) for k, v in speeds.items()} })"
        try:
            got = call(fn, speeds)
        except CheckError as error:
            # a key written into the code (the settings of the notebook's own table), which this table lacks
            missing = error.__cause__.args[0] if isinstance(error.__cause__, KeyError) and error.__cause__.args \
                else None
            if missing is None or missing in speeds:
                raise
            raise CheckError(f"{shown} raised KeyError: {missing!r} is not a key of this table, whose keys are "
                             f"{sorted(speeds)}",
                             where="look at the keys your code looks up in speeds",
                             mistake="your code names settings of one table (the one measured in the notebook); "
                                     "the table it is given may hold others: read the settings from the table "
                                     "itself, max(speeds, key=speeds.get)") from error.__cause__
        want = ref.choose_num_workers(speeds)
        slowest = min(speeds, key=speeds.get)[0]
        where = "look at what you compare (the values are images per second) and what you return (the key's first part)"
        expect(isinstance(got, int) and not isinstance(got, bool),
               f"{shown} returned {describe(got)}; expected an int, the num_workers of the fastest setting",
               where=where,
               mistake=("you returned the (num_workers, pin_memory) pair; return num_workers, its first element"
                        if isinstance(got, (tuple, list)) else
                        f"you returned a throughput ({got:,.0f} images/s); return the num_workers of the fastest "
                        "setting" if isinstance(got, float) and got in speeds.values() else None))
        largest_key = max(speeds)[0]  # max() of a dict compares its keys, not its values
        workers = {w for w, _ in speeds}
        mean_of = {w: statistics.mean(v for (x, _), v in speeds.items() if x == w) for w in workers}
        best_mean = max(mean_of, key=mean_of.get)
        compare = "compare the values (images per second, larger is faster): max(speeds, key=speeds.get)"
        expect(got == want, f"{shown} returned {got}; the fastest setting uses num_workers={want}", where=where,
               mistake=(f"that is the num_workers of the slowest setting, and also the largest num_workers in the "
                        f"table (max of a dict compares its keys): {compare}" if got == slowest == largest_key else
                        "that is the num_workers of the slowest setting: the values are images per second, so "
                        "larger is faster" if got == slowest else
                        f"that is the largest num_workers in the table (max of a dict compares its keys): {compare}"
                        if got == largest_key else
                        f"that is the num_workers whose mean over the pin_memory settings is largest "
                        f"({mean_of[got]:,.0f} images/s); the task asks for the num_workers of the single fastest "
                        f"setting ({speeds[max(speeds, key=speeds.get)]:,.0f} images/s)"
                        if got == best_mean != want else None))
    passed("choose_num_workers", len(inputs))


def check_loading_share(fn: Callable[[float, float], float],
                        inputs: Sequence[tuple[float, float]] | None = None) -> None:
    inputs = inputs if inputs is not None else [(2.5, 1.5), (0.2, 1.8), (3.0, 3.0)]
    for load_ms, step_ms in inputs:
        shown = f"loading_share(load_ms={load_ms}, step_ms={step_ms})"
        got = call(fn, load_ms, step_ms)
        expect_close(got, ref.loading_share(load_ms, step_ms), what=shown, python_number=True, mistakes=[
            Mistake("that is the training step's share; the loading share is load / (load + step)",
                    lambda: step_ms / (load_ms + step_ms),
                    where="look at the numerator: which of the two times is loading?"),
            Mistake("that is load / step, a ratio of the two; the share of the whole is load / (load + step)",
                    lambda: load_ms / step_ms,
                    where="look at the denominator: the whole is load plus step"),
            Mistake("that is a percentage; return a fraction between 0 and 1",
                    lambda: 100 * load_ms / (load_ms + step_ms),
                    where="look at the scale of what you return: a fraction, not a percentage"),
            Mistake("that is the share rounded down to a whole number: // is floor division, which drops the "
                    "fraction; divide with /", lambda: load_ms // (load_ms + step_ms),
                    where="look at the division operator"),
            *[Mistake(f"that is the share rounded to {digits} decimals; return it unrounded (round only when you "
                      "print it)", (lambda digits=digits: round(load_ms / (load_ms + step_ms), digits)),
                      where="look at what happens to the share before it is returned") for digits in range(1, 5)],
        ])
    passed("loading_share", len(inputs))


# ---------------------------------------------------------------- put it together: a loader for a new format

RecordingSpec = tuple[str, int, int]  # (file text, batch_size, seed)


def random_recordings(seed: int, n: int, classes: int, comments: bool = True) -> str:
    """A recordings file of ``n`` random recordings (for the graded cells' hidden cases)."""
    return _recordings_text(np.random.default_rng(seed), n, classes, comments)


def _recordings_text(rng: np.random.Generator, n: int, classes: int, comments: bool = True) -> str:
    """A recordings file: n lines ``label,v1,...,vk`` with k from 1 to 9, readings around 5 (so standardising matters)."""
    lines = ["# recordings: label, then the readings"] if comments else []
    for i in range(n):
        k = int(rng.integers(1, 10))
        readings = ",".join(f"{v:.3f}" for v in 5 + 2 * rng.standard_normal(k))
        lines.append(f"{int(rng.integers(0, classes))},{readings}")
        if comments and i == n // 2:
            lines += ["", "# a comment in the middle"]
    return "\n".join(lines) + "\n"


def _default_recordings() -> list[RecordingSpec]:
    rng = np.random.default_rng(9)
    return [(_recordings_text(rng, 11, 3), 4, 0), (_recordings_text(rng, 7, 2, comments=False), 3, 5),
            # readings equal to the file's mean, in the middle of their recordings: exactly 0 once standardised
            ("0,1,2,3\n1,2\n0,3,2,1\n", 2, 4)]


def _epoch(loader: Any, shown: str) -> list[tuple]:
    """One pass over the learner's loader, as a list of batches, with the learner's crash named."""
    try:
        return list(loader)
    except CheckError:
        raise
    except Exception as error:
        if isinstance(error, RuntimeError) and "stack expects each tensor to be equal size" in str(error):
            raise CheckError(f"{shown}: iterating the loader raised {type(error).__name__}: {error}",
                             where="look at the DataLoader's collate_fn: which function builds each batch?",
                             mistake="without a collate_fn the DataLoader stacks the recordings as they are, and "
                                     "recordings of different lengths cannot be stacked: pass a collate_fn that pads "
                                     "them (exercise 5's collate_sequences does)") from error
        raise CheckError(f"{shown}: iterating the loader raised {type(error).__name__}: {error} (the file had been "
                         "overwritten after the loader was made)",
                         where="look at your dataset's __getitem__ and your collate function, and at when the file "
                               "is read: the task says once, when the loader is made") from error


def _unbatch(batches: list[tuple], shown: str, batch_size: int) -> list[tuple[torch.Tensor, int]]:
    """The recordings an epoch delivered, in order, after checking every batch's form."""
    where = "look at your collate function: what it stacks, pads and converts"
    found = []
    for k, batch in enumerate(batches):
        expect(isinstance(batch, (tuple, list)) and len(batch) == 3,
               f"{shown}: batch {k} is {describe(batch)}; expected (padded, lengths, labels)", where=where)
        padded, lengths, labels = batch
        for name, value, dtype, dims in (("padded", padded, torch.float32, 2), ("lengths", lengths, torch.int64, 1),
                                         ("labels", labels, torch.int64, 1)):
            expect(isinstance(value, torch.Tensor) and value.dtype == dtype and value.dim() == dims,
                   f"{shown}: in batch {k}, {name} is {describe(value)}; expected a {dims}-D {dtype} tensor",
                   where=where)
        b = len(labels)
        expect(padded.shape[0] == b and lengths.shape[0] == b,
               f"{shown}: batch {k} holds {padded.shape[0]} padded rows, {lengths.shape[0]} lengths and {b} labels; "
               "expected one of each per recording", where=where)
        expect(b <= batch_size and (b == batch_size or k == len(batches) - 1),
               f"{shown}: batch {k} of {len(batches)} holds {b} recordings; expected batch_size={batch_size} in every "
               "batch but the last", where="look at the DataLoader's batch_size")
        longest = int(lengths.max()) if b else 0
        # lengths that count each row's nonzero values: a reading that is 0 itself (after standardising, one equal
        # to the file's mean) goes uncounted, though readings follow it
        nonzero = padded != 0
        counted_nonzero = b > 0 and torch.equal(lengths, nonzero.sum(dim=1)) and bool(
            (nonzero.flip(1).cumsum(1).flip(1).bool() & ~nonzero).any())
        expect(not counted_nonzero,
               f"{shown}: batch {k}'s lengths are {lengths.tolist()}, but a row holds a reading of 0 with readings "
               "after it, and that 0 is not counted", where="look at how you compute the lengths",
               mistake="your lengths count each padded row's nonzero values, and a reading can be 0 itself (after "
                       "standardising, a reading equal to the file's mean is exactly 0): take each recording's "
                       "length before padding")
        expect(padded.shape[1] == longest,
               f"{shown}: batch {k} is padded to {padded.shape[1]} readings, but its longest recording has "
               f"{longest}; expected padding to the longest recording of the batch", where=where)
        for row, n, label in zip(padded, lengths.tolist(), labels.tolist()):
            expect(bool((row[n:] == 0).all()),
                   f"{shown}: in batch {k}, a recording of {n} readings is followed by {row[n:][:4].tolist()} "
                   "instead of zeros", where="look at the order of standardising and padding"
                   if not _unwritten(row[n:]) else "look at how the padding's memory is created",
                   mistake=_UNWRITTEN if _unwritten(row[n:]) else
                   "pad after standardising: the padding must stay 0, and must not count in the mean and "
                   "std" if bool((row[n:] != 0).all()) else None)
            found.append((row[:n], label))
    return found


def _fitted_statistics(got: torch.Tensor, candidates: list[list[float]]) -> tuple[float, float] | None:
    """(mean, std) such that ``got`` is one candidate's readings standardised with them, if any such pair exists."""
    for readings in candidates:
        x = torch.tensor(readings, dtype=torch.float64)
        y = got.double()
        if len(x) < 2 or float(x.max() - x.min()) < 1e-6 or float(y.max() - y.min()) < 1e-9:
            continue
        i, k = int(x.argmin()), int(x.argmax())
        std = float((x[k] - x[i]) / (y[k] - y[i]))
        mean = float(x[i] - std * y[i])
        if std > 0 and torch.allclose((x - mean) / std, y, atol=1e-4):
            return mean, std
    return None


def _match(found: list[tuple[torch.Tensor, int]], want: list[tuple[torch.Tensor, int]], raw: list[tuple[list, int]],
           shown: str, std_sample: float, std_population: float) -> list[int]:
    """For each delivered recording, the index of the file's recording it is; names the first that is none."""
    # a lost recording changes the file's mean and std too: the count comes first, as the cause of both
    if len(found) < len(want):
        raise CheckError(f"{shown}: one epoch delivered {len(found)} recordings, but the file holds {len(want)}",
                         where="look at which lines of the file you skip (every line is a recording but blank "
                               "lines and lines starting with #: there is no header line) and at drop_last")
    left = list(range(len(want)))
    order = []
    scale = std_sample / std_population  # a std divided by n - 1 is accepted too

    def same_readings(got: torch.Tensor, j: int) -> bool:
        return any(torch.allclose(got * f, want[j][0], atol=1e-4) for f in (1.0, scale))

    for got, label in found:
        hit = next((j for j in left if want[j][1] == label and len(want[j][0]) == len(got)
                    and same_readings(got, j)), None)
        if hit is None:
            # the readings are right, but the length given for them counts padding: a length taken after padding
            shorter = next((j for j in left if want[j][1] == label and len(want[j][0]) < len(got)
                            and bool((got[len(want[j][0]):] == 0).all()) and same_readings(got[:len(want[j][0])], j)),
                           None)
            if shorter is not None:
                n = len(want[shorter][0])
                raise CheckError(f"{shown}: the loader gave a recording with label {label} the length {len(got)}, but "
                                 f"it has {n} readings, followed by {len(got) - n} zeros of padding",
                                 where="look at where the lengths are measured: before padding, or after",
                                 mistake="after padding every row is as long as the longest: take each length from "
                                         "the recording itself (len(recording)), before padding")
            same = [j for j in range(len(want)) if len(want[j][0]) == len(got) and want[j][1] == label]
            unchanged = any(torch.allclose(got.double(), torch.tensor(raw[j][0], dtype=torch.float64), atol=1e-3)
                            for j in same)
            per_row = len(got) > 1 and abs(float(got.mean())) < 1e-4
            fitted = _fitted_statistics(got, [raw[j][0] for j in same])
            readings = torch.tensor([v for r, _ in raw for v in r], dtype=torch.float64)
            numbers = torch.tensor([v for r, y in raw for v in (y, *r)], dtype=torch.float64)
            with_labels = fitted is not None and any(
                math.isclose(fitted[0], float(numbers.mean()), rel_tol=1e-3)
                and math.isclose(fitted[1], float(numbers.std(correction=c)), rel_tol=1e-3) for c in (0, 1))
            raise CheckError(
                f"{shown}: the loader delivered a recording with label {label} and readings {got[:4].tolist()}"
                f"{'...' if len(got) > 4 else ''}; no recording of the file, standardised with the mean and std of "
                "all its readings, has these values"
                + (" (it was already delivered once this epoch)" if same and all(j not in left for j in same) else "")
                + (f". They are a line's readings standardised with mean {round(fitted[0], 4) + 0:.4g} and std "
                   f"{fitted[1]:.4g}; "
                   f"the file's readings have mean {float(readings.mean()):.4g} and std "
                   f"{float(readings.std(correction=0)):.4g}" if fitted is not None and not unchanged and not per_row
                   else ""),
                where="look at how each line becomes a tensor, and where the mean and std come from",
                mistake=("the readings are not standardised: subtract the mean of all readings in the file and divide "
                         "by their std" if unchanged else
                         "you standardised each recording with its own mean and std; use the mean and std of all "
                         "readings of the file" if per_row else
                         "those are the mean and std of every number in the file, the labels (each line's first "
                         "number) included: compute them over the readings only" if with_labels else
                         "you divided by the std but did not subtract the mean" if fitted is not None
                         and abs(fitted[0]) < 1e-6 else None))
        left.remove(hit)
        order.append(hit)
    return order


def _explain_parse_failure(error: CheckError, text: str, shown: str) -> None:
    """Name the line a ValueError quotes when it is a comment or a blank line of the file, not a recording."""
    cause = error.__cause__
    if not isinstance(cause, ValueError):
        return
    comments = [line.strip() for line in text.splitlines() if line.strip().startswith("#")]
    quoted = next((c for c in comments for q in _quoted(str(cause)) if len(q.strip()) >= 3 and q.strip() in c), None)
    blank = "''" in str(cause)
    if quoted is None and not blank:
        return
    what = f"the comment line {quoted!r}" if quoted is not None else "an empty string (from a blank line)"
    raise CheckError(f"{shown}: making the loader raised {type(cause).__name__}: {cause}; it was reading {what}",
                     where="look at how the file's lines are read: which lines hold recordings",
                     mistake="blank lines and lines starting with # are not recordings: skip them before splitting "
                             "on commas") from cause


def _quoted(text: str) -> list[str]:
    """The parts of an error message between single quotes (what int() or float() could not convert)."""
    return [part for part in text.split("'")[1::2] if part]


def _dataset_size(loader: DataLoader) -> int | None:
    """len(loader.dataset), or None when it has none that works."""
    try:
        size = len(loader.dataset)
    except Exception:
        return None
    return size if isinstance(size, int) else None


def check_recording_loader(fn: Callable[[Path, int, int], DataLoader],
                           inputs: Sequence[RecordingSpec] | None = None) -> None:
    """make_recording_loader(path, batch_size, seed): every recording once per epoch, standardised with the file's
    statistics, zero-padded per batch; reshuffled every epoch, reproducibly from seed, without the global generator;
    the file read once, when the loader is made."""
    inputs = inputs if inputs is not None else _default_recordings()
    for text, batch_size, seed in inputs:
        raw = ref.parse_recordings(text)
        n = len(raw)
        with tempfile.TemporaryDirectory(prefix="check-recordings-") as tmp:
            path = Path(tmp) / "recordings.csv"
            path.write_text(text)
            shown = f"make_recording_loader(a file of {n} recordings, batch_size={batch_size}, seed={seed})"
            everything = torch.tensor([v for r, _ in raw for v in r], dtype=torch.float64)
            want = [(r, label) for r, label in ref.RecordingDataset(path)]
            population, sample = float(everything.std(correction=0)), float(everything.std(correction=1))

            def build(s: int) -> Any:
                # Earlier exercises' functions the learner may reuse are graded with the reference versions.
                with substitute(fn, pad_collate=ref.pad_collate, collate_sequences=ref.collate_sequences,
                                fix_length=ref.fix_length):
                    try:
                        return call(fn, path, batch_size, s)
                    except CheckError as error:
                        _explain_parse_failure(error, text, shown)
                        raise

            loader = build(seed)
            expect(isinstance(loader, DataLoader), f"{shown} returned {describe(loader)}; expected a DataLoader",
                   where=WHERE_RETURN)
            size = _dataset_size(loader)
            twin, other = build(seed), build(seed + 1)
            grown = _dataset_size(loader)
            expect(size == grown,
                   f"{shown}: the loader's dataset held {size} recordings; after two more loaders were made, of the "
                   f"same file, it holds {grown}; expected each loader's dataset to keep the file's {n}",
                   where="look at where your dataset keeps its recordings: on self, or in a list defined in the "
                         "class body or at module level",
                   mistake="state kept between instances: a list defined on the class (rows = [] in the class body) "
                           "or at module level is one list shared by every dataset, and each __init__ adds to it; "
                           "make a new list in __init__ (self.rows = [...])")
            path.write_text("0,not a number\n")  # the file changes once the loaders exist: they must not read it again
            before = torch.get_rng_state()
            with substitute(fn, pad_collate=ref.pad_collate, collate_sequences=ref.collate_sequences,
                            fix_length=ref.fix_length), _filled_empty():
                epochs = [_epoch(loader, shown) for _ in range(2)]
                twin_epochs = [_epoch(twin, shown) for _ in range(2)]
                other_epoch = _epoch(other, shown)
            used_global = not torch.equal(before, torch.get_rng_state())
            torch.set_rng_state(before)
            orders = [_match(_unbatch(epoch, shown, batch_size), want, raw, shown, sample, population)
                      for epoch in epochs]
            twin_orders = [_match(_unbatch(epoch, shown, batch_size), want, raw, shown, sample, population)
                           for epoch in twin_epochs]
            other_order = _match(_unbatch(other_epoch, shown, batch_size), want, raw, shown, sample, population)
            if n >= 6:
                expect(orders[0] != list(range(n)),
                       f"{shown}: the first epoch delivered the recordings in the file's order; expected a shuffled "
                       "order", where="look at the DataLoader's shuffle setting")
                expect(orders[0] != orders[1],
                       f"{shown}: two epochs delivered the recordings in the same order {orders[0]}; expected a new "
                       "order every epoch", where="look at how the order is drawn: once, or once per epoch",
                       mistake="a fixed permutation (or a generator re-seeded inside the dataset or collate) repeats "
                               "itself; let the DataLoader shuffle with its own generator")
                expect(other_order != orders[0],
                       f"{shown} and seed={seed + 1} give the same first epoch order; expected the seed to decide "
                       "the order", where="look at where the seed argument is used")
            if used_global:
                raise CheckError(f"{shown}: iterating the loader changed PyTorch's global random state; expected the "
                                 "shuffle to draw only from the loader's own generator",
                                 where="look at how the DataLoader gets its randomness",
                                 mistake=_global_draw_mistake(loader))
            expect(twin_orders == orders,
                   f"{shown}: two loaders made with the same seed delivered different orders ({orders[0][:6]} and "
                   f"{twin_orders[0][:6]} ...); expected the same", where="look at how the shuffle is seeded")
    passed("make_recording_loader", len(inputs))
