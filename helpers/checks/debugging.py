"""Lesson 09 Debugging: checks for the fix-the-bug exercises, and the broken programs themselves.

Every exercise hands the learner a broken program (the ``broken_*`` twins below
are those programs, verbatim). A check runs three versions on the same inputs
and seeds: the learner's, the reference (helpers.reference.debugging) and the
broken twin. :func:`expect_fixed` then says what is true:

- the learner's raises the error the broken one raised: the original bug is still there;
- it raises another error: which one (the learner's own lines follow the message);
- it runs and equals the reference: fixed;
- it runs and equals the broken twin (a silent bug): still no exception, and which bug it still has;
- it matches a known wrong fix: which one;
- otherwise: what differs, without guessing a cause.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from helpers.checks import (CheckError, HostTensor, Mistake, NotMovedError, describe, expect_mode, expect_tensor,
                           passed, same_value)
from helpers.reference import debugging as ref

# ---------------------------------------------------------------- the broken programs (the starters, verbatim)


def broken_predict_digits(model: nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Predicted class of each image, computed on ``device``, returned on the CPU."""
    model = model.to(device)
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
    """Mean cross-entropy of ``logits`` [N, C] against labels read from a table as a [N, 1] float column."""
    return F.cross_entropy(logits, label_column)


def broken_loss_with_file_labels(logits: torch.Tensor, file_labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy for labels numbered 1 to 10 in the data file (class 1 is the digit 0)."""
    return F.cross_entropy(logits, file_labels)


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
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def broken_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def broken_dataset_accuracy(model: nn.Module, test_set: Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=True)
    model.eval()
    predictions = []
    with torch.no_grad():
        for images, _ in loader:
            predictions.append(model(images).argmax(dim=1))
    labels = torch.tensor([label for _, label in test_set])
    return (torch.cat(predictions) == labels).float().mean().item()


BROKEN = {
    "ex_predict_digits": broken_predict_digits,
    "ex_small_cnn": BrokenSmallCNN,
    "ex_loss_from_table": broken_loss_from_table,
    "ex_file_labels": broken_loss_with_file_labels,
    "ex_gated_block": BrokenGatedBlock,
    "ex_fit": broken_fit,
    "ex_accuracy": broken_accuracy,
    "ex_dataset_accuracy": broken_dataset_accuracy,
}

# ---------------------------------------------------------------- the mechanism: compare with the reference and the broken twin


@dataclass
class Outcome:
    """What running a program gave: a value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None


def attempt(fn: Callable[..., Any], *args: Any, seed: int | None = None, **kwargs: Any) -> Outcome:
    """Run ``fn`` (after ``torch.manual_seed(seed)`` when given, on a forked random state) and record what happened."""
    if not callable(fn):
        raise CheckError(f"expected a function or a class, got {describe(fn)}: pass the function itself, not its result")
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        try:
            return Outcome(value=fn(*args, **kwargs))
        except NotImplementedError:
            raise CheckError(f"{getattr(fn, '__name__', 'your code')} is not written yet: "
                             "replace `raise NotImplementedError()` with the fixed program") from None
        except CheckError:
            raise
        except Exception as error:  # the learner's program failed: that is the evidence to read
            return Outcome(error=error)


def error_line(error: BaseException) -> str:
    """``Type: first line of the message``, as the last line of a traceback shows it."""
    if isinstance(error, NotMovedError):  # the course's stand-in for a GPU: say what a GPU would say
        return ("a tensor on the CPU met the model's tensors on the device; on a GPU: RuntimeError: Expected all "
                "tensors to be on the same device")
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
    bug: str,
    same: Callable[[Any, Any], bool] = same_value,
    mistakes: Sequence[Mistake] = (),
    hints: dict[str, str] | None = None,
    differs: Callable[[Any, Any], None] | None = None,
) -> Any:
    """Pass when the learner's program ran and produced ``want``; otherwise raise a message that names what is wrong.

    Args:
        what: the call, in words ("fit on Case(...)").
        got, broken: outcomes of the learner's program and of the broken one on the same inputs and seed.
        want: the reference's result.
        bug: the original bug and its fix, in words ("the gradients are never zeroed: ...").
        same: how to compare results.
        mistakes: known wrong fixes, recognised from the learner's result.
        hints: for an error the learner's program raises that the broken one did not, a hint
            per fragment of the message ("Long" -> "class indices must be integers").
        differs: raises the message for a result that is simply different (default: a neutral one).
    """
    if got.error is not None:
        line = error_line(got.error)
        if broken.error is not None and same_error(got.error, broken.error):
            raise CheckError(f"{what} still raises the original error ({line}): {bug}") from got.error
        hint = next((h for fragment, h in (hints or {}).items() if fragment in str(got.error)), None)
        raise CheckError(f"{what} raises {line}" + (f": {hint}" if hint else "")) from got.error
    if same(got.value, want):
        return got.value
    if broken.error is None and same(got.value, broken.value):
        raise CheckError(f"{what}: still no exception, but {bug}")
    mistake = next((m for m in mistakes if m.explains(got.value)), None)
    if mistake is not None:
        raise CheckError(f"{what}: {mistake.message}")
    if differs is not None:
        differs(got.value, want)
    raise CheckError(f"{what} runs, but its result differs from the fixed program's: got {describe(got.value)}, "
                     f"expected {describe(want)}")


