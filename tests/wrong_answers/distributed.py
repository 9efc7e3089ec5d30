"""Lesson 08 Multiple GPUs and distributed training: the reference passes, plausible wrong answers fail by name.

Every case runs the learner-style function in a real Gloo group of processes.
"""

import math
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader
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


def port_fixed_but_tested():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 29517))  # free now, but the next job asks for the same one
    return 29517


def port_drawn_by_torch():
    return int(torch.randint(30000, 60000, ()))  # never asks whether anything listens there


def port_random_until_bind_works():  # right: a random port, kept only once a TCP bind to it succeeds
    import random
    import socket
    while True:
        port = random.randint(20000, 60000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def port_private_random():
    import random
    return random.Random().randrange(20000, 40000)


def port_udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---------------------------------------------------------------- average_gradients


def grads_summed(model):
    for p in [p for p in model.parameters() if p.grad is not None]:
        dist.all_reduce(p.grad)


def grads_halved(model):
    for p in [p for p in model.parameters() if p.grad is not None]:
        dist.all_reduce(p.grad)
        p.grad /= 2


def grads_reduced_to_rank0(model):
    for p in [p for p in model.parameters() if p.grad is not None]:
        dist.reduce(p.grad, dst=0)
        if dist.get_rank() == 0:
            p.grad /= dist.get_world_size()


def weights_averaged(model):
    for p in model.parameters():
        dist.all_reduce(p.data)
        p.data /= dist.get_world_size()


def grads_reduced_into_copies(model):
    for p in [p for p in model.parameters() if p.grad is not None]:
        total = p.grad.clone()
        dist.all_reduce(total)
        total /= dist.get_world_size()  # the average, left in the copy


def grads_by_broadcast(model):
    # Wrong: broadcast copies rank 0's gradient to every rank, it does not average
    for p in [p for p in model.parameters() if p.grad is not None]:
        dist.broadcast(p.grad, src=0)


def grads_weights_only(model):
    # Wrong: only the parameters named weight are averaged, the biases keep their own shard's gradient
    for name, p in model.named_parameters():
        if p.grad is not None and name.endswith("weight"):
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()


def grads_never_reduced(model):
    world_size = dist.get_world_size()  # noqa: F841  (and then nothing)


def grads_only_on_rank0(model):
    if dist.get_rank() == 0:
        ref.average_gradients(model)


def grads_mismatched_collective(model):
    if dist.get_rank() == 0:
        ref.average_gradients(model)
    else:
        dist.barrier()  # a different collective: both ranks wait until the timeout


def grads_every_parameter(model):
    world_size = dist.get_world_size()
    for p in model.parameters():  # a parameter outside the loss has .grad None
        dist.all_reduce(tensor=p.grad, op=dist.ReduceOp.SUM)
        p.grad.div_(world_size)


def grads_scaled_first(model):
    for p in model.parameters():
        p.grad *= 1 / dist.get_world_size()  # None *= ... before any collective
        dist.all_reduce(p.grad)


def grads_none_as_zeros(model):
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)  # a zero gradient moves nothing, like None
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


# ---------------------------------------------------------------- train_by_hand


def grads_world_size_from_environment(model):
    """Wrong under the notebook's run_on_ranks (and mp.spawn): only torchrun sets WORLD_SIZE; there this divides by 1."""
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world_size


def by_hand_rank_from_environment(make_model, inputs, targets, steps, seed, lr):
    """Wrong under the notebook's run_on_ranks: RANK is unset there, so every rank trains on shard 0."""
    rank, world_size = int(os.getenv("RANK", "0")), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


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


