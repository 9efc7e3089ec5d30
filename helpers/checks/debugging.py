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

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from helpers.checks import (Allow, CheckError, HostTensor, Mistake, NotMovedError, call, describe, expect_tensor,
                           passed, same_value)
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
        raise CheckError(f"expected a function or a class, got {describe(fn)}: pass the function itself, not its result")
    if allow is None:
        allow = Allow(modes=True, global_rng=True)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        try:
            return Outcome(value=call(fn, *args, allow=allow, **kwargs))
        except NotImplementedError:
            raise CheckError(f"{getattr(fn, '__name__', 'your code')} is not written yet: "
                             "replace `raise NotImplementedError()` with the fixed program") from None
        except CheckError as error:
            cause = error.__cause__  # call wraps the program's own exception: that is the evidence to read
            if isinstance(cause, Exception) and not isinstance(cause, CheckError):
                return Outcome(error=cause)
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
        raise failure(f"{what} raises {line}", mistake=hint) from got.error
    if same(got.value, want):
        return got.value
    if broken.error is None and same(got.value, broken.value):
        raise failure(f"{shows(got.value)} (the same as the program you were given)", where=where, mistake=bug)
    mistake = next((m for m in mistakes if m.explains(got.value)), None)
    if mistake is not None:
        raise failure(shows(got.value), where=where, mistake=mistake.message)
    if differs is not None:
        differs(got.value, want)
    raise failure(shows(got.value))


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


# ---------------------------------------------------------------- 1. a batch left on the CPU


def _digit_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))


def check_predict_digits(fn: Callable[..., torch.Tensor], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """Runs with the images still "on the host" (HostTensors, a GPU stand-in) and predicts what the reference does."""
    inputs = inputs if inputs is not None else [(0, 6), (1, 3)]
    device = torch.device("cpu")
    for seed, n in inputs:
        images = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(100 + seed))
        what = f"predict_digits on {n} images not yet on the device"
        want = ref.predict_digits(_digit_model(seed), images, device)
        got = attempt(fn, _digit_model(seed), images.as_subclass(HostTensor), device)
        broken = attempt(broken_predict_digits, _digit_model(seed), images.as_subclass(HostTensor), device)
        expect_fixed(what, got, want, broken,
                     where="follow the images from the argument to the model call: which tensor does the model "
                           "actually receive, and where is it? Compare what Module.to and Tensor.to do",
                     bug="images.to(device) returns a moved copy and leaves `images` where it was (unlike "
                         "model.to(device), which moves the module in place); the copy is thrown away. Keep it: "
                         "images = images.to(device)",
                     differs=_tensor(what))
    passed("predict_digits", len(inputs))


# ---------------------------------------------------------------- 2. a layer of the wrong size


def _differs_between_calls(model: nn.Module, images: torch.Tensor) -> bool:
    """Two calls on the same batch give different outputs (a layer made anew in forward, or randomness)."""
    with torch.no_grad():
        first, second = attempt(model, images, seed=1), attempt(model, images, seed=2)
    return first.error is None and second.error is None and not same_value(first.value, second.value)


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
        got = attempt(model, images)
        broken = attempt(lambda x: BrokenSmallCNN()(x), images, seed=seed)
        if got.error is not None or not same_value(got.value, want):
            expect_fixed(what, got, want, broken, where=where_size,
                         bug="the classifier expects 16 * 7 * 7 inputs, but the second convolution has no padding, "
                             "so the features are 16 x 6 x 6. Give nn.Linear the size that arrives",
                         same=lambda a, b: isinstance(a, torch.Tensor) and a.shape == b.shape,
                         differs=_tensor(what))
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
                              mistake="the convolutions were changed to fit the classifier; the task asks for the "
                                      "classifier to fit the convolutions")
        if _differs_between_calls(model, images):
            raise failure(f"{what} runs now, but two calls on the same batch give different outputs",
                          where="look for anything in forward that is new at every call",
                          mistake="a layer created inside forward gets new random weights at every call and is "
                                  "not part of the model's parameters (nothing would train it): create every layer "
                                  "in __init__")
        try:
            model.load_state_dict(reference.state_dict())
        except (RuntimeError, KeyError) as error:
            raise failure(f"{what} runs now, but the designed network's weights do not fit its layers: "
                          f"{_state_dict_problem(error)}",
                          where="compare your layers (their names and sizes) with the program you were given; "
                                "the task changes only the classifier's input size") from None
        with torch.no_grad():
            got_same_weights = attempt(model, images)
        if got_same_weights.error is not None or not same_value(got_same_weights.value, want):
            raise failure(f"{what} runs now, but with the designed network's weights loaded its output differs "
                          "from the designed network's",
                          where="compare forward, step by step, with the program you were given")
    passed("SmallCNN", len(inputs))


