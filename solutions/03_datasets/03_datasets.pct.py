# %% [markdown]
# # 03 Datasets and DataLoaders
#
# A model learns from examples, thousands or millions of them, read in small
# random batches. PyTorch splits that job in two:
#
# - a **`Dataset`** knows how many examples there are and how to fetch example
#   number `i` (from memory, from files, from anywhere);
# - a **`DataLoader`** asks the dataset for examples, groups them into batches,
#   shuffles them each epoch, and can load in background processes.
#
# In this lesson you write datasets over data in memory and over files on disk,
# batch sequences of different lengths, load real MNIST digits with torchvision,
# compute the numbers behind MNIST's famous normalisation, split data into
# training and validation sets, and measure whether loading data is what slows
# training down. There are 9 graded exercises worth 20 points. Each has a
# self-check cell right below it: run it, read its message, fix, repeat.

# %% locked="setup"
import shutil
import tempfile
import time
import warnings
from itertools import islice
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset, TensorDataset, random_split
from torchvision import datasets, transforms
from torchvision.transforms import v2

from helpers.checks import datasets as check
from helpers.data import MNIST_MEAN, MNIST_STD, data_root
from helpers.device import pick_device
from helpers.plots import show_images
from helpers.timing import time_call

torch.manual_seed(0)
DEVICE = pick_device()
DATA_ROOT = data_root()                                   # MNIST is read from (or downloaded to) here
CLIP_FOLDER = Path(tempfile.mkdtemp(prefix="clips-"))     # section 2 writes its files here; the last cell removes it
CLASSES = ["low", "high"]                                 # the two kinds of clip in section 2
CLIP_LENGTH = 100                                         # every clip is cropped or padded to this many samples
TRAIN_DIGITS = 8_000                                      # the passes over MNIST below read this many digits (None: all)

# %% [markdown]
# ## 1. What a dataset is
#
# A **map-style** dataset is anything you can ask "how many examples?" and
# "give me example `i`". In Python those two questions are `len(dataset)` and
# `dataset[i]`, so a dataset is a class with two methods:
#
# - `__len__(self)` returns the number of examples;
# - `__getitem__(self, index)` returns example `index`, for every index from 0
#   to `len(dataset) - 1`, usually as a tuple like `(input, label)`.
#
# `__init__` does the one-time work: remember where the data is, read a list of
# files, convert lists to tensors. Subclassing `torch.utils.data.Dataset` marks
# the class as a dataset (and gives you `dataset_a + dataset_b` for free).
#
# Here is a dataset of the numbers 0..n-1 and their squares:

# %%
class SquaresDataset(Dataset):
    """Example i is the pair (i, i**2), both as float32 tensors."""

    def __init__(self, n: int) -> None:
        self.x = torch.arange(n, dtype=torch.float32)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.x[index] ** 2


squares = SquaresDataset(10)
print("len:", len(squares))
print("squares[3]:", squares[3])
print("squares[-1]:", squares[-1])

# %% [markdown]
# A `DataLoader` turns single examples into batches. It calls `__getitem__` once
# per example and then **collates** the examples: the default `collate_fn` stacks
# the first elements of all tuples into one tensor and the second elements into
# another, adding a batch dimension in front.

# %%
for inputs, targets in DataLoader(squares, batch_size=4):
    print("inputs", inputs, " targets", targets)

# %% [markdown]
# The other kind, an **iterable-style** dataset (`IterableDataset`), has no
# `__getitem__`: it only yields examples one after another, like a stream from
# a database or a log. Use it when you cannot index your data; everything else
# in this lesson is map-style, which is what you want whenever you can say
# "example `i`", because then the DataLoader can shuffle and split it.

