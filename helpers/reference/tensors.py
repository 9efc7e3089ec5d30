"""Lesson 01 Tensors: the answer key."""

from __future__ import annotations

import numpy as np
import torch


def make_starter_tensors() -> dict[str, torch.Tensor]:
    """Five tensors made with the creation functions of lesson 01."""
    return {
        "zeros": torch.zeros(2, 3, dtype=torch.float64),
        "identity": torch.eye(3),
        "evens": torch.arange(0, 10, 2),
        "grid": torch.linspace(0, 1, steps=5),
        "sevens": torch.full((2, 2), 7, dtype=torch.int32),
    }


def share_numpy(array: np.ndarray) -> torch.Tensor:
    """A tensor that shares memory with ``array`` (no copy)."""
    return torch.from_numpy(array)


def to_channels_first(images: torch.Tensor) -> torch.Tensor:
    """``[N, H, W, C]`` images to PyTorch's ``[N, C, H, W]`` layout."""
    return images.permute(0, 3, 1, 2)


def flatten_batch(x: torch.Tensor) -> torch.Tensor:
    """``[N, d1, d2, ...]`` to ``[N, d1 * d2 * ...]``, for contiguous or not."""
    return x.flatten(start_dim=1)


def center_columns(x: torch.Tensor) -> torch.Tensor:
    """Subtract each column's mean, so every column of the result averages 0."""
    return x - x.mean(dim=0, keepdim=True)


def pairwise_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[N, D]`` and ``[M, D]`` to the ``[N, M]`` matrix of dot products a[i] . b[j]."""
    return a @ b.T


def positive_values(x: torch.Tensor) -> torch.Tensor:
    """The strictly positive elements of ``x`` as a 1-D tensor, in order."""
    return x[x > 0]


def relu(x: torch.Tensor) -> torch.Tensor:
    """``x`` where it is positive, 0 elsewhere (same shape as ``x``)."""
    return torch.where(x > 0, x, torch.zeros_like(x))


def pick_scores(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``scores[i, labels[i]]`` for each row i of ``[N, C]`` scores."""
    return scores.gather(1, labels.unsqueeze(1)).squeeze(1)


def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``[N]`` class indices to a float32 ``[N, num_classes]`` one-hot matrix."""
    return torch.eye(num_classes)[labels]


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Scale each row of ``[N, D]`` to Euclidean length 1."""
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True)


def batch_to(batch: dict, device: torch.device | str) -> dict:
    """Move every tensor value of ``batch`` to ``device``; keep other values as they are."""
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


def class_means(features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Row c: the mean of the rows of ``[N, D]`` features labelled c (zeros if none); features' dtype and device."""
    classes = torch.arange(num_classes, device=labels.device)
    members = (labels[:, None] == classes).to(features.dtype)  # [N, C]: 1 where example n has class c
    counts = members.sum(dim=0)  # [C]
    return (members.T @ features) / counts.clamp(min=1)[:, None]
