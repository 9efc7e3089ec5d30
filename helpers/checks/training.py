"""Lesson 05 Training and evaluation: checks for every exercise.

Each ``check_*`` takes the learner's function and, optionally, extra inputs
(the graded cells pass hidden ones). It prints one pass line or raises
CheckError naming the mistake.

The loop checks train a tiny classifier (6 features, 3 classes) on random
data with a seeded DataLoader, once with the learner's function and once with
the reference, and compare the parameters afterwards. Known mistakes (no
``zero_grad``, no ``model.train()``, no clipping, ...) are recognised by
running a deliberately wrong twin of the reference on the same case. The
global random state is saved and restored around every run, so a check never
changes what the rest of the learner's notebook draws.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Callable, NamedTuple, Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import (Allow, CheckError, Mistake, call, describe, expect, expect_close, expect_tensor,
                           HostTensor, host_collate, leftover_gradients, modes, passed, runs_here, same_value,
                           substitute)
from helpers.checks.devices import (STAND_IN_DEVICE, Placed, is_on_device, model_on_device, moved_to_cpu,
                                   outputs_on_device, place, place_model, playing_a_gpu_machine, unplaced)
from helpers.reference import training as ref

N_FEATURES, N_CLASSES = 6, 3
CPU = torch.device("cpu")


class Case(NamedTuple):
    """One training case: the data and model seed, the number of samples and the batch size."""

    seed: int = 0
    n: int = 10
    batch_size: int = 4


DEFAULT_CASES = [Case(0, 10, 4), Case(1, 13, 5)]


# ---------------------------------------------------------------- building blocks


def _loader(case: Case, shuffle: bool = True, host: bool = False) -> DataLoader:
    """Random features and labels; a seeded shuffle so every run sees the same batch order.

    ``host``: the batches are HostTensors, which fail loudly unless moved with
    ``.to(device)``, so a forgotten move shows on a grader without a GPU.
    """
    g = torch.Generator().manual_seed(1000 + case.seed)
    x = torch.randn(case.n, N_FEATURES, generator=g)
    y = torch.randint(0, N_CLASSES, (case.n,), generator=g)
    return _CountingLoader(TensorDataset(x, y), batch_size=case.batch_size, shuffle=shuffle,
                           generator=torch.Generator().manual_seed(case.seed), collate_fn=host_collate if host else None)


class _CountingLoader(DataLoader):
    """A DataLoader that counts the passes made over it (each shuffles anew)."""

    passes = 0

    def __iter__(self) -> Any:
        self.passes += 1
        return super().__iter__()


def _model(case: Case, dropout: bool) -> nn.Sequential:
    torch.manual_seed(case.seed)
    layers: list[nn.Module] = [nn.Linear(N_FEATURES, 16), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(0.5))
    layers.append(nn.Linear(16, N_CLASSES))
    return nn.Sequential(*layers)


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class Forward(NamedTuple):
    """What a forward hook saw: the training flag of the model and of every submodule, and the grad mode."""

    modes: dict[str, bool]
    grad: bool
    inputs: torch.Tensor | None = None  # a copy of what the forward was given (its first argument)

    @property
    def training(self) -> bool:
        """Every module in training mode (dropout active)."""
        return all(self.modes.values())

    @property
    def evaluating(self) -> bool:
        """Every module in eval mode."""
        return not any(self.modes.values())

    @property
    def by_hand(self) -> bool:
        """The model's own flag disagrees with a submodule's: model.training was set by hand."""
        return len(set(self.modes.values())) > 1


def _record_forward(model: nn.Module) -> list[Forward]:
    """What every forward call of ``model`` saw (modes of every submodule, grad mode)."""
    seen: list[Forward] = []

    def record(module: nn.Module, args: Any, out: Any) -> None:  # returns None: keeps the output
        given = args[0].detach().clone() if args and isinstance(args[0], torch.Tensor) else None
        seen.append(Forward({name: m.training for name, m in module.named_modules()}, torch.is_grad_enabled(), given))

    model.register_forward_hook(record)
    return seen


def _by_hand(seen: list[Forward], method: str) -> str:
    return (f"setting model.training by hand changes only the top-level flag. Call model.{method}(), which sets "
            "it on every submodule")


def _by_hand_symptom(what: str, method: str) -> str:
    mode = "training" if method == "train" else "eval"
    return (f"{what}: during the forward passes the model's own flag said {mode} mode, but its submodules "
            f"(dropout, batch norm) were not in {mode} mode")


_WHERE_MODE = "look at how your function sets the model's mode (model.train(), model.eval(), model.training)"


def _call(fn: Callable[..., Any], *args: Any, hints: Sequence[tuple[str, str]] = (), allow: Allow = Allow()) -> Any:
    """``call`` that turns known PyTorch error messages into the mistake behind them."""
    try:
        return call(fn, *args, allow=allow)
    except CheckError as error:
        cause = str(error.__cause__ or "")
        for needle, message in hints:
            if needle in cause:
                raise CheckError(f"{getattr(fn, '__name__', 'your function')} raised "
                                 f"{type(error.__cause__).__name__}: {cause.splitlines()[0][:160]}",
                                 where="look at the line that raised (listed below the message in a notebook) and "
                                       "at the tensors it hands on",
                                 mistake=message) from None
        raise


def _first_difference(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> str:
    for key in want:
        if key not in got or not same_value(got[key], want[key]):
            return key
    return "?"


def _expect_float(got: Any, what: str) -> None:
    if isinstance(got, torch.Tensor):
        raise CheckError(f"{what} is a tensor ({describe(got)}); expected a plain Python float",
                         where="look at how the number you return is computed from the losses",
                         mistake="use .item() on the loss (a kept loss tensor also keeps its whole graph in memory)")
    expect(isinstance(got, (int, float)) and not isinstance(got, bool),
           f"{what} should be a Python float, but is {describe(got)}",
           where="look at the value you return")


# ---------------------------------------------------------------- losses and targets


def check_to_class_targets(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    inputs = inputs if inputs is not None else [
        torch.eye(3)[torch.tensor([1, 2, 0])],
        torch.eye(4)[torch.tensor([3, 0, 0, 2, 1])],
        # probability rows; in the last the largest value is below 0.5 (and not in column 0)
        torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.05, 0.9, 0.05], [0.3, 0.45, 0.25]]),
        torch.eye(5)[torch.tensor([4])],  # a batch of one: still a batch, shape [1]
    ]
    for one_hot in inputs:
        got = _call(fn, one_hot)
        exact = bool(((one_hot == 0) | (one_hot == 1)).all() and (one_hot.sum(dim=1) == 1).all())
        rows = "one-hot rows" if exact else "rows of class probabilities (not exactly one-hot)"
        what = f"to_class_targets({rows} of shape {list(one_hot.shape)})"
        classes = torch.arange(one_hot.shape[1], dtype=one_hot.dtype)
        expect_tensor(got, ref.to_class_targets(one_hot), what=what, mistakes=[
            Mistake("you returned each row's largest value, not its position: max(dim=1) gives (values, indices), "
                    "and the class is the index (or use argmax(dim=1))",
                    matches=lambda t: isinstance(t, torch.Tensor) and t.shape == one_hot.shape[:1]
                    and torch.equal(t.double(), one_hot.max(dim=1).values.double()),
                    where="look at what you take from max(): its values, or its indices?"),
            Mistake("nonzero() lists every nonzero entry; a row of probabilities has several, so the count of "
                    "results is not one per row. The class is the position of the row's largest value",
                    matches=lambda t: isinstance(t, torch.Tensor) and not exact
                    and same_value(t, one_hot.nonzero()[:, 1]),
                    where="look at how you find each row's class: does it give exactly one per row?"),
            Mistake("the probability-weighted average of the class numbers is the row's largest value's position "
                    "only for exact one-hot rows; the class is the position of the largest value",
                    matches=lambda t: isinstance(t, torch.Tensor) and not exact and t.shape == one_hot.shape[:1]
                    and any(torch.equal(t.double(), w) for w in ((one_hot * classes).sum(dim=1).double().round(),
                                                                 (one_hot * classes).sum(dim=1).double().floor())),
                    where="look at how you find each row's class: the position of its largest value"),
            Mistake("you kept only the values over 0.5 (a threshold, or round()) before taking the position: a "
                    "row whose largest probability is below 0.5 (here [0.3, 0.45, 0.25]) has no value left, and argmax "
                    "of a row of zeros is 0. The class is the position of the row's largest value, however small",
                    matches=lambda t: isinstance(t, torch.Tensor) and not exact
                    and same_value(t, (one_hot > 0.5).long().argmax(dim=1)),
                    where="look at what you do to the values before you find each row's largest"),
            Mistake("converting the rows to integers first (.long(), .int()) turns every probability below 1 into 0, "
                    "and argmax of a row of zeros is 0: take the position of the largest value from the rows as they "
                    "are",
                    matches=lambda t: isinstance(t, torch.Tensor) and not exact
                    and same_value(t, one_hot.long().argmax(dim=1)),
                    where="look at the conversions before the argmax"),
            Mistake("argmax without dim= indexes the flattened tensor: one number for the whole batch. Each row is "
                    "one sample, so use argmax(dim=1)",
                    # (with one row it gives the right class, as a squeeze() does: the shape says which)
                    matches=lambda t: len(one_hot) > 1 and same_value(t, one_hot.argmax()),
                    where="look at the arguments of argmax"),
            Mistake("you took argmax over dim=0 (down the batch); each row is one sample, so use argmax(dim=1)",
                    lambda: one_hot.argmax(dim=0),
                    where="look at the dim= you reduce over"),
            Mistake("that is still one-hot [N, C]; CrossEntropyLoss's standard targets are the class indices, shape [N]",
                    matches=lambda t: isinstance(t, torch.Tensor) and t.shape == one_hot.shape,
                    where="look at the shape of what you return: one class index per row"),
            Mistake("the indices are floats; CrossEntropyLoss wants class indices as int64 (torch.long), "
                    "which argmax already returns",
                    matches=lambda t: isinstance(t, torch.Tensor) and t.is_floating_point()
                    and torch.equal(t, one_hot.argmax(dim=1).to(t.dtype)),
                    where="look at the dtype of what you return"),
        ])
        logits = torch.zeros(len(one_hot), one_hot.shape[1])
        nn.functional.cross_entropy(logits, got)  # they are usable as targets
    passed("to_class_targets", len(inputs))


def check_binary_loss(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      inputs: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
    g = torch.Generator().manual_seed(5)
    inputs = inputs if inputs is not None else [
        (torch.tensor([2.0, -1.0, 0.5, -3.0, 0.0, 1.5]), torch.tensor([1, 0, 0, 0, 1, 1])),
        (torch.randn(4, 3, generator=g) * 2, torch.randint(0, 2, (4, 3), generator=g)),
        # large logits, confidently right and wrong: sigmoid(30.) rounds to 1.0 in float32 (numerical stability)
        (torch.tensor([30.0, -45.0, 25.0, -20.0, 60.0]), torch.tensor([0, 1, 1, 0, 1])),
        # past exp's float32 range (about 88): exp(100.) is inf
        (torch.tensor([100.0, -100.0, 95.0, -90.0]), torch.tensor([1, 0, 0, 1])),
    ]
    hints = [("can't be cast to the desired output type Long",
              "BCEWithLogitsLoss needs float targets; the labels are integers, so pass labels.float()"),
             ("Found dtype Long but expected Float",
              "BCEWithLogitsLoss needs float targets; the labels are integers, so pass labels.float()"),
             ("Expected floating point type for target with class probabilities",
              "that is cross_entropy, a softmax over the classes of each sample (given targets of the scores' own "
              "shape, it reads them as class probabilities); each score here is its own yes/no decision, which "
              "BCEWithLogitsLoss scores"),
             ("should be between 0 and 1",
              "BCELoss expects probabilities, but these are raw scores (logits); use BCEWithLogitsLoss, "
              "which applies the sigmoid inside (and more stably)")]
    for logits, labels in inputs:
        leaf = logits.clone().requires_grad_()
        got = _call(fn, leaf, labels, hints=hints)
        what = f"binary_loss(logits {list(logits.shape)}, labels {list(labels.shape)})"
        expect(isinstance(got, torch.Tensor),
               f"{what} should return the loss as a tensor (so backward() can run), not {describe(got)}",
               where="look at the value you return: the loss function's output itself")
        expect(got.grad_fn is not None,
               f"{what} is cut off from the graph (its grad_fn is None), so backward() could not reach the model",
               where="look for .item(), .detach() or a new tensor (torch.tensor(...)) between the loss and your return")
        reaches = got.requires_grad and torch.autograd.grad(got.sum(), leaf, allow_unused=True)[0] is not None
        expect(reaches, f"{what} has a graph, but it does not reach the logits it was given: backward() runs, and no "
               "gradient reaches the model",
               where="look for .detach(), .data or a new tensor made from the logits before the loss sees them",
               mistake="pass the logits themselves to the loss: a detached copy with requires_grad_() starts a graph "
                       "of its own, and the model's parameters get no gradient")
        with torch.no_grad():
            want = ref.binary_loss(logits, labels)
            mistakes = [
                Mistake("you applied a sigmoid and then BCEWithLogitsLoss, which applies its own: "
                        "pass the raw logits", lambda: nn.BCEWithLogitsLoss()(torch.sigmoid(logits), labels.float()),
                        where="look at what you pass to the loss: raw scores, or something computed from them?"),
                Mistake("you applied a sigmoid and then binary_cross_entropy (BCELoss): for a large logit the "
                        "sigmoid rounds to exactly 1.0 (or 0.0) in float32, log(0) follows and the loss is clamped at "
                        "100 or is inf. BCEWithLogitsLoss takes the raw logits and computes it stably",
                        lambda: nn.functional.binary_cross_entropy(torch.sigmoid(logits), labels.float()),
                        where="look at what you pass to the loss: the raw logits, or probabilities computed from "
                              "them?"),
                Mistake("the result is inf or nan: a loss written from sigmoid and log by hand breaks down for "
                        "large logits (sigmoid rounds to 1.0, log(1 - 1.0) = -inf). Use BCEWithLogitsLoss, which "
                        "computes it stably from the raw logits",
                        matches=lambda got: isinstance(got, torch.Tensor) and not bool(torch.isfinite(got).all()),
                        where="look at how you get from the logits to the loss"),
                Mistake("you summed the losses (reduction='sum'); the default reduction='mean' averages them",
                        lambda: nn.BCEWithLogitsLoss(reduction="sum")(logits, labels.float()),
                        where="look at the reduction= of your loss"),
                Mistake("you returned one loss per element (reduction='none'); average them to one number",
                        lambda: nn.BCEWithLogitsLoss(reduction="none")(logits, labels.float()),
                        where="look at the reduction= of your loss"),
                Mistake("the arguments are swapped: the raw scores come first and the labels (the targets) second",
                        lambda: nn.functional.binary_cross_entropy_with_logits(labels.float(), logits),
                        where="look at the order of the arguments you pass to the loss"),
                Mistake("the arguments are swapped: you passed the labels as the scores and the probabilities "
                        "(sigmoid of the logits) as the targets. The raw scores come first, the labels (the targets) "
                        "second: binary_cross_entropy_with_logits(logits, labels.float())",
                        lambda: nn.functional.binary_cross_entropy_with_logits(labels.float(), torch.sigmoid(logits)),
                        where="look at the order of the arguments you pass to the loss"),
                *([Mistake(f"you summed over the {logits.shape[-1]} labels of each row and then averaged over the rows: "
                           "the mean is over every element (each label is a yes/no decision of its own)",
                           lambda: nn.BCEWithLogitsLoss(reduction="none")(logits, labels.float()).sum(dim=-1).mean(),
                           where="look at how you reduce the per-element losses to one number")]
                  if logits.dim() > 1 and logits.shape[-1] > 1 else []),
                Mistake("that is CrossEntropyLoss, a softmax over classes; each score here is its own yes/no "
                        "decision, which BCEWithLogitsLoss scores",
                        lambda: nn.CrossEntropyLoss()(logits, labels.float()),
                        where="look at which loss you use"),
            ]
            plain = got.detach()
            if plain.shape == want.shape and plain.dtype == want.dtype and want.numel() == 1 \
                    and not same_value(plain, want) and not any(
                    m.explains(plain) for m in mistakes):
                cap = _loss_cap(fn, hints)
                # one number against another: a ratio between them is no evidence of a constant factor
                raise CheckError(f"{what} should be {want.item():.6g}, but yours is {plain.item():.6g}",
                                 where="look at which loss you use, what you pass it, and in which order"
                                 if cap is None else "look at how you get from the logits to the loss for a logit far "
                                                     "on the wrong side",
                                 mistake=None if cap is None else
                                 f"for one logit of 40 or of 80 with label 0 your loss is {cap:.4g} both times; the "
                                 "loss is the logit itself there (40, then 80). Probabilities clamped away from 0 and 1 "
                                 "(or a clamped log) cap the loss: compute it from the raw logits with "
                                 "BCEWithLogitsLoss, which is stable without a clamp")
            expect_tensor(plain, want, what=what, mistakes=mistakes)
    passed("binary_loss", len(inputs))


def _loss_cap(fn: Callable[..., Any], hints: Sequence[tuple[str, str]]) -> float | None:
    """The value a binary loss stops growing at for one logit ever further on the wrong side (label 0), where the
    true loss grows with the logit: what a clamp on the probabilities does. None when it keeps growing, or when it
    never grew (a loss that is the same for every logit, as with swapped arguments, is no clamp)."""
    values = []
    for logit in (2.0, 40.0, 80.0):
        got = _call(fn, torch.tensor([logit], requires_grad=True), torch.tensor([0]), hints=hints)
        if not isinstance(got, torch.Tensor) or got.numel() != 1:
            return None
        values.append(float(got.detach()))
    capped = all(math.isfinite(v) for v in values) and math.isclose(values[1], values[2], rel_tol=1e-4) \
        and values[0] < values[1] - 1.0
    return values[2] if capped else None


# ---------------------------------------------------------------- accuracy


def _argmax_down_the_batch(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """``fn`` scores 1.0 on a square batch whose columns' largest values sit at the targets and whose rows' never
    do (right accuracy 0): it took argmax over dim=0. (A matching value alone can be a coincidence.)"""
    targets = torch.tensor([1, 2, 3, 0])
    logits = torch.zeros(4, 4)
    logits[targets, torch.arange(4)] = 5.0
    try:
        return same_value(_call(fn, logits, targets), 1.0)
    except CheckError:
        return False


def _thresholds_probability(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """``fn`` scores 0.0 on rows whose target has the largest score but a probability near 1/3 (right accuracy 1)."""
    logits = torch.tensor([[1.0, 0.9, 0.8], [0.8, 1.0, 0.9], [0.9, 0.8, 1.0]])
    try:
        return same_value(_call(fn, logits, torch.tensor([0, 1, 2])), 0.0)
    except CheckError:
        return False


def _divides_whole(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """``fn`` scores 1 when every row is right and 0 when 2 of 3 are: the count divided with // (a function that
    returns 0 for everything, or computes something else, does not do both)."""
    logits = torch.eye(3) * 5.0
    try:
        every = _call(fn, logits, torch.tensor([0, 1, 2]))
        most = _call(fn, logits, torch.tensor([0, 1, 0]))
    except CheckError:
        return False
    return same_value(every, 1.0) and same_value(most, 0.0)


def _takes_argmin(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """``fn`` scores 1.0 on rows whose smallest score (never the largest) sits at the target (right accuracy 0)."""
    try:
        return same_value(_call(fn, torch.eye(3) * 5.0, torch.tensor([1, 0, 0])), 1.0)
    except CheckError:
        return False


def check_accuracy(fn: Callable[[torch.Tensor, torch.Tensor], float],
                   inputs: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
    g = torch.Generator().manual_seed(7)
    inputs = inputs if inputs is not None else [
        # 3 of 4 right; some rows' largest score equals the target's number, so comparing max values with the
        # targets gives 0.25, not 0 like an integer division
        (torch.tensor([[0.0, 1.0, 0.5, 0.2], [2.0, 0.0, 1.0, 0.3], [0.5, 0.0, 0.2, 0.1], [0.2, 0.4, 3.0, 0.1]]),
         torch.tensor([1, 0, 2, 2])),
        (torch.randn(6, 3, generator=g), torch.tensor([0, 1, 2, 2, 1, 0])),
    ]
    hints = [("must match the size of tensor",
              "the predictions and the targets have different lengths: did you take argmax over dim=0 "
              "(down the batch)? The classes run along dim=1")]
    for logits, targets in inputs:
        got = _call(fn, logits, targets, hints=hints)
        what = f"accuracy(logits {list(logits.shape)}, targets {list(targets.shape)})"
        want = ref.accuracy(logits, targets)
        correct = int((logits.argmax(dim=1) == targets).sum())
        mistakes = [
            Mistake("you took argmax over dim=0 (down the batch); the classes run along dim=1",
                    matches=lambda got: same_value(got, (logits.argmax(dim=0) == targets).float().mean().item())
                    and _argmax_down_the_batch(fn),
                    where="look at the dim= of argmax"),
            Mistake("you counted a row as right when its target's probability is over 0.5; a prediction is right "
                    "when the target has the largest score (argmax over the classes), whatever its probability",
                    matches=lambda got: same_value(got, (logits.softmax(dim=1).gather(1, targets[:, None]) > 0.5)
                                                   .float().mean().item()) and _thresholds_probability(fn),
                    where="look at how you decide that a row's prediction is right"),
            Mistake("// is integer division: the count of correct predictions // the number of samples is 0 unless "
                    "every prediction is right; divide with /",
                    matches=lambda got: same_value(got, float(correct // len(targets))) and _divides_whole(fn),
                    where="look at the division at the end"),
            Mistake("you took argmin, the position of each row's smallest score; the predicted class is the position "
                    "of the largest score, argmax(dim=1)",
                    matches=lambda got: same_value(got, (logits.argmin(dim=1) == targets).float().mean().item())
                    and _takes_argmin(fn),
                    where="look at how you find each row's predicted class"),
            Mistake("you compared each row's largest score (max(dim=1).values) with the targets; the predicted "
                    "class is its position (argmax(dim=1), or max(dim=1).indices)",
                    lambda: (logits.max(dim=1).values == targets).float().mean().item(),
                    where="look at what you take from max(): its values, or its indices?"),
            Mistake("you divided by the number of classes (logits.shape[1]); divide by the number of samples",
                    lambda: correct / logits.shape[1],
                    where="look at what you divide the count of correct predictions by"),
            Mistake(f"you divided by logits.numel(), the number of scores ({len(targets)} samples x "
                    f"{logits.shape[1]} classes = {logits.numel()}); divide by the number of samples, len(targets)",
                    lambda: correct / logits.numel(),
                    where="look at what you divide the count of correct predictions by"),
            Mistake("that is the number of correct predictions; divide by the number of samples for a fraction",
                    lambda: (logits.argmax(dim=1) == targets).sum().item(),
                    where="look at the last step: from the count of correct predictions to a fraction"),
            Mistake("that is a percentage; return a fraction between 0 and 1",
                    lambda: 100 * want,
                    where="look at the scale of what you return: a fraction, not a percentage"),
            Mistake(f"you compared a [{len(targets)}] tensor with a [{len(targets)}, 1] one (argmax with "
                    f"keepdim=True, or an unsqueeze): they broadcast to a {len(targets)} x {len(targets)} table of "
                    "every prediction against every target, and its mean is not the accuracy. Compare two "
                    f"[{len(targets)}] tensors",
                    lambda: (logits.argmax(dim=1, keepdim=True) == targets).float().mean().item(),
                    where="look at the shapes of the two tensors you compare"),
            Mistake("you took the softmax over dim=0 (down the batch), which changes which class wins in a row; "
                    "the argmax over dim=1 of the raw scores is already the prediction (a softmax over dim=1 "
                    "would not change it)",
                    lambda: (logits.softmax(dim=0).argmax(dim=1) == targets).float().mean().item(),
                    where="look at every dim= you pass"),
        ]
        plain = _plain(got)
        if not same_value(plain, want):
            explaining = [m for m in mistakes if m.explains(plain)]
            # a mistake is named only when it alone explains the number (e.g. two mistakes can both give 0)
            mistake = explaining[0] if len(explaining) == 1 else None
            if mistake is not None:
                raise CheckError(f"{what} returned {plain!r}; expected {want!r}",
                                 where=mistake.where or "look at which dim you take the argmax over and what you "
                                                        "divide by",
                                 mistake=mistake.message)
        if isinstance(got, torch.Tensor):
            raise CheckError(f"{what} returned a tensor ({describe(got)}); expected a Python float",
                             where="look at the type of the value you return",
                             mistake="a 0-d tensor is not a number: return a Python float with .item()")
        expect_close(got, want, what=what)
    passed("accuracy", len(inputs))


# ---------------------------------------------------------------- train_one_epoch


def _sgd(model: nn.Module) -> torch.optim.Optimizer:
    # Momentum makes a forgotten zero_grad visible even when the gradients are small.
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _epoch_variant(zero_grad: bool = True, train_mode: bool = True, step: bool = True,
                   plain_loss: bool = False, scale_by_size: bool = False, clip: float | None = None) -> Callable[..., None]:
    def run(model, loader, loss_fn, optimizer, device):
        if plain_loss:
            loss_fn = nn.functional.cross_entropy
        if train_mode:
            model.train()
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            if zero_grad:
                optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            (loss * len(targets) if scale_by_size else loss).backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            if step:
                optimizer.step()
    return run


class _Tag:
    """A marker an autograd node holds on to: its weak reference dies when the node (and its graph) is freed."""


class _TagNode(torch.autograd.Function):
    """The identity, as a node of its own in the loss's graph, holding a :class:`_Tag`."""

    @staticmethod
    def forward(ctx, loss: torch.Tensor, tag: _Tag) -> torch.Tensor:  # noqa: D102
        ctx.tag = tag
        return loss.view_as(loss)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        return grad, None


