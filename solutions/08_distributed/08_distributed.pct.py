# %% [markdown]
# # 08 Multiple GPUs and distributed training
#
# One GPU (or one CPU) trains one batch at a time. With several devices you can
# train on several parts of a batch at once and combine the results: that is
# **data parallelism**, and PyTorch's tool for it is `DistributedDataParallel`
# (DDP). This lesson builds it up in steps you can follow:
#
# 1. by hand, in one process: split a batch, compute a gradient per part, average;
# 2. in real processes that talk to each other (a **process group**);
# 3. with DDP, launched by `torchrun`, on one machine and on two "machines";
# 4. the same training in PyTorch Lightning, in a few lines.
#
# Everything here really runs 2 processes, even without a GPU: on a CPU, PyTorch's
# **Gloo** backend connects processes over TCP, here on `127.0.0.1`. Where a cell
# needs GPUs, it says so in one line and skips.
#
# There are 8 graded exercises worth 20 points. The checks start a real group of
# processes, run your function on every rank, and read back what each rank wrote.

# %% locked="setup"
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Subset
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

from helpers.checks import distributed as check
from helpers.data import MNIST_MEAN, MNIST_STD, data_root
from helpers.distributed import again_if_port_taken, again_if_unconnected

RUN_DIR = Path("runs")                 # scripts and files this lesson writes, next to the notebook
COLLECTIVE_TIMEOUT = timedelta(seconds=30)  # how long one collective may wait for the other ranks
LAUNCH_TIMEOUT_S = 300                 # how long a whole launch may take before it is killed (busy machines are slow)
shutil.rmtree(RUN_DIR, ignore_errors=True)  # every run of the notebook starts clean
RUN_DIR.mkdir()
# torch.multiprocessing logs the process ids it stops when a rank fails; the lesson prints the error itself.
logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
_ = torch.manual_seed(0)

# %% [markdown]
# ## 1. Data parallelism by hand, in one process
#
# Training minimises the **mean** loss over a batch, so the gradient of a batch is
# the mean of the per-sample gradients. Split a batch of 8 into two shards of 4:
# the mean over 8 samples is the mean of the two shards' means. So if two
# devices each compute the gradient of their shard's mean loss, the **average**
# of their two gradients is exactly the gradient of the whole batch (for shards
# of equal size).

# %%
def make_regressor() -> nn.Module:
    """A small model: 3 inputs, 2 outputs (the checks train the same one)."""
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))


torch.manual_seed(0)
model = make_regressor()
inputs, targets = torch.randn(8, 3), torch.randn(8, 2)

model.zero_grad()
nn.functional.mse_loss(model(inputs), targets).backward()
whole_batch = [p.grad.clone() for p in model.parameters()]

shard_grads = []
for shard in range(2):  # shard 0 gets samples 0, 2, 4, 6; shard 1 gets 1, 3, 5, 7
    model.zero_grad()
    nn.functional.mse_loss(model(inputs[shard::2]), targets[shard::2]).backward()
    shard_grads.append([p.grad.clone() for p in model.parameters()])

averaged = [(g0 + g1) / 2 for g0, g1 in zip(*shard_grads)]
print("average of the shard gradients == whole-batch gradient:",
      all(torch.allclose(a, w, atol=1e-7) for a, w in zip(averaged, whole_batch)))
print("sum of the shard gradients == whole-batch gradient:    ",
      all(torch.allclose(g0 + g1, w, atol=1e-7) for g0, g1, w in zip(*shard_grads, whole_batch)))

# %% [markdown]
# Same gradient, same optimizer step: training on 2 devices with a batch of 4
# each follows exactly the path of training on one device with a batch of 8. The
# **sum** is twice too large, as if the learning rate had doubled.
#
# The rest of the lesson is about doing this with the shards on different
# devices, in different processes: each process holds a copy of the model (a
# **replica**), computes its shard's gradient, and the processes average their
# gradients before every optimizer step.
#
# ## 2. `nn.DataParallel`, and why not
#
# `nn.DataParallel(model)` is the oldest way: **one** process copies the model to
# every GPU at every forward pass, splits the batch, runs the copies in threads,
# and gathers outputs and gradients back on GPU 0, which also runs the optimizer.
# It is slower than it looks: Python threads share one interpreter lock (the GIL),
# the model is copied every step, and GPU 0 does extra work and holds extra memory.
# PyTorch's documentation recommends `DistributedDataParallel` instead, even on one
# machine. (One more trap: `forward` must return tensors; a Python number such as
# `loss.item()` cannot be gathered from the GPUs.)

# %%
if torch.cuda.device_count() >= 2:
    parallel = nn.DataParallel(make_regressor().cuda())
    outputs = parallel(torch.randn(64, 3, device="cuda"))
    print(f"DataParallel split 64 samples over {torch.cuda.device_count()} GPUs and gathered {list(outputs.shape)} on {outputs.device}")
else:
    print(f"Skipped: nn.DataParallel splits a batch over 2 or more CUDA GPUs, and this machine has {torch.cuda.device_count()}.")

# %% [markdown]
# ## 3. Processes, ranks and process groups
#
# DDP runs **one process per device**. The processes form a **process group**:
#
# - the **world size** is the number of processes (2 here);
# - each process has a **rank** from 0 to world size - 1; rank 0 usually logs and saves;
# - the **local rank** is the rank among the processes of the same machine: on a
#   GPU machine, process `local_rank` uses `cuda:{local_rank}`. With several
#   machines, ranks count across all of them and local ranks restart at 0 on each.
#
# `dist.init_process_group(backend, init_method, rank, world_size, timeout)` joins a
# group. The **backend** moves the data: **NCCL** between NVIDIA GPUs, **Gloo** between
# CPUs (and as a fallback for GPUs). The **init method** is how the processes find
# each other: `"tcp://HOST:PORT"` names the address where rank 0 listens;
# `"env://"` (the default) reads it from the environment variables `MASTER_ADDR`,
# `MASTER_PORT`, `RANK` and `WORLD_SIZE`, which launchers such as `torchrun` set.
#
# Rank 0 listens on a TCP port, and a port can be used by one program at a time.
# A second job on the same machine with the same port fails with "Address already
# in use" (you will see it happen in section 8). The cure is to ask the operating
# system for a port that is free right now.
#
# ### Exercise 1 (1 point): `free_port`
#
# Write `free_port()` that returns a TCP port on `127.0.0.1` that nothing uses.
# The check runs a real process group on your port, and asks again while a
# "job" still holds the first port.
#
# *Hint:* look up what port 0 means to a socket's `bind`, and how a socket tells
# you its own address. A port your function still holds open is not free.