# %%
class CountdownStream(IterableDataset):
    """Yields n, n-1, ..., 1: no len, no indexing, just iteration."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(torch.arange(self.n, 0, -1))


print([batch.tolist() for batch in DataLoader(CountdownStream(5), batch_size=2)])

# %% [markdown]
# ### Exercise 1 (2 points): a dataset over lists in memory
#
# Write the class `PointsDataset(features, labels)`:
#
# - `features` is a list of N rows, each a list of D numbers (they may be
#   Python ints or floats); `labels` is a list of N class indices.
# - `__init__` converts both lists to tensors **once**: features to float32
#   `[N, D]`, labels to int64 `[N]`.
# - `__len__` returns N; `__getitem__(i)` returns the pair `(features[i], labels[i])`.
#
# *Hint:* look up the `dtype` argument of `torch.tensor`: without it, a list of
# Python ints becomes int64, and layers cannot compute with int64 inputs. Make
# `__len__` count what `__getitem__` indexes: samples, not features.

# %% solution="ex_points_dataset"
class PointsDataset(Dataset):
    """Points (float32 features) and their class labels (int64), held in memory."""

    def __init__(self, features: list[list[float]], labels: list[int]) -> None:
        ### BEGIN SOLUTION
        self.features = torch.tensor(features, dtype=torch.float32)
        self.labels = torch.tensor(labels, dtype=torch.int64)
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        return len(self.labels)
        ### END SOLUTION

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        return self.features[index], self.labels[index]
        ### END SOLUTION


# %% check="ex_points_dataset_check"
check.check_points_dataset(PointsDataset)

# %% graded="ex_points_dataset_tests" points=2
check.check_points_dataset(PointsDataset)
### BEGIN HIDDEN TESTS
check.check_points_dataset(PointsDataset, inputs=[
    ([[0.25]], [3]),
    ([[2, 4], [6, 8], [1, 3], [5, 7]], [0, 0, 1, 1]),
    ([[1.5, -2.0, 0.25, 4.0], [0.0, 0.0, 0.0, 1.0]], [1, 0]),
])
### END HIDDEN TESTS

# %% [markdown]
# Once it passes, the DataLoader batches it like any other dataset:

# %%
points = PointsDataset([[0, 1], [2, 3], [4, 5]], [1, 0, 1])
features, labels = next(iter(DataLoader(points, batch_size=3)))
print(features, features.dtype)
print(labels, labels.dtype)

# %% [markdown]
# ## 2. A dataset over files on disk
#
# Real data usually lives in files: one image, recording or document per file,
# too much to hold in memory at once. The dataset then keeps only the **list of
# file names** and opens file `i` when `__getitem__(i)` asks for it.
#
# Our files are short "recordings" of a low or a high tone with some noise, each
# saved as a NumPy `.npy` file named `<class>_<number>.npy`. Like real
# recordings, they have different lengths. The folder also holds a `README.txt`,
# because real folders always contain something that is not data.

# %%
def make_clip(kind: str, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """A noisy sine tone: "low" completes a cycle every 32 samples, "high" every 8."""
    period = 32 if kind == "low" else 8
    t = np.arange(n_samples)
    return (np.sin(2 * np.pi * t / period) + 0.3 * rng.standard_normal(n_samples)).astype(np.float32)


rng = np.random.default_rng(0)
for number in range(24):
    kind = CLASSES[number % 2]
    np.save(CLIP_FOLDER / f"{kind}_{number:03d}.npy", make_clip(kind, int(rng.integers(40, 160)), rng))
(CLIP_FOLDER / "README.txt").write_text("Noisy low and high tones, one clip per .npy file.\n")

names = sorted(path.name for path in CLIP_FOLDER.iterdir())
print(len(names), "files:", names[:4], "...", names[-2:])
print("lengths of the first five clips:", [len(np.load(path)) for path in sorted(CLIP_FOLDER.glob("*.npy"))[:5]])

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 2.2), sharey=True)
for ax, name in zip(axes, ["low_000.npy", "high_001.npy"]):
    clip = np.load(CLIP_FOLDER / name)
    ax.plot(clip, linewidth=1)
    ax.set_title(f"{name}: {len(clip)} samples", fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# A batch must be one rectangular tensor, so clips of different lengths cannot be
# stacked as they are. The simplest fix, used for audio in many tutorials, is to
# bring every clip to one fixed length when it is loaded: keep the first
# `length` samples of a long clip (crop), and append zeros to a short one (pad).
#
# `F.pad(t, (left, right))` adds `left` zeros before and `right` zeros after the
# last dimension of `t`:

# %%
print(F.pad(torch.tensor([1.0, 2.0, 3.0]), (0, 2)))
print(F.pad(torch.tensor([1.0, 2.0, 3.0]), (2, 0)))

# %% [markdown]
# ### Exercise 2 (2 points, 1 each): crop or pad to a fixed length
#
# Write `fix_length(signal, length)` for a 1-D tensor `signal`:
#
# - a signal with at least `length` samples is **cropped** to its first `length`
#   samples (the start of a recording is kept, the end dropped);
# - a shorter signal is **padded** with zeros at the **end** up to `length`.
#
# The result keeps the signal's dtype. One point for cropping, one for padding.
#
# *Hint:* slicing crops; the `F.pad` examples above show which argument puts the
# zeros on which side.

# %% solution="ex_fix_length"
def fix_length(signal: torch.Tensor, length: int) -> torch.Tensor:
    """Crop ``signal`` to its first ``length`` samples, or zero-pad it at the end."""
    ### BEGIN SOLUTION
    if len(signal) >= length:
        return signal[:length]
    return F.pad(signal, (0, length - len(signal)))
    ### END SOLUTION


# %% check="ex_fix_length_check"
check.check_fix_length(fix_length)

# %% graded="ex_fix_length_crop_tests" points=1
check.check_fix_length(fix_length, part="crop")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(302)
check.check_fix_length(fix_length, part="crop", inputs=[(torch.arange(100.0), 1), (torch.randn(9, generator=g), 8),
                                                        (torch.randn(3, dtype=torch.float64, generator=g), 3)])
### END HIDDEN TESTS

# %% graded="ex_fix_length_pad_tests" points=1
check.check_fix_length(fix_length, part="pad")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(303)
check.check_fix_length(fix_length, part="pad", inputs=[(torch.tensor([5.0]), 4),
                                                       (torch.randn(3, dtype=torch.float64, generator=g), 10)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 3 (3 points): the clip dataset
#
# Write the class `ClipDataset(folder, length, classes)`:
#
# - `folder` is a `pathlib.Path`. Every `.npy` file in it is one clip, named
#   `<class name>_<anything>.npy`; any other file (a `README.txt`, macOS's
#   hidden `.DS_Store`, ...) is **not** a clip.
# - Index `i` means clip number `i` in the **sorted** order of the file names,
#   so that it is the same file on every computer (a folder listing comes in no
#   fixed order).
# - `len(dataset)` is the number of clips.
# - `dataset[i]` is `(clip, label)`: the clip as a **float32 tensor** (files may
#   hold float64) of exactly `length` samples (use your `fix_length`), and
#   `label`, the index (a Python `int`) of the file's class name in `classes` (for
#   `high_007.npy` and `classes=["low", "high"]`, the label is 1).
# - A clip is read from disk when `dataset[i]` asks for it, not in `__init__`:
#   the folder may hold more than fits in memory.
#
# One point for a `__len__` that agrees with `__getitem__` (every index from 0 to
# `len - 1` works and returns a tensor and an int), two for the right clips and
# labels in the right order.
#
# *Hint:* look up `Path.glob` (it takes a pattern) and `Path.stem` in Python's
# `pathlib`, and `str.split`; `torch.from_numpy` converts an array but keeps the
# array's dtype.

# %% solution="ex_clip_dataset"
class ClipDataset(Dataset):
    """Clips saved as .npy files, each cropped or padded to ``length`` samples."""

    def __init__(self, folder: Path, length: int, classes: list[str]) -> None:
        ### BEGIN SOLUTION
        self.files = sorted(Path(folder).glob("*.npy"))
        self.length = length
        self.classes = list(classes)
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        return len(self.files)
        ### END SOLUTION

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        ### BEGIN SOLUTION
        path = self.files[index]
        clip = torch.from_numpy(np.load(path)).float()
        label = self.classes.index(path.stem.split("_")[0])
        return fix_length(clip, self.length), label
        ### END SOLUTION


# %% check="ex_clip_dataset_check"
check.check_clip_dataset(ClipDataset)

# %% graded="ex_clip_dataset_len_tests" points=1
check.check_clip_dataset(ClipDataset, part="len")
### BEGIN HIDDEN TESTS
rng_hidden = np.random.default_rng(304)
hidden_clips = {f"{kind}_{k:02d}.npy": rng_hidden.standard_normal(n).astype(np.float32)
                for k, (kind, n) in enumerate([("tone", 16), ("noise", 3), ("tone", 40), ("noise", 17), ("tone", 1)])}
check.check_clip_dataset(ClipDataset, part="len", inputs=[(hidden_clips, 16, ["tone", "noise"])])
### END HIDDEN TESTS

# %% graded="ex_clip_dataset_items_tests" points=2
check.check_clip_dataset(ClipDataset, part="items")
### BEGIN HIDDEN TESTS
rng_hidden = np.random.default_rng(305)
hidden_clips = {f"{kind}_{k:02d}.npy": rng_hidden.standard_normal(n)
                for k, (kind, n) in enumerate([("tone", 16), ("noise", 3), ("tone", 40), ("noise", 17), ("tone", 1)])}
check.check_clip_dataset(ClipDataset, part="items", inputs=[(hidden_clips, 16, ["tone", "noise"])])
### END HIDDEN TESTS

# %% [markdown]
# Every clip now has the same length, so the default collate can stack them.
# (The sorted files come grouped by class, `high_...` before `low_...`, so the
# loader shuffles, with a seeded generator; section 5 explains both.)

# %%
clips = ClipDataset(CLIP_FOLDER, CLIP_LENGTH, CLASSES)
clip, label = clips[0]
print(len(clips), "clips;", "clips[0]:", clip.shape, clip.dtype, "label", label)
clip_loader = DataLoader(clips, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
batch_clips, batch_labels = next(iter(clip_loader))
print("one batch:", batch_clips.shape, batch_labels)

# %% [markdown]
# ## 3. Sequences of different lengths
#
# Cropping throws information away, and padding every example to the length of
# the longest one in the whole dataset wastes memory and compute. For sentences,
# token sequences or recordings, the usual way is to keep each example's own
# length and pad only **within a batch**, to the longest sequence of that batch.
# That is the job of a custom `collate_fn`: the DataLoader hands it the list of
# examples it fetched, and whatever it returns is the batch.
#
# First, what goes wrong without one. (A plain Python list of `(tensor, label)`
# pairs is already a map-style dataset: it has `len` and indexing.)

# %%
raw_clips = [(torch.from_numpy(np.load(path)), CLASSES.index(path.stem.split("_")[0]))
             for path in sorted(CLIP_FOLDER.glob("*.npy"))]
print("lengths:", [len(c) for c, _ in raw_clips[:6]], "...")
try:
    next(iter(DataLoader(raw_clips, batch_size=4)))
except RuntimeError as error:
    print("default collate fails:", str(error).splitlines()[0])

# %% [markdown]
# A padded batch needs the original **lengths** too: later code uses them to
# ignore the padding, for example with a mask (`True` where there is real data),
# or by handing them to `torch.nn.utils.rnn.pack_padded_sequence` so a recurrent
# network skips the padded steps.
#
# ### Exercise 4 (2 points): a padding collate, by hand
#
# Write `pad_collate(batch)`. `batch` is a list of B 1-D tensors of different
# lengths (all of one dtype). Return a pair:
#
# - `padded`: a `[B, longest]` tensor with the sequences' dtype, where `longest`
#   is the length of the longest sequence **in this batch**; row `i` starts with
#   sequence `i` and is filled up with zeros **at the end** (right side);
# - `lengths`: an int64 tensor `[B]` with each sequence's original length.
#
# One point for `padded`, one for `lengths`.
#
# *Hint:* one way is to start from a tensor of zeros of the final shape and
# dtype and write each sequence into the beginning of its row (assigning to a
# slice of a tensor writes into it); another is your `fix_length` idea per
# sequence, then `torch.stack`.

# %% solution="ex_pad_collate"
def pad_collate(batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-pad 1-D sequences at the end to the batch's longest; also return their lengths."""
    ### BEGIN SOLUTION
    lengths = torch.tensor([len(sequence) for sequence in batch])
    padded = torch.zeros(len(batch), int(lengths.max()), dtype=batch[0].dtype)
    for row, sequence in enumerate(batch):
        padded[row, : len(sequence)] = sequence
    return padded, lengths
    ### END SOLUTION


