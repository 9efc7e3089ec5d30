"""Lesson 06 Saving, loading and resuming: checks for every exercise, and a CUDA checkpoint maker.

Each ``check_*`` takes the learner's function and, optionally, extra inputs
(the graded cells pass hidden ones). It prints one pass line or raises
CheckError naming the mistake.

The resume checks train a tiny classifier with dropout (6 features, 3
classes) on random data, with a shuffling DataLoader, SGD with momentum and a
LambdaLR schedule, so that every piece of state matters: leave out the optimizer,
the scheduler or either random state and the resumed run no longer equals the
uninterrupted one. Files go to temporary folders; the global random state is
saved and restored around every run.

:func:`make_cuda_checkpoint` writes a real checkpoint whose tensors are tagged
as living on ``cuda:0``, exactly as ``torch.save`` writes them on a GPU
machine, so the ``map_location`` lesson works on a computer without a GPU.
"""

from __future__ import annotations

import copy
import pickle
import random
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Iterator, NamedTuple, NoReturn, Sequence
from unittest import mock

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import (Allow, CheckError, call, describe, expect, passed, same_tensor, same_value,
                           substitute)
from helpers.checks.devices import CUDA_LOAD_ERROR, playing_a_gpu_machine, save_as_on_device, storage_locations  # noqa: F401 - the lesson shows it
from helpers.reference import checkpoints as ref

N_FEATURES, N_CLASSES = 6, 3
CHECKPOINT_KEYS = ("epoch", "model", "optimizer", "scheduler", "torch_rng", "loader_rng", "loss")
CUDA_ERROR = CUDA_LOAD_ERROR

# ---------------------------------------------------------------- a CUDA-tagged checkpoint without a GPU
# The framework's stand-in device writes it (helpers.checks.devices.save_as_on_device): every tensor's location
# tag names the GPU, so torch.load without map_location fails here as on any machine without CUDA.


def make_cuda_checkpoint(path: str | Path, obj: Any, device: str = "cuda:0") -> Path:
    """Save ``obj`` to ``path`` as ``torch.save`` writes it on ``device`` (a GPU): see ``save_as_on_device``."""
    return save_as_on_device(path, obj, device)


# ---------------------------------------------------------------- the small training setup


class Case(NamedTuple):
    """A resume case: seed, samples, batch size, total epochs, epochs finished before the interruption."""

    seed: int = 0
    n: int = 12
    batch_size: int = 4
    epochs: int = 3
    interrupt_after: int = 1


DEFAULT_CASES = [Case(0, 12, 4, 4, 2), Case(1, 10, 3, 3, 1)]


class Setup(NamedTuple):
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loader: DataLoader
    generator: torch.Generator


def _decay(epoch: int) -> float:
    return 1.0 / (1.0 + epoch)


def _setup(case: Case, restart: bool = False) -> Setup:
    """Fresh training objects. ``restart=True`` plays a new process: other initial weights and seeds."""
    g = torch.Generator().manual_seed(1000 + case.seed)
    x = torch.randn(case.n, N_FEATURES, generator=g)
    y = torch.randint(0, N_CLASSES, (case.n,), generator=g)
    torch.manual_seed(case.seed + (5000 if restart else 0))
    model = nn.Sequential(nn.Linear(N_FEATURES, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, N_CLASSES))
    # a buffer, as BatchNorm's num_batches_tracked: part of model.state_dict(), not of named_parameters()
    model.register_buffer("batches_seen", torch.zeros((), dtype=torch.long))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # A schedule computed from the step count (like OneCycleLR): without the scheduler's own state a
    # resumed run would count from 0 again. (Chainable ones like StepLR partly survive through the
    # learning rate stored in the optimizer's state, which would hide the mistake.)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _decay)
    generator = torch.Generator().manual_seed(case.seed + (5000 if restart else 0))
    loader = DataLoader(TensorDataset(x, y), batch_size=case.batch_size, shuffle=True, generator=generator)
    torch.manual_seed(case.seed + (9000 if restart else 100))  # the dropout stream
    return Setup(model, optimizer, scheduler, loader, generator)


def run_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer,
              scheduler: torch.optim.lr_scheduler.LRScheduler) -> float:
    """One epoch of training (dropout on, shuffled batches), then one scheduler step; the mean loss."""
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        seen = getattr(model, "batches_seen", None)
        if isinstance(seen, torch.Tensor):
            seen += 1
        total += loss.item() * len(targets)
        count += len(targets)
    scheduler.step()
    return total / count


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _uninterrupted(case: Case) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        s = _setup(case)
        for _ in range(case.epochs):
            run_epoch(s.model, s.loader, s.optimizer, s.scheduler)
        return _state(s.model)


@contextmanager
def _workspace() -> Iterator[Path]:
    """A temporary folder and a forked random state, both gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="course-check-") as folder, torch.random.fork_rng(devices=[]):
        yield Path(folder)


def _trained(case: Case) -> Setup:
    """A setup trained for ``case.interrupt_after`` epochs: the moment a checkpoint is written."""
    s = _setup(case)
    for _ in range(case.interrupt_after):
        run_epoch(s.model, s.loader, s.optimizer, s.scheduler)
    return s


def _saved_states(s: Setup, epoch: int, loss: float) -> dict[str, Any]:
    """What a correct checkpoint of ``s`` holds right now."""
    return {"epoch": epoch, "model": _state(s.model), "optimizer": copy.deepcopy(s.optimizer.state_dict()),
            "scheduler": copy.deepcopy(s.scheduler.state_dict()), "torch_rng": torch.get_rng_state(),
            "loader_rng": s.generator.get_state(), "loss": loss}


# ---------------------------------------------------------------- save_checkpoint

_MISSING = {
    "epoch": "your checkpoint has no 'epoch' entry: without it you cannot tell where to resume",
    "model": "your checkpoint has no 'model' entry: save model.state_dict()",
    "optimizer": "your checkpoint has no 'optimizer' entry: the optimizer's state (SGD's momentum buffers, "
                 "Adam's moment estimates) would be lost, so the resumed run would take different steps. "
                 "Save optimizer.state_dict()",
    "scheduler": "your checkpoint has no 'scheduler' entry: after resuming, the learning-rate schedule would "
                 "start again from its first value. Save scheduler.state_dict()",
    "torch_rng": "your checkpoint has no 'torch_rng' entry: after resuming, dropout would draw different "
                 "random masks than the uninterrupted run. Save torch.get_rng_state()",
    "loader_rng": "your checkpoint has no 'loader_rng' entry: after resuming, the DataLoader would shuffle the "
                  "data in a different order. Save the loader's generator.get_state()",
    "loss": "your checkpoint has no 'loss' entry: save the epoch's loss (a float) too",
}


def _read_checkpoint(path: Path, what: str) -> dict:
    """Load a learner's checkpoint the way the course does (weights_only=True), explaining failures: a dict."""
    checkpoint = _load_safely(path, what)
    expect(isinstance(checkpoint, dict), f"{what}: the checkpoint should be a dict, but the file holds {describe(checkpoint)}",
           where="look at the first argument of your torch.save call")
    return checkpoint


def _load_safely(path: Path, what: str) -> Any:
    """What a learner's file holds, loaded with torch.load's default (weights_only=True), explaining failures."""
    expect(path.exists(), f"{what}: no file was written at the path you were given",
           where="look at your torch.save call: what it saves, and to which path",
           mistake="call torch.save(checkpoint, path) with the path argument you were given")
    try:
        checkpoint = torch.load(path, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError) as error:
        if "weights_only" not in str(error) and "Weights only" not in str(error):
            raise CheckError(f"{what}: torch.load could not read your file: {error}",
                             where="look at your torch.save call: what it saves, and to which path") from None
        whole = torch.load(path, map_location="cpu", weights_only=False)
        objects = {k: found for k, v in (whole.items() if isinstance(whole, dict) else [("file", whole)])
                   if (found := _not_plain(v))}
        arrays = any(name.startswith("ndarray") for name in objects.values())
        raise CheckError(f"{what}: torch.load (weights_only=True, its default) refuses your file: the checkpoint "
                         f"holds whole Python objects ({objects or type(whole).__name__})",
                         where="look at the values of the dict you pass to torch.save",
                         mistake=("a NumPy array (np.random.get_state() holds one) is an object to torch.load: "
                                  "store it as a tensor (torch.from_numpy) or a list, or leave that state out if "
                                  "nothing draws from it" if arrays else
                                  "save their state instead of the objects: model.state_dict(), "
                                  "optimizer.state_dict(), scheduler.state_dict() and generator.get_state(); "
                                  "torch.load's default (weights_only=True) refuses pickled objects")) from None
    return checkpoint


def _not_plain(value: Any, depth: int = 0) -> str:
    """The type of the first object in ``value`` that torch.load's default (weights_only=True) refuses: "" when it
    holds only tensors, numbers, strings and containers of them ("ndarray in a tuple" for NumPy's random state)."""
    if isinstance(value, (torch.Tensor, int, float, bool, str, bytes, type(None), torch.dtype, torch.device)):
        return ""
    if isinstance(value, (list, tuple, dict)) and depth < 6:
        for item in (value.values() if isinstance(value, dict) else value):
            found = _not_plain(item, depth + 1)
            if found:
                return found if found.endswith(")") or " in " in found else f"{found} in a {type(value).__name__}"
        return ""
    return type(value).__name__


def _expect_entry(checkpoint: dict, key: str, what: str) -> None:
    """The checkpoint has ``key``; otherwise the symptom, where to look, and why the entry matters."""
    symptom, _, why = _MISSING[key].partition(": ")
    expect(key in checkpoint, f"{what}: {symptom} (its keys: {sorted(checkpoint)})",
           where="look at the dict you pass to torch.save", mistake=why)


def _compare_entry(checkpoint: dict, key: str, want: Any, what: str, hint: str) -> None:
    _expect_entry(checkpoint, key, what)
    value = checkpoint[key]
    if isinstance(want, (int, float)) and isinstance(value, torch.Tensor) and value.numel() == 1 \
            and same_value(value.item(), want):
        raise CheckError(f"{what}: checkpoint['{key}'] is {describe(value)}, a tensor holding the right value; "
                         f"expected the Python number {want!r}",
                         where=f"look at the value you store under '{key}' in the dict you pass to torch.save",
                         mistake="store the number itself (.item(), or the argument as it came), not a tensor")
    shown = f"is {value!r}, but it should be" if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else "differs from the expected value,"
    expect(same_value(value, want), f"{what}: checkpoint['{key}'] {shown} {hint}",
           where=f"look at the value you store under '{key}' in the dict you pass to torch.save")


def _run_save(fn: Callable[..., Any], case: Case, folder: Path) -> tuple[dict, dict]:
    s = _trained(case)
    _PARAMETER_NAMES[:] = [(name, None) for name, _ in s.model.named_parameters()]
    epoch, loss = case.interrupt_after - 1, 0.125 + case.seed
    want = _saved_states(s, epoch, loss)
    path = folder / "checkpoint.pt"
    loader_state = s.generator.get_state()
    try:
        call(fn, path, s.model, s.optimizer, s.scheduler, s.generator, epoch, loss)
    except CheckError as error:
        _scheduler_stepped_while_saving(error, path, want, f"save_checkpoint on {case}")
        raise
    _expect_generator_kept(s.generator, loader_state, f"save_checkpoint on {case}")
    return _read_checkpoint(path, f"save_checkpoint on {case}"), want


# The names of the parameters of the model the last _run_save saved (a buffer is any other key of its state_dict)
_PARAMETER_NAMES: list[tuple[str, None]] = []


