"""Lesson 02 Autograd: the answer key."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn


def mean_square_grad(x: torch.Tensor) -> torch.Tensor:
    """The gradient of ``out = mean(3 * (x + 2) ** 2)`` with respect to ``x``, by autograd.

    Works on a copy, so the caller's ``x`` is left as it was.
    """
    x = x.detach().clone().requires_grad_(True)
    out = (3 * (x + 2) ** 2).mean()
    out.backward()
    return x.grad


def vector_jacobian_product(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """``v @ J``, where ``J`` is the Jacobian of ``f`` at ``x`` (``v`` has the shape of ``f(x)``)."""
    x = x.detach().clone().requires_grad_(True)
    f(x).backward(gradient=v)
    return x.grad


def batch_loss(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the linear prediction ``x @ w`` against ``y``."""
    return ((x @ w - y) ** 2).mean()


def per_batch_grads(w: torch.Tensor, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """The gradient of :func:`batch_loss` with respect to ``w`` for each batch on its own.

    Steps:
        1. Clear ``w.grad`` before each backward (it may hold a leftover gradient).
        2. Backpropagate this batch's loss.
        3. Keep a copy of ``w.grad``, not the tensor itself.
    """
    grads = []
    for x, y in batches:
        w.grad = None
        batch_loss(w, x, y).backward()
        grads.append(w.grad.clone())
    return grads


def line_loss(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the line ``w * x + b`` against ``y``."""
    return ((w * x + b - y) ** 2).mean()


def fit_line_by_hand(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> tuple[float, float]:
    """Fit ``y ≈ w * x + b`` by plain gradient descent from ``w = b = 0``; return ``(w, b)`` as floats.

    Steps (each of ``steps`` times):
        1. Compute the loss and backpropagate it.
        2. Inside ``torch.no_grad()``, move each parameter against its gradient by ``lr`` times it.
        3. Zero the gradients so the next step starts clean.
    """
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    for _ in range(steps):
        loss = line_loss(w, b, x, y)
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
    return w.item(), b.item()


def fit_line_with_sgd(
    x: torch.Tensor, y: torch.Tensor, lr: float, steps: int
) -> tuple[float, float, list[float]]:
    """The same fit with ``torch.optim.SGD``; also return the loss of every step as a float.

    Steps (each of ``steps`` times): zero_grad, loss, backward, step, log ``loss.item()``.
    """
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = line_loss(w, b, x, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return w.item(), b.item(), losses


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of ``images`` whose highest-scoring class equals ``labels``, without building a graph."""
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def softplus_backward(x: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """Backward of ``softplus(x) = log(1 + exp(x))``: the chain rule, ``grad_output * sigmoid(x)``."""
    return grad_output * torch.sigmoid(x)


def gradients_are_correct(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> bool:
    """True when ``fn``'s autograd gradient at ``x`` matches finite differences (gradcheck, float64)."""
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    return torch.autograd.gradcheck(fn, (x64,), raise_exception=False)


def mse(predict: Callable, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean squared error of ``predict(params, x)`` against ``y``."""
    return ((predict(params, x) - y) ** 2).mean()


def fit_to_target(predict: Callable, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                  lr: float, target: float, max_steps: int) -> float:
    """Plain full-batch gradient descent on ``params``, in place, until the error is at most ``target``.

    Returns the error of the final params as a float; raises RuntimeError when
    ``max_steps`` updates do not reach ``target``.
    """
    for step in range(max_steps + 1):
        loss = mse(predict, params, x, y)
        if loss.item() <= target:
            return loss.item()
        if step == max_steps:
            break
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    raise RuntimeError(f"{max_steps} steps did not bring the error to {target}")
