"""Lesson 05 Training and evaluation: the answer key."""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


def to_class_targets(one_hot: torch.Tensor) -> torch.Tensor:
    """``[N, C]`` one-hot (or probability) rows to the ``[N]`` int64 class indices CrossEntropyLoss expects."""
    return one_hot.argmax(dim=1)


def binary_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of raw scores ``logits`` against 0/1 integer ``labels`` (same shape)."""
    return nn.BCEWithLogitsLoss()(logits, labels.float())


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction (0..1) of rows of ``[N, C]`` logits whose largest score is at the target class."""
    return (logits.argmax(dim=1) == targets).float().mean().item()


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
) -> float:
    """Train ``model`` for one pass over ``loader``; return the mean loss per sample.

    Steps:
        1. Put the model in training mode (dropout on, batch norm updating).
        2. For each batch: move it to ``device``, zero the gradients, forward,
           loss, backward, optimizer step.
        3. Add ``loss.item() * batch_size`` to a running total (a float, not a tensor).
        4. Return the total divided by the number of samples.
    """
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def evaluate(
    model: nn.Module, loader: Iterable, loss_fn: nn.Module, device: torch.device | str
) -> tuple[float, float]:
    """Mean loss per sample and accuracy of ``model`` over ``loader``, without training it.

    Steps:
        1. Put the model in evaluation mode (dropout off, batch norm frozen).
        2. Inside ``torch.no_grad()``, run every batch and sum
           ``loss.item() * batch_size`` and the number of correct predictions.
        3. Divide both sums by the number of samples, so a smaller last batch
           counts for exactly its share.
    """
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total_loss += loss_fn(logits, targets).item() * len(targets)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total_loss / count, correct / count


def fit(
    model: nn.Module,
    loader: Iterable,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    device: torch.device | str,
    epochs: int = 1,
    max_norm: float = 1.0,
) -> list[float]:
    """Train for ``epochs`` with a per-batch schedule and gradient clipping; return every batch's loss.

    Steps:
        1. Training mode; then for each epoch and each batch:
        2. zero_grad, forward, loss, backward;
        3. clip the gradients' total norm to ``max_norm`` (after backward, before step);
        4. optimizer step, then scheduler step (OneCycleLR counts batches, not epochs);
        5. append ``loss.item()`` to the history.
    """
    model.train()
    history: list[float] = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
    return history


def make_optimizer(kind: str, params, lr: float) -> torch.optim.Optimizer:
    """The course's three optimizers: "sgd" (momentum 0.9), "adam", "adamw" (decoupled weight decay 0.01)."""
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    raise ValueError(f"unknown optimizer kind {kind!r}")


def classify(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Predicted digits for CPU ``images`` with a model on any device; the answer comes back on the CPU.

    Steps: 1. the model's device, from its parameters; 2. eval mode and no_grad;
    3. move the images there, run the model, argmax over the classes; 4. back to the CPU.
    """
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1).cpu()


def train_spirals(model: nn.Module, train_set) -> None:
    """Train lesson 05's SpiralNet in place to 98%+ held-out accuracy: AdamW with a one-cycle schedule, 40 epochs."""
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    epochs = 40
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, epochs=epochs, steps_per_epoch=len(loader))
    fit(model, loader, nn.CrossEntropyLoss(), optimizer, scheduler, torch.device("cpu"), epochs, max_norm=1.0)
