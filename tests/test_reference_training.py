"""Unit tests of lesson 05's answer key (helpers.reference.training) and of its checks' side effects."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import training as checks
from helpers.reference import training as ref


def _data(n: int = 30, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()  # 3 learnable classes
    return TensorDataset(x, y)


def _model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


def test_to_class_targets_gives_int64_indices_that_cross_entropy_accepts():
    one_hot = torch.eye(4)[torch.tensor([3, 1, 0])]
    targets = ref.to_class_targets(one_hot)
    assert targets.dtype == torch.int64 and targets.tolist() == [3, 1, 0]
    logits = torch.randn(3, 4)
    assert torch.allclose(nn.functional.cross_entropy(logits, targets), nn.functional.cross_entropy(logits, one_hot))


def test_binary_loss_matches_the_formula():
    logits, labels = torch.tensor([2.0, -1.0, 0.0]), torch.tensor([1, 0, 1])
    p = torch.sigmoid(logits)
    manual = -(labels * p.log() + (1 - labels) * (1 - p).log()).mean()
    assert torch.allclose(ref.binary_loss(logits, labels), manual)


def test_accuracy_is_a_fraction():
    logits = torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [1.0, 0.0]])
    assert ref.accuracy(logits, torch.tensor([1, 0, 0, 1])) == 0.5
    assert isinstance(ref.accuracy(logits, torch.tensor([1, 0, 1, 0])), float)


def test_train_one_epoch_learns_and_returns_the_sample_weighted_mean():
    data = _data()
    model = _model(dropout=0.2).eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    recorded = []

    def loss_fn(logits, targets):
        loss = nn.functional.cross_entropy(logits, targets)
        recorded.append((loss.item(), len(targets)))
        return loss

    loader = DataLoader(data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    first = ref.train_one_epoch(model, loader, loss_fn, optimizer, "cpu")
    assert model.training, "train_one_epoch must leave the model in training mode"
    assert isinstance(first, float)
    assert [size for _, size in recorded] == [8, 8, 8, 6]
    assert math.isclose(first, sum(l * s for l, s in recorded) / 30, rel_tol=1e-6)
    for _ in range(30):
        last = ref.train_one_epoch(model, loader, nn.CrossEntropyLoss(), optimizer, "cpu")
    assert last < first / 2


def test_evaluate_does_not_depend_on_the_batch_size():
    """A mean over samples is the same however the samples are batched; a mean of batch means is not."""
    data, model = _data(23), _model(dropout=0.5)
    whole = ref.evaluate(model, DataLoader(data, batch_size=23), nn.CrossEntropyLoss(), "cpu")
    model.train()
    batched = ref.evaluate(model, DataLoader(data, batch_size=5), nn.CrossEntropyLoss(), "cpu")
    assert not model.training
    assert batched == pytest.approx(whole, rel=1e-5)


def test_evaluate_tracks_no_gradients():
    model = _model()
    grad_modes = []
    model.register_forward_hook(lambda *_: grad_modes.append(torch.is_grad_enabled()))
    ref.evaluate(model, DataLoader(_data(), batch_size=7), nn.CrossEntropyLoss(), "cpu")
    assert grad_modes and not any(grad_modes)
    assert all(p.grad is None for p in model.parameters())


def test_fit_steps_one_cycle_per_batch_and_logs_floats():
    model = _model()
    loader = DataLoader(_data(), batch_size=8)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, epochs=3, steps_per_epoch=len(loader))
    history = ref.fit(model, loader, nn.CrossEntropyLoss(), optimizer, scheduler, "cpu", epochs=3, max_norm=1.0)
    assert len(history) == 3 * len(loader) == scheduler.last_epoch
    assert all(type(value) is float for value in history)


def test_fit_clips_every_update():
    """Plain SGD moves the parameters by lr * (clipped gradient), so each step is at most lr * max_norm long."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    loader = DataLoader(_data(), batch_size=30)
    for _ in range(3):
        before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        ref.fit(model, loader, nn.CrossEntropyLoss(), optimizer, scheduler, "cpu", epochs=1, max_norm=0.01)
        after = torch.cat([p.detach().flatten() for p in model.parameters()])
        assert (after - before).norm() <= 0.5 * 0.01 * (1 + 1e-4)


@pytest.mark.parametrize("run_check", [
    lambda: checks.check_train_one_epoch(ref.train_one_epoch),
    lambda: checks.check_evaluate(ref.evaluate),
    lambda: checks.check_fit_history(ref.fit),
])
def test_checks_leave_the_global_random_state_alone(run_check):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    run_check()
    assert torch.equal(torch.get_rng_state(), before)


def test_train_spirals_fails_a_run_over_the_time_budget(monkeypatch):
    monkeypatch.setattr(checks, "TIME_BUDGET_S", 0.01)
    with pytest.raises(checks.CheckError, match="the budget is"):
        checks.check_train_spirals(ref.train_spirals)


def test_spirals_are_learnable_but_not_by_chance():
    """The task's 98% is reachable (the reference) and far above what an untrained model gets."""
    torch.manual_seed(0)
    untrained = checks.SpiralNet()
    assert checks.spiral_accuracy(untrained, checks.make_spirals(2000, 100)) < 0.6
    assert untrained.training  # spiral_accuracy hands the model back in the mode it came in


@pytest.mark.parametrize("bug", ["scheduler_first", "per_epoch", "no_clipping", "clip_each"])
def test_fit_history_is_graded_apart_from_the_updates(bug):
    """One bug, one cell: a fit whose only mistake is in its updates keeps the history cell's point."""
    variant = {"scheduler_first": checks._fit_variant(scheduler_first=True),
               "per_epoch": checks._fit_variant(per_epoch=True),
               "no_clipping": checks._fit_variant(clip="none"),
               "clip_each": checks._fit_variant(clip="each")}[bug]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checks.check_fit_history(variant)
