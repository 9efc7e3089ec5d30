"""Lesson 03 Datasets and DataLoaders: the reference passes, plausible wrong answers fail by name."""

import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, RandomSampler, Subset, random_split

from helpers.checks import datasets as checks
from helpers.reference import datasets as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- PointsDataset


class PointsLenOneTooMany(ref.PointsDataset):
    def __len__(self):
        return len(self.labels) + 1


class PointsLenColumns(ref.PointsDataset):
    def __len__(self):
        return self.features.shape[1]


class PointsLenMinusOne(ref.PointsDataset):
    def __len__(self):
        return len(self.labels) - 1


class PointsNotConverted(Dataset):
    def __init__(self, features, labels):
        self.features, self.labels = features, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.features[index], self.labels[index]


class PointsDefaultDtype(ref.PointsDataset):
    def __init__(self, features, labels):
        self.features, self.labels = torch.tensor(features), torch.tensor(labels)


class PointsSwapped(ref.PointsDataset):
    def __getitem__(self, index):
        return self.labels[index], self.features[index]


class PointsIntLabel(ref.PointsDataset):  # the labels are a tensor, but int() turns each back into a number
    def __getitem__(self, index):
        return self.features[index], int(self.labels[index])


class PointsLabelsKeptAsList(ref.PointsDataset):  # features converted, the caller's label list kept as it is
    def __init__(self, features, labels):
        self.features, self.labels = torch.tensor(features, dtype=torch.float32), labels


class PointsLabelsStacked(ref.PointsDataset):  # right: one 0-d int64 tensor per label, stacked in __init__
    def __init__(self, features, labels):
        self.features = torch.stack([torch.tensor(row, dtype=torch.float32) for row in features])
        self.labels = torch.stack([torch.tensor(label, dtype=torch.int64) for label in labels])


class PointsNotADataset:
    def __init__(self, features, labels):
        pass


# ---------------------------------------------------------------- fix_length


def fix_length_keep_end(signal, length):
    if len(signal) >= length:
        return signal[-length:]
    return torch.nn.functional.pad(signal, (0, length - len(signal)))


def fix_length_pad_left(signal, length):
    if len(signal) >= length:
        return signal[:length]
    return torch.cat([torch.zeros(length - len(signal)), signal])


def fix_length_crop_only(signal, length):
    return signal[:length]


# ---------------------------------------------------------------- ClipDataset


class ClipsCountEveryFile(ref.ClipDataset):
    def __len__(self):
        return len(os.listdir(self.files[0].parent))


class ClipsNumpy(ref.ClipDataset):
    def __getitem__(self, index):
        path = self.files[index]
        clip = np.load(path).astype(np.float32)
        label = self.classes.index(path.stem.split("_")[0])
        return ref.fix_length(torch.from_numpy(clip), self.length).numpy(), label


class ClipsByAge(ref.ClipDataset):
    """Oldest file first: the order depends on when the files were written."""

    def __init__(self, folder, length, classes):
        super().__init__(folder, length, classes)
        self.files = sorted(Path(folder).glob("*.npy"), key=os.path.getmtime)


class ClipsNameLabel(ref.ClipDataset):
    def __getitem__(self, index):
        clip, label = super().__getitem__(index)
        return clip, self.classes[label]


class ClipsNotFixed(ref.ClipDataset):
    def __getitem__(self, index):
        path = self.files[index]
        return torch.from_numpy(np.load(path)).float(), self.classes.index(path.stem.split("_")[0])


class ClipsKeepEnd(ref.ClipDataset):
    def __getitem__(self, index):
        path = self.files[index]
        clip = fix_length_keep_end(torch.from_numpy(np.load(path)).float(), self.length)
        return clip, self.classes.index(path.stem.split("_")[0])


class ClipsFloat64(ref.ClipDataset):
    def __getitem__(self, index):
        path = self.files[index]
        clip = ref.fix_length(torch.from_numpy(np.load(path)), self.length)
        return clip, self.classes.index(path.stem.split("_")[0])


class ClipsListdir(ref.ClipDataset):
    """Lists the folder itself, so it also tries to np.load README.txt."""

    def __init__(self, folder, length, classes):
        super().__init__(folder, length, classes)
        self.files = [Path(folder) / name for name in sorted(os.listdir(folder))]


# ---------------------------------------------------------------- padding collate


def pad_collate_left(batch):
    lengths = torch.tensor([len(s) for s in batch])
    return pad_sequence(batch, batch_first=True, padding_side="left"), lengths


def pad_collate_fixed(batch, max_len=10):
    padded = torch.zeros(len(batch), max_len, dtype=batch[0].dtype)
    for row, sequence in enumerate(batch):
        padded[row, : len(sequence)] = sequence
    return padded, torch.tensor([len(s) for s in batch])


def pad_collate_off_by_one(batch):
    longest = max(len(s) for s in batch)
    padded = torch.zeros(len(batch), longest + 1, dtype=batch[0].dtype)
    for row, sequence in enumerate(batch):
        padded[row, : len(sequence)] = sequence
    return padded, torch.tensor([len(s) for s in batch])


def pad_collate_float_zeros(batch):
    longest = max(len(s) for s in batch)
    padded = torch.zeros(len(batch), longest)
    for row, sequence in enumerate(batch):
        padded[row, : len(sequence)] = sequence
    return padded, torch.tensor([len(s) for s in batch])


def pad_collate_lengths_list(batch):
    padded, _ = ref.pad_collate(batch)
    return padded, [len(s) for s in batch]


def pad_collate_padded_lengths(batch):
    padded, _ = ref.pad_collate(batch)
    return padded, torch.tensor([padded.shape[1]] * len(batch))


def pad_collate_pad_minus_one(batch):
    return pad_sequence(batch, batch_first=True, padding_value=-1), torch.tensor([len(s) for s in batch])


def collate_time_first(batch):
    sequences, labels = zip(*batch)
    return pad_sequence(list(sequences)), torch.tensor([len(s) for s in sequences]), torch.tensor(labels)


def collate_labels_tuple(batch):
    sequences, labels = zip(*batch)
    return pad_sequence(list(sequences), batch_first=True), torch.tensor([len(s) for s in sequences]), labels


def collate_numel_lengths(batch):
    sequences, labels = zip(*batch)
    return pad_sequence(list(sequences), batch_first=True), torch.tensor([s.numel() for s in sequences]), torch.tensor(labels)


def collate_left(batch):
    sequences, labels = zip(*batch)
    padded = pad_sequence(list(sequences), batch_first=True, padding_side="left")
    return padded, torch.tensor([len(s) for s in sequences]), torch.tensor(labels)


# ---------------------------------------------------------------- mean_std


def mean_std_stack_all(dataset, batch_size=1000):
    """Wrong: right numbers, but every batch held in memory at once (the task: never more than one)."""
    images = torch.cat([images for images, _ in DataLoader(dataset, batch_size=batch_size)])
    return images.mean().item(), images.std().item()


def mean_std_per_image(dataset, batch_size=1000):
    means, stds = [], []
    for image, _ in dataset:
        means.append(image.mean())
        stds.append(image.std())
    return torch.stack(means).mean().item(), torch.stack(stds).mean().item()


def mean_std_batch_average(dataset, batch_size=1000):
    means, stds = [], []
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        means.append(images.mean().item())
        stds.append(images.std().item())
    return sum(means) / len(means), sum(stds) / len(stds)


def mean_std_variance(dataset, batch_size=1000):
    mean, std = ref.mean_std(dataset, batch_size)
    return mean, std**2


def mean_std_per_pixel(dataset, batch_size=1000):
    images = torch.stack([image for image, _ in dataset])
    return images.mean().item(), images.std(dim=0).mean().item()


def mean_std_not_written(dataset, batch_size=1000):
    raise NotImplementedError()


# ---------------------------------------------------------------- split_train_val


def split_unseeded(dataset, val_fraction, seed):
    n_val = int(len(dataset) * val_fraction)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val])
    return train, val


def split_global_seed(dataset, val_fraction, seed):
    torch.manual_seed(seed)
    n_val = int(len(dataset) * val_fraction)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val])
    return train, val


def split_in_order(dataset, val_fraction, seed):
    # Wrong: no shuffle at all, the first items train and the last ones validate
    n_val = int(len(dataset) * val_fraction)
    n = len(dataset)
    return Subset(dataset, list(range(n - n_val))), Subset(dataset, list(range(n - n_val, n)))


def split_swapped(dataset, val_fraction, seed):
    train, val = ref.split_train_val(dataset, val_fraction, seed)
    return val, train


def split_fixed_seed(dataset, val_fraction, seed):
    return ref.split_train_val(dataset, val_fraction, 42)


def split_val_first(dataset, val_fraction, seed):
    n_val = int(len(dataset) * val_fraction)
    val, train = random_split(dataset, [n_val, len(dataset) - n_val], generator=torch.Generator().manual_seed(seed))
    return train, val


def split_train_rounded(dataset, val_fraction, seed):
    """Wrong: the training size rounded down, validation the rest (the task rounds n_val down)."""
    n_train = int(len(dataset) * (1 - val_fraction))
    return random_split(dataset, [n_train, len(dataset) - n_train], generator=torch.Generator().manual_seed(seed))


def split_rounded(dataset, val_fraction, seed):
    n_val = round(len(dataset) * val_fraction + 0.5)
    generator = torch.Generator().manual_seed(seed)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val], generator=generator)
    return train, val


# ---------------------------------------------------------------- make_loaders


def _loaders(train_set, val_set, batch_size, seed, device, *, shuffle=True, drop_last=True, seeded=True,
             val_shuffle=False, val_drop_last=False, pin=None):
    pin = device.type == "cuda" if pin is None else pin
    train = DataLoader(train_set, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, pin_memory=pin,
                       generator=torch.Generator().manual_seed(seed) if seeded else None)
    val = DataLoader(val_set, batch_size=batch_size, shuffle=val_shuffle, drop_last=val_drop_last, pin_memory=pin)
    return train, val


