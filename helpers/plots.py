"""The few plots the lessons draw, with matplotlib."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch


def show_images(images: torch.Tensor, labels: Sequence[int] | torch.Tensor | None = None, ncols: int = 8):
    """Show a batch of 1-channel images ``[N, 1, H, W]`` or ``[N, H, W]`` in a grid.

    Returns:
        The matplotlib Figure (so a notebook can save or close it).
    """
    images = images.detach().cpu()
    if images.dim() == 4:
        images = images[:, 0]
    if images.dim() != 3:
        raise ValueError(f"expected images of shape [N, H, W] or [N, 1, H, W], got {list(images.shape)}")
    n = len(images)
    nrows = max(1, -(-n // ncols))
    fig, axes = plt.subplots(nrows, min(n, ncols), figsize=(1.2 * min(n, ncols), 1.4 * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < n:
            ax.imshow(images[i], cmap="gray")
            if labels is not None:
                ax.set_title(str(int(labels[i])), fontsize=9)
    fig.tight_layout()
    return fig


def plot_curves(curves: Mapping[str, Sequence[float]], xlabel: str = "epoch", title: str = ""):
    """Plot named curves (e.g. {"train loss": [...], "test loss": [...]}) on one axis."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), list(values), marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