# %% check="ex_pad_collate_check"
check.check_pad_collate(pad_collate)

# %% graded="ex_pad_collate_padded_tests" points=1
check.check_pad_collate(pad_collate, part="padded")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(306)
hidden_batches = [[torch.tensor([2.5])], [torch.arange(5), torch.arange(5), torch.arange(2)],
                  [torch.randn(7, generator=g), torch.randn(3, generator=g)]]
check.check_pad_collate(pad_collate, part="padded", inputs=hidden_batches)
### END HIDDEN TESTS

# %% graded="ex_pad_collate_lengths_tests" points=1
check.check_pad_collate(pad_collate, part="lengths")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(307)
hidden_batches = [[torch.tensor([2.5])], [torch.arange(5), torch.arange(5), torch.arange(2)],
                  [torch.randn(7, generator=g), torch.randn(3, generator=g)]]
check.check_pad_collate(pad_collate, part="lengths", inputs=hidden_batches)
### END HIDDEN TESTS

# %% [markdown]
# Your collate in action, with the mask that marks the real samples:

# %%
padded, lengths = pad_collate([torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0]), torch.tensor([5.0, 6.0])])
print(padded)
print("lengths:", lengths)
print("mask:\n", torch.arange(padded.shape[1]) < lengths.unsqueeze(1))

# %% [markdown]
# PyTorch has this built in: `torch.nn.utils.rnn.pad_sequence(sequences)` pads a
# list of tensors whose **first** dimension differs (the other dimensions must
# match, so it also pads sequences of feature vectors, `[T_i, F]`). Two
# defaults to know: it pads with 0 at the end, and it puts the time dimension
# first, `[longest, B, ...]`, the layout PyTorch's recurrent layers were first
# written for. Pass `batch_first=True` for the usual `[B, longest, ...]`.

# %%
sequences = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
print("default, time first:\n", pad_sequence(sequences))
print("batch_first=True:\n", pad_sequence(sequences, batch_first=True))
print("two features per step:", pad_sequence([torch.ones(3, 2), torch.ones(5, 2)], batch_first=True).shape)