def _scheduler_stepped_while_saving(error: CheckError, path: Path, want: dict, what: str) -> None:
    """When ``call`` found the optimizer's lr changed and the saved scheduler is ahead of the given one: say so."""
    if error.__cause__ is not None or "optimizer" not in str(error) or " lr " not in str(error) or not path.exists():
        return
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        steps = saved["scheduler"]["last_epoch"]
    except Exception:  # noqa: BLE001 - an unreadable file shows nothing here
        return
    given = want["scheduler"]["last_epoch"]
    if isinstance(steps, int) and steps > given:
        raise CheckError(f"{what}: your function changed the optimizer's learning rate, and the scheduler it saved "
                         f"had stepped {steps} times; the one you were given had stepped {given} times",
                         where="look for scheduler.step() in your function",
                         mistake="scheduler.step() sets the optimizer's lr: saving must not step the scheduler; save "
                                 "scheduler.state_dict() as it is") from None


def _expect_generator_kept(generator: torch.Generator, before: torch.Tensor, what: str) -> None:
    """Saving reads the loader's generator; it must not change it (the run goes on after the save)."""
    # (the framework's call() does not compare torch.Generator arguments yet)
    after = generator.get_state()
    if torch.equal(after, before):
        return
    reseeded = torch.equal(after, torch.Generator().manual_seed(generator.initial_seed()).get_state())
    raise CheckError(f"{what}: the loader's generator you were given has another state after the call, so the run "
                     "that goes on after saving shuffles its data differently than it would have",
                     where="look at every call on generator: get_state() reads it; seed(), manual_seed() and "
                           "drawing with it change it",
                     mistake=("generator.seed() does not return the seed: it reseeds the generator with a fresh "
                              "random seed; save generator.get_state(), which reads the state without changing it"
                              if reseeded else None))


def check_save_checkpoint_basics(fn: Callable[..., None], inputs: Sequence[Case] | None = None) -> None:
    """The file loads with weights_only=True and holds epoch, model, optimizer and loss."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        with _workspace() as folder:
            checkpoint, want = _run_save(fn, case, folder)
        what = f"save_checkpoint on {case}"
        _compare_entry(checkpoint, "epoch", want["epoch"], what, f"the epoch you were given ({want['epoch']})")
        _expect_entry(checkpoint, "model", what)
        saved_model, buffers = checkpoint["model"], [k for k in want["model"] if k not in dict(_PARAMETER_NAMES)]
        expect(not (isinstance(saved_model, Mapping) and buffers and not any(k in saved_model for k in buffers)
                    and all(k in saved_model for k in want["model"] if k not in buffers)),
               f"{what}: checkpoint['model'] holds the model's parameters but not its buffers ({buffers})",
               where="look at what you store under 'model'",
               mistake="the buffers (e.g. running statistics) are missing: state_dict() holds parameters and "
                       "buffers; save model.state_dict()")
        _compare_entry(checkpoint, "model", want["model"], what, "model.state_dict()")
        _compare_entry(checkpoint, "optimizer", want["optimizer"], what,
                       "optimizer.state_dict() (its 'state' holds the momentum buffers)")
        _compare_entry(checkpoint, "loss", want["loss"], what, f"the loss you were given ({want['loss']})")
    passed("save_checkpoint (model, optimizer, epoch, loss)", len(inputs))


def check_save_checkpoint_resume_state(fn: Callable[..., None], inputs: Sequence[Case] | None = None) -> None:
    """The file also holds the scheduler and both random states, and resuming from it equals not stopping."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        what = f"save_checkpoint on {case}"
        with _workspace() as folder:
            checkpoint, want = _run_save(fn, case, folder)
            _compare_entry(checkpoint, "scheduler", want["scheduler"], what, "scheduler.state_dict()")
            _expect_entry(checkpoint, "torch_rng", what)
            expect(not (isinstance(checkpoint["torch_rng"], int)),
                   f"{what}: checkpoint['torch_rng'] is a number, expected torch's random state (a uint8 tensor)",
                   where="look at the value you store under 'torch_rng'",
                   mistake="a seed restarts the random stream from its beginning. Save the current state, "
                           "torch.get_rng_state()")
            _compare_entry(checkpoint, "torch_rng", want["torch_rng"], what, "torch.get_rng_state() (a uint8 tensor)")
            _expect_entry(checkpoint, "loader_rng", what)
            expect(not same_value(checkpoint["loader_rng"], want["torch_rng"])
                   or same_value(want["loader_rng"], want["torch_rng"]),
                   f"{what}: checkpoint['loader_rng'] is the global random state, not the state of the generator "
                   "you were given",
                   where="look at the value you store under 'loader_rng'",
                   mistake="the DataLoader shuffles with its own generator, so save generator.get_state()")
            expect(not isinstance(checkpoint["loader_rng"], int),
                   f"{what}: checkpoint['loader_rng'] is a number (a seed?), not a generator state",
                   where="look at what you store under 'loader_rng'",
                   mistake="a seed restarts the loader's random stream from its beginning. Save the generator's "
                           "current state, generator.get_state()")
            _compare_entry(checkpoint, "loader_rng", want["loader_rng"], what, "generator.get_state()")
            for key in CHECKPOINT_KEYS:  # resuming reads every entry (a missing one is named by the basics check)
                _expect_entry(checkpoint, key, what)
            resumed = _setup(case, restart=True)
            ref.load_checkpoint(folder / "checkpoint.pt", *resumed[:3], resumed.generator)
            for _ in range(case.interrupt_after, case.epochs):
                run_epoch(resumed.model, resumed.loader, resumed.optimizer, resumed.scheduler)
            expect(same_value(_state(resumed.model), _uninterrupted(case), atol=0, rtol=0),
                   f"{what}: resuming from your checkpoint does not reproduce the uninterrupted run",
                   where="look at each entry of your checkpoint: is every state that the next epochs use saved as "
                         "it is at the end of the saved epoch?")
    passed("save_checkpoint (scheduler and random states)", len(inputs))


# ---------------------------------------------------------------- load_checkpoint


def _fresh_loader_state(case: Case) -> torch.Tensor:
    """The state of the loader generator a restarted process builds (``_setup(case, restart=True)``), untouched."""
    return torch.Generator().manual_seed(case.seed + 5000).get_state()


class _WatchedGenerator(torch.Generator):
    """A torch.Generator that notes every state set on it with set_state: a message can then tell a state that
    was never set from one set and then undone."""

    def __new__(cls, state: torch.Tensor) -> "_WatchedGenerator":  # torch.Generator's own takes a device
        return super().__new__(cls)

    def __init__(self, state: torch.Tensor) -> None:
        super().__init__()
        super().set_state(state)
        self.states_set: list[Any] = []

    def set_state(self, new_state: Any) -> Any:
        self.states_set.append(new_state.clone() if isinstance(new_state, torch.Tensor) else new_state)
        return super().set_state(new_state)


_WatchedGenerator.__name__ = _WatchedGenerator.__qualname__ = "Generator"  # as a learner's message names it


def _run_load(fn: Callable[..., Any], case: Case, folder: Path) -> tuple[Any, Setup, dict, dict]:
    """Save a reference checkpoint, then call ``fn`` on fresh objects, as a new process would."""
    what = f"{getattr(fn, '__name__', 'load_checkpoint')} on {case}"
    # first another checkpoint at the same path (an earlier run's), loaded into other fresh objects: the file is
    # then rewritten, and the second load must read what the file holds now
    earlier = _trained(case._replace(interrupt_after=case.interrupt_after + 1))
    path = make_cuda_checkpoint(folder / "checkpoint.pt", _saved_states(earlier, case.interrupt_after, 0.25))
    other = _setup(case, restart=True)
    _call_loading(fn, what, path, *other[:3], other.generator, allow=Allow(changed=tuple(other), global_rng=True))
    s = _trained(case)
    # the scheduler of a per-batch schedule (as OneCycleLR): it has stepped once per batch, not once per epoch
    for _ in range(case.interrupt_after * (len(s.loader) - 1)):
        s.scheduler.step()
    epoch = case.interrupt_after - 1
    want = _saved_states(s, epoch, 0.5)
    # written on a GPU machine: every tensor of the file names cuda:0, as the task warns
    path = make_cuda_checkpoint(folder / "checkpoint.pt", want)
    fresh = _setup(case, restart=True)
    fresh = fresh._replace(generator=_WatchedGenerator(fresh.generator.get_state()))
    before = _state(fresh.model)
    # task: "restore every state into the objects you are given", including the global random state
    result = _call_loading(fn, what, path, fresh.model, fresh.optimizer, fresh.scheduler, fresh.generator,
                           allow=Allow(changed=tuple(fresh), global_rng=True))
    got = _state(fresh.model)
    expect(not (same_value(got, _state(other.model), atol=0, rtol=0) and not same_value(got, want["model"])
                and not same_value(got, before)),
           f"{what}: the file at path was rewritten with a new checkpoint, and loading it again restored the "
           "earlier checkpoint's weights: the second load returned the first file's contents",
           where="look for anything that keeps what was read between calls: a cache (functools.lru_cache, a dict "
                 "keyed by path), a global",
           mistake="something keeps what was read between calls: read the file with torch.load at every call")
    return result, fresh, want, before


def _call_loading(fn: Callable[..., Any], what: str, *args: Any, allow: Allow = Allow(), hints=()) -> Any:
    """``call`` a function that loads a checkpoint saved on cuda:0; it must load onto the CPU on any machine.

    On a machine without a GPU, torch.load without map_location fails on such a file; on one with
    a GPU it would succeed, so a spy on torch.load also requires a map_location there.
    """
    _RNG_SETS.clear()
    _LOADED.clear()
    # the notebook's DEVICE is the CPU here: a stand-in of its own shows a map_location that follows it
    device = torch.device("cpu")
    with mock.patch.object(torch, "load", wraps=torch.load) as spy, _rng_sets_recorded(), _load_targets_recorded(), \
            substitute(fn, DEVICE=device):
        try:
            result = call(fn, *args, allow=allow)
        except CheckError as error:
            cause = str(error.__cause__ or "")
            if CUDA_ERROR in cause:
                raise CheckError(f"{what}: torch.load raised RuntimeError: the file's tensors were saved on 'cuda:0' "
                                 "and this machine has no GPU", where="look at how you call torch.load",
                                 mistake=_map_location_mistake(spy, "cuda:0")) from None
            message = next((m for needle, m in hints if needle in cause), None)
            if message:
                raise CheckError(f"{what} raised {type(error.__cause__).__name__}: {cause.splitlines()[0][:160]}",
                                 where="look at the load_state_dict calls: which object gets which entry",
                                 mistake=message) from None
            raise
    maps = [c.kwargs.get("map_location", c.args[1] if len(c.args) > 1 else None) for c in spy.call_args_list]
    expect(not any(m is device for m in maps),
           f"{what}: torch.load was called with map_location=DEVICE, the notebook's device; the task asks for the "
           "CPU on any machine",
           where="look at the map_location you pass to torch.load",
           mistake="DEVICE is the CPU only on a machine without a GPU: on one with a GPU, this loads every tensor "
                   "onto the GPU. Pass map_location='cpu' (a model can move to a device later, with model.to)")
    unmapped = [c for c in spy.call_args_list if len(c.args) < 2 and c.kwargs.get("map_location") is None]
    expect(not unmapped, f"{what}: torch.load was called without map_location on a file saved on 'cuda:0'",
           where="look at how you call torch.load",
           mistake="on a machine with a GPU the tensors would go back to cuda:0; pass map_location='cpu'")
    return result