def loaders_one_generator(train_set, val_set, batch_size, seed, device):
    """Wrong: "the training loader shuffles with its own generator"; each pass over the validation loader draws a
    seed from the shared one, so validating moves the next training order."""
    generator = torch.Generator().manual_seed(seed)
    pin = device.type == "cuda"
    return (DataLoader(train_set, batch_size, shuffle=True, drop_last=True, pin_memory=pin, generator=generator),
            DataLoader(val_set, batch_size, pin_memory=pin, generator=generator))


def loaders_val_own_generator(train_set, val_set, batch_size, seed, device):
    """Correct: the validation loader has a generator too, of its own (it does not shuffle, so nothing changes)."""
    pin = device.type == "cuda"
    return (DataLoader(train_set, batch_size, shuffle=True, drop_last=True, pin_memory=pin,
                       generator=torch.Generator().manual_seed(seed)),
            DataLoader(val_set, batch_size, pin_memory=pin, generator=torch.Generator().manual_seed(seed)))


def loaders_keep_last(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, drop_last=False)


def loaders_no_shuffle(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, shuffle=False)


def loaders_unseeded(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, seeded=False)


def loaders_default_argument_generator(train_set, val_set, batch_size, seed, device, generator=torch.Generator()):
    """Wrong: a default argument is made once, so every call reseeds and hands out the same generator."""
    pin = device.type == "cuda"
    train = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True, pin_memory=pin,
                       generator=generator.manual_seed(seed))
    return train, DataLoader(val_set, batch_size=batch_size, pin_memory=pin)


def loaders_generator_then_seed(train_set, val_set, batch_size, seed, device):
    """Correct: a new generator per call, seeded on its own line."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    pin = device.type == "cuda"
    train = DataLoader(train_set, batch_size, shuffle=True, drop_last=True, pin_memory=pin, generator=generator)
    return train, DataLoader(val_set, batch_size, pin_memory=pin)


def loaders_global_seed(train_set, val_set, batch_size, seed, device):
    torch.manual_seed(seed)
    return _loaders(train_set, val_set, batch_size, seed, device, seeded=False)


def loaders_val_shuffled(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, val_shuffle=True)


def loaders_val_drop_last(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, val_drop_last=True)


def loaders_always_pinned(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, pin=True)


def loaders_never_pinned(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, pin=False)


# ---------------------------------------------------------------- issue 12: whole classes of mistakes


class PointsConvertsOnRead(Dataset):
    """Keeps the caller's lists and converts on every read (the task says: once, in __init__)."""

    def __init__(self, features, labels):
        self.features, self.labels = features, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return torch.tensor(self.features[index], dtype=torch.float32), torch.tensor(self.labels[index])


class ClipsLoadedUpFront(ref.ClipDataset):
    """Loads every clip in __init__ (the task says: in __getitem__)."""

    def __init__(self, folder, length, classes):
        super().__init__(folder, length, classes)
        self.clips = [torch.from_numpy(np.load(path)).float() for path in self.files]

    def __getitem__(self, index):
        path = self.files[index]
        return ref.fix_length(self.clips[index], self.length), self.classes.index(path.stem.split("_")[0])


fix_length = fix_length_keep_end  # a learner's wrong fix_length, in the namespace their ClipDataset uses


class ClipsClassBySubstring(ref.ClipDataset):
    """Wrong: the first class whose name occurs in the file name ('bobcat_02' holds 'cat')."""

    def __getitem__(self, index):
        path = self.files[index]
        label = next(i for i, c in enumerate(self.classes) if c in path.stem)
        return ref.fix_length(torch.from_numpy(np.load(path)).float(), self.length), label


class ClipsClassByLastSubstring(ref.ClipDataset):
    """Wrong: the last class whose name occurs in the file name ('cat_07_dog' holds 'dog')."""

    def __getitem__(self, index):
        path = self.files[index]
        label = [i for i, c in enumerate(self.classes) if c in path.stem][-1]
        return ref.fix_length(torch.from_numpy(np.load(path)).float(), self.length), label


class ClipsClassByLongestPrefix(ref.ClipDataset):
    """Correct: the longest class name the file name starts with, followed by '_'."""

    def __getitem__(self, index):
        path = self.files[index]
        label = max((i for i, c in enumerate(self.classes) if path.stem.startswith(c + "_")),
                    key=lambda i: len(self.classes[i]))
        return ref.fix_length(torch.from_numpy(np.load(path)).float(), self.length), label


class ClipsOnLearnersFixLength(ref.ClipDataset):
    """Right in itself; it calls the (wrong) fix_length of its own namespace. Graded with the reference one."""

    def __getitem__(self, index):
        path = self.files[index]
        clip = fix_length(torch.from_numpy(np.load(path)).float(), self.length)
        return clip, self.classes.index(path.stem.split("_")[0])


def collate_sorted_in_place(batch):
    batch.sort(key=lambda pair: len(pair[0]), reverse=True)  # longest first, as pack_padded_sequence likes
    return ref.collate_sequences(batch)


def pad_collate_in_place(batch):
    longest = max(len(s) for s in batch)
    for i, s in enumerate(batch):
        batch[i] = torch.cat([s, s.new_zeros(longest - len(s))])
    return torch.stack(batch), torch.tensor([len(s) for s in batch])


def mean_std_tensors(dataset, batch_size=1000):
    images = torch.cat([x.double() for x, _ in DataLoader(dataset, batch_size=batch_size)])
    return images.mean(), images.std(correction=0)


def workers_pair(speeds):
    return max(speeds, key=speeds.get)


def workers_slowest(speeds):
    return min(speeds, key=speeds.get)[0]


def workers_best_speed(speeds):
    return max(speeds.values())


def share_of_step(load_ms, step_ms):
    return step_ms / (load_ms + step_ms)


def share_ratio(load_ms, step_ms):
    return load_ms / step_ms


def share_tensor(load_ms, step_ms):
    return torch.tensor(load_ms / (load_ms + step_ms))


def pad_collate_sequence_time_first(batch):
    return pad_sequence(batch), torch.tensor([len(s) for s in batch])  # batch_first left out


def fix_length_float_buffer(signal, length):
    out = torch.zeros(length)  # float32 whatever the signal's dtype
    n = min(length, len(signal))
    out[:n] = signal[:n]
    return out


def fix_length_one_short(signal, length):
    if len(signal) >= length:
        return signal[:length]
    return F.pad(signal, (0, length - len(signal) - 1))


def fix_length_one_long(signal, length):
    if len(signal) >= length:
        return signal[:length]
    return F.pad(signal, (0, length - len(signal) + 1))


def fix_length_pads_by_length(signal, length):
    if len(signal) >= length:
        return signal[:length]
    return F.pad(signal, (0, length))  # length zeros, not the number missing


def fix_length_converts(signal, length):
    return ref.fix_length(signal, length).float()  # "floats to be safe"


def pad_collate_time_first(batch):
    padded, lengths = ref.pad_collate(batch)
    return padded.T, lengths


def loaders_pinned_on_any_gpu(train_set, val_set, batch_size, seed, device):
    return _loaders(train_set, val_set, batch_size, seed, device, pin=device.type != "cpu")


def mean_std_own_batch_size(dataset, batch_size=1000):
    count, total, total_sq = 0, 0.0, 0.0
    for images, _ in DataLoader(dataset, batch_size=1000):  # the argument is ignored
        images = images.double()
        count += images.numel()
        total += images.sum().item()
        total_sq += (images**2).sum().item()
    mean = total / count
    return mean, (total_sq / count - mean**2) ** 0.5


# ---------------------------------------------------------------- correct answers written differently (issue 18)


class PointsAsTensor(Dataset):
    """Correct: torch.as_tensor, .float()/.long(), the length from the features."""

    def __init__(self, features, labels):
        self.x = torch.as_tensor(features).float()
        self.y = torch.as_tensor(labels).long()

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class PointsPairs(Dataset):
    """Correct: converted once into a list of (features, label) pairs, returned as a list."""

    def __init__(self, features, labels):
        print(f"PointsPairs: {len(labels)} points")
        self.pairs = [(torch.tensor(row, dtype=torch.float), torch.tensor(label, dtype=torch.long))
                      for row, label in zip(features, labels)]

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, index):
        return self.pairs[index]


class PointsNumpyFirst(Dataset):
    """Correct: through NumPy, then torch.from_numpy."""

    def __init__(self, features, labels):
        self.features = torch.from_numpy(np.asarray(features, dtype=np.float32))
        self.labels = torch.from_numpy(np.asarray(labels, dtype=np.int64))

    def __len__(self):
        return int(self.labels.numel())

    def __getitem__(self, index):
        return (self.features[index], self.labels[index])


def fix_length_cat(signal, length):
    if signal.shape[0] < length:
        signal = torch.cat([signal, torch.zeros(length - signal.shape[0], dtype=signal.dtype)])
    return signal[:length]


def fix_length_new_zeros(signal, length):
    out = signal.new_zeros(length)
    n = min(length, len(signal))
    out[:n] = signal[:n]
    return out


def fix_length_pad_keyword(signal, length):
    missing = max(0, length - signal.numel())
    return F.pad(signal[:length], pad=(0, missing), mode="constant", value=0)


class ClipsListdirFiltered(Dataset):
    """Correct: os.listdir filtered by extension, label from a dict, torch.tensor(..., dtype=float32)."""

    def __init__(self, folder, length, classes):
        self.folder, self.length = str(folder), length
        self.names = sorted(name for name in os.listdir(folder) if name.endswith(".npy"))
        self.label_of = {name: index for index, name in enumerate(classes)}

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        name = self.names[i]
        clip = torch.tensor(np.load(os.path.join(self.folder, name)), dtype=torch.float32)
        return ref.fix_length(clip, self.length), self.label_of[name.split("_")[0]]


