"""Lesson 08 Multiple GPUs and distributed training: the reference passes, plausible wrong answers fail by name.

Every case runs the learner-style function in a real Gloo group of processes.
"""

import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from helpers.checks import distributed as checks
from helpers.reference import distributed as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- free_port


def port_fixed():
    return 29500


def port_tuple():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()


def port_zero():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return 0


_reserved = []


def port_kept_open():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    _reserved.append(probe)  # "reserving" the port keeps it taken
    return probe.getsockname()[1]


def port_as_text():
    return str(ref.free_port())


# ---------------------------------------------------------------- average_gradients


def grads_summed(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def grads_halved(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 2


def grads_reduced_to_rank0(model):
    for p in model.parameters():
        dist.reduce(p.grad, dst=0)
        if dist.get_rank() == 0:
            p.grad /= dist.get_world_size()


def weights_averaged(model):
    for p in model.parameters():
        dist.all_reduce(p.data)
        p.data /= dist.get_world_size()


def grads_only_on_rank0(model):
    if dist.get_rank() == 0:
        ref.average_gradients(model)


def grads_mismatched_collective(model):
    if dist.get_rank() == 0:
        ref.average_gradients(model)
    else:
        dist.barrier()  # a different collective: both ranks wait until the timeout


# ---------------------------------------------------------------- train_by_hand


def by_hand_seed_per_rank(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed + rank)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_no_average(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.state_dict()


def by_hand_summed_loss(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size], reduction="sum").backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


# ---------------------------------------------------------------- train_ddp


def ddp_wrapper_state(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.state_dict()


def ddp_never_wrapped(make_model, inputs, targets, steps, seed, lr):
    return by_hand_no_average(make_model, inputs, targets, steps, seed, lr)


def ddp_seeded_with_rank(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.module.state_dict()


def ddp_summed_loss(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size], reduction="sum").backward()
        optimizer.step()
    return model.module.state_dict()


# ---------------------------------------------------------------- shard_indices


def _perm(n, seed):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def shard_no_padding(n, rank, world_size, epoch, seed=0):
    return _perm(n, seed + epoch)[rank::world_size]


def shard_drop_last(n, rank, world_size, epoch, seed=0):
    indices = _perm(n, seed + epoch)
    return indices[: n // world_size * world_size][rank::world_size]


def shard_contiguous(n, rank, world_size, epoch, seed=0):
    indices = _perm(n, seed + epoch)
    per = -(-n // world_size)
    indices += indices[: per * world_size - n]
    return indices[rank * per:(rank + 1) * per]


def shard_ignores_epoch(n, rank, world_size, epoch, seed=0):
    return ref.shard_indices(n, rank, world_size, 0, seed)


def shard_unshuffled(n, rank, world_size, epoch, seed=0):
    indices = list(range(n))
    per = -(-n // world_size)
    indices += indices[: per * world_size - n]
    return indices[rank::world_size]


# ---------------------------------------------------------------- epoch_batches


def epochs_without_set_epoch(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    return [[batch.tolist() for batch in loader] for _ in range(epochs)]


def epochs_without_sampler(dataset, global_batch_size, epochs):
    generator = torch.Generator().manual_seed(0)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), shuffle=True,
                        generator=generator)
    return [[batch.tolist() for batch in loader] for _ in range(epochs)]


def epochs_global_batch_per_process(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size, sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def epochs_shuffle_and_sampler(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler, shuffle=True)
    return [[batch.tolist() for batch in loader] for _ in range(epochs)]


# ---------------------------------------------------------------- save_and_load


def save_on_every_rank(model, path):
    torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_without_barrier(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_load_on_rank0_only(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
        model.load_state_dict(torch.load(path, map_location="cpu"))
    dist.barrier()


def save_barrier_inside_rank0(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
        dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


CASES = [
    Accept(checks.check_free_port, ref.free_port),
    Reject(checks.check_free_port, port_fixed, "a fixed port clashes"),
    Reject(checks.check_free_port, port_tuple, "getsockname() gives (host, port)"),
    Reject(checks.check_free_port, port_zero, "binding port 0 asks the system"),
    Reject(checks.check_free_port, port_kept_open, "close the socket"),
    Reject(checks.check_free_port, port_as_text, "should return the port as an int"),
    Accept(checks.check_average_gradients, ref.average_gradients),
    Reject(checks.check_average_gradients, grads_summed, "the sum over the 2 ranks, not the average"),
    Reject(checks.check_average_gradients, grads_halved, "divided by 2, but the world size is 3"),
    Reject(checks.check_average_gradients, grads_reduced_to_rank0, "dist.reduce gives it to one rank"),
    Reject(checks.check_average_gradients, weights_averaged, "the ranks never exchanged their gradients"),
    Reject(checks.check_average_gradients, grads_only_on_rank0, "waited in a collective that another rank never called"),
    Accept(checks.check_train_by_hand, ref.train_by_hand),
    Reject(checks.check_train_by_hand, by_hand_seed_per_rank, "a different seed per rank"),
    Reject(checks.check_train_by_hand, by_hand_no_average, "the gradients were never averaged"),
    Reject(checks.check_train_by_hand, by_hand_summed_loss, "the loss is summed over the shard"),
    Accept(checks.check_train_ddp, ref.train_ddp),
    Reject(checks.check_train_ddp, ddp_wrapper_state, "return ddp_model.module.state_dict()"),
    Reject(checks.check_train_ddp, ddp_never_wrapped, "wrap the model in DistributedDataParallel"),
    Reject(checks.check_train_ddp, ddp_seeded_with_rank, "a run seeded with 0, not with `seed`"),
    Reject(checks.check_train_ddp, ddp_summed_loss, "the loss is summed over the shard"),
    Accept(checks.check_shard_indices, ref.shard_indices),
    Reject(checks.check_shard_indices, shard_no_padding, "the ranks got different numbers of indices"),
    Reject(checks.check_shard_indices, shard_drop_last, "that is drop_last=True"),
    Reject(checks.check_shard_indices, shard_contiguous, "deals them out like cards"),
    Reject(checks.check_shard_indices, shard_ignores_epoch, "the same order as epoch 0"),
    Reject(checks.check_shard_indices, shard_unshuffled, "are not shuffled"),
    Accept(checks.check_epoch_batches, ref.epoch_batches),
    Reject(checks.check_epoch_batches, epochs_without_set_epoch, "call sampler.set_epoch(epoch)"),
    Reject(checks.check_epoch_batches, epochs_without_sampler, "pass sampler=DistributedSampler(dataset)"),
    Reject(checks.check_epoch_batches, epochs_global_batch_per_process, "global_batch_size // world_size"),
    Reject(checks.check_epoch_batches, epochs_shuffle_and_sampler, "mutually exclusive with shuffle"),
    Accept(checks.check_save_and_load, ref.save_and_load),
    Reject(checks.check_save_and_load, save_on_every_rank, "only rank 0 should save"),
    Reject(checks.check_save_and_load, save_without_barrier, "(FileNotFoundError): call dist.barrier()"),
    Reject(checks.check_save_and_load, save_load_on_rank0_only, "never loaded the checkpoint"),
    Reject(checks.check_save_and_load, save_barrier_inside_rank0, "call dist.barrier() between saving and loading"),
]