# %% [markdown]
# ### Exercise 5 (1 point): a collate for (sequence, label) pairs, with `pad_sequence`
#
# Datasets usually return `(sequence, label)` pairs. Write
# `collate_sequences(batch)` for a list of B such pairs, where each sequence is a
# tensor `[T_i]` or `[T_i, F]` and each label an int. Return
# `(padded, lengths, labels)`:
#
# - `padded`: `[B, longest]` or `[B, longest, F]`, zero-padded at the end, made
#   with `pad_sequence`;
# - `lengths`: int64 `[B]`, the number of time steps `T_i` of each sequence;
# - `labels`: int64 `[B]`.
#
# *Hint:* separate the pairs into the sequences and the labels first (Python's
# built-in `zip` can "unzip" a list of pairs). A sequence's length is its number
# of time steps, not its number of elements.

# %% solution="ex_collate_sequences"
def collate_sequences(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad the sequences with pad_sequence; return (padded, lengths, labels)."""
    ### BEGIN SOLUTION
    sequences, labels = zip(*batch)
    padded = pad_sequence(list(sequences), batch_first=True)
    lengths = torch.tensor([len(sequence) for sequence in sequences])
    return padded, lengths, torch.tensor(labels)
    ### END SOLUTION


# %% check="ex_collate_sequences_check"
check.check_collate_sequences(collate_sequences)

# %% graded="ex_collate_sequences_tests" points=1
check.check_collate_sequences(collate_sequences)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(308)
check.check_collate_sequences(collate_sequences, inputs=[
    [(torch.randn(5, 3, generator=g), 4)],
    [(torch.tensor([1, 2]), 0), (torch.tensor([3, 4, 5, 6]), 1), (torch.tensor([7]), 1)],
])
### END HIDDEN TESTS

# %% [markdown]
# Handed to a DataLoader as `collate_fn`, it batches the raw clips, each batch
# padded only as far as its own longest clip:

# %%
loader = DataLoader(raw_clips, batch_size=4, shuffle=True, collate_fn=collate_sequences,
                    generator=torch.Generator().manual_seed(0))
for padded, lengths, labels in list(loader)[:3]:
    print(f"padded {list(padded.shape)}  lengths {lengths.tolist()}  labels {labels.tolist()}")

# %% [markdown]
# ## 4. Real images: torchvision's MNIST and transforms
#
# `torchvision.datasets` holds ready-made `Dataset` classes for well-known data
# sets. `datasets.MNIST(root, train, download, transform)` finds the 28x28
# handwritten digits under `root` (and downloads them there first if they are
# missing). Each example is a `(PIL image, int label)` pair.
#
# The course reads data from `DATA_ROOT`, set in the first cell. Without an
# internet connection the course's tests use an offline copy there: 8,000
# "training" and 2,000 "test" digits taken from MNIST's real test set. Online,
# you get the full 60,000 / 10,000.

# %%
mnist_pil = datasets.MNIST(root=DATA_ROOT, train=True, download=True)
image, label = mnist_pil[0]
print(type(image).__name__, image.size, image.mode, "label:", label)

# %% [markdown]
# A **transform** is a function applied to each example inside `__getitem__`.
# `transforms.ToTensor()` turns a PIL image (or a NumPy array) of bytes 0..255
# into a float32 tensor `[channels, height, width]` with values in [0, 1].
# `transforms.Compose([...])` chains several transforms.

# %%
to_tensor = transforms.ToTensor()
pixels = to_tensor(image)
print(pixels.shape, pixels.dtype, "min", pixels.min().item(), "max", pixels.max().item())

mnist_train = datasets.MNIST(root=DATA_ROOT, train=True, download=True, transform=to_tensor)
first = torch.stack([mnist_train[i][0] for i in range(16)])
show_images(first, [mnist_train[i][1] for i in range(16)])
plt.show()

# %% [markdown]
# **Changed in newer torchvision:** `torchvision.transforms.v2` is the current
# transforms API. There, `ToTensor()` is split into `v2.ToImage()` followed by
# `v2.ToDtype(torch.float32, scale=True)`, which give the same tensor. The
# classic `transforms` used in this lesson still work and are what most code
# you read uses.

# %%
modern = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
difference = (modern(image) - pixels).abs().max().item()
print(f"v2 gives the same values, up to float rounding: largest difference {difference:.0e}")

# %% [markdown]
# ### Normalising inputs
#
# Networks train better when their inputs are centred on 0 with a spread of
# about 1. `transforms.Normalize(mean, std)` does `(x - mean) / std` for each
# channel. For MNIST you will see `Normalize((0.1307,), (0.3081,))` everywhere:
# 0.1307 and 0.3081 are the mean and standard deviation of **all pixels of all
# 60,000 training images** (after `ToTensor`, so on the [0, 1] scale). They are
# computed from the training set only, and then used unchanged for validation
# and test data, so that every split is transformed the same way.
#
# ### Exercise 6 (3 points): compute the mean and std of a dataset
#
# Write `mean_std(dataset, batch_size)` returning the pair `(mean, std)` as
# Python floats, taken over **every pixel of every image** of a dataset of
# `(image tensor, label)` pairs. Go through it with
# `DataLoader(dataset, batch_size=batch_size)` and never hold more than one
# batch of images at a time, so that a dataset too large for memory works too.
# The identity that makes one pass enough:
#
# $$\text{mean} = \frac{\sum x}{n}, \qquad \text{std} = \sqrt{\frac{\sum x^2}{n} - \text{mean}^2}.$$
#
# (Dividing by $n - 1$ instead of $n$, as `tensor.std()` does, is accepted too.)
# Compute the totals in float64: when pixels are large next to their spread (raw
# sensor readings around 1000 that vary by less than 1, say), $\sum x^2 / n$ and
# $\text{mean}^2$ agree in their first seven digits, all that float32 keeps, and
# the std is lost. The tests include such a dataset.
#
# One point for the mean, two for the std.
#
# *Hint:* think about which running totals you need across batches. Two tempting shortcuts give wrong numbers:
# the average of per-batch means is off when the last batch is smaller, and the
# average of per-image stds ignores how much images differ from each other.

# %% solution="ex_mean_std"
def mean_std(dataset: Dataset, batch_size: int = 1000) -> tuple[float, float]:
    """Mean and standard deviation over all pixels of all images in ``dataset``."""
    ### BEGIN SOLUTION
    count, total, total_sq = 0, 0.0, 0.0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        images = images.double()
        count += images.numel()
        total += images.sum().item()
        total_sq += (images**2).sum().item()
    mean = total / count
    return mean, (total_sq / count - mean**2) ** 0.5
    ### END SOLUTION


# %% check="ex_mean_std_check"
check.check_mean_std(mean_std)

# %% graded="ex_mean_std_mean_tests" points=1
check.check_mean_std(mean_std, part="mean")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(309)
hidden_images = torch.rand(30, 1, 4, 4, generator=g) * torch.linspace(0.2, 1.0, 30).view(30, 1, 1, 1)
hidden_labels = torch.zeros(30, dtype=torch.long)
check.check_mean_std(mean_std, part="mean", inputs=[(TensorDataset(hidden_images, hidden_labels), 7)])
### END HIDDEN TESTS

# %% graded="ex_mean_std_std_tests" points=2
check.check_mean_std(mean_std, part="std")
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(310)
hidden_images = torch.rand(30, 1, 4, 4, generator=g) * torch.linspace(0.2, 1.0, 30).view(30, 1, 1, 1)
hidden_labels = torch.zeros(30, dtype=torch.long)
check.check_mean_std(mean_std, part="std", inputs=[(TensorDataset(hidden_images, hidden_labels), 7),
                                                   (TensorDataset(hidden_images[:8], hidden_labels[:8]), 8)])
### END HIDDEN TESTS

# %% [markdown]
# Now the real thing, over the MNIST training images in `DATA_ROOT`:

# %%
def first_digits(dataset: Dataset) -> Dataset:
    """The first TRAIN_DIGITS examples of ``dataset`` (a Subset), or all of it when that is fewer or None."""
    if TRAIN_DIGITS is None or len(dataset) <= TRAIN_DIGITS:
        return dataset
    return Subset(dataset, range(TRAIN_DIGITS))


mean, std = mean_std(first_digits(mnist_train))
print(f"computed: mean {mean:.4f}, std {std:.4f}   (the published values: {MNIST_MEAN}, {MNIST_STD})")

# %% [markdown]
# This pass, and the speed measurements below, read the first 8,000 training
# digits (`TRAIN_DIGITS` at the top): enough for stable numbers, and a fixed
# cost whether your copy of MNIST has 60,000 digits or the course's 8,000-digit
# offline sample. Over all 60,000 the pass prints the published 0.1307 and
# 0.3081; on 8,000 digits the numbers are close but not the same, because it is
# a different sample of digits; either set would normalise well.
# The course keeps the published constants (`MNIST_MEAN`, `MNIST_STD` from
# `helpers.data`) so that everyone's results agree.
#
# With `Normalize` added, the pixels have mean about 0 and std about 1:

# %%
normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
mnist_train_norm = datasets.MNIST(root=DATA_ROOT, train=True, download=True, transform=normalize)
mean, std = mean_std(first_digits(mnist_train_norm))
print(f"after Normalize: mean {mean:.3f}, std {std:.3f}")

# %% [markdown]
# ## 5. DataLoader settings and a validation split
#
# The DataLoader arguments you will set most often:
#
# | argument | what it does |
# | --- | --- |
# | `batch_size` | examples per batch |
# | `shuffle` | a new random order every epoch (for training); pass a seeded `generator=torch.Generator().manual_seed(...)` to make that order reproducible |
# | `drop_last` | drop the last batch when it is smaller than `batch_size` |
# | `collate_fn` | how a list of examples becomes a batch (section 3) |
# | `num_workers` | how many background processes load examples (0: the main process does it) |
# | `pin_memory` | put batches in page-locked memory, which copies to a CUDA GPU faster |
#
# Watch `shuffle`, `generator` and `drop_last` on the numbers 0..9:

# %%
numbers = TensorDataset(torch.arange(10))
print("batch_size=4:               ", [b[0].tolist() for b in DataLoader(numbers, batch_size=4)])
print("drop_last=True:             ", [b[0].tolist() for b in DataLoader(numbers, batch_size=4, drop_last=True)])
shuffled = DataLoader(numbers, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
print("shuffle=True, epoch 1:      ", [b[0].tolist() for b in shuffled])
print("shuffle=True, epoch 2:      ", [b[0].tolist() for b in shuffled])
again = DataLoader(numbers, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
print("same seed, new loader:      ", [b[0].tolist() for b in again])

# %% [markdown]
# Each epoch gets a new order, and a loader built with the same seed repeats the
# same sequence of orders: runs become reproducible without touching PyTorch's
# global random state (`torch.manual_seed`), which model initialisation and
# dropout also draw from.
#
# `drop_last=True` is common for training: a last batch of 2 examples gives a
# noisy gradient step, and layers like batch normalisation can fail on a batch of
# one. For validation you keep every example.
#
# ### Train / validation split
#
# You choose settings (learning rate, epochs, model size) by measuring on data
# the model does not train on: a **validation** set, carved out of the training
# data. The test set is kept for the very end. `random_split(dataset, lengths,
# generator=...)` shuffles the indices and cuts them into pieces, returning one
# `Subset` per piece (a dataset that forwards `subset[i]` to
# `dataset[subset.indices[i]]`). Without a seeded generator you get a different
# split on every run, so validation scores from two runs are not comparable, and
# after a restart examples you trained on can end up in the validation set.

# %%
part_a, part_b = random_split(numbers, [7, 3], generator=torch.Generator().manual_seed(0))
print(type(part_a).__name__, "indices:", part_a.indices, "and", part_b.indices)
print("part_b[0] is numbers[part_b.indices[0]]:", part_b[0])

# %% [markdown]
# ### Exercise 7 (1 point): a reproducible train/validation split
#
# Write `split_train_val(dataset, val_fraction, seed)` returning `(train, val)`:
# the validation set gets `n_val = int(len(dataset) * val_fraction)` examples, the
# training set the rest. The split is the one `random_split` makes with the
# lengths `[n_train, n_val]` (in that order) and its own generator seeded with
# `seed`, so the same seed gives the same split on every computer; return the two
# `Subset`s as `(train, val)`. It must not touch PyTorch's global random state.
#
# *Hint:* look up `torch.Generator` and its `manual_seed` method. `torch.manual_seed`
# would reset the global generator that the rest of your program draws from.

# %% solution="ex_split"
def split_train_val(dataset: Dataset, val_fraction: float, seed: int) -> tuple[Subset, Subset]:
    """A random, reproducible (train, val) split of ``dataset``."""
    ### BEGIN SOLUTION
    n_val = int(len(dataset) * val_fraction)
    generator = torch.Generator().manual_seed(seed)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val], generator=generator)
    return train, val
    ### END SOLUTION


# %% check="ex_split_check"
check.check_split_train_val(split_train_val)

# %% graded="ex_split_tests" points=1
check.check_split_train_val(split_train_val)
### BEGIN HIDDEN TESTS
check.check_split_train_val(split_train_val, inputs=[(TensorDataset(torch.arange(50)), 0.2, 123),
                                                     (TensorDataset(torch.arange(7)), 0.5, 1)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 8 (2 points): training and validation loaders
#
# Write `make_loaders(train_set, val_set, batch_size, seed, device)` returning
# `(train_loader, val_loader)`, both with `batch_size`:
#
# - the training loader **shuffles** with its own generator seeded with `seed`,
#   given to the DataLoader (so two loaders built with one seed give the same
#   orders, and the global random state is left alone), and **drops** the last
#   incomplete batch;
# - the validation loader keeps the dataset's order and every example;
# - both pin memory only when `device` is a CUDA GPU (not on the CPU, and not on
#   Apple's `mps`, which shares memory with the CPU).
#
# One point for the training loader, one for the validation loader.

# %% solution="ex_make_loaders"
def make_loaders(train_set: Dataset, val_set: Dataset, batch_size: int, seed: int,
                 device: torch.device) -> tuple[DataLoader, DataLoader]:
    """A shuffled, seeded training loader and an in-order validation loader."""
    ### BEGIN SOLUTION
    pin = device.type == "cuda"
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(seed), pin_memory=pin)
    val_loader = DataLoader(val_set, batch_size=batch_size, shuffle=False, drop_last=False, pin_memory=pin)
    return train_loader, val_loader
    ### END SOLUTION


# %% check="ex_make_loaders_check"
check.check_make_loaders(make_loaders)

# %% graded="ex_make_loaders_train_tests" points=1
check.check_make_loaders(make_loaders, part="train")
### BEGIN HIDDEN TESTS
check.check_make_loaders(make_loaders, part="train", inputs=[(33, 7, 4, 11), (16, 16, 16, 2)])
### END HIDDEN TESTS

# %% graded="ex_make_loaders_val_tests" points=1
check.check_make_loaders(make_loaders, part="val")
### BEGIN HIDDEN TESTS
check.check_make_loaders(make_loaders, part="val", inputs=[(33, 7, 4, 11), (16, 16, 16, 2)])
### END HIDDEN TESTS

# %% [markdown]
# Put together on MNIST: 10% of the training digits for validation, and the two
# loaders a training loop (lesson 05) would use.

# %%
train_set, val_set = split_train_val(mnist_train_norm, val_fraction=0.1, seed=0)
train_loader, val_loader = make_loaders(train_set, val_set, batch_size=64, seed=0, device=DEVICE)
images, labels = next(iter(train_loader))
print(f"{len(train_set)} training and {len(val_set)} validation digits")
print(f"{len(train_loader)} training batches per epoch, {len(val_loader)} validation batches")
print("first training batch:", list(images.shape), "labels", labels[:10].tolist(), "...")

# %% [markdown]
# ### Exercise 9 (4 points): put it together, a loader for a new file format
#
# A sensor writes its recordings to one text file, one recording per line:
# `label,reading,reading,...`, an int class label followed by one or more
# readings (decimal numbers); recordings differ in length. Blank lines and lines
# starting with `#` are not recordings. Here is a small one:

# %%
RECORDINGS = CLIP_FOLDER / "recordings.csv"
RECORDINGS.write_text("# label, then the readings\n1,4.5,6.25,5.0\n0,3.0\n\n2,7.5,8.0,6.5,9.0,7.25\n"
                      "0,2.5,3.5\n1,5.5,4.0,6.0\n2,8.5\n")
print(RECORDINGS.read_text())

# %% [markdown]
# Write `make_recording_loader(path, batch_size, seed)` returning a `DataLoader`
# that a training loop can use on such a file. Its contract:
#
# - every epoch delivers every recording of the file exactly once, in batches of
#   `batch_size` (the last batch may be smaller);
# - a batch is `(padded, lengths, labels)`: `padded` is float32 `[B, longest
#   recording of this batch]`, zero-padded at the end; `lengths` and `labels` are
#   int64 `[B]`;
# - the readings are **standardised** with the mean and the std of all readings
#   in the file (dividing by n or by n - 1 are both accepted); the padding stays 0;
# - the order is shuffled anew every epoch, the same seed gives the same orders
#   on every computer, and the loader leaves PyTorch's global random state alone;
# - the file is read once, when the loader is made (the check changes the file
#   afterwards: your loader must not notice).
#
# The graded test runs your function on files you do not see: other lengths,
# labels and batch sizes, a file with a single recording, a batch size larger
# than the file.
#
# *Hint:* every part of this lesson is here: a dataset (section 1), statistics
# over all values (exercise 6), per-batch padding (section 3) and seeded
# shuffling (section 5). Decide which work belongs in `__init__`, which in
# `__getitem__` and which in the collate function.

# %% solution="ex_recording_loader"
class RecordingDataset(Dataset):
    """The recordings of one file (yours to design: what it keeps, what an item is)."""

    def __init__(self, path: Path) -> None:
        ### BEGIN SOLUTION
        rows = []
        for line in Path(path).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                label, *readings = line.split(",")
                rows.append((torch.tensor([float(r) for r in readings], dtype=torch.float64), int(label)))
        every_reading = torch.cat([readings for readings, _ in rows])
        mean, std = every_reading.mean(), every_reading.std(correction=0)
        self.rows = [(((readings - mean) / std).float(), label) for readings, label in rows]
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        return len(self.rows)
        ### END SOLUTION

    def __getitem__(self, index: int):
        ### BEGIN SOLUTION
        return self.rows[index]
        ### END SOLUTION


def make_recording_loader(path: Path, batch_size: int, seed: int) -> DataLoader:
    """A shuffled, seeded loader of (padded, lengths, labels) batches of the file's standardised recordings."""
    ### BEGIN SOLUTION
    return DataLoader(RecordingDataset(path), batch_size=batch_size, shuffle=True, collate_fn=collate_sequences,
                      generator=torch.Generator().manual_seed(seed))
    ### END SOLUTION


# %% check="ex_recording_loader_check"
check.check_recording_loader(make_recording_loader)

# %% graded="ex_recording_loader_tests" points=4
check.check_recording_loader(make_recording_loader)
### BEGIN HIDDEN TESTS
check.check_recording_loader(make_recording_loader, inputs=[
    ("# a single recording\n3,1.5,-2.0,4.25\n", 2, 7),
    ("1,10\n1,12\n2,9,9.5\n\n# labels 1 and 2 only\n2,30,31,32\n1,11,10,9,8,7\n2,0.5\n", 8, 3),
    (check.random_recordings(311, 23, 4), 5, 11),
    (check.random_recordings(312, 9, 2, comments=False), 1, 0),
])
### END HIDDEN TESTS

# %% [markdown]
# One epoch over the small file above: every batch is padded only as far as its
# own longest recording.

# %%
for padded, lengths, labels in make_recording_loader(RECORDINGS, batch_size=4, seed=0):
    print(f"padded {list(padded.shape)}  lengths {lengths.tolist()}  labels {labels.tolist()}")
print("first row:", padded[0].tolist())

# %% [markdown]
# ## 6. Workers and pinned memory, measured
#
# With `num_workers=0` the main process fetches every example itself, between
# training steps. With `num_workers=k`, k background processes each build whole
# batches and hand them over, so loading can overlap with training. Workers
# cost something too: starting the processes (at the start of every epoch,
# unless `persistent_workers=True`), and passing every batch from one process to
# another. Whether they pay off depends on how expensive one example is and how
# many CPU cores are free.
#
# `pin_memory=True` makes the loader put batches in page-locked ("pinned") RAM,
# from which a CUDA GPU can copy faster and in the background
# (`batch.to("cuda", non_blocking=True)`). Without a CUDA GPU there is nothing
# to speed up.
#
# A note before using workers in your own code: on macOS and Windows, workers
# are started with "spawn" (on Linux from Python 3.14, with "forkserver", which
# behaves the same way here): fresh Python processes that receive the dataset by
# pickling, and pickle cannot find a class that was defined in a notebook. So a
# dataset you use with `num_workers > 0` should live in an importable `.py` file,
# like torchvision's `MNIST` used below. (For the same reason, a script that
# uses workers must start its work under `if __name__ == "__main__":`.)
#
# The measurement: full passes over the MNIST training digits, in batches of
# 32, for each setting (the best of two passes). Your numbers depend on your
# machine, and on what else it is doing: close other heavy programs first.

# %% tags=["nbval-ignore-output"]
def images_per_second(dataset: Dataset, num_workers: int, pin_memory: bool, batch_size: int = 32,
                      passes: int = 2) -> float:
    """Best throughput of ``passes`` full, shuffled passes over ``dataset``, worker start-up included.

    The best pass is the one least disturbed by other programs on the machine.
    """
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                        pin_memory=pin_memory, generator=torch.Generator().manual_seed(0))
    best = 0.0
    for _ in range(passes):
        start = time.perf_counter()
        count = sum(len(images) for images, _ in loader)
        best = max(best, count / (time.perf_counter() - start))
    return best


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    speeds = {(workers, pin): images_per_second(first_digits(mnist_train_norm), workers, pin)
              for workers in (0, 2) for pin in (False, True)}