def _number(what: str) -> Callable[[Any, Any], None]:
    """A ``differs`` for results that must be Python numbers."""
    def differs(got: Any, want: float) -> None:
        if isinstance(got, torch.Tensor):
            raise CheckError(f"{what} should return a Python number, but returns {describe(got)}; use .item()")
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise CheckError(f"{what} should return a number, but returns {describe(got)}")
        raise CheckError(f"{what} returns {got:.6g}, but the fixed program gives {want:.6g}")
    return differs


def _tensor(what: str, given: torch.Tensor | None = None) -> Callable[[Any, Any], None]:
    """A ``differs`` that lets expect_tensor describe a wrong tensor (shape, dtype, values)."""
    def differs(got: Any, want: torch.Tensor) -> None:
        expect_tensor(got, want, what=what, given=given)
    return differs


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


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
        what = f"predict_digits on {n} images (seed {seed})"
        want = ref.predict_digits(_digit_model(seed), images, device)
        got = attempt(fn, _digit_model(seed), images.as_subclass(HostTensor), device)
        broken = attempt(broken_predict_digits, _digit_model(seed), images.as_subclass(HostTensor), device)
        expect_fixed(what, got, want, broken,
                     bug="the images never move to the device the model is on. Call images.to(device) before "
                         "the model sees them",
                     differs=_tensor(what))
    passed("predict_digits", len(inputs))


# ---------------------------------------------------------------- 2. a layer of the wrong size


def check_small_cnn(cls: type, inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """The model runs on [N, 1, 28, 28] digits and, with the reference's weights, computes what the reference does."""
    inputs = inputs if inputs is not None else [(0, 4), (1, 2)]
    for seed, n in inputs:
        what = f"SmallCNN on a batch of {n} digits"
        images = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(200 + seed))
        torch.manual_seed(seed)
        reference = ref.SmallCNN()
        want = reference(images).detach()
        made = attempt(cls, seed=seed)
        if made.error is not None:
            raise CheckError(f"building SmallCNN() raises {error_line(made.error)}") from made.error
        model = made.value
        if not isinstance(model, nn.Module):
            raise CheckError(f"SmallCNN() should build an nn.Module, but gives {describe(model)}")
        got = attempt(model, images)
        broken = attempt(lambda x: BrokenSmallCNN()(x), images, seed=seed)
        bug = ("the classifier expects 16 * 7 * 7 inputs, but the flattened features have a different size. "
               "Print the shape that reaches the classifier and give nn.Linear that many in_features")
        if got.error is not None or not same_value(got.value, want):
            expect_fixed(what, got, want, broken, bug=bug, same=lambda a, b: isinstance(a, torch.Tensor) and
                         a.shape == b.shape,
                         differs=_tensor(what))
        features = getattr(model, "features", None)
        if isinstance(features, nn.Module):
            with torch.no_grad():
                shape = attempt(features, images)
            designed = reference.features(images)
            if shape.error is None and isinstance(shape.value, torch.Tensor) \
                    and shape.value.shape[1:].numel() != designed.shape[1:].numel():
                raise CheckError(f"{what} runs now, but its convolutions produce features of shape "
                                 f"{list(shape.value.shape)} instead of the designed {list(designed.shape)}: keep the "
                                 "convolutions as they are (padding included) and fix the classifier's in_features")
        try:
            model.load_state_dict(reference.state_dict())
        except (RuntimeError, KeyError) as error:
            raise CheckError(f"{what} runs now, but its layers are not the designed ones (the designed weights do "
                             f"not fit: {_state_dict_problem(error)}). Keep the layers as they are and fix only the "
                             "classifier's in_features") from None
        with torch.no_grad():
            got_same_weights = attempt(model, images)
        if got_same_weights.error is not None or not same_value(got_same_weights.value, want):
            raise CheckError(f"{what} runs now, but with the reference's weights it computes something else: the "
                             "convolutions are as designed (keep their padding); fix only the classifier's in_features")
    passed("SmallCNN", len(inputs))