class _GraphWatch(nn.Module):
    """``loss_fn`` that notices graphs kept alive: each batch's loss carries a tagged node; when batch k's loss is
    computed, the graph of batch k-2 must be gone (batch k-1's ``loss`` variable may still hold its own)."""

    def __init__(self, loss_fn: nn.Module) -> None:
        super().__init__()
        self.loss_fn = loss_fn
        object.__setattr__(self, "tags", [])  # outside the module's state: the caller's loss_fn stays unchanged
        object.__setattr__(self, "kept", [False])

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # noqa: D102
        import gc

        if len(self.tags) >= 2 and torch.is_grad_enabled():
            gc.collect()
            if any(tag() is not None for tag in self.tags[:-1]):
                self.kept[0] = True
        loss = self.loss_fn(logits, targets)
        if not loss.requires_grad:
            return loss
        import weakref

        tag = _Tag()
        self.tags.append(weakref.ref(tag))
        return _TagNode.apply(loss, tag)


def _run_epoch(fn: Callable[..., Any], case: Case, *, dropout: bool, start_in_eval: bool):
    """Run ``fn`` on a fresh model/loader/optimizer; return (result, state after, forward log).

    The global random stream is seeded before the call (the same dropout masks for every run) and
    recorded after it in ``_LAST_RNG``, so a check can compare it with the reference's.
    """
    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout)
        if start_in_eval:
            model.eval()
        seen = _record_forward(model)
        loader, optimizer = _loader(case, host=True), _sgd(model)
        data = [t.clone() for t in loader.dataset.tensors]
        arrivals = leftover_gradients(model, case.seed)  # a model handed over mid-training
        changed = _watch_grads_until_step(model, optimizer) if runs_here(fn) else [False]
        torch.manual_seed(10_000 + case.seed)
        # task: "each batch updates the parameters once through `optimizer`" and "Leave alone: the data, and the
        # caller's random streams except what dropout and the loader's shuffle draw" (and "may be left in training
        # mode"): model and optimizer change; dropout draws from the global RNG (_expect_rng_as_reference checks how)
        loss_fn = _GraphWatch(_loss_fn())
        result = _call(fn, model, loader, loss_fn, optimizer, CPU,
                       allow=Allow(changed=(model, optimizer), global_rng=True))
        _LAST_RNG[:] = [torch.get_rng_state()]
        _KEPT_GRAPHS[:] = [loss_fn.kept[0]]
        _LAST_PASSES[:] = [loader.passes]
        _ADDED_TO_LEFTOVERS[:] = [arrivals.added_to_leftovers()]
        _GRADS_CHANGED[:] = [changed[0]]
    name = getattr(fn, "__name__", "train_one_epoch")
    expect(all(torch.equal(a, b) for a, b in zip(data, loader.dataset.tensors)),
           f"{name} changed the data of the loader it was given (its dataset's tensors), which belong to the caller",
           where="look for in-place operations on the batches or on loader.dataset",
           mistake="the task says to leave the data alone: work on copies")
    return result, _state(model), seen


