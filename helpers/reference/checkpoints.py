"""Lesson 06 Saving, loading and resuming: the answer key.

A checkpoint is a dict with these entries (lesson 06 explains each)::

    {"epoch": int,             # the epoch that has just finished, counted from 0
     "model": model.state_dict(),
     "optimizer": optimizer.state_dict(),
     "scheduler": scheduler.state_dict(),
     "torch_rng": torch.get_rng_state(),      # dropout masks, initialisation
     "loader_rng": generator.get_state(),     # the DataLoader's shuffle order
     "loss": float}
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch import nn


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generator: torch.Generator,
    epoch: int,
    loss: float,
) -> None:
    """Write everything needed to continue training after ``epoch`` to ``path``."""
    torch.save(
        {
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "loader_rng": generator.get_state(),
            "loss": loss,
        },
        path,
    )


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generator: torch.Generator,
) -> int:
    """Restore every state saved by :func:`save_checkpoint`; return the next epoch to run.

    Steps:
        1. ``torch.load`` onto the CPU (the RNG states must be CPU tensors;
           ``load_state_dict`` copies weights to wherever the model lives).
        2. ``load_state_dict`` into the model, optimizer and scheduler.
        3. Restore the global and the loader's random states.
        4. Return ``epoch + 1``: the saved epoch is finished.
    """
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1


def train_resumable(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loader,
    generator: torch.Generator,
    epochs: int,
    path: str | Path,
    run_epoch: Callable[..., float],
) -> None:
    """Train until ``epochs`` epochs are done, resuming from ``path`` when it exists.

    Steps:
        1. If the checkpoint file exists, load it and start at the epoch it returns; else at 0.
        2. For each remaining epoch: ``loss = run_epoch(model, loader, optimizer, scheduler)``,
           then save a checkpoint, so a crash loses at most one epoch.
    """
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def load_on_cpu(path: str | Path) -> dict:
    """Load a checkpoint saved on a GPU onto the CPU."""
    return torch.load(path, map_location="cpu")


def load_for_inference(path: str | Path, model: nn.Module) -> nn.Module:
    """Load the checkpoint's model weights into ``model`` and make it ready to predict (eval mode)."""
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    return model.eval()


def strip_module_prefix(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys of a DataParallel/DDP state_dict without the leading ``module.``; other keys unchanged."""
    return {key.removeprefix("module."): value for key, value in state_dict.items()}


def train_jittered(run, epochs: int, path: str | Path, after_epoch: Callable[[int], None],
                   skip: tuple[str, ...] = ()) -> None:
    """Lesson 06's put-together: ``check.jitter_epoch`` until ``epochs`` are done, resumable from ``path``.

    Everything an epoch reads is saved after it and restored on a restart: the model, Adam's state,
    the schedule, the loader's generator, torch's global random state (dropout) and Python's
    (the noise). ``skip`` (for the checks' twins only) leaves the named states out of the restore, and with
    "stale <name>" saves that random state as it was before the loop.
    """
    import random

    from helpers.checks.checkpoints import jitter_epoch

    model, optimizer, scheduler, _, generator = run
    start = 0
    if Path(path).exists():
        checkpoint = torch.load(path, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        if "optimizer" not in skip:
            optimizer.load_state_dict(checkpoint["optimizer"])
        if "scheduler" not in skip:
            scheduler.load_state_dict(checkpoint["scheduler"])
        if "torch" not in skip:
            torch.set_rng_state(checkpoint["torch_rng"])
        if "loader" not in skip:
            generator.set_state(checkpoint["loader_rng"])
        if "python" not in skip:
            random.setstate(checkpoint["python_rng"])
        start = checkpoint["epoch"] + 1
    at_start = {"torch": torch.get_rng_state(), "loader": generator.get_state(), "python": random.getstate()}
    for epoch in range(start, epochs):
        loss = jitter_epoch(run)
        now = {"torch": torch.get_rng_state(), "loader": generator.get_state(), "python": random.getstate()}
        # "stale <state>" in skip (twins only): that state is saved as it was before the loop, not as it is now
        rng = {name: at_start[name] if f"stale {name}" in skip else state for name, state in now.items()}
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": rng["torch"],
                    "loader_rng": rng["loader"], "python_rng": rng["python"], "loss": loss}, path)
        after_epoch(epoch)