def _state_dict_problem(error: Exception) -> str:
    """The first specific line of a load_state_dict error (size mismatch, missing or unexpected key)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    specific = [line for line in lines if line.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    return (specific or lines or [type(error).__name__])[0][:220]


# ---------------------------------------------------------------- 3. cross-entropy targets from a table


def check_loss_from_table(fn: Callable[..., torch.Tensor], inputs: Sequence[tuple[int, int, int]] | None = None) -> None:
    """A loss tensor (with its graph) equal to cross-entropy against the column's class indices."""
    inputs = inputs if inputs is not None else [(0, 5, 3), (1, 4, 10)]
    for seed, n, classes in inputs:
        g = torch.Generator().manual_seed(300 + seed)
        logits = torch.randn(n, classes, generator=g).requires_grad_()
        column = torch.randint(0, classes, (n, 1), generator=g).float()
        what = f"loss_from_table(logits [{n}, {classes}], label_column [{n}, 1] float)"
        want = ref.loss_from_table(logits, column)
        got = attempt(fn, logits, column.clone())
        broken = attempt(broken_loss_from_table, logits, column.clone())
        expect_fixed(what, got, want, broken,
                     bug="cross_entropy wants one class index per sample: a 1-D tensor of integers (int64). "
                         "Squeeze the column to shape [N] and convert it with .long()",
                     hints={"multi-target": "the labels still have shape [N, 1]; cross_entropy wants shape [N] "
                                            "(squeeze(1))",
                            "dtype": "the class indices are still floats: convert them with .long()",
                            "Long": "the class indices are still floats: convert them with .long()"},
                     differs=_tensor(what))
        if not got.value.requires_grad:
            raise CheckError(f"{what} returns a loss without a graph (detached or computed under no_grad): "
                             "return the loss tensor itself, so that backward() can follow it")
    passed("loss_from_table", len(inputs))


# ---------------------------------------------------------------- 4. labels out of range