class ClipsTensorLabel(ref.ClipDataset):
    """Correct: the label through a tensor and back with .item(), the class from partition, the clip cast with .to()."""

    def __getitem__(self, index):
        path = self.files[index]
        clip = torch.from_numpy(np.load(path)).to(torch.float32)
        kind, _, _ = path.name.partition("_")
        return ref.fix_length(clip, self.length), torch.tensor(self.classes.index(kind)).item()


class ClipsPathsAsStrings(Dataset):
    """Correct: glob with str paths, fix_length applied before the dtype conversion."""

    def __init__(self, folder, length, classes):
        self.paths = sorted(str(path) for path in Path(folder).glob("*.npy"))
        self.length, self.classes = length, classes

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        path = self.paths[index]
        label = list(self.classes).index(Path(path).stem.split("_")[0])
        return ref.fix_length(torch.from_numpy(np.load(path)), self.length).float(), label


def pad_collate_pad_sequence(batch):
    return pad_sequence(batch, batch_first=True), torch.tensor([s.shape[0] for s in batch], dtype=torch.int64)


def pad_collate_f_pad(batch):
    longest = max(len(s) for s in batch)
    padded = torch.stack([F.pad(s, (0, longest - len(s))) for s in batch])
    return padded, torch.tensor(list(map(len, batch)))


def pad_collate_new_zeros(batch):
    lengths = torch.as_tensor([len(s) for s in batch], dtype=torch.long)
    padded = batch[0].new_zeros((len(batch), int(lengths.max().item())))
    for i in range(len(batch)):
        padded[i, : lengths[i]] = batch[i]
    return padded, lengths


def collate_loop(batch):
    sequences, labels, lengths = [], [], []
    for sequence, label in batch:
        sequences.append(sequence)
        labels.append(label)
        lengths.append(sequence.shape[0])
    padded = pad_sequence(sequences, batch_first=True, padding_value=0)
    return padded, torch.tensor(lengths), torch.tensor(labels, dtype=torch.long)


def collate_comprehensions(batch):
    padded = pad_sequence([s for s, _ in batch], batch_first=True)
    return padded, torch.LongTensor([len(s) for s, _ in batch]), torch.as_tensor([y for _, y in batch])


def collate_time_first_transposed(batch):
    sequences, labels = zip(*batch)
    padded = pad_sequence(sequences).transpose(0, 1)  # time first, then swapped to batch first
    return padded, torch.tensor([s.size(0) for s in sequences]), torch.tensor(labels)


def mean_std_var(dataset, batch_size=1000):
    n, total, total_sq = 0, torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    for images, _labels in DataLoader(dataset, batch_size):
        x = images.to(torch.float64)
        n += x.numel()
        total += x.sum()
        total_sq += x.pow(2).sum()
    mean = total / n
    return float(mean), float((total_sq / n - mean**2).sqrt())


def mean_std_chan(dataset, batch_size=1000):
    """Combines per-batch means and variances (Chan's parallel formula): exact, and numerically safer."""
    count, mean, m2 = 0, 0.0, 0.0
    for images, _ in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        x = images.double().flatten()
        n_b, mean_b = x.numel(), x.mean().item()
        m2_b = ((x - mean_b) ** 2).sum().item()
        delta = mean_b - mean
        total = count + n_b
        mean += delta * n_b / total
        m2 += m2_b + delta**2 * count * n_b / total
        count = total
    return mean, math.sqrt(m2 / count)


def mean_std_sample_std(dataset, batch_size=1000):
    """Divides by count - 1 (what tensor.std() does): the task's formula or this one are both accepted."""
    count, total, total_sq = 0, 0.0, 0.0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        count += images.numel()
        total += images.double().sum().item()
        total_sq += images.double().square().sum().item()
    mean = total / count
    return mean, math.sqrt((total_sq - count * mean**2) / (count - 1))


def split_fractions(dataset, val_fraction, seed):
    n_val = int(len(dataset) * val_fraction)
    g = torch.Generator()
    g.manual_seed(seed)
    return tuple(random_split(dataset, lengths=[len(dataset) - n_val, n_val], generator=g))


def split_one_line(dataset, val_fraction, seed):
    n = len(dataset)
    train_part, val_part = random_split(dataset, [n - int(n * val_fraction), int(n * val_fraction)],
                                        torch.Generator().manual_seed(seed))
    print(f"{len(train_part)} training, {len(val_part)} validation samples")
    return train_part, val_part


def split_as_list(dataset, val_fraction, seed):
    n_val = math.floor(len(dataset) * val_fraction)
    parts = random_split(dataset, [len(dataset) - n_val, n_val], generator=torch.Generator().manual_seed(seed))
    return parts[0], parts[1]


def loaders_partial(train_set, val_set, batch_size, seed, device):
    from functools import partial
    make = partial(DataLoader, batch_size=batch_size, pin_memory=str(device).startswith("cuda"))
    return make(train_set, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(seed)), make(val_set)


def loaders_common_kwargs(train_set, val_set, batch_size, seed, device):
    common = {"batch_size": batch_size, "pin_memory": torch.device(device).type == "cuda"}
    generator = torch.Generator()
    generator.manual_seed(seed)
    return (DataLoader(train_set, shuffle=True, drop_last=True, generator=generator, **common),
            DataLoader(val_set, **common))


def loaders_positional(train_set, val_set, batch_size, seed, device):
    cuda = device.type == "cuda"
    val = DataLoader(val_set, batch_size, False, pin_memory=cuda)  # built first: order does not matter
    train = DataLoader(train_set, batch_size, True, generator=torch.Generator().manual_seed(seed),
                       pin_memory=cuda, drop_last=True)
    return train, val


def workers_loop(speeds):
    best_key, best_speed = None, -1.0
    for key, speed in speeds.items():
        if speed > best_speed:
            best_key, best_speed = key, speed
    return best_key[0]


def workers_sorted(speeds):
    ranked = sorted(speeds.items(), key=lambda item: item[1], reverse=True)
    return int(ranked[0][0][0])


def workers_max_items(speeds):
    (workers, pin), speed = max(speeds.items(), key=lambda kv: kv[1])
    print(f"fastest: num_workers={workers}, pin_memory={pin}, {speed:,.0f} images/s")
    return workers


def share_complement(load_ms, step_ms):
    return 1.0 - step_ms / (load_ms + step_ms)


def share_float(load_ms, step_ms):
    total = float(load_ms) + float(step_ms)
    return float(load_ms) / total


def share_numpy(load_ms, step_ms):
    return float(np.float64(load_ms) / np.sum([load_ms, step_ms]))


ALTERNATIVES = [
    Accept(checks.check_points_dataset, PointsAsTensor),
    Accept(checks.check_points_dataset, PointsPairs),
    Accept(checks.check_points_dataset, PointsNumpyFirst),
    Accept(checks.check_fix_length, fix_length_cat),
    Accept(checks.check_fix_length, fix_length_new_zeros),
    Accept(checks.check_fix_length, fix_length_pad_keyword),
    Accept(checks.check_clip_dataset, ClipsListdirFiltered),
    Accept(checks.check_clip_dataset, ClipsTensorLabel),
    Accept(checks.check_clip_dataset, ClipsPathsAsStrings),
    Accept(checks.check_pad_collate, pad_collate_pad_sequence),
    Accept(checks.check_pad_collate, pad_collate_f_pad),
    Accept(checks.check_pad_collate, pad_collate_new_zeros),
    Accept(checks.check_collate_sequences, collate_loop),
    Accept(checks.check_collate_sequences, collate_comprehensions),
    Accept(checks.check_collate_sequences, collate_time_first_transposed),
    Accept(checks.check_mean_std, mean_std_var),
    Accept(checks.check_mean_std, mean_std_chan),
    Accept(checks.check_mean_std, mean_std_sample_std),
    Accept(checks.check_split_train_val, split_fractions),
    Accept(checks.check_split_train_val, split_one_line),
    Accept(checks.check_split_train_val, split_as_list),
    Accept(checks.check_make_loaders, loaders_partial),
    Accept(checks.check_make_loaders, loaders_common_kwargs),
    Accept(checks.check_make_loaders, loaders_positional),
    Accept(checks.check_choose_num_workers, workers_loop),
    Accept(checks.check_choose_num_workers, workers_sorted),
    Accept(checks.check_choose_num_workers, workers_max_items),
    Accept(checks.check_loading_share, share_complement),
    Accept(checks.check_loading_share, share_float),
    Accept(checks.check_loading_share, share_numpy),
]

NEW_CASES = [
    Reject(checks.check_mean_std, mean_std_own_batch_size, "pass the batch_size argument on"),
    Reject(checks.check_make_loaders, loaders_pinned_on_any_gpu, "pin only when device.type is 'cuda'"),
    Reject(checks.check_pad_collate, pad_collate_time_first, "time-first ([longest, batch]: one column per sequence)"),
    Reject(checks.check_pad_collate, pad_collate_sequence_time_first, "pass batch_first=True"),
    Reject(checks.check_fix_length, fix_length_float_buffer, "PyTorch's default dtype (what torch.zeros"),
    Reject(checks.check_fix_length, fix_length_converts, "what .float() converts to"),
    Reject(checks.check_fix_length, fix_length_pads_by_length, "you added length=5 zeros"),
    Reject(checks.check_fix_length, fix_length_one_short, "one fewer than length=5"),
    Reject(checks.check_fix_length, fix_length_one_long, "one more than length=5"),
    Accept(checks.check_choose_num_workers, ref.choose_num_workers),
    Reject(checks.check_choose_num_workers, workers_pair, "return num_workers, its first element"),
    Reject(checks.check_choose_num_workers, workers_slowest, "slowest setting"),
    Reject(checks.check_choose_num_workers, workers_best_speed, "you returned a throughput"),
    Accept(checks.check_loading_share, ref.loading_share),
    Reject(checks.check_loading_share, share_of_step, "the training step's share"),
    Reject(checks.check_loading_share, share_ratio, "a ratio of the two"),
    Reject(checks.check_loading_share, share_tensor, "should be a Python number"),
    Reject(checks.check_points_dataset, PointsConvertsOnRead, "converts them in __getitem__"),
    Reject(checks.check_clip_dataset, ClipsLoadedUpFront, "you loaded the clips in __init__"),
    Accept(checks.check_clip_dataset, ClipsOnLearnersFixLength),
    Reject(checks.check_collate_sequences, collate_sorted_in_place, "reordered in place"),
    Reject(checks.check_pad_collate, pad_collate_in_place, "replaced"),
    Reject(checks.check_mean_std, mean_std_tensors, "should be a Python number"),
]