def _map_location_mistake(spy: mock.MagicMock, gpu: str) -> str:
    """Why torch.load (spied on) put tensors back on ``gpu``: no map_location, or a dict that does not name it."""
    maps = [c.kwargs.get("map_location", c.args[1] if len(c.args) > 1 else None) for c in spy.call_args_list]
    renamed = next((m for m in maps if isinstance(m, dict)), None)
    if renamed is not None:
        return (f"map_location={renamed!r} maps only the devices it names, and this file comes from '{gpu}'; "
                "pass map_location='cpu', which maps every device")
    if any(m is not None for m in maps):
        return "your map_location still sends the tensors to a GPU; pass map_location='cpu'"
    return ("without map_location, torch.load puts every tensor back on the device it was saved from; "
            "pass map_location='cpu'")


# The states the learner's function passed to torch.set_rng_state during the last _call_loading
_RNG_SETS: list[torch.Tensor] = []


@contextmanager
def _rng_sets_recorded() -> Iterator[None]:
    """Record every state handed to torch.set_rng_state (under both of its names) while open."""
    real = torch.random.set_rng_state

    def recording(new_state: torch.Tensor) -> None:
        _RNG_SETS.append(new_state.clone() if isinstance(new_state, torch.Tensor) else new_state)
        real(new_state)

    with mock.patch.object(torch, "set_rng_state", recording), mock.patch.object(torch.random, "set_rng_state",
                                                                                 recording):
        yield


# Each load_state_dict call during the last _call_loading: its object (a model, an optimizer or a scheduler) and
# the dict it was given
_LOADED: list[tuple[Any, Any]] = []


def _loaded_into() -> list[Any]:
    """The objects whose load_state_dict ran during the last _call_loading, in call order."""
    return [target for target, _ in _LOADED]


@contextmanager
def _load_targets_recorded() -> Iterator[None]:
    """Record the object of every load_state_dict call on a module, an optimizer or a scheduler while open."""
    patches = []
    classes = [nn.Module, torch.optim.Optimizer]
    schedulers = [torch.optim.lr_scheduler.LRScheduler]
    while schedulers:  # schedulers such as LambdaLR have their own load_state_dict
        cls = schedulers.pop()
        classes += [cls] if "load_state_dict" in cls.__dict__ else []
        schedulers += cls.__subclasses__()
    for cls in dict.fromkeys(classes):
        real = cls.__dict__["load_state_dict"]

        def recording(self, *args, _real=real, **kwargs):
            _LOADED.append((self, args[0] if args else kwargs.get("state_dict")))
            return _real(self, *args, **kwargs)

        patches.append(mock.patch.object(cls, "load_state_dict", recording))
    for patch in patches:
        patch.start()
    try:
        yield
    finally:
        for patch in reversed(patches):
            patch.stop()


def _loaded_into_another(given: Any, kind: type) -> str | None:
    """When load_state_dict ran on another object of ``kind`` than ``given`` (and never on it): what to say."""
    others = [o for o in _loaded_into() if isinstance(o, kind) and o is not given]
    if not others or any(o is given for o in _loaded_into()):
        return None
    word = {nn.Module: "model", torch.optim.Optimizer: "optimizer"}.get(kind, "scheduler")
    return (f"your function called load_state_dict on another {word} ({type(others[0]).__name__} built inside it), "
            f"not on the {word} you were given: the caller goes on with its own {word}, which your call never "
            f"changed. Load into the argument itself ({word}.load_state_dict(...)), without assigning a new "
            f"object to the name {word}")


def _loaded_nothing(model: nn.Module) -> str | None:
    """When the model's own load_state_dict ran with a dict that holds none of its keys (strict=False lets that
    through): what to say."""
    given = [state for target, state in _LOADED if target is model]
    keys = set(model.state_dict())
    if not given or any(isinstance(state, Mapping) and keys & set(state) for state in given):
        return None
    shown = sorted(given[0])[:4] if isinstance(given[0], Mapping) else None
    return ("model.load_state_dict ran on your model, but the dict it was given holds none of the model's keys"
            + (f" (its keys: {shown})" if shown else "")
            + ", so nothing was loaded; strict=False let that pass silently. Give it the model's own entry, "
              "checkpoint['model'] (and keep strict=True, which names any key that does not fit)")


_SCHEDULER_STEPPED_TO = ("the scheduler was stepped to the saved epoch instead of restored from its state_dict: a "
                         "schedule may step per batch, or be changed by hand, and each step sets the optimizer's lr; "
                         "call scheduler.load_state_dict(checkpoint['scheduler'])")


def check_load_checkpoint_states(fn: Callable[..., int], inputs: Sequence[Case] | None = None) -> None:
    """The model's weights and the optimizer's state come back."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        what = f"load_checkpoint on {case}"
        with _workspace() as folder:
            _, fresh, want, before = _run_load(fn, case, folder)
        got = _state(fresh.model)
        expect(not same_value(got, before) or same_value(before, want["model"]),
               f"{what}: the model's weights were not restored (they are those it had before the call)",
               where="look at what happens to checkpoint['model'] in your function",
               mistake=_loaded_into_another(fresh.model, nn.Module) or _loaded_nothing(fresh.model)
               or "call model.load_state_dict(checkpoint['model']) on the model you were given (assigning to "
                  "a variable does not change it)")
        expect(same_value(got, want["model"]), f"{what}: the model's weights differ from the saved ones",
               where="look at which entry of the checkpoint goes into model.load_state_dict")
        own = {id(p) for p in fresh.model.parameters()}
        stepped = [p for group in fresh.optimizer.param_groups for p in group["params"]]
        expect(all(id(p) in own for p in stepped),
               f"{what}: the model's weights are right, but {sum(id(p) not in own for p in stepped)} of the "
               f"{len(stepped)} tensors the optimizer updates are no longer the model's parameters: the next "
               "optimizer.step() would not change the model",
               where="look at how the weights go into the model: which Parameter objects the model holds afterwards",
               mistake="the model now holds new Parameter objects (load_state_dict(..., assign=True) puts the "
                       "checkpoint's tensors in the model, as does assigning model.weight = ...), while the "
                       "optimizer keeps the old ones. Leave assign at its default (False), which copies the values "
                       "into the model's own Parameters")
        expect(len(fresh.optimizer.state_dict()["state"]) > 0,
               f"{what}: the optimizer state was not restored: after your call it holds no momentum buffers",
               where="look at what happens to checkpoint['optimizer'] in your function",
               mistake=_loaded_into_another(fresh.optimizer, torch.optim.Optimizer)
               or "call optimizer.load_state_dict(checkpoint['optimizer']). Without it the momentum buffers "
                  "start again from zero and the resumed run differs")
        got_opt, want_opt = fresh.optimizer.state_dict(), want["optimizer"]
        lrs = [g.get("lr") for g in got_opt["param_groups"]], [g.get("lr") for g in want_opt["param_groups"]]
        only_lr = same_value(got_opt["state"], want_opt["state"]) and lrs[0] != lrs[1]
        expect(same_value(got_opt, want_opt),
               f"{what}: the optimizer's state differs from the saved one"
               + (f": its momentum buffers are right, but its learning rate is {lrs[0]}, the saved one {lrs[1]}"
                  if only_lr else ""),
               where="look at what changes the learning rate after optimizer.load_state_dict (a scheduler.step()?)"
               if only_lr else "look at which entry of the checkpoint goes into the optimizer, and how",
               mistake=(_SCHEDULER_STEPPED_TO if only_lr and fresh.scheduler.last_epoch == want["epoch"] + 1
                        and not any(o is fresh.scheduler for o in _loaded_into()) else None)
               if only_lr else "use optimizer.load_state_dict(checkpoint['optimizer'])")
    passed("load_checkpoint (model and optimizer)", len(inputs))


def check_load_checkpoint_resume(fn: Callable[..., int], inputs: Sequence[Case] | None = None) -> None:
    """The scheduler and both random states come back, and the next epoch is returned."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        what = f"load_checkpoint on {case}"
        with _workspace() as folder:
            result, fresh, want, _ = _run_load(fn, case, folder)
            torch_rng = torch.get_rng_state()
        got_epoch, want_epoch = fresh.scheduler.state_dict().get("last_epoch"), want["scheduler"].get("last_epoch")
        ahead = (got_epoch - want_epoch if isinstance(got_epoch, int) and isinstance(want_epoch, int)
                 and any(o is fresh.scheduler for o in _loaded_into()) else 0)
        expect(ahead <= 0,
               f"{what}: the scheduler was restored and then stepped {ahead} more time(s): its last_epoch is "
               f"{got_epoch}, the saved one {want_epoch}",
               where="look at what your function does after scheduler.load_state_dict",
               mistake="load_checkpoint only restores: the saved scheduler has taken its step for the saved epoch "
                       "already, and the training loop steps it at the end of each epoch it runs")
        given = [state for target, state in _LOADED if target is fresh.scheduler]
        changed_after = [key for key, value in fresh.scheduler.state_dict().items()
                         if key in want["scheduler"] and not same_value(value, want["scheduler"][key])]
        expect(not (given and isinstance(given[-1], Mapping) and same_value(given[-1].get("last_epoch"), want_epoch)
                    and changed_after),
               f"{what}: the scheduler was restored (scheduler.load_state_dict with the saved state), and then "
               f"changed: its {', '.join(changed_after)} {'differs' if len(changed_after) == 1 else 'differ'} from the "
               "saved state"
               + (f" (last_epoch is {got_epoch}, saved {want_epoch})" if "last_epoch" in changed_after else ""),
               where="look at what your function does to the scheduler after scheduler.load_state_dict",
               mistake="load_state_dict restores every part of the scheduler's state, last_epoch included: set "
                       "nothing on it by hand afterwards")
        stepped_to = not given and got_epoch == want["epoch"] + 1 and got_epoch != want_epoch
        expect(not stepped_to,
               f"{what}: the scheduler's last_epoch is {got_epoch} (the saved epoch + 1), but the saved scheduler "
               f"had stepped {want_epoch} times (it steps once per batch), and scheduler.load_state_dict was never "
               "called", where="look at what your function does to the scheduler",
               mistake=_SCHEDULER_STEPPED_TO)
        expect(same_value(fresh.scheduler.state_dict(), want["scheduler"]),
               f"{what}: the scheduler was not restored: its state differs from the saved one",
               where="look at what happens to checkpoint['scheduler'] in your function",
               mistake=_loaded_into_another(fresh.scheduler, torch.optim.lr_scheduler.LRScheduler)
               or "call scheduler.load_state_dict(checkpoint['scheduler']); otherwise the learning rate "
                  "starts again from its first value")
        restored = any(isinstance(state, torch.Tensor) and same_value(state, want["torch_rng"])
                       for state in _RNG_SETS)
        expect(same_value(torch_rng, want["torch_rng"]) or not restored,
               f"{what}: when your function returned, torch's global random state was not the saved one, although "
               "it called torch.set_rng_state(checkpoint['torch_rng']): something drew from (or reseeded) the "
               "global generator after that call",
               where="look at what runs after torch.set_rng_state: a forward pass through dropout, torch.rand..., "
                     "a layer built, a seed",
               mistake="restore the random states last, just before returning, and draw nothing after them: the "
                       "first draw after loading must be the uninterrupted run's next one")
        expect(same_value(torch_rng, want["torch_rng"]),
               f"{what}: the global random state was not restored: after your call it differs from the saved one",
               where="look at what happens to checkpoint['torch_rng'] in your function",
               mistake="restore it with torch.set_rng_state(checkpoint['torch_rng']). Otherwise dropout draws "
                       "different masks than the uninterrupted run")
        loader_state = fresh.generator.get_state()
        set_then_changed = (not same_value(loader_state, want["loader_rng"])
                            and any(same_value(state, want["loader_rng"])
                                    for state in getattr(fresh.generator, "states_set", [])))
        expect(not set_then_changed,
               f"{what}: your function set the loader generator's saved state (generator.set_state), but when it "
               "returned the generator's state was another one",
               where="look at what your function does to the generator after generator.set_state: a manual_seed "
                     "(with its initial_seed() too) starts the stream again from a seed, and a draw moves it on",
               mistake="set_state already restores everything, the seed included: touch the generator no more after "
                       "it")
        expect(not same_value(loader_state, _fresh_loader_state(case)) or same_value(loader_state, want["loader_rng"]),
               f"{what}: the loader's random state was not restored: the generator you were given still holds the "
               "state it had before the call, so the data is shuffled in a different order than the uninterrupted "
               "run", where="look at what happens to checkpoint['loader_rng'] in your function",
               mistake="call generator.set_state(checkpoint['loader_rng']) on the generator argument itself: the "
                       "DataLoader shuffles with that object (a torch.Generator() built inside your function would "
                       "be another one, which nothing uses)")
        expect(same_value(loader_state, want["loader_rng"]),
               f"{what}: the loader's random state was not restored: after your call the generator's state differs "
               "from the saved checkpoint['loader_rng']",
               where="look at what happens to checkpoint['loader_rng'] in your function",
               mistake="restore it with generator.set_state(checkpoint['loader_rng']). Otherwise the data is "
                       "shuffled in a different order than the uninterrupted run")
        expect(result is not None, f"{what} returned None; expected the next epoch to run ({want['epoch'] + 1})",
               where="look at the end of your function: its return statement",
               mistake="return the next epoch to run, checkpoint['epoch'] + 1")
        expect(result != want["epoch"],
               f"{what} returned {result}, the saved epoch; expected the next epoch to run ({want['epoch'] + 1})",
               where="look at the value you return",
               mistake=f"that epoch is already finished: return checkpoint['epoch'] + 1 ({want['epoch'] + 1}), or "
                       "the resumed run repeats it")
        expect(result == want["epoch"] + 1, f"{what} returned {describe(result)}; it should return "
               f"checkpoint['epoch'] + 1 = {want['epoch'] + 1}",
               where="look at the value you return: it comes from checkpoint['epoch']")
    passed("load_checkpoint (scheduler, random states, next epoch)", len(inputs))