def _loss_value(value: Any) -> str:
    """A one-number tensor as its number, anything else described."""
    return f"{value.item():.6g}" if isinstance(value, torch.Tensor) and value.numel() == 1 else describe(value)


def _state_dict_problem(error: Exception) -> str:
    """The first specific line of a load_state_dict error (size mismatch, missing or unexpected key)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    specific = [line for line in lines if line.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    return (specific or lines or [type(error).__name__])[0][:220]


# ---------------------------------------------------------------- 3. cross-entropy targets from a table


def check_loss_from_table(fn: Callable[..., torch.Tensor], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """A loss tensor (with its graph) equal to cross-entropy against the column's labels 1..10 as indices 0..9."""
    inputs = inputs if inputs is not None else [(0, 5), (1, 12)]
    for seed, n in inputs:
        g = torch.Generator().manual_seed(300 + seed)
        logits = torch.randn(n, 10, generator=g).requires_grad_()
        numbers = torch.randint(1, 11, (n,), generator=g)
        numbers[0], numbers[-1] = 10, 1  # both ends of the table's numbering
        column = numbers.float().unsqueeze(1)
        what = f"loss_from_table(logits [{n}, 10], label_column [{n}, 1] float holding {numbers.tolist()})"
        want = ref.loss_from_table(logits, column)
        got = attempt(fn, logits, column.clone())  # call's rules: the caller's column comes back unchanged
        broken = attempt(broken_loss_from_table, logits, column.clone())
        expect_fixed(what, got, want, broken,
                     where="print the shape, dtype and values of the labels as they reach cross_entropy, and compare "
                           "them with what it expects: one class index per sample, 0 to 9",
                     bug="cross_entropy wants a 1-D tensor of int64 class indices from 0 to 9; the table gives an "
                         "[N, 1] float column numbered 1 to 10. Squeeze it to [N], convert it with .long() and "
                         "shift it down by one",
                     symptom=lambda got, want: f"{what} returns {_loss_value(got)}, expected {want.item():.6g}",
                     mistakes=[
                         Mistake("clamping moves label 10 onto class 9 and leaves every other label off by one: "
                                 "the table's numbers are the class indices plus one",
                                 lambda: F.cross_entropy(logits, numbers.clamp(max=9))),
                         Mistake("% 10 turns label 10 into class 0 and leaves every other label off by one: "
                                 "the table's numbers are the class indices plus one",
                                 lambda: F.cross_entropy(logits, numbers % 10)),
                     ],
                     hints={"multi-target": "the labels still have a second dimension, [N, 1]: cross_entropy "
                                            "wants shape [N]",
                            "target dtype": "cross_entropy wants the class indices as int64 (torch.long); the "
                                            "message says which dtype arrived",
                            "out of bounds": "a label is outside 0..9: the class indices of 10 outputs run from 0 "
                                             "to 9, and the table numbers them from 1"},
                     differs=_tensor(what))
        if not got.value.requires_grad:
            raise failure(f"{what} returns a loss that backward() cannot follow (requires_grad=False)",
                          where="look for detach(), .item() or no_grad between the loss and the return",
                          mistake="return the loss tensor itself, with its graph")
    passed("loss_from_table", len(inputs))


# ---------------------------------------------------------------- 4. an in-place change autograd needed


def _forward_backward(block: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """Output, input gradient and parameter gradients of a weighted sum of ``block(x)``."""
    x = x.clone().requires_grad_()
    out = block(x)
    weights = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out * weights).sum().backward()
    return {"output": out.detach(), "input grad": x.grad,
            "parameter grads": {name: p.grad for name, p in block.named_parameters()}}


