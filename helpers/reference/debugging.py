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
    model = model.to(device)
    model.eval()
    with torch.no_grad():
        logits = model(images.to(device))  # the fix: the images go where the model is
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
    """Mean cross-entropy of ``logits`` [N, C] against labels read from a table as a [N, 1] float column."""
    labels = label_column.squeeze(1).long()  # the fix: class indices are a 1-D tensor of integers
    return F.cross_entropy(logits, labels)


def loss_with_file_labels(logits: torch.Tensor, file_labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy for labels numbered 1 to 10 in the data file (class 1 is the digit 0)."""
    return F.cross_entropy(logits, file_labels - 1)  # the fix: class indices run from 0 to 9


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
            optimizer.zero_grad()  # the fix: each step starts from zero gradients
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    model.eval()  # the fix: dropout off, batch norm uses its running statistics
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def dataset_accuracy(model: nn.Module, test_set: Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)  # the fix: the dataset's order
    model.eval()
    predictions = []
    with torch.no_grad():
        for images, _ in loader:
            predictions.append(model(images).argmax(dim=1))
    labels = torch.tensor([label for _, label in test_set])
    return (torch.cat(predictions) == labels).float().mean().item()
