"""Lesson 09 Debugging: the answer key, the fixed version of each broken program.

Each function or class here is a broken program of lesson 09 with its one bug
fixed and nothing else changed; helpers.checks.debugging keeps the broken twins.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


def predict_digits(model: nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Predicted class of each image, computed on ``device``, returned on the CPU."""
    model.to(device)
    images = images.to(device)  # the fix: Tensor.to returns a moved copy; keep it
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).cpu()


class SmallCNN(nn.Module):
    """Two convolution blocks and a linear classifier for 28 x 28 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 28 -> 28 -> 14
            nn.Conv2d(8, 16, kernel_size=3), nn.ReLU(), nn.MaxPool2d(2),             # 14 -> 12 -> 6
        )
        self.classifier = nn.Linear(16 * 6 * 6, 10)  # the fix: 16 channels of 6 x 6, not 7 x 7

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


def loss_from_table(logits: torch.Tensor, label_column: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [N, 10] against the labels of a table (see the task)."""
    labels = label_column.squeeze(1).long() - 1  # the fix: a 1-D tensor of int64 class indices 0..9
    return F.cross_entropy(logits, labels)


class GatedBlock(nn.Module):
    """A gated residual block: x + sigmoid(gate(x)) * linear(x)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.gate(x))
        h = h * self.linear(x)  # the fix: a new tensor; sigmoid's backward needs its output unchanged
        return h + x


def fit(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """Train ``model`` with SGD and cross-entropy; return the loss of every step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()  # the fix (was once per epoch): each step starts from zero gradients
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    model.eval()  # the fix (was model.training = False): sets every submodule's flag
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def dataset_accuracy(model: nn.Module, test_set: Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)  # the fix: one order for every pass
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.cat([labels for _, labels in loader])
    return (predictions == labels).float().mean().item()


def train_and_evaluate(model: nn.Module, train_set: Dataset, test_set: Dataset,
                       epochs: int, lr: float) -> tuple[list[float], float]:
    """Train ``model`` in place; return the loss of every step and the accuracy on ``test_set``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            outputs = model(inputs)  # fix 1: raw logits; cross_entropy applies log-softmax itself
            loss = F.cross_entropy(outputs, targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())  # fix 2: the number, not the tensor that keeps its graph
    model.eval()  # fix 3: dropout off, batch norm with its running statistics
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)
