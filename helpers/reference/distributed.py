"""Lesson 08 Multiple GPUs and distributed training: the answer key.

Every function but :func:`free_port`, :func:`shard_indices` and
:func:`simulate_data_parallel` runs inside a process group: ``torch.distributed``
must be initialised (lesson 08 starts the group; the checks start a real one of
2 or 3 processes with the Gloo backend).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Steps:
        1. Bind a socket to port 0: the operating system picks a free port.
        2. Read the port it chose with ``getsockname()``.
        3. Close the socket (the ``with`` block) so the port is free again for the group.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def average_gradients(model: nn.Module) -> None:
    """Replace every parameter's ``.grad`` by its mean over all ranks (what DDP does during backward).

    Steps:
        1. ``all_reduce`` each gradient with SUM: every rank gets the sum over ranks.
        2. Divide by the world size: the mean.
    """
    world_size = dist.get_world_size()
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
            parameter.grad /= world_size


def shard_indices(n: int, rank: int, world_size: int, epoch: int, seed: int = 0) -> list[int]:
    """The indices ``DistributedSampler(shuffle=True, seed=seed)`` gives ``rank`` in ``epoch``.

    Steps:
        1. Shuffle ``range(n)`` with a generator seeded with ``seed + epoch``: every
           rank draws the same order, and a new one each epoch.
        2. Pad by repeating indices from the start until the length is a multiple of
           ``world_size``, so every rank gets the same number of samples (and runs the
           same number of steps).
        3. Deal them out like cards: ``indices[rank::world_size]``.
    """
    generator = torch.Generator().manual_seed(seed + epoch)
    indices = torch.randperm(n, generator=generator).tolist()
    total = -(-n // world_size) * world_size
    padding = total - n
    indices += (indices * -(-padding // n))[:padding] if padding else []
    return indices[rank:total:world_size]


def epoch_batches(dataset: Dataset, global_batch_size: int, epochs: int) -> list[list[list[int]]]:
    """The batches this rank sees in each epoch, when the dataset's items are their own indices.

    Steps:
        1. A ``DistributedSampler`` shards (and shuffles) the dataset for this rank.
        2. Per-process batch size: the global batch is split across the ranks.
        3. ``sampler.set_epoch(epoch)`` before each epoch: a new order every epoch.
    """
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def train_by_hand(make_model: Callable[[], nn.Module], inputs: torch.Tensor, targets: torch.Tensor,
                  steps: int, seed: int, lr: float) -> dict[str, torch.Tensor]:
    """Data-parallel SGD without DDP: same seed, own shard, averaged gradients. Returns the final state_dict.

    Steps:
        1. ``torch.manual_seed(seed)`` then ``make_model()``: the same weights on every rank.
        2. This rank's shard of the batch: ``inputs[rank::world_size]``.
        3. Each step: mean squared error on the shard, backward, :func:`average_gradients`, SGD step.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        average_gradients(model)
        optimizer.step()
    return model.state_dict()


def train_ddp(make_model: Callable[[], nn.Module], inputs: torch.Tensor, targets: torch.Tensor,
              steps: int, seed: int, lr: float) -> dict[str, torch.Tensor]:
    """The same training with DistributedDataParallel; returns the plain model's state_dict.

    Steps:
        1. Same seed, ``make_model()``, wrap in ``DistributedDataParallel`` (on a GPU:
           ``device_ids=[local_rank]``).
        2. This rank's shard; each step: loss (a mean over the shard), backward (DDP
           averages the gradients across ranks during it), SGD step.
        3. Return ``ddp.module.state_dict()``: the keys without DDP's ``module.`` prefix.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model.module.state_dict()


def save_and_load(model: nn.Module, path: str | Path) -> None:
    """Rank 0 saves ``model``'s weights to ``path``; then every rank loads them into its ``model``.

    Steps:
        1. Only rank 0 writes (every rank holds the same weights; several writers corrupt files).
        2. ``dist.barrier()``: no rank reads before the file is complete.
        3. Every rank loads the file into its model (``map_location="cpu"``; on GPUs, the rank's device).
    """
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def simulate_data_parallel(make_model: Callable[[], nn.Module], inputs: torch.Tensor, targets: torch.Tensor,
                           steps: int, seeds: Sequence[int], lr: float, average: bool = True,
                           reduction: str = "mean", accumulate: bool = False,
                           momentum: float = 0.0) -> list[dict[str, torch.Tensor]]:
    """Data-parallel SGD simulated in one process, one model per rank (rank r seeded ``seeds[r]``).

    With every seed equal and ``average=True`` this is exactly the single-process run
    on the whole batch (shards of equal size). The checks use it for the wrong twins:
    different seeds per rank, gradients never averaged, a summed loss, gradients never cleared
    (``accumulate=True``: no ``zero_grad`` between steps), SGD with momentum where plain SGD is asked.
    """
    world_size = len(seeds)
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(make_model())
    optimizers = [torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum) for m in models]
    for _ in range(steps):
        grads = []
        for rank, (model, optimizer) in enumerate(zip(models, optimizers)):
            if not accumulate:
                optimizer.zero_grad()
            x, y = inputs[rank::world_size], targets[rank::world_size]
            nn.functional.mse_loss(model(x), y, reduction=reduction).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for rank, model in enumerate(models):
            for i, parameter in enumerate(model.parameters()):
                if average:
                    parameter.grad = torch.stack([g[i] for g in grads]).mean(dim=0)
        for optimizer in optimizers:
            optimizer.step()
    return [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in models]


def _collate(items: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.tensor([int(y) for _, y in items])


def train_one_process(make_model: Callable[[], nn.Module], dataset: Dataset, epochs: int, batch_size: int,
                      lr: float, seed: int) -> dict[str, torch.Tensor]:
    """The lesson's given single-process training: SGD with momentum, a new shuffled order every epoch."""
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for start in range(0, len(order), batch_size):
            images, labels = _collate([dataset[i] for i in order[start:start + batch_size]])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.state_dict()


def train_distributed(make_model: Callable[[], nn.Module], dataset: Dataset, epochs: int, batch_size: int,
                      lr: float, seed: int) -> dict[str, torch.Tensor]:
    """:func:`train_one_process` with DDP: every rank reads its share of each batch, weights equal to the
    single-process run's (``len(dataset)`` a multiple of ``batch_size``, ``batch_size`` of the world size)."""
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()