CASES = [
    Accept(checks.check_points_dataset, ref.PointsDataset),
    Reject(checks.check_points_dataset, PointsLenOneTooMany, "counts one too many"),
    Reject(checks.check_points_dataset, PointsLenColumns, "number of features per sample"),
    Reject(checks.check_points_dataset, PointsLenMinusOne, "one less than the number of samples"),
    Reject(checks.check_points_dataset, PointsNotConverted, "forgot to convert the lists to tensors"),
    Reject(checks.check_points_dataset, PointsDefaultDtype, "features are int64"),
    Reject(checks.check_points_dataset, PointsSwapped, "is (label, features)"),
    Reject(checks.check_points_dataset, PointsNotADataset, "is not a subclass of torch.utils.data.Dataset"),
    Accept(checks.check_fix_length, ref.fix_length),
    Reject(checks.check_fix_length, fix_length_keep_end, "kept the last samples"),
    Reject(checks.check_fix_length, fix_length_pad_left, "padded at the start"),
    Reject(checks.check_fix_length, fix_length_crop_only, "came back unchanged"),
    Accept(checks.check_clip_dataset, ref.ClipDataset),
    Reject(checks.check_clip_dataset, ClipsCountEveryFile, "you counted every file in the folder"),
    Reject(checks.check_clip_dataset, ClipsNumpy, "forgot to convert it to a tensor"),
    Reject(checks.check_clip_dataset, ClipsByAge, "sort the file names"),
    Reject(checks.check_clip_dataset, ClipsNameLabel, "return its index in classes"),
    Reject(checks.check_clip_dataset, ClipsNotFixed, "must have exactly 50 samples"),
    Reject(checks.check_clip_dataset, ClipsKeepEnd, "kept the last samples"),
    Reject(checks.check_clip_dataset, ClipsFloat64, "convert the clip to float32"),
    Reject(checks.check_clip_dataset, ClipsListdir, "5 of them .npy clips; expected 5"),
    Accept(checks.check_pad_collate, ref.pad_collate),
    Reject(checks.check_pad_collate, pad_collate_left, "padded on the left"),
    Reject(checks.check_pad_collate, pad_collate_fixed, "padded to a fixed length"),
    Reject(checks.check_pad_collate, pad_collate_off_by_one, "off by one"),
    Reject(checks.check_pad_collate, pad_collate_float_zeros, "dtype=batch[0].dtype"),
    Reject(checks.check_pad_collate, pad_collate_lengths_list, "lengths should be a tensor"),
    Reject(checks.check_pad_collate, pad_collate_padded_lengths, "lengths after padding"),
    Reject(checks.check_pad_collate, pad_collate_pad_minus_one, "padding value must be 0"),
    Accept(checks.check_collate_sequences, ref.collate_sequences),
    Reject(checks.check_collate_sequences, collate_time_first, "batch_first=True"),
    Reject(checks.check_collate_sequences, collate_labels_tuple, "forgot to convert them to a tensor"),
    Reject(checks.check_collate_sequences, collate_numel_lengths, "you counted elements"),
    Reject(checks.check_collate_sequences, collate_left, "padded on the left"),
    Accept(checks.check_mean_std, ref.mean_std),
    Reject(checks.check_mean_std, mean_std_stack_all, "you kept every batch"),
    Reject(checks.check_mean_std, mean_std_per_image, "std per image and averaged"),
    Reject(checks.check_mean_std, mean_std_batch_average, "averaged the per-batch means"),
    Reject(checks.check_mean_std, mean_std_variance, "that is the variance"),
    Reject(checks.check_mean_std, mean_std_per_pixel, "at each pixel position"),
    Reject(checks.check_mean_std, mean_std_not_written, "not written yet"),
    Accept(checks.check_split_train_val, ref.split_train_val),
    Reject(checks.check_split_train_val, split_unseeded, "used the global random generator of torch"),
    Reject(checks.check_split_train_val, split_in_order, "nothing shuffles the items"),
    Reject(checks.check_split_train_val, split_global_seed, "reset a global random generator (torch.manual_seed(0))"),
    Reject(checks.check_split_train_val, split_swapped, "returned (validation, training)"),
    Reject(checks.check_split_train_val, split_fixed_seed, "ignores the seed argument"),
    Reject(checks.check_split_train_val, split_val_first, "[n_val, n_train]"),
    Reject(checks.check_split_train_val, split_rounded, "int(20 * 0.25) = 5 for validation"),
    Reject(checks.check_split_train_val, split_train_rounded, "training size was rounded down (int(103 * (1 - 0.1)) = 92)"),
    Accept(checks.check_make_loaders, ref.make_loaders),
    Reject(checks.check_make_loaders, loaders_one_generator, "both loaders use one generator"),
    Accept(checks.check_make_loaders, loaders_val_own_generator),
    Reject(checks.check_clip_dataset, ClipsClassBySubstring, "also holds 'cat' where it is not the class"),
    Reject(checks.check_clip_dataset, ClipsClassByLastSubstring, "also holds 'dog' where it is not the class"),
    Accept(checks.check_clip_dataset, ClipsClassByLongestPrefix),
    Reject(checks.check_make_loaders, loaders_keep_last, "expected the incomplete last batch dropped"),
    Reject(checks.check_make_loaders, loaders_no_shuffle, "expected a shuffled order"),
    Reject(checks.check_make_loaders, loaders_unseeded, "the shuffle is not seeded"),
    Reject(checks.check_make_loaders, loaders_global_seed, "global random generator"),
    Reject(checks.check_make_loaders, loaders_val_shuffled, "the validation loader shuffles"),
    Reject(checks.check_make_loaders, loaders_val_drop_last, "5 samples are never evaluated"),
    Reject(checks.check_make_loaders, loaders_always_pinned, "only speeds up copies to a CUDA GPU"),
    Reject(checks.check_make_loaders, loaders_never_pinned, "expected pinning for a CUDA GPU"),
] + NEW_CASES + ALTERNATIVES


# ---------------------------------------------------------------- put it together: make_recording_loader


def _read_recordings(path):
    rows = []
    with open(path) as file:
        for line in file:
            if line.strip() and not line.lstrip().startswith("#"):
                label, *values = line.strip().split(",")
                rows.append((torch.tensor([float(v) for v in values]), int(label)))
    return rows