print(f"{'num_workers':>11}  {'pin_memory':>10}  {'images/s':>9}")
for (workers, pin), speed in speeds.items():
    print(f"{workers:>11}  {str(pin):>10}  {speed:>9,.0f}")
print(f"\n2 workers vs 0:      {speeds[2, False] / speeds[0, False]:.2f}x the throughput")
print(f"pinned vs not pinned: {speeds[0, True] / speeds[0, False]:.2f}x the throughput")
if any("pin_memory" in str(w.message) for w in caught):
    print("PyTorch warned: pin_memory=True but no accelerator was found, so nothing was pinned.")

# %% [markdown]
# What the table shows depends on the machine, so read your own numbers. If
# the "2 workers vs 0" ratio is below 1, workers made loading **slower**: decoding
# a 28x28 digit is so cheap that starting two processes and shipping every batch
# between processes costs more than the work they take over, and on a computer
# with few cores the workers and the main process compete for them (this is what
# happens on a 2-core laptop). A ratio well above 1 means your machine has cores
# to spare and the work per example is large enough to share. Without a CUDA GPU,
# "pinned vs not pinned" should be 1 up to noise (a few percent either way):
# there is nothing to speed up, and PyTorch warns that it pins nothing.
#
# On a machine with many cores and a GPU, and with examples that are expensive to
# load (JPEG decoding, augmentation, reading from a network disk), workers are
# usually the first and biggest win, and pinned memory helps the copies to the
# GPU. The rule is the same everywhere: measure, then set `num_workers`.
#
# ### Exercise (self-check, no points): choose `num_workers` from the measurement
#
# Write `choose_num_workers(speeds)`: `speeds` maps `(num_workers, pin_memory)`
# to images per second, like the table above; return the `num_workers` (an int)
# of the fastest setting. Then the cell after it builds the loader you would
# train with on this machine.
#
# *Hint:* Python's `max` takes a `key=` function that says what to compare.

