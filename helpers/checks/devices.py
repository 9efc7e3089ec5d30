"""A stand-in GPU, so that device mistakes fail on a grader without one.

On a computer without a GPU every device is the CPU: a batch never moved with
``.to(device)``, a result left on the device, a model never moved (or moved
back), ``.numpy()`` on a device tensor, a checkpoint loaded without
``map_location`` all change nothing, so no check could see them. The stand-in
makes each of them fail as it would on a GPU, with the error PyTorch raises
there, while every tensor stays in ordinary memory (nothing needs CUDA):

- :class:`OnHost` and :class:`OnDevice` tensors carry a place. ``.to(device)``,
  ``.cuda()``, ``.cpu()`` and ``.to(other_tensor)`` move them between the two
  (a copy, as between real devices); ``.device`` and ``.is_cuda`` report
  :data:`STAND_IN_DEVICE` on the device; ``.numpy()`` of a device tensor raises
  PyTorch's TypeError; an operation that combines a host tensor with a device
  tensor raises PyTorch's RuntimeError "Expected all tensors to be on the same
  device...". What is computed from a placed tensor keeps its place. A plain
  tensor has no place of its own and goes with either (like a CPU scalar).
- :func:`place_model` makes a module movable between the two in name (its
  weights stay where they are): its forward wants its inputs where it is and
  returns its outputs there. :func:`outputs_on_device` marks only the outputs.
- :class:`HostTensor` (with :func:`host_collate`) is the simplest use, for
  checks whose model is an ordinary module: there the plain tensors (the
  model's weights, a moved batch) count as on the device, so a batch that never
  went through ``.to(device)`` fails as soon as it meets them, with
  :class:`NotMovedError`.
- :func:`saved_on` / :func:`save_as_on_device` write checkpoints whose tensors
  are tagged with a GPU, as ``torch.save`` writes them there: loading one
  without ``map_location`` fails on a machine without CUDA, with PyTorch's error.

The stand-in is never more lenient than a GPU: every error it raises is the
one PyTorch raises for two devices. It is not stricter either: moving to the
device the tensor is already on, ``.item()``, ``float()`` and ``.tolist()`` of
a device tensor, and 0-d tensors mixed with any device all work, as on a GPU.
"""

from __future__ import annotations

import contextlib
import types
from unittest import mock
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["STAND_IN_DEVICE", "CUDA_LOAD_ERROR", "HostTensor", "NotMovedError", "OnDevice", "OnHost", "Placed",
           "host_collate", "is_on_device", "model_on_device", "moved_to_cpu", "outputs_on_device", "place", "place_model",
           "same_device_error", "save_as_on_device", "saved_on", "storage_locations", "unplaced"]

STAND_IN_DEVICE = torch.device("cuda", 0)
"""What ``.device`` of a tensor on the stand-in device reports, and what checks pass as ``device``."""

CUDA_LOAD_ERROR = "Attempting to deserialize object on a CUDA device"
"""The start of PyTorch's error for ``torch.load`` of a GPU checkpoint without ``map_location`` and without CUDA."""


def same_device_error(first: Any, second: Any) -> str:
    """PyTorch's message when one operation gets tensors on two devices."""
    return f"Expected all tensors to be on the same device, but found at least two devices, {first} and {second}!"


class NotMovedError(RuntimeError):
    """A :class:`HostTensor` (a batch never moved with ``.to(device)``) met the model's tensors."""


def unplaced(t: torch.Tensor) -> torch.Tensor:
    """The plain tensor behind a placed one (the same data, no place)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(torch.Tensor)


def place(t: torch.Tensor, on_device: bool) -> torch.Tensor:
    """``t``'s data as a tensor on the stand-in device (``on_device``) or on the host, without copying."""
    return unplaced(t).as_subclass(OnDevice if on_device else OnHost)


def is_on_device(value: Any) -> bool:
    """True for a tensor on the stand-in device."""
    return isinstance(value, OnDevice)


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_tensors(value))
    return found


def _property(func: Any, name: str) -> bool:
    """Whether ``func`` is the getter of the Tensor property ``name`` (how __torch_function__ sees a property)."""
    getter = torch._C.TensorBase.__dict__.get(name)
    return getattr(func, "__name__", "") == "__get__" and getattr(func, "__self__", None) is getter