class _Recordings(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def _standardised(rows, correction=0):
    values = torch.cat([r for r, _ in rows]).double()
    mean, std = values.mean(), values.std(correction=correction)
    return [(((r.double() - mean) / std).float(), y) for r, y in rows]


def recordings_by_hand(path, batch_size, seed):
    """Correct: its own padding collate, a sample std (n - 1), a seeded generator made in two steps."""
    rows = _standardised(_read_recordings(path), correction=1)

    def collate(batch):
        lengths = torch.tensor([len(r) for r, _ in batch])
        padded = torch.zeros(len(batch), int(lengths.max()))
        for i, (r, _) in enumerate(batch):
            padded[i, : len(r)] = r
        return padded, lengths, torch.tensor([y for _, y in batch])

    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(_Recordings(rows), batch_size, shuffle=True, collate_fn=collate, generator=generator)


def recordings_numpy(path, batch_size, seed):
    """Correct: parsed with NumPy-free string handling into one flat tensor, split back with torch.split."""
    lines = [line for line in Path(path).read_text().splitlines() if line.strip() and not line.startswith("#")]
    labels = [int(line.split(",")[0]) for line in lines]
    counts = [line.count(",") for line in lines]
    flat = torch.tensor([float(v) for line in lines for v in line.split(",")[1:]], dtype=torch.float64)
    flat = ((flat - flat.mean()) / flat.std(unbiased=False)).float()
    rows = list(zip(flat.split(counts), labels))
    print(f"{len(rows)} recordings")
    return DataLoader(rows, batch_size=batch_size, shuffle=True, collate_fn=ref.collate_sequences,
                      generator=torch.Generator().manual_seed(seed))


collate_sequences = ref.collate_sequences  # a learner's exercise-5 function, in the namespace the loader uses


def recordings_reusing_collate(path, batch_size, seed):
    """Correct: reuses the learner's collate_sequences from exercise 5 (graded with the reference one)."""
    rows = _standardised(_read_recordings(path))
    return DataLoader(rows, batch_size=batch_size, shuffle=True, collate_fn=collate_sequences,
                      generator=torch.Generator().manual_seed(seed))


def _recordings_loader(rows, batch_size, seed, **options):
    settings = dict(batch_size=batch_size, shuffle=True, collate_fn=ref.collate_sequences,
                    generator=torch.Generator().manual_seed(seed))
    settings.update(options)
    return DataLoader(rows, **settings)


def recordings_raw(path, batch_size, seed):
    return _recordings_loader(_read_recordings(path), batch_size, seed)


def recordings_per_row(path, batch_size, seed):
    rows = [((r - r.mean()) / r.std(correction=0).clamp_min(1e-6), y) for r, y in _read_recordings(path)]
    return _recordings_loader(rows, batch_size, seed)


def recordings_not_shuffled(path, batch_size, seed):
    return _recordings_loader(_standardised(_read_recordings(path)), batch_size, seed, shuffle=False, generator=None)


def recordings_global_shuffle(path, batch_size, seed):
    torch.manual_seed(seed)
    return _recordings_loader(_standardised(_read_recordings(path)), batch_size, seed, generator=None)


def recordings_drop_last(path, batch_size, seed):
    return _recordings_loader(_standardised(_read_recordings(path)), batch_size, seed, drop_last=True)


def recordings_skip_first_line(path, batch_size, seed):
    """Wrong: the first line read as a header, though every line but blanks and comments is a recording."""
    return _recordings_loader(_standardised(_read_recordings(path)[1:]), batch_size, seed)


class _LazyRecordings(Dataset):
    """Reads the file again for every item."""

    def __init__(self, path, stats):
        self.path, self.stats = path, stats
        self.n = len(_read_recordings(path))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        r, y = _read_recordings(self.path)[i]
        mean, std = self.stats
        return ((r.double() - mean) / std).float(), y


def recordings_lazy(path, batch_size, seed):
    values = torch.cat([r for r, _ in _read_recordings(path)]).double()
    return _recordings_loader(_LazyRecordings(path, (values.mean(), values.std(correction=0))), batch_size, seed)


def recordings_fixed_permutation(path, batch_size, seed):
    rows = _standardised(_read_recordings(path))
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    return _recordings_loader([rows[i] for i in order], batch_size, seed, shuffle=False, generator=None)


def recordings_padded_first(path, batch_size, seed):
    rows = _read_recordings(path)

    def collate(batch):
        padded = pad_sequence([r for r, _ in batch], batch_first=True)
        values = torch.cat([r for r, _ in rows]).double()
        padded = ((padded.double() - values.mean()) / values.std(correction=0)).float()
        return padded, torch.tensor([len(r) for r, _ in batch]), torch.tensor([y for _, y in batch])

    return _recordings_loader(rows, batch_size, seed, collate_fn=collate)


def recordings_comments_kept(path, batch_size, seed):
    rows = []
    for line in Path(path).read_text().splitlines():
        label, *values = (line or "0,0").lstrip("#").split(",")
        rows.append((torch.tensor([float(v) if v.strip() else 0.0 for v in values] or [0.0]),
                     int(label) if label.strip().isdigit() else 0))
    return _recordings_loader(_standardised(rows), batch_size, seed)


def recordings_float_labels(path, batch_size, seed):
    rows = [(r, float(y)) for r, y in _standardised(_read_recordings(path))]
    return _recordings_loader(rows, batch_size, seed)


RECORDING_CASES = [
    Accept(checks.check_recording_loader, ref.make_recording_loader),
    Accept(checks.check_recording_loader, recordings_by_hand),
    Accept(checks.check_recording_loader, recordings_numpy),
    Accept(checks.check_recording_loader, recordings_reusing_collate),
    Reject(checks.check_recording_loader, recordings_raw, "the readings are not standardised"),
    Reject(checks.check_recording_loader, recordings_per_row, "each recording with its own mean and std"),
    Reject(checks.check_recording_loader, recordings_not_shuffled, "in the file's order"),
    Reject(checks.check_recording_loader, recordings_global_shuffle, "global random generator"),
    Reject(checks.check_recording_loader, recordings_drop_last, "one epoch delivered 8 recordings"),
    Reject(checks.check_recording_loader, recordings_skip_first_line, "recordings, but the file holds"),
    Reject(checks.check_recording_loader, recordings_lazy, "the file had been overwritten"),
    Reject(checks.check_recording_loader, recordings_fixed_permutation, "two epochs delivered the recordings"),
    Reject(checks.check_recording_loader, recordings_padded_first, "pad after standardising"),
    Reject(checks.check_recording_loader, recordings_comments_kept, "could not convert string to float"),
    Reject(checks.check_recording_loader, recordings_float_labels, "labels is"),
]
CASES += RECORDING_CASES


def recordings_unseeded_generator(path, batch_size, seed):
    return _recordings_loader(_standardised(_read_recordings(path)), batch_size, seed, generator=torch.Generator())


class PointsSortsLabels(ref.PointsDataset):
    def __init__(self, features, labels):
        labels.sort()
        super().__init__(features, labels)


def share_rounded_tensor(load_ms, step_ms):
    return torch.tensor([load_ms, step_ms]).softmax(0)[0].item()


CASES += [
    Reject(checks.check_recording_loader, recordings_unseeded_generator, "expected the seed to decide the order"),
    Reject(checks.check_points_dataset, PointsSortsLabels, "changed the list it was given as `labels`"),
    Reject(checks.check_points_dataset, PointsIntLabel, "without turning it into a Python number"),
    Reject(checks.check_points_dataset, PointsLabelsKeptAsList, "keeps the caller's list of labels"),
    Accept(checks.check_points_dataset, PointsLabelsStacked),
    Reject(checks.check_loading_share, share_rounded_tensor, "should be"),
]


# ---------------------------------------------------------------- classes an independent learner found (issue 18)


def fix_length_float_zeros(signal, length):
    """Wrong: the zeros are float32 whatever the signal's dtype, so an int64 or float64 signal changes dtype."""
    missing = length - signal.numel()
    if missing <= 0:
        return signal[:length]
    return torch.hstack([signal, torch.zeros(missing, dtype=torch.float32)])


class ClipsTwoPartName(ref.ClipDataset):
    """Wrong: the stem unpacked into exactly (class, number): a name such as low_004_take_2.npy breaks it."""

    def __getitem__(self, index):
        path = self.files[index]
        label_name, number = path.name[:-len(".npy")].split("_")
        clip = torch.from_numpy(np.load(path)).float()
        return ref.fix_length(clip, self.length), self.classes.index(label_name)


class ClipsLastUnderscore(ref.ClipDataset):
    """Correct: the class from partition (the part before the first underscore), the clip via torch.as_tensor."""

    def __getitem__(self, index):
        path = self.files[index]
        name, _, _ = path.stem.partition("_")
        clip = torch.as_tensor(np.load(path), dtype=torch.float32)
        return ref.fix_length(clip, self.length), self.classes.index(name)


def pad_collate_count_nonzero(batch):
    """Wrong: the lengths recovered from the padded batch by counting non-zero entries."""
    padded = pad_sequence(batch, batch_first=True)
    return padded, padded.ne(0).sum(dim=1)


def collate_count_nonzero_steps(batch):
    """Wrong: the lengths are the time steps with any non-zero feature."""
    padded = pad_sequence([s for s, _ in batch], batch_first=True)
    steps = padded.ne(0) if padded.dim() == 2 else padded.ne(0).any(dim=-1)
    return padded, steps.sum(dim=1), torch.tensor([y for _, y in batch])


def mean_std_counts_images(dataset, batch_size=1000):
    """Wrong: n counts images, not pixels."""
    total = total_sq = 0.0
    n = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        images = images.double()
        total, total_sq, n = total + images.sum().item(), total_sq + images.square().sum().item(), n + images.shape[0]
    mean = total / n
    return mean, (total_sq / n - mean**2) ** 0.5


def mean_std_keeps_batches(dataset, batch_size=1000):
    """Wrong: right numbers, from a list of every batch (the whole dataset in memory)."""
    batches = list(DataLoader(dataset, batch_size=batch_size))
    pixels = torch.cat([images.flatten() for images, _ in batches]).double()
    return pixels.mean().item(), pixels.std(correction=0).item()


def mean_std_two_passes(dataset, batch_size=1000):
    """Correct: two passes (mean first, then the squared deviations), one batch at a time."""
    total, n = 0.0, 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        total += images.double().sum().item()
        n += images.numel()
    mean = total / n
    squares = 0.0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        squares += ((images.double() - mean) ** 2).sum().item()
    return mean, math.sqrt(squares / n)


def mean_std_drop_last(dataset, batch_size=1000):
    """Wrong: "go through it with DataLoader(dataset, batch_size=batch_size)": drop_last loses the last batch."""
    total, squares, n = 0.0, 0.0, 0
    for images, _ in DataLoader(dataset, batch_size=batch_size, drop_last=True):
        images = images.double()
        total, squares, n = total + images.sum().item(), squares + images.square().sum().item(), n + images.numel()
    mean = total / n
    return mean, math.sqrt(squares / n - mean**2)


def mean_std_within_batches(dataset, batch_size=1000):
    """Wrong: each pixel's squared distance from its own batch's mean, pooled (the mean itself is right)."""
    total, within, n = 0.0, 0.0, 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        images = images.double()
        total += images.sum().item()
        within += ((images - images.mean()) ** 2).sum().item()
        n += images.numel()
    return total / n, math.sqrt(within / n)


def split_ceil(dataset, val_fraction, seed):
    """Wrong: n_val rounded up."""
    n_val = math.ceil(len(dataset) * val_fraction)
    return tuple(random_split(dataset, [len(dataset) - n_val, n_val], generator=torch.Generator().manual_seed(seed)))


def split_permutation_val_first(dataset, val_fraction, seed):
    """Wrong: a seeded permutation, validation cut from its start."""
    n_val = int(len(dataset) * val_fraction)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    return Subset(dataset, order[n_val:].tolist()), Subset(dataset, order[:n_val].tolist())


def split_permutation(dataset, val_fraction, seed):
    """Correct: random_split's cut made by hand from the same seeded permutation."""
    n_train = len(dataset) - int(len(dataset) * val_fraction)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return Subset(dataset, order[:n_train]), Subset(dataset, order[n_train:])


def loaders_equal_to_cuda(train_set, val_set, batch_size, seed, device):
    """Wrong: pins only for a device equal to torch.device('cuda'), not for 'cuda:1'."""
    pin = device == torch.device("cuda")
    train = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True, pin_memory=pin,
                       generator=torch.Generator().manual_seed(seed))
    return train, DataLoader(val_set, batch_size=batch_size, pin_memory=pin)