def _no_gradient(name: str, reference: dict) -> Callable[[Any], bool]:
    def matches(got: Any) -> bool:
        grads = got["parameter grads"]
        return grads.get(name) is None and reference["parameter grads"].get(name) is not None
    return matches


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
            return (f"{what}: the output is right, but {', '.join(missing)} get no gradient" if missing
                    else f"{what}: the output or the gradients differ from x + sigmoid(gate(x)) * linear(x)'s")

        # the check's own backward fills the blocks' .grad: that is how it reads the gradients
        expect_fixed(what, attempt(_forward_backward, block, x, allow=Allow(changed=(block,), modes=True)), want,
                     attempt(_forward_backward, broken_block, x, allow=Allow(changed=(broken_block,), modes=True)),
                     where="the message names the operation whose saved tensor changed (its backward, e.g. "
                           "SigmoidBackward0): find which line changes that operation's result afterwards",
                     bug="h *= ... overwrites the output of sigmoid, which sigmoid's backward needs. Compute the "
                         "product as a new tensor (h = h * ...), so the saved one stays as it was",
                     symptom=grads_symptom,
                     mistakes=[Mistake("detach() (or no_grad) cut sigmoid out of the graph: that hides the error "
                                       "and the gate no longer learns. Compute the product as a new tensor instead",
                                       matches=_no_gradient("gate.weight", want))],
                     differs=lambda got, expected: _differs_grads(what, got, expected))
    passed("GatedBlock", len(inputs))


def _differs_grads(what: str, got: dict, want: dict) -> None:
    if not same_value(got["output"], want["output"]):
        raise failure(f"{what}: the output differs from x + sigmoid(gate(x)) * linear(x)",
                      where="compare each operation of forward with the formula")
    raise failure(f"{what}: the output is right but the gradients differ",
                  where="look for detach(), no_grad or a copy without a graph inside forward")


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
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    loader = DataLoader(list(zip(x, y)), batch_size=case.batch_size)
    # task: the loop trains the model it is given (in place) and returns the losses
    outcome = attempt(fn, model, loader, case.epochs, case.lr, seed=case.seed,
                      allow=Allow(changed=(model,), global_rng=True))
    if outcome.error is None:
        outcome.value = {"losses": outcome.value, "weights": _weights(model)}
    return outcome