def _target(name: str, args: tuple, kwargs: dict) -> bool | None:
    """Where a .to / .cuda / .cpu call moves a tensor: True for the device, False for the host, None if it stays."""
    if name in ("cuda", "cpu"):
        return name == "cuda"
    for value in list(args[1:]) + [kwargs.get("device"), kwargs.get("other")]:
        if isinstance(value, torch.Tensor):
            return isinstance(value, OnDevice) or (not isinstance(value, Placed) and value.device.type != "cpu")
        if isinstance(value, (torch.device, str)) or (isinstance(value, int) and not isinstance(value, bool)):
            return torch.device(value).type != "cpu"
    return None


class Placed(torch.Tensor):
    """A tensor with a place: the host (:class:`OnHost`) or the stand-in device (:class:`OnDevice`)."""

    on_device = False
    plain_on_device = False  # whether plain tensors count as on the device when they meet this one

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if _property(func, "device"):
            return STAND_IN_DEVICE if isinstance(args[0], OnDevice) else torch.device("cpu")
        if _property(func, "is_cuda"):
            return isinstance(args[0], OnDevice)
        if name in ("numpy", "__array__") and isinstance(args[0], OnDevice):
            raise TypeError(f"can't convert {STAND_IN_DEVICE} device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        if name in ("to", "cuda", "cpu") and isinstance(args[0], Placed):
            target = _target(name, args, kwargs)
            if target is not None:
                return type(args[0])._move(func, args, kwargs, target)
        with torch._C.DisableTorchFunctionSubclass():  # looking at the tensors must not come back here
            tensors = _tensors(list(args) + list(kwargs.values()))
            placed = [t for t in tensors if isinstance(t, Placed)]
            plain_on_device = any(t.plain_on_device for t in placed)
            places = set()
            for t in tensors:
                if isinstance(t, OnDevice):
                    places.add(True)
                elif t.dim() == 0:
                    continue  # a CPU scalar goes with tensors on any device, as in PyTorch
                elif isinstance(t, Placed):
                    places.add(False)
                elif plain_on_device:
                    places.add(True)
        if len(places) > 1:
            message = same_device_error(STAND_IN_DEVICE, "cpu")
            raise NotMovedError(message) if plain_on_device else RuntimeError(message)
        # the result is where the operation ran: on the device if a device tensor took part
        if any(isinstance(t, OnDevice) for t in placed):
            result = OnDevice
        else:
            result = cls if all(issubclass(cls, type(t)) for t in placed) else OnHost
        return torch.Tensor.__torch_function__.__func__(result, func, (result,), args, kwargs)

    @classmethod
    def _move(cls, func: Any, args: tuple, kwargs: dict, to_device: bool) -> torch.Tensor:
        """``args[0]`` moved by a .to / .cuda / .cpu call: a copy on another device, itself on its own device."""
        tensor = args[0]
        other = kwargs.get("other", args[1] if len(args) > 1 else None)
        dtype = other.dtype if isinstance(other, torch.Tensor) else next(
            (a for a in args[1:] if isinstance(a, torch.dtype)), kwargs.get("dtype"))
        moved = unplaced(tensor)
        with torch._C.DisableTorchFunctionSubclass():
            if dtype is not None:
                moved = moved.to(dtype, copy=bool(kwargs.get("copy", False)))
            if to_device != tensor.on_device:
                moved = moved.clone()  # another device: a copy, as between real devices
        return moved.as_subclass(OnDevice if to_device else OnHost)


class OnHost(Placed):
    """A tensor in the host's memory (the CPU), next to the stand-in device."""


class OnDevice(Placed):
    """A tensor on the stand-in device (:data:`STAND_IN_DEVICE`)."""

    on_device = True


class HostTensor(OnHost):
    """A batch tensor still "on the host", for checks whose model is an ordinary module.

    It behaves like an ordinary tensor on its own; ``.to(device)``, ``.cuda()``
    and ``.cpu()`` (whatever the device: the check's may be the CPU) return an
    ordinary tensor; combining a HostTensor with an ordinary tensor (the
    model's weights, a moved batch) raises :class:`NotMovedError`, PyTorch's
    RuntimeError for two devices. Checks hand learners loaders whose batches
    are HostTensors (``collate_fn=host_collate``).
    """

    plain_on_device = True

    @classmethod
    def _move(cls, func: Any, args: tuple, kwargs: dict, to_device: bool) -> torch.Tensor:
        other = kwargs.get("other", args[1] if len(args) > 1 else None)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if not isinstance(out, torch.Tensor):
            return out
        # .to(another batch tensor) leaves it on the host; any other move takes it where the model is
        return out.as_subclass(HostTensor) if isinstance(other, HostTensor) else unplaced(out)


def host_collate(samples: list) -> Any:
    """``default_collate``, with every tensor of the batch a :class:`HostTensor`."""
    from torch.utils.data import default_collate

    def wrap(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.as_subclass(HostTensor)
        if isinstance(value, (list, tuple)):
            return type(value)(wrap(v) for v in value)
        if isinstance(value, dict):
            return {k: wrap(v) for k, v in value.items()}
        return value

    return wrap(default_collate(samples))


# ---------------------------------------------------------------- modules

def _mark(value: Any, on_device: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return place(value, on_device)
    if isinstance(value, (list, tuple)):
        return type(value)(_mark(v, on_device) for v in value)
    if isinstance(value, dict):
        return {k: _mark(v, on_device) for k, v in value.items()}
    return value


def outputs_on_device(model: nn.Module) -> nn.Module:
    """Every output of ``model`` comes back as an :class:`OnDevice` tensor, as a GPU model's would; returns it.

    The model stands for one on a GPU, so a call that moves it to the CPU (``.cpu()``, ``.to("cpu")``) is
    recorded: :func:`moved_to_cpu` says how it was moved.
    """
    # a model moved to the CPU (a copy, say) returns its outputs there, as a GPU model moved off the GPU would
    model.register_forward_hook(lambda module, args, out: _mark(out, not module._stand_in_moves_to_cpu))
    object.__setattr__(model, "_stand_in_moves_to_cpu", [])
    for name in ("cpu", "to"):

        def spy(self: nn.Module, *args: Any, _name: str = name, **kwargs: Any) -> Any:
            # only .cpu() and a device written as text count: a torch.device may come from the model's own
            # parameters, which report the CPU here (model.to(next(model.parameters()).device) moves nothing)
            given = [a for a in (*args, kwargs.get("device")) if isinstance(a, str)]
            if _name == "cpu" or "cpu" in map(_device_type, given):
                shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
                self._stand_in_moves_to_cpu.append(f"model.{_name}({shown})")
            return getattr(type(self), _name)(self, *args, **kwargs)

        # bound to the instance, so only this model is watched, and a deep copy's spy watches the copy
        object.__setattr__(model, name, types.MethodType(spy, model))
    return model


def _device_type(text: str) -> str | None:
    """The device type that ``text`` names ("cpu" for "cpu" or "cpu:0"), or None when it names no device."""
    try:
        return torch.device(text).type
    except RuntimeError:
        return None


def moved_to_cpu(model: nn.Module) -> str | None:
    """How the code moved an :func:`outputs_on_device` model to the CPU (``"model.cpu()"``), or None."""
    moves = getattr(model, "_stand_in_moves_to_cpu", None)
    return moves[0] if moves else None


class _PlacedParameter(nn.Parameter):
    """A parameter of a :func:`place_model` module: it reports the device its module was moved to in name, so
    ``next(model.parameters()).device`` finds the device as it would on a real one."""

    _stand_in_on_device = False

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return STAND_IN_DEVICE if self._stand_in_on_device else torch.device("cpu")

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return self._stand_in_on_device

    def __deepcopy__(self, memo: dict) -> _PlacedParameter:
        copied = super().__deepcopy__(memo)
        copied._stand_in_on_device = self._stand_in_on_device  # a copy of a model stays where the model is
        return copied


class _Movable(nn.Module):
    """Mixed in before a module's own class by :func:`place_model`: .to / .cuda / .cpu move it in name."""

    _stand_in_on_device = False

    def _place(self, on_device: bool) -> None:
        self._stand_in_on_device = on_device
        for parameter in self.parameters():
            if isinstance(parameter, _PlacedParameter):
                parameter._stand_in_on_device = on_device

    def to(self, *args: Any, **kwargs: Any) -> nn.Module:  # type: ignore[override]
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None:
            self._place(device.type != "cpu")
        if dtype is not None:
            super().to(dtype=dtype)
        return self

    def cuda(self, device: Any = None) -> nn.Module:  # type: ignore[override]
        self._place(True)
        return self

    def cpu(self) -> nn.Module:  # type: ignore[override]
        self._place(False)
        return self


_movable_classes: dict[type, type] = {}


def _inputs_where_it_is(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    here = model_on_device(module)
    with torch._C.DisableTorchFunctionSubclass():
        tensors = [t for t in _tensors(list(args) + list(kwargs.values())) if t.dim() > 0]
    for t in tensors:
        if isinstance(t, OnDevice) != here:
            first, second = (STAND_IN_DEVICE, "cpu") if here else ("cpu", STAND_IN_DEVICE)
            raise RuntimeError(same_device_error(first, second))
    return _plain(args), _plain(kwargs)


def _outputs_where_it_is(module: nn.Module, args: tuple, out: Any) -> Any:
    return _mark(out, model_on_device(module))


def place_model(model: nn.Module, on_device: bool = False) -> nn.Module:
    """Make ``model`` movable between the host and the stand-in device; returns it, where ``on_device`` says.

    ``model.to(device)``, ``.cuda()`` and ``.cpu()`` move it in name (its weights stay in the CPU's memory, and
    its parameters' ``.device`` reports where the model is; a dtype change happens for real). Its forward then
    wants every input tensor where the model is, raising PyTorch's RuntimeError otherwise (a plain tensor counts
    as on the host, where a real model starts), and returns its outputs there. Where it is:
    :func:`model_on_device`. Its class keeps its name.
    """
    cls = type(model)
    if not issubclass(cls, _Movable):
        if cls not in _movable_classes:
            _movable_classes[cls] = type(cls.__name__, (_Movable, cls), {"__qualname__": cls.__qualname__,
                                                                         "__module__": cls.__module__})
        model.__class__ = _movable_classes[cls]
        model.register_forward_pre_hook(_inputs_where_it_is, with_kwargs=True)
        model.register_forward_hook(_outputs_where_it_is)
        for parameter in model.parameters():
            if type(parameter) is nn.Parameter:
                parameter.__class__ = _PlacedParameter
    model._place(on_device)  # type: ignore[attr-defined]
    return model


def model_on_device(model: nn.Module) -> bool:
    """Whether a :func:`place_model` module is on the stand-in device."""
    return bool(getattr(model, "_stand_in_on_device", False))


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return unplaced(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- checkpoints saved on a GPU
#
# torch.save stores each tensor's data separately from the pickle and writes, in
# the pickle, a "location tag" naming the device the data came from ('cpu',
# 'cuda:0', ...); torch.load uses the tag to put the data back there. The tags
# come from the taggers registered with torch.serialization.register_package,
# asked in priority order. The one below (priority 1, before the CPU tagger's
# 10) answers only inside `saved_on(device)`, and names that device.

_retag_as: list[str] = []


def _retag(storage: Any) -> str | None:
    if _retag_as and storage.device.type == "cpu":
        return _retag_as[-1]
    return None


def _leave_to_others(storage: Any, location: str) -> None:
    return None  # loading is handled by torch's own deserializers


if not any(getattr(tagger, "__qualname__", "") == "_retag" for _, tagger, _ in torch.serialization._package_registry):
    torch.serialization.register_package(1, _retag, _leave_to_others)


@contextlib.contextmanager
def saved_on(device: str = "cuda:0") -> Iterator[None]:
    """While open, ``torch.save`` tags every CPU tensor it writes as on ``device``, as a save on that GPU does."""
    _retag_as.append(str(device))
    try:
        yield
    finally:
        _retag_as.pop()


def storage_locations(path: str | Path) -> set[str]:
    """The device tags stored in a checkpoint file (read without moving anything to a GPU)."""
    seen: set[str] = set()

    def record(storage: Any, location: str) -> Any:
        seen.add(location)
        return storage

    torch.load(path, map_location=record)
    return seen


def save_as_on_device(path: str | Path, obj: Any, device: str = "cuda:0") -> Path:
    """Save ``obj`` to ``path`` as if its tensors had been on ``device`` (a GPU).

    The file is byte for byte what ``torch.save`` writes for tensors on that
    GPU: the same data, with ``device`` as every tensor's location tag. Then it
    verifies the result: every tag is ``device``, and, on a machine without CUDA,
    plain ``torch.load(path)`` fails with PyTorch's CUDA error while
    ``torch.load(path, map_location="cpu")`` works.
    """
    path = Path(path)
    with saved_on(device):
        torch.save(obj, path)
    locations = storage_locations(path)
    if locations != {device}:
        raise RuntimeError(f"save_as_on_device: expected every tensor tagged {device!r}, found {sorted(locations)}")
    if not torch.cuda.is_available():
        try:
            torch.load(path)
        except RuntimeError as error:
            if CUDA_LOAD_ERROR not in str(error):
                raise
        else:
            raise RuntimeError("save_as_on_device: torch.load without map_location should have failed here")
    return path


@contextlib.contextmanager
def playing_a_gpu_machine() -> Iterator[None]:
    """While open, torch says a GPU is there (torch.cuda.is_available() is True, one device): code that picks its
    device by asking shows what it would do on such a machine, where this grader may have none."""
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "device_count", return_value=1):
        yield