# %% solution="ex_choose_num_workers"
def choose_num_workers(speeds: dict[tuple[int, bool], float]) -> int:
    """The num_workers of the setting with the highest throughput."""
    ### BEGIN SOLUTION
    workers, _pin = max(speeds, key=speeds.get)
    return workers
    ### END SOLUTION


# %% check="ex_choose_num_workers_check"
check.check_choose_num_workers(choose_num_workers)

# %% tags=["nbval-ignore-output"]
num_workers = choose_num_workers(speeds)
train_loader = DataLoader(first_digits(mnist_train_norm), batch_size=32, shuffle=True, num_workers=num_workers,
                          generator=torch.Generator().manual_seed(0))
print(f"fastest here: num_workers={num_workers}; the loader uses {train_loader.num_workers} worker process(es)")

# %% [markdown]
# ## 7. Is data loading the bottleneck?
#
# Speeding up the model is pointless if the model spends its time waiting for
# data. The check: time the loader alone, the training step alone, and both
# together. Below, a small convolutional network (lesson 04 explains how models
# are built, lesson 05 the training step) trains on MNIST batches of 64.
#
# The last line tries the classic fix for a dataset that fits in memory: decode
# every image once, keep the results as one tensor, and load batches from that.

# %%
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 13 * 13, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()


