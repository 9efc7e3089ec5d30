# %% [markdown]
# # 06 Saving, loading and resuming
#
# Training takes time, and jobs get interrupted: a laptop sleeps, a shared GPU
# machine kills jobs after 24 hours, a bug crashes the program in epoch 9 of 10.
# A **checkpoint** saves everything needed to continue, so that a run that was
# stopped and resumed ends with exactly the same weights as one that never
# stopped. This lesson builds such checkpoints and proves that equality with
# `torch.equal`.
#
# You will also load a checkpoint that was saved on a GPU onto a computer
# without one, prepare a loaded model for predictions, and handle the checkpoints
# that multi-GPU training writes.
#
# There are 7 graded exercises worth 20 points. Each has a self-check cell right
# below it: run it, read its message, fix, repeat.

# %% locked="setup"
import pickle
import shutil
import zipfile
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset
from torchvision import datasets, transforms

from helpers.checks import checkpoints as check
from helpers.data import MNIST_MEAN, MNIST_STD, data_root
from helpers.device import pick_device

torch.manual_seed(0)
DEVICE = pick_device()
CHECKPOINT_DIR = Path("checkpoints")  # next to this notebook
shutil.rmtree(CHECKPOINT_DIR, ignore_errors=True)  # every run of the notebook starts clean
CHECKPOINT_DIR.mkdir()

# %% [markdown]
# ## 1. `torch.save` and `torch.load`
#
# `torch.save(obj, path)` writes tensors, and containers of tensors (dicts,
# lists, tuples) mixed with plain numbers and strings, to one file.
# `torch.load(path)` reads it back.

# %%
first = CHECKPOINT_DIR / "first.pt"
torch.save({"scores": torch.tensor([[0.1, 0.9], [0.7, 0.3]]), "step": 3, "note": "plain values are fine"}, first)
print(torch.load(first))

# %% [markdown]
# The file is a zip archive. `data.pkl` is a Python pickle of the structure
# (the dict, its keys, the numbers); the contents of each tensor are stored
# separately, as raw bytes under `data/`, and the pickle refers to them by number,
# together with the **device** each tensor came from. That last detail matters
# in section 6.

# %%
for name in zipfile.ZipFile(first).namelist():
    print(name)

# %% [markdown]
# ## 2. `state_dict`: what a model and an optimizer know
#
# A model's `state_dict()` maps every parameter and buffer (such as batch norm's
# running statistics) to its tensor, keyed by the attribute path (`"0.weight"` is
# the weight of the first layer of a `Sequential`). `load_state_dict` copies such
# a dict into a model of the same architecture.

# %%
def make_net() -> nn.Sequential:
    """A small classifier for 4 features and 2 classes."""
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))


torch.manual_seed(0)
net = make_net()
for name, tensor in net.state_dict().items():
    print(f"{name:9} {list(tensor.shape)}")

torch.save(net.state_dict(), CHECKPOINT_DIR / "net.pt")
same_architecture = make_net()  # new random weights...
print(same_architecture.load_state_dict(torch.load(CHECKPOINT_DIR / "net.pt")))  # ...replaced by the saved ones
print("equal weights:", torch.equal(same_architecture[0].weight, net[0].weight))

# %% [markdown]
# An optimizer has state too. SGD with momentum keeps a velocity for every
# parameter; Adam keeps two running averages and a step count. The state appears
# after the first `step()`. `param_groups` holds the settings (learning rate,
# momentum, ...); parameters are referred to by **position** (0, 1, 2, ...), so
# a saved optimizer state must be loaded into an optimizer built the same way,
# over the same model.

# %%
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
print("before any step:", optimizer.state_dict()["state"])
net(torch.randn(5, 4)).sum().backward()
optimizer.step()
state = optimizer.state_dict()
print("param_groups:", {k: v for k, v in state["param_groups"][0].items() if k in ("lr", "momentum", "params")})
print("state:", {index: {name: list(t.shape) for name, t in s.items()} for index, s in state["state"].items()})