def by_hand_shard_by_split(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    x, y = inputs.split(len(inputs) // world_size)[rank], targets.split(len(targets) // world_size)[rank]
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_every_sample(make_model, inputs, targets, steps, seed, lr):
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((model(inputs) - targets) ** 2).mean()  # the same mean on every rank: averaging changes nothing
        loss.backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_built_then_seeded(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    torch.manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_grads_kept(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        nn.functional.mse_loss(model(x), y).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_one_step_more(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps + 1):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_shard_reversed(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size].flip(0), targets[rank::world_size].flip(0)  # order inside a mean is free
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        ref.average_gradients(model)
        optimizer.step()
        with torch.no_grad():
            model(x)  # an extra look without gradients is not training
    return model.state_dict()


def by_hand_logs_whole_loss(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        average_gradients_here = ref.average_gradients
        average_gradients_here(model)
        optimizer.step()
        if rank == 0:  # a look at the whole batch's loss, gradients on but never used
            print(f"step {step}: loss {nn.functional.mse_loss(model(inputs), targets).item():.4f}")
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


def ddp_seed_plus_rank(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed + rank)  # DDP's broadcast hides it: rank 0's weights win
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.module.state_dict()


def ddp_whole_batch(make_model, inputs, targets, steps, seed, lr):
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    return model.module.state_dict()


def ddp_never_seeded(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.module.state_dict()


def ddp_optimizer_of_another_model(make_model, inputs, targets, steps, seed, lr):
    """Wrong: the optimizer holds the first model's parameters; the wrapped (trained) model is a second one."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    torch.manual_seed(seed)
    ddp_model = DistributedDataParallel(make_model())
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp_model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return ddp_model.module.state_dict()


def by_hand_momentum(make_model, inputs, targets, steps, seed, lr):
    """Wrong: "steps steps of plain SGD"; momentum=0.9 added."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def ddp_lr_times_world(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * world_size)  # "linear scaling", wrong here
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.module.state_dict()


def ddp_grads_kept(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
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


def shard_tensor(n, rank, world_size, epoch, seed=0):
    return torch.tensor(ref.shard_indices(n, rank, world_size, epoch, seed))


def shard_list_of_tensors(n, rank, world_size, epoch, seed=0):
    return list(torch.tensor(ref.shard_indices(n, rank, world_size, epoch, seed)))


def shard_padded_once(n, rank, world_size, epoch, seed=0):
    order = _perm(n, seed + epoch)
    missing = -(-n // world_size) * world_size - n
    return (order + order[:missing])[rank::world_size]  # too short when the padding is longer than n


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


def epochs_not_shuffled(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # called, but with shuffle=False the epoch changes nothing
        seen.append([batch.tolist() for batch in loader])
    return seen


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


def epochs_tensor_batches(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append(list(loader))
    return seen


def epochs_counted_from_one(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def epochs_seeded_per_rank(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset, seed=dist.get_rank())
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


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


def save_module_pickled(model, path):
    if dist.get_rank() == 0:
        torch.save(model, path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=False).state_dict())


def save_loaded_into_a_copy(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    fresh = nn.Linear(4, 3)
    fresh.load_state_dict(torch.load(path, map_location="cpu"))
    model = fresh  # noqa: F841  (rebinds the local name only)


def save_load_without_map_location(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path))  # on a GPU machine: every rank's tensors land on rank 0's GPU


def save_map_location_positional(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, "cpu"))  # map_location is torch.load's second parameter


def save_seeded_for_every_rank(model, path):
    torch.manual_seed(0)  # "so that every rank agrees": it resets each rank's random stream instead
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_barrier_only_after_load(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
        dist.barrier()  # rank 0 waits here, the other ranks have already read the file
    else:
        model.load_state_dict(torch.load(path, map_location="cpu"))


# ---------------------------------------------------------------- correct answers written differently


def port_from_socket_module():
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("", 0))
        host, port = probe.getsockname()
    finally:
        probe.close()
    print("chose port", port)
    return port


def port_create_server():
    with socket.create_server(("127.0.0.1", 0)) as server:
        return server.getsockname()[1]


def port_with_reuse():
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def port_random_until_free():
    import random
    draw = random.Random()
    while True:
        candidate = draw.randrange(20000, 60000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue  # taken: try another
        return candidate


def grads_flattened_once(model):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)  # one exchange, written back below
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def grads_new_tensor(model):
    size = float(dist.get_world_size())
    for p in model.parameters():
        if p.grad is None:
            continue
        dist.all_reduce(p.grad.data)
        p.grad = p.grad / size


def grads_multiplied(model):
    for name, p in model.named_parameters():
        if p.grad is not None:
            dist.all_reduce(tensor=p.grad)
            p.grad.mul_(1 / dist.get_world_size())


def by_hand_keywords(make_model, inputs, targets, steps, seed, lr):
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(params=model.parameters(), lr=lr)
    shard = slice(dist.get_rank(), None, dist.get_world_size())
    for step in range(steps):
        prediction = model(inputs[shard])
        loss = nn.MSELoss()(prediction, targets[shard])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        ref.average_gradients(model)
        optimizer.step()
    return {k: v.clone() for k, v in model.state_dict().items()}


def by_hand_chunks(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr)
    index = torch.arange(rank, len(inputs), world_size)  # the same samples as inputs[rank::world_size]
    x, y = inputs.index_select(0, index), targets.index_select(0, index)
    for _ in range(steps):
        model.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        ref.average_gradients(model)
        optimizer.step()
    print("rank", rank, "done")
    return model.state_dict()


def by_hand_summed_gradients(make_model, inputs, targets, steps, seed, lr):
    # Wrong: the gradients all-reduced by hand and never divided by the world size
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
        optimizer.step()
    return model.state_dict()


def by_hand_averages_weights(make_model, inputs, targets, steps, seed, lr):
    # Wrong by the contract: each rank steps on its own gradient, then the weights are averaged (the same weights
    # with plain SGD only)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.data)
                p.data /= world_size
    return model.state_dict()


def by_hand_flat_buffer(make_model, inputs, targets, steps, seed, lr):
    # Correct: the gradients averaged through one flat buffer, by hand
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat)
        flat /= world_size
        for g, part in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(part.view_as(g))
        optimizer.step()
    return model.state_dict()


def by_hand_manual_update(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        for p in model.parameters():
            p.grad = None
        nn.functional.mse_loss(model(x), y).backward()
        ref.average_gradients(model)
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return model.state_dict()


def ddp_keywords(make_model, inputs, targets, steps, seed, lr):
    torch.manual_seed(seed)
    ddp_model = DistributedDataParallel(module=make_model())
    optimizer = torch.optim.SGD(params=ddp_model.parameters(), lr=lr)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = nn.MSELoss()(ddp_model(inputs[rank::world_size]), targets[rank::world_size])
        loss.backward()
        optimizer.step()
    return ddp_model.module.state_dict()


def ddp_prefix_stripped(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return {k.removeprefix("module."): v for k, v in model.state_dict().items()}


def ddp_plain_model_kept(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    wrapped = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)  # the same Parameter objects as the wrapper's
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(wrapped(x), y).backward()
        optimizer.step()
    return model.state_dict()


def shard_by_loop(n, rank, world_size, epoch, seed=0):
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    order = [int(i) for i in torch.randperm(n, generator=generator)]
    per_rank = math.ceil(n / world_size)
    padded = [order[i % n] for i in range(per_rank * world_size)]
    return [padded[i] for i in range(rank, len(padded), world_size)]


def shard_by_sampler(n, rank, world_size, epoch, seed=0):
    sampler = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    return list(sampler)


def shard_as_tensor_ops(n, rank, world_size, epoch, seed=0):
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
    total = -(-n // world_size) * world_size
    order = order.repeat(-(-total // n))[:total]
    return order[rank::world_size].tolist()


def epochs_keywords(dataset, global_batch_size, epochs):
    world_size = dist.get_world_size()
    sampler = DistributedSampler(dataset=dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset=dataset, batch_size=global_batch_size // world_size, sampler=sampler, shuffle=False)
    result = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch=epoch)
        result.append([[int(i) for i in batch] for batch in loader])
    return result


def epochs_explicit_rank(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank())
    per_process = global_batch_size // dist.get_world_size()
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in DataLoader(dataset, batch_size=per_process, sampler=sampler)])
    return seen


def epochs_batched_by_hand(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    per_process = global_batch_size // dist.get_world_size()
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = [dataset[i] for i in sampler]
        seen.append([order[i:i + per_process] for i in range(0, len(order), per_process)])
    return seen


def save_with_path_object(model, path):
    path = Path(path)
    if dist.get_rank() == 0:
        with open(path, "wb") as file:
            torch.save(model.state_dict(), file)
    dist.barrier()
    state = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
    model.load_state_dict(state)


def save_barrier_both_sides(model, path):
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), str(path))
        print("saved", path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_other_ranks_load(model, path):
    rank = dist.get_rank()
    if rank == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    if rank != 0:  # rank 0 already holds these weights
        model.load_state_dict(torch.load(path, map_location="cpu"))


def save_synced_by_all_reduce(model, path):
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.all_reduce(torch.zeros(1))  # any collective every rank reaches works as a barrier
    model.load_state_dict(torch.load(path, map_location="cpu"))


# ---------------------------------------------------------------- train_distributed (put together)


def _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, *, sampler_kwargs=None, per_process=None,
             set_epoch=True, wrap=True, return_wrapper=False):
    torch.manual_seed(seed)
    model = make_model()
    trained = DistributedDataParallel(model) if wrap else model
    optimizer = torch.optim.SGD(trained.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, **(sampler_kwargs if sampler_kwargs is not None else {"seed": seed}))
    size = per_process or batch_size // dist.get_world_size()
    loader = DataLoader(dataset, batch_size=size, sampler=sampler)
    for epoch in range(epochs):
        if set_epoch:
            sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(trained(images), labels).backward()
            optimizer.step()
    return trained.state_dict() if return_wrapper else model.state_dict()


def whole_own_block_shuffled(make_model, dataset, epochs, batch_size, lr, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    share = len(dataset) // world_size
    mine = list(range(rank * share, (rank + 1) * share))  # the same block every epoch
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    per = batch_size // world_size
    for epoch in range(epochs):
        order = torch.randperm(share, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for start in range(0, share, per):
            items = [dataset[mine[j]] for j in order[start:start + per]]
            images, labels = torch.stack([a for a, _ in items]), torch.tensor([b for _, b in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


def whole_without_momentum(make_model, dataset, epochs, batch_size, lr, seed):
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    sampler = DistributedSampler(dataset, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


def whole_loss_divided_by_world_size(make_model, dataset, epochs, batch_size, lr, seed):
    """Wrong: DDP already averages the gradients; dividing the loss by the world size shrinks every update."""
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            (nn.functional.cross_entropy(model(images), labels) / dist.get_world_size()).backward()
            optimizer.step()
    return model.module.state_dict()


def whole_without_set_epoch(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, set_epoch=False)


def whole_batch_per_process(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, per_process=batch_size)


def whole_sampler_default_seed(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, sampler_kwargs={})


def whole_not_shuffled(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, sampler_kwargs={"seed": seed, "shuffle": False})


def whole_never_wrapped(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, wrap=False)


def whole_wrapper_state(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, return_wrapper=True)


def whole_reads_everything(make_model, dataset, epochs, batch_size, lr, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        items = [dataset[i] for i in order]  # every sample, on every rank
        for start in range(0, len(items), batch_size):
            batch = items[start:start + batch_size][rank::world_size]
            images, labels = torch.stack([x for x, _ in batch]), torch.tensor([y for _, y in batch])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


def whole_explicit_replicas(make_model, dataset, epochs, batch_size, lr, seed):
    world_size, rank = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(seed)
    ddp_model = DistributedDataParallel(module=make_model())
    optimizer = torch.optim.SGD(params=ddp_model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=False)
    loader = DataLoader(dataset, batch_size=batch_size // world_size, sampler=sampler, shuffle=False)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for step, (images, labels) in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            loss = nn.CrossEntropyLoss()(ddp_model(images), labels)
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: last loss {loss.item():.3f}")
    return {k: v.clone() for k, v in ddp_model.module.state_dict().items()}


def whole_batches_by_hand(make_model, dataset, epochs, batch_size, lr, seed):
    world_size = dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    ddp_model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, seed=seed)
    per_process = batch_size // world_size
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        mine = list(sampler)
        for start in range(0, len(mine), per_process):
            items = [dataset[i] for i in mine[start:start + per_process]]
            images = torch.stack([x for x, _ in items])
            labels = torch.tensor([y for _, y in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp_model(images), labels).backward()
            optimizer.step()
    return model.state_dict()


def whole_seed_per_rank_broadcast(make_model, dataset, epochs, batch_size, lr, seed):
    torch.manual_seed(seed + dist.get_rank())  # DDP broadcasts rank 0's weights: the start is rank 0's, seed
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


# ---------------------------------------------------------------- the rules of `call`, and more causes named


def shard_on_the_default_generator(n, rank, world_size, epoch, seed=0):
    generator = torch.default_generator  # the global generator itself: seeding it resets the caller's stream
    generator.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=generator).tolist()
    total = math.ceil(n / world_size) * world_size
    return [order[i % n] for i in range(rank, total, world_size)]


def shard_padded_with_first_rank(n, rank, world_size, epoch, seed=0):
    order = _perm(n, seed + epoch)
    total = math.ceil(n / world_size) * world_size
    return (order + [order[rank % n]] * (total - n))[rank::world_size]  # pads with a copy of its own first index


def grads_divided_on_rank0_only(model):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    if dist.get_rank() == 0:
        flat.mul_(1 / dist.get_world_size())
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def by_hand_averaged_after_step(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
        ref.average_gradients(model)  # too late: the step already used this rank's own gradients
    return model.state_dict()


def by_hand_loss_over_world(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size])
        (loss / world_size).backward()  # "each rank's share of the loss": averaged twice
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_centres_inputs(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    inputs -= inputs.mean(dim=0)  # in place: the caller's batch changes too
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


def ddp_lr_over_world(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr / world_size)  # "each rank does 1/world of the step"
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.module.state_dict()


def whole_subset_per_rank(make_model, dataset, epochs, batch_size, lr, seed):
    from torch.utils.data import Subset

    rank, world_size = dist.get_rank(), dist.get_world_size()
    share = len(dataset) // world_size
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    mine = Subset(dataset, range(rank * share, (rank + 1) * share))
    loader = DataLoader(mine, batch_size=batch_size // world_size, shuffle=True)
    for _ in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


# ---------------------------------------------------------------- round 4: classes the independent learner found


def port_socket_never_bound():
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        return probe.getsockname()[1]  # unbound: the system has chosen nothing yet
    finally:
        probe.close()


def port_chosen_at_definition(_chosen=ref.free_port()):  # evaluated once, when the function is defined
    return _chosen


_first_port = {}


def port_found_on_first_call():
    if "port" not in _first_port:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            _first_port["port"] = probe.getsockname()[1]
    return _first_port["port"]


def grads_minimum(model):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    for g in grads:
        dist.all_reduce(g, op=dist.ReduceOp.MIN)


def grads_maximum_over_world(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.MAX)
            p.grad.div_(dist.get_world_size())


def epochs_full_batches_only(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset)
    batches = BatchSampler(sampler, global_batch_size // dist.get_world_size(), drop_last=True)
    loader = DataLoader(dataset, batch_sampler=batches)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def epochs_sampler_drops_odd_samples(dataset, global_batch_size, epochs):
    sampler = DistributedSampler(dataset, drop_last=True)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def whole_sampler_seed_per_rank(make_model, dataset, epochs, batch_size, lr, seed):
    return _ddp_run(make_model, dataset, epochs, batch_size, lr, seed, sampler_kwargs={"seed": seed + dist.get_rank()})


def whole_same_share_on_every_rank(make_model, dataset, epochs, batch_size, lr, seed):
    world_size = dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    per = batch_size // world_size
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        mine = order[:len(order) // world_size]  # the first part, whatever the rank
        for start in range(0, len(mine), per):
            items = [dataset[i] for i in mine[start:start + per]]
            images, labels = torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


def grads_avg_op(model):  # right: Gloo in this PyTorch has ReduceOp.AVG
    for grad in (p.grad for p in model.parameters() if p.grad is not None):
        dist.all_reduce(grad, op=dist.ReduceOp.AVG)


def epochs_drop_last_spelled_out(dataset, global_batch_size, epochs):  # right: both at their defaults, written out
    sampler = DistributedSampler(dataset, drop_last=False)
    loader = DataLoader(dataset, global_batch_size // dist.get_world_size(), sampler=sampler, drop_last=False)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([[int(i) for i in batch.tolist()] for batch in loader])
    return seen


CASES = [
    Accept(checks.check_free_port, ref.free_port),
    Accept(checks.check_free_port, port_from_socket_module),
    Accept(checks.check_free_port, port_create_server),
    Accept(checks.check_free_port, port_with_reuse),
    Accept(checks.check_free_port, port_random_until_free),
    Reject(checks.check_free_port, port_fixed, "no socket was bound to that port during either call"),
    Reject(checks.check_free_port, port_socket_never_bound, "no TCP socket was bound during the call"),
    Reject(checks.check_free_port, port_chosen_at_definition, "a port found once and kept"),
    Reject(checks.check_free_port, port_found_on_first_call, "it is the port an earlier call found, kept"),
    Reject(checks.check_free_port, port_fixed_but_tested, "Address already in use"),
    Reject(checks.check_free_port, port_drawn_by_torch, "nothing asked the system whether it is free"),
    Accept(checks.check_free_port, port_random_until_bind_works),
    Reject(checks.check_free_port, port_private_random, "nothing asked the system whether it is free"),
    Reject(checks.check_free_port, port_udp, "a port it got for a UDP socket"),
    Reject(checks.check_free_port, port_tuple, "getsockname() gives (host, port)"),
    Reject(checks.check_free_port, port_zero, "binding port 0 asks the system"),
    Reject(checks.check_free_port, port_kept_open, "close the socket"),
    Reject(checks.check_free_port, port_as_text, "should return the port as an int"),
    Accept(checks.check_average_gradients, ref.average_gradients),
    Accept(checks.check_average_gradients, grads_flattened_once),
    Accept(checks.check_average_gradients, grads_new_tensor),
    Accept(checks.check_average_gradients, grads_multiplied),
    Accept(checks.check_average_gradients, grads_none_as_zeros),
    Reject(checks.check_average_gradients, grads_every_parameter, "dist.all_reduce was given None"),
    Reject(checks.check_average_gradients, grads_scaled_first, "its .grad is None: there is nothing to average"),
    Reject(checks.check_average_gradients, grads_summed, "the sum over the 2 ranks, not the average"),
    Reject(checks.check_average_gradients, grads_halved, "divided by 2, but the world size is 3"),
    Reject(checks.check_average_gradients, grads_reduced_to_rank0, "dist.reduce gives it to one rank"),
    Reject(checks.check_average_gradients, grads_divided_on_rank0_only, "only rank 0 divided by the world size"),
    Reject(checks.check_average_gradients, weights_averaged, "on the parameters (the weights) and never on their .grad"),
    Reject(checks.check_average_gradients, grads_reduced_into_copies, "never on a parameter's .grad itself"),
    Reject(checks.check_average_gradients, grads_never_reduced, "dist.all_reduce was never called"),
    Reject(checks.check_average_gradients, grads_by_broadcast, "dist.broadcast was called and dist.all_reduce never"),
    Reject(checks.check_average_gradients, grads_weights_only, "but never 0.bias.grad"),
    Reject(checks.check_train_by_hand, by_hand_summed_gradients, "the gradients were summed over the ranks"),
    Reject(checks.check_train_by_hand, by_hand_averages_weights, "all-reduced the weights themselves"),
    Accept(checks.check_train_by_hand, by_hand_flat_buffer),
    Reject(checks.check_average_gradients, grads_minimum, "element-wise minimum over the 2 ranks' gradients, not"),
    Reject(checks.check_average_gradients, grads_maximum_over_world,
           "element-wise maximum over the 2 ranks' gradients divided by the world size"),
    Reject(checks.check_average_gradients, grads_only_on_rank0, "waited in a collective that another rank never called"),
    Accept(checks.check_train_by_hand, ref.train_by_hand),
    Reject(checks.check_train_by_hand, by_hand_rank_from_environment, "read the environment variable(s) RANK"),
    Reject(checks.check_average_gradients, grads_world_size_from_environment,
           "read the environment variable(s) WORLD_SIZE, which this check's ranks do not have"),
    Accept(checks.check_average_gradients, grads_avg_op),
    Accept(checks.check_train_by_hand, by_hand_keywords),
    Accept(checks.check_train_by_hand, by_hand_chunks),
    Accept(checks.check_train_by_hand, by_hand_manual_update),
    Accept(checks.check_train_by_hand, by_hand_shard_reversed),
    Accept(checks.check_train_by_hand, by_hand_logs_whole_loss),
    Reject(checks.check_train_by_hand, by_hand_seed_per_rank, "a different seed per rank"),
    Reject(checks.check_train_by_hand, by_hand_shard_by_split, "a contiguous block of the batch"),
    Reject(checks.check_train_by_hand, by_hand_every_sample, "every rank trained on the whole batch"),
    Reject(checks.check_train_by_hand, by_hand_built_then_seeded, "must come before make_model()"),
    Reject(checks.check_train_by_hand, by_hand_grads_kept, "backward() adds to .grad"),
    Reject(checks.check_train_by_hand, by_hand_one_step_more, "ran 4 forward passes with gradients for steps=3"),
    Reject(checks.check_train_by_hand, by_hand_no_average, "were not averaged across the ranks"),
    Reject(checks.check_train_by_hand, by_hand_averaged_after_step, "after backward() (which writes them) and before"),
    Reject(checks.check_train_by_hand, by_hand_loss_over_world, "average_gradients already averages the gradients"),
    Reject(checks.check_train_by_hand, by_hand_centres_inputs, "changed the tensor it was given as `inputs`"),
    Reject(checks.check_train_by_hand, by_hand_summed_loss, "the loss is summed over the shard"),
    Accept(checks.check_train_ddp, ref.train_ddp),
    Accept(checks.check_train_ddp, ddp_keywords),
    Accept(checks.check_train_ddp, ddp_prefix_stripped),
    Accept(checks.check_train_ddp, ddp_plain_model_kept),
    Reject(checks.check_train_ddp, ddp_wrapper_state, "return ddp_model.module.state_dict()"),
    Reject(checks.check_train_ddp, ddp_never_wrapped, "wrap the model in DistributedDataParallel"),
    Reject(checks.check_train_ddp, ddp_seeded_with_rank, "the rank as the seed"),
    Reject(checks.check_train_ddp, ddp_seed_plus_rank, "a different seed per rank (seed + rank)"),
    Reject(checks.check_train_ddp, ddp_whole_batch, "every rank trained on the whole batch"),
    Reject(checks.check_train_ddp, ddp_never_seeded, "the model was built from the generator's state"),
    Reject(checks.check_train_ddp, ddp_lr_times_world, "the learning rate times the world size"),
    Reject(checks.check_train_ddp, ddp_lr_over_world, "DistributedDataParallel already averages the gradients"),
    Reject(checks.check_train_ddp, ddp_grads_kept, "backward() adds to .grad"),
    Reject(checks.check_train_ddp, ddp_summed_loss, "the loss is summed over the shard"),
    Accept(checks.check_shard_indices, ref.shard_indices),
    Accept(checks.check_shard_indices, shard_by_loop),
    Accept(checks.check_shard_indices, shard_by_sampler),
    Accept(checks.check_shard_indices, shard_as_tensor_ops),
    Reject(checks.check_shard_indices, shard_tensor, "a tensor ("),
    Reject(checks.check_shard_indices, shard_list_of_tensors, "a list of tensors"),
    Reject(checks.check_shard_indices, shard_padded_once, "is longer than the list (1)"),
    Reject(checks.check_shard_indices, shard_no_padding, "the ranks got different numbers of indices"),
    Reject(checks.check_shard_indices, shard_drop_last, "that is drop_last=True"),
    Reject(checks.check_shard_indices, shard_contiguous, "deals them out like cards"),
    Reject(checks.check_shard_indices, shard_ignores_epoch, "the same order as epoch 0"),
    Reject(checks.check_shard_indices, shard_unshuffled, "are not shuffled"),
    Reject(checks.check_shard_indices, shard_padded_with_first_rank, "only the padding differs"),
    Reject(checks.check_shard_indices, shard_on_the_default_generator, "draw from the generator (or seed) the task gives you"),
    Accept(checks.check_epoch_batches, ref.epoch_batches),
    Accept(checks.check_epoch_batches, epochs_keywords),
    Accept(checks.check_epoch_batches, epochs_explicit_rank),
    Accept(checks.check_epoch_batches, epochs_batched_by_hand),
    Accept(checks.check_epoch_batches, epochs_drop_last_spelled_out),
    Reject(checks.check_epoch_batches, epochs_tensor_batches, "its first batch is a tensor"),
    Reject(checks.check_epoch_batches, epochs_counted_from_one, "the order the sampler gives for epoch e + 1"),
    Reject(checks.check_epoch_batches, epochs_seeded_per_rank, "a sampler seeded with its rank (1)"),
    Reject(checks.check_epoch_batches, epochs_without_set_epoch, "its epoch never changed"),
    Reject(checks.check_epoch_batches, epochs_not_shuffled, "nothing shuffled them"),
    Reject(checks.check_epoch_batches, epochs_without_sampler, "pass sampler=DistributedSampler(dataset)"),
    Reject(checks.check_epoch_batches, epochs_global_batch_per_process, "global_batch_size // world_size"),
    Reject(checks.check_epoch_batches, epochs_shuffle_and_sampler, "mutually exclusive with shuffle"),
    Reject(checks.check_epoch_batches, epochs_full_batches_only, "drops each epoch's last batch when it holds fewer"),
    Reject(checks.check_epoch_batches, epochs_sampler_drops_odd_samples, "saw the share of a DistributedSampler(..., "
           "drop_last=True)"),
    Accept(checks.check_save_and_load, ref.save_and_load),
    Accept(checks.check_save_and_load, save_with_path_object),
    Accept(checks.check_save_and_load, save_barrier_both_sides),
    Accept(checks.check_save_and_load, save_other_ranks_load),
    Reject(checks.check_save_and_load, save_on_every_rank, "only rank 0 should save"),
    Reject(checks.check_save_and_load, save_without_barrier, "call dist.barrier() between saving and loading"),
    Accept(checks.check_save_and_load, save_map_location_positional),
    Reject(checks.check_save_and_load, save_seeded_for_every_rank, "reseeded torch's global random generator"),
    Reject(checks.check_save_and_load, save_load_without_map_location,
           "on rank 0, torch.load raised RuntimeError: Attempting to deserialize object on a CUDA device"),
    Reject(checks.check_save_and_load, save_load_on_rank0_only, "never loaded the checkpoint"),
    Accept(checks.check_save_and_load, save_synced_by_all_reduce),
    Reject(checks.check_save_and_load, save_barrier_inside_rank0, "rank(s) [0] called dist.barrier(), rank(s) [1] did not"),
    Reject(checks.check_save_and_load, save_module_pickled, "saved the model object itself"),
    Reject(checks.check_save_and_load, save_loaded_into_a_copy, "still holds its own weights from before the call"),
    Reject(checks.check_save_and_load, save_barrier_only_after_load, "every rank must call it"),
    Accept(checks.check_train_distributed, ref.train_distributed),
    Accept(checks.check_train_distributed, whole_explicit_replicas),
    Accept(checks.check_train_distributed, whole_batches_by_hand),
    Accept(checks.check_train_distributed, whole_seed_per_rank_broadcast),
    Reject(checks.check_train_distributed, whole_own_block_shuffled, "in epoch 0, step 1 the ranks together read"),
    Reject(checks.check_train_distributed, whole_subset_per_rank, "only its own contiguous block of the dataset"),
    Reject(checks.check_train_distributed, whole_without_momentum, "train_one_process's optimizer has momentum=0.9"),
    Reject(checks.check_train_distributed, whole_loss_divided_by_world_size,
           "do not divide the loss or the learning rate by the world size"),
    Reject(checks.check_train_ddp, ddp_optimizer_of_another_model,
           "give the optimizer the parameters of the model you train"),
    Reject(checks.check_train_by_hand, by_hand_momentum, "the weights are those of SGD with momentum=0.9"),
    Reject(checks.check_train_distributed, whole_without_set_epoch, "the epoch never changed it"),
    Reject(checks.check_train_distributed, whole_batch_per_process, "each process loaded the whole batch_size"),
    Reject(checks.check_train_distributed, whole_sampler_default_seed, "a sampler seeded with 0 + epoch"),
    Reject(checks.check_train_distributed, whole_not_shuffled, "the samples were not shuffled"),
    Reject(checks.check_train_distributed, whole_never_wrapped, "ended with other weights than rank 0"),
    Reject(checks.check_train_distributed, whole_wrapper_state, "that is the DDP wrapper's state_dict"),
    Reject(checks.check_train_distributed, whole_reads_everything, "only its own share"),
    Reject(checks.check_train_distributed, whole_sampler_seed_per_rank, "the ranks shuffled differently"),
    Reject(checks.check_train_distributed, whole_same_share_on_every_rank, "every rank read the same 12 samples"),
]


# ---------------------------------------------------------------- round 5: the global generator, seeded once


def _train_on_orders(make_model, dataset, epochs, batch_size, lr, seed, order_of):
    """Each epoch's order from ``order_of(epoch)``; each rank takes its contiguous part of every global batch."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    per_rank = batch_size // world_size
    for epoch in range(epochs):
        order = order_of(epoch)
        for start in range(0, len(order), batch_size):
            mine = order[start:start + batch_size][rank * per_rank:(rank + 1) * per_rank]
            items = [dataset[i] for i in mine]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(torch.stack([x for x, _ in items])),
                                               torch.tensor([y for _, y in items]))
            loss.backward()
            optimizer.step()
    return model.module.state_dict()


def whole_global_reseed_per_epoch(make_model, dataset, epochs, batch_size, lr, seed):
    """The right order, drawn from the global generator reseeded with seed + epoch (the weights come out right)."""
    def order_of(epoch):
        torch.random.manual_seed(seed + epoch)
        return torch.randperm(len(dataset)).tolist()
    return _train_on_orders(make_model, dataset, epochs, batch_size, lr, seed, order_of)


def whole_own_generator_chunks(make_model, dataset, epochs, batch_size, lr, seed):
    """Correct: train_one_process's order from a generator of its own, each rank its chunk of every batch."""
    def order_of(epoch):
        return torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    return _train_on_orders(make_model, dataset, epochs, batch_size, lr, seed, order_of)


def epochs_set_epoch_after_the_batches(dataset, global_batch_size, epochs):
    """set_epoch called, but at the end of each epoch: every epoch reads the previous one's order."""
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    out = []
    for epoch in range(epochs):
        out.append([batch.tolist() for batch in loader])
        sampler.set_epoch(epoch)
    return out


def check_three_epochs(fn):
    checks.check_epoch_batches(fn, inputs=[checks.EpochCase(10, 4, 3, 2)])


CASES += [
    Reject(checks.check_train_distributed, whole_global_reseed_per_epoch,
           "reseeded torch's global random generator after building the model (torch.manual_seed(1), "
           "torch.manual_seed(2))"),
    Reject(checks.check_train_distributed, whole_global_reseed_per_epoch, "throws away the random stream"),
    Accept(checks.check_train_distributed, whole_own_generator_chunks),
    Reject(check_three_epochs, epochs_set_epoch_after_the_batches,
           "epoch e saw the order the sampler gives for epoch e - 1 (epoch 0's twice)"),
    Reject(checks.check_epoch_batches, epochs_set_epoch_after_the_batches, "a call after the epoch's batches"),
    Reject(check_three_epochs, epochs_without_set_epoch, "its epoch never changed"),
    Reject(check_three_epochs, epochs_counted_from_one, "the order the sampler gives for epoch e + 1"),
    *[Accept(check_three_epochs, answer) for answer in (ref.epoch_batches, epochs_keywords, epochs_batched_by_hand,
                                                        epochs_explicit_rank)],
]


# ---------------------------------------------------------------- round 6: a world size of 2 written into the code,
# average_gradients before backward, a barrier after the load


# The notebook's own average_gradients, as a learner's train_by_hand finds it: check_train_by_hand puts the
# check's in its place (substitute) while it runs.
average_gradients = ref.average_gradients


def by_hand_world_of_two(make_model, inputs, targets, steps, seed, lr):
    """Shards with a world size of 2 written in: right on 2 processes, wrong on 3."""
    rank = dist.get_rank()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::2]), targets[rank::2]).backward()
        average_gradients(model)
        optimizer.step()
    return model.state_dict()


def by_hand_averaged_before_backward(make_model, inputs, targets, steps, seed, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs[rank::world_size], targets[rank::world_size]
    for _ in range(steps):
        optimizer.zero_grad()
        average_gradients(model)  # too early: zero_grad() left every .grad None, backward() has not run yet
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model.state_dict()


def by_hand_grads_set_to_none(make_model, inputs, targets, steps, seed, lr):
    """Correct: an index tensor for the shard, .grad set to None by hand, the SGD update written out."""
    torch.manual_seed(seed)
    model = make_model()
    idx = torch.arange(dist.get_rank(), len(inputs), dist.get_world_size())
    my_inputs, my_targets = inputs[idx], targets[idx]
    for _ in range(steps):
        for p in model.parameters():
            p.grad = None
        loss = ((model(my_inputs) - my_targets) ** 2).mean()
        loss.backward()
        average_gradients(model)
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
    return model.state_dict()


def by_hand_mse_module(make_model, inputs, targets, steps, seed, lr):
    """Correct: nn.MSELoss, model.zero_grad(), the shard sliced in every step, the state dict copied."""
    torch.manual_seed(seed)
    model = make_model()
    criterion = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr)
    r, ws = dist.get_rank(), dist.get_world_size()
    for _ in range(steps):
        model.zero_grad()
        criterion(model(inputs[r::ws]), targets[r::ws]).backward()
        average_gradients(model)
        opt.step()
    return {k: v.clone() for k, v in model.state_dict().items()}


def ddp_world_of_two(make_model, inputs, targets, steps, seed, lr):
    rank = dist.get_rank()
    torch.manual_seed(seed)
    model = make_model()
    ddp_model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp_model(inputs[rank::2]), targets[rank::2]).backward()
        optimizer.step()
    return model.state_dict()


def ddp_optimizer_before_wrapping(make_model, inputs, targets, steps, seed, lr):
    """Correct: the optimizer built on the plain model before it is wrapped (the same parameters)."""
    torch.manual_seed(seed)
    net = make_model()
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    ddp = DistributedDataParallel(net)
    r, ws = dist.get_rank(), dist.get_world_size()
    x, y = inputs[r::ws], targets[r::ws]
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        nn.MSELoss()(ddp(x), y).backward()
        optimizer.step()
    return ddp.module.state_dict()


def whole_world_of_two(make_model, dataset, epochs, batch_size, lr, seed):
    rank = dist.get_rank()
    torch.manual_seed(seed)
    model = make_model()
    ddp_model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for start in range(0, len(order), batch_size):
            items = [dataset[i] for i in order[start:start + batch_size][rank::2]]
            images, labels = torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp_model(images), labels).backward()
            optimizer.step()
    return model.state_dict()


def whole_contiguous_chunks(make_model, dataset, epochs, batch_size, lr, seed):
    """Correct: each rank its contiguous chunk of every global batch, the wrapper's module's weights."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local = batch_size // world_size
    torch.manual_seed(seed)
    ddp = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(len(dataset), generator=g).tolist()
        for start in range(0, len(order), batch_size):
            chunk = order[start + rank * local:start + (rank + 1) * local]
            xs, ys = zip(*(dataset[i] for i in chunk))
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp(torch.stack(xs)), torch.tensor(ys)).backward()
            optimizer.step()
    return ddp.module.state_dict()


def whole_sampler_shuffle_spelled_out(make_model, dataset, epochs, batch_size, lr, seed):
    """Correct: DistributedSampler(shuffle=True, seed=seed) built before the model, the plain model's weights."""
    world_size = dist.get_world_size()
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // world_size, sampler=sampler)
    torch.manual_seed(seed)
    model = make_model()
    ddp_model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp_model(images), labels).backward()
            optimizer.step()
    return model.state_dict()


def whole_averaged_by_hand(make_model, dataset, epochs, batch_size, lr, seed):
    """Correct: no DDP; the gradients averaged with average_gradients, a strided share of every batch."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for start in range(0, len(order), batch_size):
            items = [dataset[i] for i in order[start + rank:start + batch_size:world_size]]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(torch.stack([x for x, _ in items])),
                                        torch.tensor([y for _, y in items])).backward()
            average_gradients(model)
            optimizer.step()
    return model.state_dict()


def save_barrier_after_load(model, path):
    """Every rank calls the barrier, but after its load: rank 1 reads before rank 0 has written."""
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, map_location="cpu"))
    dist.barrier()


def save_atomically(model, path):
    """Correct: rank 0 writes a temporary file and renames it; a barrier; a weights_only load."""
    import os
    path = Path(path)
    if dist.get_rank() == 0:
        tmp = path.with_name(path.name + ".tmp")
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def check_save_over_older_file(fn):
    checks.check_save_and_load(fn, inputs=[checks.SaveCase(1, 2, older_file=True)])


CASES += [
    Reject(checks.check_train_by_hand, by_hand_world_of_two,
           "forward 1 of rank 0's model (with gradients) saw the samples [0, 2, 4, 6, 8] of the 9"),
    Reject(checks.check_train_by_hand, by_hand_world_of_two,
           "that is inputs[rank::2]: a world size of 2, written into the code, while this group has 3 processes"),
    Reject(checks.check_train_by_hand, by_hand_averaged_before_backward,
           "average_gradients ran before backward(): each of its 3 call(s) on rank 0 found every parameter's .grad "
           "None or zero"),
    Accept(checks.check_train_by_hand, by_hand_grads_set_to_none),
    Accept(checks.check_train_by_hand, by_hand_mse_module),
    Reject(checks.check_train_ddp, ddp_world_of_two,
           "that is inputs[rank::2]: a world size of 2, written into the code, while this group has 3 processes"),
    Accept(checks.check_train_ddp, ddp_optimizer_before_wrapping),
    Reject(checks.check_train_distributed, whole_world_of_two,
           "rank 0 read 12 samples from the dataset in 2 epoch(s): in every step the samples at positions 0, 2, ..."),
    Reject(checks.check_train_distributed, whole_world_of_two,
           "that is batch[rank::2]: a world size of 2, written into the code, while this group has 3 processes"),
    Accept(checks.check_train_distributed, whole_contiguous_chunks),
    Accept(checks.check_train_distributed, whole_sampler_shuffle_spelled_out),
    Accept(checks.check_train_distributed, whole_averaged_by_hand),
    Reject(checks.check_save_and_load, save_barrier_after_load,
           "rank(s) [0] called dist.barrier() only after loading the file, and rank 1 loaded it before calling any "
           "barrier"),
    Reject(checks.check_save_and_load, save_barrier_after_load, "The barrier must come after the save and before the load"),
    Reject(check_save_over_older_file, save_barrier_after_load,
           "every rank called dist.barrier() only after loading the file"),
    Accept(checks.check_save_and_load, save_atomically),
    Reject(check_save_over_older_file, save_without_barrier, "call dist.barrier() between saving and loading"),
    Reject(check_save_over_older_file, save_barrier_inside_rank0, "is one inside `if rank == 0:`?"),
    *[Accept(check_save_over_older_file, answer) for answer in (ref.save_and_load, save_with_path_object,
                                                                save_barrier_both_sides, save_other_ranks_load,
                                                                save_atomically)],
]


# From a third learner tester (lesson 08): messages that named a difference between the ranks, or a torch.load,
# where there was none.
def save_get_rank_uncalled(model, path):
    if dist.get_rank == 0:  # the function itself, never 0: no rank saves
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_then_broadcast(model, path):
    # the other ranks get rank 0's weights by broadcast and never read the file
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)


def epochs_shuffle_and_sampler(dataset, global_batch_size, epochs):
    # DataLoader refuses shuffle=True with a sampler: the same ValueError on every rank
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler, shuffle=True)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


CASES += [
    Reject(checks.check_save_and_load, save_get_rank_uncalled, "dist.get_rank without parentheses"),
    Reject(checks.check_save_and_load, save_then_broadcast, "so they came some other way"),
    Reject(checks.check_epoch_batches, epochs_shuffle_and_sampler, "raised ValueError on every rank"),
]


def _whole_run(model, dataset, epochs, batch_size, lr, seed):
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


def whole_seeded_after_model(make_model, dataset, epochs, batch_size, lr, seed):
    model = DistributedDataParallel(make_model())
    torch.manual_seed(seed)  # too late: the model's weights are drawn already
    return _whole_run(model, dataset, epochs, batch_size, lr, seed)


def whole_lr_times_world_size(make_model, dataset, epochs, batch_size, lr, seed):
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    return _whole_run(model, dataset, epochs, batch_size, lr * dist.get_world_size(), seed)


CASES += [
    Reject(checks.check_train_distributed, whole_seeded_after_model, "seed torch's global generator with seed first"),
    Reject(checks.check_train_distributed, whole_lr_times_world_size, "learning rate multiplied by the world size"),
    Reject(checks.check_train_distributed, whole_without_momentum, "look at the optimizer you make"),
]


def epochs_sampler_seed_one(dataset, global_batch_size, epochs):
    # seed=1 gives, in epoch e, the order of epoch e + 1 under the default seed: the message names both causes
    sampler = DistributedSampler(dataset, seed=1)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


CASES += [
    Reject(checks.check_epoch_batches, epochs_sampler_seed_one, "or the sampler was made with seed=1"),
]


def by_hand_targets_in_blocks(make_model, inputs, targets, steps, seed, lr):
    # Wrong: the inputs dealt out like cards, the targets cut into contiguous blocks: outputs meet other targets
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    x, y = inputs[rank::world_size], targets.chunk(world_size)[rank]
    for _ in range(steps):
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        ref.average_gradients(model)
        optimizer.step()
    return model.state_dict()


CASES += [
    Reject(checks.check_train_by_hand, by_hand_targets_in_blocks, "its loss compared them with the targets of the "
                                                                  "samples [0, 1, 2"),
]


# ---------------------------------------------------------------- what the learner-tester found (lesson 08, round e)

def by_hand_parameters_only(make_model, inputs, targets, steps, seed, lr):
    # Wrong: the contract returns the parameters and the buffers by name; named_parameters() leaves out the buffers
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        ref.average_gradients(model)
        optimizer.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def save_every_rank_deletes_first(model, path):
    # Wrong: every rank removes the older file, with no barrier between a delete and rank 0's save: a late delete
    # removes the new checkpoint
    if os.path.exists(path):
        os.remove(path)
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_rank_zero_deletes_first(model, path):  # right: only rank 0 touches the file
    if dist.get_rank() == 0:
        Path(path).unlink(missing_ok=True)
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def save_every_rank_deletes_behind_a_barrier(model, path):  # right, if roundabout: the deletes come before the save
    if os.path.exists(path):
        os.remove(path)
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    model.load_state_dict(torch.load(path, map_location="cpu"))


def whole_with_loader_workers(make_model, dataset, epochs, batch_size, lr, seed):
    # Wrong here: the ranks are daemon processes, which cannot start DataLoader workers
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size // dist.get_world_size(), sampler=sampler, num_workers=2)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model.module.state_dict()


def average_async_never_waited(model):
    # Wrong: async_op=True returns a work handle at once; the division reads the gradient before the sum is there
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, async_op=True)
            p.grad /= dist.get_world_size()


def average_async_waited(model):  # right: every handle is waited on before the gradients are used
    handles = [(p, dist.all_reduce(p.grad, async_op=True)) for p in model.parameters() if p.grad is not None]
    for p, handle in handles:
        handle.wait()
        p.grad /= dist.get_world_size()


def ddp_gpu_recipe(make_model, inputs, targets, steps, seed, lr):
    # Wrong here: the ranks run on the CPU with Gloo; the GPU recipe moves the model to cuda:rank
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model().to(rank)
    ddp = DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp(inputs[rank::world_size].to(rank)), targets[rank::world_size].to(rank)).backward()
        optimizer.step()
    return model.state_dict()


def ddp_device_ids_on_cpu(make_model, inputs, targets, steps, seed, lr):
    # Wrong here: device_ids is for a model on a GPU
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    ddp = DistributedDataParallel(make_model(), device_ids=[rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return ddp.module.state_dict()


def ddp_forward_through_module(make_model, inputs, targets, steps, seed, lr):
    # Wrong: the forward skips the wrapper, so DDP never averages the gradients
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    ddp = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp.module(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return ddp.module.state_dict()


def ddp_forward_through_plain_model(make_model, inputs, targets, steps, seed, lr):
    # Wrong: the model is wrapped, but the forward goes through the model itself
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = make_model()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs[rank::world_size]), targets[rank::world_size]).backward()
        optimizer.step()
    return model.state_dict()


def epochs_new_sampler_old_loader(dataset, global_batch_size, epochs):
    # Wrong: a new sampler each epoch, but the loader still iterates the first one (whose epoch never changes)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler = DistributedSampler(dataset)
        sampler.set_epoch(epoch)
        seen.append([batch.tolist() for batch in loader])
    return seen


def epochs_strided_subset_shuffled(dataset, global_batch_size, epochs):
    # Wrong: no DistributedSampler; a strided Subset shuffled by the loader is another order
    from torch.utils.data import Subset
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mine = Subset(dataset, list(range(rank, len(dataset), world_size)))
    seen = []
    for epoch in range(epochs):
        loader = DataLoader(mine, batch_size=global_batch_size // world_size, shuffle=True,
                            generator=torch.Generator().manual_seed(epoch))
        seen.append([batch.tolist() for batch in loader])
    return seen


def shard_one_too_many(n, rank, world_size, epoch, seed=0):
    # Wrong: (n // world_size + 1) * world_size pads one index per rank too many when n divides evenly
    indices = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    total = (n // world_size + 1) * world_size
    while len(indices) < total:
        indices += indices[:total - len(indices)]
    return indices[rank:total:world_size]


_SHARD_GENERATOR = torch.Generator().manual_seed(0)


def shard_generator_seeded_once(n, rank, world_size, epoch, seed=0):
    # Wrong: a generator seeded once, at module level: epoch 0's draw is right, the later calls draw new orders
    indices = torch.randperm(n, generator=_SHARD_GENERATOR).tolist()
    total = -(-n // world_size) * world_size
    while len(indices) < total:
        indices += indices[:total - len(indices)]
    return indices[rank::world_size]


def whole_generator_seeded_once(make_model, dataset, epochs, batch_size, lr, seed):
    # Wrong: one generator seeded once with seed; epoch e draws its next order instead of seeding seed + e
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(dataset), generator=generator).tolist()
        for start in range(0, len(order), batch_size):
            items = [dataset[i] for i in order[start + rank:start + batch_size:world_size]]
            x, y = torch.stack([a for a, _ in items]), torch.tensor([b for _, b in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    return model.module.state_dict()


def whole_block_of_the_epoch(make_model, dataset, epochs, batch_size, lr, seed):
    # Wrong: each rank takes a contiguous block of the whole epoch's order, not its share of each batch
    rank, world_size = dist.get_rank(), dist.get_world_size()
    per, n = batch_size // world_size, len(dataset)
    torch.manual_seed(seed)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for epoch in range(epochs):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        mine = order[rank * n // world_size:(rank + 1) * n // world_size]
        for start in range(0, len(mine), per):
            items = [dataset[i] for i in mine[start:start + per]]
            x, y = torch.stack([a for a, _ in items]), torch.tensor([b for _, b in items])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    return model.module.state_dict()


CASES += [
    Reject(checks.check_train_by_hand, by_hand_parameters_only, "the model's buffer(s) ['2.scale'] are missing"),
    Reject(checks.check_save_and_load, save_every_rank_deletes_first, "no barrier stood between its delete and rank "
                                                                      "0's save"),
    Accept(checks.check_save_and_load, save_rank_zero_deletes_first),
    Accept(checks.check_save_and_load, save_every_rank_deletes_behind_a_barrier),
    Reject(checks.check_train_distributed, whole_with_loader_workers, "cannot start child processes, and a "
                                                                      "DataLoader with num_workers > 0"),
    Reject(checks.check_average_gradients, average_async_never_waited, "returned a work handle that was never waited "
                                                                       "on"),
    Accept(checks.check_average_gradients, average_async_waited),
    Reject(checks.check_train_ddp, ddp_gpu_recipe, "these ranks run on the CPU with the Gloo backend"),
    Reject(checks.check_train_ddp, ddp_device_ids_on_cpu, "keep the model and the data on the CPU and leave out "
                                                          "device_ids"),
    Reject(checks.check_train_ddp, ddp_forward_through_module, "training forward(s) never called the wrapper"),
    Reject(checks.check_train_ddp, ddp_forward_through_plain_model, "the forward must call the DDP wrapper"),
    Reject(checks.check_epoch_batches, epochs_new_sampler_old_loader, "the DataLoader still iterates the sampler it "
                                                                      "was built with"),
    Reject(checks.check_epoch_batches, epochs_strided_subset_shuffled, "not the order of a DistributedSampler, and "
                                                                       "the function made none"),
    Reject(checks.check_shard_indices, shard_one_too_many, "one more than its share: 12 divides evenly"),
    Reject(checks.check_shard_indices, shard_generator_seeded_once, "matched DistributedSampler's; this later one "
                                                                    "does not"),
    Reject(checks.check_train_distributed, whole_generator_seeded_once, "the next draws of one generator seeded once"),
    Reject(checks.check_train_distributed, whole_block_of_the_epoch, "each rank took a contiguous block of the whole "
                                                                     "epoch's order"),
]
