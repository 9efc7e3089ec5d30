"""Lesson 10 Capstone: the answer key, including a submission that reaches 99% in the CPU budget.

:func:`build_and_train` is the reference capstone: a small convolutional
network with batch norm, trained with light augmentation (random shifts of up
to 2 pixels), AdamW, a one-cycle schedule and label smoothing for a fixed 6
epochs. On the course's 2-core CPU with one PyTorch thread it trains on 7,000
digits in about 30 s and scores about 99.3% on the offline held-out digits.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, random_split

from helpers.data import MNIST_MEAN, MNIST_STD

# The value of a blank (black) pixel after Normalize: the background to fill shifted-in borders with.
BACKGROUND = (0.0 - MNIST_MEAN) / MNIST_STD


def make_validation_split(dataset: Dataset, val_size: int, seed: int) -> tuple[Subset, Subset]:
    """Split ``dataset`` at random into (train, validation) parts, the same way for the same ``seed``.

    The split draws from its own generator, so it neither depends on nor changes
    the global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    train, val = random_split(dataset, [len(dataset) - val_size, val_size], generator=generator)
    return train, val


def stack_dataset(dataset: Dataset, batch_size: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (image, label) pair of ``dataset``, in order, as one image tensor and one int64 label tensor.

    The dataset's transforms run once here; training then indexes tensors, which
    is much faster than converting every image again in every epoch.
    """
    images, labels = [], []
    for batch_images, batch_labels in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        images.append(batch_images)
        labels.append(batch_labels)
    return torch.cat(images), torch.cat(labels).long()


def random_shift(images: torch.Tensor, max_shift: int, fill: float, generator: torch.Generator) -> torch.Tensor:
    """Move each image of a ``[N, C, H, W]`` batch by its own random whole-pixel offset.

    Steps:
        1. Draw a vertical and a horizontal offset per image, each uniform over
           ``-max_shift .. max_shift`` (both ends included), from ``generator``.
        2. Pad every image by ``max_shift`` pixels of ``fill`` on each side.
        3. Crop an ``H x W`` window from each padded image, displaced by its offsets.
    """
    n, _, height, width = images.shape
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    rows = (max_shift - dy)[:, None] + torch.arange(height)  # [N, H]: row r of the result is row r - dy
    cols = (max_shift - dx)[:, None] + torch.arange(width)   # [N, W]
    batch = torch.arange(n)[:, None, None]
    # advanced indexing [N,1,1] x [N,H,1] x [N,1,W] picks an [N, H, W] window per channel
    shifted = padded.permute(1, 0, 2, 3)[:, batch, rows[:, :, None], cols[:, None, :]]
    return shifted.permute(1, 0, 2, 3).contiguous()


def accuracy_on(model: nn.Module, dataset: Dataset, batch_size: int = 500) -> float:
    """Fraction of ``dataset`` that ``model`` classifies correctly, in evaluation mode, without gradients."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(dataset)


def conv_block(in_channels: int, out_channels: int) -> list[nn.Module]:
    """3x3 convolution (no bias: batch norm has its own), batch norm, ReLU."""
    return [nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU()]


def build_model() -> nn.Module:
    """A fresh CNN for ``[N, 1, 28, 28]`` digits that returns ``[N, 10]`` logits (about 65,000 parameters)."""
    return nn.Sequential(
        *conv_block(1, 16),
        *conv_block(16, 32), nn.MaxPool2d(2),   # 28x28 -> 14x14
        *conv_block(32, 64), nn.MaxPool2d(2),   # 14x14 -> 7x7
        *conv_block(64, 64),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(),  # the strongest response of each of the 64 features
        nn.Linear(64, 10),
    )


def build_and_train(
    train_set: Dataset,
    time_budget_s: float,
    epochs: int = 6,
    batch_size: int = 128,
    max_lr: float = 0.01,
    max_shift: int = 2,
    seed: int = 0,
) -> nn.Module:
    """Build a model and train it on ``train_set``; return the trained model.

    The plan is fixed (``epochs`` passes), chosen to take about half of a 60 s
    ``time_budget_s`` on a 2-core CPU with one thread, so the result is the same on every
    run; the budget itself is not consulted. The first weights come from the global
    generator as the caller (the grader) seeded it; ``seed`` seeds a generator of its own
    for the order of the digits and the shifts.

    Steps:
        1. Turn the dataset into two tensors once (``stack_dataset``).
        2. Model in channels-last memory layout (faster convolutions on CPUs),
           AdamW, and a one-cycle schedule stepped every batch.
        3. Every epoch: a new random order; every batch: random shifts of up to
           ``max_shift`` pixels, then the usual five steps, with label smoothing.
    """
    generator = torch.Generator().manual_seed(seed)
    images, labels = stack_dataset(train_set)
    model = build_model().to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, weight_decay=5e-4)
    steps_per_epoch = math.ceil(len(labels) / batch_size)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, epochs=epochs,
                                                    steps_per_epoch=steps_per_epoch)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(labels), batch_size):
            batch = order[start:start + batch_size]
            inputs = random_shift(images[batch], max_shift, BACKGROUND, generator)
            inputs = inputs.contiguous(memory_format=torch.channels_last)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), labels[batch], label_smoothing=0.1)
            loss.backward()
            optimizer.step()
            scheduler.step()
    return model