def train_step(images: torch.Tensor, labels: torch.Tensor) -> None:
    """One optimisation step: forward, loss, backward, update."""
    optimizer.zero_grad()
    loss_fn(model(images), labels).backward()
    optimizer.step()


def batches(loader: DataLoader, n: int) -> list:
    """The first ``n`` batches of ``loader``."""
    return list(islice(loader, n))


N_BATCHES = 20
loader = DataLoader(mnist_train_norm, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
digits = first_digits(mnist_train_norm)
in_memory = TensorDataset(*next(iter(DataLoader(digits, batch_size=len(digits)))))
print("all training images decoded once:", list(in_memory.tensors[0].shape),
      f"({in_memory.tensors[0].numel() * 4 / 2**20:.0f} MB)")

# %% tags=["nbval-ignore-output"]
def ms_per_batch(work) -> float:
    """Milliseconds per batch of ``work()``, which handles N_BATCHES batches.

    The best of five runs: the one least disturbed by other programs on the machine.
    """
    return time_call(work, warmup=1, repeat=5).best / N_BATCHES * 1e3


fixed_images, fixed_labels = next(iter(loader))
memory_loader = DataLoader(in_memory, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
timings = {
    "load only (from the MNIST files)": ms_per_batch(lambda: batches(loader, N_BATCHES)),
    "train step only (one cached batch)": ms_per_batch(lambda: [train_step(fixed_images, fixed_labels)
                                                                 for _ in range(N_BATCHES)]),
    "load + train step": ms_per_batch(lambda: [train_step(x, y) for x, y in batches(loader, N_BATCHES)]),
    "load only (from decoded tensors)": ms_per_batch(lambda: batches(memory_loader, N_BATCHES)),
}
for name, ms in timings.items():
    print(f"{name:36} {ms:6.2f} ms per batch")

# %% [markdown]
# ### Exercise (self-check, no points): is data loading the bottleneck?
#
# Write `loading_share(load_ms, step_ms)`: given the milliseconds to load one
# batch and to train on one batch, return the fraction of the total that is
# loading, `load / (load + step)`, as a Python float between 0 and 1. Above 0.5,
# the model spends more time waiting for data than learning: loading is the
# bottleneck.

# %% solution="ex_loading_share"
def loading_share(load_ms: float, step_ms: float) -> float:
    """The fraction of load + step time spent loading."""
    ### BEGIN SOLUTION
    return load_ms / (load_ms + step_ms)
    ### END SOLUTION


# %% check="ex_loading_share_check"
check.check_loading_share(loading_share)

# %% tags=["nbval-ignore-output"]
share = loading_share(timings["load only (from the MNIST files)"], timings["train step only (one cached batch)"])
print(f"loading takes about {share:.0%} of each training step here:",
      "data loading is the bottleneck, so speed up the data pipeline first" if share > 0.5
      else "the training step is the bottleneck, so speed up the model first")
speedup = timings["load only (from the MNIST files)"] / timings["load only (from decoded tensors)"]
print(f"loading from decoded tensors is {speedup:.0f}x as fast as decoding the files for every batch")

# %% [markdown]
# Read the table like this: if "load only" is a large part of "load + train
# step", the model is waiting for data, and a faster model or GPU will not help
# until loading is faster (workers, decoded tensors in memory, cheaper
# transforms, faster storage). If loading is a small part, spend your effort on
# the model and the training step instead (lesson 07).
#
# The two lines printed above read your own measurement: the share of the step
# spent loading, and how much faster the same batches load from decoded tensors.
# On a small CPU machine the loading share of this tiny network is often near or
# above one half, because torchvision decodes a PIL image per digit and applies
# `ToTensor` and `Normalize` to each; on a faster machine, or one that is busy
# with something else while the training step runs, the share can be far smaller.
# The second line says how much decoding once, up front, saves on your machine.
# A bigger model shifts the balance towards the training step; a GPU, which
# makes the step much faster, shifts it back towards loading. That is why you
# measure instead of guessing.
#
# Timings are noisy when other programs keep the CPU busy: PyTorch's
# multi-threaded operations can then slow down tenfold. If your numbers look
# odd, close other programs and run the cells again.
#
# ## Summary
#
# - A map-style `Dataset` has `__len__` and `__getitem__`; `__len__` must count
#   exactly the examples `__getitem__` can return. Convert data to tensors with
#   the right dtype (float32 inputs, int64 class labels).
# - A dataset over files keeps a **sorted** list of file names and opens one
#   file per `__getitem__`; crop or pad to a fixed length when batches need it.
# - For variable-length sequences, pad per batch in a `collate_fn`, at the end,
#   to the batch's longest, and keep the lengths; `pad_sequence(...,
#   batch_first=True)` does the padding.
# - `ToTensor` scales MNIST to [0, 1]; `Normalize((0.1307,), (0.3081,))` uses the
#   mean and std of all training pixels, computed over all pixels at once.
# - Split with `random_split` and a seeded generator; shuffle training data with
#   a seeded generator, drop its last incomplete batch, keep validation in order.
# - `num_workers` and `pin_memory` are speed settings: measure them on your
#   machine, and find out whether data loading is the bottleneck before
#   optimising anything.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.

# %%
shutil.rmtree(CLIP_FOLDER, ignore_errors=True)  # the clip files were only for this lesson