# ---------------------------------------------------------------- train_resumable


class _Interrupted(KeyboardInterrupt):
    """Raised inside run_epoch to play a stop (Ctrl+C, a killed job, a lost machine).

    A KeyboardInterrupt, as the notebook's own ``killed_after`` raises: the learner's ``except Exception``
    does not swallow it, an ``except KeyboardInterrupt`` handler runs as it would on Ctrl+C, and the
    framework's ``call`` lets it through untouched (after putting the caller's state back).
    """


class _Counter:
    """The run_epoch handed to train_resumable: counts finished epochs; with ``stop_after``, the job is stopped
    in the middle of the next epoch (after its first batch), and the file at ``path`` is remembered as it was."""

    def __init__(self, stop_after: int | None = None, path: Path | None = None,
                 first_seen: list[dict[str, Any]] | None = None) -> None:
        self.calls, self.stop_after, self.path = 0, stop_after, path
        self.file_at_stop: bytes | None = None
        self.first_seen = first_seen  # when given: what the first epoch starts from is appended to it

    def __call__(self, model, loader, optimizer, scheduler) -> float:
        if self.first_seen is not None and self.calls == 0:
            self.first_seen.append(_pieces(model, optimizer, scheduler, getattr(loader, "generator", None)))
        if self.stop_after is not None and self.calls == self.stop_after:
            self.file_at_stop = _file_bytes(self.path) if self.path is not None else None
            run_epoch(model, _StoppedAfterOneBatch(loader, self.calls), optimizer, scheduler)
        self.calls += 1
        loss = run_epoch(model, loader, optimizer, scheduler)
        # every other epoch's loss rises, as real losses now and then do: a function that saves only on a new best
        # would skip those epochs, and a job stopped after one loses it
        return loss + 1.0 if self.calls % 2 == 0 else loss


class _StoppedAfterOneBatch:
    """A loader that yields the first batch of ``loader``, then stops the job ("killed at any moment")."""

    def __init__(self, loader: DataLoader, done: int) -> None:
        self.loader, self.done = loader, done

    def __iter__(self) -> Iterator[Any]:
        yield next(iter(self.loader))
        raise _Interrupted(f"the job was stopped during epoch {self.done} ({self.done} epochs finished)")


def _pieces(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
            generator: torch.Generator | None) -> dict[str, Any]:
    """Everything an epoch reads, as copies: what a resumed epoch must start from."""
    return {"model": _state(model), "optimizer": copy.deepcopy(optimizer.state_dict()),
            "scheduler": {k: copy.deepcopy(v) for k, v in scheduler.state_dict().items() if k != "lr_lambdas"},
            "torch_rng": torch.get_rng_state(),
            "loader_rng": generator.get_state() if generator is not None else None}


# What each piece is, for a message that names the pieces a resumed run did not restore.
_PIECE_NAMES = {"model": "the model's weights", "optimizer": "the optimizer's state (SGD's momentum buffers)",
                "scheduler": "the scheduler's state (its step count)",
                "torch_rng": "torch's global random state (dropout)",
                "loader_rng": "the loader generator's state (the shuffle)"}


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [key for key in _PIECE_NAMES if not same_value(a.get(key), b.get(key), atol=0, rtol=0)]


def _resume_evidence(case: Case, seen: dict[str, Any], saved: Any) -> tuple[list[str], list[str]]:
    """(pieces the checkpoint at the stop already had wrong, pieces the restart did not restore), by comparing what
    the first resumed epoch started from with the checkpoint and with an uninterrupted run at that epoch."""
    with torch.random.fork_rng(devices=[]):
        s = _trained(case)
        want = _pieces(s.model, s.optimizer, s.scheduler, s.generator)
    if isinstance(saved, dict) and all(key in saved for key in _PIECE_NAMES):  # saved by save_checkpoint
        base = {**{key: saved[key] for key in _PIECE_NAMES},
                "scheduler": {k: v for k, v in saved["scheduler"].items() if k != "lr_lambdas"}}
        before = _differing(base, want)
        return before, [] if before else _differing(seen, base)
    # a checkpoint of its own: the model right at the restart says the run before the stop was right
    return [], _differing(seen, want) if "model" not in _differing(seen, want) else []


# What the first epoch after the restart started from, in the last _run_resumable
_RESUMED_FROM: list[dict[str, Any]] = []


def _written_after_stop(counter: _Counter) -> bool:
    """Whether the checkpoint file changed after ``counter`` stopped the job (a handler of the stop saved)."""
    return counter.file_at_stop != _file_bytes(counter.path) if counter.path is not None else False


def _train(fn: Callable[..., Any], s: Setup, case: Case, path: Path, run_epoch: Callable[..., float]) -> None:
    """One run of the learner's train_resumable on ``s``, through the framework's rules.

    A crash of the learner's code comes back as the CheckError ``call`` makes, its cause attached.
    """
    # task: "Write train_resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)",
    # which trains those objects in place; "Use your save_checkpoint and load_checkpoint", and loading
    # restores the global generator (dropout masks) that the checkpoint saved.
    changed = (s.model, s.optimizer, s.scheduler, s.loader, s.generator, run_epoch)
    call(fn, s.model, s.optimizer, s.scheduler, s.loader, s.generator, case.epochs, path, run_epoch,
         allow=Allow(changed=changed, global_rng=True))


def _raised(error: CheckError) -> BaseException | None:
    """The learner's own exception behind a CheckError from ``call`` (None when a rule was broken)."""
    return error.__cause__ if isinstance(error.__cause__, Exception) else None


def _run_resumable(fn: Callable[..., Any], case: Case, moved: bool = True) -> tuple[int, bool, int, dict,
                                                                                   dict | None]:
    """Play a crash after ``interrupt_after`` epochs and a restart in a "new process".

    Returns: epochs run before the crash, whether the crash reached the caller, epochs run
    after the restart, the final weights, and the checkpoint found after the crash (or None).
    The learner's function runs with the reference save_checkpoint and load_checkpoint (one bug
    loses one exercise: those two have their own checks).
    """
    _RESUME_LOG.clear()
    save, load = ref.save_checkpoint, ref.load_checkpoint  # now: the reference's own names are swapped below too

    def saving(path, model, optimizer, scheduler, generator, epoch, loss):
        _RESUME_LOG.append(("save", epoch))
        _SAVE_PATHS.append(Path(path))
        return save(path, model, optimizer, scheduler, generator, epoch, loss)

    def loading(path, model, optimizer, scheduler, generator):
        _RESUME_LOG.append(("load called", None))
        start = load(path, model, optimizer, scheduler, generator)
        _RESUME_LOG.append(("load", start))
        return start

    with substitute(fn, save_checkpoint=saving, load_checkpoint=loading):
        return _run_resumable_as_is(fn, case, moved)


# What the last _run_resumable saw the learner's function do: ("save", epoch), ("load called", None), ("load", start)
# and ("restart", None)
_RESUME_LOG: list[tuple[str, Any]] = []
# The paths the learner's function passed to save_checkpoint in the last _run_resumable, and the path it was given
_SAVE_PATHS: list[Path] = []
_GIVEN_PATH: list[Path] = []


def _run_resumable_as_is(fn: Callable[..., Any], case: Case, moved: bool = True) -> tuple[int, bool, int, dict,
                                                                                          dict | None]:
    name = getattr(fn, "__name__", "train_resumable")
    _SAVE_PATHS.clear()
    with _workspace() as folder:
        path = folder / "run.pt"
        _GIVEN_PATH[:] = [path]
        _RESUMED_FROM.clear()
        _FINISHED.clear()
        first, second = _Counter(stop_after=case.interrupt_after, path=path), _Counter(first_seen=_RESUMED_FROM)
        s = _setup(case)
        crashed = False
        try:
            _train(fn, s, case, path, first)
        except _Interrupted:
            crashed = True
        except CheckError as error:
            if (cause := _raised(error)) is None:
                raise
            if isinstance(cause, FileNotFoundError) and ("load called", None) in _RESUME_LOG:
                raise CheckError(f"{name} raised FileNotFoundError on a fresh run: {cause}",
                                 where="look at the test that decides whether to load",
                                 mistake="on a fresh run there is no file, but your function called load_checkpoint: "
                                         "check your existence test (path.exists() needs the parentheses)") from cause
            raise CheckError(f"{name} raised {type(cause).__name__}: {cause}",
                             where="look at the line of your code that raised (listed below the message in a "
                                   "notebook), on the first run, when no checkpoint file exists yet") from cause
        if crashed and _written_after_stop(first):
            _RESUME_LOG.append(("written after the stop", None))
        saved = torch.load(path, map_location="cpu", weights_only=False) if path.exists() else None
        if moved and path.exists():  # the new process finds the file elsewhere (a copy, as on another machine)
            (folder / "moved").mkdir()
            path = Path(shutil.copy(path, folder / "moved" / "run.pt"))
        r = _setup(case, restart=True)
        _RESUME_LOG.append(("restart", None))
        try:
            _train(fn, r, case, path, second)
        except CheckError as error:
            _restart_failed(name, error)
        # the finished job: what its file records, and what starting it once more runs (nothing is left)
        _FINISHED[:] = [torch.load(path, map_location="cpu", weights_only=False).get("epoch")
                        if path.exists() else None]
        again = _Counter()
        _RESUME_LOG.append(("again", None))
        try:
            _train(fn, _setup(case, restart=True), case, path, again)
        except CheckError as error:  # told after what the runs before showed, by _expect_finished
            _FINISHED.append(error)
        else:
            _FINISHED.append(again.calls)
        return first.calls, crashed, second.calls, _state(r.model), saved