def loaders_sampler_generator(train_set, val_set, batch_size, seed, device):
    """Wrong: the seeded generator goes to a RandomSampler only, so the loader's base seed is global."""
    pin = device.type == "cuda"
    sampler = RandomSampler(train_set, generator=torch.Generator().manual_seed(seed))
    train = DataLoader(train_set, batch_size=batch_size, sampler=sampler, drop_last=True, pin_memory=pin)
    return train, DataLoader(val_set, batch_size=batch_size, pin_memory=pin)


def loaders_device_type_in(train_set, val_set, batch_size, seed, device):
    """Correct: the device normalised with torch.device(...), pinning decided by membership."""
    pin = torch.device(device).type in {"cuda"}
    g = torch.Generator()
    g.manual_seed(seed)
    return (DataLoader(train_set, batch_size, True, drop_last=True, pin_memory=pin, generator=g),
            DataLoader(val_set, batch_size, False, pin_memory=pin))


CASES += [
    Reject(checks.check_fix_length, fix_length_float_zeros, "dtype=signal.dtype"),
    Reject(checks.check_clip_dataset, ClipsTwoPartName, "the part before the first '_'"),
    Accept(checks.check_clip_dataset, ClipsLastUnderscore),
    Reject(checks.check_pad_collate, pad_collate_count_nonzero, "you counted the non-zero values"),
    Reject(checks.check_collate_sequences, collate_count_nonzero_steps, "you counted the non-zero values"),
    Reject(checks.check_mean_std, mean_std_counts_images, "you counted images"),
    Reject(checks.check_mean_std, mean_std_keeps_batches, "you kept every batch"),
    Accept(checks.check_mean_std, mean_std_two_passes),
    Reject(checks.check_mean_std, mean_std_drop_last, "the last, smaller batch of 5 was never counted"),
    Reject(checks.check_mean_std, mean_std_within_batches, "its own batch's mean"),
    Reject(checks.check_split_train_val, split_ceil, "rounded up"),
    Reject(checks.check_split_train_val, split_permutation_val_first, "start of the shuffled order"),
    Accept(checks.check_split_train_val, split_permutation),
    Reject(checks.check_make_loaders, loaders_equal_to_cuda, "cuda:1"),
    Reject(checks.check_make_loaders, loaders_sampler_generator, "your sampler has its own generator"),
    Reject(checks.check_make_loaders, loaders_default_argument_generator, "share one generator object"),
    Accept(checks.check_make_loaders, loaders_generator_then_seed),
    Accept(checks.check_make_loaders, loaders_device_type_in),
]


def split_negative_slices(dataset, val_fraction, seed):
    """Wrong: the parts cut with negative slices, so n_val = 0 gives validation everything and training nothing."""
    n_val = int(len(dataset) * val_fraction)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return Subset(dataset, order[:-n_val]), Subset(dataset, order[-n_val:])

CASES += [
    Reject(checks.check_split_train_val, split_negative_slices, "expected 6 for training and int(6 * 0.1) = 0"),
]


# --- issue 18, round 3: classes the independent learner found -----------------------------------


class ClipsLabelFromNumpy(ref.ClipDataset):
    """Wrong: the label is a NumPy integer (np.flatnonzero), not the int the task names."""

    def __getitem__(self, index):
        clip, _ = super().__getitem__(index)
        kind = self.files[index].stem.split("_")[0]
        return clip, np.flatnonzero(np.array(self.classes) == kind)[0]


class ClipsLabelAsLongTensor(ref.ClipDataset):
    """Wrong: the label as a one-element int64 tensor, which default collate would hide."""

    def __getitem__(self, index):
        clip, label = super().__getitem__(index)
        return clip, torch.tensor([label], dtype=torch.long)


CASES += [
    Reject(checks.check_clip_dataset, ClipsLabelFromNumpy, "expected the class index as a Python int"),
    Reject(checks.check_clip_dataset, ClipsLabelAsLongTensor, "dataset[0][1] is tensor(shape=[1]"),
]


def collate_lengths_first(batch):
    """Wrong: the lengths come first, then the padded batch and the labels."""
    sequences, labels = zip(*batch)
    return (torch.tensor([s.shape[0] for s in sequences]), pad_sequence(list(sequences), batch_first=True),
            torch.tensor(labels))


def pad_collate_lengths_first(batch):
    """Wrong: returns (lengths, padded)."""
    return torch.tensor([len(s) for s in batch]), pad_sequence(batch, batch_first=True)


def recordings_statistics_of_whole_lines(path, batch_size, seed):
    """Wrong: the mean and std of every number on the data lines, the label column included (sample std)."""
    rows = _read_recordings(path)
    numbers = torch.cat([torch.cat([torch.tensor([float(y)]), r]) for r, y in rows]).double()
    mean, std = numbers.mean(), numbers.std()
    return _recordings_loader([(((r - mean) / std).float(), y) for r, y in rows], batch_size, seed)


def recordings_divided_only(path, batch_size, seed):
    """Wrong: divides by the file's std but never subtracts its mean."""
    rows = _read_recordings(path)
    std = torch.cat([r for r, _ in rows]).std(correction=0)
    return _recordings_loader([(r / std, y) for r, y in rows], batch_size, seed)


CASES += [
    Reject(checks.check_collate_sequences, collate_lengths_first, "returned (lengths, padded, labels)"),
    Reject(checks.check_pad_collate, pad_collate_lengths_first, "expected (padded, lengths)"),
    Reject(checks.check_recording_loader, recordings_statistics_of_whole_lines, "the labels (each line's first"),
    Reject(checks.check_recording_loader, recordings_divided_only, "did not subtract the mean"),
]


def fix_length_new_empty(signal, length):
    """Wrong: the result's memory comes from new_empty, and only the signal's part is written."""
    out = signal.new_empty(length)
    kept = signal[:length]
    out[: len(kept)] = kept
    return out


def collate_unwritten_padding(batch):
    """Wrong: the padded batch starts as torch.empty, so the padding is whatever the memory held."""
    sequences = [s for s, _ in batch]
    padded = torch.empty((len(sequences), max(len(s) for s in sequences), *sequences[0].shape[1:]),
                         dtype=sequences[0].dtype)
    for row, s in zip(padded, sequences):
        row[: len(s)] = s
    return padded, torch.tensor([len(s) for s in sequences]), torch.tensor([y for _, y in batch])


def pad_collate_unwritten_padding(batch):
    """Wrong: pad_collate through the torch.empty collate above."""
    return collate_unwritten_padding([(s, 0) for s in batch])[:2]


def recordings_unwritten_padding(path, batch_size, seed):
    """Wrong: its collate pads into torch.empty memory."""
    return _recordings_loader(_standardised(_read_recordings(path)), batch_size, seed,
                              collate_fn=collate_unwritten_padding)


CASES += [
    Reject(checks.check_fix_length, fix_length_new_empty, "the padding holds values nobody wrote there"),
    Reject(checks.check_collate_sequences, collate_unwritten_padding, "torch.empty, new_empty and resize_"),
    Reject(checks.check_pad_collate, pad_collate_unwritten_padding, "the padding holds values nobody wrote there"),
    Reject(checks.check_recording_loader, recordings_unwritten_padding, "the padding holds values nobody wrote"),
]


def mean_std_float32_batch_sums(dataset, batch_size=1000):
    """Wrong: each batch summed in float32 (only the running totals are Python floats): pixels large next to
    their spread lose the variance."""
    total = total_sq = 0.0
    count = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        total += images.sum().item()
        total_sq += images.square().sum().item()
        count += images.numel()
    mean = total / count
    return mean, math.sqrt(max(total_sq / count - mean**2, 0.0))


CASES += [
    Reject(checks.check_mean_std, mean_std_float32_batch_sums, "float32 keeps about 7 significant digits"),
]


def recordings_only_blank_lines_skipped(path, batch_size, seed):
    """Wrong: skips blank lines but reads the # comment lines as recordings."""
    rows = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            fields = line.split(",")
            rows.append((torch.tensor([float(v) for v in fields[1:]]), int(fields[0])))
    return _recordings_loader(_standardised(rows), batch_size, seed)


def recordings_only_comments_skipped(path, batch_size, seed):
    """Wrong: skips the # comment lines but not the blank ones."""
    rows = []
    for line in Path(path).read_text().splitlines():
        if not line.startswith("#"):
            label, *values = line.split(",")
            rows.append((torch.tensor([float(v) for v in values]), int(label)))
    return _recordings_loader(_standardised(rows), batch_size, seed)


CASES += [
    Reject(checks.check_recording_loader, recordings_only_blank_lines_skipped, "it was reading the comment line"),
    Reject(checks.check_recording_loader, recordings_only_comments_skipped, "an empty string (from a blank line)"),
]


def mean_std_flattened_copies(dataset, batch_size=1000):
    """Wrong: keeps a float64 copy of every batch's pixels (the batches themselves are let go) for one std at the end."""
    pixels = []
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        pixels.append(images.reshape(-1).to(torch.float64))
    everything = torch.cat(pixels)
    return everything.mean().item(), everything.std().item()


def mean_std_many_temporaries(dataset, batch_size=1000):
    """Correct: several batch-sized temporaries per batch, all let go by the next one (sums of centred values)."""
    first = next(iter(DataLoader(dataset, batch_size=batch_size)))[0].double()
    shift = first.mean().item()  # centring on a rough mean keeps the sums small
    total = total_sq = 0.0
    count = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        pixels = images.double()
        centred = pixels - shift
        squared = centred * centred
        total += centred.sum().item()
        total_sq += squared.sum().item()
        count += pixels.numel()
    mean = total / count
    return shift + mean, math.sqrt(max(total_sq / count - mean**2, 0.0))


