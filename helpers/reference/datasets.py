"""Lesson 03 Datasets and DataLoaders: the answer key."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, Subset, random_split


class PointsDataset(Dataset):
    """Points and their class labels, held in memory.

    Steps:
        1. ``__init__`` converts the Python lists to tensors once: features to
           float32 ``[N, D]``, labels to int64 ``[N]``.
        2. ``__len__`` is the number of samples N.
        3. ``__getitem__(i)`` returns the pair ``(features[i], labels[i])``.
    """

    def __init__(self, features: Sequence[Sequence[float]], labels: Sequence[int]) -> None:
        self.features = torch.tensor(features, dtype=torch.float32)
        self.labels = torch.tensor(labels, dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index], self.labels[index]


def fix_length(signal: torch.Tensor, length: int) -> torch.Tensor:
    """Crop a 1-D signal to its first ``length`` samples, or pad it with zeros at the end."""
    if len(signal) >= length:
        return signal[:length]
    return torch.nn.functional.pad(signal, (0, length - len(signal)))


class ClipDataset(Dataset):
    """Clips saved as ``<class name>_<number>.npy`` files, all cropped or padded to one length.

    Steps:
        1. ``__init__`` lists the ``.npy`` files of ``folder`` in sorted order
           (nothing else in the folder is a clip).
        2. ``__len__`` is the number of those files.
        3. ``__getitem__(i)`` loads file i, converts it to a float32 tensor,
           fixes its length, and returns it with the index of its class name.
    """

    def __init__(self, folder: str | Path, length: int, classes: Sequence[str]) -> None:
        self.files = sorted(Path(folder).glob("*.npy"))
        self.length = length
        self.classes = list(classes)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path = self.files[index]
        clip = torch.from_numpy(np.load(path)).float()
        label = self.classes.index(path.stem.split("_")[0])
        return fix_length(clip, self.length), label


def pad_collate(batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack 1-D sequences of different lengths into one zero-padded ``[B, longest]`` tensor.

    Steps:
        1. Record every sequence's length (int64 ``[B]``).
        2. Make a zero tensor ``[B, longest]`` with the sequences' dtype.
        3. Copy sequence i into the start of row i; the rest of the row stays 0.
    """
    lengths = torch.tensor([len(sequence) for sequence in batch])
    padded = torch.zeros(len(batch), int(lengths.max()), dtype=batch[0].dtype)
    for row, sequence in enumerate(batch):
        padded[row, : len(sequence)] = sequence
    return padded, lengths


def collate_sequences(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(sequence, label)`` pairs to ``(padded [B, longest, ...], lengths [B], labels [B])`` with pad_sequence."""
    sequences, labels = zip(*batch)
    padded = pad_sequence(list(sequences), batch_first=True)
    lengths = torch.tensor([len(sequence) for sequence in sequences])
    return padded, lengths, torch.tensor(labels)


def mean_std(dataset: Dataset, batch_size: int = 1000) -> tuple[float, float]:
    """Mean and standard deviation over every pixel of every image in ``dataset``.

    Steps:
        1. Walk the dataset in batches of ``(images, labels)``.
        2. Add up the pixel count, the sum and the sum of squares (in float64).
        3. mean = sum / count; std = sqrt(sum of squares / count - mean**2).
    """
    count, total, total_sq = 0, 0.0, 0.0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        images = images.double()
        count += images.numel()
        total += images.sum().item()
        total_sq += (images**2).sum().item()
    mean = total / count
    return mean, math.sqrt(total_sq / count - mean**2)


def split_train_val(dataset: Dataset, val_fraction: float, seed: int) -> tuple[Subset, Subset]:
    """A reproducible random train/validation split.

    The validation set gets ``int(len(dataset) * val_fraction)`` samples, the
    training set the rest; the shuffle comes from a generator seeded with ``seed``.
    """
    n_val = int(len(dataset) * val_fraction)
    generator = torch.Generator().manual_seed(seed)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val], generator=generator)
    return train, val


def make_loaders(
    train_set: Dataset, val_set: Dataset, batch_size: int, seed: int, device: torch.device
) -> tuple[DataLoader, DataLoader]:
    """Training and validation loaders.

    Training: shuffled by a generator seeded with ``seed``, incomplete last batch
    dropped. Validation: fixed order, every sample kept. Both pin memory only
    when the batches will be copied to a CUDA GPU.
    """
    pin = device.type == "cuda"
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(seed), pin_memory=pin)
    val_loader = DataLoader(val_set, batch_size=batch_size, shuffle=False, drop_last=False, pin_memory=pin)
    return train_loader, val_loader


def choose_num_workers(speeds: dict[tuple[int, bool], float]) -> int:
    """The ``num_workers`` of the fastest measured setting; ``speeds`` maps (num_workers, pin_memory) to images/s."""
    workers, _pin = max(speeds, key=speeds.get)
    return workers


def loading_share(load_ms: float, step_ms: float) -> float:
    """The fraction of a training step's time spent loading its batch: load / (load + step)."""
    return load_ms / (load_ms + step_ms)


# ---------------------------------------------------------------- put it together: a loader for a new format

def parse_recordings(text: str) -> list[tuple[list[float], int]]:
    """The recordings of a ``label,v1,...,vk`` file: one ``(readings, label)`` per line that is not blank or a comment."""
    recordings = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        label, *readings = line.split(",")
        recordings.append(([float(v) for v in readings], int(label)))
    return recordings


class RecordingDataset(Dataset):
    """Every recording of the file, standardised with the mean and std of all readings in it, read once."""

    def __init__(self, path: str | Path) -> None:
        recordings = parse_recordings(Path(path).read_text())
        everything = torch.tensor([v for readings, _ in recordings for v in readings], dtype=torch.float64)
        mean, std = everything.mean(), everything.std(correction=0)
        self.readings = [((torch.tensor(r, dtype=torch.float64) - mean) / std).float() for r, _ in recordings]
        self.labels = [label for _, label in recordings]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.readings[index], self.labels[index]


def make_recording_loader(path: str | Path, batch_size: int, seed: int) -> DataLoader:
    """Shuffled (seeded, own generator) batches ``(padded float32 [B, longest], lengths int64 [B], labels int64 [B])``."""
    return DataLoader(RecordingDataset(path), batch_size=batch_size, shuffle=True, collate_fn=collate_sequences,
                      generator=torch.Generator().manual_seed(seed))