# %% [markdown]
# ## 3. Save the `state_dict`, not the model object
#
# `torch.save(model, path)` also works: it pickles the whole object. But a pickle
# records a class by its **import path** (`my_project.models.Net`), not by its
# code. Loading then needs that class, importable under that exact name, with
# code compatible with the saved attributes; rename a file or refactor the class
# and old checkpoints stop loading. And unpickling can run arbitrary code, so
# loading a pickled object from a stranger's file is a security risk.
#
# A `state_dict` holds only tensors under string keys, so it loads into any
# version of your code that builds the same layers.
#
# **Changed in PyTorch 2.6:** `torch.load` now defaults to `weights_only=True`. It
# unpickles only tensors, primitive types, dicts, lists and a short allowlist,
# and refuses everything else. State dicts and checkpoint dicts load as before;
# a whole pickled model does not:

# %%
torch.save(net, CHECKPOINT_DIR / "whole_model.pt")
try:
    torch.load(CHECKPOINT_DIR / "whole_model.pt")
except pickle.UnpicklingError as error:
    print("UnpicklingError:", next(line.strip() for line in str(error).splitlines() if "WeightsUnpickler" in line))

# %% [markdown]
# To load such a file anyway, pass `weights_only=False`, **only for files you
# trust** (or allowlist its classes with `torch.serialization.safe_globals`).
# Better: save state dicts, and never need either.
#
# ## 4. A checkpoint that can resume training
#
# To continue training as if nothing had happened, a checkpoint must hold every
# piece of state that the next epoch reads:
#
# | key | value | why |
# | --- | --- | --- |
# | `"epoch"` | the epoch that just finished (from 0) | where to continue |
# | `"model"` | `model.state_dict()` | the weights |
# | `"optimizer"` | `optimizer.state_dict()` | momentum buffers, Adam's moment estimates, current learning rate |
# | `"scheduler"` | `scheduler.state_dict()` | how far along the schedule is |
# | `"torch_rng"` | `torch.get_rng_state()` | the global random stream: dropout masks |
# | `"loader_rng"` | `generator.get_state()` | the DataLoader's own stream: the shuffle order |
# | `"loss"` | a float | for your logs |
#
# (With mixed precision, add the `GradScaler`'s `state_dict()`, lesson 07; on GPUs
# add `torch.cuda.get_rng_state_all()`; if your code uses Python's `random`, add
# `random.getstate()`. NumPy's `np.random.get_state()` holds a NumPy array, which
# `weights_only=True` refuses, so convert it to a tensor first, or draw your
# random numbers from PyTorch instead.)
#
# Why the random states? A DataLoader with `shuffle=True` draws a new order for
# every epoch from its generator. Restore the generator's state and the same
# order comes back; skip that and the resumed run sees the data in a different
# order than the uninterrupted one would have:

# %%
generator = torch.Generator().manual_seed(0)
loader = DataLoader(list(range(8)), batch_size=4, shuffle=True, generator=generator)
saved = generator.get_state()
print("epoch order:           ", [batch.tolist() for batch in loader])
print("next epoch:            ", [batch.tolist() for batch in loader])
generator.set_state(saved)
print("after set_state(saved):", [batch.tolist() for batch in loader])

# %% [markdown]
# ### Exercise 1 (4 points): `save_checkpoint`
#
# Write `save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)`
# that saves a dict with exactly the keys of the table above to `path`. The
# contract:
#
# - The file loads with `torch.load`'s safe default (`weights_only=True`).
# - Restoring it into freshly built objects, in a new process, continues the run
#   exactly where it stopped.
# - Saving changes nothing: not the objects you are given, not the random streams.
#
# Two graded cells: model, optimizer, epoch and loss (2 points); scheduler and
# both random states, tested by resuming from your file (2 points).
#
# *Hint:* a random stream's *state* and its *seed* are different things: which
# one continues a stream where it stopped?

# %% solution="ex_save_checkpoint"
def save_checkpoint(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generator: torch.Generator,
    epoch: int,
    loss: float,
) -> None:
    """Save everything needed to continue training after ``epoch`` to ``path``."""
    ### BEGIN SOLUTION
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
    ### END SOLUTION