# After the last _run_resumable had run to the end: the epoch its checkpoint file recorded (None without a file),
# then how many epochs a start after that ran (or the CheckError it raised)
_FINISHED: list[Any] = []


def _expect_epochs(case: Case, first: int, crashed: bool, second: int, saved: dict | None,
                   fn: Callable[..., Any] | None = None) -> None:
    what = f"train_resumable on {case}"
    k, n = case.interrupt_after, case.epochs
    expect(first > 0, f"{what}: run_epoch was never called",
           where="look at your loop over the epochs: does its body call run_epoch (the argument you were given)?",
           mistake="call run_epoch once per epoch")
    expect(crashed, f"{what}: the job should have been stopped during epoch {k + 1}, but your function "
           f"stopped calling run_epoch after {first} epochs",
           where="look at the bounds of your loop over the epochs",
           mistake="loop over range(start, epochs)")
    elsewhere = [p for p in _SAVE_PATHS if p not in _GIVEN_PATH]
    expect(not (saved is None and elsewhere and len(elsewhere) == len(_SAVE_PATHS)),
           f"{what}: the job was stopped after {k} finished epochs and no checkpoint file existed at the path you "
           f"were given, although your function called save_checkpoint {len(elsewhere)} time(s), with another "
           f"path ({elsewhere[0] if elsewhere else ''})",
           where="look at the path you pass to save_checkpoint",
           mistake="nothing was written at the path you were given: pass path to save_checkpoint")
    expect(saved is not None, f"{what}: the job was stopped after {k} finished epochs and no checkpoint file "
           "existed",
           where="look at where your function calls save_checkpoint: inside the loop, or after it?",
           mistake="save a checkpoint at the end of every epoch, not only at the end of training")
    log = list(_RESUME_LOG)
    log = log[:log.index(("again", None))] if ("again", None) in log else log
    restart = log.index(("restart", None)) if ("restart", None) in log else len(log)
    saved_before = [e for kind, e in log[:restart] if kind == "save"]
    saved_after = [e for kind, e in log[restart:] if kind == "save"]
    loaded = [e for kind, e in log[restart:] if kind == "load"]
    recorded = saved.get("epoch") if isinstance(saved, dict) else None
    expect(("written after the stop", None) not in log,
           f"{what}: the job was stopped in the middle of epoch {k} (epochs 0 to {k - 1} had finished), and your "
           f"function wrote the checkpoint file after the stop (it now records epoch {recorded} as finished)",
           where="look at what your function does when it is stopped: an except (KeyboardInterrupt) or finally "
                 "block that saves",
           mistake="a stop can come in the middle of an epoch, so what is saved then is a half-done epoch (the "
                   "model and optimizer have taken some of its steps) filed as a finished one, and a killed job "
                   "runs no handler at all; the checkpoint of the last finished epoch is already on disk, so let "
                   "the stop go through without saving")
    if isinstance(saved, dict) and saved.get("epoch") == k:
        # both mistakes leave the same file; only the saves the function made through save_checkpoint tell them apart
        if 0 in saved_before:
            where, mistake = ("look at where in the loop you save",
                              "you saved before run_epoch ran (epoch 0 was saved before any epoch had finished): a "
                              "checkpoint marks its epoch finished, so save after run_epoch returns")
        elif saved_before:
            where, mistake = ("look at the epoch you pass to save_checkpoint",
                              f"you passed epoch + 1 (your first save recorded epoch {min(saved_before)}; none "
                              "recorded epoch 0): a checkpoint records the epoch that just finished, and "
                              "load_checkpoint adds the 1")
        else:
            where, mistake = ("look at where in the loop you save and at the epoch you save",
                              "a checkpoint records the epoch that just finished: save after run_epoch returns, "
                              "with the loop's own epoch (not epoch + 1)")
        raise CheckError(f"{what}: the job was stopped during epoch {k} (epochs 0 to {k - 1} had finished), and the "
                         f"checkpoint it left records epoch {k} as finished", where=where, mistake=mistake)
    unsaved = [e for e in range(k) if e not in saved_before]
    # only when the function saves through save_checkpoint: one that calls torch.save itself leaves no log
    expect(not (saved_before and unsaved),
           f"{what}: before the stop, epochs 0 to {k - 1} finished and your function saved a checkpoint after "
           f"epochs {sorted(set(saved_before))} only (none after epoch {unsaved[0] if unsaved else ''})",
           where="look at the condition around save_checkpoint in your loop",
           mistake="a job can be stopped after any epoch: save a checkpoint at the end of every epoch, or the "
                   "epochs since the last save are lost")
    if second == n and loaded:
        raise CheckError(f"{what}: after the restart your function loaded the checkpoint (load_checkpoint returned "
                         f"{loaded[0]}) and then ran {second} epochs; {n - k} were left ({n} in all)",
                         where="look at where your loop over the epochs stops",
                         mistake="epochs is the number of epochs in total, not how many more to run: loop over "
                                 "range(start, epochs)")
    if second == n and not loaded and fn is not None:
        # the restart found the file at a new path (a copy): does the same restart at the old path resume?
        if _run_resumable(fn, case, moved=False)[2] == n - k:
            raise CheckError(f"{what}: restarted with the checkpoint at a new path (a copy of the file the stopped "
                             f"job left), your function ran all {n} epochs again without loading it; restarted at "
                             f"the old path, it resumed",
                             where="look at how your function decides whether to load and where to start",
                             mistake="your function decided where to resume from something kept between calls, not "
                                     "from the file: a new process keeps nothing; test whether the file at path "
                                     "exists and start at the epoch load_checkpoint returns")
    expect(second != n, f"{what}: after the restart your function ran all {n} epochs again; {n - k} were left",
           where="look at what your function does when the checkpoint file exists, and where its loop starts",
           mistake="when the checkpoint file exists, load it and start at the epoch load_checkpoint returns "
                   "(the saved epoch + 1)")
    expect(second != n - k + 1, f"{what}: after the restart epoch {k} ran again ({second} epochs ran; {n - k} "
           "were left)",
           where="look at the epoch your loop starts at after loading",
           mistake="off by one: the saved epoch is finished, so resume at saved epoch + 1")
    if second == n - k - 1 and loaded and saved_after and saved_after[0] == loaded[0] + 1:
        raise CheckError(f"{what}: after the restart one epoch too few ran ({second} instead of {n - k}): "
                         f"load_checkpoint returned {loaded[0]}, and the first epoch saved after it was "
                         f"{saved_after[0]}", where="look at what you do with load_checkpoint's result",
                         mistake="load_checkpoint already returns the next epoch to run (the saved epoch + 1); "
                                 "adding 1 to it skips an epoch")
    expect(second != n - k - 1, f"{what}: after the restart one epoch too few ran ({second} instead of {n - k})",
           where="look at the bounds of your loop over the epochs",
           mistake="range(start, epochs) already stops at the last epoch, epochs - 1")
    expect(second == n - k, f"{what}: after the restart {second} epochs ran; {n - k} were left ({n} in all, "
           f"{k} done before the stop)",
           where="look at the epoch your loop starts at after loading, and where it stops")
    del saved_before


def _expect_finished(case: Case) -> None:
    """A job that has finished leaves its checkpoint, recording the last epoch, and a start after that runs
    nothing (from the last _run_resumable)."""
    what, n = f"train_resumable on {case}", case.epochs
    final, again = _FINISHED
    expect(final is not None, f"{what}: when your function returned after all {n} epochs, no checkpoint file was "
           "left at path",
           where="look at what your function does with the file after the loop",
           mistake="keep the checkpoint: a finished job that is started again finds it and has nothing left to run; "
                   "without it, a second start trains everything again")
    expect(final == n - 1, f"{what}: when your function returned after all {n} epochs (0 to {n - 1}), the "
           f"checkpoint recorded epoch {final} as the last one finished",
           where="look at where in the loop you save: the file must record each epoch once it has finished, the "
                 "last one included",
           mistake="save at the end of every epoch, right after run_epoch returns: a save at the start of the next "
                   "epoch never comes for the last one" if final == n - 2 else None)
    if isinstance(again, CheckError):
        if (cause := _raised(again)) is None:
            raise again
        raise CheckError(f"train_resumable raised {type(cause).__name__} when started once more after all {n} epochs "
                         f"had finished: {cause}",
                         where="look at the path your function takes when the checkpoint records the last epoch: "
                               "the loop runs no epoch then") from cause
    expect(again == 0, f"{what}: started once more after all {n} epochs had finished, your function ran {again} "
           "epoch(s); none were left",
           where="look at what your function does when the checkpoint records the last epoch")


def _second_interruption(fn: Callable[..., Any], case: Case) -> tuple[Any, int]:
    """Stop after ``interrupt_after`` epochs, restart and stop again after one more, restart to the end.

    Returns the epoch recorded in the checkpoint after the second stop and the epochs the last run ran.
    """
    name = getattr(fn, "__name__", "train_resumable")
    _SAVED_AFTER_RESTART.clear()
    saved_now: list[int] = []
    save = ref.save_checkpoint  # now: for the reference itself, its own name is swapped below too

    def saving(path, model, optimizer, scheduler, generator, epoch, loss):
        saved_now.append(epoch)
        return save(path, model, optimizer, scheduler, generator, epoch, loss)

    with substitute(fn, save_checkpoint=saving, load_checkpoint=ref.load_checkpoint), \
            _workspace() as folder:
        path = folder / "run.pt"
        for stop_after, restart in ((case.interrupt_after, False), (1, True)):
            saved_now.clear()
            s = _setup(case, restart=restart)
            try:
                _train(fn, s, case, path, _Counter(stop_after, path))
            except _Interrupted:
                pass
            except CheckError as error:
                _restart_failed(name, error)
        _SAVED_AFTER_RESTART[:] = saved_now
        saved = torch.load(path, map_location="cpu", weights_only=False).get("epoch") if path.exists() else None
        last, r = _Counter(), _setup(case, restart=True)
        try:
            _train(fn, r, case, path, last)
        except CheckError as error:
            _restart_failed(name, error)
    return saved, last.calls


def _restart_failed(name: str, error: CheckError) -> NoReturn:
    """Re-raise a failure of a restarted run: the learner's own exception is told as one on the restart."""
    if (cause := _raised(error)) is None:
        raise error
    raise CheckError(f"{name} raised {type(cause).__name__} when restarted: {cause}",
                     where="look at the path your function takes when the checkpoint file already exists "
                           "(the restart): loading it and the loop after it") from cause


# The epochs the learner's function saved (through save_checkpoint) in the run restarted by _second_interruption
_SAVED_AFTER_RESTART: list[int] = []