_LAST_RNG: list[torch.Tensor] = []
_LAST_PASSES: list[int] = []  # how many passes the last _run_epoch's function made over its loader
_KEPT_GRAPHS: list[bool] = []  # whether the last _run_epoch's function kept earlier batches' graphs alive
_ADDED_TO_LEFTOVERS: list[bool] = []  # whether a backward of the last _run_epoch found .grad still holding values
_GRADS_CHANGED: list[bool] = []  # whether the last _run_epoch's function changed .grad between backward and step


def _watch_grads_until_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[bool]:
    """A one-element list that turns True when an optimizer step finds a .grad other than the last backward left
    it (clipped, scaled: values still there, but changed). Only where the learner's function runs in this process."""
    left: dict[int, torch.Tensor] = {}
    changed = [False]

    def after_backward(p: torch.Tensor) -> None:
        left[id(p)] = p.grad.detach().clone()

    def before_step(opt: Any, args: Any, kwargs: Any) -> None:
        for p in model.parameters():
            if id(p) in left and p.grad is not None and bool(p.grad.any()) and not torch.equal(p.grad, left[id(p)]):
                changed[0] = True
        left.clear()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(after_backward)
    optimizer.register_step_pre_hook(before_step)
    return changed


def _expect_rng_as_reference(got_rng: torch.Tensor, want_rng: torch.Tensor, what: str) -> None:
    """The global random stream advanced exactly as the reference's did (dropout only): no reseeding, no extra draws."""
    expect(torch.equal(got_rng, want_rng),
           f"{what}: afterwards torch's global random stream is not where the batches' dropout alone leaves it "
           "(the reference run from the same state ends elsewhere)",
           where="look for torch.manual_seed and for random draws of your own (torch.randn, randperm, a new layer)",
           mistake="your function reseeded it (torch.manual_seed) or drew random numbers of its own; the caller's "
                   "random stream is theirs: leave it to dropout")