def _zero_grad_late(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
            losses.append(loss.item())
    return losses


def _no_zero_grad(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def check_fit(fn: Callable[..., list[float]], inputs: Sequence[FitCase] | None = None) -> None:
    """The weights after training and the logged losses equal the reference's."""
    inputs = inputs if inputs is not None else [FitCase(0), FitCase(1, 20, 5, 3, 0.2)]
    for case in inputs:
        steps = math.ceil(case.n / case.batch_size)
        what = (f"fit for {case.epochs} epochs of {steps} batches (lr={case.lr})")
        want = _fit_run(ref.fit, case).value

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
            if same_value(got["weights"], expected["weights"]):
                raise failure(f"{what}: the weights after training are right, but it logs {_short(losses, 8)}, "
                              f"expected {_short(expected['losses'], 8)}",
                              where="look at what is appended to the list, and when")
            raise failure(losses_symptom(got, expected) + ", and the weights after training differ",
                          where="compare, line by line, what happens in one step with what should: which "
                                "gradients does each step apply?")

        expect_fixed(what, _fit_run(fn, case), want, _fit_run(broken_fit, case),
                     where="the first step is right and the later ones are not: look at what each step starts "
                           "from. How often does each line of the loop run?",
                     bug="optimizer.zero_grad() runs once per epoch, so within an epoch backward() adds every "
                         "batch's gradient to the earlier ones and each step applies them all again. Zero the "
                         "gradients at every step, before backward()",
                     symptom=losses_symptom,
                     mistakes=[
                         Mistake("zero_grad() runs between backward() and step(), so every step applies zero "
                                 "gradients and the weights never change. Zero them before backward()",
                                 lambda: _fit_run(_zero_grad_late, case).value),
                         Mistake("the gradients are never zeroed: each step applies the sum of every gradient so "
                                 "far. Zero them at every step, before backward()",
                                 lambda: _fit_run(_no_zero_grad, case).value),
                     ],
                     differs=differs)
    passed("fit", len(inputs))


# ---------------------------------------------------------------- 6. evaluation in training mode (silent)


def _eval_setup(seed: int, n: int) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A model with batch norm and dropout whose running statistics are not the initial ones, in training mode."""
    g = torch.Generator().manual_seed(700 + seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
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
        expect_fixed(what, got, want, broken,
                     where="dropout and batch norm each keep their own training flag: after the line meant to "
                           "switch the mode, print each submodule's .training",
                     bug="model.training = False sets the flag of the outer module only; Dropout and BatchNorm1d "
                         "read their own, so they still drop units and use the batch's statistics. model.eval() "
                         "sets every submodule's flag",
                     symptom=accuracy_symptom,
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=_number(what))
        left = [name for name, m in model.named_modules() if m.training]
        if left:
            raise failure(f"{what}: the accuracy is right, but afterwards these submodules are in training mode: "
                          f"{', '.join(n or 'the model' for n in left)}",
                          where="the task leaves the model in eval mode; look at what runs after the predictions")
    passed("accuracy", len(inputs))


# ---------------------------------------------------------------- 7. a shuffled test set (silent)


class Digits(Dataset):
    """(features, int label) pairs, as torchvision's MNIST returns (image, int)."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.features[index], int(self.labels[index])


def _test_setup(seed: int, n: int) -> tuple[nn.Module, Digits]:
    g = torch.Generator().manual_seed(800 + seed)
    torch.manual_seed(seed)
    model = nn.Linear(8, 4)
    features = torch.randn(n, 8, generator=g)
    with torch.no_grad():
        labels = model(features).argmax(dim=1)
    labels[::5] = (labels[::5] + 1) % 4  # about 80% right
    return model, Digits(features, labels)


def check_dataset_accuracy(fn: Callable[..., float], inputs: Sequence[tuple[int, int, int]] | None = None) -> None:
    """The accuracy over the dataset, predictions compared with the labels of the same samples."""
    inputs = inputs if inputs is not None else [(0, 30, 8), (1, 21, 5)]
    for seed, n, batch_size in inputs:
        what = f"dataset_accuracy on {n} samples, batch_size={batch_size}"
        model, dataset = _test_setup(seed, n)
        want = ref.dataset_accuracy(copy.deepcopy(model), dataset, batch_size)
        got = attempt(fn, model, dataset, batch_size, seed=seed)
        broken = attempt(broken_dataset_accuracy, copy.deepcopy(model), dataset, batch_size, seed=seed)
        expect_fixed(what, got, want, broken,
                     where="take one sample, find its prediction and the label it is compared with: are they "
                           "the same sample's?",
                     bug="every pass over a shuffle=True loader draws a new order: the predictions come from one "
                         "pass and the labels from another, so most comparisons pair a prediction with another "
                         "sample's label. Evaluate with shuffle=False, or compare each batch's predictions with "
                         "that batch's labels",
                     symptom=lambda value, expected: (
                         f"{what} returns {value:.3f} for a model whose predictions agree with {expected:.3f} of "
                         "the labels (sample by sample)") if isinstance(value, float) else
                     f"{what} returns {describe(value)}, expected {expected:.3f}",
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=_number(what))
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


def _three_bug_setup(case: TrainCase) -> tuple[nn.Module, TensorDataset, TensorDataset]:
    """A small classifier with dropout and batch norm, three learnable classes, and a test set unlike a batch of training data."""
    g = torch.Generator().manual_seed(900 + case.seed)
    x = torch.randn(case.n_train, 6, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    test_x = torch.randn(case.n_test, 6, generator=g) * 0.7 + 1.0  # shifted: a test batch's statistics are not the running ones
    test_y = (test_x[:, 0] > 0).long() + (test_x[:, 1] > 0.5).long()
    torch.manual_seed(case.seed)
    model = nn.Sequential(nn.Linear(6, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    return model, TensorDataset(x, y), TensorDataset(test_x, test_y)


def _eval_accuracy(model: nn.Module, test_set: TensorDataset) -> float:
    """The accuracy of a copy of ``model`` in eval mode: what the program should report for the model it trained."""
    model = copy.deepcopy(model).eval()
    x, y = test_set.tensors
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def _parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


Problem = tuple[str, str | None, str | None]  # symptom, where to look, the named mistake


def _three_bug_problems(fn: Callable[..., Any], case: TrainCase) -> tuple[dict[str, Problem], Exception | None]:
    """Run the learner's train_and_evaluate once on ``case``; what each misbehaving part shows, and an error raised."""
    steps = case.epochs * math.ceil(case.n_train / 8)
    what = (f"train_and_evaluate for {case.epochs} epochs of {case.n_train} samples (lr={case.lr}), "
            f"then {case.n_test} test samples")
    model, train_set, test_set = _three_bug_setup(case)
    reference_model = copy.deepcopy(model)
    trains = Allow(changed=(model, reference_model), global_rng=True)  # task: trains the model it is given
    want_history, _ = attempt(ref.train_and_evaluate, reference_model, train_set, test_set, case.epochs, case.lr,
                              seed=case.seed, allow=trains).value
    got = attempt(fn, model, train_set, test_set, case.epochs, case.lr, seed=case.seed, allow=trains)
    if got.error is not None:
        return {part: (f"{what} raises {error_line(got.error)}", None, None) for part in PARTS}, got.error
    result = got.value
    if not (isinstance(result, tuple) and len(result) == 2):
        return {part: (f"{what} returns {describe(result)}, expected a pair (history, accuracy)", None, None)
                for part in PARTS}, None
    history, accuracy = result
    problems: dict[str, Problem] = {}
    # training: the parameters after training, whatever the history and the evaluation do
    got_weights, want_weights = _parameters(model), _parameters(reference_model)
    if not same_value(got_weights, want_weights):
        initial = _parameters(_three_bug_setup(case)[0])
        moved = any(not same_value(v, initial[k]) for k, v in got_weights.items())
        logged = isinstance(history, list) and history and all(isinstance(v, (float, torch.Tensor)) for v in history)
        last = [float(v.detach()) if isinstance(v, torch.Tensor) else v for v in history[-3:]] if logged else []
        problems["training"] = (
            f"{what}: the weights after training differ from a correct training's"
            + ("" if moved else " (they did not change at all)")
            + (f"; its loss over the last 3 steps is {_short(last)}, where a correct training reaches "
               f"{_short(want_history[-3:])}" if logged else ""),
            "the loss does not get low: compare what the training step feeds into cross_entropy with what "
            "cross_entropy expects",
            "cross_entropy applies log-softmax itself and wants raw logits; softmax before it squashes them, so "
            "the loss cannot go low and the gradients are tiny. Pass the model's output to it directly")
    # evaluation: the accuracy reported for the model as the program left it, measured in eval mode
    expected = _eval_accuracy(model, test_set)
    if not (isinstance(accuracy, float) and same_value(accuracy, expected)):
        shown = f"{accuracy:.4f}" if isinstance(accuracy, float) else describe(accuracy)
        problems["evaluation"] = (
            f"{what} reports the test accuracy {shown}; the model it trained, evaluated in eval mode, "
            f"scores {expected:.4f}",
            "which mode is the model in while it is evaluated? (it has dropout and batch norm)",
            "the model is evaluated in training mode: dropout drops units and batch norm uses the test batch's "
            "statistics. Call model.eval() before evaluating")
    # history: one Python float per step
    if not (isinstance(history, list) and len(history) == steps and all(type(v) is float for v in history)):
        kept = [v for v in history if isinstance(v, torch.Tensor)] if isinstance(history, list) else []
        graphs = sum(1 for v in kept if v.grad_fn is not None)
        count = f"{len(history)} items" if isinstance(history, list) else describe(history)
        problems["history"] = (
            f"{what} returns a history of {count}, expected {steps} Python floats (one per step)"
            + (f"; {graphs} of them are tensors that each keep their step's whole graph alive" if graphs else ""),
            "what is appended to the history at each step, and what does it hold on to?",
            "a loss tensor keeps its graph and every activation saved for backward, so memory grows with every "
            "step; loss.item() gives the number alone")
    return problems, None


def check_train_and_evaluate(fn: Callable[..., Any], part: str | None = None,
                             inputs: Sequence[TrainCase] | None = None) -> None:
    """Each part of train_and_evaluate by its behaviour: training (the weights), evaluation (the accuracy reported
    for the trained model in eval mode), history (one Python float per step). ``part=None`` checks all three."""
    parts = PARTS if part is None else (part,)
    inputs = inputs if inputs is not None else [TrainCase(0), TrainCase(1, 40, 50, 4, 0.2)]
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