def check_resume_epochs(fn: Callable[..., None], inputs: Sequence[Case] | None = None) -> None:
    """A checkpoint after every epoch; after a restart exactly the remaining epochs run, also after a second stop."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        first, crashed, second, _, saved = _run_resumable(fn, case)
        _expect_epochs(case, first, crashed, second, saved, fn)
        if case.epochs - case.interrupt_after >= 2:  # room for a second stop after one resumed epoch
            k = case.interrupt_after
            recorded, last = _second_interruption(fn, case)
            saves = list(_SAVED_AFTER_RESTART)
            expect(not (saves and saves == list(range(len(saves))) and recorded != k),
                   f"train_resumable on {case}: stopped after {k} epochs, restarted, and stopped again after one "
                   f"more epoch (epoch {k}), the checkpoint records epoch {recorded}: after the restart your function "
                   f"saved epochs {saves}, numbered from 0 again", where="look at the epoch number you pass to "
                   "save_checkpoint after a restart",
                   mistake="pass the real epoch number (start + i), not a count of the epochs since the restart: "
                           "loop over range(start, epochs) and save that epoch")
            expect(recorded == k or not saves or k in saves,
                   f"train_resumable on {case}: stopped after {k} epochs, restarted, and stopped again after one "
                   f"more epoch (epoch {k}), the checkpoint records epoch {recorded}: after the restart your function "
                   f"saved after epochs {saves} only", where="look at the condition around save_checkpoint",
                   mistake="a job can be stopped after any epoch: save a checkpoint at the end of every epoch")
            expect(recorded == k, f"train_resumable on {case}: stopped after {k} epochs, restarted, and stopped "
                   f"again after one more epoch, the checkpoint records epoch {recorded}; epochs 0 to {k} are "
                   f"finished, so it should record {k}",
                   where="look at the epoch number you pass to save_checkpoint",
                   mistake="save the epoch number itself (the loop variable of range(start, epochs)), not a count "
                           "of the epochs since the restart")
            expect(last == case.epochs - k - 1, f"train_resumable on {case}: after a second stop and restart "
                   f"{last} epochs ran; {case.epochs - k - 1} were left",
                   where="look at the epoch number you save, and the epoch your loop starts at after loading")
        _expect_finished(case)
    passed("train_resumable (epochs)", len(inputs))


def check_resume_equal(fn: Callable[..., None], inputs: Sequence[Case] | None = None) -> None:
    """After a stop and a restart, the weights equal an uninterrupted run's exactly (torch.equal)."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    for case in inputs:
        first, crashed, second, got, saved = _run_resumable(fn, case)
        _expect_epochs(case, first, crashed, second, saved, fn)
        want = _uninterrupted(case)
        if all(torch.equal(got[k], want[k]) for k in want):
            continue
        what = f"train_resumable on {case}"
        missing = [key for key in CHECKPOINT_KEYS if key not in saved] if isinstance(saved, dict) else []
        symptom = (f"{what}: stopped after {case.interrupt_after} epochs and restarted, the resumed weights differ "
                   f"from the uninterrupted run's (first in '{next(k for k in want if not torch.equal(got[k], want[k]))}')")
        for key in ("optimizer", "scheduler", "torch_rng", "loader_rng"):
            expect(key not in missing, symptom, where="look at what your checkpoint holds",
                   mistake=_MISSING[key])
        # the evidence: what the first resumed epoch started from, against the uninterrupted run at that epoch
        before, lost = _resume_evidence(case, _RESUMED_FROM[0], saved) if _RESUMED_FROM else ([], [])
        if before:
            steps, k = saved["scheduler"].get("last_epoch"), case.interrupt_after
            extra_steps = "scheduler" in before and isinstance(steps, int) and steps > k
            raise CheckError(f"{symptom}; the checkpoint saved after epoch {k - 1}, before the "
                             "stop, already differs from the uninterrupted run's at that point, in "
                             + ", ".join(_PIECE_NAMES[key] for key in before)
                             + (f" (its scheduler had stepped {steps} times in {k} epochs)" if extra_steps else ""),
                             where="look at every scheduler.step() in your function" if extra_steps else
                                   "look at what your function does on the first run besides training and saving: "
                                   "a reseed or an extra random draw changes the run before any stop",
                             mistake="run_epoch steps the scheduler once at the end of each epoch already: step it "
                                     "nowhere else" if extra_steps else None)
        if lost:
            pieces = ", ".join(_PIECE_NAMES[key] for key in lost)
            raise CheckError(f"{symptom}; when the first epoch after the restart began, these differed from the "
                             f"uninterrupted run's at epoch {case.interrupt_after}: {pieces}",
                             where="look at what your function restores after the restart, before its loop starts",
                             mistake=f"restore {pieces} from the checkpoint before the first resumed epoch "
                                     "(load_checkpoint restores every one of them), and draw nothing from a random "
                                     "stream after restoring it")
        raise CheckError(symptom, where="here your function runs with the reference save_checkpoint and "
                         "load_checkpoint where it calls them; if you restore states yourself, it must restore the "
                         "model, optimizer, scheduler and both random states before the loop starts. Anything else "
                         "that touches a random stream (a reseed, an extra draw) changes the run too")
    passed("train_resumable (equals an uninterrupted run)", len(inputs))


# ---------------------------------------------------------------- map_location


def _small_state(seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 2), nn.BatchNorm1d(2))
    model[1].num_batches_tracked.fill_(7 + seed)  # an int64 tensor: loading must keep every dtype
    return {"model": model.state_dict(), "epoch": seed, "scale": torch.tensor([2.0, 0.5])}


def check_load_on_cpu(fn: Callable[[Path], dict], inputs: Sequence[int] | None = None) -> None:
    """A checkpoint written on a GPU ('cuda:0') loads onto the CPU."""
    inputs = inputs if inputs is not None else [0, 1]
    # "saved on a GPU": the first one, or another (every rank but 0 of a multi-GPU job saves from cuda:1, ...)
    for seed, gpu in [(seed, gpu) for seed in inputs for gpu in ("cuda:0", "cuda:1")]:
        what = f"load_on_cpu(a checkpoint saved on {gpu}, seed {seed})"
        with _workspace() as folder:
            want = _small_state(seed)
            path = make_cuda_checkpoint(folder / "gpu.pt", want, device=gpu)
            try:
                # the notebook's DEVICE is the CPU here; a stand-in shows code that loads onto DEVICE
                with substitute(fn, DEVICE=torch.device("meta")), \
                        mock.patch.object(torch, "load", wraps=torch.load) as spy:
                    got = call(fn, path)
            except CheckError as error:
                if CUDA_ERROR in str(error):
                    raise CheckError(f"{what}: torch.load tried to put the tensors back on '{gpu}', where they "
                                     "were saved, and this machine has no GPU",
                                     where="look at the map_location you pass to torch.load",
                                     mistake=_map_location_mistake(spy, gpu)) from None
                raise
        expect(isinstance(got, dict) and got.keys() == want.keys(),
               f"{what} should return the whole checkpoint (a dict with keys {sorted(want)}), not {describe(got)}",
               where="look at what you return: what torch.load gave you, all of it")
        expect(isinstance(got["model"], dict), f"{what}: checkpoint['model'] should be a dict, not {describe(got['model'])}",
               where="look at what you do to the loaded checkpoint before returning it")
        saved = {"model." + k: v for k, v in want["model"].items()} | {"scale": want["scale"]}
        for key, value in [("model." + k, v) for k, v in got["model"].items()] + [("scale", got["scale"])]:
            expect(isinstance(value, torch.Tensor), f"{what}: {key} should be a tensor, not {describe(value)}",
                   where="look at what you do to the loaded checkpoint before returning it")
            expect(key not in saved or value.dtype == saved[key].dtype,
                   f"{what}: {key} is {value.dtype}, but it was saved as {saved[key].dtype if key in saved else ''}: "
                   "its dtype changed", where="look at what you do to the loaded checkpoint's tensors",
                   mistake="map_location='cpu' moves the tensors and keeps their dtypes; do not convert them (a "
                           ".to(torch.float32) or .float() turns counters such as num_batches_tracked into floats)")
            expect(value.device.type != "meta", f"{what}: {key} went to DEVICE (the check set DEVICE to a stand-in "
                   "device, 'meta', to see where your tensors go); the task asks for the CPU whatever DEVICE is",
                   where="look at the map_location you pass to torch.load",
                   mistake="pass map_location='cpu'")
            expect(value.device.type == "cpu", f"{what}: {key} is on {value.device}, expected the CPU",
                   where="look at the map_location you pass to torch.load",
                   mistake="pass map_location='cpu' so every tensor is loaded onto the CPU")
        expect(same_value(got, want), f"{what}: the loaded values differ from the saved ones",
               where="look at what you do to the loaded checkpoint before returning it")
        with _workspace() as folder:
            _expect_cpu_on_a_gpu_machine(fn, make_cuda_checkpoint(folder / "gpu.pt", want, device=gpu), what)
        with _workspace() as folder:
            # the same path rewritten with another checkpoint: the second load must read the new one
            path = make_cuda_checkpoint(folder / "gpu.pt", want, device=gpu)
            with substitute(fn, DEVICE=torch.device("cpu")):
                call(fn, path)
                newer = _small_state(seed + 100)
                again = call(fn, make_cuda_checkpoint(path, newer, device=gpu))
        expect(not (same_value(again, want) and not same_value(again, newer)),
               f"{what}: the file was rewritten with another checkpoint and loaded again, and your function returned "
               "the first one: the second load returned the first file's contents",
               where="look for anything that keeps what was read between calls: a cache (a dict keyed by path, "
                     "functools.lru_cache), a global",
               mistake="something keeps what was read between calls: read the file with torch.load at every call")
    passed("load_on_cpu", len(inputs))


def _names_a_gpu(location: Any) -> bool:
    """Whether a map_location sends tensors to a GPU: 'cuda', 'cuda:1', torch.device('cuda'), 0, or a dict to one."""
    if isinstance(location, dict):
        return any(_names_a_gpu(v) for v in location.values())
    try:
        return isinstance(location, (str, torch.device, int)) and not isinstance(location, bool) and \
            torch.device(location).type == "cuda"
    except (RuntimeError, TypeError):
        return False


def _expect_cpu_on_a_gpu_machine(fn: Callable[[Path], dict], path: Path, what: str) -> None:
    """On a machine with a GPU, too, the map_location the learner passes must send the tensors to the CPU.

    The grader may have no GPU: torch.cuda.is_available() is played True (and DEVICE is 'cuda:0', as the
    notebook sets it there), and torch.load's map_location is read from a spy, whether the load then works
    (a real GPU) or fails (no CUDA here).
    """
    with substitute(fn, DEVICE=torch.device("cuda", 0)), playing_a_gpu_machine(), \
            mock.patch.object(torch, "load", wraps=torch.load) as spy:
        try:
            call(fn, path)
        except CheckError as error:
            failed: CheckError | None = error
        else:
            failed = None
    maps = [c.kwargs.get("map_location", c.args[1] if len(c.args) > 1 else None) for c in spy.call_args_list]
    # a call without one puts the tensors back where they were saved: on a real GPU it succeeds, on this grader's
    # played one it fails (an answer that then retries with map_location='cpu' would pass only here)
    expect(None not in maps,
           f"{what}: on a machine with a GPU (torch.cuda.is_available() True; the check plays one), your function "
           "calls torch.load without a map_location, which puts every tensor back on the GPU it was saved from",
           where="look at every torch.load call in your function, the first one too",
           mistake="pass map_location='cpu' to the first call: a load that fails only where no GPU is there does not "
                   "fail on a machine with one, and then returns GPU tensors")
    to_gpu = next((m for m in maps if _names_a_gpu(m)), None)
    expect(to_gpu is None,
           f"{what}: on a machine with a GPU (torch.cuda.is_available() True, DEVICE 'cuda:0'; the check plays "
           f"one), your torch.load call passes map_location={to_gpu!r}, which puts every tensor on the GPU; the "
           "task asks for every tensor on the CPU on any machine",
           where="look at the map_location you pass to torch.load: does it depend on the machine?",
           mistake="pass map_location='cpu' on every machine; a checkpoint loaded onto the CPU can still be moved "
                   "to a device later, with model.to(device)")
    if failed is not None:
        raise CheckError(f"{what}, on a machine with a GPU (torch.cuda.is_available() True; the check plays one): "
                         f"{failed.symptom}",
                         where="look at what your function does when a GPU is there: it must load onto the CPU "
                               "all the same") from failed.__cause__