def check_train_one_epoch_updates(fn: Callable[..., float], inputs: Sequence[Case] | None = None) -> None:
    """The parameters after one epoch equal the reference's (a model with dropout, handed over in eval mode)."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        _, got, seen = _run_epoch(fn, case, dropout=True, start_in_eval=True)
        what = f"train_one_epoch on {case}"
        expect(seen, f"{what}: the model was never called",
               where="look at your loop over the loader: does it run model(inputs) for every batch?")
        expect(not any(f.by_hand for f in seen), _by_hand_symptom(what, "train"), where=_WHERE_MODE,
               mistake=_by_hand(seen, "train"))
        in_eval = [i + 1 for i, f in enumerate(seen) if not f.training]
        expect(not in_eval or len(in_eval) == len(seen),
               f"{what}: the model arrived in eval mode, and forward pass(es) {in_eval[:5]} of {len(seen)} ran in eval "
               "mode: dropout was off for them",
               where="look at where in your function model.train() runs: before the first forward pass?",
               mistake="model.train() must come before the first batch: call it once, at the start of the epoch")
        expect(not in_eval,
               f"{what}: the model arrived in eval mode and its forward passes ran in eval mode: dropout stayed off "
               "while it trained", where="look at the model's mode before the first batch",
               mistake="you forgot model.train(): call it at the start of the epoch")
        expect(any(f.grad for f in seen),
               f"{what}: the forward pass ran without gradient tracking; training needs gradients",
               where="look at what surrounds the forward pass: a torch.no_grad() or inference_mode() block?")
        untracked = sum(not f.grad for f in seen)
        expect(not untracked,
               f"{what}: besides the forward passes that trained, your function ran {untracked} more without gradient "
               "tracking",
               where="look for a second model(...) call in your loop (a loss recomputed after the step, for a log?)",
               mistake="each batch needs one forward pass, the one backward runs on: an extra one draws dropout "
                       "masks of its own, so the later batches train with other masks, and a loss computed after "
                       "the step is not the batch's training loss")
        got_rng, got_passes, leftovers, grads_changed = (_LAST_RNG[0], _LAST_PASSES[0], _ADDED_TO_LEFTOVERS[0],
                                                         _GRADS_CHANGED[0])
        _, want, want_seen = _run_epoch(ref.train_one_epoch, case, dropout=True, start_in_eval=True)
        ref_state = want
        _expect_rng_as_reference(got_rng, _LAST_RNG[0], what)
        mistakes = [
            Mistake("you forgot optimizer.zero_grad(): gradients accumulated across steps, so every update "
                    "also repeated all the earlier batches' gradients",
                    lambda: _run_epoch(_epoch_variant(zero_grad=False), case, dropout=True, start_in_eval=True)[1],
                    where="look at what happens to the gradients between one batch and the next"),
            Mistake("your parameters did not change: call optimizer.step() after loss.backward() "
                    "(and zero_grad() before backward, not between backward and step)",
                    lambda: _run_epoch(_epoch_variant(step=False), case, dropout=True, start_in_eval=True)[1],
                    where="look at the order of zero_grad, backward and step in each batch"),
            Mistake("you computed a plain cross-entropy instead of calling the loss_fn you were given (here a "
                    "CrossEntropyLoss with label smoothing); use loss_fn(logits, targets)",
                    lambda: _run_epoch(_epoch_variant(plain_loss=True), case, dropout=True, start_in_eval=True)[1],
                    where="look at which function computes each batch's loss"),
        ]
        mistakes += [
            Mistake("each batch's loss was multiplied by its number of samples before backward, so every update is "
                    "that many times too large: backward on the loss itself (the mean over the batch)",
                    lambda: _run_epoch(_epoch_variant(scale_by_size=True), case, dropout=True, start_in_eval=True)[1],
                    where="look at what you call backward() on"),
            clipped := Mistake("the gradients were clipped (clip_grad_norm_) before each step; the task's epoch "
                               "steps with the gradients as backward wrote them",
                    matches=lambda got: any(same_value(got, _run_epoch(_epoch_variant(clip=c), case, dropout=True,
                                                                       start_in_eval=True)[1])
                                               for c in (1.0, 0.5, 0.1, 5.0)),
                    where="look at what happens to the gradients between backward() and step()"),
        ]
        if not same_value(got, want):
            mistake = next((m for m in mistakes if m.explains(got)), None)
            if mistake is None and leftovers:
                raise CheckError(f"{what}: the model's parameters arrived holding gradients of an earlier step (.grad "
                                 "not empty), and the first backward added this batch's gradients to them",
                                 where="look at where in each batch you clear the gradients",
                                 mistake="call optimizer.zero_grad() at the start of each batch, before backward: "
                                         "cleared only after the step, the first update also uses whatever .grad held "
                                         "when the epoch began")
            if (mistake is None or mistake is clipped) and grads_changed:
                raise CheckError(f"{what}: after one epoch your parameters differ from the reference's: when the "
                                 "optimizer stepped, the gradients were not those the batch's backward() left in .grad",
                                 where="look at what happens to the gradients between backward() and step()",
                                 mistake=clipped.message if mistake is clipped else
                                 "the gradients were changed between backward() and step() (clipping?): the task's "
                                 "step uses the batch's gradient as backward leaves it")
            altered = next((i for i, (a, b) in enumerate(zip(seen, want_seen)) if a.inputs is not None
                            and b.inputs is not None and a.inputs.shape == b.inputs.shape
                            and not torch.equal(a.inputs.as_subclass(torch.Tensor), b.inputs.as_subclass(torch.Tensor))),
                           None)
            if mistake is None and got_passes > 1:
                raise CheckError(f"{what}: after one epoch your parameters differ from the reference's: your "
                                 f"function went through the loader {got_passes} times",
                                 where="look at every loop over the loader (and list(loader), sum(... for ... in "
                                       "loader)) in your function",
                                 mistake="each pass over a shuffling loader draws a new order, so the pass that "
                                         "trained saw other batches than the epoch's first pass; go through the "
                                         "loader once, and count the samples as the batches come (add len(targets) for each)")
            if mistake is None and altered is not None:
                raise CheckError(f"{what}: after one epoch your parameters differ from the reference's: forward pass "
                                 f"{altered + 1} was given other values than the loader's batch",
                                 where="look at what happens to each batch between the loader and model(inputs)",
                                 mistake="the task trains on the batches as the loader gives them: leave their values "
                                         "alone (no normalising or other change in your function)")
            raise CheckError(f"{what}: after one epoch your parameters differ from the reference's "
                             f"(first in '{_first_difference(got, ref_state)}')",
                             where="look at what happens to .grad between batches, and at the order of the "
                                   "optimizer calls around backward()",
                             mistake=mistake.message if mistake else None)
    passed("train_one_epoch (updates)", len(inputs))


def _epoch_trace(case: Case) -> list[tuple[float, int]]:
    """(loss, batch size) of every batch of the reference epoch on the dropout-free model."""
    trace: list[tuple[float, int]] = []
    loss_fn = _loss_fn()

    def traced_loss(logits, targets):
        loss = loss_fn(logits, targets)
        trace.append((loss.item(), len(targets)))
        return loss

    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout=False)
        loader, optimizer = _loader(case), _sgd(model)
        ref.train_one_epoch(model, loader, traced_loss, optimizer, CPU)
    return trace


def check_train_one_epoch_loss(fn: Callable[..., float], inputs: Sequence[Case] | None = None) -> None:
    """The returned number is the mean loss per sample, with a smaller last batch weighted by its size."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        got, state, _ = _run_epoch(fn, case, dropout=False, start_in_eval=False)
        kept_graphs = _KEPT_GRAPHS[0]
        what = f"train_one_epoch on {case}"
        want_state = _run_epoch(ref.train_one_epoch, case, dropout=False, start_in_eval=False)[1]
        expect(same_value(state, want_state),
               f"{what}: the parameter updates differ from the reference, so the losses cannot match",
               where="look at each batch's steps: zero_grad, forward, loss, backward, step",
               mistake="fix the updates first (check_train_one_epoch_updates names what differs)")
        expect(got is not None, f"{what} returned None; expected the epoch's mean loss as a float",
               where="look at the end of your function: its return statement")
        _expect_float(got, f"the value {what} returned")
        # the lesson: "adding up the loss tensors instead would keep every batch's graph alive"
        expect(not kept_graphs,
               f"{what}: while the epoch ran, the graphs of earlier batches were still alive when later batches were "
               "computed (something you keep holds on to each batch's loss with its graph: memory grows with every "
               "batch)", where="look at what you add up or store from each batch's loss",
               mistake="a running total of loss tensors (total = total + loss * n) chains every batch's graph "
                       "together; add loss.item() * n (a float), or loss.detach()")
        trace = _epoch_trace(case)
        losses, sizes = [l for l, _ in trace], [s for _, s in trace]
        want = sum(l * s for l, s in trace) / sum(sizes)
        expect_close(got, want, what=f"the mean loss {what} returned", mistakes=[
            Mistake(f"you averaged the batch means, so the last batch ({sizes[-1]} samples) counted as much as a "
                    f"full one ({sizes[0]}); add loss.item() * batch_size and divide by the number of samples",
                    lambda: sum(losses) / len(losses),
                    where="look at how the batches' losses are combined: what is each one weighted by?"),
            Mistake("you returned only the last batch's loss; average over the whole epoch",
                    lambda: losses[-1],
                    where="look at where the loss you return is computed: inside the loop, or after it?"),
            Mistake("you summed the batch losses; divide by the number of samples",
                    lambda: sum(losses),
                    where="look at the last step: from the total to a mean per sample"),
            Mistake("you divided the weighted total by the number of batches; divide by the number of samples",
                    lambda: sum(l * s for l, s in trace) / len(trace),
                    where="look at what you divide the weighted total by"),
            Mistake(f"you divided by batch_size x number of batches ({sizes[0]} x {len(sizes)}), which counts the "
                    f"smaller last batch ({sizes[-1]} samples) as a full one; divide by the number of samples",
                    lambda: sum(l * s for l, s in trace) / (sizes[0] * len(sizes)),
                    where="look at what you divide the weighted total by: does it count the last, smaller batch right?"),
            Mistake(f"you weighted every batch's loss by the full batch size ({sizes[0]}), but the last batch has "
                    f"only {sizes[-1]} samples; weight each batch by its own size, len(targets)",
                    lambda: sum(l * sizes[0] for l in losses) / sum(sizes),
                    where="look at what each batch's loss is multiplied by: the last batch is smaller"),
            _fixed_weight(got, losses, sizes),
        ])
    passed("train_one_epoch (mean loss)", len(inputs))


def _fixed_weight(got: Any, losses: Sequence[float], sizes: Sequence[int]) -> Mistake:
    """Every batch's loss weighted by one fixed whole number (a global BATCH_SIZE, say), not by its own size: the
    result is that number times the sum of the batch means over the number of samples."""
    number = _plain(got)
    weight = round(number * sum(sizes) / sum(losses)) if isinstance(number, (int, float)) and math.isfinite(number) \
        and sum(losses) else 0
    return Mistake(f"you weighted every batch's loss by the same number ({weight}; a global BATCH_SIZE?), not by "
                   f"its own size: weight each by len(targets), not a fixed number (here the batches have "
                   f"{', '.join(map(str, sizes))} samples: the last batch is smaller)",
                   matches=lambda got: weight >= 2 and weight not in (sizes[0], sum(sizes))
                   and same_value(got, sum(l * weight for l in losses) / sum(sizes)),
                   where="look at what each batch's loss is multiplied by")


def check_train_one_epoch(fn: Callable[..., float], inputs: Sequence[Case] | None = None) -> None:
    """Both parts: the updates and the returned mean loss."""
    check_train_one_epoch_updates(fn, inputs)
    check_train_one_epoch_loss(fn, inputs)


# ---------------------------------------------------------------- evaluate


def _loss_fn() -> nn.Module:
    """The loss the checks hand over: label smoothing makes it differ from a plain cross-entropy, so a function that
    computes its own loss instead of calling ``loss_fn`` shows."""
    return nn.CrossEntropyLoss(label_smoothing=0.1)


def _run_evaluate(fn: Callable[..., Any], case: Case, *, dropout: bool, start_in_eval: bool = False):
    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout)
        model.train(not start_in_eval)  # arriving in training mode, evaluate must switch it
        seen = _record_forward(model)
        before = _state(model)
        torch.manual_seed(10_000 + case.seed)
        # task: "Afterwards the model may be left in evaluation mode or in the mode it came in". The global RNG is
        # checked below, after the modes: dropout left on draws from it, and "you forgot model.eval()" says more
        rng = torch.get_rng_state()
        result = _call(fn, model, _loader(case, shuffle=False, host=True), _loss_fn(), CPU,
                       allow=Allow(modes=True, global_rng=True))
        _LAST_RNG[:] = [rng, torch.get_rng_state()]
    return result, model, before, seen