def check_loss_with_file_labels(fn: Callable[..., torch.Tensor],
                                inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """Cross-entropy with the file's labels 1..10 shifted to the class indices 0..9."""
    inputs = inputs if inputs is not None else [(0, 6), (1, 12)]
    for seed, n in inputs:
        g = torch.Generator().manual_seed(400 + seed)
        logits = torch.randn(n, 10, generator=g)
        file_labels = torch.randint(1, 11, (n,), generator=g)
        file_labels[0], file_labels[-1] = 10, 1  # both ends of the file's numbering
        what = f"loss_with_file_labels on {n} samples (labels {file_labels.tolist()})"
        want = ref.loss_with_file_labels(logits, file_labels)
        got = attempt(fn, logits, file_labels.clone())
        broken = attempt(broken_loss_with_file_labels, logits, file_labels.clone())
        expect_fixed(what, got, want, broken,
                     bug="the file numbers the classes 1 to 10, but a model with 10 outputs has the class indices "
                         "0 to 9, so label 10 points past the last output (on a GPU: 'device-side assert "
                         "triggered'). Shift every label down by one",
                     mistakes=[
                         Mistake("clamping moves label 10 onto class 9 and leaves every other label off by one: "
                                 "shift every label down by one instead",
                                 lambda: F.cross_entropy(logits, file_labels.clamp(max=9))),
                         Mistake("% 10 turns label 10 into class 0 and leaves every other label off by one: "
                                 "shift every label down by one instead",
                                 lambda: F.cross_entropy(logits, file_labels % 10)),
                     ],
                     hints={"out of bounds": "a label is still outside 0..9: class indices run from 0 to "
                                             "(number of outputs - 1)"},
                     differs=_tensor(what))
    passed("loss_with_file_labels", len(inputs))


# ---------------------------------------------------------------- 5. an in-place change autograd needed


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
            raise CheckError(f"building GatedBlock({width}) raises {error_line(made.error)}") from made.error
        block = made.value
        if not isinstance(block, nn.Module):
            raise CheckError(f"GatedBlock({width}) should build an nn.Module, but gives {describe(block)}")
        try:
            block.load_state_dict(reference.state_dict())
        except (RuntimeError, KeyError) as error:
            raise CheckError(f"GatedBlock's layers are not the designed ones ({_state_dict_problem(error)}): keep "
                             "self.linear and self.gate as they are and fix forward") from None
        broken_block = BrokenGatedBlock(width)
        broken_block.load_state_dict(reference.state_dict())
        expect_fixed(what, attempt(_forward_backward, block, x), want, attempt(_forward_backward, broken_block, x),
                     bug="h *= ... overwrites the output of sigmoid, which sigmoid's backward needs. Write "
                         "h = h * self.linear(x): a new tensor, and the saved one stays as it was",
                     mistakes=[Mistake("the gate gets no gradient: detach() (or no_grad) cut sigmoid out of the "
                                       "graph, which hides the error instead of fixing it. Compute h * self.linear(x) "
                                       "as a new tensor", matches=_no_gradient("gate.weight", want))],
                     differs=lambda got, expected: _differs_grads(what, got, expected))
    passed("GatedBlock", len(inputs))


def _differs_grads(what: str, got: dict, want: dict) -> None:
    if not same_value(got["output"], want["output"]):
        raise CheckError(f"{what}: the output differs from x + sigmoid(gate(x)) * linear(x)")
    raise CheckError(f"{what}: the output is right but the gradients differ: is part of the computation "
                     "detached or run under no_grad?")


# ---------------------------------------------------------------- 6. a training loop (silent)


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
    outcome = attempt(fn, model, loader, case.epochs, case.lr, seed=case.seed)
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


def _zero_grad_per_epoch(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
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
        what = f"fit on {case}"
        want = _fit_run(ref.fit, case).value

        def differs(got: Any, expected: dict) -> None:
            losses = got["losses"]
            if not isinstance(losses, list) or not all(isinstance(v, float) for v in losses):
                raise CheckError(f"{what} should return a list of Python floats (loss.item() per step), "
                                 f"but returns {describe(losses)}")
            if same_value(got["weights"], expected["weights"]):
                raise CheckError(f"{what}: the weights are right but the logged losses differ: log loss.item() "
                                 "once per step")
            raise CheckError(f"{what} runs, but the weights after training differ from the fixed loop's. Each "
                             "step needs, in order: zero_grad, forward, loss, backward, step")

        expect_fixed(what, _fit_run(fn, case), want, _fit_run(broken_fit, case),
                     bug="your weights are exactly those of a loop that never zeroes the gradients: every step "
                         "also repeats the gradients of all earlier steps, so the model does not follow its loss "
                         "downhill. Are the gradients zeroed each step? Call optimizer.zero_grad() before backward()",
                     mistakes=[
                         Mistake("the weights never change: zero_grad() runs between backward() and step(), so "
                                 "every step applies zero gradients. Zero them before backward()",
                                 lambda: _fit_run(_zero_grad_late, case).value),
                         Mistake("the gradients are zeroed once per epoch, not once per step: within an epoch they "
                                 "still pile up. Call optimizer.zero_grad() inside the batch loop",
                                 lambda: _fit_run(_zero_grad_per_epoch, case).value),
                     ],
                     differs=differs)
    passed("fit", len(inputs))


# ---------------------------------------------------------------- 7. evaluation in training mode (silent)


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
    """The accuracy in eval mode, as a Python float, with the model left in eval mode."""
    inputs = inputs if inputs is not None else [(0, 40), (1, 25)]
    for seed, n in inputs:
        what = f"accuracy on {n} samples (a model with batch norm and dropout, seed {seed})"
        model, images, labels = _eval_setup(seed, n)
        want = ref.accuracy(copy.deepcopy(model), images, labels)
        got = attempt(fn, model, images, labels, seed=seed)
        broken = attempt(broken_accuracy, copy.deepcopy(_eval_setup(seed, n)[0]), images, labels, seed=seed)
        expect_fixed(what, got, want, broken,
                     bug="your accuracy is what the model gives in training mode: dropout still drops units at "
                         "random and batch norm uses the batch's statistics. Call model.eval() before evaluating",
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=_number(what))
        expect_mode(model, False, what)
    passed("accuracy", len(inputs))


# ---------------------------------------------------------------- 8. a shuffled test set (silent)


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
                     bug="your accuracy is what a shuffled loader gives: the predictions come out in a random "
                         "order while the labels are taken in the dataset's order, so most comparisons pair a "
                         "prediction with another sample's label. Evaluate with shuffle=False",
                     same=lambda a, b: isinstance(a, float) and same_value(a, b), differs=_number(what))
    passed("dataset_accuracy", len(inputs))