# ---------------------------------------------------------------- inference


def check_load_for_inference(fn: Callable[[Path, nn.Module], nn.Module], inputs: Sequence[Case] | None = None) -> None:
    """The saved weights are loaded, the model is in eval mode, and weights_only stays on."""
    inputs = inputs if inputs is not None else DEFAULT_CASES
    hints = [("Missing key(s) in state_dict", "the checkpoint is a dict of several things (epoch, optimizer, ...); "
              "the model's weights are under checkpoint['model']"),
             ("Unexpected key(s) in state_dict", "the checkpoint is a dict of several things (epoch, optimizer, ...); "
              "the model's weights are under checkpoint['model']")]
    for case in inputs:
        what = f"load_for_inference on {case}"
        with _workspace() as folder:
            s = _trained(case)
            path = folder / "checkpoint.pt"
            make_cuda_checkpoint(path, _saved_states(s, 0, 0.0))  # written on a GPU machine
            fresh = _setup(case, restart=True).model.train()
            with mock.patch.object(torch, "load", wraps=torch.load) as spy:
                # task: "copies its model weights into `model`, and returns the model ready to predict"
                got = _call_loading(fn, what, path, fresh, allow=Allow(changed=(fresh,)), hints=hints)
        expect(isinstance(got, nn.Module), f"{what} should return the model, not {describe(got)}",
               where="look at your return statement")
        expect(same_value(_state(got), _state(s.model)), f"{what}: the returned model's weights differ from the "
               "saved ones",
               where="look at what goes into model.load_state_dict",
               mistake="call model.load_state_dict(checkpoint['model'])")
        still = sorted((name for name, m in got.named_modules() if m.training and name),
                       key=lambda name: not isinstance(got.get_submodule(name), nn.Dropout))
        expect(got.training or not still,
               f"{what}: the returned model's own training flag is off, but its submodules are still in training "
               f"mode, the {type(got.get_submodule(still[0])).__name__ if still else ''} '{still[0] if still else ''}' "
               "among them",
               where="look at how you switch the model to eval mode",
               mistake="setting model.training = False changes only the top module, and dropout reads its own "
                       "flag; model.eval() switches every submodule")
        expect(not any(m.training for m in got.modules()),
               f"{what}: the returned model is still in training mode",
               where="look at what your function does to the model after loading the weights",
               mistake="call model.eval() (with the parentheses: model.eval alone does nothing): in training mode "
                       "dropout keeps dropping units and the same image "
                       "can get different predictions")
        expect(got is fresh, f"{what} returned another model than the one it was given ({describe(got)}), and the "
               "given model " + ("holds the saved weights" if same_value(_state(fresh), _state(s.model)) else
                                 "still holds its own weights"),
               where="look at which model your function loads into and returns",
               mistake="load into the model you were given (model.load_state_dict(...)) and return that same object: "
                       "the caller keeps using their model, not a copy")
        expect(not any(c.kwargs.get("weights_only") is False for c in spy.call_args_list),
               f"{what}: you passed weights_only=False to torch.load",
               where="look at the arguments of your torch.load call",
               mistake="a checkpoint of state_dicts and tensors does not need weights_only=False, and it lets the "
                       "file run arbitrary code while loading; keep the default (weights_only=True)")
    passed("load_for_inference", len(inputs))


# ---------------------------------------------------------------- DataParallel / DDP keys


class _Wrapped(nn.Module):
    """A model whose own key names contain 'module.', as in 'submodule.weight'."""

    def __init__(self) -> None:
        super().__init__()
        self.submodule = nn.Linear(3, 4)
        # 'module.layer.weight'.lstrip('module.') is 'ayer.weight': lstrip removes characters, not a prefix.
        self.layer = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.layer(torch.relu(self.submodule(x)))))