def check_evaluate_modes(fn: Callable[..., tuple[float, float]], inputs: Sequence[Case] | None = None) -> None:
    """evaluate switches to eval mode, tracks no gradients and leaves the parameters alone."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        _, model, before, seen = _run_evaluate(fn, case, dropout=True)
        what = f"evaluate on {case}"
        expect(seen, f"{what}: the model was never called",
               where="look at your loop over the loader: does it run model(inputs) for every batch?")
        expect(not any(f.by_hand for f in seen), _by_hand_symptom(what, "eval"), where=_WHERE_MODE,
               mistake=_by_hand(seen, "eval"))
        expect(all(f.evaluating for f in seen),
               f"{what}: the model arrived in training mode and its forward passes ran in training mode: dropout "
               "was still dropping units", where="look at the model's mode before the first batch",
               mistake="you forgot model.eval(): call it before the loop")
        expect(not any(f.grad for f in seen),
               f"{what}: the forward passes recorded an autograd graph (gradient tracking was on)",
               where="look at what surrounds the loop",
               mistake="wrap the loop in `with torch.no_grad():` so PyTorch does not keep every activation for a "
                       "backward pass that never comes (memory and time)")
        expect(torch.equal(*_LAST_RNG), f"{what}: torch's global random stream changed during evaluation, which "
               "draws nothing at random",
               where="look for torch.manual_seed, random draws (torch.randn, randperm), and the model's mode "
                     "(dropout in training mode draws)")
        expect(all(p.grad is None for p in model.parameters()),
               f"{what}: the parameters have gradients afterwards",
               where="look for backward() in your function",
               mistake="evaluation must not call backward()")
        expect(same_value(_state(model), before),
               f"{what}: the parameters changed",
               where="look for optimizer.step() or in-place changes of the model in your function",
               mistake="evaluation must not call optimizer.step()")
        # task: "Afterwards the model may be left in evaluation mode or in the mode it came in": a model handed
        # over in eval mode (as a model about to predict is) must leave in eval mode
        _, model, _, _ = _run_evaluate(fn, case, dropout=True, start_in_eval=True)
        switched = [name or "the model itself" for name, training in modes(model).items() if training]
        expect(not switched,
               f"{what}: a model handed over in eval mode was left in training mode ({', '.join(switched[:3])}), so "
               "the predictions that follow run with dropout on",
               where="look at what your function does to the model's mode after the loop",
               mistake="model.train() at the end switches every model to training mode, also one that arrived in "
                       "eval mode; leave it in eval mode, or remember model.training before and put it back with "
                       "model.train(was_training)")
    passed("evaluate (eval mode, no gradients)", len(inputs))


def _evaluate_trace(case: Case, loss_fn: Callable[..., torch.Tensor] | None = None) -> list[tuple[float, int, int]]:
    """(mean loss, number correct, batch size) of every batch, from the dropout-free model."""
    loss_fn = loss_fn or _loss_fn()
    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout=False).eval()
        with torch.no_grad():
            return [(loss_fn(model(x), y).item(), int((model(x).argmax(1) == y).sum()), len(y))
                    for x, y in _loader(case, shuffle=False)]


def check_evaluate_values(fn: Callable[..., tuple[float, float]], inputs: Sequence[Case] | None = None) -> None:
    """The returned (loss, accuracy) are averages over samples, not over batches."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        got, _, _, _ = _run_evaluate(fn, case, dropout=False)
        what = f"evaluate on {case}"
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"{what} should return a pair (mean loss, accuracy), but returned {describe(got)}",
               where="look at your return statement")
        loss, acc = got
        trace = _evaluate_trace(case)
        n = sum(size for _, _, size in trace)
        want_loss = sum(l * size for l, _, size in trace) / n
        want_acc = sum(c for _, c, _ in trace) / n
        expect(not (same_value(_plain(loss), want_acc) and same_value(_plain(acc), want_loss)
                    and not same_value(want_loss, want_acc)),
               f"{what}: your first value is the expected accuracy and your second the expected loss",
               where="look at the order of the values in your return statement",
               mistake="you returned (accuracy, loss); return (loss, accuracy) in that order")
        _expect_float(loss, f"the loss {what} returned")
        _expect_float(acc, f"the accuracy {what} returned")
        sizes = [size for _, _, size in trace]
        if not (same_value(_plain(loss), want_loss) and same_value(_plain(acc), want_acc)):
            again = _run_evaluate(fn, case, dropout=False)[0]
            kept = [value for value in getattr(fn, "__defaults__", None) or ()
                    if isinstance(value, (list, dict, set, bytearray))] if runs_here(fn) else []
            expect(same_value(_plain_pair(again), _plain_pair(got)),
                   f"{what}: two identical calls gave different results, {_plain_pair(got)!r} and then "
                   f"{_plain_pair(again)!r}: your function keeps totals from earlier calls",
                   where="look for anything that lives between calls: a default argument that is a list or dict, "
                         "a global",
                   mistake=("a mutable default argument (here " + ", ".join(repr(v) for v in kept[:2]) + ") is made "
                            "once, when the function is defined, and every call adds to the same one: start the "
                            "totals at zero inside the function") if kept else
                           "start the totals at zero inside the function, on every call")
        plain = _evaluate_trace(case, nn.functional.cross_entropy)
        on_probabilities = _evaluate_trace(case, lambda logits, targets: _loss_fn()(logits.softmax(dim=1), targets))
        expect_close(loss, want_loss, what=f"the mean loss {what} returned", mistakes=[
            Mistake("you passed probabilities to the loss (a softmax of the logits); CrossEntropyLoss takes raw "
                    "logits and applies the log-softmax itself",
                    lambda: sum(l * size for l, _, size in on_probabilities) / n,
                    where="look at what you pass to loss_fn: the model's raw output, or something computed from it?"),
            Mistake("you computed a plain cross-entropy instead of calling the loss_fn you were given (here a "
                    "CrossEntropyLoss with label smoothing); use loss_fn(logits, targets)",
                    lambda: sum(l * size for l, _, size in plain) / n,
                    where="look at which function computes each batch's loss"),
            Mistake(f"you averaged the batch means, so the last batch ({sizes[-1]} samples) counted as much as a "
                    f"full one ({sizes[0]}); add loss.item() * batch_size and divide by the number of samples",
                    lambda: sum(l for l, _, _ in trace) / len(trace),
                    where="look at how the batches' losses are combined: what is each one weighted by?"),
            Mistake("you summed the batch losses; divide by the number of samples",
                    lambda: sum(l for l, _, _ in trace),
                    where="look at the last step: from the total to a mean per sample"),
            Mistake(f"you added each batch's mean loss and divided by the number of samples ({n}): a batch's mean "
                    "is already divided by its size, so the sizes were divided out twice; add loss.item() * "
                    "len(targets) for each batch, then divide by the number of samples",
                    lambda: sum(l for l, _, _ in trace) / n,
                    where="look at what you add to the total for each batch"),
            Mistake("you returned only the last batch's loss; average over every sample",
                    lambda: trace[-1][0],
                    where="look at where the loss you return is computed: inside the loop, or after it?"),
            Mistake(f"you weighted every batch's loss by the full batch size ({sizes[0]}), but the last batch has "
                    f"only {sizes[-1]} samples; weight each batch by its own size, len(targets)",
                    lambda: sum(l * sizes[0] for l, _, _ in trace) / n,
                    where="look at what each batch's loss is multiplied by: the last batch is smaller"),
            Mistake(f"you divided by batch_size x number of batches ({sizes[0]} x {len(sizes)} = "
                    f"{sizes[0] * len(sizes)}), but there are {n} samples (the last batch has {sizes[-1]}); divide "
                    "by the number of samples",
                    lambda: sum(l * size for l, _, size in trace) / (sizes[0] * len(sizes)),
                    where="look at what you divide the total by: does it count the last, smaller batch right?"),
            _fixed_weight(loss, [l for l, _, _ in trace], sizes),
        ])
        expect_close(acc, want_acc, what=f"the accuracy {what} returned", mistakes=[
            Mistake("you averaged the batch accuracies, so the smaller last batch counted as much as a full one; "
                    "count the correct predictions and divide by the number of samples",
                    lambda: sum(c / size for _, c, size in trace) / len(trace),
                    where="look at how the batches' accuracies are combined: what is each one weighted by?"),
            Mistake("that is the number of correct predictions; divide by the number of samples",
                    lambda: sum(c for _, c, _ in trace),
                    where="look at the last step: from the count of correct predictions to a fraction"),
            Mistake("that is a percentage; return a fraction between 0 and 1",
                    lambda: 100 * want_acc,
                    where="look at the scale of what you return: a fraction, not a percentage"),
            Mistake("you returned only the last batch's accuracy; count over every sample",
                    lambda: trace[-1][1] / trace[-1][2],
                    where="look at where the accuracy you return is computed: inside the loop, or after it?"),
            Mistake(f"you divided the correct predictions by batch_size x number of batches ({sizes[0]} x "
                    f"{len(sizes)} = {sizes[0] * len(sizes)}), but there are {n} samples (the last batch has "
                    f"{sizes[-1]}); divide by the number of samples",
                    lambda: sum(c for _, c, _ in trace) / (sizes[0] * len(sizes)),
                    where="look at what you divide the count by: does it count the last, smaller batch right?"),
        ])
    passed("evaluate (loss and accuracy)", len(inputs))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value


def _plain_pair(value: Any) -> Any:
    return tuple(_plain(v) for v in value) if isinstance(value, (tuple, list)) else _plain(value)


def check_evaluate(fn: Callable[..., tuple[float, float]], inputs: Sequence[Case] | None = None) -> None:
    """Both parts: modes and values."""
    check_evaluate_modes(fn, inputs)
    check_evaluate_values(fn, inputs)


# ---------------------------------------------------------------- fit


class FitCase(NamedTuple):
    """A ``fit`` case: the training case, the number of epochs and the clipping threshold."""

    case: Case = Case()
    epochs: int = 2
    max_norm: float = 0.05


# the second max_norm lies among the gradients' norms: some steps are clipped, others must be left as they are
DEFAULT_FIT_CASES = [FitCase(Case(0, 10, 4), 2, 0.05), FitCase(Case(2, 12, 5), 3, 0.7)]
NO_CLIPPING = 1e9  # clip_grad_norm_ then multiplies by exactly 1.0


def _scaled_up(wrong_answer: Callable[[], Any]) -> Mistake:
    return Mistake("every gradient was scaled to a norm of max_norm, a smaller one up too: clipping only shrinks a "
                   "gradient whose total norm is over max_norm and leaves the others as they are (what "
                   "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) does)", wrong_answer,
                   where="look at what you do to the gradients between backward() and optimizer.step()")


def _fit_variant(clip: str = "norm", fixed_norm: float | None = None, scheduler_first: bool = False,
                 per_epoch: bool = False, plain_loss: bool = False, zero_grad: bool | str = True,
                 ahead: bool | str = False) -> Callable[..., list[float]]:
    """The reference fit with one mistake. ``zero_grad="after"``: cleared only after the step; ``ahead``: one
    scheduler.step() before the loop (and one fewer at the end), so update k uses the schedule's rate for k + 1."""
    def run(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
        if plain_loss:
            loss_fn = nn.functional.cross_entropy
        model.train()
        history = []
        if ahead == "with_step":  # an update before the loop, so that PyTorch does not warn about the order
            optimizer.step()
        if ahead:
            scheduler.step()
        for _ in range(epochs):
            for inputs, targets in loader:
                inputs, targets = inputs.to(device), targets.to(device)
                if zero_grad is True:
                    optimizer.zero_grad()
                loss = loss_fn(model(inputs), targets)
                loss.backward()
                if clip == "norm":
                    nn.utils.clip_grad_norm_(model.parameters(), fixed_norm or max_norm)
                elif clip == "l1":
                    nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=1)
                elif clip == "value":
                    nn.utils.clip_grad_value_(model.parameters(), max_norm)
                elif clip == "each":
                    for parameter in model.parameters():
                        nn.utils.clip_grad_norm_([parameter], max_norm)
                elif clip == "rescale":  # every gradient scaled to max_norm, a small one up too
                    total = nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
                    for parameter in model.parameters():
                        parameter.grad.mul_(max_norm / (total + 1e-6))
                if scheduler_first and not per_epoch:
                    scheduler.step()
                optimizer.step()
                if zero_grad == "after":
                    optimizer.zero_grad()
                if not scheduler_first and not per_epoch and not (ahead and len(history) == epochs * len(loader) - 1):
                    scheduler.step()
                history.append(loss.item())
            if per_epoch:
                scheduler.step()
        return history
    return run


