"""Lesson 09 Debugging: checks for the fix-the-bug exercises, and the broken programs themselves.

Every exercise hands the learner a broken program (the ``broken_*`` twins below
are those programs, verbatim). A check runs three versions on the same inputs
and seeds: the learner's, the reference (helpers.reference.debugging) and the
broken twin. The checks teach debugging, so a failure states first what the
program DOES (the input, what came back, what was expected), then, through the
hint ladder, where to look, and only last the named bug:

- the learner's raises the error the broken one raised: that error, then where, then the bug;
- it raises another error: that error (the learner's own lines follow the message);
- it runs and equals the reference: fixed;
- it runs and equals the broken twin (a silent bug): what it returned against what it should, then where, then the bug;
- it matches a known wrong fix: the same symptom, and that wrong fix as the named mistake;
- otherwise: what differs, without guessing a cause.
"""

from __future__ import annotations

import collections
import copy
import math
import re
import types
from contextlib import contextmanager
from unittest import mock
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from helpers.checks import (FUNCTIONAL_DROPOUT_IN_EVAL, MODE_LAYERS, UNREGISTERED_LAYERS, Allow, CheckError, Mistake,
                           NotMovedError, RandomDraws, call, describe, differs_between_calls, draws_in_words, dropout_among,
                           expect_tensor, passed, same_value, tensor_mistake, unregistered_layers)
from helpers.checks.devices import (STAND_IN_DEVICE, OnDevice, OnHost, Placed, model_on_device, place, place_model,
                                   unplaced)
from helpers.reference import debugging as ref

# ---------------------------------------------------------------- the broken programs (the starters, verbatim)