def _default_state_dicts() -> list[dict[str, torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        wrapped = nn.DataParallel(_Wrapped()).state_dict()
        plain = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).state_dict()
        # keys with and without the prefix, one without first, and a layer of the model's own named module_list
        mixed = {"module_list.0.weight": torch.randn(2, 2), "module.layer.weight": torch.randn(3, 2),
                 "norm.running_mean": torch.zeros(3), "module.layer.bias": torch.randn(3),
                 "submodule.bias": torch.randn(2), "module.module.head.weight": torch.randn(2, 2)}
    return [wrapped, plain, mixed]


def check_strip_module_prefix(fn: Callable[[dict], dict], inputs: Sequence[dict] | None = None) -> None:
    """Only a leading 'module.' is removed; keys without it, the order and the tensors stay as they were."""
    inputs = inputs if inputs is not None else _default_state_dicts()
    for state_dict in inputs:
        keys = list(state_dict)
        what = f"strip_module_prefix(state_dict with keys {keys[:3]}{' ...' if len(keys) > 3 else ''})"
        got = call(fn, state_dict)
        want = ref.strip_module_prefix(state_dict)
        expect(isinstance(got, dict), f"{what} should return a dict, not {describe(got)}",
               where="look at your return statement")
        got_keys = list(got)
        if got_keys != list(want):
            everywhere = list(dict.fromkeys(k.replace("module.", "") for k in keys))
            sliced = list(dict.fromkeys(k[len("module."):] for k in keys))
            example = next((k for k in keys if "module." in k.removeprefix("module.")), None)
            expect(got_keys != everywhere or example is None,
                   f"{what}: '{example}' became '{example.replace('module.', '') if example else ''}'; expected "
                   f"'{example.removeprefix('module.') if example else ''}'",
                   where="look at how you take 'module.' off each key",
                   mistake="you removed 'module.' everywhere in the key; strip only the leading prefix: "
                           "key.removeprefix('module.')")
            inside = list(dict.fromkeys(k[len("module."):] if "module." in k else k for k in keys))
            cut = next((k for k in keys if "module." in k and not k.startswith("module.")), None)
            expect(got_keys != inside or cut is None,
                   f"{what}: '{cut}' became '{cut[len('module.'):] if cut else ''}': keys that contain 'module.' "
                   "without starting with it lost their first 7 characters too",
                   where="look at the test that picks the keys to change",
                   mistake="'module.' in key is true wherever 'module.' appears in the key; test "
                           "key.startswith('module.'), or use key.removeprefix('module.')")
            expect(got_keys != sliced, f"{what}: every key lost its first 7 characters, including keys that do not "
                   "start with 'module.'",
                   where="look at how you take 'module.' off each key",
                   mistake="you cut the first 7 characters off every key; use key.removeprefix('module.')")
            expect(got_keys != keys, f"{what}: the keys still start with 'module.'",
                   where="look at the keys of the dict you return: are they the changed ones?",
                   mistake="remove that prefix from each key (key.removeprefix('module.'))")
            stripped = list(dict.fromkeys(k.lstrip("module.") for k in keys))
            expect(got_keys != stripped, f"{what}: 'module.layer.weight' became 'ayer.weight'",
                   where="look at how you take 'module.' off each key",
                   mistake="str.lstrip('module.') removes any of the characters m, o, d, u, l, e and '.', not the "
                           "prefix; use key.removeprefix('module.')")
            expect(sorted(got_keys) != sorted(want), f"{what}: the keys are right but in a different order",
                   where="look at how you build the new dict: in which order are the keys added?",
                   mistake="keep the state_dict's order")
            changed = next((i for i, (g, w) in enumerate(zip(got_keys, want)) if g != w), None) \
                if len(got_keys) == len(want) else None
            if changed is not None:
                old_key = keys[changed]
                raise CheckError(f"{what}: '{old_key}' became '{got_keys[changed]}'; expected "
                                 f"'{list(want)[changed]}'",
                                 where="look at the test that picks the keys to change, and how you change them",
                                 mistake="only 'module.', with its dot, is the wrapper's prefix: a key such as "
                                         f"'{old_key}' names a layer of the model itself (an attribute called "
                                         f"{old_key.split('.')[0]}); test key.startswith('module.')"
                                 if old_key.startswith("module") and not old_key.startswith("module.") else
                                 "only the first 'module.' is the wrapper's prefix: remove it once "
                                 "(key.removeprefix('module.')), not in a loop"
                                 if old_key.startswith("module.module.") and got_keys[changed] == old_key.replace(
                                     "module.", "") else None)
            raise CheckError(f"{what}: the keys should be {list(want)[:4]}..., yours are {got_keys[:4]}...",
                             where="look at how you build each new key from the old one")
        for key in want:
            expect(isinstance(got[key], torch.Tensor) and same_value(got[key], want[key]),
                   f"{what}: the value of '{key}' changed",
                   where="look at what you do to each value",
                   mistake="keep every tensor as it is")
            # task: "with the same tensors": a copy holds the same values in memory of its own
            expect(same_tensor(got[key], want[key]),
                   f"{what}: '{key}' holds a copy of the tensor it was given (equal values, memory of its own); the "
                   "task asks for the same tensors", where="look at what you do to each value",
                   mistake="clone() (or copy.deepcopy, torch.tensor(v)) doubles the model's memory; put the given "
                           "tensor itself in the new dict")
    passed("strip_module_prefix", len(inputs))


# ---------------------------------------------------------------- putting it together: a given run made resumable


class JitterRun(NamedTuple):
    """A training run to make resumable: everything its epochs read or change."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loader: DataLoader
    generator: torch.Generator


def _warmup_then_decay(epoch: int) -> float:
    return (epoch + 1) / 2 if epoch < 2 else 0.7 ** (epoch - 1)


def jitter_run(seed: int) -> JitterRun:
    """A fresh run: a classifier with dropout, Adam, a per-epoch LambdaLR schedule, a shuffling loader.

    The data depend only on nothing but a fixed seed; ``seed`` sets the initial weights and every
    random stream, as a new process with other seeds would.
    """
    g = torch.Generator().manual_seed(77)
    x = torch.randn(24, N_FEATURES, generator=g)
    y = torch.randint(0, N_CLASSES, (24,), generator=g)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(N_FEATURES, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, N_CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_then_decay)
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True, generator=generator)
    random.seed(seed)
    return JitterRun(model, optimizer, scheduler, loader, generator)


def jitter_epoch(run: JitterRun) -> float:
    """One epoch: each batch's inputs get noise of a random size from Python's ``random``; dropout; then the schedule."""
    run.model.train()
    total, count = 0.0, 0
    for inputs, targets in run.loader:
        noisy = inputs + random.uniform(0.0, 0.3) * torch.randn_like(inputs)
        run.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(run.model(noisy), targets)
        loss.backward()
        run.optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    run.scheduler.step()
    return total / count


_JITTER_EPOCH = jitter_epoch  # the real one, while an experiment swaps the module's name for a variant


class JitterCase(NamedTuple):
    """A hidden run: its seed, total epochs, and the epochs after which the job is killed (one or two kills)."""

    seed: int = 0
    epochs: int = 5
    kills: tuple[int, ...] = (2,)


DEFAULT_JITTER_CASES = [JitterCase(0, 5, (2,))]


class _Killed(KeyboardInterrupt):
    """The job was killed: a KeyboardInterrupt, as Ctrl+C and the notebook's ``killed_after`` raise
    (`except Exception` does not swallow it; an `except KeyboardInterrupt` handler runs)."""


def _jitter_uninterrupted(case: JitterCase) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]), _python_random_kept():
        run = jitter_run(case.seed)
        for _ in range(case.epochs):
            jitter_epoch(run)
        return _state(run.model)


@contextmanager
def _python_random_kept() -> Iterator[None]:
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


def _play_jitter(fn: Callable[..., Any], case: JitterCase, folder: Path) -> tuple[dict[str, torch.Tensor], list[int]]:
    """Run ``fn`` with a kill after each epoch count in ``case.kills``, restarting with fresh objects; return the final
    weights and the epochs each start reported."""
    name = getattr(fn, "__name__", "train_jittered")
    path = folder / "run.pt"
    reported: list[int] = []
    kills = list(case.kills)
    unsaved: list[int] = []  # epochs reported to after_epoch while the file still held what it held before them
    repeated: list[int] = []  # epochs reported once more after a restart, with nothing saved since
    for attempt in range(len(kills) + 1):
        run = jitter_run(case.seed if attempt == 0 else case.seed + 1000 * attempt)  # a restart: other seeds
        kill_at = kills[attempt] if attempt < len(kills) else None
        file_seen = [_file_bytes(path)]

        def after_epoch(epoch: int) -> None:
            again = epoch in reported
            reported.append(epoch)
            now = _file_bytes(path)
            if now == file_seen[0]:
                (repeated if again else unsaved).append(epoch)
            file_seen[0] = now
            if kill_at is not None and epoch == kill_at - 1:
                _note_stale_scheduler(path, run.scheduler, epoch)
                raise _Killed(f"killed after epoch {epoch}")

        try:
            # task: "trains the run you are given in place", and its epochs draw from the global random streams
            call(fn, run, case.epochs, path, after_epoch,
                 allow=Allow(changed=(run, *run), global_rng=True))
        except _Killed:  # a KeyboardInterrupt: call lets it through as it is
            continue
        if kill_at is not None:
            raise CheckError(f"{name} on {case}: the job should have been killed when epoch {kill_at - 1} ended, "
                             f"but it returned; epochs {reported} were reported to after_epoch",
                             where="look at when you call after_epoch",
                             mistake="call after_epoch(epoch) after every epoch, once its checkpoint is saved")
    _SCHEDULER_STEPS[:] = [run.scheduler.last_epoch]
    if repeated:
        raise CheckError(f"{name} on {case}: after a restart, your function reported epoch {repeated[0]} to "
                         "after_epoch again, before running any epoch: it had been reported before the kill",
                         where="look at what your function does right after loading the checkpoint",
                         mistake="after_epoch(epoch) reports an epoch the run has just finished and saved; a restart "
                                 "reports only the epochs it runs itself, from the one after the saved epoch")
    if unsaved:
        raise CheckError(f"{name} on {case}: when after_epoch({unsaved[0]}) was called, the file at path still held "
                         f"what it held before epoch {unsaved[0]} ran (nothing of that epoch was saved yet)",
                         where="look at the order of saving and after_epoch in your loop",
                         mistake="after_epoch(epoch) comes once nothing of the epoch can be lost: the job may be "
                                 "killed inside it, so save the checkpoint first, then call after_epoch")
    return _state(run.model), reported


# How many times the scheduler of the last run _play_jitter played had stepped when that run ended (its last_epoch)
_SCHEDULER_STEPS: list[int] = []
# (epoch, last_epoch in the file, the run's last_epoch) at each kill where the file's scheduler state was behind
_STALE_SCHEDULER: list[tuple[int, int, int]] = []


def _note_stale_scheduler(path: Path, scheduler: Any, epoch: int) -> None:
    """At a kill: when the file holds a scheduler state (a dict with a last_epoch) behind the run's own, note it."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - no file, or one of its own kind: nothing to tell
        return
    states = [v for v in saved.values() if isinstance(v, Mapping) and isinstance(v.get("last_epoch"), int)] \
        if isinstance(saved, Mapping) else []
    if states and all(v["last_epoch"] < scheduler.last_epoch for v in states):
        _STALE_SCHEDULER.append((epoch, states[0]["last_epoch"], scheduler.last_epoch))


def _file_bytes(path: Path) -> bytes | None:
    """The file's content, or None when there is none."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None


def check_train_jittered(fn: Callable[..., Any], inputs: Sequence[JitterCase] | None = None) -> None:
    """Killed and restarted with fresh objects, the run ends with exactly the weights of a run never stopped."""
    inputs = inputs if inputs is not None else DEFAULT_JITTER_CASES
    name = getattr(fn, "__name__", "train_jittered")
    for case in inputs:
        what = f"{name} on {case}"
        want = _jitter_uninterrupted(case)
        with _workspace() as folder, _python_random_kept():
            whole, reported = _play_jitter(fn, JitterCase(case.seed, case.epochs, ()), folder)
            # task: "The file loads with torch.load's default weights_only=True" (however the function loads it)
            _load_safely(folder / "run.pt", f"{what}, the file it saved")
        expect(reported == list(range(case.epochs)),
               f"{what}: a run that was never stopped reported epochs {reported} to after_epoch; expected "
               f"{list(range(case.epochs))}", where="look at your loop over the epochs and what you pass to after_epoch")
        steps = _SCHEDULER_STEPS[0] if _SCHEDULER_STEPS else case.epochs
        expect(same_value(whole, want, atol=0, rtol=0),
               f"{what}: a run that was never stopped ends with other weights than {case.epochs} plain epochs of "
               "check.jitter_epoch(run)"
               + (f"; its scheduler stepped {steps} times in {case.epochs} epochs" if steps != case.epochs else ""),
               where="look for anything your function does besides training and saving",
               mistake="jitter_epoch steps the scheduler once at the end of each epoch already: step it nowhere else"
               if steps > case.epochs else "reseeding a random stream, or an extra draw from one, changes the run "
               "itself" if steps == case.epochs else None)
        _STALE_SCHEDULER.clear()
        with _workspace() as folder, _python_random_kept():
            got, reported = _play_jitter(fn, case, folder)
        stale = list(_STALE_SCHEDULER)
        done, expected = 0, []
        for kill in case.kills:
            expected += list(range(done, kill))
            done = kill
        expected += list(range(done, case.epochs))
        # a kill of k comes after k finished epochs, that is after epoch k - 1 (epochs count from 0)
        killed = "killed after epoch" + ("s " if len(case.kills) > 1 else " ") + " and ".join(
            str(k - 1) for k in case.kills)
        expect(reported == expected,
               f"{what}: {killed} and restarted, the epochs run were {reported}; "
               f"expected {expected}", where="look at where a restarted run starts counting",
               mistake="the saved epoch is finished: a restart continues with the one after it")
        expect(same_value(got, want, atol=0, rtol=0),
               f"{what}: {killed} and restarted with fresh objects, the final weights "
               f"differ from an uninterrupted run's (first in '{_first_key_differing(got, want)}')",
               where="list every object and every random stream that jitter_epoch reads or changes: "
                     "each must be saved and restored",
               mistake=(f"when the job was killed after epoch {stale[0][0]}, the scheduler state in the file had "
                        f"last_epoch {stale[0][1]}, the run's scheduler {stale[0][2]}: state_dict() is a snapshot: call "
                        "it at every save (a dict built once before the loop keeps the states of that moment)")
               if stale else _jitter_mistake(got, case) or _jitter_stream_to_blame(fn, case))
    passed(f"{name} (killed, restarted, equal to an uninterrupted run)", len(inputs))


def _epoch_fixed_noise(run: JitterRun) -> float:
    """jitter_epoch with a fixed noise size: it draws nothing from Python's ``random``."""
    with mock.patch.object(random, "uniform", lambda a, b: (a + b) / 2):
        return _JITTER_EPOCH(run)


def _epoch_no_torch_draws(run: JitterRun) -> float:
    """jitter_epoch without draws from torch's global generator: no dropout, noise that is a fixed function of the data."""
    def fixed_noise(inputs: torch.Tensor, **_: Any) -> torch.Tensor:
        return torch.sin(7 * inputs)
    with mock.patch.object(torch, "randn_like", fixed_noise), \
            mock.patch.object(nn.Dropout, "forward", lambda self, x: x):
        return _JITTER_EPOCH(run)


def _jitter_stream_to_blame(fn: Callable[..., Any], case: JitterCase) -> str | None:
    """Find the random stream that a restart gets wrong by experiment: the same kills and restarts with an epoch that
    draws nothing from that one stream. When the run then equals an uninterrupted one, that stream is the cause."""
    import helpers.checks.checkpoints as this
    for epoch, message in (
            (_epoch_fixed_noise, "run again with an epoch that draws nothing from Python's random (a fixed noise size), "
                                 "the same kills and restarts end with an uninterrupted run's weights: what a restart "
                                 "gets wrong is Python's random stream. A restarted run must continue it where the "
                                 "killed one stopped: save random.getstate() with each checkpoint and restore it with "
                                 "random.setstate (random.seed(...) starts a different stream)"),
            (_epoch_no_torch_draws, "run again with an epoch that draws nothing from torch's global generator (no "
                                    "dropout, no torch.randn_like noise), the same kills and restarts end with an "
                                    "uninterrupted run's weights: what a restart gets wrong is torch's global random "
                                    "stream. Save torch.get_rng_state() with each checkpoint and restore it with "
                                    "torch.set_rng_state (torch.manual_seed(...) starts a different stream)")):
        with mock.patch.object(this, "jitter_epoch", epoch), substitute(fn, jitter_epoch=epoch):
            want = _jitter_uninterrupted(case)
            try:
                with _workspace() as folder, _python_random_kept():
                    got = _play_jitter(fn, case, folder)[0]
            except CheckError:  # the experiment failed some other way: it shows nothing
                continue
        if same_value(got, want, atol=0, rtol=0):
            return message
    return None


def _first_key_differing(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> str:
    return next((k for k in want if not torch.equal(got[k], want[k])), "?")


def _jitter_mistake(got: dict[str, torch.Tensor], case: JitterCase) -> str | None:
    """Name the state that was lost, when a twin run that loses exactly it ends with these weights."""
    for lost, message in (("python", "Python's random state was not restored: the noise sizes come from "
                                     "random.uniform, so save random.getstate() and restore it with random.setstate"),
                          ("torch", "torch's global random state was not restored: dropout and torch.randn_like (the noise) "
                                    "draw from it"),
                          ("scheduler", "the scheduler's state was not restored"),
                          ("optimizer", "the optimizer's state (Adam's moment estimates) was not restored"),
                          ("loader", "the loader's generator was not restored: the loader shuffles with run.generator, "
                                     "so save run.generator.get_state() and restore it with set_state"),
                          (_STALE, "the random states you save are the ones read once before the loop: every "
                                   "checkpoint holds the states of the start, not those at the end of its epoch. "
                                   "Read torch.get_rng_state(), random.getstate() and run.generator.get_state() "
                                   "each time you save"),
                          *[(f"stale {name}", f"the {label} you save is the one read once before the loop, not the "
                                               "state at the end of the epoch: read it again each time you save")
                            for name, label in (("torch", "torch random state"), ("python", "Python random state"),
                                                ("loader", "loader generator's state"))]):
        with _workspace() as folder, _python_random_kept():
            twin = _play_jitter(_losing(lost), case, folder)[0]
        if same_value(got, twin, atol=0, rtol=0):
            return message
    return None


_STALE = "stale torch,stale python,stale loader"  # a twin saving every random state as read before the loop


def _losing(lost: str) -> Callable[..., None]:
    def run_losing(run, epochs, path, after_epoch):
        ref.train_jittered(run, epochs, path, after_epoch, skip=tuple(lost.split(",")))
    return run_losing