CASES += [
    Reject(checks.check_mean_std, mean_std_flattened_copies, "you kept (a copy of) every batch"),
    Accept(checks.check_mean_std, mean_std_many_temporaries),
]


def fix_length_tiled(signal, length):
    """Wrong: a short signal is tiled (np.resize-style) up to the length instead of padded with zeros."""
    if len(signal) >= length:
        return signal[:length].clone()
    times = -(-length // len(signal))
    return torch.cat([signal] * times)[:length]


def fix_length_crop_short_by_one(signal, length):
    """Wrong: crops to length - 1 samples, then pads what is missing with zeros."""
    kept = signal[: length - 1] if len(signal) >= length else signal
    return F.pad(kept, (0, length - len(kept)))


def fix_length_new_full(signal, length):
    """Correct: a zero-filled result of the signal's dtype, with the kept samples copied in."""
    out = signal.new_full((length,), 0)
    keep = min(length, len(signal))
    out[:keep] = signal[:keep]
    return out


CASES += [
    Reject(checks.check_fix_length, fix_length_tiled, "repeating the signal"),
    Reject(checks.check_fix_length, fix_length_crop_short_by_one, "you cropped one sample too many"),
    Accept(checks.check_fix_length, fix_length_new_full),
]


def collate_lengths_from_size_minus_one(batch):
    """Wrong: measures each sequence by its last dimension, size(-1), the features per time step."""
    sequences = [sequence for sequence, _ in batch]
    lengths = torch.tensor([sequence.size(-1) for sequence in sequences])
    return pad_sequence(sequences, batch_first=True), lengths, torch.tensor([label for _, label in batch])


CASES += [
    Reject(checks.check_collate_sequences, collate_lengths_from_size_minus_one, "features per time step"),
]


def split_generator_from_clock(dataset, val_fraction, seed):
    """Wrong: the generator is seeded from the clock (g.seed()), and the seed argument never used."""
    generator = torch.Generator()
    generator.seed()
    n_val = int(len(dataset) * val_fraction)
    return tuple(random_split(dataset, [len(dataset) - n_val, n_val], generator=generator))


CASES += [
    Reject(checks.check_split_train_val, split_generator_from_clock, "the same seed must give the same split"),
]


def mean_std_images_counted_std_only(dataset, batch_size=1000):
    """Wrong (std part): the mean counts pixels, but the std's sums are divided by the number of images, clamped."""
    total = total_sq = 0.0
    pixels = images_seen = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        x = images.double()
        total += x.sum().item()
        total_sq += x.square().sum().item()
        pixels += x.numel()
        images_seen += len(x)
    variance = total_sq / images_seen - (total / images_seen) ** 2
    return total / pixels, math.sqrt(max(variance, 0.0))


CASES += [
    Reject(checks.check_mean_std, mean_std_images_counted_std_only, "with n counting images instead of pixels"),
]


# ---------------------------------------------------------------- round 5: fix_length keeps the start of the signal


def fix_length_centred(signal, length):  # the zeros split over both ends (the larger half before)
    n = len(signal)
    if n >= length:
        return signal[:length]
    before = (length - n + 1) // 2
    return torch.cat([signal.new_zeros(before), signal, signal.new_zeros(length - n - before)])


def fix_length_crop_centre(signal, length):  # a window from the middle of a long signal
    n = len(signal)
    if n > length:
        start = (n - length) // 2
        return signal[start:start + length]
    return F.pad(signal, (0, length - n))


def fix_length_narrow(signal, length):  # right: narrow() crops, a zeros-filled copy pads
    if len(signal) >= length:
        return signal.narrow(0, 0, length)
    out = torch.zeros(length, dtype=signal.dtype)
    out[: len(signal)] = signal
    return out


CASES += [
    Reject(checks.check_fix_length, fix_length_centred, "zeros on both sides of the signal"),
    Reject(checks.check_fix_length, fix_length_crop_centre, "samples from the middle of the signal"),
    Accept(checks.check_fix_length, fix_length_narrow),
]


def collate_longest_first(batch):  # ordered for pack_padded_sequence, but the rows no longer match the batch
    order = torch.argsort(torch.tensor([len(s) for s, _ in batch]), descending=True)
    sequences = [batch[i][0] for i in order]
    lengths = torch.tensor([len(s) for s in sequences])
    labels = torch.tensor([batch[i][1] for i in order])
    return pad_sequence(sequences, batch_first=True), lengths, labels


def split_both_parts_floored(dataset, val_fraction, seed):  # each part rounded down: one sample can go missing
    n = len(dataset)
    n_train = math.floor((1 - val_fraction) * n)
    n_val = int(val_fraction * n)
    return tuple(random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(seed)))


CASES += [
    Reject(checks.check_collate_sequences, collate_longest_first, "sorted by length, longest first"),
    Reject(checks.check_split_train_val, split_both_parts_floored, "your lengths do not add up to"),
]


# ---------------------------------------------------------------- round 5: a learner who never read the checks


class _StandardisedRecordings(Dataset):
    def __init__(self, path):
        labels, recordings = [], []
        for line in Path(path).read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(",")
            labels.append(int(parts[0]))
            recordings.append(torch.tensor([float(v) for v in parts[1:]], dtype=torch.float64))
        everything = torch.cat(recordings)
        self.recordings = [((r - everything.mean()) / everything.std()).float() for r in recordings]
        self.labels = labels

    def __len__(self):
        return len(self.recordings)

    def __getitem__(self, index):
        return self.recordings[index], self.labels[index]


def _collate_lengths_after_padding(batch):
    padded = pad_sequence([s for s, _ in batch], batch_first=True)
    lengths = torch.tensor([len(row) for row in padded])  # every padded row is as long as the longest
    return padded, lengths, torch.tensor([label for _, label in batch])


def recordings_lengths_after_padding(path, batch_size, seed):
    return DataLoader(_StandardisedRecordings(path), batch_size=batch_size, shuffle=True,
                      collate_fn=_collate_lengths_after_padding, generator=torch.Generator().manual_seed(seed))


CASES += [
    Reject(checks.check_recording_loader, recordings_lengths_after_padding,
           "take each length from the recording itself (len(recording)), before padding"),
]


def workers_largest_key(speeds):
    return max(speeds)[0]  # max of a dict compares its keys


CASES += [
    Reject(checks.check_choose_num_workers, workers_largest_key, "max of a dict compares its keys"),
]


# From a third learner tester (lesson 03).
def _lengths_counted_nonzero(batch):
    sequences, labels = zip(*batch)
    padded = pad_sequence(list(sequences), batch_first=True)
    return padded, (padded != 0).sum(dim=1), torch.tensor(labels)


def recordings_lengths_nonzero(path, batch_size, seed):
    # the lengths count each padded row's nonzero values: a standardised reading equal to the mean is 0 too
    return DataLoader(ref.RecordingDataset(path), batch_size=batch_size, shuffle=True,
                      collate_fn=_lengths_counted_nonzero, generator=torch.Generator().manual_seed(seed))


def recordings_default_collate(path, batch_size, seed):
    return DataLoader(ref.RecordingDataset(path), batch_size=batch_size, shuffle=True,
                      generator=torch.Generator().manual_seed(seed))


class ClipsNamedLikeNpy(ref.ClipDataset):
    # keeps every name that contains ".npy": a backup "x.npy.bak" too
    def __init__(self, folder, length, classes):
        super().__init__(folder, length, classes)
        self.files = sorted(p for p in Path(folder).iterdir() if ".npy" in p.name)


class ClipsBySuffix(ref.ClipDataset):
    def __init__(self, folder, length, classes):
        super().__init__(folder, length, classes)
        self.files = sorted(p for p in Path(folder).iterdir() if p.suffix == ".npy")


def workers_best_mean(speeds):
    # the best mean over the pin_memory settings, not the fastest single setting
    means = {}
    for (workers, _), speed in speeds.items():
        means.setdefault(workers, []).append(speed)
    return max(means, key=lambda w: sum(means[w]) / len(means[w]))


def workers_sorted_fastest(speeds):
    return sorted(speeds.items(), key=lambda item: item[1], reverse=True)[0][0][0]


def mean_std_squares_in_float32(dataset, batch_size=1000):
    # totals in float64, but each square taken in float32 before the conversion
    total = total_sq = 0.0
    count = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        total += images.double().sum().item()
        total_sq += (images * images).double().sum().item()
        count += images.numel()
    mean = total / count
    return mean, max(total_sq / count - mean ** 2, 0.0) ** 0.5


CASES += [
    Reject(checks.check_recording_loader, recordings_lengths_nonzero, "your lengths count each padded row's nonzero"),
    Reject(checks.check_recording_loader, recordings_default_collate, "without a collate_fn the DataLoader stacks"),
    Reject(checks.check_clip_dataset, ClipsNamedLikeNpy, "but does not end in it"),
    Accept(checks.check_clip_dataset, ClipsBySuffix),
    Reject(checks.check_choose_num_workers, workers_best_mean, "mean over the pin_memory settings is largest"),
    Accept(checks.check_choose_num_workers, workers_sorted_fastest),
    Reject(checks.check_mean_std, mean_std_squares_in_float32, "the squares were computed in float32"),
]


def fix_length_numpy(signal, length):
    # np.pad returns a NumPy array: == on it gave an array, which crashed the check's own comparison
    array = signal.numpy()
    return array[:length] if len(array) >= length else np.pad(array, (0, length - len(array)))


CASES += [
    Reject(checks.check_fix_length, fix_length_numpy, "gave you a NumPy array"),
]


# ---------------------------------------------------------------- from a learner-tester's answers (lesson 03)