# %% solution="ex_free_port"
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    ### BEGIN SOLUTION
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
    ### END SOLUTION


# %% check="ex_free_port_check"
check.check_free_port(free_port)

# %% graded="ex_free_port_tests" points=1
check.check_free_port(free_port)
### BEGIN HIDDEN TESTS
check.check_free_port(free_port, inputs=[2, 3])
### END HIDDEN TESTS

# %% [markdown]
# ### Starting a group from this notebook
#
# To start processes from a notebook we **fork** it: `mp.start_processes(...,
# start_method="fork")` makes copies of this very kernel, functions and variables
# included, and each copy calls `worker(rank, ...)`. (Section 8 explains why the
# usual `mp.spawn` cannot run functions defined in a notebook.)
#
# `run_on_ranks` below is the launcher for the rest of the lesson. Three habits in
# it keep a distributed program from hanging:
#
# - every collective has a **timeout** (`init_process_group(timeout=...)`): a rank that
#   waits for a partner that never comes gets an error instead of waiting forever;
# - the whole launch has a deadline, after which the processes are killed;
# - `destroy_process_group()` runs in a `finally` block, so the group is closed
#   even when the worker fails.
#
# And one habit specific to forking: this kernel has already run PyTorch with
# several threads, and a forked copy of a thread pool can deadlock. Each child
# uses one thread (`torch.set_num_threads(1)`).

# %%
def _join_group(rank: int, worker, world_size: int, port: int, args: tuple, timeout: timedelta,
                result_file: str) -> None:
    """What every rank runs: join the group, call the worker, rank 0 saves its result, leave the group."""
    torch.set_num_threads(1)  # a forked thread pool can deadlock: one thread per process
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timeout)
    try:
        result = worker(rank, world_size, *args)
        if rank == 0:
            torch.save(result, result_file)
    finally:
        dist.destroy_process_group()


def run_on_ranks(worker, *args, world_size: int = 2, timeout_s: float = LAUNCH_TIMEOUT_S,
                 collective_timeout: timedelta = COLLECTIVE_TIMEOUT):
    """Run ``worker(rank, world_size, *args)`` in ``world_size`` forked processes; return what rank 0 returned."""
    handle, result_file = tempfile.mkstemp(suffix=".pt", dir=RUN_DIR)  # where rank 0 leaves its result
    os.close(handle)

    def launch():
        group = mp.start_processes(_join_group, args=(worker, world_size, free_port(), args, collective_timeout,
                                                      result_file),
                                   nprocs=world_size, start_method="fork", join=False)
        deadline = time.monotonic() + timeout_s
        while not group.join(timeout=max(deadline - time.monotonic(), 0)):  # raises if a rank failed
            if time.monotonic() >= deadline:
                for process in group.processes:
                    process.kill()
                raise TimeoutError(f"the group did not finish within {timeout_s} s")
        return torch.load(result_file, weights_only=False)

    return again_if_unconnected(launch)  # on a busy machine, a rank that gave up connecting: again, new port


# %% [markdown]
# The first group: every rank contributes a tensor, and **`all_reduce`** combines
# them (by default, a sum) so that every rank ends with the same total. It is
# the collective DDP uses for gradients. `all_gather_object` collects one Python
# object from every rank, which we use to show what each rank saw.

# %%
def hello(rank: int, world_size: int) -> list[str]:
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)  # every rank: 1 + 2 = 3
    lines = [None] * world_size
    dist.all_gather_object(lines, f"rank {rank} of {dist.get_world_size()}: all_reduce gave {value.item()}")
    return lines


for line in run_on_ranks(hello):
    print(line)

# %% [markdown]
# ### When ranks disagree
#
# Every rank must call the **same collectives in the same order**. A collective
# inside `if rank == 0:` is the classic bug. If the other rank has already finished,
# the waiting rank hears its connection close ("Connection closed by peer", or
# "reset by peer"):

