"""Lesson 04 Defining models: the answer key.

``MnistNet`` is also the network later lessons train: layers ``conv1``,
``conv2``, ``fc1``, ``fc2``; ``forward`` returns raw logits of shape ``[N, 10]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LeNet(nn.Module):
    """LeNet-5 for one-channel 32x32 images: 1 -> 6 -> 16 channels, then 400 -> 120 -> 84 -> 10."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 1, 32, 32]`` images to ``[N, 10]`` logits."""
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # [N, 6, 14, 14]
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # [N, 16, 5, 5]
        x = torch.flatten(x, 1)                     # [N, 400]
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class MnistNet(nn.Module):
    """The MNIST network: 1 -> 20 -> 50 channels (5x5 kernels), then 4*4*50 -> 500 -> 10."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, kernel_size=5)
        self.conv2 = nn.Conv2d(20, 50, kernel_size=5)
        self.fc1 = nn.Linear(4 * 4 * 50, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 1, 28, 28]`` images to ``[N, 10]`` raw logits (no softmax)."""
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # [N, 20, 12, 12]
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # [N, 50, 4, 4]
        x = torch.flatten(x, 1)                     # [N, 800]
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``model`` (only those with requires_grad if ``trainable_only``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def init_weights(module: nn.Module) -> None:
    """For ``model.apply``: Kaiming-normal weights and zero biases for Conv2d and Linear layers."""
    if isinstance(module, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def label_smoothing_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, smoothing: float = 0.1, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy against smoothed targets ``(1 - smoothing) * one_hot + smoothing / C``.

    Equals ``F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction=reduction)``.
    """
    log_probs = F.log_softmax(logits, dim=1)
    nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
    uniform = -log_probs.mean(dim=1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


class LabelSmoothingLoss(nn.Module):
    """The same loss as a module: configure once, then call ``loss_fn(logits, targets)``."""

    def __init__(self, smoothing: float = 0.1, reduction: str = "mean") -> None:
        super().__init__()
        self.smoothing = smoothing
        self.reduction = reduction

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return label_smoothing_cross_entropy(logits, targets, self.smoothing, self.reduction)


class ConvBlockNet(nn.Module):
    """A small custom module: conv (no bias) -> batch norm -> ReLU -> pool -> linear, on 28x28 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


def sequential_version() -> nn.Sequential:
    """``ConvBlockNet`` as an ``nn.Sequential``: same layers, same order, same output."""
    return nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 14 * 14, 10),
    )


def predict(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Predicted class index for each image, ``[N]`` int64, with dropout and batch norm in eval mode."""
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1)


def build_classifier(in_channels: int, num_classes: int) -> nn.Module:
    """A small batch-normalised CNN for ``[N, in_channels, 28, 28]`` images: under 10,000 parameters, no wasted bias."""
    return nn.Sequential(
        nn.Conv2d(in_channels, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 7 * 7, num_classes),
    )