def _run_fit(fn: Callable[..., Any], fit_case: FitCase, *, one_cycle: bool, clip: bool):
    """Run ``fn`` on fresh objects; return (history, state after, scheduler, batches per epoch)."""
    case, epochs = fit_case.case, fit_case.epochs
    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout=False).eval()  # as evaluate leaves it: fit must switch to training mode
        seen = _record_forward(model)
        loader, optimizer = _loader(case, host=True), _sgd(model)
        if one_cycle:
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, epochs=epochs,
                                                            steps_per_epoch=len(loader))
        else:
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        max_norm = fit_case.max_norm if clip else NO_CLIPPING
        loss_fn = _LossLog(_loss_fn())
        # a model handed over mid-training, as train_one_epoch's check hands it (fit does what train_one_epoch does)
        arrivals = leftover_gradients(model, case.seed, record=runs_here(fn))
        n_params = len(list(model.parameters()))
        # task: "trains for `epochs` passes", "The scheduler ... must advance in step with the updates" (and "may
        # be left in training mode"): model, optimizer and scheduler change. This model has no dropout, so a
        # correct fit leaves the global random stream alone: that rule stays on.
        result = _call(fn, model, loader, loss_fn, optimizer, scheduler, CPU, epochs, max_norm,
                       hints=[("Tried to step", "you stepped the scheduler more often than once per batch "
                               "(OneCycleLR refuses to go past its last step)")],
                       allow=Allow(changed=(model, optimizer, scheduler)))
    _LAST_LOSSES[:] = list(loss_fn.values)
    # the first backward (its arrivals come first, one per parameter) added to the gradients the model came with
    _FIRST_ADDED_TO_LEFTOVERS[:] = ["values" in arrivals.kinds()[:n_params]]
    return result, _state(model), scheduler, len(loader), seen


class _LossLog(nn.Module):
    """``loss_fn`` that remembers the value of every loss it computed with gradient tracking on (one per batch)."""

    def __init__(self, loss_fn: nn.Module) -> None:
        super().__init__()
        self.loss_fn = loss_fn
        object.__setattr__(self, "values", [])  # outside the module's state: the caller's loss_fn stays unchanged

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # noqa: D102
        loss = self.loss_fn(logits, targets)
        if loss.requires_grad:
            self.values.append(loss.item())
        return loss


_LAST_LOSSES: list[float] = []  # every batch loss the last _run_fit's function computed through the loss_fn
_FIRST_ADDED_TO_LEFTOVERS: list[bool] = []  # whether the last _run_fit's first backward added to leftover gradients


def _stale_first_step(twin: Callable[[], Any], leftovers: bool) -> Mistake:
    """fit cleared the gradients only after each step: the first update also used what .grad held on arrival."""
    return Mistake("call optimizer.zero_grad() at the start of each batch, before backward: cleared only after the "
                   "step, the first update also uses whatever .grad held when fit began (as in train_one_epoch)",
                   matches=lambda got: leftovers or same_value(got, twin()),
                   where="look at where in each batch you clear the gradients")


def _stale_symptom(what: str) -> str:
    return (f"{what}: the model's parameters arrived holding gradients of an earlier step (.grad not empty), and the "
            "first backward added this batch's gradients to them")


def check_fit_schedule(fn: Callable[..., list[float]], inputs: Sequence[FitCase] | None = None) -> None:
    """OneCycleLR is stepped once per batch, after optimizer.step(), for every epoch."""
    inputs = inputs if inputs is not None else DEFAULT_FIT_CASES
    for fit_case in inputs:
        _, got, scheduler, batches, seen = _run_fit(fn, fit_case, one_cycle=True, clip=False)
        leftovers = _FIRST_ADDED_TO_LEFTOVERS[0]
        what = f"fit on {fit_case}"
        expect(not seen or all(f.training for f in seen),
               f"{what}: the model arrived in eval mode (as evaluate leaves it) and trained in it",
               where="look at the start of fit, before the first batch",
               mistake="call model.train() at the start of fit, so dropout and batch norm behave as in training")
        steps, epochs = scheduler.last_epoch, fit_case.epochs
        symptom = (f"{what}: the scheduler took {steps} steps; {epochs} epochs x {batches} batches = "
                   f"{epochs * batches} updates")
        where = "look at where scheduler.step() sits in your loops"
        final_lr = scheduler.optimizer.param_groups[0]["lr"]
        expect(steps != 0 or final_lr == scheduler.get_last_lr()[0], symptom + ", yet the optimizer's learning rate "
               f"changed (to {final_lr:.4g})", where="look at which scheduler your loop steps",
               mistake="you stepped a scheduler of your own; step the one fit was given (scheduler.step()), which "
                       "the caller made for this optimizer")
        expect(steps != 0, symptom, where=where, mistake="you never called scheduler.step(), so the learning rate "
               "never changed")
        expect(steps != epochs, symptom, where=where,
               mistake="you stepped the scheduler once per epoch; OneCycleLR's schedule is counted in batches, "
                       "so call scheduler.step() after every optimizer.step()")
        expect(steps != batches or epochs == 1, symptom, where="look at the loop over the epochs",
               mistake=f"that is one epoch's worth: loop over all {epochs} epochs")
        expect(steps == epochs * batches, symptom, where=where)
        want = _run_fit(ref.fit, fit_case, one_cycle=True, clip=False)[1]
        if not same_value(got, want):
            with warnings.catch_warnings():  # PyTorch warns about exactly this mistake
                warnings.simplefilter("ignore")
                twin = _run_fit(_fit_variant(scheduler_first=True), fit_case, one_cycle=True, clip=False)[1]
            symptom = (f"{what}: the parameters after training differ from the reference's "
                       f"(first in '{_first_difference(got, want)}')")
            expect(not same_value(got, twin), symptom, where="look at the order of the two step() calls",
                   mistake="the schedule is one step ahead: a scheduler.step() ran before the optimizer.step() it "
                           "belongs to (before optimizer.step() in the loop, or once before the loop), so every "
                           "update used the next update's learning rate (the first one was skipped); call "
                           "scheduler.step() only after each optimizer.step()")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ahead = _run_fit(_fit_variant(ahead="with_step"), fit_case, one_cycle=True, clip=False)[1]
            expect(not same_value(got, ahead), symptom, where="look at what your fit does before its loop",
                   mistake="the schedule is one step ahead: scheduler.step() was called once before the loop, so "
                           "every update used the next update's learning rate (the first one was skipped); and the "
                           "optimizer.step() before it was an update of its own, from whatever .grad held when fit "
                           "began. Call both only in the loop, optimizer.step() first")
            own_loss = _run_fit(_fit_variant(plain_loss=True), fit_case, one_cycle=True, clip=False)[1]
            expect(not same_value(got, own_loss), symptom, where="look at which function computes each batch's loss",
                   mistake="you computed a plain cross-entropy instead of calling the loss_fn you were given (here "
                           "a CrossEntropyLoss with label smoothing); use loss_fn(logits, targets)")
            forgot = _forgot_zero_grad(lambda: _run_fit(_fit_variant(zero_grad=False), fit_case, one_cycle=True,
                                                        clip=False)[1])
            scaled = _scaled_up(lambda: _run_fit(_fit_variant(clip="rescale"), fit_case, one_cycle=True,
                                                 clip=False)[1])
            named = next((m for m in (forgot, scaled) if m.explains(got)), None)
            stale = _stale_first_step(lambda: _run_fit(_fit_variant(zero_grad="after"), fit_case, one_cycle=True,
                                                       clip=False)[1], leftovers)
            if named is None and stale.explains(got):
                raise CheckError(_stale_symptom(what), where=stale.where, mistake=stale.message)
            raise CheckError(symptom, where=named.where if named else "look at the order of the calls for each batch",
                             mistake=named.message if named else None)
    passed("fit (learning-rate schedule)", len(inputs))


def _forgot_zero_grad(twin: Callable[[], Any]) -> Mistake:
    return Mistake("you forgot optimizer.zero_grad(): backward() adds to .grad, so every update also carried all the "
                   "earlier batches' gradients; clear them at the start of every batch",
                   twin, where="look at what happens to the gradients between one batch and the next")


def check_fit_clipping(fn: Callable[..., list[float]], inputs: Sequence[FitCase] | None = None) -> None:
    """Gradients are clipped to max_norm between backward() and optimizer.step()."""
    inputs = inputs if inputs is not None else DEFAULT_FIT_CASES
    for fit_case in inputs:
        _, got, scheduler, _, _ = _run_fit(fn, fit_case, one_cycle=False, clip=True)
        leftovers = _FIRST_ADDED_TO_LEFTOVERS[0]
        what = f"fit on {fit_case}"
        final_lr, given_lr = scheduler.optimizer.param_groups[0]["lr"], scheduler.get_last_lr()[0]
        expect(final_lr == given_lr, f"{what} (max_norm={fit_case.max_norm}): the scheduler fit was given keeps the "
               f"learning rate at {given_lr:.4g}, but the optimizer's ended at {final_lr:.4g}",
               where="look at what changes the learning rate in your fit: step only the scheduler you were given",
               mistake="you stepped a scheduler of your own" if scheduler.last_epoch == 0 else None)
        want = _run_fit(ref.fit, fit_case, one_cycle=False, clip=True)[1]
        twin = lambda variant: _run_fit(variant, fit_case, one_cycle=False, clip=True)[1]  # noqa: E731
        mistakes = [
            Mistake("the gradients were not clipped before the update: call "
                    "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) after loss.backward() "
                    "and before optimizer.step()", lambda: twin(_fit_variant(clip="none")),
                    where="look at what happens to the gradients between loss.backward() and optimizer.step()"),
            Mistake("you clipped each gradient value (clip_grad_value_); clip the total norm with clip_grad_norm_",
                    lambda: twin(_fit_variant(clip="value")),
                    where="look at the clipping function you call"),
            Mistake("you clipped the L1 norm (norm_type=1: the sum of the gradients' absolute values), which is "
                    "larger than their total (L2) norm, so gradients were shrunk more than max_norm asks: leave "
                    "norm_type at its default, 2", lambda: twin(_fit_variant(clip="l1")),
                    where="look at the arguments of your clipping call"),
            Mistake("you clipped to a fixed norm of 1.0; use the max_norm argument",
                    lambda: twin(_fit_variant(fixed_norm=1.0)),
                    where="look at the arguments of your clipping call"),
            Mistake("you clipped each parameter's gradient to max_norm on its own; clip_grad_norm_ takes all the "
                    "parameters at once and scales them together, so that their total norm (over every gradient "
                    "as one vector) is at most max_norm: pass model.parameters() in one call",
                    lambda: twin(_fit_variant(clip="each")),
                    where="look at the arguments of your clipping call"),
            _forgot_zero_grad(lambda: twin(_fit_variant(zero_grad=False))),
            _scaled_up(lambda: twin(_fit_variant(clip="rescale"))),
            Mistake("the optimizer.step() before the loop was an update of its own, from whatever .grad held when fit "
                    "began (the model came with gradients of an earlier step): step the optimizer only after each "
                    "batch's backward()", lambda: twin(_fit_variant(ahead="with_step")),
                    where="look at what your fit does before its loop"),
        ]
        if not same_value(got, want):
            mistake = next((m for m in mistakes if m.explains(got)), None)
            stale = _stale_first_step(lambda: twin(_fit_variant(zero_grad="after")), leftovers)
            if mistake is None and stale.explains(got):
                raise CheckError(_stale_symptom(f"{what} (max_norm={fit_case.max_norm}, constant learning rate)"),
                                 where=stale.where, mistake=stale.message)
            raise CheckError(f"{what} (max_norm={fit_case.max_norm}, constant learning rate): the parameters after "
                             f"training differ from the reference's (first in '{_first_difference(got, want)}')",
                             where="look at what you do to the gradients between backward() and optimizer.step()",
                             mistake=mistake.message if mistake else None)
    passed("fit (gradient clipping)", len(inputs))