# %% tags=["nbval-ignore-output"]
def exits_early(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # rank 1 never calls it, and leaves


def gloo_error(error: mp.ProcessRaisedException) -> str:
    """The failed rank and Gloo's own words, from the error torch.multiprocessing passes back."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    message = next((line for line in lines if line.startswith("RuntimeError")), lines[-1])
    return f"rank {error.error_index}: " + message.split("] ", 1)[-1].split(". ")[0]


try:
    run_on_ranks(exits_early)
except mp.ProcessRaisedException as error:
    print(gloo_error(error))

# %% [markdown]
# If the other rank is still alive but waiting somewhere else, both wait, and only
# the timeout ends it. Here with a timeout of 3 seconds (section 8's scripts and
# this lesson's launcher use 30):

# %% tags=["nbval-ignore-output"]
def mismatched(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))
    else:
        dist.barrier()  # a different collective: the two ranks wait for each other forever


started = time.perf_counter()
try:
    run_on_ranks(mismatched, collective_timeout=timedelta(seconds=3))
except mp.ProcessRaisedException as error:
    print(gloo_error(error))
print(f"stopped by the timeout after about {round(time.perf_counter() - started)} s")

# %% [markdown]
# ## 4. Averaging gradients with `all_reduce`
#
# ### Exercise 2 (3 points): `average_gradients`
#
# Each rank has computed the gradient of its own shard. Write
# `average_gradients`, taking a model, that replaces every parameter's `.grad` with its
# **mean over all ranks**, on every rank. It changes the model's gradients and
# returns nothing.
#
# Two graded cells: 2 processes (2 points), 3 processes (1 point).
#
# *Hint:* the collective of the first group above; it changes the tensor it is
# given, in place. A parameter that took no part in the loss has `.grad` None, on
# every rank alike.

# %% solution="ex_average_gradients"
def average_gradients(model: nn.Module) -> None:
    """Replace every parameter's gradient with its mean over all ranks."""
    ### BEGIN SOLUTION
    world_size = dist.get_world_size()
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
            parameter.grad /= world_size
    ### END SOLUTION


# %% check="ex_average_gradients_check"
check.check_average_gradients(average_gradients)

# %% graded="ex_average_gradients_two_tests" points=2
check.check_average_gradients(average_gradients, inputs=[check.GradCase(0, 5, 8, 2)])
### BEGIN HIDDEN TESTS
check.check_average_gradients(average_gradients, inputs=[check.GradCase(3, 6, 4, 2), check.GradCase(4, 2, 10, 2)])
### END HIDDEN TESTS

# %% graded="ex_average_gradients_three_tests" points=1
check.check_average_gradients(average_gradients, inputs=[check.GradCase(5, 5, 9, 3)])
### BEGIN HIDDEN TESTS
check.check_average_gradients(average_gradients, inputs=[check.GradCase(6, 3, 12, 3)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 3 (2 points): data-parallel training by hand
#
# Now train with it. Write `train_by_hand(make_model, inputs, targets, steps, seed, lr)`,
# run on every rank with the **whole** batch `inputs`, `targets`. The contract:
#
# - the model comes from `make_model`, built right after torch's global generator is seeded with `seed`
#   (so every rank starts from the same weights);
# - rank `r` of `world_size` trains only on its shard, the samples `r`, `r + world_size`, ...;
# - `steps` steps of plain SGD with learning rate `lr` on the mean squared error,
#   the ranks exchanging gradients with your `average_gradients`;
# - it returns this rank's state dict (the model's parameters and buffers by name).
#
# The check compares the weights of every rank with one process trained on the
# whole batch for the same steps: they must be equal.

# %% solution="ex_train_by_hand"
def train_by_hand(make_model, inputs: torch.Tensor, targets: torch.Tensor, steps: int, seed: int,
                  lr: float) -> dict[str, torch.Tensor]:
    """Data-parallel SGD with averaged gradients; return this rank's final state_dict."""
    ### BEGIN SOLUTION
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
    ### END SOLUTION


# %% check="ex_train_by_hand_check"
check.check_train_by_hand(train_by_hand)

# %% graded="ex_train_by_hand_tests" points=2
check.check_train_by_hand(train_by_hand)
### BEGIN HIDDEN TESTS
with check.substitute(train_by_hand, average_gradients=check.ref.average_gradients):
    check.check_train_by_hand(train_by_hand, inputs=[check.TrainCase(7, 4, 0.05, 2, 8), check.TrainCase(8, 2, 0.2, 3, 12)])
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Giving each rank its share of the data: `DistributedSampler`
#
# Above, the whole batch was in memory and each rank sliced its shard. With a
# dataset, a `DistributedSampler(dataset)` does the slicing for a `DataLoader`:
# it reads the rank and world size from the process group and yields only this
# rank's indices. Its contract, per epoch:
#
# 1. shuffle `range(n)` with a generator seeded with `seed + epoch` (every rank
#    draws the **same** order);
# 2. if `n` is not a multiple of the world size, **pad** by repeating indices from
#    the start, so every rank gets the same number of samples (a rank with one
#    batch more would wait forever in the last all_reduce);
# 3. deal the indices out like cards: rank `r` gets `indices[r::world_size]`.
#
# Let us look at it without a group, by passing `num_replicas` and `rank` by hand:

# %%
for rank in range(2):
    sampler = DistributedSampler(list(range(5)), num_replicas=2, rank=rank, shuffle=True, seed=0)
    print(f"rank {rank}: epoch 0 {list(sampler)}", end="   ")
    sampler.set_epoch(1)
    print(f"epoch 1 {list(sampler)}")

# %% [markdown]
# 5 samples, 2 ranks: one index appears twice (the padding). The sampler only
# knows the epoch if you tell it: **call `sampler.set_epoch(epoch)` at the start of
# every epoch**, or every epoch repeats the first one's order.
#
# ### Exercise 4 (3 points): `shard_indices`
#
# Write `shard_indices(n, rank, world_size, epoch, seed)` that returns, as a list of
# ints, the indices `DistributedSampler(shuffle=True, seed=seed)` gives rank `rank`
# in epoch `epoch`, following the three steps above. Like the real sampler, it
# shuffles with a generator of its own and leaves torch's global generator alone
# (the rest of the program draws from that one). The check runs it on every
# rank of a real group and compares with the real sampler.
#
# Two graded cells: a dataset that divides evenly (1 point); padding and later
# epochs (2 points).
#
# *Hint:* `torch.randperm` takes a `generator`, which you can seed. Work out the
# padded length by hand for n=7 on 2 ranks, then for n=1 on 3 ranks: the padding
# can be longer than the list it repeats.

# %% solution="ex_shard_indices"
def shard_indices(n: int, rank: int, world_size: int, epoch: int, seed: int = 0) -> list[int]:
    """The indices DistributedSampler(shuffle=True, seed=seed) gives ``rank`` in ``epoch``."""
    ### BEGIN SOLUTION
    indices = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    total = -(-n // world_size) * world_size
    while len(indices) < total:
        indices += indices[: total - len(indices)]
    return indices[rank::world_size]
    ### END SOLUTION


# %% check="ex_shard_indices_check"
check.check_shard_indices(shard_indices)

# %% graded="ex_shard_indices_even_tests" points=1
check.check_shard_indices(shard_indices, inputs=[check.ShardCase(12, 2, 0, 0), check.ShardCase(12, 2, 1, 0)])
### BEGIN HIDDEN TESTS
check.check_shard_indices(shard_indices, inputs=[check.ShardCase(12, 3, 0, 4), check.ShardCase(20, 2, 0, 9)])
### END HIDDEN TESTS

# %% graded="ex_shard_indices_padding_tests" points=2
check.check_shard_indices(shard_indices, inputs=[check.ShardCase(7, 2, 0, 0), check.ShardCase(7, 2, 1, 0)])
### BEGIN HIDDEN TESTS
check.check_shard_indices(shard_indices, inputs=[check.ShardCase(11, 3, 2, 5), check.ShardCase(2, 3, 1, 1),
                                                 check.ShardCase(1, 3, 2, 7), check.ShardCase(10, 4, 3, 0),
                                                 check.ShardCase(2, 4, 1, 3)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 5 (3 points): `epoch_batches`, a sampler in a loader
#
# The **batch size is per process**: with a `DataLoader(batch_size=32)` on each of 4
# ranks, one optimizer step uses 128 samples. To keep the batch of a single-process
# run (the "global" batch), each process loads `global_batch_size // world_size`.
#
# Write `epoch_batches(dataset, global_batch_size, epochs)`, run on every rank of
# a group, that builds a `DistributedSampler(dataset)` (its defaults: shuffle,
# seed 0) and a `DataLoader` with the per-process batch size and that sampler,
# and returns the batches this rank sees: one list per epoch, holding one list of
# ints per batch (the dataset's items are their own indices; `batch.tolist()`).
#
# Two graded cells: 2 processes (2 points), 3 processes (1 point).
#
# *Hint:* a DataLoader takes either `shuffle=True` or a `sampler`, not both.

# %% solution="ex_epoch_batches"
def epoch_batches(dataset, global_batch_size: int, epochs: int) -> list[list[list[int]]]:
    """The batches this rank sees in each epoch."""
    ### BEGIN SOLUTION
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen
    ### END SOLUTION


# %% check="ex_epoch_batches_check"
check.check_epoch_batches(epoch_batches)

# %% graded="ex_epoch_batches_two_tests" points=2
check.check_epoch_batches(epoch_batches)
### BEGIN HIDDEN TESTS
check.check_epoch_batches(epoch_batches, inputs=[check.EpochCase(10, 4, 3, 2), check.EpochCase(32, 8, 2, 2)])
### END HIDDEN TESTS

# %% graded="ex_epoch_batches_three_tests" points=1
check.check_epoch_batches(epoch_batches, inputs=[check.EpochCase(12, 6, 2, 3)])
### BEGIN HIDDEN TESTS
check.check_epoch_batches(epoch_batches, inputs=[check.EpochCase(14, 6, 3, 3)])
### END HIDDEN TESTS

# %% [markdown]
# ## 6. `DistributedDataParallel`
#
# DDP does what `train_by_hand` did, better:
#
# - when it wraps the model, it **broadcasts** rank 0's weights and buffers to all
#   ranks, so replicas start equal even if their seeds differ (keep the seeds
#   equal anyway: other random things, like a random split of the data, must
#   agree too);
# - during `backward()` it all-reduces the gradients in **buckets**, as soon as a
#   bucket's gradients are ready, so the communication overlaps the rest of the
#   backward pass, and divides by the world size: after `backward()` every rank
#   holds the averaged gradient.
#
# One process per device, no GIL shared between devices, no model copied every
# step: this is why DDP beats `DataParallel` even on one machine. On GPUs, wrap with
# `DistributedDataParallel(model.to(local_rank), device_ids=[local_rank])`.
#
# It is the same computation as the single-process run on the whole batch. Let us
# check that in a real group:

# %%
def ddp_versus_one_process(rank: int, world_size: int) -> bool:
    torch.manual_seed(0)
    ddp_model = DistributedDataParallel(make_regressor())
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp_model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    torch.manual_seed(0)
    single = make_regressor()  # the same start, one process, the whole batch
    optimizer = torch.optim.SGD(single.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(single(inputs), targets).backward()
        optimizer.step()
    return all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ddp_model.module.parameters(), single.parameters()))


print("DDP on 2 processes == 1 process on the whole batch:", run_on_ranks(ddp_versus_one_process))

# %% [markdown]
# ### Exercise 6 (2 points): `train_ddp`
#
# Write `train_ddp(make_model, inputs, targets, steps, seed, lr)`: the contract of
# `train_by_hand`, with `DistributedDataParallel` exchanging the gradients instead of
# your function. It returns the **plain** model's weights, with the keys a model
# built by `make_model()` has (the wrapper's own keys start with `module.`, lesson 06).

# %% solution="ex_train_ddp"
def train_ddp(make_model, inputs: torch.Tensor, targets: torch.Tensor, steps: int, seed: int,
              lr: float) -> dict[str, torch.Tensor]:
    """Data-parallel SGD with DistributedDataParallel; return the plain model's final state_dict."""
    ### BEGIN SOLUTION
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    ddp_model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp_model(x), y).backward()
        optimizer.step()
    return ddp_model.module.state_dict()
    ### END SOLUTION


# %% check="ex_train_ddp_check"
check.check_train_ddp(train_ddp)

# %% graded="ex_train_ddp_tests" points=2
check.check_train_ddp(train_ddp)
### BEGIN HIDDEN TESTS
check.check_train_ddp(train_ddp, inputs=[check.TrainCase(9, 5, 0.05, 2, 16), check.TrainCase(10, 3, 0.1, 3, 12)])
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Logging and saving on rank 0, and `barrier()`
#
# Every rank holds the same weights, so one of them is enough to print progress
# and to write checkpoints: by convention, rank 0 (`if dist.get_rank() == 0:`).
# Several processes writing one file at once can corrupt it, and every log line
# would appear once per process.
#
# `dist.barrier()` waits until every rank has reached it. Use it whenever one rank
# does something the others depend on: after rank 0 **saves** a checkpoint that the
# others will load, or after rank 0 **downloads** a dataset the others will read
# (section 8's script does that).
#
# ### Exercise 7 (3 points): `save_and_load`
#
# Write `save_and_load(model, path)`: rank 0 saves `model.state_dict()` to `path`;
# then every rank loads the file into its `model` (with `map_location="cpu"`), so
# that all ranks end with rank 0's weights. Careful: an older file may already
# sit at `path`.

# %% solution="ex_save_and_load"
def save_and_load(model: nn.Module, path: Path) -> None:
    """Rank 0 saves the weights; every rank then loads them."""
    ### BEGIN SOLUTION
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    ### END SOLUTION


# %% check="ex_save_and_load_check"
check.check_save_and_load(save_and_load)

# %% graded="ex_save_and_load_tests" points=3
check.check_save_and_load(save_and_load)
### BEGIN HIDDEN TESTS
check.check_save_and_load(save_and_load, inputs=[check.SaveCase(3, 3, True), check.SaveCase(4, 2, False)])
### END HIDDEN TESTS

# %% [markdown]
# ## 8. Launchers: `mp.spawn` and `torchrun`
#
# ### `torch.multiprocessing.spawn`, and functions defined in a notebook
#
# `mp.spawn(fn, args, nprocs)` starts `nprocs` **new** Python interpreters and calls
# `fn(rank, *args)` in each. A new interpreter has none of this notebook's
# variables, so `fn` travels by name: it is pickled as "the function `hello` of the
# module `__main__`", and the child looks it up there. But the child's `__main__` is
# not this notebook, and the lookup fails:

# %%
def spawned_stderr(function, *args) -> str:
    """Run mp.spawn(function, args, nprocs=2); return what the children wrote to stderr."""
    log = RUN_DIR / "spawn_stderr.txt"
    saved = os.dup(2)
    with open(log, "w") as file:
        os.dup2(file.fileno(), 2)  # the children inherit this process's stderr
        try:
            mp.spawn(function, args=args, nprocs=2)
        except mp.ProcessExitedException as error:  # a child failed: mp.spawn stops the others and raises
            print(f"{type(error).__name__}: exit code {error.exit_code}")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return log.read_text()


errors = spawned_stderr(hello, 2)
# the two children write at once, so their lines can interleave: find one child's message whole
print("AttributeError:", re.search(r"Can't get attribute '\w+' on <module '__main__' \(built-in\)>", errors)[0])

# %% [markdown]
# Forking (what `run_on_ranks` does, and Lightning's `"ddp_notebook"` strategy)
# avoids this: the child is a copy of the kernel, not a fresh interpreter. The
# other fix is to put the code in a file that the children can import. This cell
# writes a script; `mp.spawn` works with a function imported from it, because the
# child imports the module by name:

# %%
SCRIPT = RUN_DIR / "ddp_mnist.py"
SCRIPT.write_text('''\
"""Train a small MNIST classifier with DistributedDataParallel, one process per rank.

    python -m torch.distributed.run --standalone --nproc_per_node=2 ddp_mnist.py --out weights.pt
"""
import argparse
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DIGITS_FILE = "mnist_digits.pt"
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def choose_backend(local_processes, gpus):
    """NCCL with one GPU per process if this machine has a GPU for each of its processes, else Gloo on the CPU.

    Returns the backend and the reason, in words.
    """
    if gpus >= local_processes:
        return "nccl", f"{gpus} GPU(s) for {local_processes} process(es) on this machine: one GPU each"
    if gpus:
        return "gloo", (f"{gpus} GPU(s) for {local_processes} processes on this machine: NCCL needs a GPU "
                        "per process, so Gloo on the CPU")
    return "gloo", "no GPU on this machine: Gloo on the CPU"


def hello(rank, world_size, port, out):
    """For mp.spawn: join a group, all_reduce, rank 0 writes the total to `out`."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=30))
    try:
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value)
        if rank == 0:
            torch.save(value, out)
    finally:
        dist.destroy_process_group()


def prepare_digits(count):
    """Read MNIST with torchvision (downloading it if needed); save the first `count` training digits as tensors."""
    from torchvision import datasets  # only the rank that prepares the data needs torchvision
    from helpers.data import data_root
    mnist = datasets.MNIST(data_root(), train=True, download=True)
    torch.save({"images": mnist.data[:count], "labels": mnist.targets[:count]}, DIGITS_FILE)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--global-batch-size", type=int, default=64)
    parser.add_argument("--digits", type=int, default=2000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # torchrun sets these for every process it starts
    rank, local_rank, world_size = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)  # the processes share this machine's cores (and results do not depend on threads)
    backend, why = choose_backend(int(os.environ["LOCAL_WORLD_SIZE"]), torch.cuda.device_count())
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=timedelta(seconds=60))  # env://: MASTER_ADDR, MASTER_PORT, ...
    try:
        if rank == 0 and not os.path.exists(DIGITS_FILE):
            prepare_digits(args.digits)  # download and convert once...
        dist.barrier()  # ...while the others wait
        saved = torch.load(DIGITS_FILE)
        images = (saved["images"][: args.digits].float() / 255 - MNIST_MEAN) / MNIST_STD
        digits = TensorDataset(images.unsqueeze(1), saved["labels"][: args.digits])
        sampler = DistributedSampler(digits, shuffle=True, seed=0)
        loader = DataLoader(digits, batch_size=args.global_batch_size // world_size, sampler=sampler)
        where = [None] * world_size
        dist.all_gather_object(where, f"rank {rank} (local rank {local_rank}): {len(sampler)} digits per epoch")
        if rank == 0:
            print(f"{world_size} processes, backend {backend} ({why}):", "; ".join(where))
        torch.manual_seed(0)  # the same initial weights on every rank
        model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
        model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)  # a new order every epoch
            total = torch.zeros(2, device=device)  # summed loss, number of digits
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(images), labels)
                loss.backward()  # DDP averages the gradients across ranks here
                optimizer.step()
                total += torch.stack([loss.detach() * len(labels), torch.tensor(len(labels), device=device)])
            dist.all_reduce(total)  # the mean over all ranks' digits, for the log
            if rank == 0:
                print(f"epoch {epoch}: mean loss {(total[0] / total[1]).item():.3f}", flush=True)
        if rank == 0:
            torch.save(model.module.state_dict(), args.out)  # the plain model's keys, on rank 0 only
        dist.barrier()  # nobody leaves before the file is written
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Done, and every file written: leave without Python's shutdown. DDP keeps the process group and its Gloo
    # threads alive to the end, and a thread still releasing a tensor while Python shuts down aborts the process
    # ("terminate called without an active exception", SIGABRT) after the work is done. So flush and exit now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
''')
sys.path.insert(0, str(RUN_DIR.resolve()))  # spawned children get the parent's sys.path
import ddp_mnist  # noqa: E402

errors = spawned_stderr(ddp_mnist.hello, 2, free_port(), str(RUN_DIR / "spawned.pt"))
print("mp.spawn with a function from a file: all_reduce gave", torch.load(RUN_DIR / "spawned.pt").item())

# %% [markdown]
# ### `torchrun`
#
# For real training, the script is the unit: `torchrun` (the command behind
# `python -m torch.distributed.run`) starts `--nproc_per_node` copies of it, gives
# each its `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE` (processes on this
# machine), `MASTER_ADDR` and `MASTER_PORT`, and watches them: if one fails, it stops
# the others. The script reads its rank from the environment and joins with
# `init_process_group(backend)` (`env://`).
#
# The script's `choose_backend` picks NCCL, with process `local_rank` on
# `cuda:{local_rank}`, only when the machine has a GPU for each of its processes:
# NCCL refuses two ranks on one GPU, and `cuda:1` does not exist on a one-GPU
# machine. Otherwise it uses Gloo on the CPU, and rank 0 prints which and why.
# When it starts more than one process, `torchrun` also sets `OMP_NUM_THREADS=1`: each
# process would otherwise start a thread per core, and N processes would run N
# times more threads than there are cores (oversubscription), which is slower.
#
# **Changed:** `torchrun` replaces `python -m torch.distributed.launch`, which passed
# a `--local_rank` argument to the script; read `os.environ["LOCAL_RANK"]` instead.
#
# We run it with this kernel's own interpreter (`sys.executable`), so the same
# PyTorch runs. `--standalone` picks a free port by itself. The launch gets a
# deadline too: `run_command` kills the launcher **and its workers** (a process
# group of the operating system) when it is exceeded. When it runs several
# launchers that must meet (the nodes below), one that fails stops the others:
# they would otherwise wait for it at the meeting point for many minutes.
#
# Every process here, the launcher included, is a whole Python with PyTorch
# loaded, a few hundred MB each, so a launch of two workers needs about a gigabyte
# beside the kernel. On a small machine (mybinder.org allows 2 GB) close other
# notebooks before launching.

# %%
def run_command(*commands: list[str], envs: list[dict] | None = None,
                timeout_s: float = LAUNCH_TIMEOUT_S) -> list[subprocess.CompletedProcess]:
    """Run the commands at the same time (command i with environment ``envs[i]``, default this kernel's).
    Stop them all, children included, when one fails or after ``timeout_s``."""
    envs = envs or [None] * len(commands)
    outputs = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in commands]  # never fill up
    running = [subprocess.Popen(c, stdout=out, stderr=err, text=True, cwd=RUN_DIR, env=env, start_new_session=True)
               for c, env, (out, err) in zip(commands, envs, outputs)]
    deadline = time.monotonic() + timeout_s
    try:
        while any(process.poll() is None for process in running):
            if any(process.poll() not in (None, 0) for process in running):
                break  # one failed: the others cannot finish without it
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(running[0].args, timeout_s)
            time.sleep(0.1)
    finally:
        for process in running:
            if process.poll() is None:
                os.killpg(process.pid, 9)  # the launcher and every worker it started
                process.wait()
    done = []
    for process, (out, err) in zip(running, outputs):
        out.seek(0), err.seek(0)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out.read(), err.read()))
    return done


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
single_machine, = run_command(TORCHRUN + ["--standalone", "--nproc_per_node=2", SCRIPT.name, "--out", "standalone.pt"])
print(single_machine.stdout if single_machine.returncode == 0 else single_machine.stderr[-2000:])
single_machine.check_returncode()  # a failed launch stops here, with its error printed above

# %% [markdown]
# ### Two jobs, one port
#
# Without `--standalone`, you choose the address: `--master_addr` and
# `--master_port` (default 29500). Two jobs on one machine with the same port
# clash. Here a store that listens on the port plays the first job:

# %%
port = free_port()
first_job = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
try:
    second_job, = run_command(TORCHRUN + ["--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
                                          SCRIPT.name, "--out", "clash.pt"])
finally:
    del first_job
print("exit code", second_job.returncode)
clash = next(line for line in second_job.stderr.splitlines() if "EADDRINUSE" in line)
print("...", clash[clash.index("name: EADDRINUSE"):].strip())

# %% [markdown]
# The fix: a different port for each job (`free_port()`, or any port you know is
# free), or `--standalone` on a single machine.
#
# ### Several machines
#
# On several machines you run `torchrun` once **per machine** (a "node"), each with
# `--nnodes` (how many machines), `--nproc_per_node` (processes on this machine) and
# its own `--node_rank`, all pointing at node 0's address with `--master_addr` and
# `--master_port`. The launchers meet there first (the **rendezvous**), agree on
# ranks, then start their workers. (`--rdzv-backend=c10d --rdzv-endpoint=HOST:PORT`
# is the elastic variant, which also tolerates nodes joining late or restarting.)
#
# Two "nodes" on this machine, each with one process: the same world size as
# before, so the same training, and the same weights. Real machines do not share
# GPUs, but these two "machines" would: each `torchrun` would see every GPU and put
# its process on `cuda:0`. So each node sees only its own GPU through the variable
# `CUDA_VISIBLE_DEVICES` when there are two, and none otherwise (Gloo on the CPU).
#
# A port that `free_port()` found free is only free at that moment: another
# program can take it before node 0's launcher listens on it, and node 0 then
# fails with `EADDRINUSE` before any worker has started. So `again_if_port_taken`
# launches both nodes again on a new port when that happens (at most 3 times).

# %%
own_gpu = torch.cuda.device_count() >= 2
node_envs = [{**os.environ, "CUDA_VISIBLE_DEVICES": str(node_rank) if own_gpu else ""} for node_rank in (0, 1)]


def two_nodes() -> list[subprocess.CompletedProcess]:
    """Start node 0 and node 1, one process each, meeting at a free port of this machine."""
    node = TORCHRUN + ["--nnodes=2", "--nproc_per_node=1", "--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    return run_command(*[node + [f"--node_rank={rank}", SCRIPT.name, "--out", "two_nodes.pt"] for rank in (0, 1)], envs=node_envs)


node0, node1 = again_if_port_taken(two_nodes)
print(node0.stdout if node0.returncode == 0 else node0.stderr[-2000:])
if node1.returncode != 0:
    print(node1.stderr[-2000:])
node0.check_returncode(), node1.check_returncode()
one = torch.load(RUN_DIR / "standalone.pt", map_location="cpu")
two = torch.load(RUN_DIR / "two_nodes.pt", map_location="cpu")
print("same weights as the single-machine run:", all(torch.allclose(one[k], two[k], atol=1e-6) for k in one))

# %% [markdown]
# On a cluster run by **SLURM**, you ask for nodes and tasks in a batch script
# (`#SBATCH --nodes=2`, `--ntasks-per-node=1`, `--gpus-per-node=4`) and start one
# `torchrun` per node with `srun`; the node list comes from SLURM's variables
# (`MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)`,
# `--node_rank=$SLURM_NODEID`, `--nnodes=$SLURM_NNODES`). Alternatively `srun` starts
# every process itself and the script computes its rank from `SLURM_PROCID` and
# `SLURM_LOCALID`. Lightning's Trainer reads these variables for you.
#
# ## 9. When the model does not fit: model parallelism and FSDP
#
# Data parallelism keeps a whole model on every device. When the model is too big
# for one device, split **the model** instead. The simplest split puts consecutive
# layers on different devices and moves the activations between them: **model
# parallelism** (pipeline parallelism adds micro-batches so that both devices work
# at once). Here both stages go to the CPU when there are not two GPUs:

# %%
two_gpus = torch.cuda.device_count() >= 2
first_device, second_device = (torch.device("cuda:0"), torch.device("cuda:1")) if two_gpus else (torch.device("cpu"),) * 2


class TwoStageNet(nn.Module):
    """A classifier in two stages, each on its own device."""

    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(28 * 28, 128), nn.ReLU()).to(first_device)
        self.stage2 = nn.Linear(128, 10).to(second_device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stage1(x.flatten(1).to(first_device))
        return self.stage2(hidden.to(second_device))  # the activations cross between devices


torch.manual_seed(0)
split_model = TwoStageNet()
images, labels = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
loss = nn.functional.cross_entropy(split_model(images), labels.to(second_device))
loss.backward()  # autograd follows the activations back across devices
print(f"stage 1 on {split_model.stage1[0].weight.device}, stage 2 on {split_model.stage2.weight.device}, "
      f"loss {loss.item():.3f}" + ("" if two_gpus else " (no 2 GPUs here: both stages on the CPU)"))

# %% [markdown]
# **FSDP** (Fully Sharded Data Parallel) is data parallelism that does not keep a
# whole model per device: each of N ranks stores 1/N of every parameter, its
# gradient and its optimizer state. Before a layer runs, the ranks gather its full
# weights (all-gather) and free them afterwards; after backward, gradients are
# reduced and scattered so each rank gets its own slice (reduce-scatter). The
# current API is `fully_shard` (FSDP2; it replaces the `FullyShardedDataParallel`
# wrapper class): call it on each layer, then on the whole model. Parameters become
# `DTensor`s, and `.full_tensor()` gathers one. It runs on Gloo too, given a
# **device mesh** of CPU ranks (without one, `fully_shard` builds its mesh on the
# GPU when the machine has one, while these ranks keep their models on the CPU):

# %%
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402


def fsdp_step(rank: int, world_size: int) -> list[str]:
    mesh = init_device_mesh("cpu", (world_size,))  # every rank of the group, on the CPU
    torch.manual_seed(0)
    model = make_regressor()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    weight = model[0].weight
    full = {name: p.full_tensor() for name, p in model.named_parameters()}  # a collective: every rank calls it
    held = [None] * world_size
    dist.all_gather_object(held, f"rank {rank} holds {list(weight.to_local().shape)} of {list(weight.shape)}")
    return held + [full]


*held, fsdp_weights = run_on_ranks(fsdp_step)
print("\n".join(held))
torch.manual_seed(0)
single = make_regressor()
optimizer = torch.optim.SGD(single.parameters(), lr=0.1)
for _ in range(5):
    optimizer.zero_grad()
    nn.functional.mse_loss(single(inputs), targets).backward()
    optimizer.step()
print("FSDP on 2 processes == 1 process on the whole batch:",
      all(torch.allclose(fsdp_weights[name], p, atol=1e-6) for name, p in single.named_parameters()))

# %% [markdown]
# ## 10. Horovod and Apex
#
# **Horovod** (from Uber) was the popular way to do data-parallel training before DDP
# matured: one process per GPU, `hvd.init()`, wrap the optimizer in
# `hvd.DistributedOptimizer`, launch with `horovodrun`; it also works with TensorFlow.
# Its ring all-reduce is what DDP with NCCL does today. For PyTorch-only code, DDP
# and `torchrun` do the same without an extra dependency, and Horovod is little
# maintained now.
#
# **Apex** (from NVIDIA) brought mixed precision (`amp`), fused optimizers and its
# own DDP to PyTorch. All of it moved into PyTorch itself: `torch.autocast` and
# `torch.amp.GradScaler` (lesson 07), `fused=True` optimizers, and
# `DistributedDataParallel`. New code does not need Apex.
#
# ## 11. The script's training in PyTorch Lightning
#
# Lightning writes the loop and the distributed plumbing for you. You describe the
# model, one training step and the optimizer in a `LightningModule`; the `Trainer`
# does the rest. Here the script's classifier, on the same 2,000 digits, with the
# same 64 digits per optimizer step, 2 processes and 2 epochs:

# %%
import lightning as L  # noqa: E402

for noisy in ("lightning.pytorch", "lightning.fabric"):
    logging.getLogger(noisy).setLevel(logging.ERROR)  # no banners about GPUs, TPUs and tips
warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # raised inside Lightning 2.6 by PyTorch 2.14


class LitClassifier(L.LightningModule):
    """The script's classifier: the model, one training step, the optimizer."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))

    def setup(self, stage: str) -> None:
        torch.set_num_threads(1)  # each rank is a fork of this kernel: one thread (section 3)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_index: int) -> torch.Tensor:
        images, labels = batch
        loss = nn.functional.cross_entropy(self.model(images), labels)
        self.log("train_loss", loss, on_epoch=True, on_step=False, sync_dist=True)  # averaged over ranks
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
train_digits = Subset(datasets.MNIST(data_root(), train=True, download=True, transform=transform), range(2000))
test_digits = Subset(datasets.MNIST(data_root(), train=False, download=True, transform=transform), range(1000))

# %% [markdown]
# The `Trainer`'s arguments, and the plain PyTorch each one replaces:
#
# | `Trainer` argument | plain PyTorch in this lesson |
# | --- | --- |
# | `accelerator="cpu"` (`"gpu"`) | `backend = "gloo"` (`"nccl"` with `device = cuda:{local_rank}`) |
# | `devices=2` | `torchrun --nproc_per_node=2` / `nprocs=2`: one process per device |
# | `num_nodes=1` | `torchrun --nnodes=1 --node_rank=...` |
# | `strategy="ddp_notebook"` | fork the kernel, `init_process_group`, `DistributedDataParallel(model)` (`"ddp"` runs the script again per process, like torchrun, and cannot run from a notebook) |
# | (automatic) | `DistributedSampler(dataset, shuffle=...)`, `sampler.set_epoch(epoch)`; the per-process `batch_size` stays yours |
# | `precision="32-true"` (`"bf16-mixed"`) | full precision (`with torch.autocast(device_type, dtype=torch.bfloat16):` around forward and loss, lesson 07) |
# | `accumulate_grad_batches=2` | `(loss / 2).backward()` on 2 batches, then `optimizer.step()`: the gradient of their mean (lesson 07); DDP's `no_sync()` skips the all-reduce on the first |
# | `self.log(..., sync_dist=True)` | `dist.all_reduce` of the loss before rank 0 prints |
# | `max_epochs=2` | `for epoch in range(2):` |
# | `trainer.fit` returning | `destroy_process_group()`; rank 0's weights end up in this kernel's `model` |

# %% tags=["nbval-ignore-output"]
lit_model = LitClassifier()
trainer = L.Trainer(accelerator="cpu", devices=2, num_nodes=1, strategy="ddp_notebook",
                    precision="32-true", accumulate_grad_batches=2, max_epochs=2,
                    enable_progress_bar=False, enable_model_summary=False, logger=False, enable_checkpointing=False)
started = time.perf_counter()
# 16 per process x 2 processes x 2 accumulated batches = 64 digits per optimizer step, as the script's;
# shuffle=True: Lightning gives each process a shuffling DistributedSampler, as the script does by hand
trainer.fit(lit_model, DataLoader(train_digits, batch_size=16, shuffle=True))
print(f"trained in {time.perf_counter() - started:.1f} s, precision {trainer.precision}")

# %%
lit_model.eval()
with torch.no_grad():
    correct = sum((lit_model.model(x).argmax(1) == y).sum().item() for x, y in DataLoader(test_digits, batch_size=500))
print(f"mean training loss in the last epoch: {trainer.callback_metrics['train_loss'].item():.2f}")
print(f"test accuracy on {len(test_digits)} digits: {correct / len(test_digits):.0%}")

# %% [markdown]
# This run and the script's take the same 64 digits per optimizer step for 2 epochs,
# but they are not the same run to the bit: Lightning batches and accumulates by its
# own rules (each epoch ends with a smaller batch, which it accumulates alone), and
# any difference changes the path of the weights. Compare the loss above with the
# script's last epoch: similar, not equal.
#
# This Trainer trains in full precision (`"32-true"`): on a CPU, bfloat16 is fast only
# where the processor has instructions for it and is emulated slowly elsewhere. On a
# GPU (`accelerator="gpu"`), `precision="bf16-mixed"` is the usual choice where
# `torch.cuda.is_bf16_supported()` says the GPU supports it (lesson 07).
#
# ## 12. Put it together: from one process to DDP
#
# Here is a training function that runs in one process. It is the kind of code you
# will want to spread over several GPUs one day:

# %%
def train_one_process(make_model, dataset, epochs: int, batch_size: int, lr: float,
                      seed: int) -> dict[str, torch.Tensor]:
    """SGD with momentum on (features, label) items; a new shuffled order every epoch."""
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for start in range(0, len(order), batch_size):
            items = [dataset[i] for i in order[start:start + batch_size]]
            images, labels = torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.state_dict()


# %% [markdown]
# ### Exercise 8 (3 points): `train_distributed`
#
# Write `train_distributed(make_model, dataset, epochs, batch_size, lr, seed)`, run on
# every rank of a process group, that trains **the same model to the same weights** as
# `train_one_process` with the same arguments, while each rank reads from `dataset`
# only **its own share** of the samples. `batch_size` is the batch of the
# one-process run, a multiple of the world size, and `len(dataset)` is a multiple of
# `batch_size`. Every rank returns the plain model's `state_dict()`.
#
# The check runs it in real groups of 2 and 3 processes, on datasets, models and
# seeds you have not seen, counts what each rank reads, and compares every rank's
# weights with `train_one_process`'s (up to rounding, 1e-5).
#
# *Hint:* find out which order of the samples `train_one_process` uses in each epoch,
# and which part of that order one step of all ranks together covers. Sections 5
# and 6 have every piece you need.

# %% solution="ex_train_distributed"
def train_distributed(make_model, dataset, epochs: int, batch_size: int, lr: float,
                      seed: int) -> dict[str, torch.Tensor]:
    """train_one_process's training on every rank of a group, each rank reading only its share of the data."""
    ### BEGIN SOLUTION
    torch.manual_seed(seed)  # the same start on every rank
    ddp_model = DistributedDataParallel(make_model())
    sgd = torch.optim.SGD(ddp_model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, seed=seed)  # the same order as randperm with seed + epoch
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            sgd.zero_grad()
            nn.functional.cross_entropy(ddp_model(x), y).backward()
            sgd.step()
    return ddp_model.module.state_dict()
    ### END SOLUTION


# %% check="ex_train_distributed_check"
check.check_train_distributed(train_distributed)

# %% graded="ex_train_distributed_tests" points=3
check.check_train_distributed(train_distributed)
### BEGIN HIDDEN TESTS
check.check_train_distributed(train_distributed, inputs=[check.WholeCase(3, 36, 12, 3, 3, 4, 5),
                                                         check.WholeCase(5, 16, 4, 1, 2, 3, 2),
                                                         check.WholeCase(8, 12, 3, 2, 3, 2, 2)])
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Averaging the gradients of equal shards gives the whole batch's gradient: data
#   parallelism reproduces single-device training, with the global batch split
#   over the ranks (per-process batch size = global batch size / world size).
# - Prefer `DistributedDataParallel` (one process per device) to `nn.DataParallel`.
# - A process group: `init_process_group` with NCCL (GPUs) or Gloo (CPUs), `env://`
#   or `tcp://`, a timeout; `destroy_process_group()` in a `finally` block. Rank,
#   local rank, world size.
# - The same seed on every rank; `DistributedSampler` with `set_epoch(epoch)` every
#   epoch; log and save on rank 0; `barrier()` before others use what rank 0 made.
# - Every rank calls the same collectives in the same order, or the group waits
#   until the timeout ("Connection closed by peer" if a rank has left).
# - Launch scripts with `torchrun` (not `torch.distributed.launch`); from a
#   notebook, fork. One port per job (`--standalone` or a free port); several
#   machines: `--nnodes`, `--node_rank`, a rendezvous address.
# - Too big for one device: model parallelism, or FSDP's `fully_shard`.
# - Lightning's `Trainer(devices=..., strategy=..., num_nodes=..., precision=...,
#   accumulate_grad_batches=...)` does all of the above.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