def broken_predict_digits(model: nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Predicted class of each image, computed on ``device``, returned on the CPU."""
    model.to(device)
    images.to(device)
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).cpu()


class BrokenSmallCNN(nn.Module):
    """Two convolution blocks and a linear classifier for 28 x 28 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 7 * 7, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


def broken_loss_from_table(logits: torch.Tensor, label_column: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [N, 10] against the labels of a table (see the task)."""
    return F.cross_entropy(logits, label_column)


class BrokenGatedBlock(nn.Module):
    """A gated residual block: x + sigmoid(gate(x)) * linear(x)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.gate(x))
        h *= self.linear(x)
        return h + x


def broken_fit(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """Train ``model`` with SGD and cross-entropy; return the loss of every step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def broken_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    model.training = False
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def broken_dataset_accuracy(model: nn.Module, test_set: Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=True)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.cat([labels for _, labels in loader])
    return (predictions == labels).float().mean().item()


def broken_train_and_evaluate(model: nn.Module, train_set: Dataset, test_set: Dataset,
                              epochs: int, lr: float) -> tuple[list[float], float]:
    """Train ``model`` in place; return the loss of every step and the accuracy on ``test_set``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            outputs = model(inputs).softmax(dim=1)
            loss = F.cross_entropy(outputs, targets)
            loss.backward()
            optimizer.step()
            history.append(loss)
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


BROKEN = {
    "ex_predict_digits": broken_predict_digits,
    "ex_small_cnn": BrokenSmallCNN,
    "ex_loss_from_table": broken_loss_from_table,
    "ex_gated_block": BrokenGatedBlock,
    "ex_fit": broken_fit,
    "ex_accuracy": broken_accuracy,
    "ex_dataset_accuracy": broken_dataset_accuracy,
    "ex_three_bugs": broken_train_and_evaluate,
}

# ---------------------------------------------------------------- the hint ladder


def failure(symptom: str, *, where: str | None = None, mistake: str | None = None) -> CheckError:
    """A CheckError on the hint ladder: the symptom first, then where to look, then the named mistake.

    Uses the framework's ``CheckError(symptom, where=..., mistake=...)``; with a
    framework that has no ladder yet, the three levels are joined into one message.
    """
    try:
        return CheckError(symptom, where=where, mistake=mistake)
    except TypeError:  # the framework's ladder has not landed: one message, the symptom first
        parts = [symptom] + ([f"Where to look: {where}."] if where else []) + ([mistake] if mistake else [])
        return CheckError(" ".join(parts))


# ---------------------------------------------------------------- the mechanism: compare with the reference and the broken twin


@dataclass
class Outcome:
    """What running a program gave: a value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None
    trace: Trace | None = None
    # random values it put into data, by name (RandomDraws.fills: noise, dropout functions; not dropout layers)
    draws: collections.Counter[str] = field(default_factory=collections.Counter)


def attempt(fn: Callable[..., Any], *args: Any, seed: int | None = None, allow: Allow | None = None,
            **kwargs: Any) -> Outcome:
    """Run ``fn`` (after ``torch.manual_seed(seed)`` when given, on a forked random state) and record what happened.

    The call goes through the framework's ``call``, so its default rules hold here as in every lesson: the
    arguments come back unchanged and so does the state that outlives the call (grad mode, dtype, threads...).
    Each program here switches its model's mode on purpose (eval() to predict, train() to train), so modes may
    change (the checks look at the modes a program leaves where the task says which). No task here hands a program a
    generator: its randomness (dropout, shuffling, layers built lazily) comes from the global one, which the check
    seeds and forks, so the program may draw from it. ``allow`` replaces these defaults (e.g. to let a training
    program change its model).
    """
    if not callable(fn):
        raise CheckError(f"the check expected a function or a class, but was given {describe(fn)}",
                         where="look at the argument you pass to the check: the name of your function or class, no ()",
                         mistake="pass the function itself, not its result")
    if allow is None:
        allow = Allow(modes=True, global_rng=True)
    draws = RandomDraws()
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        try:
            with draws:
                value = call(fn, *args, allow=allow, **kwargs)
            return Outcome(value=value, draws=draws.fills())
        except NotImplementedError:
            raise CheckError(f"{getattr(fn, '__name__', 'your code')} is not written yet: it raised NotImplementedError",
                             where="look in its cell for `raise NotImplementedError()`",
                             mistake="replace `raise NotImplementedError()` with the fixed program") from None
        except CheckError as error:
            cause = error.__cause__  # call wraps the program's own exception: that is the evidence to read
            if isinstance(cause, Exception) and not isinstance(cause, CheckError):
                return Outcome(error=cause, draws=draws.fills())
            raise


def error_line(error: BaseException) -> str:
    """``Type: first line of the message``, as the last line of a traceback shows it."""
    if isinstance(error, NotMovedError):  # the course's stand-in for a GPU: say what a GPU would say
        return ("a tensor on the CPU met the model's tensors on the device (on a GPU: RuntimeError: Expected all "
                "tensors to be on the same device)")
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(error).__name__}: {first[:220]}{'...' if len(first) > 220 else ''}"


def same_error(a: BaseException, b: BaseException) -> bool:
    """The same exception type with the same first line of message (numbers included: other shapes, another error)."""
    def kind(error: BaseException) -> tuple[str, str]:
        lines = str(error).strip().splitlines()
        return type(error).__name__, lines[0] if lines else ""
    return kind(a) == kind(b)


def expect_fixed(
    what: str,
    got: Outcome,
    want: Any,
    broken: Outcome,
    *,
    where: str,
    bug: str,
    same: Callable[[Any, Any], bool] = same_value,
    symptom: Callable[[Any, Any], str] | None = None,
    mistakes: Sequence[Mistake] = (),
    hints: dict[str, str] | None = None,
    differs: Callable[[Any, Any], None] | None = None,
    error_where: str | None = None,
) -> Any:
    """Pass when the learner's program ran and produced ``want``; otherwise raise the ladder for what is wrong.

    Args:
        what: the call, in words ("fit on FitCase(...)").
        got, broken: outcomes of the learner's program and of the broken one on the same inputs and seed.
        want: the reference's result.
        where: where to look for the original bug (the ladder's second level).
        bug: the original bug and its fix, in words (the ladder's last level).
        same: how to compare results.
        symptom: ``(got, want) -> str``: what a wrong result shows, observable ("returns 0.4; the model's
            eval-mode accuracy is 0.75"); default: the two values described.
        mistakes: known wrong fixes, recognised from the learner's result (their message is the named mistake).
        hints: for an error the learner's program raises that the broken one did not, the named mistake
            per fragment of the message.
        differs: raises the message for a result that is simply different (default: a neutral one).
        error_where: where to look for an error the broken program did not raise (default: none named).
    """
    def shows(value: Any) -> str:
        return symptom(value, want) if symptom is not None else \
            f"{what} returns {describe(value)}, expected {describe(want)}"

    if got.error is not None:
        line = error_line(got.error)
        if broken.error is not None and same_error(got.error, broken.error):
            raise failure(f"{what} still raises the error it was handed out with: {line}",
                          where=where, mistake=bug) from got.error
        hint = next((h for fragment, h in (hints or {}).items() if fragment in str(got.error)), None)
        raise failure(f"{what} raises {line}", where=error_where or where, mistake=hint) from got.error
    if same(got.value, want):
        return got.value
    if broken.error is None and same(got.value, broken.value):
        raise failure(f"{shows(got.value)} (the same as the program you were given)", where=where, mistake=bug)
    mistake = next((m for m in mistakes if m.explains(got.value)), None)
    if mistake is not None:
        raise failure(shows(got.value), where=mistake.where or where, mistake=mistake.message)
    _expect_no_added_draws(shows(got.value), got.draws - broken.draws)
    if differs is not None:
        differs(got.value, want)
    raise failure(shows(got.value), where=where)


def _expect_no_added_draws(shown: str, added: collections.Counter[str]) -> None:
    """A wrong result from a program that drew random values the given program does not: noise or a dropout the
    learner added, which makes the result change from run to run. Named from the draws seen, by their names."""
    if not added:
        return
    dropout = dropout_among(added)
    raise failure(f"{shown}; your program drew random values that the program you were given does not draw: "
                  f"{draws_in_words(added)}, so its result changes from run to run",
                  where="look for what you added that is random: a dropout, or noise (torch.randn...)",
                  mistake=f"{FUNCTIONAL_DROPOUT_IN_EVAL}. The task fixes the given program's bugs and adds no "
                          "dropout: remove it" if dropout else
                          "the task adds no noise to the data or the outputs: remove the random draw")


def _number(what: str) -> Callable[[Any, Any], None]:
    """A ``differs`` for results that must be Python numbers."""
    def differs(got: Any, want: float) -> None:
        if isinstance(got, torch.Tensor):
            raise failure(f"{what} returns {describe(got)}, expected a Python number",
                          mistake="a 0-d tensor is not a Python number: .item() gives one")
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise failure(f"{what} returns {describe(got)}, expected a Python number")
        raise failure(f"{what} returns {got:.6g}, expected {want:.6g}")
    return differs


def _tensor(what: str, given: torch.Tensor | None = None) -> Callable[[Any, Any], None]:
    """A ``differs`` that lets expect_tensor describe a wrong tensor (shape, dtype, values)."""
    def differs(got: Any, want: torch.Tensor) -> None:
        expect_tensor(got, want, what=what, given=given)
    return differs


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _short(values: Sequence[float], n: int = 4) -> str:
    """The first ``n`` numbers of a list, rounded, as a learner would print them."""
    shown = ", ".join(f"{v:.3f}" if isinstance(v, float) else describe(v) for v in list(values)[:n])
    return f"[{shown}{', ...' if len(values) > n else ''}]"


# ---------------------------------------------------------------- what a program did: the evidence a message may name
# A message names a cause only when the evidence shows it. These spies record what the learner's program did while
# it ran (the modes of the model at each forward pass, each optimizer step and its settings, the order in which the
# samples were read), without changing the program's arguments. (A general version belongs in the framework.)



@dataclass
class Trace:
    """What happened to one model during a call: its forward passes and the optimizer steps over its parameters."""

    forwards: list[tuple[int, int, list[str], list[str]]] = field(default_factory=list)
    """per forward of the model: (event index, batch rows, mode layers in training mode, mode layers in eval mode)"""
    steps: list[tuple[int, str, dict]] = field(default_factory=list)
    """per optimizer step: (event index, optimizer class, its hyperparameters)"""
    events: int = 0
    modes: list[list[str]] = field(default_factory=list)
    """per forward of the model: every submodule (the model itself as '') in training mode, whatever its kind"""
    backwards: int = 0
    """how many gradients backward passes accumulated into the model's parameters so far"""
    step_grads: list[tuple[int, bool]] = field(default_factory=list)
    """per optimizer step: (gradients accumulated before it, whether any gradient it applies is nonzero)"""
    losses: list[float] = field(default_factory=list)
    """the value of every one-number tensor that ``.backward()`` was called on, in order"""

    def training_forwards(self) -> list[tuple[int, int, list[str], list[str]]]:
        """The forward passes that an optimizer step followed (the training ones)."""
        last = self.steps[-1][0] if self.steps else -1
        return [f for f in self.forwards if f[0] < last]

    def evaluation_forwards(self) -> list[tuple[int, int, list[str], list[str]]]:
        """The forward passes after the last optimizer step (all of them when nothing steps)."""
        last = self.steps[-1][0] if self.steps else -1
        return [f for f in self.forwards if f[0] > last]


def _layer_names(model: nn.Module, training: bool) -> list[str]:
    return [f"{name or 'the model'} ({type(m).__name__})" for name, m in model.named_modules()
            if isinstance(m, MODE_LAYERS) and m.training == training]


@contextmanager
def traced(model: nn.Module) -> Iterator[Trace]:
    """Record every forward pass of ``model`` (its layers' modes, the batch size) and every optimizer step over its
    parameters (the optimizer's class and settings), through torch's global hooks: the model itself is not touched."""
    trace = Trace()
    params = {id(p) for p in model.parameters()}

    def on_forward(module: nn.Module, args: tuple) -> None:
        if module is model:
            rows = args[0].shape[0] if args and isinstance(args[0], torch.Tensor) and args[0].dim() else 0
            trace.forwards.append((trace.events, rows, _layer_names(model, True), _layer_names(model, False)))
            trace.modes.append([name for name, m in model.named_modules() if m.training])
            trace.events += 1

    def on_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        if any(id(p) in params for group in optimizer.param_groups for p in group["params"]):
            settings = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
            trace.steps.append((trace.events, type(optimizer).__name__, settings))
            trace.step_grads.append((trace.backwards, any(p.grad is not None and bool(p.grad.any())
                                                          for p in model.parameters())))
            trace.events += 1

    def on_accumulated(_: torch.Tensor) -> None:
        trace.backwards += 1

    backward = torch.Tensor.backward
    inside = [False]

    def on_backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        # under a torch function mode (attempt's RandomDraws) backward dispatches to Tensor.backward, which is this
        # function, once more: that second call is the same backward and records nothing
        if inside[0]:
            return backward(tensor, *args, **kwargs)
        inside[0] = True
        try:
            if tensor.numel() == 1:
                trace.losses.append(float(tensor.detach()))
            return backward(tensor, *args, **kwargs)
        finally:
            inside[0] = False

    forward_hook = torch.nn.modules.module.register_module_forward_pre_hook(on_forward)
    step_hook = register_optimizer_step_pre_hook(on_step)
    grad_hooks = [p.register_post_accumulate_grad_hook(on_accumulated) for p in model.parameters() if p.requires_grad]
    try:
        with mock.patch.object(torch.Tensor, "backward", on_backward):
            yield trace
    finally:
        forward_hook.remove()
        step_hook.remove()
        for hook in grad_hooks:
            hook.remove()


_IMPLEMENTATION = {"foreach", "fused", "differentiable", "capturable", "initial_lr"}  # settings that change no number


def _optimizer_difference(got: Trace, want: Trace) -> str | None:
    """How the optimizer the program stepped differs from the one a correct program steps, in words; None if alike."""
    if not got.steps or not want.steps:
        return None
    (_, kind, settings), (_, want_kind, want_settings) = got.steps[0], want.steps[0]
    shown = ", ".join(f"{k}={v!r}" for k, v in want_settings.items()
                      if k not in _IMPLEMENTATION and (k == "lr" or v not in (0, False, None)))
    if kind != want_kind:
        return f"its steps are taken by {kind}, where the task's loop steps {want_kind}({shown})"
    keys = sorted((set(settings) | set(want_settings)) - _IMPLEMENTATION)
    changed = [f"{k}={settings.get(k)!r} (the task's: {want_settings.get(k)!r})" for k in keys
               if settings.get(k) != want_settings.get(k)]
    return f"its {kind} steps with {', '.join(changed)}" if changed else None


def recording(dataset_type: type, log: list[int]) -> type:
    """A subclass of ``dataset_type`` that appends each index it is asked for to ``log`` (kept outside the dataset,
    so the dataset the program is given compares unchanged)."""
    class Recorded(dataset_type):  # type: ignore[misc, valid-type]
        def __getitem__(self, index: int) -> Any:
            log.append(int(index))
            return super().__getitem__(index)

    Recorded.__name__ = Recorded.__qualname__ = dataset_type.__name__
    return Recorded


# ---------------------------------------------------------------- 1. a batch left on the CPU


# The framework's stand-in device (helpers.checks.devices) tells the device from the CPU on any grader: the images
# arrive OnHost, `device` is cuda:0, and the check's model (a _DeviceModel) moves in name with .to / .cuda / .cpu and
# wants its input where it is, so a batch never moved, a result left on the device and a "fix" that computes on the
# CPU all show.


class _DeviceModel(nn.Module):
    """The check's digit classifier (dropout inside a block), movable between the host and the stand-in device.

    Made movable by ``place_model``; its forward records where it ran and which layers were in training mode.
    """

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Flatten(), nn.Sequential(nn.Linear(28 * 28, 32), nn.ReLU(), nn.Dropout(0.5)),
                                 nn.Linear(32, 10))
        self.ran: list[tuple[bool, list[str]]] = []
        self.moves: list[str] = []  # each .to / .cuda / .cpu call on the model, by name
        place_model(self)
        for name in ("to", "cuda", "cpu"):  # watched on this instance only (place_model's class moves it in name)

            def spy(module: nn.Module, *args: Any, _name: str = name, **kwargs: Any) -> Any:
                module.moves.append(_name)
                return getattr(type(module), _name)(module, *args, **kwargs)

            object.__setattr__(self, name, types.MethodType(spy, self))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.ran.append((model_on_device(self), _layer_names(self, True)))
        return self.net(images)


class _Moves(TorchFunctionMode):
    """Records where each .to / .cuda / .cpu call sends a tensor of ``shape`` (the images): the evidence for which way
    a program moved its batch, whatever device stand-in the tensors are.

    It also extends the stand-in to what a GPU allows besides .to / .cuda: a tensor made with ``device=`` the
    stand-in device (``torch.as_tensor(images, device=device)``, ``torch.empty_like(x, device=device)``...) is made
    in the host's memory and placed on the stand-in device, and ``copy_`` copies between the host and the device."""

    def __init__(self, shape: torch.Size) -> None:
        super().__init__()
        self.shape, self.targets = shape, []
        self.methods: list[str] = []  # "to", "cuda", "cpu" or a factory's name, one per target

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        of_images = bool(args) and isinstance(args[0], torch.Tensor) and args[0].shape == self.shape
        if name in ("to", "cuda", "cpu"):
            target = _destination(name, args, kwargs) if of_images else None
            if target is not None:
                self.targets.append(target)
                self.methods.append(name)
            return func(*args, **kwargs)
        if name == "copy_" and len(args) > 1 and all(isinstance(a, Placed) for a in args[:2]):
            with torch._C.DisableTorchFunctionSubclass():  # between devices, as a GPU copies
                unplaced(args[0]).copy_(unplaced(args[1]), **kwargs)
            return args[0]
        device = kwargs.get("device") if not name.startswith("_") else None  # not torch's helpers (_parse_to...)
        if isinstance(device, (torch.device, str)) or (isinstance(device, int) and not isinstance(device, bool)):
            device = torch.device(device)
            if device.type != "cpu":  # made on the stand-in device: made on the host, then placed there
                if of_images:
                    self.targets.append(device)
                    self.methods.append(name)
                made = func(*args, **{**kwargs, "device": "cpu"})
                if not isinstance(made, torch.Tensor):
                    return made
                sources = [unplaced(t).data_ptr() for t in _tensor_args(args) if t.numel()]
                made = unplaced(made)
                if made.numel() and made.data_ptr() in sources:  # as_tensor may alias its input: a GPU copies
                    made = made.clone()
                return place(made, True)
        return func(*args, **kwargs)


def _tensor_args(values: Sequence[Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_tensor_args(value))
    return found


def _destination(name: str, args: tuple, kwargs: dict) -> torch.device | None:
    """Where a .to / .cuda / .cpu call sends a tensor, from its arguments (None: it stays where it is)."""
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        return torch.device("cuda")
    for value in list(args[1:]) + [kwargs.get("device"), kwargs.get("other")]:
        if isinstance(value, torch.Tensor):  # .to(other): the other tensor's place (the stand-in knows it)
            return torch.device("cuda") if getattr(value, "on_device", False) else torch.device("cpu")
        if isinstance(value, (torch.device, str)) or (isinstance(value, int) and not isinstance(value, bool)):
            return torch.device(value)
    return None


def _unmoved_bug(targets: list[torch.device], device: torch.device) -> str:
    """The named bug of a program whose model received the images in host memory, from where it moved them."""
    if any(t.type != "cpu" for t in targets):
        return ("images.to(device) returns a moved copy and leaves `images` where it was (unlike model.to(device), "
                "which moves the module in place); the copy is thrown away. Keep it: images = images.to(device)")
    if targets:
        return (f"the images were moved only to {targets[0]}, not to the `device` the function is given ({device}): "
                "move them to its argument `device` (a name from outside the function may hold another device)")
    return "the images are never moved: move them to `device` and keep the moved copy (images = images.to(device))"


def check_predict_digits(fn: Callable[..., torch.Tensor], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """Runs with the images in the host's memory and a model with dropout in training mode, ``device`` a stand-in for
    a GPU: predicts in eval mode what the reference does, computed on the device, returned on the CPU. Then once more
    with ``device`` the CPU (the first input), where nothing may go to the GPU: the function uses its argument."""
    inputs = inputs if inputs is not None else [(0, 6), (1, 3)]
    for seed, n in inputs:
        _check_predict_once(fn, seed, n, STAND_IN_DEVICE)
    if inputs:
        _check_predict_once(fn, *inputs[0], torch.device("cpu"))
    passed("predict_digits", len(inputs) + bool(inputs))


def _check_predict_once(fn: Callable[..., torch.Tensor], seed: int, n: int, device: torch.device) -> None:
    """One call of predict_digits with the images in the host's memory and ``device`` the stand-in or the CPU."""
    on_gpu = device.type != "cpu"
    images = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(100 + seed))
    what = f"predict_digits on {n} images not yet on the device (device={device})" if on_gpu else \
        f"predict_digits on {n} images with device=cpu (as a caller without a GPU passes)"
    want = unplaced(ref.predict_digits(_DeviceModel(seed), images.as_subclass(OnHost), device))
    model = _DeviceModel(seed)
    with _Moves(images.shape) as moves:
        got = attempt(fn, model, images.as_subclass(OnHost), device)
    broken = attempt(broken_predict_digits, _DeviceModel(seed), images.as_subclass(OnHost), device)
    left_on_device = isinstance(got.value, OnDevice)
    if not on_gpu and (left_on_device or any(on for on, _ in model.ran) or model_on_device(model)
                       or any(t.type != "cpu" for t in moves.targets)):
        shown = f"raises {error_line(got.error)}" if got.error is not None else \
            "sends the model or the images to the GPU anyway"
        raise failure(f"{what} {shown}: nothing should go to a GPU when the caller passes device=cpu",
                      where="look at every place the function names a device: each should be its argument `device`",
                      mistake="the function ignores the device argument: hard-coded cuda (.cuda(), .to('cuda')) "
                              "moves to the GPU whatever device the caller passes (and fails on a machine without "
                              "one). Move the model and the images to `device`: model.to(device), "
                              "images = images.to(device)") from got.error
    if got.error is None:
        in_training = next((layers for _, layers in model.ran if layers), None)
        if in_training:
            raise failure(f"{what}: the model made its predictions with {', '.join(in_training)} in training "
                          "mode, so they change at random from call to call",
                          where="which mode is the model in when it predicts? The task puts it in eval mode",
                          mistake="without model.eval() dropout keeps dropping units (and batch norm uses the "
                                  "batch's statistics): call model.eval() before predicting")
        if isinstance(got.value, torch.Tensor):
            got.value = unplaced(got.value)
    expect_fixed(what, got, want, broken,
                 where="follow the images from the argument to the model call: which tensor does the model "
                       "actually receive, and where is it? Compare what Module.to and Tensor.to do",
                 bug=_unmoved_bug(moves.targets, device),
                 mistakes=[Mistake("these are the highest scores (the values of max over dim 1), not the classes: "
                                   "the class is the index where the maximum sits, which argmax(dim=1) (or max's "
                                   ".indices) gives; a dtype conversion of the scores would not",
                                   matches=lambda value: _top_scores(value, seed, images),
                                   where="print what you return next to the model's output for the same images: "
                                         "one class index 0..9 per image is expected")],
                 differs=_tensor(what))
    if not on_gpu:
        return
    if left_on_device:
        raise failure(f"{what} returns the right predictions, but on the device ({device}); the task "
                      "returns them on the CPU",
                      where="print the .device of the tensor you return",
                      mistake="the predictions stay on the device where they were computed until you copy them: "
                              ".cpu() (or .to('cpu')) on the result")
    if any(not on_device for on_device, _ in model.ran):
        followed = "to" in moves.methods and all(t.type == "cpu" for t in moves.targets)
        raise failure(f"{what} returns the right predictions, but the model computed them on the CPU, not on "
                      f"device ({device})",
                      where="follow the model and the images: where is each of them when the model is called?",
                      mistake="the model was never moved, and the images followed it: they went to the model's "
                              f"device ({moves.targets[0]}, e.g. next(model.parameters()).device), which is still "
                              "the CPU. Move the model to the argument `device` first (model.to(device) moves the "
                              "module in place), then the images to it"
                      if followed and not model.moves else
                              f"your function moved the images to {moves.targets[0]}, not to the `device` it was "
                              f"given ({device}): a name from outside the function (the notebook's "
                              "DEVICE?) holds the notebook's device, not the caller's. Move the model and the "
                              "images to the argument `device`"
                      if followed else
                              "the model was still in the host's memory when it was called, and so were the "
                              "images: moving the images to where the model is (or both to the CPU) makes the "
                              "error go away without using the device. The task computes on `device`: move the "
                              "model there (model.to(device) moves the module in place) and the images too "
                              "(images = images.to(device))")


def _top_scores(value: Any, seed: int, images: torch.Tensor) -> bool:
    """``value`` is the eval-mode model's top score per image (logit, probability or log-probability), not its class."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.shape == (len(images),)):
        return False
    model = _DeviceModel(seed).eval()
    with torch.no_grad():
        logits = model.net(images.as_subclass(torch.Tensor))
    return any(torch.allclose(value.as_subclass(torch.Tensor).float(), scores.max(dim=1).values, atol=1e-5)
               for scores in (logits, logits.softmax(dim=1), logits.log_softmax(dim=1)))


# ---------------------------------------------------------------- 2. a layer of the wrong size


def _expect_built_in_init(what: str, built: list[str], model: nn.Module) -> None:
    """Every parameter and buffer exists once the model is built: none appears during a forward pass."""
    new = [key for key in model.state_dict() if key not in built]
    if new:
        raise failure(f"{what} runs now, but SmallCNN() built has the weights {built}, and after its first forward "
                      f"it also has {new}",
                      where="look for layers assigned to self inside forward (the task creates every layer in "
                            "__init__)",
                      mistake="a layer created in forward does not exist yet when an optimizer is built or "
                              "model.to(device) runs before the first batch: the optimizer never trains it, .to "
                              "never moves it, and state_dict() lacks it until then. Create it in __init__, with "
                              "the size that arrives (nn.LazyLinear, too, is created in __init__)")


_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _expect_batch_kept(what: str, error: Exception | None, n: int) -> None:
    """A classifier that received another number of rows than the batch has images: the flattening is the cause,
    not the classifier's size (the error's mat1 is [rows, features])."""
    found = _MATMUL.search(str(error)) if error is not None else None
    if found is None or int(found[1]) == n:
        return
    rows, columns = int(found[1]), int(found[2])
    symptom = (f"{what} raises {error_line(error)}: the classifier received {rows} row(s) of {columns} features, "
               f"but the batch holds {n} images (one row per image is expected)")
    where = "print the shape of the features as they reach the classifier: is dimension 0 still the batch?"
    if rows == 1 and columns % n == 0:
        raise failure(symptom, where=where,
                      mistake=f"the flattening merged the batch into the features ({n} images x {columns // n} "
                              "features in one row): flatten() without start_dim, or a reshape to (1, -1) / (-1,), "
                              "flattens every dimension. Keep dimension 0: flatten(1) (or x.view(x.size(0), -1))"
                      ) from error
    raise failure(symptom, where=where) from error


def check_small_cnn(cls: type, inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """The model runs on [N, 1, 28, 28] digits and, with the reference's weights, computes what the reference does."""
    inputs = inputs if inputs is not None else [(0, 4), (1, 2)]
    where_size = "print the shape of the features as they reach the classifier (one batch is enough)"
    for seed, n in inputs:
        what = f"SmallCNN on a batch of {n} digits [{n}, 1, 28, 28]"
        images = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(200 + seed))
        torch.manual_seed(seed)
        reference = ref.SmallCNN()
        want = reference(images).detach()
        made = attempt(cls, seed=seed)
        if made.error is not None:
            raise failure(f"building SmallCNN() raises {error_line(made.error)}") from made.error
        model = made.value
        if not isinstance(model, nn.Module):
            raise failure(f"SmallCNN() should build an nn.Module, but gives {describe(model)}")
        built = list(model.state_dict())  # what an optimizer or model.to(device) made before the first batch sees
        got = attempt(model, images)
        broken = attempt(lambda x: BrokenSmallCNN()(x), images, seed=seed)
        _expect_batch_kept(what, got.error, n)
        if got.error is None:
            _expect_built_in_init(what, built, model)
        if got.error is not None or not same_value(got.value, want):
            expect_fixed(what, got, want, broken, where=where_size,
                         bug="the classifier expects 16 * 7 * 7 inputs, but the second convolution has no padding, "
                             "so the features are 16 x 6 x 6. Give nn.Linear the size that arrives",
                         same=lambda a, b: isinstance(a, torch.Tensor) and a.shape == b.shape,
                         hints={"mat1 and mat2": "the classifier's in_features (the first size of mat2) is not the "
                                                 "number of features per image that arrives (the second size of "
                                                 "mat1): give nn.Linear the size that arrives",
                                "is invalid for input of size": "a reshape to a fixed number of features per image "
                                                                "cannot change how many arrive: the batch's elements "
                                                                "are no multiple of it (or images get mixed). Keep "
                                                                "flatten(1) and give nn.Linear the size that arrives"},
                         error_where=where_size, differs=_tensor(what))
        features = getattr(model, "features", None)
        if isinstance(features, nn.Module):
            with torch.no_grad():
                shape = attempt(features, images)
            designed = reference.features(images)
            if shape.error is None and isinstance(shape.value, torch.Tensor) \
                    and shape.value.shape[1:].numel() != designed.shape[1:].numel():
                raise failure(f"{what} runs now, but model.features gives features of shape "
                              f"{list(shape.value.shape)}; the designed convolutions give {list(designed.shape)}",
                              where="the task keeps the convolutions as designed (padding included): "
                                    "compare them with the program you were given",
                              mistake="model.features was changed to fit the classifier (its output is not the "
                                      "designed shape); the task asks for the classifier to fit the designed features")
        calls = differs_between_calls(model, images)
        if calls:
            raise failure(f"{what} runs now, but two calls on the same batch give different outputs",
                          where="look for a dropout in forward: the program you were given has none"
                          if calls.dropout_on else "look for anything in forward that is new at every call",
                          mistake=None if calls.dropout_on else
                          "a layer created inside forward gets new random weights at every call and is "
                          "not part of the model's parameters (nothing would train it): create every layer "
                          "in __init__")
        hidden = unregistered_layers(model)
        if hidden:
            raise failure(f"{what} runs now, but the model keeps layers where PyTorch does not see them: {hidden[0]}",
                          where="look at how the layers are stored in __init__", mistake=UNREGISTERED_LAYERS)
        problem = _load_designed(model, reference)
        if problem is not None:
            raise failure(f"{what} runs now, but the designed network's weights do not fit its layers: {problem}",
                          where="compare your layers and their sizes with the program you were given; the task "
                                "changes only the classifier's input size")
        with torch.no_grad():
            got_same_weights = attempt(model, images)
        if got_same_weights.error is not None or not same_value(got_same_weights.value, want):
            # what the outputs' values show (a softmax on top, say), in the framework's words
            relation = tensor_mistake(got_same_weights.value, want)
            raise failure(f"{what} runs now, but with the designed network's weights loaded its output differs "
                          "from the designed network's",
                          where="compare forward, step by step, with the program you were given", mistake=relation)
    passed("SmallCNN", len(inputs))


def _loss_value(value: Any) -> str:
    """A one-number tensor as its number, anything else described."""
    return f"{value.item():.6g}" if isinstance(value, torch.Tensor) and value.numel() == 1 else describe(value)


def _load_designed(model: nn.Module, reference: nn.Module) -> str | None:
    """Load the reference's weights into ``model``: by name when its layers keep the designed names, else in order
    when each of its tensors has the designed shape (the task leaves the names and the nesting open, e.g. a classifier
    wrapped in a Sequential with Flatten). None when loaded, else what does not fit, in words."""
    designed = reference.state_dict()
    try:
        model.load_state_dict(designed)
        return None
    except (RuntimeError, KeyError) as error:
        by_name = _state_dict_problem(error)
    mine = model.state_dict()
    shapes = [list(t.shape) for t in mine.values()]
    want = [list(t.shape) for t in designed.values()]
    if shapes != want:
        return by_name.rstrip(".") if by_name.startswith("size mismatch") or len(mine) != len(designed) else \
            f"{by_name.rstrip('.')}; in order, its tensors have the shapes {shapes}, the designed network's {want}"
    with torch.no_grad():
        for mine_tensor, designed_tensor in zip(mine.values(), designed.values()):
            mine_tensor.copy_(designed_tensor)
    return None


def _state_dict_problem(error: Exception) -> str:
    """The first specific line of a load_state_dict error (size mismatch, missing or unexpected key)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    specific = [line for line in lines if line.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    return (specific or lines or [type(error).__name__])[0][:220]


# ---------------------------------------------------------------- 3. cross-entropy targets from a table


def check_loss_from_table(fn: Callable[..., torch.Tensor], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """A loss tensor (with its graph) equal to cross-entropy against the column's labels 1..10 as indices 0..9."""
    inputs = inputs if inputs is not None else [(0, 5), (1, 12), (2, 1)]  # one row: squeeze() would drop the batch
    for seed, n in inputs:
        g = torch.Generator().manual_seed(300 + seed)
        logits = torch.randn(n, 10, generator=g)
        numbers = torch.randint(1, 11, (n,), generator=g)
        numbers[0], numbers[-1] = 10, 1  # both ends of the table's numbering
        confident = n > 1  # a model sure of a wrong class: log(softmax(...)) by hand gives -inf there (section 8)
        if confident:
            logits[0, 0] = 150.0
        logits.requires_grad_()
        column = numbers.float().unsqueeze(1)
        what = (f"loss_from_table(logits [{n}, 10]{' (sample 0 scores class 0 at 150)' if confident else ''}, "
                f"label_column [{n}, 1] float holding {numbers.tolist()})")
        want = ref.loss_from_table(logits, column)
        got = attempt(fn, logits, column.clone())  # call's rules: the caller's column comes back unchanged
        broken = attempt(broken_loss_from_table, logits, column.clone())
        labels_where = ("print the shape, dtype and values of the labels as they reach cross_entropy, and compare "
                        "them with what it expects: one class index per sample, 0 to 9")
        expect_fixed(what, got, want, broken, where=labels_where, error_where=labels_where,
                     bug="cross_entropy wants a 1-D tensor of int64 class indices from 0 to 9; the table gives an "
                         "[N, 1] float column numbered 1 to 10. Squeeze it to [N], convert it with .long() and "
                         "shift it down by one",
                     symptom=lambda got, want: f"{what} returns {_loss_value(got)}, expected {want.item():.6g}",
                     mistakes=[
                         Mistake("clamping moves label 10 onto class 9 and leaves every other label off by one: "
                                 "the table's numbers are the class indices plus one",
                                 lambda: F.cross_entropy(logits, numbers.clamp(max=9)),
                                 where="look at how the table's label numbers become class indices"),
                         Mistake("label 10 became class 0 and every other label kept its number, so each of "
                                 "those is off by one: the table's numbers are the class indices plus one (subtract "
                                 "1 from every label)",
                                 lambda: F.cross_entropy(logits, numbers % 10),
                                 where="look at how the table's label numbers become class indices"),
                         Mistake(f"the loss is summed over the {n} samples instead of averaged: cross_entropy "
                                 "averages by default (reduction='mean')",
                                 lambda: F.cross_entropy(logits, numbers - 1, reduction="sum"),
                                 where="look at the arguments of your cross_entropy call"),
                         Mistake("the loss is not finite: softmax rounds the probability of sample 0's class to 0 "
                                 "next to a score of 150, and log(0) is -inf. cross_entropy (or log_softmax, then "
                                 "nll_loss) computes the log-probabilities directly, without that rounding",
                                 matches=lambda value: isinstance(value, torch.Tensor) and value.is_floating_point()
                                 and not bool(torch.isfinite(value.detach()).all()),
                                 where="look at how your loss turns the logits into log-probabilities"),
                         Mistake("cross_entropy was given probabilities (a softmax of the logits): it applies "
                                 "log-softmax itself, so pass the raw logits",
                                 lambda: F.cross_entropy(logits.softmax(dim=1), numbers - 1),
                                 where="look at what your cross_entropy call is given as its first argument"),
                         Mistake("nll_loss was given the raw logits: it expects log-probabilities (a loss below 0 "
                                 "is the sign). Use cross_entropy on the logits, or log_softmax before nll_loss",
                                 lambda: F.nll_loss(logits, numbers - 1),
                                 where="look at the loss function you call and what it expects"),
                         Mistake("an extra logit column makes label 10 fit, but it takes part in every softmax and "
                                 "changes the loss of every sample: shift the labels down by one instead",
                                 matches=lambda value: _padded_logits(value, logits, numbers),
                                 where="look at how the table's label numbers become class indices"),
                     ],
                     hints={"multi-target": "the labels still have a second dimension, [N, 1]: cross_entropy "
                                            "wants shape [N]",
                            "target dtype": "cross_entropy wants the class indices as int64 (torch.long); the "
                                            "message says which dtype arrived",
                            "out of bounds": "a label is outside 0..9: the class indices of 10 outputs run from 0 "
                                             "to 9, and the table numbers them from 1",
                            "target batch_size (0)": "the labels reached cross_entropy without a batch dimension "
                                                     "(0-d): with one row, [1, 1] lost both its dimensions, as "
                                                     "squeeze() without a dim does. Name the dimension to remove"},
                     differs=_loss_differs(what, want, numbers))
        if not got.value.requires_grad:
            raise failure(f"{what} returns a loss that backward() cannot follow (requires_grad=False)",
                          where="look for detach(), .item() or no_grad between the loss and the return",
                          mistake="return the loss tensor itself, with its graph")
    passed("loss_from_table", len(inputs))


def _padded_logits(value: Any, logits: torch.Tensor, numbers: torch.Tensor) -> bool:
    """The loss of the logits with a zero column added (first or last) against the unshifted labels 1..10."""
    if not (isinstance(value, torch.Tensor) and value.numel() == 1):
        return False
    with torch.no_grad():
        zeros = torch.zeros(len(logits), 1)
        return any(same_value(value.detach(), F.cross_entropy(padded, numbers))
                   for padded in (torch.cat([zeros, logits], 1), torch.cat([logits, zeros], 1)))


def _loss_differs(what: str, want: torch.Tensor, numbers: torch.Tensor) -> Callable[[Any, Any], None]:
    """A ``differs`` for the loss: a one-number tensor is compared as a number (a ratio of one number to another is
    no evidence of a factor), anything else described by expect_tensor."""
    def differs(got: Any, expected: torch.Tensor) -> None:
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype:
            raise failure(f"{what} returns {got.item():.6g}, expected {expected.item():.6g} (the mean cross-entropy "
                          f"against the classes {(numbers - 1).tolist()})",
                          where="print the labels as they reach cross_entropy, and the logits it gets: one class "
                                "index 0..9 per sample, and the [N, 10] logits as they were given")
        expect_tensor(got, expected, what=what)
    return differs


# ---------------------------------------------------------------- 4. an in-place change autograd needed


def _forward_backward(block: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """Output, input gradient and parameter gradients of a weighted sum of ``block(x)``."""
    x = x.clone().requires_grad_()
    called: set[str] = set()
    # which layers forward calls: a layer never called is the evidence for its missing gradient (not a cut graph)
    hooks = [module.register_forward_hook(lambda m, args, output, name=name: called.add(name))
             for name, module in block.named_children() if any(True for _ in module.parameters())]
    try:
        out = block(x)
    finally:
        for hook in hooks:
            hook.remove()
    weights = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out * weights).sum().backward()
    uncalled = sorted(name for name, module in block.named_children()
                      if any(True for _ in module.parameters()) and name not in called)
    return {"output": out.detach(), "input grad": x.grad,
            "parameter grads": {name: p.grad for name, p in block.named_parameters()}, "uncalled": uncalled}


def _no_gradient(name: str, reference: dict) -> Callable[[Any], bool]:
    """The layer ``name`` belongs to was called but its parameter got no gradient (a graph cut after it)."""
    def matches(got: Any) -> bool:
        grads = got["parameter grads"]
        layer = name.split(".")[0]
        return grads.get(name) is None and reference["parameter grads"].get(name) is not None and \
            layer not in got["uncalled"]
    return matches


def _uncalled(got: Any) -> bool:
    return bool(got["uncalled"])


def check_gated_block(cls: type, inputs: Sequence[tuple[int, int, int]] | None = None) -> None:
    """Forward and backward run, and output and gradients equal the reference's (with the reference's weights)."""
    inputs = inputs if inputs is not None else [(0, 4, 6), (1, 3, 5)]
    for seed, n, width in inputs:
        what = f"GatedBlock({width}) forward and backward on a [{n}, {width}] batch"
        torch.manual_seed(seed)
        reference = ref.GatedBlock(width)
        x = torch.randn(n, width, generator=torch.Generator().manual_seed(500 + seed))
        want = _forward_backward(reference, x)
        made = attempt(cls, width, seed=seed)
        if made.error is not None:
            raise failure(f"building GatedBlock({width}) raises {error_line(made.error)}") from made.error
        block = made.value
        if not isinstance(block, nn.Module):
            raise failure(f"GatedBlock({width}) should build an nn.Module, but gives {describe(block)}")
        try:
            block.load_state_dict(reference.state_dict())
        except (RuntimeError, KeyError) as error:
            raise failure(f"GatedBlock({width}): the designed weights do not fit its layers: "
                          f"{_state_dict_problem(error)}",
                          where="the task keeps self.linear and self.gate as they are; only forward changes") from None
        broken_block = BrokenGatedBlock(width)
        broken_block.load_state_dict(reference.state_dict())

        def grads_symptom(got: dict, expected: dict) -> str:
            missing = [k for k, v in got["parameter grads"].items() if v is None]
            output = "the output is right, but" if same_value(got["output"], expected["output"]) else \
                "the output differs from x + sigmoid(gate(x)) * linear(x), and"
            uncalled = (f" (forward never calls self.{', self.'.join(got['uncalled'])})" if got["uncalled"] else "")
            return (f"{what}: {output} {', '.join(missing)} get no gradient{uncalled}" if missing
                    else f"{what}: the output or the gradients differ from x + sigmoid(gate(x)) * linear(x)'s")

        # the check's own backward fills the blocks' .grad: that is how it reads the gradients
        expect_fixed(what, attempt(_forward_backward, block, x, allow=Allow(changed=(block,), modes=True)), want,
                     attempt(_forward_backward, broken_block, x, allow=Allow(changed=(broken_block,), modes=True)),
                     where="the message names the operation whose saved tensor changed (its backward, e.g. "
                           "SigmoidBackward0): find which line changes that operation's result afterwards",
                     bug="h *= ... overwrites the output of sigmoid, which sigmoid's backward needs. Compute the "
                         "product as a new tensor (h = h * ...), so the saved one stays as it was",
                     symptom=grads_symptom,
                     hints={"leaf Variable that requires grad is being used in an in-place operation":
                            "forward changes in place a leaf tensor that requires grad: the caller's input x (x += "
                            "..., x.add_) or a parameter. Compute a new tensor (return x + ...) instead"},
                     error_where="find the line of forward the error points to, and what the error says about the "
                                 "tensors on it",
                     mistakes=[Mistake("detach() (or no_grad) cut sigmoid out of the graph: that hides the error "
                                       "and the gate no longer learns. Compute the product as a new tensor instead",
                                       matches=_no_gradient("gate.weight", want),
                                       where="look at how the gate's output is combined with the input in forward"),
                               Mistake("a layer forward never calls gets no gradient and plays no part in the "
                                       "output: the gate is sigmoid(self.gate(x)), the value self.linear(x)",
                                       matches=_uncalled,
                                       where="look at which layer each term of forward calls")],
                     differs=lambda got, expected: _differs_grads(what, got, expected))
    passed("GatedBlock", len(inputs))


def _differs_grads(what: str, got: dict, want: dict) -> None:
    if not same_value(got["output"], want["output"]):
        raise failure(f"{what}: the output differs from x + sigmoid(gate(x)) * linear(x)",
                      where="compare each operation of forward with the formula",
                      mistake=tensor_mistake(got["output"], want["output"]))  # a sigmoid on top, a factor...
    missing = [k for k, v in got["parameter grads"].items() if v is None]
    if missing:
        hidden = all(k.startswith("linear.") for k in missing)  # the product hidden from autograd, the gate kept
        others = [k for k, v in got["parameter grads"].items()
                  if v is not None and not same_value(v, want["parameter grads"].get(k))]
        raise failure(f"{what}: the output is right, but {', '.join(missing)} get no gradient"
                      + (f", and {', '.join(others)} get other gradients" if others else ""),
                      where="look for .data, detach(), no_grad or a copy without a graph inside forward",
                      mistake="the product with self.linear(x) was made where autograd does not see it (an in-place "
                              "change of h.data, say): the output is right, but linear gets no gradient and the gate's "
                              "is sigmoid's alone. Compute the product as a new tensor (h = h * ...)" if hidden else None)
    raise failure(f"{what}: the output is right but the gradients differ",
                  where="look for .data, detach(), no_grad or a copy without a graph inside forward")


# ---------------------------------------------------------------- 5. a training loop (silent)


class FitCase(NamedTuple):
    """seed, samples, batch size, epochs, learning rate."""

    seed: int = 0
    n: int = 24
    batch_size: int = 6
    epochs: int = 2
    lr: float = 0.1


def _fit_run(fn: Callable[..., Any], case: FitCase) -> Outcome:
    g = torch.Generator().manual_seed(600 + case.seed)
    x = torch.randn(case.n, 6, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()  # 3 classes a small network can learn
    torch.manual_seed(case.seed)
    # dropout makes the mode a loop trains in show in its results; the model arrives in eval mode, as an evaluation
    # leaves it, so a loop that does not switch it to training mode trains with dropout off
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 3)).eval()
    loader = DataLoader(list(zip(x, y)), batch_size=case.batch_size)
    # task: the loop trains the model it is given (in place) and returns the losses
    with traced(model) as trace:
        outcome = attempt(fn, model, loader, case.epochs, case.lr, seed=case.seed,
                          allow=Allow(changed=(model,), global_rng=True))
    outcome.trace = trace
    if outcome.error is None:
        outcome.value = {"losses": outcome.value, "weights": _weights(model)}
    return outcome


def _zero_grad_late(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
            losses.append(loss.item())
    return losses


def _fit_on_probabilities(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """The loop done right, with cross_entropy given softmax probabilities instead of the logits."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs).softmax(dim=1), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def _no_zero_grad(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def _no_steps(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """Trains nothing: the weights as the loop receives them."""
    return []


def _unchanged_weights(what: str, trace: Trace, shown: str) -> None:
    """Raise for a loop whose weights never changed, naming why only from what its optimizer steps found."""
    where = ("step() applies the gradients as they are when it runs: put zero_grad(), backward() and step() in the "
             "order of one training step")
    if not trace.steps:
        raise failure(f"{shown}; the weights never change: the loop takes no optimizer step",
                      where="look for optimizer.step() in the loop, and for the optimizer it is called on")
    if any(nonzero for _, nonzero in trace.step_grads):
        return
    first_backwards = trace.step_grads[0][0]
    raise failure(f"{shown}; the weights never change: each of its {len(trace.steps)} optimizer steps found no "
                  "gradient (all zero or None)", where=where,
                  mistake="the first step() runs before any backward(): there is nothing to apply yet, and the "
                          "next zero_grad() clears what backward() computed. Call step() after backward()"
                  if first_backwards == 0 else
                  "backward() ran, but its gradients are gone when step() runs: zero_grad() runs between backward() "
                  "and step(). Zero them before backward()")


def _expect_trained_in_training_mode(what: str, trace: Trace) -> None:
    """Every forward pass that an optimizer step followed ran with the model's dropout in training mode."""
    in_eval = [(step, f) for step, f in enumerate(trace.training_forwards(), 1) if f[3]]
    if in_eval:
        step, (_, _, _, layers) = in_eval[0]
        raise failure(f"{what}: from training step {step} on, the model (handed over in eval mode) trains with "
                      f"{', '.join(layers)} in eval mode, so dropout drops nothing while it learns",
                      where="which mode is the model in at each training step? Look at what switches it",
                      mistake="the model was in eval mode while it trained (model.eval() in the loop, or no "
                              "model.train() before it): model.train() switches every submodule to training mode, "
                              "as the program you were given does before the loop")


def check_fit(fn: Callable[..., list[float]], inputs: Sequence[FitCase] | None = None) -> None:
    """The weights after training and the logged losses equal the reference's."""
    inputs = inputs if inputs is not None else [FitCase(0), FitCase(1, 20, 5, 3, 0.2)]
    for case in inputs:
        steps = math.ceil(case.n / case.batch_size)
        what = f"fit for {case.epochs} epochs of {steps} batches of {case.batch_size} (lr={case.lr})"
        want_run = _fit_run(ref.fit, case)
        want, got = want_run.value, _fit_run(fn, case)

        def losses_symptom(got: dict, expected: dict) -> str:
            losses, right = got["losses"], expected["losses"]
            first_wrong = next((i for i, (a, b) in enumerate(zip(losses, right)) if not math.isclose(a, b, rel_tol=1e-4,
                                                                                                     abs_tol=1e-6)),
                               min(len(losses), len(right)))
            return (f"{what} logs the losses {_short(losses, 8)}; a correct loop logs {_short(right, 8)} "
                    f"(they part at step {first_wrong + 1})")

        def differs(got: Any, expected: dict) -> None:
            losses = got["losses"]
            if not isinstance(losses, list) or not all(isinstance(v, float) for v in losses):
                raise failure(f"{what} returns {describe(losses)}, expected a list of Python floats (one per step)",
                              mistake="loss.item() gives a step's loss as a Python float")
            trained_on = got_trace.losses  # the value of each loss backward() ran on, in order
            off = next((i for i, (v, loss) in enumerate(zip(losses, trained_on))
                        if not math.isclose(v, loss, rel_tol=1e-5, abs_tol=1e-7)), None) \
                if len(trained_on) == len(losses) == len(got_trace.steps) else None
            forwards, steps = got_trace.forwards, got_trace.steps
            if off is not None and len(forwards) == 2 * len(steps) and forwards[1][0] > steps[0][0]:
                raise failure(f"{losses_symptom(got, expected)}: its step {off + 1} logs {losses[off]:.6g}, but the "
                              f"loss that step's backward() ran on was {trained_on[off]:.6g}; the model runs twice "
                              "per step",
                              where="what is appended to the list: the loss of the training forward, the one "
                                    "backward() ran on, computed before step() changes the weights",
                              mistake="a second forward pass after step() (e.g. under no_grad, to log the loss) "
                                      "gives the loss of the updated weights, not the one the step trained on; in "
                                      "training mode it also draws dropout masks of its own, so the later steps "
                                      "differ too. Append loss.item() of the training forward, and run the model "
                                      "once per step")
            if same_value(got["weights"], expected["weights"]):
                raise failure(f"{what}: the weights after training are right, but it logs {_short(losses, 8)}, "
                              f"expected {_short(expected['losses'], 8)}",
                              where="look at what is appended to the list, and when")
            right = expected["losses"]
            if losses and right and not math.isclose(losses[0], right[0], rel_tol=1e-4):
                ratio = losses[0] / right[0]
                summed = math.isclose(ratio, case.batch_size, rel_tol=1e-4)
                divisor = round(1 / ratio) if ratio > 0 else 0
                divided = divisor > 1 and math.isclose(1 / ratio, divisor, rel_tol=1e-4)
                raise failure(f"{losses_symptom(got, expected)}: before any step, its first loss is {ratio:.4g} "
                              "times the correct one"
                              + (f" (a batch holds {case.batch_size} samples)" if summed else ""),
                              where="the first loss comes before any update: compare how the loss of one batch is "
                                    "computed with the task's cross-entropy",
                              mistake="the loss is summed over the batch instead of averaged, so each step is "
                                      f"{case.batch_size} times too large: cross_entropy averages by default "
                                      "(reduction='mean')" if summed else
                                      f"each batch's loss is divided by {divisor} before backward(), so every step is "
                                      f"{divisor} times too small: use cross_entropy's mean as it is" if divided
                                      else None)
            optimizer = _optimizer_difference(got_trace, want_run.trace)
            if optimizer:
                raise failure(losses_symptom(got, expected) + ", and the weights after training differ",
                              where="look at the optimizer the loop builds: the task trains with plain SGD and the "
                                    "learning rate it is given",
                              mistake=f"{optimizer}: another optimizer (or other settings) takes other steps. Use "
                                      "torch.optim.SGD(model.parameters(), lr=lr)")
            raise failure(losses_symptom(got, expected) + ", and the weights after training differ",
                          where="compare, line by line, what one step does with what the task asks: SGD with the "
                                "given lr, cross-entropy, and the gradients each step applies")

        got_trace = got.trace
        if got.error is None:
            _expect_trained_in_training_mode(what, got_trace)
        if got.error is None and not same_value(got.value, want) \
                and same_value(got.value["weights"], _fit_run(_no_steps, case).value["weights"]):
            _unchanged_weights(what, got_trace, losses_symptom(got.value, want) if isinstance(
                got.value["losses"], list) and all(isinstance(v, float) for v in got.value["losses"]) else what)
        if got.error is not None and "modified by an inplace operation" in str(got.error) \
                and got_trace.step_grads and got_trace.step_grads[0][0] == 0:
            raise failure(f"{what} raises {error_line(got.error)}",
                          where="backward() raises it: look at what runs between computing a batch's loss and its "
                                "backward()",
                          mistake="optimizer.step() runs before loss.backward(): step() changes the weights in place, "
                                  "and the backward() that follows needs them as they were when the loss was "
                                  "computed (the first step() has no gradient to apply yet). One step is "
                                  "zero_grad(), forward, backward(), then step()") from got.error
        expect_fixed(what, got, want, _fit_run(broken_fit, case),
                     where="the first step is right and the later ones are not: look at what each step starts "
                           "from. How often does each line of the loop run?",
                     bug="optimizer.zero_grad() runs once per epoch, so within an epoch backward() adds every "
                         "batch's gradient to the earlier ones and each step applies them all again. Zero the "
                         "gradients at every step, before backward()",
                     symptom=losses_symptom,
                     mistakes=[
                         Mistake("the gradients are never zeroed: each step applies the sum of every gradient so "
                                 "far. Zero them at every step, before backward()",
                                 lambda: _fit_run(_no_zero_grad, case).value,
                                 where="look at what happens to the gradients between one step and the next"),
                         Mistake("cross_entropy was given probabilities (a softmax of the model's output): it "
                                 "applies log-softmax itself, so pass the raw logits",
                                 lambda: _fit_run(_fit_on_probabilities, case).value,
                                 where="look at what the loss is computed from"),
                     ],
                     differs=differs)
    passed("fit", len(inputs))


# ---------------------------------------------------------------- 6. evaluation in training mode (silent)


def _eval_setup(seed: int, n: int) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A model with batch norm and dropout whose running statistics are not the initial ones, in training mode."""
    g = torch.Generator().manual_seed(700 + seed)
    torch.manual_seed(seed)
    # batch norm and dropout inside a block: a fix that sets the flags of the top-level modules only still drops units
    model = nn.Sequential(nn.Linear(8, 32), nn.Sequential(nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5)),
                          nn.Linear(32, 3))
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(16, 8, generator=g) * 2 + 1)  # training-mode passes update the running statistics
    images = torch.randn(n, 8, generator=g) * 2 + 1
    model.eval()
    with torch.no_grad():
        labels = model(images).argmax(dim=1)
    labels[::4] = (labels[::4] + 1) % 3  # an accuracy of about 75% in eval mode
    model.train()
    return model, images, labels


def check_accuracy(fn: Callable[..., float], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """The accuracy in eval mode, as a Python float, with every submodule left in eval mode."""
    inputs = inputs if inputs is not None else [(0, 40), (1, 25)]
    for seed, n in inputs:
        what = f"accuracy on {n} samples (a model with batch norm and dropout)"
        model, images, labels = _eval_setup(seed, n)
        want = ref.accuracy(copy.deepcopy(model), images, labels)
        # A program that evaluates in training mode also updates batch norm's running statistics: the accuracy it
        # reports shows that bug first (and the modes it leaves are checked below), so the model may change here.
        in_training_mode = Allow(changed=(model,), global_rng=True)
        with traced(model) as trace:
            got = attempt(fn, model, images, labels, seed=seed, allow=in_training_mode)

        def accuracy_symptom(value: Any, expected: float) -> str:
            again_model = _eval_setup(seed, n)[0]
            again = attempt(fn, again_model, images, labels, seed=seed + 1000,
                            allow=Allow(changed=(again_model,), global_rng=True))
            second = f", and {again.value:.3f} on a second call with the same inputs" if \
                isinstance(again.value, float) and again.value != value else ""
            return (f"{what} returns {value:.3f}{second}; the model's predictions in eval mode agree with "
                    f"{expected:.3f} of the labels") if isinstance(value, float) else \
                f"{what} returns {describe(value)}, expected {expected:.3f}"

        broken_model = _eval_setup(seed, n)[0]
        broken = attempt(broken_accuracy, broken_model, images, labels, seed=seed,
                         allow=Allow(changed=(broken_model,), global_rng=True))
        at = next((i for i, f in enumerate(trace.forwards) if f[2]), None)
        if got.error is None and at is not None and \
                not (isinstance(got.value, float) and same_value(got.value, want)):
            same = " (the same as the program you were given)" if same_value(got.value, broken.value) else ""
            raise failure(f"{accuracy_symptom(got.value, want)}{same}; the model predicted with "
                          f"{', '.join(trace.forwards[at][2])} in training mode"
                          + (" (the model itself too)" if "" in trace.modes[at] else ""),
                          where="dropout and batch norm each keep their own training flag: after the line meant to "
                                "switch the mode, print each submodule's .training",
                          mistake=_mode_mistake(trace.modes[at], model))
        classes = 3
        # argmax over the samples gives one entry per class: compared with one label per sample, the two sizes clash
        over_samples = ("the predictions hold one entry per class (3), not one per sample: argmax(dim=0) reduces over "
                        "the samples; the classes are dim 1 of the [N, 3] output")
        expect_fixed(what, got, want, broken,
                     where="dropout and batch norm each keep their own training flag: after the line meant to "
                           "switch the mode, print each submodule's .training",
                     error_where="the error names two sizes: print the shape of the predictions and of the labels "
                                 "where they meet (one prediction per sample, one class out of 3 each)",
                     hints={f"size of tensor a ({classes}) must match the size of tensor b ({n})": over_samples,
                            f"size of tensor a ({n}) must match the size of tensor b ({classes})": over_samples},
                     bug="model.training = False sets the flag of the outer module only; Dropout and BatchNorm1d "
                         "read their own, so they still drop units and use the batch's statistics. model.eval() "
                         "sets every submodule's flag",
                     symptom=accuracy_symptom,
                     mistakes=[Mistake("// is integer division: the number of right predictions // the number of "
                                       "samples is 0 unless every prediction is right; divide with /",
                                       matches=lambda value, right=round(want * n): 0 < right < n
                                       and isinstance(value, (int, float)) and value == right // n
                                       and _all_right_gives_one(fn, seed, n),
                                       where="look at the division that turns the count into a fraction"),
                               Mistake(over_samples + ", and comparing them with the first 3 labels hides the "
                                       "clash of sizes", lambda: _first_labels_against_dim0(seed, n, classes),
                                       where="print the shape of the predictions: one per sample?")],
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=_number(what))
        left = [name for name, m in model.named_modules() if m.training]
        if left:
            raise failure(f"{what}: the accuracy is right, but afterwards these submodules are in training mode: "
                          f"{', '.join(n or 'the model' for n in left)}",
                          where="the task leaves the model in eval mode; look at what runs after the predictions")
    passed("accuracy", len(inputs))


def _eval_scores(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The scores an eval-mode copy of ``model`` gives ``images`` (the model itself keeps its mode)."""
    with torch.no_grad():
        return copy.deepcopy(model).eval()(images)


def _first_labels_against_dim0(seed: int, n: int, classes: int) -> float:
    """The accuracy of argmax over dim 0 (one entry per class) against the first ``classes`` labels."""
    model, images, labels = _eval_setup(seed, n)
    predictions = _eval_scores(model, images).argmax(dim=0)
    return (predictions == labels[:classes]).float().mean().item()


def _all_right_gives_one(fn: Callable[..., float], seed: int, n: int) -> bool:
    """Whether ``fn`` says 1 for labels that every eval-mode prediction matches: floor division's one right answer
    (an accuracy of 0 has other causes, such as predictions over the wrong dimension)."""
    model, images, _ = _eval_setup(seed, n)
    labels = _eval_scores(model, images).argmax(dim=1)
    probe = attempt(fn, model, images, labels, seed=seed, allow=Allow(changed=(model,), global_rng=True))
    return probe.error is None and isinstance(probe.value, (int, float)) and probe.value == 1


def _mode_mistake(training: list[str], model: nn.Module) -> str:
    """The named mistake for a model that predicted with mode layers in training mode, from the modes it had then
    (``training``: the submodules in training mode at that forward, '' the model itself) and has after the call."""
    late = not any(m.training for m in model.modules())
    if "" in training and len(training) == len(list(model.modules())):
        return ("nothing had switched the model to eval mode when it predicted"
                + (", and it is in eval mode only afterwards: switch before predicting" if late else
                   ": call model.eval() before predicting (with the parentheses: model.eval alone names the method "
                   "and switches nothing)"))
    return ("Dropout and BatchNorm1d read their own flags: model.training = False sets the flag of the outer module "
            "only, and setting flags by hand misses the layers inside blocks, so they still drop units and use the "
            "batch's statistics. model.eval() sets every submodule's flag"
            + (", and it must run before predicting: after, it comes too late" if late else ""))


# ---------------------------------------------------------------- 7. a shuffled test set (silent)


class Digits(Dataset):
    """(features, int label) pairs, as torchvision's MNIST returns (image, int)."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.features[index], int(self.labels[index])


def _test_setup(seed: int, n: int, log: list[int] | None = None) -> tuple[nn.Module, Digits]:
    """A model with dropout (inside a block, in training mode) right on about 80% of ``n`` samples; with ``log``, the
    dataset records the order in which its samples are read."""
    g = torch.Generator().manual_seed(800 + seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.Sequential(nn.ReLU(), nn.Dropout(0.5)), nn.Linear(16, 4))
    features = torch.randn(n, 8, generator=g)
    with torch.no_grad():
        labels = model.eval()(features).argmax(dim=1)
    labels[::5] = (labels[::5] + 1) % 4  # about 80% right
    model.train()
    return model, (Digits if log is None else recording(Digits, log))(features, labels)


def _wrong_denominator(value: float, correct: int, n: int, batch_size: int) -> str | None:
    """The mistake when ``value`` is the right count divided by a count of the loader's instead of the samples'."""
    batches = math.ceil(n / batch_size)
    for denominator, words in ((batches * batch_size, f"len(loader) * batch_size ({batches} x {batch_size})"),
                               (batches, "the number of batches, len(loader)")):
        if denominator != n and math.isclose(value, correct / denominator, rel_tol=1e-6):
            last = f" (the last batch holds only {n % batch_size})" if denominator > n else ""
            return (f"your result is the {correct} right predictions divided by {words} = {denominator}, not by the "
                    f"{n} samples{last}: divide by len(test_set), or count the samples as the batches arrive")
    return None


def _mean_of_batches(seed: int, n: int, batch_size: int) -> float:
    """The mean of the batches' accuracies (in order, eval mode): what averaging per-batch accuracies reports."""
    model, dataset = _test_setup(seed, n)
    model.eval()
    with torch.no_grad():
        scores = [(model(x).argmax(dim=1) == y).float().mean().item() for x, y in DataLoader(dataset, batch_size)]
    return sum(scores) / len(scores)


def _sorted_agreement(seed: int, n: int) -> float:
    """The share of places where the predictions, sorted on their own, equal the labels, sorted on their own (eval
    mode): what comparing the two after sorting each reports. Sorting pairs equal values, not samples."""
    model, dataset = _test_setup(seed, n)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(x).argmax(dim=1) for x, _ in DataLoader(dataset, n)])
    labels = torch.cat([y for _, y in DataLoader(dataset, n)])
    return (predictions.sort().values == labels.sort().values).float().mean().item()


def check_dataset_accuracy(fn: Callable[..., float], inputs: Sequence[tuple[int, int, int]] | None = None) -> None:
    """The accuracy over the dataset in eval mode, predictions compared with the labels of the same samples."""
    inputs = inputs if inputs is not None else [(0, 30, 8), (1, 21, 5)]
    for seed, n, batch_size in inputs:
        what = f"dataset_accuracy on {n} samples, batch_size={batch_size}"
        order: list[int] = []
        model, dataset = _test_setup(seed, n, order)
        want = ref.dataset_accuracy(_test_setup(seed, n)[0], _test_setup(seed, n)[1], batch_size)
        with traced(model) as trace:
            # the model is handed in training mode, and evaluating is the program's job: it may switch the mode
            got = attempt(fn, model, dataset, batch_size, seed=seed)
        broken = attempt(broken_dataset_accuracy, _test_setup(seed, n)[0], dataset, batch_size, seed=seed)

        def shows(value: Any, expected: float) -> str:
            return (f"{what} returns {value:.6g} for a model whose predictions agree with {expected:.3f} of the "
                    "labels (sample by sample)") if isinstance(value, float) else \
                f"{what} returns {describe(value)}, expected {expected:.3f}"

        in_training = next((f[2] for f in trace.forwards if f[2]), None)
        if got.error is None and in_training and not (isinstance(got.value, float) and same_value(got.value, want)):
            raise failure(f"{shows(got.value, want)}; the model predicted with {', '.join(in_training)} in "
                          "training mode",
                          where="which mode is the model in when it predicts? (it has dropout)",
                          mistake="without model.eval() dropout keeps dropping units while the model is evaluated: "
                                  "call model.eval() before predicting")

        def differs(value: Any, expected: float) -> None:
            if not isinstance(value, float):
                _number(what)(value, expected)
            seen = sum(rows for _, rows, _, _ in trace.forwards)
            if seen != n:
                dropped = seen == n - n % batch_size
                raise failure(f"{shows(value, expected)}; the model predicted {seen} samples, and the dataset has {n}",
                              where=f"which samples reach the model? Every one of the {n} must count once",
                              mistake="the last, incomplete batch never reaches the model (drop_last=True drops it): "
                                      "evaluate every sample" if dropped else None)
            if not math.isclose(value * n, round(value * n), abs_tol=1e-4):
                averaged = same_value(value, _mean_of_batches(seed, n, batch_size))
                divided = _wrong_denominator(value, round(expected * n), n, batch_size)
                raise failure(f"{shows(value, expected)}, which is no share of the {n} samples ({value:.6g} x {n} = "
                              f"{value * n:.4g} samples)",
                              where="what do you divide the right predictions by?" if divided else
                              "every sample must count once, with the same weight: how are the batches' "
                              "results combined?",
                              mistake=f"the mean of the batches' accuracies weighs each batch alike, so the "
                                      f"{n % batch_size} samples of the smaller last batch weigh more than the others: "
                                      "count the right predictions over all batches and divide by the number of "
                                      "samples" if averaged else divided)
            if same_value(value, _sorted_agreement(seed, n)):
                raise failure(f"{shows(value, expected)}: it is the share of places where the predictions, sorted on "
                              "their own, equal the labels, sorted on their own",
                              where="take one sample, find its prediction and the label it is compared with: are "
                                    "they the same sample's?",
                              mistake="sorting the predictions and the labels separately pairs equal values, not each "
                                      "sample's prediction with its own label (it reports more than the model gets "
                                      "right). Keep them in the same order instead: shuffle=False, or compare each "
                                      "batch's predictions with that batch's labels")
            first = order[:batch_size]
            if first and sorted(order[:n]) == list(range(n)) and order[:n] != list(range(n)):
                raise failure(f"{shows(value, expected)}; its loader read the samples in a shuffled order (the first "
                              f"batch held the samples {first})",
                              where="take one sample, find its prediction and the label it is compared with: are "
                                    "they the same sample's?",
                              mistake="the predictions come in the loader's random order, and the labels they are "
                                      "compared with in another (a second pass draws a new order, even from a seeded "
                                      "generator; the dataset's own order is not the loader's). Evaluate with "
                                      "shuffle=False, or compare each batch's predictions with that batch's labels")
            divided = _wrong_denominator(value, round(expected * n), n, batch_size)
            raise failure(shows(value, expected), where="what do you divide the right predictions by?" if divided else None,
                          mistake=divided)

        expect_fixed(what, got, want, broken,
                     where="take one sample, find its prediction and the label it is compared with: are they "
                           "the same sample's?",
                     bug="every pass over a shuffle=True loader draws a new order: the predictions come from one "
                         "pass and the labels from another, so most comparisons pair a prediction with another "
                         "sample's label. Evaluate with shuffle=False, or compare each batch's predictions with "
                         "that batch's labels",
                     symptom=shows,
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=differs,
                     error_where="the task hands over any Dataset of (image, label) pairs: use only what every "
                                 "Dataset has (len(test_set), test_set[i]) and what the loader gives",
                     hints={f"'{type(dataset).__name__}' object has no attribute":
                            "the dataset given is not a TensorDataset (.tensors) nor a torchvision dataset (.targets, "
                            ".data): take the labels from the loader's batches, or from test_set[i]"})
    passed("dataset_accuracy", len(inputs))


# ---------------------------------------------------------------- 8. three bugs, graded by behaviour


class TrainCase(NamedTuple):
    """seed, training samples, test samples, epochs, learning rate."""

    seed: int = 0
    n_train: int = 48
    n_test: int = 64
    epochs: int = 5
    lr: float = 0.3


PARTS = ("training", "evaluation", "history")


def _three_bug_setup(case: TrainCase, log: list[int] | None = None) -> tuple[nn.Module, TensorDataset, TensorDataset]:
    """A small classifier with dropout and batch norm, three learnable classes, and a test set unlike a batch of
    training data. With ``log``, the training set records the order in which its samples are read."""
    g = torch.Generator().manual_seed(900 + case.seed)
    x = torch.randn(case.n_train, 6, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    test_x = torch.randn(case.n_test, 6, generator=g) * 0.7 + 1.0  # shifted: a test batch's statistics are not the running ones
    test_y = (test_x[:, 0] > 0).long() + (test_x[:, 1] > 0.5).long()
    torch.manual_seed(case.seed)
    model = nn.Sequential(nn.Linear(6, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    train_type = TensorDataset if log is None else recording(TensorDataset, log)
    return model, train_type(x, y), TensorDataset(test_x, test_y)


def _eval_accuracy(model: nn.Module, test_set: TensorDataset) -> float:
    """The accuracy of a copy of ``model`` in eval mode: what the program should report for the model it trained."""
    model = copy.deepcopy(model).eval()
    x, y = test_set.tensors
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def _mean_of_test_batches(model: nn.Module, test_set: TensorDataset) -> float:
    """The mean of the accuracies of the test batches of 64 (in eval mode, on a copy): what averaging reports."""
    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        scores = [(model(x).argmax(dim=1) == y).float().mean().item() for x, y in DataLoader(test_set, batch_size=64)]
    return sum(scores) / len(scores)


def _parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


Problem = tuple[str, str | None, str | None]  # symptom, where to look, the named mistake


class _Run(NamedTuple):
    """One run of a train_and_evaluate program: its outcome, the model it trained, what it did, the samples it read."""

    outcome: Outcome
    model: nn.Module
    trace: Trace
    order: list[int]


def _three_bug_run(fn: Callable[..., Any], case: TrainCase) -> _Run:
    order: list[int] = []
    model, train_set, test_set = _three_bug_setup(case, order)
    model.eval()  # as a model evaluated before comes: training must switch it to training mode itself
    with traced(model) as trace:
        # task: "trains `model` in place" (its weights, buffers and mode change)
        outcome = attempt(fn, model, train_set, test_set, case.epochs, case.lr, seed=case.seed,
                          allow=Allow(changed=(model,), global_rng=True))
    return _Run(outcome, model, trace, order)


def _training_cause(got: _Run, want: _Run, case: TrainCase) -> tuple[str, str | None]:
    """Where to look and the named mistake for a training whose weights differ, from the evidence of the run."""
    for dim in (1, 0):  # the given program's softmax, or one moved to the other dim (across the batch)
        softmax = _three_bug_run(_training_on_probabilities(F.cross_entropy, dim), case)
        if same_value(_parameters(got.model), _parameters(softmax.model)):  # it trains exactly as with softmax
            return ("the loss does not get low: compare what the training step feeds into cross_entropy with what "
                    "cross_entropy expects",
                    "cross_entropy applies log-softmax itself and wants raw logits; softmax before it squashes them"
                    f"{' (here over dim 0, across the batch)' if dim == 0 else ''}, so the loss cannot go low and the "
                    "gradients are tiny. Pass the model's output to it directly, with no softmax")
    if _same_training(got, _three_bug_run(_summed_training, case)):  # it trains exactly as with summed losses
        return ("the steps are too large: look at how cross_entropy combines the losses of a batch's samples",
                "the loss is summed over each batch of 8 instead of averaged (reduction='sum'), so every step is 8 "
                "times as large as the task's: cross_entropy averages by default (reduction='mean')")
    optimizer = _optimizer_difference(got.trace, want.trace)
    if optimizer:
        return ("look at the optimizer the program builds: the task trains with SGD and the learning rate it is "
                "given", f"{optimizer}: another optimizer (or other settings) takes other steps. Use "
                "torch.optim.SGD(model.parameters(), lr=lr)")
    history = got.outcome.value[0] if isinstance(got.outcome.value, tuple) and got.outcome.value else None
    losses = [float(v.detach()) if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in history] \
        if isinstance(history, list) else []
    negative = next((v for v in losses if isinstance(v, float) and v < 0), None)
    if negative is not None:
        return (f"its history holds a negative loss ({negative:.3f}), and a cross-entropy is never below 0: look at "
                "the loss function the training step calls and what it is given (cross_entropy takes the raw logits)",
                "nll_loss on probabilities (a softmax output) is not a cross-entropy: it wants log-probabilities. Pass the "
                "raw logits to cross_entropy"
                if _same_training(got, _three_bug_run(_probability_nll_training, case)) else None)
    steps, want_steps = len(got.trace.steps), len(want.trace.steps)
    if steps != want_steps:
        return (f"count the optimizer steps: it takes {steps}, and batches of 8 over {case.n_train} samples for "
                f"{case.epochs} epochs take {want_steps}",
                _DROPPED if _drops_last_batch(steps, case) else None)
    if got.order and got.order != want.order:
        first = got.order[:8]
        shuffled = sorted(got.order[:case.n_train]) == list(range(case.n_train))
        return ("in which order does training read the samples? The task reads them in the dataset's order",
                f"the training read its first batch as the samples {first}, not {want.order[:8]}"
                + (": its loader shuffles. The task trains in the dataset's order (shuffle=False, the default)"
                   if shuffled else ""))
    in_eval = [(i, f[3]) for i, f in enumerate(got.trace.training_forwards(), 1) if f[3]]
    if in_eval:
        step, layers = in_eval[0]
        if step == 1:
            return ("which mode is the model in at each training step? (it has dropout and batch norm)",
                    f"the model was handed over in eval mode and trains with {', '.join(layers)} in it (dropout "
                    "off, batch norm frozen): call model.train() before the training loop (a model.eval() there "
                    "keeps it in eval mode)")
        return ("which mode is the model in at each training step? (it has dropout and batch norm)",
                f"from training step {step} on, the model trains with {', '.join(layers)} in eval mode (dropout off, "
                "batch norm frozen): model.eval() runs before training is over. Switch to eval mode once, after "
                "the last epoch")
    added = got.outcome.draws - want.outcome.draws
    if added:
        dropout = dropout_among(added)
        return (f"look for what your program adds that is random: {draws_in_words(added)} ran in it, and not in the "
                "task's program",
                f"{FUNCTIONAL_DROPOUT_IN_EVAL}. The model has its own dropout layers: the task adds no other"
                if dropout else "the task adds no noise to the data or the outputs: remove the random draw")
    return ("compare the training loop with the task, one rule at a time: batches of 8 in the dataset's order, SGD "
            "with the given lr, cross_entropy on the model's raw output, the model in training mode at every step",
            None)


_DROPPED = ("the last, shorter batch of each epoch is never trained on (drop_last=True drops it): the task trains on "
            "every sample, in batches of 8 and a shorter last one. Leave drop_last out (it is False by default)")


def _drops_last_batch(steps: int, case: TrainCase) -> bool:
    """``steps`` is what a training that skips each epoch's last, incomplete batch of 8 takes."""
    return case.n_train % 8 != 0 and steps == case.epochs * (case.n_train // 8)


def _same_training(a: _Run, b: _Run) -> bool:
    return same_value(_parameters(a.model), _parameters(b.model))


def _training_on_probabilities(loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], dim: int = 1
                               ) -> Callable[..., None]:
    """The training part, the rest fixed, with ``loss`` applied to softmax probabilities over ``dim``: the given
    program's (cross_entropy) or a wrong fix of it (nll_loss, or the softmax moved to dim 0)."""

    def train(model: nn.Module, train_set: Dataset, test_set: Dataset, epochs: int, lr: float) -> None:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        model.train()
        for _ in range(epochs):
            for inputs, targets in DataLoader(train_set, batch_size=8):
                optimizer.zero_grad()
                loss(model(inputs).softmax(dim=dim), targets).backward()
                optimizer.step()

    return train


def _summed_training(model: nn.Module, train_set: Dataset, test_set: Dataset, epochs: int, lr: float) -> None:
    """The training part done right but for the loss, summed over each batch instead of averaged."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            F.cross_entropy(model(inputs), targets, reduction="sum").backward()
            optimizer.step()


_probability_nll_training = _training_on_probabilities(F.nll_loss)


def _history_problem(what: str, history: Any, case: TrainCase, losses: list[float]) -> Problem | None:
    """What is wrong with the history (one Python float per step, the value of the loss that step's backward() ran
    on: ``losses``, as the run recorded them), from what it holds."""
    per_epoch = math.ceil(case.n_train / 8)
    steps = case.epochs * per_epoch
    if not isinstance(history, list):
        return (f"{what} returns {describe(history)} as the history, expected a list of {steps} Python floats",
                "look at what the program returns first", None)
    tensors = [v for v in history if isinstance(v, torch.Tensor)]
    graphs = sum(1 for v in tensors if v.grad_fn is not None)
    kinds = (f"; {graphs} of them are tensors that each keep their step's whole graph alive" if graphs else
             f"; {len(tensors)} of them are tensors" if tensors else "")
    if len(history) != steps:
        return (f"{what} returns a history of {len(history)} items, expected {steps} (one per step: {case.epochs} "
                f"epochs of {per_epoch} batches){kinds}",
                "how often does the line that appends to the history run? Once per step is once per batch of "
                "every epoch",
                "the history gets one loss per epoch: the append runs after the batch loop, not inside it"
                if len(history) == case.epochs else _DROPPED if _drops_last_batch(len(history), case) else None)
    if graphs:
        return (f"{what} returns a history of {steps} items{kinds}",
                "what is appended to the history at each step, and what does it hold on to?",
                "a loss tensor keeps its graph and every activation saved for backward, so memory grows with every "
                "step; loss.item() gives the number alone")
    if tensors:
        return (f"{what} returns a history of {steps} items{kinds} (without a graph), expected Python floats",
                "what type is each item appended to the history?",
                "detach() drops the graph, but the item is still a tensor (on a GPU, one on the device); the task "
                "asks for Python floats: loss.item() gives the number")
    odd = next((v for v in history if type(v) is not float), None)
    if odd is not None:
        return (f"{what} returns a history of {steps} items, expected Python floats, but one is {describe(odd)}",
                "what type is each item appended to the history?", None)
    if len(losses) != steps:  # backward ran another number of times: the values cannot be matched to steps
        return None
    off = next((i for i, (v, loss) in enumerate(zip(history, losses))
                if not math.isclose(v, loss, rel_tol=1e-5, abs_tol=1e-7)), None)
    if off is None:
        return None
    ratios = {round(v / loss, 6) for v, loss in zip(history, losses) if loss}
    rounded = next((d for d in range(7) if all(math.isclose(v, round(loss, d), abs_tol=1e-9)
                                                for v, loss in zip(history, losses))), None)
    return (f"{what} returns a history whose step {off + 1} holds {history[off]:.6g}, but the loss that step's "
            f"backward() ran on was {losses[off]:.6g}",
            "what is appended to the history at each step: the loss the step trained on, as loss.item(), right "
            "after its backward()",
            f"every value is {min(ratios):g} times that step's loss: append loss.item() itself"
            if len(ratios) == 1 and min(ratios) != 0 else
            f"the losses are rounded to {rounded} decimals: append loss.item() itself, and round only where you "
            "print" if rounded is not None else None)


def _three_bug_problems(fn: Callable[..., Any], case: TrainCase) -> tuple[dict[str, Problem], Exception | None]:
    """Run the learner's train_and_evaluate once on ``case``; what each misbehaving part shows, and an error raised."""
    what = (f"train_and_evaluate for {case.epochs} epochs of {case.n_train} samples (lr={case.lr}), "
            f"then {case.n_test} test samples")
    want = _three_bug_run(ref.train_and_evaluate, case)
    want_history, _ = want.outcome.value
    got = _three_bug_run(fn, case)
    if got.outcome.error is not None:
        return {part: (f"{what} raises {error_line(got.outcome.error)}", None, None) for part in PARTS}, \
            got.outcome.error
    result = got.outcome.value
    if not (isinstance(result, tuple) and len(result) == 2):
        return {part: (f"{what} returns {describe(result)}, expected a pair (history, accuracy)", None, None)
                for part in PARTS}, None
    history, accuracy = result
    model, test_set = got.model, _three_bug_setup(case)[2]
    problems: dict[str, Problem] = {}
    # training: the parameters after training, whatever the history and the evaluation do
    got_weights, want_weights = _parameters(model), _parameters(want.model)
    if not same_value(got_weights, want_weights):
        initial = _parameters(_three_bug_setup(case)[0])
        moved = any(not same_value(v, initial[k]) for k, v in got_weights.items())
        logged = isinstance(history, list) and history and all(isinstance(v, (float, torch.Tensor)) for v in history)
        last = [float(v.detach()) if isinstance(v, torch.Tensor) else v for v in history[-3:]] if logged else []
        where, mistake = _training_cause(got, want, case)
        problems["training"] = (
            f"{what}: the weights after training differ from a correct training's"
            + ("" if moved else " (they did not change at all)")
            + (f"; its loss over the last 3 steps is {_short(last)}, where a correct training reaches "
               f"{_short(want_history[-3:])}" if logged else ""),
            where, mistake)
    # evaluation: the accuracy reported for the model as the program left it, measured in eval mode
    expected = _eval_accuracy(model, test_set)
    held = accuracy.item() if isinstance(accuracy, torch.Tensor) and accuracy.numel() == 1 else None
    if held is not None and math.isclose(held, expected, rel_tol=1e-6, abs_tol=1e-7):
        problems["evaluation"] = (f"{what} reports the test accuracy as {describe(accuracy)}: the right value, "
                                  "but a tensor; the task reports a Python float",
                                  "look at the type of the accuracy you return",
                                  "a tensor is not a number: .item() gives the Python float it holds")
    elif not (isinstance(accuracy, float) and same_value(accuracy, expected)):
        shown = f"{accuracy:.4f}" if isinstance(accuracy, float) else describe(accuracy)
        in_training = [f for f in got.trace.evaluation_forwards() if f[2]]
        n = case.n_test
        no_share = not in_training and isinstance(accuracy, float) and \
            not math.isclose(accuracy * n, round(accuracy * n), abs_tol=1e-4)
        averaged = no_share and same_value(accuracy, _mean_of_test_batches(model, test_set))
        problems["evaluation"] = (
            f"{what} reports the test accuracy {shown}; the model it trained, evaluated in eval mode, "
            f"scores {expected:.4f}"
            + (f", and {shown} is no share of the {n} test samples ({accuracy:.6g} x {n} = {accuracy * n:.4g} "
               "samples)" if no_share else ""),
            "which mode is the model in while it is evaluated? (it has dropout and batch norm)" if in_training else
            "every test sample must count once, with the same weight: how are the batches' results combined?"
            if no_share else
            "compare how the accuracy is computed with the task: the share of the test samples classified right",
            "the model is evaluated in training mode: dropout drops units and batch norm uses the test batch's "
            "statistics. Call model.eval() before evaluating" if in_training else
            "the mean of the batches' accuracies weighs each batch alike, so the samples of the smaller last batch "
            "weigh more than the others: count the right predictions over all batches and divide by the number of "
            "test samples" if averaged else None)
    history_problem = _history_problem(what, history, case, got.trace.losses)
    if history_problem is not None:
        problems["history"] = history_problem
    return problems, None


def check_train_and_evaluate(fn: Callable[..., Any], part: str | None = None,
                             inputs: Sequence[TrainCase] | None = None) -> None:
    """Each part of train_and_evaluate by its behaviour: training (the weights), evaluation (the accuracy reported
    for the trained model in eval mode), history (one Python float per step). ``part=None`` checks all three."""
    parts = PARTS if part is None else (part,)
    inputs = inputs if inputs is not None else [TrainCase(0), TrainCase(1, 43, 50, 4, 0.2)]  # 43: a shorter last batch
    for case in inputs:
        problems, raised = _three_bug_problems(fn, case)
        wrong = [p for p in parts if p in problems]
        if raised is not None:
            raise failure(problems[wrong[0]][0]) from raised
        if len(wrong) == 1:
            symptom, where, mistake = problems[wrong[0]]
            raise failure(symptom, where=where, mistake=mistake)
        if wrong:
            symptoms = "; ".join(f"({i}) {problems[p][0]}" for i, p in enumerate(wrong, 1))
            _, where, mistake = problems[wrong[0]]
            raise failure(f"{len(wrong)} things go wrong: {symptoms}",
                          where=f"one at a time, starting with (1): {where}", mistake=mistake)
    passed(f"train_and_evaluate{'' if part is None else f' ({part})'}", len(inputs))
