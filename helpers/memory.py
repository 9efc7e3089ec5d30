"""Counting the bytes autograd keeps for a backward pass (lesson 09's measurements).

A graph that has not been through ``backward()`` holds every tensor saved for it.
:class:`SavedTensorBytes` sees each of them through
``torch.autograd.graph.saved_tensors_hooks`` and keeps only a weak reference,
so it can tell how many bytes some graph still holds without keeping anything
alive itself. Tensors that exist anyway (weights, the input batch) are left out.
"""

from __future__ import annotations

import weakref
from typing import Iterable

import torch


class _Box:
    """What the graph keeps in place of a saved tensor: the tensor, in a box that can be weakly referenced."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class SavedTensorBytes:
    """Inside ``with SavedTensorBytes(owned) as saved:``, records what autograd saves; ``held()`` counts what lives.

    Args:
        owned: tensors that exist anyway (the model's parameters, the data); memory they share is not counted.
    """

    def __init__(self, owned: Iterable[torch.Tensor] = ()) -> None:
        self.boxes: list[weakref.ref] = []
        self.owned = {t.untyped_storage().data_ptr() for t in owned}

    def _pack(self, tensor: torch.Tensor) -> _Box:
        box = _Box(tensor.detach())  # detach: the box must not keep the graph alive by itself
        self.boxes.append(weakref.ref(box))
        return box

    def __enter__(self) -> "SavedTensorBytes":
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda box: box.tensor)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.__exit__(*exc)

    def held(self) -> int:
        """Bytes of saved tensors that some graph still holds, each block of memory counted once."""
        storages = {}
        for ref in self.boxes:
            box = ref()  # None once the graph that held it is gone
            if box is not None:
                storage = box.tensor.untyped_storage()
                if storage.data_ptr() not in self.owned:
                    storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())