class PointsOnClass(Dataset):
    """Wrong: the tensors are stored on the class, so the newest dataset's data replaces every other's."""

    x = None
    y = None

    def __init__(self, features, labels):
        PointsOnClass.x = torch.tensor(features, dtype=torch.float32)
        PointsOnClass.y = torch.tensor(labels, dtype=torch.int64)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


class PointsSqueezed(ref.PointsDataset):
    """Wrong: squeeze() "cleans" the shape, and drops D when there is one feature per sample."""

    def __init__(self, features, labels):
        self.features = torch.tensor(features, dtype=torch.float32).squeeze()
        self.labels = torch.tensor(labels, dtype=torch.int64).squeeze()


class PointsSliceRow(ref.PointsDataset):
    """Wrong: a one-row slice keeps the dimension it slices: [1, D] and [1]."""

    def __getitem__(self, index):
        return self.features[index:index + 1], self.labels[index:index + 1]


def fix_length_crop_negative_end(signal, length):
    # signal[:-0] is empty when the signal is already `length` long
    n = len(signal)
    if n >= length:
        return signal[:-(n - length)]
    return F.pad(signal, (0, length - n))


def fix_length_resize_in_place(signal, length):
    n = len(signal)
    if n >= length:
        return signal[:length]
    signal.resize_(length)
    signal[n:] = 0
    return signal


def fix_length_replicate_pad(signal, length):
    n = len(signal)
    if n >= length:
        return signal[:length]
    return torch.cat([signal, signal[-1:].repeat(length - n)])


class ClipsFilesOnClass(ref.ClipDataset):
    """Wrong: a list in the class body, appended to by every __init__."""

    files = []

    def __init__(self, folder, length, classes):
        for path in sorted(Path(folder).glob("*.npy")):
            self.files.append(path)
        self.length, self.classes = length, list(classes)


class ClipsAssignedOnClass(ref.ClipDataset):
    """Wrong: the file list is assigned to the class, so the newest dataset's list is every dataset's."""

    def __init__(self, folder, length, classes):
        ClipsAssignedOnClass.files = sorted(Path(folder).glob("*.npy"))
        self.length, self.classes = length, list(classes)


def pad_collate_first_width(batch):
    # the width of the first sequence, as if the batch were sorted longest first
    longest = len(batch[0])
    padded = torch.zeros(len(batch), longest, dtype=batch[0].dtype)
    for i, s in enumerate(batch):
        n = min(len(s), longest)
        padded[i, :n] = s[:n]
    return padded, torch.tensor([len(s) for s in batch])


def pad_collate_sorted(batch):
    ordered = sorted(batch, key=len, reverse=True)
    return pad_sequence(ordered, batch_first=True), torch.tensor([len(s) for s in batch])


def collate_sequences_dot_t(batch):
    # .T reverses every dimension: right for 1-D sequences only
    sequences, labels = zip(*batch)
    return pad_sequence(list(sequences)).T, torch.tensor([len(s) for s in sequences]), torch.tensor(labels)


def collate_sequences_pad_last_dim(batch):
    # F.pad's (0, k) pads the last dimension: the features of a [T, F] sequence
    sequences, labels = zip(*batch)
    longest = max(len(s) for s in sequences)
    padded = torch.stack([F.pad(s, (0, longest - len(s))) for s in sequences])
    return padded, torch.tensor([len(s) for s in sequences]), torch.tensor(labels)


def mean_std_count_full_batches(dataset, batch_size=1000):
    # n counts batch_size images for every batch, the last (smaller) one too
    total = total_sq = 0.0
    batches, per_image = 0, 1
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        x = images.double()
        total += x.sum().item()
        total_sq += (x ** 2).sum().item()
        batches += 1
        per_image = x[0].numel()
    n = batches * batch_size * per_image
    mean = total / n
    return mean, max(total_sq / n - mean ** 2, 0.0) ** 0.5


def mean_std_weighted_batch_std(dataset, batch_size=1000):
    total = std_sum = 0.0
    n = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        x = images.double()
        total += x.sum().item()
        std_sum += x.std(correction=0).item() * x.numel()
        n += x.numel()
    return total / n, std_sum / n


def mean_std_image_variances(dataset, batch_size=1000):
    # the mean of per-image means (right for images of one size), the root of the mean per-image variance
    means, variances = [], []
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        x = images.double().flatten(1)
        means.append(x.mean(dim=1).sum().item())
        variances.append(x.var(dim=1, correction=0).sum().item())
    return sum(means) / len(dataset), (sum(variances) / len(dataset)) ** 0.5


def mean_std_per_channel(dataset, batch_size=1000):
    # assumes 1-channel [B, 1, H, W] batches: one total per channel
    total = total_sq = 0.0
    n = 0
    for images, _ in DataLoader(dataset, batch_size=batch_size):
        x = images.double()
        total += x.sum(dim=(0, 2, 3)).item()
        total_sq += (x ** 2).sum(dim=(0, 2, 3)).item()
        n += x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / n
    return mean, max(total_sq / n - mean ** 2, 0.0) ** 0.5


_SPLIT_GENERATOR = None


def split_module_generator(dataset, val_fraction, seed):
    # one generator, made (and seeded) by the first call only
    global _SPLIT_GENERATOR
    if _SPLIT_GENERATOR is None:
        _SPLIT_GENERATOR = torch.Generator().manual_seed(seed)
    n_val = int(len(dataset) * val_fraction)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val], generator=_SPLIT_GENERATOR)
    return train, val


def split_numpy_permutation(dataset, val_fraction, seed):
    n = len(dataset)
    n_val = int(n * val_fraction)
    order = np.random.default_rng(seed).permutation(n).tolist()
    return Subset(dataset, order[:n - n_val]), Subset(dataset, order[n - n_val:])


_LOADER_GENERATOR = torch.Generator().manual_seed(0)


def loaders_module_generator(train_set, val_set, batch_size, seed, device):
    pin = device.type == "cuda"
    return (DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True, pin_memory=pin,
                       generator=_LOADER_GENERATOR),
            DataLoader(val_set, batch_size=batch_size, pin_memory=pin))


def loaders_fixed_permutation(train_set, val_set, batch_size, seed, device):
    # one permutation, drawn once: the same order every epoch
    pin = device.type == "cuda"
    order = torch.randperm(len(train_set), generator=torch.Generator().manual_seed(seed)).tolist()
    return (DataLoader(train_set, batch_size=batch_size, sampler=order, drop_last=True, pin_memory=pin),
            DataLoader(val_set, batch_size=batch_size, pin_memory=pin))


class _RecordingsOnClass(Dataset):
    rows = []  # one list, shared by every dataset

    def __init__(self, rows):
        self.rows.extend(rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def recordings_rows_on_class(path, batch_size, seed):
    rows = _standardised(_read_recordings(path))
    return DataLoader(_RecordingsOnClass(rows), batch_size=batch_size, shuffle=True, collate_fn=ref.collate_sequences,
                      generator=torch.Generator().manual_seed(seed))


def workers_hard_coded_keys(speeds):
    # the settings of the notebook's own table
    return 2 if speeds[2, False] > speeds[0, False] else 0


def share_floor_division(load_ms, step_ms):
    return load_ms // (load_ms + step_ms)


def share_rounded(load_ms, step_ms):
    return round(load_ms / (load_ms + step_ms), 2)


CASES += [
    Reject(checks.check_points_dataset, PointsOnClass, "data stored on the class is shared by every dataset"),
    Reject(checks.check_points_dataset, PointsSqueezed, "here D (one feature per sample)"),
    Reject(checks.check_points_dataset, PointsSliceRow, "a one-row slice of the features"),
    Reject(checks.check_fix_length, fix_length_crop_negative_end, "ends at -0 when n == length"),
    Reject(checks.check_fix_length, fix_length_resize_in_place, "resize_ changes the caller's tensor in place"),
    Reject(checks.check_fix_length, fix_length_replicate_pad, "the signal's last value (replicate padding)"),
    Reject(checks.check_clip_dataset, ClipsFilesOnClass, "a file list that lives on the class"),
    Reject(checks.check_clip_dataset, ClipsAssignedOnClass, "a file list that lives on the class"),
    Reject(checks.check_pad_collate, pad_collate_first_width, "as wide as the first sequence (4), not as the longest"),
    Reject(checks.check_pad_collate, pad_collate_sorted, "row i is sequence i, as the lengths are"),
    Reject(checks.check_collate_sequences, collate_sequences_dot_t, ".T reverses every dimension"),
    Reject(checks.check_collate_sequences, collate_sequences_pad_last_dim, "F.pad's pairs start from the last"),
    Reject(checks.check_mean_std, mean_std_count_full_batches, "n = batch_size x batches x pixels"),
    Reject(checks.check_mean_std, mean_std_weighted_batch_std, "each measured from its own batch's mean"),
    Reject(checks.check_mean_std, mean_std_image_variances, "the mean of the per-image variances"),
    Reject(checks.check_mean_std, mean_std_per_channel, "keeps one total per channel"),
    Reject(checks.check_split_train_val, split_module_generator, "a generator made once at module level"),
    Reject(checks.check_split_train_val, split_numpy_permutation, "a NumPy permutation seeded with"),
    Reject(checks.check_make_loaders, loaders_module_generator, "both draw from one and the same generator object"),
    Reject(checks.check_make_loaders, loaders_fixed_permutation, "the same shuffled order every epoch"),
    Reject(checks.check_recording_loader, recordings_rows_on_class, "after two more loaders were made"),
    Reject(checks.check_choose_num_workers, workers_hard_coded_keys, "is not a key of this table"),
    Reject(checks.check_loading_share, share_floor_division, "// is floor division"),
    Reject(checks.check_loading_share, share_rounded, "the share rounded to 2 decimals"),
]