# %% check="ex_save_checkpoint_check"
check.check_save_checkpoint_basics(save_checkpoint)
check.check_save_checkpoint_resume_state(save_checkpoint)

# %% graded="ex_save_checkpoint_basics_tests" points=2
check.check_save_checkpoint_basics(save_checkpoint)
### BEGIN HIDDEN TESTS
check.check_save_checkpoint_basics(save_checkpoint, inputs=[check.Case(5, 14, 4, 5, 3)])
### END HIDDEN TESTS

# %% graded="ex_save_checkpoint_resume_tests" points=2
check.check_save_checkpoint_resume_state(save_checkpoint)
### BEGIN HIDDEN TESTS
check.check_save_checkpoint_resume_state(save_checkpoint, inputs=[check.Case(6, 9, 2, 4, 2)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 (4 points): `load_checkpoint`
#
# Write `load_checkpoint(path, model, optimizer, scheduler, generator)`, the
# inverse of `save_checkpoint`. The contract:
#
# - The objects you are given were built fresh, as in a new process. Afterwards
#   they, and torch's global random stream, are in exactly the state the file
#   recorded: the next epoch runs as it would have without the interruption.
# - It returns the number of the **next** epoch to run.
# - The file may have been written on a machine with a GPU: everything must load
#   onto the CPU, on any machine. (The checks hand you a file whose tensors were
#   saved on `cuda:0`. Section 6 explains `torch.load`'s `map_location`.)
#
# Two graded cells: model and optimizer (2 points); scheduler, random states and
# the returned epoch (2 points).
#
# *Hint:* for every way of reading a state in the table (`state_dict()`,
# `get_state()`, `get_rng_state()`) PyTorch has a matching way of writing it back.

# %% solution="ex_load_checkpoint"
def load_checkpoint(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generator: torch.Generator,
) -> int:
    """Restore a checkpoint saved by save_checkpoint; return the epoch to continue with."""
    ### BEGIN SOLUTION
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1
    ### END SOLUTION


# %% check="ex_load_checkpoint_check"
check.check_load_checkpoint_states(load_checkpoint)
check.check_load_checkpoint_resume(load_checkpoint)

# %% graded="ex_load_checkpoint_states_tests" points=2
check.check_load_checkpoint_states(load_checkpoint)
### BEGIN HIDDEN TESTS
check.check_load_checkpoint_states(load_checkpoint, inputs=[check.Case(7, 14, 4, 5, 3)])
### END HIDDEN TESTS

# %% graded="ex_load_checkpoint_resume_tests" points=2
check.check_load_checkpoint_resume(load_checkpoint)
### BEGIN HIDDEN TESTS
check.check_load_checkpoint_resume(load_checkpoint, inputs=[check.Case(8, 9, 2, 4, 3)])
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Resuming exactly
#
# A training script that survives interruptions does two things: at the start,
# if a checkpoint exists, it loads it and continues from the epoch after the
# saved one; and it saves a checkpoint at the end of **every** epoch, so a crash
# loses at most one epoch of work.
#
# ### Exercise 3 (4 points): `train_resumable`
#
# Write `train_resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)`.
# `run_epoch(model, loader, optimizer, scheduler)` trains one epoch and returns its
# loss. The contract:
#
# - When it returns, `epochs` epochs are finished **in total**, counting those a
#   killed earlier run recorded in `path` (a fresh run finds no file there).
# - A job killed at any moment loses at most the epoch it was in.
# - A run that was killed and started again with fresh objects ends with weights
#   **exactly** equal to those of a run that was never stopped.
# - Use your `save_checkpoint` and `load_checkpoint` for the file.
#
# The check kills your function in the middle of a run, starts it again with
# fresh objects (sometimes twice) and compares the final weights with a run that
# was never stopped. Two graded cells: the right epochs run (2 points), equal
# weights (2 points).

# %% solution="ex_train_resumable"
def train_resumable(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loader: DataLoader,
    generator: torch.Generator,
    epochs: int,
    path: Path,
    run_epoch: Callable[..., float],
) -> None:
    """Train until ``epochs`` epochs are done, resuming from ``path`` if it exists."""
    ### BEGIN SOLUTION
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
    ### END SOLUTION


# %% check="ex_train_resumable_check"
check.check_resume_epochs(train_resumable)
check.check_resume_equal(train_resumable)

# %% graded="ex_train_resumable_epochs_tests" points=2
check.check_resume_epochs(train_resumable)
### BEGIN HIDDEN TESTS
check.check_resume_epochs(train_resumable, inputs=[check.Case(9, 14, 4, 5, 3), check.Case(10, 8, 3, 2, 1)])
### END HIDDEN TESTS

# %% graded="ex_train_resumable_equal_tests" points=2
check.check_resume_equal(train_resumable)
### BEGIN HIDDEN TESTS
check.check_resume_equal(train_resumable, inputs=[check.Case(11, 14, 4, 5, 3), check.Case(12, 9, 2, 4, 1)])
### END HIDDEN TESTS

# %% [markdown]
# ### Seeing it on MNIST
#
# Now the same on real digits: a small classifier with dropout, 1,000 training
# digits shuffled every epoch, SGD with momentum and a one-cycle schedule stepped
# every batch, for 3 epochs. It runs on the CPU on every machine, because our
# checkpoint saves the CPU's random state: on a GPU, dropout draws from the GPU's
# own generator, so a checkpoint for GPU training also needs
# `torch.cuda.get_rng_state_all()` (restored with `torch.cuda.set_rng_state_all`).
#
# First a run that is never interrupted:

# %%
EPOCHS = 3
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
train_digits = Subset(datasets.MNIST(root=data_root(), train=True, download=True, transform=transform), range(1000))


def make_run(seed: int):
    """Model, optimizer, scheduler, loader and the loader's generator, seeded with ``seed``."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(train_digits, batch_size=50, shuffle=True, generator=generator)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, epochs=EPOCHS,
                                                    steps_per_epoch=len(loader))
    return model, optimizer, scheduler, loader, generator


def run_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer,
              scheduler: torch.optim.lr_scheduler.LRScheduler) -> float:
    """Train one epoch (the schedule steps every batch); return the mean loss per sample."""
    model.train()
    total, count = 0.0, 0
    for images, digits in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), digits)
        loss.backward()
        optimizer.step()
        scheduler.step()
        total += loss.item() * len(digits)
        count += len(digits)
    return total / count


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    """True when every tensor of the two state dicts is exactly equal."""
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


never_stopped, *rest = make_run(seed=0)
train_resumable(never_stopped, *rest, EPOCHS, CHECKPOINT_DIR / "never_stopped.pt", run_epoch)
print("finished epochs:", torch.load(CHECKPOINT_DIR / "never_stopped.pt")["epoch"] + 1)

# %% [markdown]
# Now a run that is killed during its second epoch. `KeyboardInterrupt` is what
# Python raises when you press Ctrl+C or interrupt the kernel:

# %%
def killed_after(epochs_done: int):
    """A run_epoch that plays a job killed once ``epochs_done`` epochs have finished."""
    finished = []

    def run(*args) -> float:
        if len(finished) == epochs_done:
            raise KeyboardInterrupt(f"killed during epoch {epochs_done + 1}")
        finished.append(run_epoch(*args))
        return finished[-1]

    return run


stopped_path = CHECKPOINT_DIR / "stopped.pt"
model, *rest = make_run(seed=0)
try:
    train_resumable(model, *rest, EPOCHS, stopped_path, killed_after(1))
except KeyboardInterrupt as stop:
    print("stopped:", stop)
print("the checkpoint holds epoch", torch.load(stopped_path)["epoch"])
_ = shutil.copy(stopped_path, CHECKPOINT_DIR / "stopped_copy.pt")  # kept for the experiment below

# %% [markdown]
# A new process starts with different random weights and different random
# states (seed 123 here), then resumes from the checkpoint:

# %%
resumed, *rest = make_run(seed=123)
train_resumable(resumed, *rest, EPOCHS, stopped_path, run_epoch)
print("resumed run equals the uninterrupted run:", same_weights(resumed, never_stopped))

# %% [markdown]
# Exactly equal, bit for bit. Now the same resume with one piece missing: after
# loading, the loader's generator is reseeded, as if its state had not been saved.

# %%
broken, optimizer, scheduler, loader, generator = make_run(seed=123)
start = load_checkpoint(CHECKPOINT_DIR / "stopped_copy.pt", broken, optimizer, scheduler, generator)
generator.manual_seed(123)  # the shuffle state is lost
for epoch in range(start, EPOCHS):
    run_epoch(broken, loader, optimizer, scheduler)
print("without the loader's random state, equal:", same_weights(broken, never_stopped))
largest = max((x - y).abs().max().item() for x, y in zip(broken.state_dict().values(), never_stopped.state_dict().values()))
print(f"largest weight difference: {largest:.2g}")

# %% [markdown]
# The same digits were seen, in a different order, so the weights ended up
# elsewhere. Such a run still trains, but it cannot be reproduced, and a result
# that cannot be reproduced cannot be debugged or compared fairly.
#
# ## 6. `map_location`: a GPU checkpoint on a CPU machine
#
# Remember the device recorded for every tensor in the file: `torch.load` puts
# each tensor back on the device it was saved from. A checkpoint written on a
# GPU server names `cuda:0`, and loading it on a laptop without a GPU fails.
#
# To show this without a GPU, `check.make_cuda_checkpoint` writes a real
# checkpoint with every tensor tagged `cuda:0`: exactly the file `torch.save`
# writes when the tensors are on a GPU.

# %%
gpu_path = check.make_cuda_checkpoint(CHECKPOINT_DIR / "trained_on_gpu.pt",
                                      {"model": net.state_dict(), "epoch": 7})
print("devices recorded in the file:", check.storage_locations(gpu_path))
try:
    on_gpu = torch.load(gpu_path)
    print("this machine has a GPU: the tensors went back to", on_gpu["model"]["0.weight"].device)
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# `map_location` tells `torch.load` where to put the tensors instead:
# `"cpu"`, a device such as `DEVICE` (the one `pick_device()` chose for this
# notebook), or a dict that renames devices (`{"cuda:1": "cuda:0"}`).

# %%
checkpoint = torch.load(gpu_path, map_location="cpu")
print("map_location='cpu':   ", checkpoint["model"]["0.weight"].device)
checkpoint = torch.load(gpu_path, map_location=DEVICE)
print("map_location=DEVICE:  ", checkpoint["model"]["0.weight"].device)

# %% [markdown]
# ### Exercise 4 (1 point): load a GPU checkpoint on the CPU
#
# Write `load_on_cpu(path)` that loads a checkpoint saved on a GPU and returns the
# whole checkpoint (the dict) with every tensor on the CPU.

# %% solution="ex_load_on_cpu"
def load_on_cpu(path: Path) -> dict:
    """Load a checkpoint that was saved on a GPU onto the CPU."""
    ### BEGIN SOLUTION
    return torch.load(path, map_location="cpu")
    ### END SOLUTION


# %% check="ex_load_on_cpu_check"
check.check_load_on_cpu(load_on_cpu)

# %% graded="ex_load_on_cpu_tests" points=1
check.check_load_on_cpu(load_on_cpu)
### BEGIN HIDDEN TESTS
check.check_load_on_cpu(load_on_cpu, inputs=[7, 8])
### END HIDDEN TESTS

# %% [markdown]
# ## 7. After loading: `eval()` to predict, `train()` to continue
#
# `load_state_dict` restores weights, not the mode. A model built fresh is in
# training mode, so dropout is active: the same image can get different scores
# on every call. Before predicting, call `model.eval()`. Before training further,
# call `model.train()` (our `run_epoch` does that at the start of every epoch).

# %%
predictor, *_ = make_run(seed=1)
predictor.load_state_dict(torch.load(CHECKPOINT_DIR / "never_stopped.pt")["model"])
image = train_digits[0][0].unsqueeze(0)
with torch.no_grad():
    print("training mode, twice equal:", torch.equal(predictor(image), predictor(image)))
    predictor.eval()
    print("eval mode, twice equal:    ", torch.equal(predictor(image), predictor(image)))
    print("predicted digit:", predictor(image).argmax(dim=1).item(), " true digit:", train_digits[0][1])

# %% [markdown]
# ### Exercise 5 (2 points): a model ready for predictions
#
# Write `load_for_inference(path, model)` that loads a checkpoint written by
# `save_checkpoint`, copies its model weights into `model`, and returns the
# model ready to predict: the same image gets the same scores every time. The
# file may come from a GPU machine: load onto the CPU. Keep `torch.load`'s safe
# default (`weights_only=True`): a checkpoint of state dicts does not need more.

# %% solution="ex_load_for_inference"
def load_for_inference(path: Path, model: nn.Module) -> nn.Module:
    """The checkpoint's weights in ``model``, in evaluation mode."""
    ### BEGIN SOLUTION
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    return model.eval()
    ### END SOLUTION


# %% check="ex_load_for_inference_check"
check.check_load_for_inference(load_for_inference)

# %% graded="ex_load_for_inference_tests" points=2
check.check_load_for_inference(load_for_inference)
### BEGIN HIDDEN TESTS
check.check_load_for_inference(load_for_inference, inputs=[check.Case(13, 14, 4, 3, 2)])
### END HIDDEN TESTS

# %% [markdown]
# ## 8. Checkpoints from multi-GPU training
#
# `nn.DataParallel` and `DistributedDataParallel` (lesson 08) wrap your model: the
# original sits in the wrapper's `.module` attribute, so every key of the
# wrapper's `state_dict()` starts with `module.`. (`DataParallel` also runs on a
# CPU; it just has nothing to split the work across.)

# %%
wrapped = nn.DataParallel(make_net())
print(list(wrapped.state_dict())[:2])
print(list(wrapped.module.state_dict())[:2])

# %% [markdown]
# Save `model.module.state_dict()` and the file loads into a plain model. Save the
# wrapper's and a plain model rejects it:

# %%
try:
    make_net().load_state_dict(wrapped.state_dict())
except RuntimeError as error:
    print(str(error).splitlines()[0])
    print(str(error).splitlines()[1].strip()[:90], "...")

# %% [markdown]
# In distributed training every process (every **rank**) holds identical
# weights after each step, so only one of them should write the checkpoint;
# several processes writing one file at once can corrupt it. The pattern in a
# DDP script (lesson 08 runs one):
#
# ```python
# if dist.get_rank() == 0:                      # only rank 0 writes
#     save_checkpoint(path, model.module, optimizer, scheduler, generator, epoch, loss)
# dist.barrier()                                # the others wait until the file is complete
# # to load on every rank, map the saving GPU to this process's GPU:
# checkpoint = torch.load(path, map_location={"cuda:0": f"cuda:{local_rank}"})
# ```
#
# For files that were already saved with the prefix, strip it.
#
# ### Exercise 6 (2 points): `strip_module_prefix`
#
# Write `strip_module_prefix(state_dict)` that returns a new dict whose keys lose
# a **leading** `module.`, in the same order, with the same tensors. Keys without
# the prefix stay as they are. Careful: `module.` can also appear inside a key,
# for example in `module.submodule.weight`.
#
# *Hint:* `str.removeprefix`.

# %% solution="ex_strip_prefix"
def strip_module_prefix(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Remove a leading 'module.' from every key that has one."""
    ### BEGIN SOLUTION
    return {key.removeprefix("module."): value for key, value in state_dict.items()}
    ### END SOLUTION


# %% check="ex_strip_prefix_check"
check.check_strip_module_prefix(strip_module_prefix)

# %% graded="ex_strip_prefix_tests" points=2
check.check_strip_module_prefix(strip_module_prefix)
### BEGIN HIDDEN TESTS
check.check_strip_module_prefix(strip_module_prefix, inputs=[
    nn.DataParallel(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))).state_dict(),
    {"module.encoder.submodule.weight": torch.ones(2), "decoder.module.bias": torch.zeros(1)},
])
### END HIDDEN TESTS

# %%
plain = make_net()
print(plain.load_state_dict(strip_module_prefix(wrapped.state_dict())))

# %% [markdown]
# ## 9. Putting it together: make a given run resumable
#
# Here is someone else's training run. `check.jitter_run(seed)` builds everything
# it needs, as a new process would: a small classifier with dropout, Adam, a
# learning-rate schedule, and a shuffling loader with its own generator.
# `check.jitter_epoch(run)` trains one epoch of it. Read that function before you
# start (`check.jitter_epoch??` in a cell shows its code): it is the only
# description of the run you get.

# %%
run = check.jitter_run(seed=0)
print(type(run.optimizer).__name__, type(run.scheduler).__name__, len(run.loader), "batches per epoch")
print("epoch losses:", [round(check.jitter_epoch(run), 3) for _ in range(3)])

# %% [markdown]
# ### Exercise 7 (3 points): resumable, exactly
#
# Write `train_jittered(run, epochs, path, after_epoch)` with this contract:
#
# - When it returns, `epochs` epochs of `check.jitter_epoch(run)` are finished in
#   total, counting the ones a killed earlier job recorded in `path` (a new job
#   finds no file there).
# - After every epoch, once nothing of it can be lost any more, it calls
#   `after_epoch(epoch)` with that epoch's number (0, 1, ...). The job may be
#   killed inside that call.
# - A job killed and started again (with a `run` built from other seeds, as a new
#   process would) ends with weights **exactly** equal to those of a job that was
#   never stopped. So does a job killed twice.
# - The file loads with `torch.load`'s default `weights_only=True`.
#
# The graded tests use other seeds, epoch counts and moments of the kill.
#
# *Hint:* list everything `jitter_epoch` reads or changes, including every random
# number it draws, and where each one comes from.

# %% solution="ex_train_jittered"
def train_jittered(run: check.JitterRun, epochs: int, path: Path, after_epoch: Callable[[int], None]) -> None:
    """Run ``check.jitter_epoch(run)`` until ``epochs`` epochs are done in total, resumable from ``path``."""
    ### BEGIN SOLUTION
    import random

    model, optimizer, scheduler, _, generator = run
    start = 0
    if Path(path).exists():
        saved = torch.load(path, map_location="cpu")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        torch.set_rng_state(saved["torch_rng"])
        generator.set_state(saved["loader_rng"])
        random.setstate(saved["python_rng"])
        start = saved["epoch"] + 1
    for epoch in range(start, epochs):
        loss = check.jitter_epoch(run)
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "loader_rng": generator.get_state(), "python_rng": random.getstate(), "loss": loss}, path)
        after_epoch(epoch)
    ### END SOLUTION


# %% check="ex_train_jittered_check"
check.check_train_jittered(train_jittered)

# %% graded="ex_train_jittered_tests" points=3
check.check_train_jittered(train_jittered)
### BEGIN HIDDEN TESTS
check.check_train_jittered(train_jittered, inputs=[check.JitterCase(61, 4, (1,)), check.JitterCase(62, 6, (2, 4))])
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Save `state_dict()`s, not objects: they load into any code that builds the
#   same layers, and `torch.load`'s default `weights_only=True` (PyTorch 2.6+)
#   accepts them while refusing pickled objects.
# - A resumable checkpoint holds the epoch, model, optimizer, scheduler, the
#   global and the loader's random states (and the `GradScaler`'s, with mixed
#   precision). Restore them all and resume at `epoch + 1`, and the resumed run
#   equals the uninterrupted one exactly.
# - Save after every epoch; resume when the file exists.
# - `map_location="cpu"` loads a GPU checkpoint on a machine without one.
# - After loading: `eval()` before predicting, `train()` before training.
# - Multi-GPU wrappers add `module.`: save `model.module.state_dict()`, strip a
#   leading `module.` from old files, and let only rank 0 write.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