def check_fit_history(fn: Callable[..., list[float]], inputs: Sequence[FitCase] | None = None) -> None:
    """fit returns one float per batch: loss.item(), never the loss tensor.

    One bug, one cell: where the updates differ from the reference's (the schedule and clipping checks grade
    those), the history is compared with the losses the learner's own run computed through ``loss_fn``; where
    those cannot be told apart (not one loss per batch), a mismatch after the first update says the updates
    are the cause.
    """
    inputs = inputs if inputs is not None else DEFAULT_FIT_CASES
    for fit_case in inputs:
        got, state, _, batches, _ = _run_fit(fn, fit_case, one_cycle=True, clip=True)
        own_losses = list(_LAST_LOSSES)
        what = f"fit on {fit_case}"
        want, want_state = _run_fit(ref.fit, fit_case, one_cycle=True, clip=True)[:2]
        expect(got is not None, f"{what} returned None; expected the list of every batch's loss",
               where="look at the end of fit: its return statement")
        expect(isinstance(got, list), f"{what} should return a list of floats, not {describe(got)}",
               where="look at how you build the history you return: a Python list, one append per batch")
        tensors = [v for v in got if isinstance(v, torch.Tensor)]
        expect(not any(t.grad_fn is not None for t in tensors),
               f"{what}: your history holds loss tensors that are still attached to their graphs, so every "
               "step's whole graph stays in memory",
               where="look at what you append to the history at each batch",
               mistake="append loss.item() (a float) instead of the loss tensor")
        expect(not tensors, f"{what}: your history holds tensors; expected Python floats",
               where="look at what you append to the history at each batch",
               mistake="append loss.item(), a plain Python float")
        expect(len(got) != fit_case.epochs,
               f"{what}: the history has {len(got)} values, one per epoch; expected every batch's loss ({len(want)} "
               "values)",
               where="look at where you append to the history: inside the loop over the batches, or after it?",
               mistake="you logged one value per epoch; log every batch's loss")
        expect(len(got) == len(want),
               f"{what}: the history has {len(got)} values; it should have one per batch, "
               f"{fit_case.epochs} epochs x {batches} batches = {len(want)}",
               where="look at where you append to the history: once for every batch of every epoch?")
        if not same_value(state, want_state) and len(own_losses) == len(want):
            # one bug, one cell: the schedule and clipping cells grade the updates; here the history must hold
            # the losses your own run computed, one per batch
            for i, (value, expected) in enumerate(zip(got, own_losses)):
                expect_close(value, expected, what=f"{what}: history[{i}] (the loss your run computed for batch {i})")
            continue
        for i, (value, expected) in enumerate(zip(got, want)):
            # the first loss comes before any update: only later ones can differ because of the updates
            if i > 0 and not same_value(state, want_state) and not same_value(value, expected):
                raise CheckError(f"{what}: history[{i}] should be {expected:.6g}, but yours is "
                                 f"{f'{value:.6g}' if isinstance(value, (int, float)) else describe(value)}; "
                                 "your parameter updates differ from the reference's, so the losses after the first "
                                 "update cannot match: fix the updates first (the schedule and clipping checks say how)",
                                 where="look at the order of the calls for each batch and at which loss you record")
            expect_close(value, expected, what=f"{what}: history[{i}]")
    passed("fit (loss history)", len(inputs))


# ---------------------------------------------------------------- choosing an optimizer (self-check)


def check_make_optimizer(fn: Callable[..., torch.optim.Optimizer],
                         inputs: Sequence[tuple[str, float]] | None = None) -> None:
    # no lr equal to a PyTorch default (Adam's and AdamW's is 1e-3): a forgotten lr= must show
    inputs = inputs if inputs is not None else [("sgd", 0.05), ("adam", 3e-3), ("adamw", 2e-3)]
    # the notebook hands over model.parameters(), a generator that can be read once; a list is as valid
    earlier: list[tuple[Any, list[nn.Parameter]]] = []  # what every earlier call returned, and its parameters
    for (kind, lr), as_generator in [(i, g) for i in inputs for g in (False, True)]:
        params = [nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2, 2))]
        what = (f"make_optimizer({kind!r}, params, lr={lr})" if not as_generator else
                f"make_optimizer({kind!r}, params, lr={lr}) with params a generator, as model.parameters() is")
        try:
            got = call(fn, kind, params if not as_generator else (p for p in params), lr)
        except CheckError as error:
            if "empty parameter list" in str(error.__cause__ or ""):
                raise CheckError(f"{what} raised ValueError: {error.__cause__}",
                                 where="look at how many optimizers your function builds from params",
                                 mistake="a generator such as model.parameters() can be read only once: the first "
                                         "optimizer built from it takes every parameter and the next ones get none; "
                                         "build only the optimizer asked for (or turn params into a list first)"
                                 ) from None
            raise
        want = ref.make_optimizer(kind, params, lr)
        if type(got) is torch.optim.Adam and kind == "adamw":
            if got.defaults.get("weight_decay"):
                raise CheckError(f"{what} returned Adam with weight_decay={got.defaults['weight_decay']}; expected "
                                 "AdamW",
                                 where="look at the optimizer class your 'adamw' branch builds",
                                 mistake="Adam(weight_decay=...) adds the decay to the gradient (L2 regularisation), "
                                         "which Adam's scaling then weakens; AdamW applies it to the weights "
                                         "directly. Use torch.optim.AdamW")
            raise CheckError(f"{what} returned Adam; expected AdamW",
                             where="look at the optimizer class your 'adamw' branch builds",
                             mistake="ask for torch.optim.AdamW(params, lr=lr, weight_decay=0.01)")
        expect(isinstance(got, torch.optim.Optimizer), f"{what} should return an optimizer, not {describe(got)}",
               where="look at your return statement")
        expect(type(got) is type(want), f"{what} returned {type(got).__name__}; expected {type(want).__name__}",
               where=f"look at the optimizer class your {kind!r} branch builds")
        group = got.param_groups[0] if got.param_groups else {}
        held = [id(p) for g in got.param_groups for p in g["params"]]
        before = [given for returned, given in earlier if returned is got or (held and held == [id(p) for p in given])]
        expect(held == [id(p) for p in params] or not before,
               f"{what}: the optimizer returned is the one built on an earlier call (it holds that call's "
               "parameters, not the ones given now)",
               where="look for anything your function keeps between calls (a dict or variable outside it)",
               mistake="build a new optimizer on every call and keep nothing between calls: an optimizer kept from "
                       "an earlier call updates that call's parameters, and the model given now never learns")
        earlier.append((got, params))
        expect(held == [id(p) for p in params],
               f"{what}: the optimizer does not hold the parameters it was given",
               where="look at the first argument of the optimizer you build",
               mistake="pass params to it")
        expect(group.get("lr") == lr, f"{what}: the learning rate is {group.get('lr')}; expected {lr}",
               where="look at the lr= you pass to the optimizer",
               mistake=f"use the lr argument ({lr})")
        if kind == "sgd":
            expect(group.get("momentum") == 0.9, f"{what}: SGD's momentum is {group.get('momentum')}; expected 0.9",
                   where="look at the arguments of your torch.optim.SGD",
                   mistake="SGD without momentum starts slowly and stalls on noisy gradients; pass momentum=0.9"
                   if not group.get("momentum") else "pass momentum=0.9, the task's value")
        if kind == "adamw":
            expect(group.get("weight_decay") == 0.01,
                   f"{what}: weight_decay should be 0.01 (yours: {group.get('weight_decay')})",
                   where="look at the arguments of your torch.optim.AdamW")
        if kind == "adam":
            expect(group.get("weight_decay") == 0, f"{what}: weight_decay is {group.get('weight_decay')}; plain Adam "
                   "here, without weight decay",
                   where="look at the arguments of your torch.optim.Adam")
        # every other setting as the task's (SGD with momentum and nothing else); how PyTorch runs the step is free
        wanted = want.param_groups[0]
        other = [key for key in wanted if key not in ("params", *_HOW_IT_RUNS) and group.get(key) != wanted[key]]
        expect(not other, f"{what}: your {type(got).__name__} has "
               + ", ".join(f"{key}={group.get(key)!r}" for key in other) + "; the task's has "
               + ", ".join(f"{key}={wanted[key]!r}" for key in other),
               where=f"look at the arguments of your torch.optim.{type(got).__name__}",
               mistake="pass only what the task names (the lr, and momentum=0.9 or weight_decay=0.01): leave the "
                       "other settings at their defaults")
    passed("make_optimizer", len(inputs))


# Optimizer settings that change how PyTorch computes a step, not what the step is
_HOW_IT_RUNS = ("foreach", "fused", "capturable", "differentiable")


# ---------------------------------------------------------------- the classifier's device handling (self-check)


def _moved_model(what: str, how: str) -> CheckError:
    """classify moved the caller's model (a stand-in for one on a GPU) to the CPU."""
    return CheckError(f"{what}: your function moved the model it was given to the CPU ({how}); the check's model "
                      "stands for one on a GPU",
                      where="look at what your function does to the model",
                      mistake="the caller's model must stay where it is: moved to the CPU, it stays there after "
                              "your function returns, and the caller's next training or predictions run on the CPU. "
                              "Move the images to the model's device instead: "
                              "images.to(next(model.parameters()).device)")


def _expect_device_from_model(fn: Callable[[nn.Module, torch.Tensor], torch.Tensor], case: Case, what: str) -> None:
    """On a machine with a GPU (played: this grader may have none), a model on the CPU still gets its images on the
    CPU: the device comes from the model, not from asking whether a GPU is there."""
    with torch.random.fork_rng(devices=[]):
        model = _model(case, dropout=True)
    images = torch.randn(case.n, N_FEATURES, generator=torch.Generator().manual_seed(case.seed))
    try:
        with playing_a_gpu_machine(), torch.random.fork_rng(devices=[]):
            _call(fn, model, images, allow=Allow(modes=True, global_rng=True))
    except CheckError as error:
        raise CheckError(f"{what}, on a machine with a GPU (torch.cuda.is_available() True; the check plays one) and "
                         f"the model on the CPU: {error.symptom}",
                         where="look at where your function gets the device from",
                         mistake="you picked the device by asking whether a GPU is there, but the model may be on "
                                 "another device (here the CPU): take the device from the model itself, "
                                 "next(model.parameters()).device" if "cuda" in str(error.__cause__ or "").lower()
                                 or "nvidia" in str(error.__cause__ or "").lower() else None) from error.__cause__


