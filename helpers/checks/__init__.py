"""The check framework every lesson's checks are built on.

A check calls the learner's function on several inputs, compares each result
with the reference implementation's, and either prints one pass line or raises
:class:`CheckError`. Known mistakes are recognised by running a deliberately
wrong twin of the reference on the same input (:class:`Mistake`).

A lesson's check module looks like::

    from helpers.checks import Mistake, call, expect_tensor, passed
    from helpers.reference import tensors as ref

    def check_flatten_batch(fn, inputs=None):
        inputs = inputs or [torch.randn(2, 3, 4)]
        for x in inputs:
            got = call(fn, x)    # the caller's own x: call() verifies it is left unchanged
            expect_tensor(got, ref.flatten_batch(x), what=f"flatten_batch(x of shape {list(x.shape)})", given=x,
                          mistakes=[Mistake("you flattened the batch dimension too", lambda: x.flatten(),
                                            where="look at which dims flatten() merges (start_dim)")])
        passed("flatten_batch", len(inputs))

Graded cells call the same check with extra, hidden ``inputs``.

**Rules on by default.** :func:`call` enforces, for every check, what a learner
can break without changing the returned value:

1. every argument (tensors, lists, dicts, tuples, NumPy arrays, modules with
   their parameters, buffers, gradients and the train/eval mode of every
   submodule, optimizers, datasets, data loaders) is the caller's object and
   is left unchanged;
2. state that outlives the call is left unchanged: torch's (and CUDA's),
   Python's and NumPy's global random generators, grad mode, inference mode,
   the default dtype, anomaly detection, torch's thread count. The caller's
   state is restored after the call in every case, then the violation is
   reported.

The comparisons (:func:`expect_tensor`, :func:`expect_close`,
:func:`expect_value`) add:

3. a returned value still attached to an autograd graph (``requires_grad``,
   anywhere in a list, tuple or dict) where the reference's is not is wrong
   (a running total kept without ``.item()``/``.detach()``);
4. the type the task names: :func:`expect_close` wants a Python number (a
   0-d tensor is not one); :func:`expect_type` checks "a list of ints" etc.

**Opting out.** Only where the task's text allows it, with a comment directly
above that quotes it::

    # task: "trains the model in place for one epoch"
    call(fn, model, loader, optimizer, allow=Allow(changed=(model, optimizer), modes=True))
    # task: "dropout draws from the global random generator"
    call(fn, model, x, allow=Allow(global_rng=True))
    # task: "returns the loss as a tensor, so backward() can run"
    expect_tensor(got, want, what=what, allow=Allow(graph=True))
    # task: "returns the accuracy (a number or a one-element tensor)"
    expect_close(got, want, what=what, number_or_tensor=True)

**Messages: the hint ladder.** ``CheckError(symptom, where=..., mistake=...)``:
the symptom states precisely what went wrong (the input, what came back, what
was expected); ``where`` says where to look; ``mistake`` names the mistake,
only when the evidence shows it. In a notebook the first failure shows the
symptom and "Run this check again for a hint."; running the same check with
the same failure again adds ``where``, the third time ``mistake``. ``str(error)``
(what tests match on, and what the autograder's feedback shows) holds every level.
Under nbgrader (``NBGRADER_EXECUTION``): the autograder's kernel renders every
level at once; Validate's fresh kernel shows the symptom and says to run the
check in the notebook for hints.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import linecache
import math
import os
import random
import re
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, Sequence
from unittest import mock

import torch

__all__ = [
    "MODE_LAYERS",
    "Allow",
    "CheckError",
    "backward_passes",
    "CallToCall",
    "differs_between_calls",
    "draws_in_words",
    "dropout_among",
    "RandomDraws",
    "FUNCTIONAL_DROPOUT_IN_EVAL",
    "Mistake",
    "call",
    "call_unchanged",
    "describe",
    "expect",
    "expect_close",
    "expect_mode",
    "expect_no_graph",
    "expect_tensor",
    "expect_type",
    "expect_value",
    "GradientArrivals",
    "HostTensor",
    "host_collate",
    "leftover_gradients",
    "modes",
    "passed",
    "same_tensor",
    "same_value",
    "substitute",
    "symptom_of",
    "tensor_mistake",
    "UNREGISTERED_LAYERS",
    "unregistered_layers",
]


_HELPERS = Path(__file__).resolve().parent.parent  # the helpers package folder
_TORCH = f"{Path(torch.__file__).resolve().parent}{os.sep}"  # PyTorch's own package folder
_RED, _BOLD, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"

# How str(CheckError) marks each level after the symptom; tests and rates match on the whole text.
WHERE_LABEL = "Where to look:"
MISTAKE_LABEL = "The mistake:"
MORE_HELP = "Run this check again for a hint."
MORE_HELP_AGAIN = "Run it once more to see the likely mistake."
# Validate (and make progress) start a fresh kernel each time: the ladder is climbed in the notebook.
MORE_HELP_VALIDATE = "Run this check in the notebook for hints: each run with the same failure shows one more."
# Times each (exercise, symptom) failure was shown in this kernel: the ladder's rung.
_SHOWN: dict[tuple[str | None, str, str | None, str | None], int] = {}


class CheckError(AssertionError):
    """A learner's answer is wrong: the symptom, where to look, and the mistake (each optional but the first).

    Args:
        symptom: what went wrong, precisely: the input, what came back, what was expected.
        where: where to look in the code (e.g. "look at which dim you reduce over").
        mistake: the named mistake and its fix; only when the evidence shows it.

    In a notebook it shows as a short red message, not a traceback through
    helpers/: IPython renders an exception through ``_render_traceback_``. The
    first time a failure is shown it gives the symptom and how to get more
    help; the same failure shown again adds ``where``, then ``mistake`` (the
    hint ladder). ``str(error)`` always holds every level. When the learner's
    own code raised (the ``__cause__``), the lines of the learner's cells it went
    through follow. It is still an exception: the cell fails, a graded cell
    scores 0, and the output's ``ename`` is ``CheckError``.
    """

    def __init__(self, symptom: str = "", *, where: str | None = None, mistake: str | None = None) -> None:
        self.symptom, self.where, self.mistake = symptom, where, mistake
        super().__init__(self._text(len(self.hints())))

    def __reduce__(self):
        return (_rebuild_check_error, (self.symptom, self.where, self.mistake))

    def hints(self) -> list[str]:
        """The rungs above the symptom, in order: where to look, then the mistake."""
        return [f"{label} {text}" for label, text in ((WHERE_LABEL, self.where), (MISTAKE_LABEL, self.mistake)) if text]

    def _text(self, rungs: int) -> str:
        """The symptom and the first ``rungs`` hints, one per line."""
        return "\n".join([self.symptom, *(f"   {hint}" for hint in self.hints()[:rungs])])

    def exercise(self) -> str | None:
        """The exercise checked: ``name`` of the ``check_<name>`` in helpers.checks that raised this."""
        for frame, _ in traceback.walk_tb(self.__traceback__):
            code = frame.f_code
            if code.co_name.startswith("check_") and _in_helpers(code.co_filename):
                return code.co_name.removeprefix("check_")
        return None

    def headline(self, rungs: int | None = None) -> str:
        """What a learner sees: the exercise (unless the message starts with it), the symptom and ``rungs`` hints."""
        message, exercise = self._text(len(self.hints()) if rungs is None else rungs), self.exercise()
        named = exercise is None or message.startswith(exercise)
        return f"✘ {message}" if named else f"✘ {exercise}: {message}"

    def rung(self) -> int:
        """How many hints to show now: one more each time this exercise fails with this symptom in this kernel.

        Numbers in the symptom do not make it another: an answer that keeps state between calls (a list on its
        class, say) shows other numbers at every run, and its learner must still be able to climb. The hints do:
        another wrong answer with other hints starts again at the bottom."""
        key = (self.exercise(), re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", self.symptom), self.where, self.mistake)
        _SHOWN[key] = _SHOWN.get(key, 0) + 1
        return min(_SHOWN[key] - 1, len(self.hints()))

    def _render_traceback_(self) -> list[str]:
        execution = os.environ.get("NBGRADER_EXECUTION")  # nbgrader sets it for the kernels it runs
        # the autograder's feedback is read once, after the deadline: every rung at once
        rungs = len(self.hints()) if execution == "autograde" else self.rung()
        lines = [f"{_RED}{_BOLD}{self.headline(rungs)}{_RESET}"]
        if rungs < len(self.hints()):
            more = MORE_HELP_VALIDATE if execution == "validate" else MORE_HELP if rungs == 0 else MORE_HELP_AGAIN
            lines.append(f"{_RED}   ({more}){_RESET}")
        cause = self.__cause__
        frames = _cell_frames(cause.__traceback__) if cause is not None else []
        if frames:
            lines.append(f"{_RED}your code raised {type(cause).__name__} here:{_RESET}")
            lines += frames
        return lines


def symptom_of(text: str) -> str:
    """The symptom of a CheckError's ``str()`` (an output's ``evalue``): the text before its first hint."""
    for label in (WHERE_LABEL, MISTAKE_LABEL):
        text = text.split(f"\n   {label} ", 1)[0]
    return text


def _rebuild_check_error(symptom: str, where: str | None, mistake: str | None) -> CheckError:
    return CheckError(symptom, where=where, mistake=mistake)


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
    """A known wrong answer and what to tell the learner about it.

    Args:
        message: the named mistake and how to fix it (the ladder's last rung).
        wrong_answer: a zero-argument function that computes what the mistaken
            code would return for the current input. Exceptions inside it mean
            "this mistake cannot produce this answer".
        matches: instead of ``wrong_answer``, a predicate on the learner's result.
        where: where to look (the ladder's middle rung), e.g. "look at which dim you reduce over".
    """

    message: str
    wrong_answer: Callable[[], Any] | None = None
    matches: Callable[[Any], bool] | None = None
    where: str | None = None

    def explains(self, got: Any) -> bool:
        try:
            if self.matches is not None:
                return bool(self.matches(got))
            if self.wrong_answer is not None:
                # bool() here: == on a NumPy array (a learner's return value) gives an array, not a truth value
                return bool(same_value(got, self.wrong_answer()))
        except Exception:  # a mistake that cannot even be computed here is not this one
            return False
        return False


@dataclass(frozen=True, eq=False)
class Allow:
    """What a learner's function may do that the framework's default rules forbid.

    Turn a rule off only where the task's text allows it, with a comment
    directly above quoting it, e.g. ``# task: "trains the model in place"``.

    Attributes:
        changed: arguments (by identity) the function may change: everything
            about them, including a module's train/eval mode.
        global_rng: it may draw from (or reseed) the global random generators
            of torch, CUDA, Python's ``random`` and NumPy; ``"draws"``: it may
            draw from them but not reset them (manual_seed, random.seed...).
        grad_mode: it may leave gradient tracking (or inference mode) switched.
        dtype: it may leave the default dtype changed.
        anomaly: it may leave anomaly detection switched.
        threads: it may change torch's thread count.
        modes: it may change the train/eval mode of module arguments (and only that).
        graph: (comparisons) the result may hold an autograd graph the reference's does not.
    """

    changed: tuple = ()
    global_rng: bool | str = False
    grad_mode: bool = False
    dtype: bool = False
    anomaly: bool = False
    threads: bool = False
    modes: bool = False
    graph: bool = False

    def lets_change(self, value: Any) -> bool:
        return any(value is allowed for allowed in self.changed)


def _invoke(fn: Callable[..., Any], args: tuple, kwargs: dict, tensors: dict[int, str] | None = None) -> Any:
    """Call a learner's function, turning a crash into a readable CheckError. ``tensors``: the argument tensors as
    they were before the call, by id (a function that changed one in place and then raised is shown what it was
    given)."""
    name = getattr(fn, "__name__", repr(fn))
    if not callable(fn):
        raise CheckError(f"the check expected a function, but was given {describe(fn)} ({type(fn).__name__})",
                         where="look at the argument you pass to the check: the name of your function, no ()",
                         mistake="pass the function itself, not its result: check_x(my_fn), not check_x(my_fn(...))")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckError(f"{name} is not written yet: it raised NotImplementedError",
                         where=f"look in the cell that defines {name} for `raise NotImplementedError()`",
                         mistake="replace `raise NotImplementedError()` with your code") from None
    except CheckError:
        raise
    except NotMovedError as error:
        raise CheckError(f"{name} used a batch without moving it to the device: a tensor of the batch reached the "
                         "model or the loss still on the host",
                         where="look at each tensor of the batch (inputs and labels) between the loader and the "
                               "model or the loss",
                         mistake="call .to(device) on every tensor of the batch before the model or the loss sees "
                                 "it. (Without a GPU nothing seems wrong; on a GPU this is the error 'Expected all "
                                 "tensors to be on the same device'.)") from error
    except Exception as error:
        shown = _arguments_text(args, kwargs, tensors or {})
        raise CheckError(f"{name}({shown}) raised {type(error).__name__}: {error}",
                         where=_where_raised(error)) from error


# Where to look when the learner's code raised, by the words of the error; the default names the line.
_WHERE_RAISED = (
    # first: CUDA's own error on a machine without a GPU (its words hold a link to ".../index.aspx")
    (("NVIDIA driver", "not compiled with CUDA"),
     "look at the line that raised: it reached CUDA itself, and the machine that checks your code has no GPU. Use "
     "the calls the task names: the check stands in for those"),
    # "mat1 and mat2 must have the same dtype" is about dtypes, though it names the matrices
    (("same dtype", "scalar type"),
     "look at the line that raised and print the .dtype of each tensor on it: two of them do not go together"),
    (("shape", "size of tensor", "dimension", "mat1 and mat2", "expand", "broadcast"),
     "look at the line that raised (listed below the message in a notebook): print the .shape of each tensor on it "
     "and compare them with what that operation needs"),
    (("could not infer output dtype",),
     "look at the line that raised: an operation on it (mean() is one) needs a floating-point tensor; convert the "
     "bool or integer one with .float() first"),
    (("dtype", "scalar type", "not implemented for"),
     "look at the line that raised and print the .dtype of each tensor on it: two of them do not go together"),
    (("device", "cuda", "mps"),
     "look at the line that raised and print the .device of each tensor on it"),
    (("index", "out of range", "out of bounds"),
     "look at the line that raised and at each index on it: compare it with the size of the dim it indexes"),
    (("grad", "backward", "leaf", "inplace", "in-place"),
     "look at the line that raised and at the tensors that require grad on it (backward, in-place changes, .grad)"),
)


_MATMUL_SIZES = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _where_raised(error: Exception) -> str:
    """Where to look when the learner's code raised ``error``: by its words, else the line it came from."""
    text = str(error)
    sizes = _MATMUL_SIZES.search(text)
    if sizes:
        rows, inner, other_inner, cols = sizes.groups()
        if any(frame.f_code.co_filename.endswith(os.path.join("nn", "modules", "linear.py"))
               for frame, _ in traceback.walk_tb(error.__traceback__)):
            return (f"look at the nn.Linear that raised: it was given {rows} rows of {inner} features, but its "
                    f"in_features is {other_inner}; print the .shape of what reaches it")
        transposed = f"; b's last size is {cols}, which would line up: transpose b (b.T)" if cols == inner else ""
        return (f"look at the matrix product on the line that raised: a @ b needs a's last size to equal b's first "
                f"size, and here a is {rows}x{inner} and b is {other_inner}x{cols}{transposed}")
    if isinstance(error, AttributeError) and "has no attribute" in text:
        # its words name the attribute ('gradcheck' is not about gradients): the name itself is what to look at
        return ("look at the name after the dot on the line that raised: the object before it has no attribute of "
                "that name (check its spelling, and what the object is: print(type(obj)))")
    for words, where in _WHERE_RAISED:
        if any(word.lower() in text.lower() for word in words):
            return where
    return ("look at the line of your code that raised (listed below the message in a notebook) and the values it "
            "uses there")


def call(fn: Callable[..., Any], *args: Any, allow: Allow = Allow(), nothing_random: bool = False,
         **kwargs: Any) -> Any:
    """Call a learner's function on the caller's own arguments and enforce the default rules.

    Pass the originals (not clones). After the call, every argument must be as
    it was (tensors, lists, dicts, tuples, NumPy arrays, modules, optimizers,
    datasets, data loaders), and so must the state that outlives the call
    (global random generators, grad and inference mode, default dtype, anomaly
    detection, thread count). The caller's global state and the train/eval
    modes of module arguments are restored in every case, unless ``allow``
    lets the function change them; then the first violation is raised as a
    CheckError naming it. A crash of the learner's code becomes a CheckError
    too. ``allow``: see :class:`Allow`; quote the task text that permits it.

    Drawing from a global generator is a mistake when the call hands the
    function a generator or a seed to draw from instead, or when
    ``nothing_random`` says the task asks for nothing random (quote it);
    resetting one (manual_seed, random.seed, set_rng_state...) always is.
    """
    if not callable(fn):
        return _invoke(fn, args, kwargs)
    name = getattr(fn, "__name__", "your function")
    labelled = _labelled(fn, args, kwargs)
    watched = [(label, value, _snapshot(value)) for label, value in labelled if not allow.lets_change(value)]
    state = _global_state()
    given_tensors = _tensors_as_given(args, kwargs)  # as given: the function may change them before it raises

    def left_behind(after: dict) -> CheckError | None:
        # a DataLoader draws its workers' base seed from the global generator each time it is iterated, even
        # without shuffling: that draw is the library's, not a random choice of the learner's
        seen = {**after, "torch_rng": state["torch_rng"]} if _only_loader_seeds(state, after, loader_seeds[0]) \
            else after
        return _state_problem(name, state, seen, allow, randomness_given=_gives_randomness(labelled),
                              reseeded=reseeds, nothing_random=nothing_random)

    try:
        with _watching_reseeds() as reseeds, _counting_loader_seeds() as loader_seeds, \
                _handing([*args, *kwargs.values()] if _from_course(sys._getframe(1)) else []):
            try:
                result = _invoke(fn, args, kwargs, given_tensors)
            finally:
                for look in list(_AFTER_LEARNER_CODE):
                    look()
    except BaseException as error:
        after = _global_state()
        _give_back(state, after, watched, allow)
        if isinstance(error, CheckError) and error.__cause__ is not None:
            # the learner's code raised: a check for which raising is the task's answer asks expected_raise,
            # which names the state the function left behind on its way out
            error.left_behind = left_behind(after)
        raise
    after, observed = _global_state(), [_snapshot(value) for _, value, _ in watched]
    _give_back(state, after, watched, allow)  # before reporting: one failure must not spoil the next check
    for (label, value, before), now in zip(watched, observed):
        change = _change(before, now, allow)
        if change:
            what, fix = change
            kind = _kind_word(value)
            raise CheckError(f"{name} changed the {kind} it was given as {label}: {what}",
                             where=f"look at every line that uses {label}: {_WRITES.get(kind, 'anything that changes it')}",
                             mistake=f"the {kind} belongs to the caller, who still uses it; {fix}")
    problem = left_behind(after)
    if problem is not None:
        raise problem
    return result


def expected_raise(error: CheckError, kinds: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException | None:
    """The learner's own exception behind ``error`` (a CheckError from :func:`call`) when it is one of ``kinds``,
    which the task asks the function to raise; else None.

    Raising as asked does not excuse what the function left changed on its way out (gradient tracking switched
    off, a reseeded generator...): that is raised instead, as :func:`call` does for a function that returns.
    """
    cause = error.__cause__
    if not isinstance(cause, kinds):
        return None
    left = getattr(error, "left_behind", None)
    if left is not None:
        raise CheckError(f"{left.symptom} (when it raised {type(cause).__name__}, as asked)", where=left.where,
                         mistake=left.mistake or "leave the caller's state as it was on every way out, a raise "
                                                 "included: a `with` block (torch.no_grad(), ...) does that for you")
    return cause


_RANDOMNESS_NAMES = ("seed", "generator", "rng", "g")


def _gives_randomness(labelled: list[tuple[str, Any]]) -> bool:
    """Whether the call hands the function its own randomness: a generator, or an argument named like a seed."""
    for label, value in labelled:
        if isinstance(value, (torch.Generator, random.Random)) or label.strip("`").lower() in _RANDOMNESS_NAMES:
            return True
        if type(value).__module__.startswith("numpy.random"):
            return True
    return False


# What changes an argument of each kind in place: where to look when one changed.
_WRITES = {
    "tensor": "in-place operations (x -= ..., x[...] = ..., methods ending in _) and backward() through it",
    "NumPy array": "in-place operations (a -= ..., a[...] = ...)",
    "list": "methods that change a list in place (pop, append, remove, sort, del, lst[i] = ...)",
    "dict": "d[key] = ..., del, pop() and update()",
    "tuple": "in-place changes of the items inside it",
    "model": "model.train()/eval(), optimizer steps, assignments to its layers, in-place changes of its weights",
    "optimizer": "optimizer.step() and assignments into param_groups",
    "dataset": "assignments to its attributes and in-place changes of its tensors or lists",
}


def _give_back(state: dict, after: dict, watched: list, allow: Allow) -> None:
    """Restore the caller's global state and the modes of its modules, except what ``allow`` lets change."""
    _restore_global_state(state, after, allow)
    if not allow.modes:
        for _, value, before in watched:
            _restore_modes(value, before)


def call_unchanged(fn: Callable[..., Any], *args: Any, allow: Allow = Allow(), **kwargs: Any) -> Any:
    """The same as :func:`call` (which now enforces the rules by default); kept while lesson modules still use it."""
    return call(fn, *args, allow=allow, **kwargs)


def _labelled(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """Each argument with the name the learner's function gives it (`x`), else its position."""
    try:
        # a module is called as model(x), which runs its forward: the names are forward's
        named = fn.forward if isinstance(fn, torch.nn.Module) else fn
        positional = list(inspect.signature(named).bind_partial(*args, **kwargs).arguments.items())
        if len(positional) == len(args) + len(kwargs) and all(
                v is a for (_, v), a in zip(positional, list(args) + list(kwargs.values()))):
            return [(f"`{param}`", value) for param, value in positional]
    except (TypeError, ValueError):
        pass
    return [(f"argument {i + 1}", a) for i, a in enumerate(args)] + [(f"`{k}`", v) for k, v in kwargs.items()]


def describe(value: Any) -> str:
    """A short, learner-readable description of a value (tensors by shape and dtype)."""
    if isinstance(value, torch.Tensor):
        return f"tensor(shape={list(value.shape)}, dtype={value.dtype}, device={value.device.type})"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__  # not "<function f at 0x7f...>"
    text = " ".join(repr(value).split())  # one line: a list of tensors prints over several
    return text if len(text) <= 60 else text[:57] + "..."


def _arguments_text(args: tuple, kwargs: dict, tensors: dict[int, str]) -> str:
    """The arguments of a call as a message shows them: ``tensor([1, 10, 2], dtype=torch.int64), lr=0.1``;
    a tensor found in ``tensors`` (by id) as it was described there."""
    def text(value: Any) -> str:
        return tensors.get(id(value)) or _describe_argument(value)

    return ", ".join([text(a) for a in args] + [f"{k}={text(v)}" for k, v in kwargs.items()])


def _tensors_as_given(args: tuple, kwargs: dict) -> dict[int, str]:
    """Each tensor argument described before the call (cheap: values only for a dozen or fewer)."""
    return {id(value): _describe_argument(value) for value in (*args, *kwargs.values())
            if isinstance(value, torch.Tensor)}


# An argument tensor with at most this many values is shown whole when the learner's code raised on it.
_SHOWN_VALUES = 12


def _describe_argument(value: Any) -> str:
    """An argument the check passed, as shown when the learner's code raised on it: a small tensor with its
    values (``tensor([2, 0, 1], dtype=torch.int64)``), since the values are often why it raised (an index out of
    range, a label of 10); anything else as :func:`describe`. Only inputs are shown this way, never an answer."""
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and 0 < value.numel() <= _SHOWN_VALUES \
            and type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided:
        try:
            values = _TENSOR_NUMPY(_TENSOR_CPU(value.detach().resolve_conj().resolve_neg()))
        except (TypeError, RuntimeError):  # a dtype NumPy does not have (bfloat16...)
            return describe(value)
        return f"tensor({_values_text(values.tolist())}, dtype={value.dtype})"
    return describe(value)


def _values_text(values: Any) -> str:
    """Nested lists of numbers as torch prints them, floats to 4 significant digits."""
    if isinstance(values, list):
        return "[" + ", ".join(_values_text(v) for v in values) + "]"
    if not isinstance(values, float):
        return str(values)
    text = f"{values:.4g}"
    return text if any(c in text for c in ".eni") else text + "."  # 1. as torch shows a whole float


@contextlib.contextmanager
def _plain_comparison() -> Iterator[None]:
    """Compare tensors as PyTorch itself does: no tensor subclass's ``__torch_function__`` and no torch function or
    dispatch mode left active by a cell (``TorchFunctionMode().__enter__()``) decides what a comparison returns."""
    from torch.utils._python_dispatch import _disable_current_modes

    with torch._C.DisableTorchFunction(), _disable_current_modes():
        yield


def _as_plain_tensor(value: Any) -> torch.Tensor | None:
    """``value`` as PyTorch sees it: an ordinary tensor, or one of PyTorch's or the course's own tensor types
    (a Parameter, a DTensor, the stand-in device's), as it is; a tensor subclass the notebook wrote as an
    ordinary tensor (so its own ``device``, ``shape`` or ``dtype`` cannot speak for it); and None for what only
    claims to be a tensor (a ``__class__`` that lies)."""
    kind = type(value)
    if not issubclass(kind, torch.Tensor):
        return None
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return value
    module = sys.modules.get(kind.__module__)
    where = os.path.realpath(getattr(module, "__file__", None) or "")
    if getattr(module, kind.__name__, None) is kind and where.startswith((f"{_HELPERS}{os.sep}", _TORCH)):
        return value
    with torch._C.DisableTorchFunction():
        return torch.Tensor.as_subclass(value, torch.Tensor)


def same_value(a: Any, b: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Equal shape, dtype and (close) values for tensors; == or isclose for the rest."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = _as_plain_tensor(a), _as_plain_tensor(b)
        if a is None or b is None:
            return False
        if a.shape != b.shape or a.dtype != b.dtype or a.device.type != b.device.type:
            return False
        if a.device.type == "meta":
            return True
        with _plain_comparison():
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
    """The first mistake that explains ``got``. When the first is a computed wrong answer (``wrong_answer``) and
    other computed wrong answers give the same value on this input, the input cannot tell them apart: every one
    is named, so that a coincidence of this case is not presented as the cause."""
    mistakes = list(mistakes)
    first = next((m for m in mistakes if m.explains(got)), None)
    if first is None or first.wrong_answer is None:
        return first
    alike = [m for m in mistakes if m is not first and m.wrong_answer is not None and m.message != first.message
             and m.explains(got)]
    if not alike:
        return first
    causes = "; or ".join(m.message for m in (first, *alike))
    return Mistake(f"this case cannot tell apart more than one mistake: {causes}", matches=lambda _: True,
                   where=first.where)


def expect(condition: bool, message: str, *, where: str | None = None, mistake: str | None = None) -> None:
    """Raise CheckError(message, where=..., mistake=...) unless ``condition`` holds."""
    if not condition:
        raise CheckError(message, where=where, mistake=mistake)


# Where to look, when a comparison fails and no Mistake says more precisely.
WHERE_TYPE = "look at what your function returns (every return statement)"
WHERE_SHAPE = ("look at each operation that changes the shape: reductions (dim=, keepdim=), reshape/view, "
               "indexing, broadcasting")
WHERE_DTYPE = "look at where the dtype is decided: literals (0 vs 0.0), dtype= arguments, conversions (.float(), .long())"
WHERE_DEVICE = "look at where tensors are created (device=) or moved (.to(device))"
WHERE_VALUES = "work through the small example by hand and compare each step of your code with it"
# where no example is shown (a number, or tensors too large to read): the learner makes one
WHERE_VALUES_NO_EXAMPLE = ("compare each step of your code with the task on a small input of your own, one whose "
                           "answer you can work out by hand")
WHERE_GRAPH = "look at the returned value: is it computed from tensors that require grad (a model's output, a loss)?"


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
    allow: Allow = Allow(),
) -> None:
    """Check that ``got`` equals the reference tensor ``expected``.

    The symptom is the first comparison that fails, in the order type, shape,
    dtype, device, values (with a small worked example when the tensors are
    small). ``where`` and ``mistake`` come from the first of ``mistakes`` that
    explains ``got``; failing that, from what ``got``'s relation to
    ``expected`` (and to the input ``given``, when passed) shows: transposed, a
    constant factor, rounded, reordered, shifted... Equal values still fail when
    ``got`` holds an autograd graph and ``expected`` does not, unless
    ``allow=Allow(graph=True)``.
    """
    found = None
    if not isinstance(got, torch.Tensor) or not same_value(got, expected, atol, rtol):
        found = _first_explained(got, mistakes)

    def fail(symptom: str, where: str, cause: str | None = None) -> None:
        raise CheckError(symptom, where=found.where or where if found else where,
                         mistake=found.message if found else cause)

    if not isinstance(got, torch.Tensor):
        fail(f"{what} should return a tensor, but returned {describe(got)}", WHERE_TYPE,
             "a NumPy function (or .numpy()) gave you a NumPy array: work with torch operations, which keep the "
             "tensor (and its device), or convert the result back with torch.from_numpy"
             if type(got).__module__ == "numpy" else None)
    if got.shape != expected.shape:
        fail(f"{what} should have shape {list(expected.shape)}, but yours has shape {list(got.shape)}"
             + _example(got, expected, given), WHERE_SHAPE, _diagnose_shape(got, expected, given))
    if check_dtype and got.dtype != expected.dtype:
        fail(f"{what} should have dtype {expected.dtype}, but yours has dtype {got.dtype}",
             WHERE_DTYPE, _diagnose_dtype(got, expected, given))
    if got.device.type != expected.device.type:
        fail(f"{what} should be on device '{expected.device.type}', but yours is on '{got.device.type}'", WHERE_DEVICE)
    if expected.device.type != "meta" and not same_value(got.to(expected.dtype), expected, atol, rtol):
        values = got.detach().to(expected.dtype)
        cause = _diagnose_values(values, expected, given, atol, rtol)
        example = _example(values, expected, given)
        fail(f"{what} has the right shape and dtype but {_wrong_values(values, expected, atol, rtol)}" + example,
             WHERE_VALUES if example else WHERE_VALUES_NO_EXAMPLE,
             None if cause is None or cause.startswith("wrong values") else cause)
    if found is not None:  # equal after a dtype conversion the check ignores, but a known mistake's answer
        fail(f"{what} is not the expected result", WHERE_VALUES_NO_EXAMPLE)
    expect_no_graph(got, expected, what=what, allow=allow)


def tensor_mistake(got: Any, expected: torch.Tensor, *, given: torch.Tensor | None = None,
                   mistakes: Sequence[Mistake] = ()) -> str | None:
    """The mistake :func:`expect_tensor` would name for ``got`` against ``expected`` (a softmax on top, a constant
    factor, transposed...), or None when it names none or ``got`` is right. For a check whose own symptom says more
    than expect_tensor's, but which still wants the framework's reading of the values."""
    try:
        expect_tensor(got, expected, what="the output", given=given, mistakes=mistakes)
    except CheckError as error:
        return error.mistake
    return None


def _wrong_values(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """The symptom for same-shape tensors with different values: the first wrong element and how many are wrong."""
    if expected.is_floating_point() or expected.is_complex():
        bad = ~torch.isclose(got.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True) \
            if not expected.is_complex() else ~torch.isclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
        index = int(bad.flatten().nonzero()[0])
        shown = f"{got.flatten()[index].item():.6g}, expected {expected.flatten()[index].item():.6g}"
    else:
        bad = got != expected
        index = int(bad.flatten().nonzero()[0])
        shown = f"{got.flatten()[index].item()}, expected {expected.flatten()[index].item()}"
    if bad.numel() == 1:  # one number: no index to give
        return f"wrong values: it is {shown}"
    return f"wrong values: at flat index {index} it is {shown} ({int(bad.sum())} of {bad.numel()} elements are wrong)"



# ---------------------------------------------------------------- diagnosis of a wrong tensor
# Each diagnosis names a relation between the learner's tensor and the reference
# that holds exactly (within tolerance), so the message says what is true of the
# answer; a likely cause is added only where that relation has one usual cause.

_EXAMPLE_ELEMENTS = 12


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    if a.shape != b.shape:
        return False
    with _plain_comparison():
        if a.is_floating_point() or b.is_floating_point():
            return bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True))
        return bool(torch.equal(a, b))


def _show(t: torch.Tensor) -> str:
    """The values as a list, floats to 4 decimals; a value that would show as 0.0 but is not keeps 4 significant
    digits (1e-07 is not 0.0: a learner reading "expected 0.0" would chase zeros that are not there)."""
    values = t.detach().cpu()
    if not values.is_floating_point():
        return str(values.tolist())
    exact = values.double()
    rounded = exact.round(decimals=4)
    tiny = (rounded == 0) & (exact != 0)
    if not tiny.any():
        return str(rounded.tolist())

    def shown(value: Any, exact_value: Any) -> Any:
        if isinstance(value, list):
            return [shown(v, e) for v, e in zip(value, exact_value)]
        return float(f"{exact_value:.4g}") if value == 0 and exact_value != 0 else value
    return str(shown(rounded.tolist(), exact.tolist()))


def _example(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str:
    """A small worked example (input, expected, yours) when the tensors are small enough to read."""
    if expected.numel() > _EXAMPLE_ELEMENTS or got.numel() > _EXAMPLE_ELEMENTS:
        return ""
    small_input = isinstance(given, torch.Tensor) and given.device.type != "meta" and given.numel() <= _EXAMPLE_ELEMENTS
    head = f"\n   input:    {_show(given)}" if small_input else ""
    return f"{head}\n   expected: {_show(expected)}\n   yours:    {_show(got)}"


def _factor_name(factor: float, given: torch.Tensor | None, reduces: bool = True) -> str:
    """Words for a constant factor, naming the size it equals when one of the input's sizes fits. When the
    function ``reduces`` (its answer has fewer values than its input) a missing or extra 1/N is the likely cause;
    for an answer of the input's size (relu written as x + x.abs() on 2 rows) the size may be a coincidence, so
    it is mentioned only as something to check."""
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
            if named and not reduces:
                return (f"every value is the expected one {word} {n}: a constant factor is wrong or missing ({n} is "
                        f"also {named}: if your code divides by a count, check that it is the right one)")
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
    got, expected = got.detach(), expected.detach()  # values only: reading them must not warn about a graph
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
    # whole numbers where the expected values are not (first: one element is always some factor of another)
    if expected.is_floating_point() and not _close(expected, expected.round(), atol, rtol):
        for name, op in (("rounded to whole numbers", torch.round), ("rounded down (floor)", torch.floor),
                         ("rounded towards zero (an int conversion?)", torch.trunc),
                         ("rounded up (ceil)", torch.ceil)):
            if _close(got, op(expected), atol, rtol):
                return f"your values are the expected ones {name}"
        for decimals in (1, 2, 3):
            if not _close(expected, expected.round(decimals=decimals), atol, rtol) \
                    and _close(got, expected.round(decimals=decimals), atol, rtol):
                return f"your values are the expected ones rounded to {decimals} decimal{'s' if decimals > 1 else ''}"
    # the expected values computed in a lower precision (float16 or bfloat16) and cast back: every value is one that
    # precision holds exactly, and none is further off than its rounding
    if expected.dtype in (torch.float32, torch.float64) and got.dtype == expected.dtype:
        for low in (torch.bfloat16, torch.float16):  # bfloat16's values are float16's too, mostly: it goes first
            step = torch.finfo(low).eps
            held = bool(torch.equal(got.to(low).to(got.dtype), got))
            if held and bool(((g - e).abs() <= 4 * step * e.abs()).all()):
                name = str(low).removeprefix("torch.")
                return (f"every value of yours is one {name} can hold, off by no more than {name}'s rounding (about "
                        f"{step:.1g} of each value): computed in {name} (.half(), .bfloat16(), autocast) and cast "
                        "back? Keep the input's dtype throughout")
    # a constant factor (includes the sign flip); it takes two nonzero values to show one
    if int((e.abs() > atol).sum()) >= 2:
        factor = float((g * e).sum() / (e * e).sum())
        if factor != 0 and not math.isclose(factor, 1.0, rel_tol=1e-4) and _close(g, factor * e, atol, rtol):
            return _factor_name(factor, given, reduces=isinstance(given, torch.Tensor)
                                and expected.numel() < given.numel())
    # transposed (square matrices, or the last two dimensions of a batch)
    if got.dim() >= 2 and got.shape[-1] == got.shape[-2] and _close(got, expected.transpose(-1, -2), atol, rtol):
        return "your result is the transpose of the expected one (rows and columns swapped)"
    # an activation applied on top of the expected values: probabilities (or log-probabilities) where raw scores
    # are wanted. The relation is exact, so it is stated; "scores" is the usual reason, so it is a question.
    if expected.is_floating_point() and got.dim() >= 1:
        for d in range(got.dim()):
            if got.shape[d] < 2:
                continue
            for name, op in (("softmax", torch.softmax), ("log-softmax", torch.log_softmax)):
                if _close(got, op(e, dim=d), atol, rtol):
                    return (f"your values are the {name} of the expected ones along dim {d}: a {name} where raw "
                            "scores (logits) are wanted? CrossEntropyLoss applies log-softmax itself")
        if _close(got, torch.sigmoid(e), atol, rtol):
            return ("your values are the sigmoid of the expected ones: a sigmoid where raw scores (logits) are "
                    "wanted? BCEWithLogitsLoss applies it itself")
    # the right values, in the wrong place
    for d in range(got.dim()):
        if got.shape[d] < 2:
            continue
        for shift in (1, -1):
            if _close(got, expected.roll(shift, dims=d), atol, rtol):
                # where the values that wrap around are zeros (padding), a one-place shift is as likely padding
                # on the wrong side or in the wrong amount as an index that is off by one: state the shift only
                wrapped = expected.select(d, -1 if shift == 1 else 0)
                guess = "" if bool((wrapped == 0).all()) else " (an off-by-one index?)"
                return f"your values are the expected ones shifted by one position along dim {d}{guess}"
    if _close(got.flatten().sort().values, expected.flatten().sort().values, atol, rtol):
        return "you have the right values, but in the wrong order"
    # an offset: every value off by the same amount
    offset = float((g - e).mean())
    if got.numel() >= 2 and abs(offset) > atol and _close(g, e + offset, atol, rtol):
        return f"every value is off by the same amount ({offset:+.4g})"
    # a scale and a shift together (an offset alone, or a factor alone, is named above): the values normalised
    # once more, or once less, than wanted
    if got.numel() >= 3 and float(e.std()) > atol:
        scale = float(((g - g.mean()) * (e - e.mean())).sum() / ((e - e.mean()) ** 2).sum())
        shift = float(g.mean() - scale * e.mean())
        if scale != 0 and not math.isclose(scale, 1.0, rel_tol=1e-4) and _close(g, scale * e + shift, atol, rtol):
            return (f"every value is the expected one times {scale:.4g}, plus {shift:+.4g}: a scale and a shift that "
                    "should not be there (a normalisation applied twice, or one left out?)")
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
    if wrong.any() and wrong.sum() < wrong.numel() and got.numel() > 1:
        index = int(wrong.flatten().nonzero()[0])
        return (f"wrong values: at flat index {index} it is {got.flatten()[index].item():.6g}, expected "
                f"{expected.flatten()[index].item():.6g} ({int(wrong.sum())} of {wrong.numel()} elements are wrong)")
    return None


def _diagnose_dtype(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str | None:
    if given is not None and isinstance(given, torch.Tensor) and given.dtype == expected.dtype \
            and not expected.is_floating_point() and got.is_floating_point():
        return (f"the input was {given.dtype} and your code turned it into floats: one float in the computation "
                "(a literal 0.0, a .float()) promotes the whole result")
    if expected.is_floating_point() and not got.is_floating_point() and got.device.type != "meta" \
            and expected.device.type != "meta" and got.shape == expected.shape:
        if _close(got.to(expected.dtype), expected.trunc(), 1e-5, 1e-4) and not _close(expected, expected.trunc()):
            return "your values are whole numbers: they were truncated by a conversion to an integer type"
    if _are_positions(got, expected, given):
        return ("your result holds positions (indices) into the input, not the values found there: torch.where(mask) "
                "and nonzero() give positions, while indexing with the mask itself (x[mask]) gives the values")
    return None


def _are_positions(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> bool:
    """Integers, where floats were expected, that all index into the input (its first dimension or its elements)."""
    if not (isinstance(given, torch.Tensor) and expected.is_floating_point() and got.dtype == torch.int64
            and got.numel() > 0 and given.numel() > 0 and "meta" not in (got.device.type, given.device.type)):
        return False
    within = bool(((got >= 0) & (got < max(given.shape[0] if given.dim() else 1, given.numel()))).all())
    return within and not _close(got.to(expected.dtype), expected)


def _diagnose_shape(got: torch.Tensor, expected: torch.Tensor, given: torch.Tensor | None) -> str | None:
    """What the shapes (and, where they line up, the values) say about the mistake, or None."""
    same_data = got.numel() == expected.numel() and got.device.type != "meta" and expected.device.type != "meta" \
        and got.dtype == expected.dtype
    # with a dimension of size 1 among the last two, a transpose and a reshape give the same tensor: no evidence
    if same_data and got.dim() == expected.dim() and got.dim() >= 2 and 1 not in expected.shape[-2:] \
            and _close(got, expected.transpose(-1, -2)):
        return "your result is the transpose of the expected one (rows and columns swapped)"
    if same_data and _close(got.squeeze(), expected.squeeze()):
        if got.dim() > expected.dim():
            return "the values are right but there is an extra dimension of size 1 (keepdim=True, or a missing squeeze)"
        return ("the values are right but a dimension of size 1 is missing: a reduction without keepdim=True drops "
                "it, and so does squeeze() with no dim (it drops every dimension of size 1, those that are 1 only "
                "because an input has one row)")
    if same_data:
        if not _close(got.flatten(), expected.flatten()):
            return None
        return ("the values are right and in the right order, but split into other sizes: look at which sizes "
                "your reshape (or view) keeps"
                + (f", and keep dimension 0 (size {expected.shape[0]}) as it is" if given is not None
                   and given.dim() >= 1 and given.shape[0] == expected.shape[0] != got.shape[0] else ""))
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
    number_or_tensor: bool = False, python_number: bool | None = None, given: torch.Tensor | None = None,
    allow: Allow = Allow(),
) -> None:
    """Check a Python number against the reference number.

    A one-element tensor is not a Python number: it fails unless
    ``number_or_tensor=True`` (quote the task that allows it); such a tensor
    must then not hold an autograd graph unless ``allow=Allow(graph=True)``.
    A wrong number is diagnosed like a wrong tensor: a constant factor (naming
    the input's size it equals, when ``given`` is passed) or a flipped sign.
    ``python_number`` is ignored (a Python number is what is wanted by default).
    """
    number = _as_number(got)
    found = None if same_value(number, expected, atol, rtol) else _first_explained(got, mistakes)
    where = found.where if found and found.where else None
    if not isinstance(number, (int, float)) or isinstance(number, bool):
        raise CheckError(f"{what} should be a number ({expected:.6g}), but is {describe(got)}",
                         where=where or WHERE_TYPE, mistake=found.message if found else None)
    if not same_value(float(number), float(expected), atol, rtol):
        cause = None
        if expected != 0 and number != 0 and math.isfinite(number) and math.isfinite(expected):
            # one number matching a multiple is weak evidence: say so only for a sign or a size of the input
            words = _factor_name(number / expected, given)
            if "sign" in words or " is the size" in words or "number of elements" in words:
                cause = words.replace("every value is", "it is").replace("every value has", "it has")
        if type(number) is int and math.isfinite(expected) and expected != int(expected) \
                and number in (math.floor(expected), math.trunc(expected)):
            cause = ("yours is a whole number, the expected one rounded down: an integer division (//) or an int() "
                     "on the way drops the fraction; divide with /")
        raise CheckError(f"{what} should be {expected:.6g}, but yours is {number:.6g}",
                         where=where or WHERE_VALUES_NO_EXAMPLE, mistake=found.message if found else cause)
    if isinstance(got, torch.Tensor) and not number_or_tensor:
        raise CheckError(f"{what} should be a Python number, but is {describe(got)} (its value, {number:.6g}, is right)",
                         where=WHERE_TYPE,
                         mistake="a one-element tensor is not a Python number: .item() converts it (and lets go of "
                                 "the autograd graph and the device memory it may hold)")
    expect_no_graph(got, expected, what=what, allow=allow)


def _as_number(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def _attached(value: Any, path: str = "", depth: int = 0) -> list[str]:
    """Where in ``value`` (a tensor, or tensors in lists, tuples and dicts) a tensor requires grad."""
    if isinstance(value, torch.Tensor):
        return [path] if value.requires_grad else []
    if depth >= _DEPTH:
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _attached(v, f"{path}[{k!r}]", depth + 1)]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _attached(v, f"{path}[{i}]", depth + 1)]
    return []


def expect_no_graph(got: Any, expected: Any, *, what: str, allow: Allow = Allow()) -> None:
    """``got`` holds no tensor that requires grad (a graph kept alive) unless ``expected`` does too, or ``allow.graph``."""
    if allow.graph or _attached(expected):
        return
    paths = _attached(got)
    if paths:
        inside = f" (at {paths[0]})" if paths[0] else ""
        raise CheckError(f"{what} has the right value, but a tensor in it{inside} is still attached to the autograd "
                         "graph (requires_grad=True); the expected result is not",
                         where=WHERE_GRAPH,
                         mistake="a value kept from a computation with gradients holds on to its whole graph (and "
                                 "its memory): take .item() for a number, or .detach() a tensor you keep or return "
                                 "(a running total: total += loss.item())")


def expect_value(got: Any, expected: Any, *, what: str, mistakes: Sequence[Mistake] = (), atol: float = 1e-5,
                 rtol: float = 1e-4, allow: Allow = Allow()) -> None:
    """Check any value (numbers, tensors, lists, tuples, dicts of them) against the reference's, then the graph rule."""
    if not same_value(got, expected, atol, rtol):
        found = _first_explained(got, mistakes)
        raise CheckError(f"{what} should be {describe(expected)}, but yours is {describe(got)}",
                         where=found.where if found and found.where else WHERE_VALUES_NO_EXAMPLE,
                         mistake=found.message if found else None)
    expect_no_graph(got, expected, what=what, allow=allow)


def expect_type(got: Any, kind: Any, *, what: str) -> None:
    """``got`` is of the type the task names: ``int``, ``float`` (a Python number), ``list[int]``, ``dict[str, float]``...

    ``float`` accepts an int (a Python number) but neither a bool nor a tensor;
    ``int`` accepts neither a bool nor a tensor. Generic aliases check every
    item (lists, tuples with ``...``, dicts).
    """
    problem = _type_problem(got, kind, "")
    if problem is None:
        return
    path, value = problem
    at = f" (at {path})" if path else ""
    tensor = isinstance(value, torch.Tensor)
    raise CheckError(f"{what} should be {_type_words(kind)}, but{at} it is {describe(value)}",
                     where=WHERE_TYPE,
                     mistake="a tensor is not a Python number or list: .item() converts a one-element tensor, "
                             ".tolist() a whole tensor" if tensor else None)


def _type_problem(value: Any, kind: Any, path: str) -> tuple[str, Any] | None:
    import typing

    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return None
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else (path, value)
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else (path, value)
    if origin is None:
        return None if isinstance(value, kind) else (path, value)
    if not isinstance(value, origin):
        return (path, value)
    if origin is dict and args:
        for k, v in value.items():
            problem = _type_problem(k, args[0], f"{path}[key {k!r}]") or _type_problem(v, args[1], f"{path}[{k!r}]")
            if problem:
                return problem
        return None
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            return (path, value)
        items = list(zip(value, args))
    else:
        items = [(v, args[0]) for v in value] if args else []
    for i, (v, k) in enumerate(items):
        problem = _type_problem(v, k, f"{path}[{i}]")
        if problem:
            return problem
    return None


def _type_words(kind: Any) -> str:
    import typing

    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is float:
        return "a Python number"
    if kind is int:
        return "a Python int"
    if origin is None:
        return f"a {getattr(kind, '__name__', kind)}"
    if origin is dict and args:
        return f"a dict of {_type_words(args[0]).removeprefix('a ')} -> {_type_words(args[1]).removeprefix('a ')}"
    inner = f" of {_type_words(args[0]).removeprefix('a Python ').removeprefix('a ')}s" if args else ""
    return f"a {origin.__name__}{inner}"


# ---------------------------------------------------------------- what a call must leave as it was
# A snapshot is what the caller can observe of an argument, as a tagged tuple;
# _change compares two of them and says in words what changed, and how to avoid it.

_CLONE_LIMIT = 1 << 20   # elements: tensors up to this size are cloned whole
_SAMPLE = 1 << 14        # larger ones: their sum and this many evenly spaced elements
_DEPTH = 3               # containers nested deeper are not compared


def _tensor_data(t: torch.Tensor) -> Any:
    """The tensor's values as bytes, or a digest of a large one (see the section comment); None on the meta device."""
    if t.device.type == "meta":
        return None
    data = t.detach()
    if data.numel() <= _CLONE_LIMIT:
        return _bytes(data)
    flat = data.reshape(-1)
    step = flat.numel() // _SAMPLE + 1
    return ("digest", _bytes(flat[::step]), _TENSOR_ITEM(flat.double().sum()) if not flat.is_complex() else None)


# The framework's own reads of tensor values go through the original methods: a check's spy on Tensor.cpu,
# .numpy() or float() (counting a learner's sync points) must not count the framework's snapshots.
_TENSOR_CPU, _TENSOR_NUMPY, _TENSOR_ITEM = torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.item


def _bytes(t: torch.Tensor) -> bytes:
    """The values' bytes: compared exactly (a NaN left in place is unchanged, any write is seen) and single-threaded,
    which stays fast on a loaded machine where torch's parallel comparisons do not."""
    plain = t.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
    return _TENSOR_NUMPY(_TENSOR_CPU(plain)).tobytes()


def _same_data(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a[1] == b[1] and (a[2] == b[2] or a[2] != a[2] and b[2] != b[2])
    return a == b


def _snapshot(value: Any, depth: int = 0) -> Any:
    """What the caller can observe of an argument (see the section comment), or None if nothing is compared."""
    try:
        return _observe(value, depth)
    except Exception:  # noqa: BLE001 - an object we cannot look into (sparse, custom) is not compared
        return None


def _observe(value: Any, depth: int) -> Any:
    from torch.utils.data import DataLoader, Dataset

    if isinstance(value, torch.Tensor):
        grad = value.grad if value.is_leaf else None
        return ("tensor", value.shape, value.dtype, value.device, value.requires_grad, _tensor_data(value),
                None if grad is None else (id(grad), _tensor_data(grad)))
    if isinstance(value, torch.nn.Module):
        return ("module",
                {n: (id(p), _snapshot(p)) for n, p in value.named_parameters(remove_duplicate=False)},
                {n: (id(b), _snapshot(b)) for n, b in value.named_buffers(remove_duplicate=False)},
                {n: m.training for n, m in value.named_modules(remove_duplicate=False)})
    if isinstance(value, torch.optim.Optimizer):
        groups = [({k: v for k, v in g.items() if k != "params"}, [id(p) for p in g["params"]])
                  for g in value.param_groups]
        return ("optimizer", groups, {id(p): _snapshot(s, 1) for p, s in value.state.items()})
    if isinstance(value, DataLoader):
        return ("loader", id(value.dataset), value.batch_size, value.drop_last, id(value.sampler),
                id(value.batch_sampler), id(value.collate_fn))
    if isinstance(value, Dataset) and depth < _DEPTH:
        try:
            length = len(value)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a dataset without a length (an IterableDataset)
            length = None
        attrs = {k: (id(v), _snapshot(v, depth + 1)) for k, v in vars(value).items()
                 if isinstance(v, (torch.Tensor, list, tuple, dict, Dataset)) or _is_array(v)}
        return ("dataset", length, attrs)
    if depth < _DEPTH and isinstance(value, dict):
        return ("dict", {k: (id(v), _snapshot(v, depth + 1)) for k, v in value.items()})
    if depth < _DEPTH and isinstance(value, list):
        return ("list", [(id(v), _snapshot(v, depth + 1)) for v in value])
    if depth < _DEPTH and isinstance(value, tuple):
        return ("tuple", [_snapshot(v, depth + 1) for v in value])
    if _is_array(value):
        return ("array", value.copy())
    if isinstance(value, (int, float, str, bool, type(None))):
        return None  # immutable
    return None


def _is_array(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "copy") and hasattr(value, "dtype")


def _kind_word(value: Any) -> str:
    from torch.utils.data import DataLoader, Dataset

    for kind, word in ((torch.Tensor, "tensor"), (torch.nn.Module, "model"), (torch.optim.Optimizer, "optimizer"),
                       (DataLoader, "data loader"), (Dataset, "dataset"), (dict, "dict"), (list, "list"),
                       (tuple, "tuple")):
        if isinstance(value, kind):
            return word
    return "NumPy array" if _is_array(value) else type(value).__name__


_NEW_COPY = "work on a copy (or build a new one) and return that instead"


def _change(before: Any, after: Any, allow: Allow = Allow()) -> tuple[str, str] | None:
    """What changed between two snapshots of one argument (in words) and how to avoid it, or None."""
    if before is None or after is None or before[0] != after[0]:
        return None
    kind = before[0]
    if kind == "tensor":
        _, shape, dtype, device, requires_grad, data, grad = before
        if (shape, dtype, device) != after[1:4]:
            return ("it was reshaped or converted in place (now shape "
                    f"{list(after[1])}, {after[2]}; it was {list(shape)}, {dtype})",
                    "the methods ending in _ that reshape or convert (unsqueeze_, squeeze_, t_, transpose_, resize_), "
                    "set_ and assigning .data change the caller's tensor; use the version without the _ (it returns a "
                    "new tensor) or compute a new tensor instead")
        if requires_grad != after[4]:
            return ("its requires_grad was switched " + ("on" if after[4] else "off"),
                    "work on a copy (x.detach().clone().requires_grad_()) instead")
        if not _same_data(data, after[5]):
            return ("its values were overwritten",
                    "an in-place operation (x -= ..., x[...] = ..., a method ending in _) writes into the caller's "
                    "tensor; compute a new tensor instead (or work on x.clone())")
        if (grad is None) != (after[6] is None) or (grad is not None and not _same_data(grad[1], after[6][1])):
            return ("its .grad was " + ("filled" if grad is None else "changed" if after[6] is not None else "cleared"),
                    "a backward() through the caller's tensor (or zeroing its gradient) writes into its .grad; "
                    "compute on x.detach() (or under torch.no_grad()) unless the task asks for gradients")
        return None
    if kind == "array":
        import numpy as np

        return None if np.array_equal(before[1], after[1], equal_nan=True) else \
            ("its values were overwritten", "an in-place change of the caller's array; use a copy (array.copy())")
    if kind in ("dict", "list", "tuple", "dataset"):
        return _container_change(kind, before, after, allow)
    if kind == "module":
        return _module_change(before, after, allow)
    if kind == "optimizer":
        (_, groups, state), (_, groups_after, state_after) = before, after
        if len(groups) != len(groups_after):
            return ("param groups were added or removed", "add_param_group changes the caller's optimizer")
        for i, ((hyper, ids), (hyper_after, ids_after)) in enumerate(zip(groups, groups_after)):
            if ids != ids_after:
                return (f"the parameters of param group {i} were replaced", "the optimizer belongs to the caller")
            for key in hyper:
                if not same_value(hyper[key], hyper_after.get(key), 0.0, 0.0):
                    return (f"its {key} (param group {i}) changed from {hyper[key]!r} to {hyper_after.get(key)!r}",
                            "setting a hyperparameter changes it for the caller too; if a value must differ only "
                            "here, use your own optimizer")
        if state.keys() != state_after.keys() or any(
                _change(state[k], state_after[k]) for k in state if state[k] is not None):
            return ("its state (step count, momentum or Adam's moments) changed: optimizer.step() ran",
                    "stepping the caller's optimizer updates its state; the task does not ask for it here")
        return None
    if kind == "loader":
        return None if before == after else ("it was changed", "a data loader belongs to the caller")
    return None


def _container_change(kind: str, before: Any, after: Any, allow: Allow) -> tuple[str, str] | None:
    if kind == "dataset":
        if before[1] != after[1]:
            return (f"its length changed from {before[1]} to {after[1]}", "build a new dataset (or a Subset) instead")
        old, new = before[2], after[2]
        for key in old:
            if key not in new:
                return (f"its attribute {key!r} was deleted", "build a new dataset instead")
            if old[key][0] != new[key][0]:
                return (f"its attribute {key!r} was replaced", "build a new dataset instead")
            inner = _change(old[key][1], new[key][1], allow)
            if inner:
                return (f"its attribute {key!r} changed: {inner[0]}", inner[1])
        return None
    if kind == "tuple":
        return next(((f"item {i} changed: {c[0]}", c[1]) for i, (a, b) in enumerate(zip(before[1], after[1]))
                     if (c := _change(a, b, allow))), None)
    if kind == "dict":
        old, new = before[1], after[1]
        if old.keys() != new.keys():
            added, removed = sorted(map(str, new.keys() - old.keys())), sorted(map(str, old.keys() - new.keys()))
            parts = [f"keys {added} were added" if added else "", f"keys {removed} were removed" if removed else ""]
            return (" and ".join(p for p in parts if p),
                    "d[key] = ..., del, pop() and update() change the caller's dict; build and return a new dict")
        for key in old:
            if old[key][0] != new[key][0]:
                return (f"the value under {key!r} was replaced",
                        "d[key] = ... changes the caller's dict; build and return a new dict")
            inner = _change(old[key][1], new[key][1], allow)
            if inner:
                return (f"the value under {key!r} changed: {inner[0]}", inner[1])
        return None
    old, new = [a[0] for a in before[1]], [b[0] for b in after[1]]  # list: by identity of the items
    if len(old) == len(new) and sorted(old) == sorted(new) and old != new:
        return ("it was reordered in place", "list.sort() and shuffle() reorder the caller's list; "
                                             "sorted(...) (or a copy) gives a new one")
    if len(new) < len(old) and _is_subsequence(new, old):
        return (f"items were removed ({len(old)} -> {len(new)} items)",
                "pop(), remove() and del remove them from the caller's list; iterate over it, or over a copy")
    if len(new) > len(old) and _is_subsequence(old, new):
        return (f"items were added ({len(old)} -> {len(new)} items)",
                "append() and extend() add to the caller's list; build and return a new list")
    if old != new:
        return ("items were replaced", "lst[i] = ... changes the caller's list; build and return a new list")
    return next(((f"item {i} changed: {c[0]}", c[1]) for i, (a, b) in enumerate(zip(before[1], after[1]))
                 if (c := _change(a[1], b[1], allow))), None)


def _is_subsequence(short: list, long: list) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def _module_change(before: Any, after: Any, allow: Allow) -> tuple[str, str] | None:
    _, params, buffers, mode = before
    _, params_after, buffers_after, mode_after = after
    if mode.keys() != mode_after.keys():
        return ("submodules were added or removed", "assigning a layer to the caller's model changes it; "
                                                     "build a new model instead")
    for what, old, new in (("parameter", params, params_after), ("buffer", buffers, buffers_after)):
        if old.keys() != new.keys():
            return (f"{what}s were added or removed", "the model belongs to the caller")
        for key in old:
            if old[key][0] != new[key][0]:
                return (f"its {what} {key!r} was replaced", "the model belongs to the caller")
            was, now = old[key][1], new[key][1]
            if was is not None and now is not None and was[0] == now[0] == "tensor" and was[3] != now[3]:
                now = (*now[:3], was[3], *now[4:])  # model.to(device) moves the caller's model: the usual way to run it
            inner = _change(was, now, allow)
            if inner:
                fix = ("an optimizer step or an in-place update changed the caller's weights"
                       if inner[0].startswith("its values") else
                       "requires_grad_() on the caller's parameters changes them for everything that follows; "
                       "torch.no_grad() turns off recording without touching the model"
                       if "requires_grad" in inner[0] else inner[1])
                return (f"its {what} {key!r} changed: {inner[0].removeprefix('its ')}", fix)
    if not allow.modes and mode != mode_after:
        switched = [n or "the model itself" for n in mode if mode[n] != mode_after[n]]
        shown = ", ".join(switched[:3]) + (" ..." if len(switched) > 3 else "")
        was = "training" if mode[next(n for n in mode if mode[n] != mode_after[n])] else "eval"
        now = "eval" if was == "training" else "training"
        return (f"it was in {was} mode and is left in {now} mode ({shown})",
                "model.train() and model.eval() switch the caller's model for everything that follows; "
                "remember model.training before and put it back with model.train(was_training) when you are done")
    return None


def _restore_modes(value: Any, before: Any) -> None:
    """Put the train/eval flags of a module argument (as snapshot) back."""
    if isinstance(value, torch.nn.Module) and before is not None and before[0] == "module":
        for name, module in value.named_modules(remove_duplicate=False):
            if name in before[3]:
                module.training = before[3][name]


def _global_state() -> dict[str, Any]:
    """State outliving a call that the caller can observe."""
    import numpy as np

    return {"torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
            "random": random.getstate(), "numpy": np.random.get_state(),
            "grad": torch.is_grad_enabled(), "inference": torch.is_inference_mode_enabled(),
            "dtype": torch.get_default_dtype(),
            "anomaly": (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            "threads": torch.get_num_threads()}


def _rng_changed(before: dict, after: dict) -> list[str]:
    """The global generators whose state differs."""
    import numpy as np

    changed = []
    if _bytes(before["torch_rng"]) != _bytes(after["torch_rng"]):
        changed.append("torch")
    if before["cuda_rng"] is not None and after["cuda_rng"] is not None and any(
            _bytes(a) != _bytes(b) for a, b in zip(before["cuda_rng"], after["cuda_rng"])):
        changed.append("CUDA")
    if before["random"] != after["random"]:
        changed.append("Python's random")
    b, a = before["numpy"], after["numpy"]
    if b[0] != a[0] or not np.array_equal(b[1], a[1]) or b[2:] != a[2:]:
        changed.append("NumPy")
    return changed


def _restore_global_state(state: dict, after: dict, allow: Allow) -> None:
    """Give the caller back what changed of its state, except what ``allow`` lets the function change."""
    import numpy as np

    if not allow.global_rng:
        changed = _rng_changed(state, after)
        if "torch" in changed:
            torch.set_rng_state(state["torch_rng"])
        if "CUDA" in changed:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        if "Python's random" in changed:
            random.setstate(state["random"])
        if "NumPy" in changed:
            np.random.set_state(state["numpy"])
    if not allow.grad_mode and after["grad"] != state["grad"]:
        torch.set_grad_enabled(state["grad"])
    if not allow.dtype and after["dtype"] != state["dtype"]:
        torch.set_default_dtype(state["dtype"])
    if not allow.anomaly and after["anomaly"] != state["anomaly"]:
        torch.autograd.set_detect_anomaly(*state["anomaly"])
    if not allow.threads and after["threads"] != state["threads"]:
        torch.set_num_threads(state["threads"])


# The functions that reset a global generator's state, by module: a call to any of them during a learner's
# function throws away the caller's random stream, whatever the task.
_RESEEDERS = {"torch": ("manual_seed", "seed", "set_rng_state"), "torch.random": ("manual_seed", "seed", "set_rng_state"),
              "random": ("seed", "setstate"), "numpy.random": ("seed", "set_state")}


@contextlib.contextmanager
def _watching_reseeds() -> Iterator[list[str]]:
    """Record (and still perform) every reset of a global generator made through its module while the block runs."""
    import importlib

    calls: list[str] = []
    patched = []
    for module_name, names in _RESEEDERS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attribute in names:
            original = getattr(module, attribute, None)
            if original is None:
                continue

            def spy(*args: Any, _original: Callable = original, _name: str = f"{module_name}.{attribute}",
                    **kwargs: Any) -> Any:
                # torch's own calls are restorations (fork_rng puts the caller's state back as it exits)
                if not sys._getframe(1).f_globals.get("__name__", "").startswith(("torch", "numpy")):
                    shown = ", ".join(repr(a) for a in args if not isinstance(a, torch.Tensor))
                    calls.append(f"{_name}({shown})")
                return _original(*args, **kwargs)

            setattr(module, attribute, spy)
            patched.append((module, attribute, original))
    try:
        yield calls
    finally:
        for module, attribute, original in reversed(patched):
            setattr(module, attribute, original)


@contextlib.contextmanager
def _counting_loader_seeds() -> Iterator[list[int]]:
    """Count (in ``[0]``) the DataLoader iterators started while the block runs that draw their base seed from
    torch's global generator (a loader without ``generator=``)."""
    from torch.utils.data import dataloader

    count = [0]
    original = dataloader._BaseDataLoaderIter.__init__

    def counting(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(loader, "generator", None) is None:
            count[0] += 1
        original(self, loader, *args, **kwargs)

    dataloader._BaseDataLoaderIter.__init__ = counting
    try:
        yield count
    finally:
        dataloader._BaseDataLoaderIter.__init__ = original


def _only_loader_seeds(before: dict, after: dict, draws: int) -> bool:
    """Whether torch's global generator moved by exactly ``draws`` DataLoader base-seed draws, and nothing else."""
    if draws == 0 or _bytes(before["torch_rng"]) == _bytes(after["torch_rng"]):
        return False
    replay = torch.Generator()
    replay.set_state(before["torch_rng"])
    for _ in range(draws):
        torch.empty((), dtype=torch.int64).random_(generator=replay)  # the draw _BaseDataLoaderIter makes
    return _bytes(replay.get_state()) == _bytes(after["torch_rng"])


def _reseeded(after: dict) -> int | None:
    """The small seed k the torch generator was just reset to (manual_seed(k)), if it was."""
    for k in (*range(101), 123, 1234, 12345, 2024, 2025, 2026, 1337, 31337, 4242, 999, 1000):
        if torch.equal(torch.Generator().manual_seed(k).get_state(), after["torch_rng"]):
            return k
    return None


def _state_problem(name: str, state: dict, after: dict, allow: Allow, *, randomness_given: bool = True,
                   reseeded: Sequence[str] = (), nothing_random: bool = False) -> CheckError | None:
    """A CheckError for the first piece of global state the call left changed (and was not allowed to), or None.

    The global generators: resetting one (``reseeded``: the calls seen) is always a problem, since it throws
    away the caller's random stream; drawing from one is a problem only when ``randomness_given``, the call
    handed the function a generator or a seed to draw from instead, or ``nothing_random``, the task asks for
    nothing random at all.
    """
    if allow.global_rng is not True:
        changed = _rng_changed(state, after)
        drawing_allowed = allow.global_rng == "draws"
        if changed and (reseeded or (not drawing_allowed and (randomness_given or nothing_random))):
            seed = _reseeded(after) if "torch" in changed else None
            how = (f"reseeded torch's global random generator (torch.manual_seed({seed}))" if seed is not None
                   else f"reset a global random generator ({reseeded[0]})" if reseeded
                   else f"used the global random generator of {' and '.join(changed)} (its state changed)")
            where = ("look for random draws without a generator= argument (torch.randn, randperm, rand, "
                     "random.shuffle, np.random...), for manual_seed, and for layers built inside the function")
            if reseeded and reseeded[0] in ("torch.seed()", "torch.random.seed()"):
                # torch.seed() reads like a getter; it draws a fresh seed and reseeds the global generator with it
                return CheckError(
                    f"{name} {how}, which the rest of the program shares", where=where,
                    mistake="torch.seed() does not tell you the seed: it reseeds the global generator with a new "
                            "random one. torch.get_rng_state() reads the generator's state (torch.initial_seed() "
                            "its first seed) without changing it")
            if randomness_given and (seed is not None or reseeded):
                # the task hands over a seed or a generator: to draw from, or (a checkpoint) to record
                return CheckError(
                    f"{name} {how}, which the rest of the program shares", where=where,
                    mistake="seeding the global generator resets the random numbers the caller draws afterwards: "
                            "leave it alone. To draw, use the seed or generator the task gives you "
                            "(torch.randperm(n, generator=g), or a torch.Generator().manual_seed(seed) of your own); "
                            "to record a stream, read its state (torch.get_rng_state(), generator.get_state()), "
                            "which changes nothing")
            if randomness_given:
                return CheckError(
                    f"{name} {how}, which the rest of the program shares", where=where,
                    mistake="draw from the generator (or seed) the task gives you, e.g. torch.randperm(n, "
                            "generator=g); seeding or drawing from the global generator changes every random "
                            "number the caller draws afterwards")
            if not reseeded:  # drew, where the task asks for nothing random: the evidence shows no more
                return CheckError(f"{name} {how}, which the rest of the program shares; the task asks for nothing "
                                  "random from it", where=where)
            return CheckError(
                f"{name} {how}, which the rest of the program shares", where=where,
                mistake="seeding inside a function resets the random numbers the caller draws afterwards; draw "
                        "what you need without seeding (or from a torch.Generator of your own)")
    if not allow.grad_mode and (after["grad"] != state["grad"] or after["inference"] != state["inference"]):
        if after["inference"] != state["inference"]:
            left = f"inference mode switched {'on' if after['inference'] else 'off'}"
        else:
            left = f"gradient tracking switched {'on' if after['grad'] else 'off'}"
        switched_on = after["grad"] and not state["grad"]
        return CheckError(
            f"{name} left {left} for the rest of the program"
            + (" (it was called with tracking off)" if switched_on else ""),
            where="look for torch.set_grad_enabled(...) or a mode entered without a `with` block",
            mistake="torch.set_grad_enabled(True) at the end switches tracking on whatever the caller had; a `with "
                    "torch.no_grad():` block puts back the caller's setting when it ends" if switched_on else
                    "torch.set_grad_enabled(False) outlives the call; a `with torch.no_grad():` block restores the "
                    "caller's setting when it ends")
    if not allow.anomaly and after["anomaly"] != state["anomaly"]:
        return CheckError(
            f"{name} left anomaly detection switched {'on' if after['anomaly'][0] else 'off'} for the rest of the "
            "program",
            where="look for torch.autograd.set_detect_anomaly",
            mistake="set_detect_anomaly outlives the call (and makes every backward several times slower); use the "
                    "`with torch.autograd.detect_anomaly():` block")
    if not allow.dtype and after["dtype"] != state["dtype"]:
        return CheckError(
            f"{name} changed the default dtype for the rest of the program ({state['dtype']} -> {after['dtype']})",
            where="look for torch.set_default_dtype",
            mistake="pass dtype= to the functions that need it instead of changing the default for everyone")
    if not allow.threads and after["threads"] != state["threads"]:
        return CheckError(
            f"{name} changed torch's thread count for the rest of the program "
            f"({state['threads']} -> {after['threads']})",
            where="look for torch.set_num_threads",
            mistake="the thread count is the caller's setting; if you must change it, put it back before returning")
    return None


def modes(model: torch.nn.Module) -> dict[str, bool]:
    """``training`` of the model and every submodule, by name ("" is the model itself)."""
    return {name: module.training for name, module in model.named_modules()}


def expect_mode(model: torch.nn.Module, training: bool, what: str, when: str = "afterwards") -> None:
    """Every submodule of ``model`` is in training (True) or eval (False) mode; name the ones that are not."""
    wrong = [(name or type(model).__name__, type(m).__name__) for name, m in model.named_modules()
             if m.training != training]
    if not wrong:
        return
    top_ok = model.training == training
    shown = ", ".join(f"{name} ({kind})" for name, kind in wrong[:3]) + (" ..." if len(wrong) > 3 else "")
    mode, method = ("training", "train") if training else ("eval", "eval")
    where = "look at where your code sets the model's mode (model.train(), model.eval(), model.training)"
    if top_ok:
        raise CheckError(f"{what}: {when} the model itself is in {mode} mode but its submodule(s) {shown} are not",
                         where=where,
                         mistake=f"setting model.training by hand changes only the top-level flag; model.{method}() "
                                 "sets it on every submodule")
    raise CheckError(f"{what}: {when} the model is not in {mode} mode ({shown})", where=where,
                     mistake=f"call model.{method}()")


def substitute(fn: Any, **replacements: Any) -> Any:
    """Context manager: while it is open, names in the learner's notebook (``fn``'s globals) refer to ``replacements``.

    Hidden tests use it so an exercise built on an earlier one is graded with
    the reference version of the earlier one: one bug loses one exercise's points.
    """
    import contextlib

    handing = _from_course(sys._getframe(1))

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
            with _handing(replacements.values() if handing else ()):
                yield
        finally:
            for k, v in saved.items():
                if v is missing:
                    namespace.pop(k, None)
                else:
                    namespace[k] = v

    return swapped()


# What runs right after every call of the learner's code (:func:`call`): the grader's guard adds its look at what
# the checks rely on (coursetools.grading.sandbox), so that code which puts things back before its cell ends is seen.
_AFTER_LEARNER_CODE: list[Callable[[], None]] = []

# The reference functions and classes a check has handed to the learner's code, by id, while that code runs:
# :func:`call`'s arguments and :func:`substitute`'s names. The grader's guard lets the notebook's own code call
# these, and no other part of the answer key (coursetools.grading.sandbox). {id: how many hand it now}
_HANDED: dict[int, int] = {}


@contextlib.contextmanager
def _handing(values: Iterable[Any]) -> Iterator[None]:
    """Mark the callables among ``values``, and those one level inside a list, tuple or dict, as handed over."""
    values = list(values)
    inside = [v for value in values if isinstance(value, (list, tuple, dict))
              for v in (value.values() if isinstance(value, dict) else value)]
    ids = [id(v) for v in [*values, *inside] if callable(v)]
    for i in ids:
        _HANDED[i] = _HANDED.get(i, 0) + 1
    try:
        yield
    finally:
        for i in ids:
            _HANDED[i] -= 1
            if not _HANDED[i]:
                del _HANDED[i]


def _from_course(frame: Any) -> bool:
    """Whether ``frame`` runs the course's own code (a check), not a notebook's."""
    return os.path.realpath(frame.f_code.co_filename).startswith(f"{_HELPERS}{os.sep}")


def handed(obj: object) -> bool:
    """Whether a check has handed ``obj`` to the learner's code that is running now."""
    return id(obj) in _HANDED


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
# HostTensor, host_collate and NotMovedError live in helpers.checks.devices, with the rest of the stand-in device.

from helpers.checks.devices import HostTensor, NotMovedError, host_collate  # noqa: E402


# The layers whose output depends on the training mode (dropout, batch norm): what a check names when a model
# predicts in training mode
MODE_LAYERS = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)


@contextlib.contextmanager
def backward_passes() -> Iterator[list[int]]:
    """Counts the backward passes autograd's engine runs inside the block (``counted[0]``): ``backward()``,
    ``torch.autograd.grad`` and what is built on them (``torch.func``, ``torch.autograd.functional``), however the
    notebook named them. Both public functions reach the engine through this one module global. Only calls made in
    this process count: ask ``runs_here(fn)`` before reading a count as the learner's."""
    runs = [0]
    engine = torch.autograd._engine_run_backward

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs[0] += 1
        return engine(*args, **kwargs)

    with mock.patch.object(torch.autograd, "_engine_run_backward", counted):
        yield runs


# What a check says when a dropout function runs with its default training=True in eval mode (seen by
# ``differs_between_calls``): one wording for every lesson
FUNCTIONAL_DROPOUT_IN_EVAL = ("F.dropout(x, p) drops values in eval mode too unless given training=self.training: its "
                              "training argument defaults to True (an nn.Dropout layer follows the model's mode itself)")


class RandomDraws(torch.overrides.TorchFunctionMode):
    """Counts, while active, the calls that put random values into data, by the name a learner writes: torch.rand,
    torch.randn (and their _like), torch.normal, torch.bernoulli, the in-place uniform_/normal_/bernoulli_, and a
    dropout function that runs switched on (training=True, F.dropout's default; an nn.Dropout in training mode calls
    it too, counted as "nn.Dropout"). Not counted: a sampler's index draws (randperm, randint, random_, which a
    shuffling loader makes) and the fills of torch.nn.init (a layer's constructor initialising its weights)."""

    _DROPOUTS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
    _FILLS = {"rand": "torch.rand", "randn": "torch.randn", "rand_like": "torch.rand_like",
              "randn_like": "torch.randn_like", "normal": "torch.normal", "bernoulli": "torch.bernoulli",
              "uniform_": ".uniform_", "normal_": ".normal_", "bernoulli_": ".bernoulli_"}

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name.rstrip("_") in self._DROPOUTS:
            if bool(kwargs.get("training", args[2] if len(args) > 2 else True)):
                self.counts["nn.Dropout" if _called_by_dropout_layer() else f"F.{name.rstrip('_')}"] += 1
        elif name in self._FILLS and not _called_from_init():
            self.counts[self._FILLS[name]] += 1
        return func(*args, **kwargs)

    def dropout_on(self) -> bool:
        """Whether a dropout ran switched on (a function, or a layer in training mode)."""
        return dropout_among(self.counts)

    def fills(self) -> collections.Counter[str]:
        """The draws written in code (noise, dropout functions), without those of dropout layers in training mode,
        which every training forward of a model with dropout makes."""
        return collections.Counter({name: n for name, n in self.counts.items() if name != "nn.Dropout"})


def _called_from(limit: int, test: Callable[[types.FrameType], bool]) -> bool:
    """Whether one of the ``limit`` frames above the torch function now handled (RandomDraws') passes ``test``."""
    frame = sys._getframe(3)
    for _ in range(limit):
        if frame is None:
            return False
        if test(frame):
            return True
        frame = frame.f_back
    return False


def _called_from_init() -> bool:
    """Whether the fill now running initialises weights (torch.nn.init, as a layer's constructor calls it)."""
    return _called_from(4, lambda frame: frame.f_code.co_filename.endswith(f"nn{os.sep}init.py"))


def _called_by_dropout_layer() -> bool:
    """Whether the dropout function now running was called by an nn.Dropout layer's forward (a few frames up)."""
    return _called_from(6, lambda frame: isinstance(frame.f_locals.get("self"), torch.nn.modules.dropout._DropoutNd))


def dropout_among(counts: collections.Counter[str]) -> bool:
    """Whether counted draws (RandomDraws' names) include a dropout switched on, a function's or a layer's."""
    return any(name.startswith(("F.", "nn.")) for name in counts)


def draws_in_words(counts: collections.Counter[str]) -> str:
    """Counted draws as a learner reads them: "torch.randn_like (2 calls), F.dropout switched on (1 call)"."""
    return ", ".join(f"{name}{' switched on' if name.startswith(('F.', 'nn.')) else ''} ({n} call{'s' if n != 1 else ''})"
                     for name, n in counts.most_common())


def unregistered_layers(model: torch.nn.Module) -> list[str]:
    """The layers a module keeps in a plain list, tuple or dict attribute, where PyTorch does not register them: in
    words, e.g. "head, a list of layers"."""
    found = []
    for name, module in model.named_modules():
        for attribute, value in vars(module).items():
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
            if not attribute.startswith("_") and any(isinstance(item, torch.nn.Module) for item in items):
                found.append(f"{name + '.' if name else ''}{attribute}, a {type(value).__name__} of layers")
    return found


# What a check says of unregistered_layers' finds: one wording for every lesson
UNREGISTERED_LAYERS = ("layers in a plain list, tuple or dict are not registered: their parameters are missing from "
                       "model.parameters() and state_dict() (the optimizer never trains them) and .eval() or .to() "
                       "never reach them. Use nn.ModuleList, nn.ModuleDict or nn.Sequential, or assign the layer to "
                       "self directly")


@dataclass
class CallToCall:
    """What two calls of a model on the same input showed (:func:`differs_between_calls`)."""

    differ: bool = False  # the two outputs differ: randomness in forward, or a layer built anew at every call
    dropout_on: bool = False  # a dropout function ran with training=True (F.dropout's default) during the calls

    def __bool__(self) -> bool:
        return self.differ


def differs_between_calls(model: torch.nn.Module, x: torch.Tensor, *, eval_mode: bool = False) -> CallToCall:
    """Call ``model`` twice on the same input, each call without gradients after a seed of its own, and say whether
    the outputs differ (true as a bool) and whether a dropout function ran switched on.

    With ``eval_mode`` the model is put in eval mode for the calls. The global random states (torch's, CUDA's,
    Python's, NumPy's) and every module's training flag are put back afterwards, so the notebook sees no trace. A
    call that crashes or returns no tensor counts as no difference: that is another mistake, which the check's own
    comparison reports. Outputs within the usual tolerance count as equal (a GPU may sum in another order)."""
    import numpy as np

    modes = {module: module.training for module in model.modules()}
    python, numpy_state = random.getstate(), np.random.get_state()
    spy, outputs = RandomDraws(), []
    try:
        with torch.random.fork_rng(), torch.no_grad(), spy:
            if eval_mode:
                model.eval()
            for seed in (1, 2):
                torch.manual_seed(seed)
                random.seed(seed)
                np.random.seed(seed)
                outputs.append(model(x.clone()))
    except Exception:  # noqa: BLE001 - a crash is not this mistake; the check's comparison reports it
        return CallToCall()
    finally:
        random.setstate(python)
        np.random.set_state(numpy_state)
        for module, training in modes.items():
            module.training = training
    first, second = outputs
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
        return CallToCall()
    differ = first.shape == second.shape and not same_value(first, second)
    return CallToCall(differ=differ, dropout_on=differ and spy.dropout_on())


class GradientArrivals:
    """What each parameter's ``.grad`` held as its new gradient arrived in a backward pass, in arrival order.

    The hook only copies ``.grad`` (a copy waits for nothing, so a check that counts host reads counts none); the
    copies are read afterwards, by :meth:`kinds`, outside whatever the check watches during the call."""

    def __init__(self) -> None:
        self.held: list[torch.Tensor | None] = []

    def kinds(self) -> list[str]:
        """For each arrival: "none" (.grad was None), "zeros" (cleared to zeros) or "values" (leftovers that the new
        gradient is added to)."""
        return ["none" if grad is None else "values" if bool(grad.any()) else "zeros" for grad in self.held]

    def added_to_leftovers(self) -> bool:
        """Whether some gradient arrived while .grad still held values."""
        return "values" in self.kinds()


def leftover_gradients(model: torch.nn.Module, seed: int, *, record: bool = True) -> GradientArrivals:
    """Give every parameter a ``.grad`` from an earlier step, as a model handed over mid-training holds (random
    values from a generator of its own seeded with ``seed``, the caller's streams untouched), and record what
    ``.grad`` held each time a gradient arrived afterwards. A step that clears the gradients before backward finds
    "none" or "zeros"; one that forgets finds "values", and its backward adds to them. With ``record=False`` only
    the gradients are given (a check that reads the effect on the weights needs no copies)."""
    generator = torch.Generator().manual_seed(seed)
    arrivals = GradientArrivals()

    def recorder(p: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            arrivals.held.append(None if p.grad is None else p.grad.detach().clone())
        return hook

    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=generator)
        if record:
            p.register_hook(recorder(p))
    return arrivals


def runs_here(fn: Any) -> bool:
    """Whether ``fn``'s own code runs in this process, where a check can watch what it calls (autograd, an
    optimizer): the learner's function or model in the notebook's kernel. The grader's stand-in for it
    (coursetools.grading.verify) sends each call to the kernel, whose own run of the same check watches it."""
    return isinstance(fn, (types.FunctionType, types.MethodType, functools.partial, torch.nn.Module))


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share storage (writing one changes the other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def passed(name: str, n_checks: int) -> None:
    """Print the one line a learner sees when a check passes."""
    plural = "s" if n_checks != 1 else ""
    print(f"✔ {name}: passed {n_checks} check{plural}")