def _expect_images_on_models_device(fn: Callable[[nn.Module, torch.Tensor], torch.Tensor], case: Case,
                                    what: str) -> None:
    """With the model on the device (the stand-in GPU: its parameters' .device says cuda:0, and its forward wants
    its inputs there) and the images on the CPU, the images must reach the model's device: a .to() to anywhere
    else (the CPU) fails as it would on a GPU."""
    with torch.random.fork_rng(devices=[]):
        model = place_model(_model(case, dropout=True), on_device=True)
    images = place(torch.randn(case.n, N_FEATURES, generator=torch.Generator().manual_seed(case.seed)), on_device=False)
    try:
        with substitute(fn, DEVICE=torch.device("meta")), torch.random.fork_rng(devices=[]):
            _call(fn, model, images, allow=Allow(modes=True, global_rng=True))
    except CheckError as error:
        cause = str(error.__cause__ or "")
        if not model_on_device(model):
            raise _moved_model(what, "it was moved to the CPU") from None
        if "same device" not in cause:
            raise
        raise CheckError(f"{what}, with the model on a GPU (the check's stand-in: next(model.parameters()).device is "
                         f"{STAND_IN_DEVICE}) and the images on the CPU: the images reached the model still on the CPU "
                         f"({type(error.__cause__).__name__}: {cause.splitlines()[0][:160]})",
                         where="look at the device you move the images to: where does your function get it from?",
                         mistake="move the images to the device the model's parameters are on, "
                                 "images.to(next(model.parameters()).device)") from None
    expect(model_on_device(model), f"{what}: your function moved the model it was given off its device (the check's "
           "stand-in GPU) to the CPU", where="look at what your function does to the model",
           mistake="the caller's model must stay where it is: move the images to the model's device instead, "
                   "images.to(next(model.parameters()).device)")


def check_classify(fn: Callable[[nn.Module, torch.Tensor], torch.Tensor], inputs: Sequence[Case] | None = None) -> None:
    """classify moves the images to the model's device (HostTensors fail if not), predicts in eval mode without
    gradients, and returns the classes."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        with torch.random.fork_rng(devices=[]):
            model = _model(case, dropout=True).train()
            reference = _model(case, dropout=True).eval()
        seen = _record_forward(model)
        outputs_on_device(model)  # the framework's stand-in: its outputs are on a device of their own
        images = torch.randn(case.n, N_FEATURES, generator=torch.Generator().manual_seed(case.seed))
        what = f"classify(model, {case.n} images)"
        # task: "Predictions are deterministic (no dropout)": switching the model to eval mode is part of the job.
        # The global RNG is compared below, after the modes (dropout left on draws from it)
        rng = torch.get_rng_state()
        # the notebook's DEVICE is a stand-in ('meta') here: the task says the function is not told the device
        try:
            with substitute(fn, DEVICE=torch.device("meta")):
                got = _call(fn, model, images.as_subclass(HostTensor), allow=Allow(modes=True, global_rng=True))
        except CheckError as error:
            if moved := moved_to_cpu(model):  # the crash that follows (the images meet the model "on the host")
                raise _moved_model(what, moved) from None
            if "meta" in str(error.__cause__ or ""):
                raise CheckError(f"{what} raised {type(error.__cause__).__name__}: {error.__cause__}",
                                 where="look at where your function gets the device from",
                                 mistake="you used the notebook's DEVICE (the check set it to a stand-in device, "
                                         "'meta'); the function is not told the device: take it from the model's "
                                         "parameters, next(model.parameters()).device") from None
            raise
        rng_changed = not torch.equal(rng, torch.get_rng_state())
        torch.set_rng_state(rng)
        if moved := moved_to_cpu(model):
            raise _moved_model(what, moved)
        if case is inputs[0]:
            _expect_device_from_model(fn, case, what)
            _expect_images_on_models_device(fn, case, what)
        with torch.no_grad():
            want = reference(images).argmax(dim=1)
        expect(seen, f"{what}: the model was never called",
               where="look for the call model(images) in your function")
        expect(all(f.evaluating for f in seen), f"{what}: the model ran in training mode: dropout was active",
               where="look at the model's mode before the forward pass",
               mistake="call model.eval() first")
        expect(not any(f.grad for f in seen), f"{what}: the forward pass recorded an autograd graph (gradient "
               "tracking was on)",
               where="look at what surrounds the forward pass",
               mistake="run the model inside `with torch.no_grad():`")
        expect(not rng_changed, f"{what}: torch's global random stream changed; predicting draws nothing at random",
               where="look for torch.manual_seed and random draws in your function, and at the model's mode")
        on_device = is_on_device(got)
        if isinstance(got, Placed):
            got = unplaced(got)
        expect_tensor(got, want, what=what, mistakes=[
            Mistake("you returned the logits; return the class of each image, argmax(dim=1)",
                    matches=lambda t: isinstance(t, torch.Tensor) and t.shape == (case.n, N_CLASSES),
                    where="look at the last step: from logits to one class index per image")])
        expect(not on_device,
               f"{what}: the predictions came back on the model's device (the check's model marks its outputs as "
               "on a device of its own, as a GPU's would be); the task asks for them on the CPU",
               where="look at the tensor you return", mistake="call .cpu() on the predictions before returning them")
    passed("classify", len(inputs))


# ---------------------------------------------------------------- putting it together: a new model on new data

SPIRAL_CLASSES = 3
TARGET_ACCURACY = 0.98
TIME_BUDGET_S = 30.0  # per training run; the reference takes about a second on one CPU core


def make_spirals(n: int, seed: int) -> TensorDataset:
    """``n`` points ``[n, 2]`` on three interleaved spiral arms; labels as one-hot float rows ``[n, 3]``.

    Each arm winds 1.25 times around the origin; a little angular noise makes the
    arms touch, so about 99.5% is the best any model can do.
    """
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, SPIRAL_CLASSES, (n,), generator=g)
    t = torch.rand(n, generator=g)  # position along the arm, 0 (centre) to 1 (outside)
    radius = 0.2 + 2.8 * t
    angle = 2 * torch.pi * (1.25 * t + labels / SPIRAL_CLASSES) + 0.2 * torch.randn(n, generator=g)
    points = torch.stack([radius * angle.cos(), radius * angle.sin()], dim=1)
    return TensorDataset(points, torch.eye(SPIRAL_CLASSES)[labels])


def _relabelled(data: TensorDataset, shift: int) -> TensorDataset:
    """The same points, each arm's one-hot label moved ``shift`` classes on."""
    points, one_hot = data.tensors
    return TensorDataset(points, one_hot.roll(shift, dims=1))


class SpiralNet(nn.Module):
    """The model to train: two hidden layers of 64 units, with dropout after the first."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Dropout(0.1),
                                    nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, SPIRAL_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def spiral_accuracy(model: nn.Module, data: TensorDataset) -> float:
    """The fraction of ``data`` that ``model`` classifies right, in eval mode and without gradients."""
    points, one_hot = data.tensors
    was_training = modes(model)
    model.eval()
    with torch.no_grad():
        correct = (model(points).argmax(dim=1) == one_hot.argmax(dim=1)).float().mean().item()
    for name, module in model.named_modules():
        module.training = was_training[name]
    return correct


class SpiralCase(NamedTuple):
    """A hidden training run: the seed of the training points, of the held-out points and of the model."""

    train_seed: int = 0
    test_seed: int = 100
    model_seed: int = 0
    n_train: int = 1000


DEFAULT_SPIRAL_CASES = [SpiralCase(0, 100, 0)]


def check_train_spirals(fn: Callable[[nn.Module, TensorDataset], Any],
                        inputs: Sequence[SpiralCase] | None = None) -> None:
    """The model ``fn`` trained (in place) classifies held-out spiral points at TARGET_ACCURACY or better, in budget."""
    inputs = inputs if inputs is not None else DEFAULT_SPIRAL_CASES
    name = getattr(fn, "__name__", "train_spirals")
    for case in inputs:
        # the arms carry other labels than make_spirals gives them (train and held-out alike): the same spirals
        # for the model that learns train_set, other ones for a function that trains on points it draws itself
        shift = 1 + case.train_seed % (SPIRAL_CLASSES - 1)
        train_set = _relabelled(make_spirals(case.n_train, case.train_seed), shift)
        held_out = _relabelled(make_spirals(2000, case.test_seed), shift)
        what = f"{name} on {case.n_train} training points (seed {case.train_seed})"
        before_data = [t.clone() for t in train_set.tensors]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case.model_seed)
            model = SpiralNet().eval()  # as a model comes back from an evaluation
            start = _state(model)
            torch.manual_seed(20_000 + case.model_seed)  # the run's shuffles and dropout, the same on every attempt
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # the budget is for one core, whatever the machine (and small nets run best so)
            try:
                # one bug, one exercise's points: earlier exercises the learner calls are the reference ones here
                with substitute(fn, train_one_epoch=ref.train_one_epoch, evaluate=ref.evaluate, fit=ref.fit,
                                accuracy=ref.accuracy, to_class_targets=ref.to_class_targets):
                    # CPU time, not wall time: on a busy machine other processes do not count against the learner
                    began = time.process_time()
                    # task: "trains the model you are given, in place" and "may draw from torch's global random
                    # generator (shuffling, dropout)": the model and the global RNG may change, nothing else
                    _call(fn, model, train_set, allow=Allow(changed=(model,), global_rng=True))
                    took = time.process_time() - began
            finally:
                torch.set_num_threads(threads)
        expect(all(torch.equal(a, b) for a, b in zip(before_data, train_set.tensors)),
               f"{what}: the training set you were given changed; it belongs to the caller",
               where="look for in-place changes of the training set's tensors (normalising, augmenting)",
               mistake="transform copies, or inside the model")
        expect(not same_value(_state(model), start),
               f"{what}: the model you were given has its initial weights still",
               where="look at which model your function trains: the argument, or one it builds?",
               mistake="train that model in place (a new model built inside your function is lost when it returns)")
        expect(took <= TIME_BUDGET_S, f"{what}: training took {took:.0f} s of CPU time; the budget is {TIME_BUDGET_S:.0f} s "
               "on one CPU core",
               where="look at what sets the amount of work: the number of epochs, the batch size, the model's size",
               mistake="fewer epochs or larger batches, with a learning rate and schedule that make each step count")
        expect(all(torch.isfinite(p).all() for p in model.parameters()),
               f"{what}: the trained model's parameters contain nan or inf (the training diverged)",
               where="look at the learning rate and schedule: print the loss of the first batches to see when it "
                     "grows")
        got = spiral_accuracy(model, held_out)
        drawn = spiral_accuracy(model, make_spirals(2000, case.test_seed))
        expect(got >= TARGET_ACCURACY or drawn < TARGET_ACCURACY,
               f"{what}: the trained model classifies {got:.1%} of 2,000 held-out points from train_set's spirals "
               f"correctly, but {drawn:.1%} of points from make_spirals, whose arms carry other labels here",
               where="look at which data your function trains on: train_set, or points it makes itself?",
               mistake="train on the train_set you are given: the check's spirals need not be labelled as "
                       "make_spirals labels them")
        expect(got >= TARGET_ACCURACY,
               f"{what}: the trained model classifies {got:.1%} of 2,000 held-out points correctly; the target is "
               f"{TARGET_ACCURACY:.0%}. (Chance is 33%; a model that learned nothing stays near it.)",
               where="look at what your training tries: print the training loss per epoch to see whether it still "
                     "falls at the end (more epochs, a larger model) or stalls early (learning rate, schedule)")
    passed(f"{name} (held-out accuracy of at least {TARGET_ACCURACY:.0%})", len(inputs))
