"""Lesson 10 Capstone: the reference passes, plausible wrong answers fail by name.

The capstone checks train on the offline MNIST fixture; the reference capstone
is trained once (about 30 s of CPU) and cached by helpers.checks.capstone for
all the checks that grade it.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset, random_split

from helpers.checks import capstone as checks
from helpers.reference import capstone as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- make_validation_split


def split_without_generator(dataset, val_size, seed):
    return random_split(dataset, [len(dataset) - val_size, val_size])


def split_with_global_seed(dataset, val_size, seed):
    torch.manual_seed(seed)
    return random_split(dataset, [len(dataset) - val_size, val_size])


def split_last_items(dataset, val_size, seed):
    n = len(dataset)
    return Subset(dataset, range(n - val_size)), Subset(dataset, range(n - val_size, n))


def split_swapped(dataset, val_size, seed):
    train, val = ref.make_validation_split(dataset, val_size, seed)
    return val, train


def split_ignoring_seed(dataset, val_size, seed):
    return random_split(dataset, [len(dataset) - val_size, val_size], generator=torch.Generator().manual_seed(0))


def split_randperm_subset(dataset, val_size, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    return Subset(dataset, order[val_size:].tolist()), Subset(dataset, order[:val_size].tolist())


def split_validation_first(dataset, val_size, seed):
    val, train = random_split(dataset, [val_size, len(dataset) - val_size], generator=torch.Generator().manual_seed(seed))
    return train, val


def split_sorted_with_python_random(dataset, val_size, seed):
    import random

    rng = random.Random(seed)
    val = sorted(rng.sample(range(len(dataset)), val_size))
    train = [i for i in range(len(dataset)) if i not in set(val)]
    print(f"validation: {len(val)} items")
    return Subset(dataset, train), Subset(dataset, val)


def split_fractions(dataset, val_size, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    n_val = val_size / len(dataset)
    return tuple(random_split(dataset, lengths=[1 - n_val, n_val], generator=generator))


def split_global_randperm(dataset, val_size, seed):
    order = torch.randperm(len(dataset))
    return Subset(dataset, order[val_size:].tolist()), Subset(dataset, order[:val_size].tolist())


def split_contiguous_by_seed(dataset, val_size, seed):
    start = (10 + seed) % (len(dataset) - val_size + 1)
    val = list(range(start, start + val_size))
    return Subset(dataset, [i for i in range(len(dataset)) if i not in val]), Subset(dataset, val)


def split_first_items(dataset, val_size, seed):
    return Subset(dataset, range(val_size, len(dataset))), Subset(dataset, range(val_size))


def split_overlapping(dataset, val_size, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    return Subset(dataset, order[val_size - 1:-1].tolist()), Subset(dataset, order[:val_size].tolist())


def split_val_with_replacement(dataset, val_size, seed):
    """Validation indices drawn one at a time with Python's random.randrange: an index may come twice."""
    import random

    rng = random.Random(seed)
    val = [rng.randrange(len(dataset)) for _ in range(val_size)]
    train = sorted(set(range(len(dataset))) - set(val))
    return Subset(dataset, train), Subset(dataset, val)


# ---------------------------------------------------------------- stack_dataset


def stack_labels_as_list(dataset):
    images, labels = ref.stack_dataset(dataset)
    return images, labels.tolist()


def stack_shuffled(dataset):
    batches = list(DataLoader(dataset, batch_size=1000, shuffle=True))
    return torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])


def stack_float_labels(dataset):
    images, labels = ref.stack_dataset(dataset)
    return images, labels.float()


def stack_without_channel(dataset):
    images, labels = ref.stack_dataset(dataset)
    return images.squeeze(1), labels


def stack_by_index(dataset):
    pairs = [dataset[i] for i in range(len(dataset))]
    return torch.stack([image for image, _ in pairs]), torch.tensor([label for _, label in pairs])


def stack_stored_pixels(dataset):
    images = dataset.data.unsqueeze(1).to(torch.float32) / 255  # the stored pixels: the dataset's Normalize skipped
    return images, torch.as_tensor(dataset.targets, dtype=torch.int64)


def stack_one_batch(dataset):
    images, labels = next(iter(DataLoader(dataset, batch_size=len(dataset))))
    return images, labels.to(torch.int64)


def stack_small_batches(dataset):
    images, labels = zip(*DataLoader(dataset, batch_size=64, shuffle=False))
    return torch.cat(images, dim=0), torch.cat(labels, dim=0)


def stack_full_batches_only(dataset):
    """Drops the last, shorter batch (drop_last=True): 4000 of 4099 items."""
    batches = list(DataLoader(dataset, batch_size=100, drop_last=True))
    return torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])


def stack_batches_side_by_side(dataset):
    """torch.stack of equal batches: a new leading dimension [batches, batch size, ...] instead of one joined tensor."""
    half = (len(dataset) + 1) // 2
    images, labels = zip(*DataLoader(dataset, batch_size=half))
    return torch.stack(images), torch.stack(labels)


# ---------------------------------------------------------------- random_shift


def _offsets(n, m, generator):
    return (torch.randint(-m, m + 1, (n,), generator=generator), torch.randint(-m, m + 1, (n,), generator=generator))


def shift_with_roll(images, max_shift, fill, generator):
    dy, dx = _offsets(len(images), max_shift, generator)
    return torch.stack([image.roll((int(y), int(x)), dims=(-2, -1)) for image, y, x in zip(images, dy, dx)])


def _crop(images, dy, dx, max_shift, fill):
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    h, w = images.shape[-2:]
    return torch.stack([padded[i, :, max_shift - y:max_shift - y + h, max_shift - x:max_shift - x + w]
                        for i, (y, x) in enumerate(zip(dy.tolist(), dx.tolist()))])


def shift_zero_fill(images, max_shift, fill, generator):
    dy, dx = _offsets(len(images), max_shift, generator)
    return _crop(images, dy, dx, max_shift, 0.0)


def shift_whole_batch(images, max_shift, fill, generator):
    dy, dx = _offsets(1, max_shift, generator)
    return _crop(images, dy.expand(len(images)), dx.expand(len(images)), max_shift, fill)


def shift_exclusive_high(images, max_shift, fill, generator):
    n = len(images)
    dy = torch.randint(-max_shift, max_shift, (n,), generator=generator)
    dx = torch.randint(-max_shift, max_shift, (n,), generator=generator)
    return _crop(images, dy, dx, max_shift, fill)


def shift_global_random(images, max_shift, fill, generator):
    n = len(images)
    dy, dx = torch.randint(-max_shift, max_shift + 1, (n,)), torch.randint(-max_shift, max_shift + 1, (n,))
    return _crop(images, dy, dx, max_shift, fill)


def shift_diagonal(images, max_shift, fill, generator):
    dy = torch.randint(-max_shift, max_shift + 1, (len(images),), generator=generator)
    return _crop(images, dy, dy, max_shift, fill)


def shift_in_place(images, max_shift, fill, generator):
    images.copy_(ref.random_shift(images, max_shift, fill, generator))
    return images


def shift_loop_slicing(images, max_shift, fill, generator):
    dy, dx = _offsets(len(images), max_shift, generator)
    return _crop(images, dy, dx, max_shift, fill)


def shift_paste_into_full(images, max_shift, fill, generator):
    n, _, h, w = images.shape
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    out = torch.full_like(images, fill)
    for i in range(n):
        y, x = int(dy[i]), int(dx[i])
        out[i, :, max(y, 0):h + min(y, 0), max(x, 0):w + min(x, 0)] = \
            images[i, :, max(-y, 0):h + min(-y, 0), max(-x, 0):w + min(-x, 0)]
    return out


def shift_pad_then_unfold_like(images, max_shift, fill, generator):
    dy, dx = _offsets(len(images), max_shift, generator)
    padded = torch.nn.functional.pad(images, [max_shift] * 4, mode="constant", value=fill)
    h, w = images.shape[-2:]
    return torch.stack([padded[i].narrow(1, max_shift - int(y), h).narrow(2, max_shift - int(x), w)
                        for i, (y, x) in enumerate(zip(dy, dx))])


def shift_pairs(images, max_shift, fill, generator):
    offsets = torch.randint(-max_shift, max_shift + 1, (len(images), 2), generator=generator)
    return _crop(images, offsets[:, 0], offsets[:, 1], max_shift, fill)


def shift_per_image_dx_first(images, max_shift, fill, generator):
    out = []
    for image in images:
        dx = int(torch.randint(-max_shift, max_shift + 1, (), generator=generator))
        dy = int(torch.randint(-max_shift, max_shift + 1, (), generator=generator))
        out.append(_crop(image[None], torch.tensor([dy]), torch.tensor([dx]), max_shift, fill)[0])
    return torch.stack(out)


def shift_random_window(images, max_shift, fill, generator):
    """A random crop of the framed image: the window's corner is drawn, and the image moves by max_shift - corner.

    Its moves are exactly the negatives of two draws of n with dy first, bit for bit the same function as an
    answer that cuts its window at max_shift + dy: no check of the output can tell the two apart. The task
    therefore fixes the sign (the offsets are the numbers drawn, a drawn dy of 2 moves the image down), and
    this answer, which draws the corner instead, fails with the reversed one.
    """
    n, _, h, w = images.shape
    top = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator)
    left = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator)
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    return torch.stack([padded[i, :, t:t + h, l:l + w] for i, (t, l) in enumerate(zip(top.tolist(), left.tolist()))])


def shift_paste_rows_upward(images, max_shift, fill, generator):
    """Pastes each image at row -dy instead of +dy: a positive dy moves it up (the columns go the right way)."""
    n, _, h, w = images.shape
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    out = torch.full_like(images, fill)
    for i in range(n):
        y, x = -int(dy[i]), int(dx[i])
        out[i, :, max(y, 0):h + min(y, 0), max(x, 0):w + min(x, 0)] = \
            images[i, :, max(-y, 0):h + min(-y, 0), max(-x, 0):w + min(-x, 0)]
    return out


def shift_window_end_from_frame(images, max_shift, fill, generator):
    """Ends each window at top - 2 * max_shift, counted from the frame's far edge: empty when that is 0."""
    n = len(images)
    offsets = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator).tolist()
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    windows = []
    for i, (dy, dx) in enumerate(offsets):
        top, left = max_shift - dy, max_shift - dx
        windows.append(padded[i, :, top:top - 2 * max_shift, left:left - 2 * max_shift])
    return torch.stack(windows)


def shift_dx_batch_first(images, max_shift, fill, generator):
    n = len(images)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    return _crop(images, dy, dx, max_shift, fill)


def shift_own_offsets_from_rand(images, max_shift, fill, generator):
    """Offsets by rounding uniform floats: another valid way of drawing, matched by no usual way."""
    n = len(images)
    u = torch.rand(n, 2, generator=generator) * (2 * max_shift + 1)
    offsets = u.floor().long().clamp(max=2 * max_shift) - max_shift
    return _crop(images, offsets[:, 0], offsets[:, 1], max_shift, fill)


# ---------------------------------------------------------------- accuracy_on


def accuracy_without_eval(model, dataset, batch_size=500):
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(dataset)


def accuracy_with_gradients(model, dataset, batch_size=500):
    model.eval()
    correct = 0
    for images, labels in DataLoader(dataset, batch_size=batch_size):
        correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(dataset)


def accuracy_mean_of_batches(model, dataset, batch_size=500):
    model.eval()
    scores = []
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            scores.append((model(images).argmax(dim=1) == labels).float().mean().item())
    return sum(scores) / len(scores)


def accuracy_as_tensor(model, dataset, batch_size=500):
    return torch.tensor(ref.accuracy_on(model, dataset, batch_size))


def accuracy_count(model, dataset, batch_size=500):
    return round(ref.accuracy_on(model, dataset, batch_size) * len(dataset))


def accuracy_restores_mode(model, dataset, batch_size=500):
    was_training = model.training
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += int((model(images).argmax(1) == labels).sum())
    model.train(was_training)
    return correct / len(dataset)


def accuracy_inference_mode_slices(model, dataset, batch_size=500):
    model.eval()
    predictions, targets = [], []
    with torch.inference_mode():
        for start in range(0, len(dataset), batch_size):
            batch = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
            predictions.append(model(torch.stack([x for x, _ in batch])).argmax(dim=-1))
            targets.append(torch.stack([y for _, y in batch]))
    return torch.cat(predictions).eq(torch.cat(targets)).float().mean().item()


def accuracy_keyword_loader(model, dataset, batch_size=500):
    model.train(mode=False)
    loader = DataLoader(dataset=dataset, batch_size=batch_size, shuffle=False)
    total = hits = 0
    with torch.no_grad():
        for images, labels in loader:
            hits += (torch.max(model(images), 1).indices == labels).sum().item()
            total += len(labels)
    print(f"{hits} of {total}")
    return hits / total


def accuracy_train_mode_after_eval(model, dataset, batch_size=500):
    model.eval()
    model.train()  # the mode restored before predicting, not after
    return accuracy_without_eval(model, dataset, batch_size)


def accuracy_top_level_flag_only(model, dataset, batch_size=500):
    model.training = False  # only the top-level flag: batch norm inside still uses batch statistics
    return accuracy_without_eval(model, dataset, batch_size)


def accuracy_train_mode_in_finally(model, dataset, batch_size=500):
    try:
        model.eval()
        return accuracy_keyword_loader(model, dataset, batch_size)
    finally:
        model.train(True)  # "back to training": but the model may have come in eval mode


def accuracy_keepdim_table(model, dataset, batch_size=500):
    model.eval()
    hits = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            predicted = model(images).max(dim=1, keepdim=True).indices  # [B, 1]
            hits += int(predicted.eq(labels).sum())  # against [B]: a [B, B] table
    return hits / len(dataset)


def accuracy_per_batch_count(model, dataset, batch_size=500):
    model.eval()
    correct, batches = 0, 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
            batches += 1
    return correct / batches  # the number of batches, not of images


def accuracy_counts_full_batches(model, dataset, batch_size=500):
    """Counts every batch as batch_size samples: the last, shorter one too."""
    model.eval()
    correct = seen = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += int((model(images).argmax(dim=1) == labels).sum())
            seen += batch_size
    return correct / seen


def accuracy_keepdim_then_squeeze(model, dataset, batch_size=500):
    model.eval()
    hits = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            hits += (model(images).argmax(dim=1, keepdim=True) == labels.view(-1, 1)).sum().item()
    return hits / len(dataset)


def accuracy_fixed_batch(model, dataset, batch_size=500):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=512):  # the argument is never used
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(dataset)


def accuracy_item_by_item(model, dataset, batch_size=500):
    """Predicts one image per forward pass: batch_size is never used."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(len(dataset)):
            image, label = dataset[i]
            correct += int(model(image.unsqueeze(0)).argmax(dim=1).item() == int(label))
    return correct / len(dataset)


def accuracy_loader_default_batches(model, dataset, batch_size=500):
    model.eval()
    loader = DataLoader(dataset, shuffle=False)  # batch_size left at its default
    with torch.no_grad():
        hits = sum(int((model(x).argmax(1) == y).sum()) for x, y in loader)
    return hits / len(dataset)


def accuracy_drop_last_over_dataset(model, dataset, batch_size=500):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size, drop_last=True):
            correct += int(model(images).argmax(dim=1).eq(labels).sum())
    return correct / len(dataset)


def accuracy_floor_division(model, dataset, batch_size=500):
    # Wrong: // drops the fraction
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += int(model(images).argmax(dim=1).eq(labels).sum())
    return correct // len(dataset)


def accuracy_full_slices_only(model, dataset, batch_size=500):
    """Slices only the batches that are full: the last, shorter one is skipped."""
    model.eval()
    x, y = dataset.tensors
    hits = 0
    with torch.no_grad():
        for start in range(0, len(y) - batch_size + 1, batch_size):
            hits += int((model(x[start:start + batch_size]).argmax(1) == y[start:start + batch_size]).sum())
    return hits / len(y)


def accuracy_max_over_batch(model, dataset, batch_size=500):
    model.eval()
    hits = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            hits += (model(images).max(0).indices == labels).sum().item()  # the max over the images
    return hits / len(dataset)


def accuracy_scores_twice(model, dataset, batch_size=500):
    """Correct, if wasteful: each batch goes through the model twice."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            assert model(images).shape == (len(images), 10)
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(dataset)


def accuracy_calls_forward(model, dataset, batch_size=500):
    """Correct: model.forward(x) instead of model(x) (it skips the module's hooks, which no check may rely on)."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            correct += int((model.forward(images).argmax(dim=1) == labels).sum())
    return correct / len(dataset)


def check_accuracy_hidden_cases(fn):
    """The graded cell's hidden cases, a batch of as many images as there are classes among them."""
    checks.check_accuracy_on(fn, inputs=[(777, 256, 5), (40, 10, 8), (10, 3, 6), (1, 500, 7)])


def check_accuracy_last_batch_of_one(fn):
    """The hidden case of 10 images in batches of 3: the last batch holds 1 image, as every batch of a loop does."""
    checks.check_accuracy_on(fn, inputs=[(10, 3, 6)])


def check_accuracy_batches_of_ten(fn):
    """The hidden case whose batches hold as many images as there are classes."""
    checks.check_accuracy_on(fn, inputs=[(40, 10, 8)])


def accuracy_split_batches(model, dataset, batch_size=500):
    """Another correct way: one stacked tensor cut with torch.split."""
    was_training = model.training
    model.eval()
    images, labels = ref.stack_dataset(dataset, batch_size)
    with torch.inference_mode():
        correct = sum(int((model(x).argmax(-1) == y).sum())
                      for x, y in zip(images.split(batch_size), labels.split(batch_size)))
    model.train(was_training)
    return float(correct / len(labels))


# ---------------------------------------------------------------- build_model

_SHARED = ref.build_model()


def model_class():
    class Net(nn.Sequential):
        def __init__(self):
            super().__init__(*ref.build_model())

    return Net


def model_shared():
    return _SHARED


def model_with_softmax():
    return nn.Sequential(ref.build_model(), nn.Softmax(dim=1))


def model_with_log_softmax():
    return nn.Sequential(ref.build_model(), nn.LogSoftmax(dim=1))


def model_double():
    return ref.build_model().double()


class _LogSoftmaxNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = ref.build_model()

    def forward(self, x):
        return F.log_softmax(self.body(x), dim=1)


def model_for_flat_images():
    return nn.Sequential(nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def model_subclass():
    return _Net()


def model_flatten_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))



def model_unflattened_head():
    return nn.Sequential(nn.Conv2d(1, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Conv2d(16, 10, 1))

def model_avgpool_with_print():
    model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10))
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    return model


def model_one_score():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1))


def model_seeded_inside():
    torch.manual_seed(1234)  # "reproducible": but it resets the caller's generator on every call
    return model_subclass()


def model_same_weights_every_call():
    with torch.random.fork_rng():  # the caller's generator is left alone, but every call starts the same
        torch.manual_seed(0)
        return ref.build_model()


# ---------------------------------------------------------------- build_and_train


def _linear(train_set, epochs=1):
    """A linear classifier, one epoch: about 88% of the digits. (The grader seeds before it calls.)"""
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(epochs):
        for images, labels in DataLoader(train_set, batch_size=64, shuffle=True):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    return model


def gradients_pile_up(train_set, time_budget_s):
    """Never zeroes the gradients: every step follows the sum of all the gradients so far."""
    images, labels = ref.stack_dataset(train_set)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    order = torch.randperm(len(labels))
    for first in range(0, len(labels), 100):
        batch = order[first:first + 100]
        F.cross_entropy(model(images[batch]), labels[batch]).backward()
        optimizer.step()
    return model


def returns_model_and_history(train_set, time_budget_s):
    return _linear(train_set), [0.5, 0.3]


def returns_state_dict(train_set, time_budget_s):
    return _linear(train_set).state_dict()


def forgets_return(train_set, time_budget_s):
    _linear(train_set)


def reads_mnist_attributes(train_set, time_budget_s):
    images = train_set.data.float()  # a Subset has no .data: only the full MNIST object does
    return nn.Linear(images.shape[1], 10)


def trains_on_flat_images(train_set, time_budget_s):
    return nn.Sequential(nn.Linear(28 * 28, 10))


def diverges(train_set, time_budget_s):
    model = ref.build_model()
    with torch.no_grad():
        model[-1].weight.fill_(float("nan"))  # what a far too large learning rate leaves behind
    return model


def changes_threads(train_set, time_budget_s):
    torch.set_num_threads(2)
    return ref.build_model()


def untrained(train_set, time_budget_s):
    return ref.build_model()


def linear_one_epoch(train_set, time_budget_s):
    return _linear(train_set)


def crashes_on_labels(train_set, time_budget_s):
    model = ref.build_model()
    images, labels = ref.stack_dataset(train_set)
    F.cross_entropy(model(images[:8]), labels[:8].float()).backward()  # float class indices
    return model


def quick_subclass(train_set, time_budget_s):
    return _linear(train_set).eval()


def quick_with_prints(train_set, time_budget_s):
    model = _linear(train_set)
    print(f"trained on {len(train_set)} digits, budget {time_budget_s:.0f} s")
    return model


def quick_dataloader_workers(train_set, time_budget_s):
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=1,
                        generator=torch.Generator().manual_seed(0))
    for images, labels in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
    return model


def trains_on_held_out_digits(train_set, time_budget_s):
    from torch.utils.data import ConcatDataset
    from torchvision import datasets

    from helpers.data import data_root

    test = datasets.MNIST(root=str(data_root()), train=False, transform=checks.mnist_transform())
    return _linear(ConcatDataset([train_set, test]))


def reloads_training_split(train_set, time_budget_s):
    """Trains on as many digits as it is given, but taken from MNIST's training split opened again."""
    from helpers.data import mnist_dataset

    digits = mnist_dataset(train=True, transform=checks.mnist_transform())
    return _linear(Subset(digits, range(len(train_set))))


def trains_reseeded_from_the_clock(train_set, time_budget_s):
    import time

    torch.manual_seed(int(time.time()))  # "a fresh start": it throws away the grader's seed
    return _linear(train_set)


def peeks_at_held_out_labels(train_set, time_budget_s):
    from helpers.data import data_root, read_idx

    labels = read_idx(data_root() / "MNIST" / "raw" / "t10k-labels-idx1-ubyte")  # "just to see the classes"
    model = _linear(train_set)
    print(f"{len(set(labels.tolist()))} classes")
    return model


class _AlwaysDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(28 * 28, 10)

    def forward(self, x):
        return self.linear(F.dropout(x.flatten(1), 0.3))  # no training=self.training: on in eval mode too


def dropout_in_eval_mode(train_set, time_budget_s):
    model = _AlwaysDropout()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for images, labels in DataLoader(train_set, batch_size=64, shuffle=True):
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
    return model


def reference_seed_1(train_set, time_budget_s):
    return ref.build_and_train(train_set, time_budget_s, seed=1)


def reference_in_eval_mode_with_prints(train_set, time_budget_s):
    model = ref.build_and_train(train_set, time_budget_s)
    print(f"done with {time_budget_s} s budget")
    return model.eval()


def reference_seed_2(train_set, time_budget_s):
    return ref.build_and_train(train_set, time_budget_s=time_budget_s, seed=2)


def check_split_hidden_cases(fn):
    """The hidden test's cases, and one more: one validation item of 11, which any random split may put last."""
    checks.check_make_validation_split(fn, inputs=[(100, 30, 7), (11, 1, 12), (11, 1, 3)])


CASES = [
    Accept(checks.check_make_validation_split, ref.make_validation_split),
    Accept(checks.check_make_validation_split, split_randperm_subset),
    Accept(checks.check_make_validation_split, split_validation_first),
    Accept(checks.check_make_validation_split, split_sorted_with_python_random),
    Accept(checks.check_make_validation_split, split_fractions),
    *[Accept(check_split_hidden_cases, answer)
      for answer in (split_randperm_subset, split_validation_first, split_sorted_with_python_random)],
    Reject(check_split_hidden_cases, split_last_items, "the validation part is the last 20 items"),
    Reject(check_split_hidden_cases, split_swapped, "the parts are swapped"),
    Reject(checks.check_make_validation_split, split_without_generator, "used the global random generator of torch"),
    Reject(checks.check_make_validation_split, split_global_randperm, "used the global random generator of torch"),
    Reject(checks.check_make_validation_split, split_with_global_seed, "reset a global random generator (torch.manual_seed(0))"),
    Reject(checks.check_make_validation_split, split_last_items, "the validation part is the last 20 items"),
    Reject(checks.check_make_validation_split, split_first_items, "the validation part is the first 20 items"),
    Reject(checks.check_make_validation_split, split_contiguous_by_seed, "a run of consecutive"),
    Reject(checks.check_make_validation_split, split_swapped, "the parts are swapped"),
    Reject(checks.check_make_validation_split, split_ignoring_seed, "the split ignores its seed"),
    Reject(checks.check_make_validation_split, split_overlapping, "are in both parts"),
    Reject(checks.check_make_validation_split, split_val_with_replacement, "drawn with replacement"),

    Accept(checks.check_stack_dataset, ref.stack_dataset),
    Accept(checks.check_stack_dataset, stack_by_index),
    Accept(checks.check_stack_dataset, stack_one_batch),
    Accept(checks.check_stack_dataset, stack_small_batches),
    Reject(checks.check_stack_dataset, stack_labels_as_list, "the labels are a list of"),
    Reject(checks.check_stack_dataset, stack_shuffled, "in another order"),
    Reject(checks.check_stack_dataset, stack_float_labels, "should have dtype torch.int64"),
    Reject(checks.check_stack_dataset, stack_without_channel, "the channel dimension (size 1) is gone"),
    Reject(checks.check_stack_dataset, stack_stored_pixels, "the dataset's stored pixels (.data) converted by hand"),
    Reject(checks.check_stack_dataset, stack_full_batches_only, "drop_last=True (here batch_size=100)"),
    Reject(checks.check_stack_dataset, stack_batches_side_by_side, "torch.cat joins them"),

    Accept(checks.check_random_shift, ref.random_shift),
    Accept(checks.check_random_shift, shift_loop_slicing),
    Accept(checks.check_random_shift, shift_paste_into_full),
    Accept(checks.check_random_shift, shift_pad_then_unfold_like),
    Accept(checks.check_random_shift, shift_pairs),
    Accept(checks.check_random_shift, shift_per_image_dx_first),
    Accept(checks.check_random_shift, shift_own_offsets_from_rand),
    Accept(checks.check_random_shift, shift_dx_batch_first),
    Reject(checks.check_random_shift, shift_random_window, "each image moved the opposite way (up for a positive dy "
           "and left for a positive dx)"),
    Reject(checks.check_random_shift, shift_paste_rows_upward, "moved the opposite way (up for a positive dy)"),
    Reject(checks.check_random_shift, shift_window_end_from_frame, "a window came out empty"),
    Reject(checks.check_random_shift, shift_with_roll, "torch.roll wraps around"),
    Reject(checks.check_random_shift, shift_zero_fill, "the uncovered border is 0"),
    Reject(checks.check_random_shift, shift_whole_batch, "every image moved by the same offset"),
    Reject(checks.check_random_shift, shift_exclusive_high, "`high` is exclusive"),
    Reject(checks.check_random_shift, shift_global_random, "used the global random generator of torch"),
    Reject(checks.check_random_shift, shift_diagonal, "always equal"),
    Reject(checks.check_random_shift, shift_in_place, "its values were overwritten"),

    Accept(checks.check_accuracy_on, ref.accuracy_on),
    Accept(checks.check_accuracy_on, accuracy_restores_mode),
    Accept(checks.check_accuracy_on, accuracy_inference_mode_slices),
    Accept(checks.check_accuracy_on, accuracy_keyword_loader),
    Accept(checks.check_accuracy_on, accuracy_keepdim_then_squeeze),
    Reject(checks.check_accuracy_on, accuracy_keepdim_table, "broadcast to a [B, B] table"),
    Reject(checks.check_accuracy_on, accuracy_per_batch_count, "divided by the number of batches"),
    Reject(checks.check_accuracy_on, accuracy_counts_full_batches, "counts the last, shorter batch as full"),
    Reject(checks.check_accuracy_on, accuracy_without_eval, "call model.eval()"),
    Reject(checks.check_accuracy_on, accuracy_train_mode_after_eval, "call model.eval()"),
    Reject(checks.check_accuracy_on, accuracy_top_level_flag_only, "in training mode"),
    Reject(checks.check_accuracy_on, accuracy_with_gradients, "torch.no_grad()"),
    Reject(checks.check_accuracy_on, accuracy_mean_of_batches, "mean of the per-batch accuracies"),
    Reject(checks.check_accuracy_on, accuracy_as_tensor, "should be a Python number"),
    Reject(checks.check_accuracy_on, accuracy_count, "number of correct predictions"),
    Reject(checks.check_accuracy_on, accuracy_train_mode_in_finally, "it came in eval mode"),
    Reject(checks.check_accuracy_on, accuracy_fixed_batch, "512 images in one forward pass, more than batch_size=500"),
    Accept(checks.check_accuracy_on, accuracy_split_batches),
    Accept(checks.check_accuracy_on, accuracy_calls_forward),
    *[Accept(check, answer)
      for check in (check_accuracy_hidden_cases, check_accuracy_last_batch_of_one, check_accuracy_batches_of_ten)
      for answer in (ref.accuracy_on, accuracy_scores_twice, accuracy_split_batches, accuracy_restores_mode)],
    Reject(check_accuracy_hidden_cases, accuracy_drop_last_over_dataset, "never saw the last 9 of the 777 images"),
    Reject(check_accuracy_hidden_cases, accuracy_max_over_batch, "argmax over dim 0 picks"),
    Reject(check_accuracy_last_batch_of_one, accuracy_item_by_item, "where batch_size=3 asks for 3 at a time"),
    Reject(check_accuracy_last_batch_of_one, accuracy_max_over_batch, "argmax over dim 0 picks"),
    Reject(check_accuracy_batches_of_ten, accuracy_item_by_item, "where batch_size=10 asks for 10 at a time"),
    Reject(checks.check_accuracy_on, accuracy_item_by_item, "where batch_size=500 asks for 500 at a time"),
    Reject(checks.check_accuracy_on, accuracy_loader_default_batches, "gives batches of 1 (its default)"),
    Reject(checks.check_accuracy_on, accuracy_drop_last_over_dataset, "drop_last=True (here batch_size=500)"),
    Reject(checks.check_accuracy_on, accuracy_floor_division, "an integer division (//)"),
    Reject(checks.check_accuracy_on, accuracy_full_slices_only, "never saw the last 30 of the 1030 images"),
    Reject(checks.check_accuracy_on, accuracy_max_over_batch, "argmax over dim 0 picks"),
    Reject(check_accuracy_batches_of_ten, accuracy_max_over_batch, "argmax over dim 0 picks"),

    Accept(checks.check_build_model, ref.build_model),
    Accept(checks.check_build_model, model_subclass),
    Accept(checks.check_build_model, model_flatten_mlp),
    Accept(checks.check_build_model, model_avgpool_with_print),
    Reject(checks.check_build_model, model_one_score, "but returned shape [5, 1]"),
    Reject(checks.check_build_model, model_unflattened_head, "the scores still carry their 1x1 maps"),
    Reject(checks.check_build_model, model_class, "returned the class"),
    Reject(checks.check_build_model, model_shared, "returns the same model"),
    Reject(checks.check_build_model, model_with_softmax, "ends with a softmax"),
    Reject(checks.check_build_model, model_with_log_softmax, "ends with a log-softmax"),
    Reject(checks.check_build_model, _LogSoftmaxNet, "are log-probabilities"),
    Reject(checks.check_build_model, model_double, "Keep the model in float32"),
    Reject(checks.check_build_model, model_seeded_inside, "in the same state whatever state it found"),
    Reject(checks.check_build_model, model_same_weights_every_call, "the same initial weights in two calls"),
    Reject(checks.check_build_model, model_for_flat_images, "received the 4-D feature maps (shape [5, 1, 28, 28]) unflattened"),

    Accept(checks.check_build_and_train, ref.build_and_train),
    Accept(checks.check_build_and_train, quick_subclass),
    Accept(checks.check_build_and_train, quick_with_prints),
    Accept(checks.check_build_and_train, quick_dataloader_workers),
    Reject(checks.check_build_and_train, returns_model_and_history, "returned a tuple (it holds a Sequential"),
    Reject(checks.check_build_and_train, returns_state_dict, "returned a dict"),
    Reject(checks.check_build_and_train, forgets_return, "returned None"),
    Reject(checks.check_build_and_train, reads_mnist_attributes, "raised AttributeError"),
    Reject(checks.check_build_and_train, trains_on_flat_images, "model(x) for x of shape [16, 1, 28, 28] raised"),
    Reject(checks.check_build_and_train, diverges, "scores contain nan or inf"),
    Reject(checks.check_build_and_train, peeks_at_held_out_labels, "opened t10k-labels-idx1-ubyte while it trained"),
    Reject(checks.check_build_and_train, reloads_training_split, "a file of MNIST's training split"),
    Reject(checks.check_build_and_train, trains_reseeded_from_the_clock,
           "reset a global random generator (torch.manual_seed("),

    Accept(checks.check_within_budget, ref.build_and_train),
    Accept(checks.check_within_budget, reference_seed_1),
    Accept(checks.check_within_budget, reference_in_eval_mode_with_prints),
    Accept(checks.check_within_budget, reference_seed_2),
    Reject(checks.check_within_budget, changes_threads, "changed PyTorch's number of threads to 2"),
    Reject(checks.check_within_budget, crashes_on_labels, "raised RuntimeError"),
    Reject(checks.check_within_budget, returns_model_and_history, "returned a tuple"),
    Reject(checks.check_within_budget, trains_on_held_out_digits, "opened t10k-images-idx3-ubyte while it trained"),

    Accept(checks.check_held_out_97, ref.build_and_train),
    *[Accept(checks.check_held_out_97, answer)
      for answer in (reference_seed_1, reference_in_eval_mode_with_prints, reference_seed_2)],
    Reject(checks.check_held_out_97, untrained, "is below 97.0%"),
    Reject(checks.check_held_out_97, linear_one_epoch, "is below 97.0%"),
    Reject(checks.check_held_out_97, crashes_on_labels, "no model to grade"),
    Reject(checks.check_held_out_97, dropout_in_eval_mode, "in two calls after model.eval()"),
    Reject(checks.check_held_out_97, trains_on_held_out_digits, "a file of MNIST's test split"),
    Reject(checks.check_held_out_97, gradients_pile_up, "optimizer.zero_grad() before each backward"),
    Accept(checks.check_held_out_98, ref.build_and_train),
    *[Accept(checks.check_held_out_98, answer)
      for answer in (reference_seed_1, reference_in_eval_mode_with_prints, reference_seed_2)],
    Reject(checks.check_held_out_98, untrained, "is below 98.0%"),
    Reject(checks.check_held_out_98, linear_one_epoch, "is below 98.0%"),
    Accept(checks.check_held_out_98_5, ref.build_and_train),
    *[Accept(checks.check_held_out_98_5, answer)
      for answer in (reference_seed_1, reference_in_eval_mode_with_prints, reference_seed_2)],
    Reject(checks.check_held_out_98_5, linear_one_epoch, "is below 98.5%"),
    Reject(checks.check_held_out_98_5, changes_threads, "no model to grade"),
    Accept(checks.check_held_out_99, ref.build_and_train),
    *[Accept(checks.check_held_out_99, answer)
      for answer in (reference_seed_1, reference_in_eval_mode_with_prints, reference_seed_2)],
    Reject(checks.check_held_out_99, linear_one_epoch, "is below 99.0%"),
    Reject(checks.check_held_out_99, forgets_return, "no model to grade"),
]


# ---------------------------------------------------------------- round 5: a learner who never read the checks


def split_returns_indices(dataset, val_size, seed):
    # the shuffled indices themselves, never turned into datasets
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    return order[val_size:], order[:val_size]


def split_lists_of_items(dataset, val_size, seed):
    # also correct: plain lists of the dataset's items are map-style datasets too
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return [dataset[i] for i in order[val_size:]], [dataset[i] for i in order[:val_size]]


def stack_labels_of_the_whole(dataset):
    # images from the items, labels from the dataset a Subset was cut from, ignoring the Subset's indices
    images = torch.stack([dataset[i][0] for i in range(len(dataset))])
    whole = dataset.dataset if isinstance(dataset, Subset) else dataset
    return images, torch.as_tensor(whole.targets)[:len(dataset)]


def stack_targets_attribute(dataset):
    # labels read from .targets: right for the whole dataset, not for a Subset (which has none)
    images = torch.stack([dataset[i][0] for i in range(len(dataset))])
    return images, torch.as_tensor(dataset.targets)


def shift_by_grid_sample(images, max_shift, fill, generator):
    # also correct: nearest-neighbour resampling by whole pixels; (x - fill) + fill may change the last bit
    n, _, h, w = images.shape
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=generator)
    theta = torch.zeros(n, 2, 3, dtype=images.dtype)
    theta[:, 0, 0] = 1
    theta[:, 1, 1] = 1
    theta[:, 0, 2] = -2 * dx.to(images.dtype) / w
    theta[:, 1, 2] = -2 * dy.to(images.dtype) / h
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    moved = F.grid_sample(images - fill, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return moved + fill


CASES += [
    Reject(checks.check_make_validation_split, split_returns_indices, "wrap the indices in Subset(dataset, indices)"),
    Accept(checks.check_make_validation_split, split_lists_of_items),
    Reject(checks.check_stack_dataset, stack_labels_of_the_whole, "the labels are the first ones of the dataset the "
           "Subset was cut from"),
    Reject(checks.check_stack_dataset, stack_targets_attribute, "'Subset' object has no attribute 'targets'"),
    Accept(checks.check_random_shift, shift_by_grid_sample),
]


# ---------------------------------------------------------------- from a learner tester: the contract run


class _SqueezedHead(nn.Module):
    """Wrong for a batch of one: squeeze() drops the batch dimension too, so one image gives [10], not [1, 10]."""

    def __init__(self):
        super().__init__()
        self.features = nn.Conv2d(1, 8, 28)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.features(x).squeeze())


def squeezes_the_batch_of_one(train_set, time_budget_s):
    return _SqueezedHead()


def _notebook_train_part():
    """The notebook's own training digits, already in memory (as a variable of the notebook would be)."""
    images, labels = ref.stack_dataset(Subset(checks.training_split(), range(2000)))
    return images, labels


_NOTEBOOK_DIGITS = _notebook_train_part()


def trains_on_the_notebooks_digits(train_set, time_budget_s):
    """Wrong: "trains it on train_set"; this trains on digits the notebook holds (its train_part), not the argument."""
    images, labels = _NOTEBOOK_DIGITS
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        for start in range(0, len(images), 64):
            optimizer.zero_grad()
            F.cross_entropy(model(images[start:start + 64]), labels[start:start + 64]).backward()
            optimizer.step()
    return model


def shift_square_only(images, max_shift, fill, generator):
    """Wrong: "for a [N, C, H, W] batch"; this crops square windows of H x H."""
    n, c, size, _ = images.shape
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    offsets = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator)
    out = torch.empty_like(images)
    for i, (dy, dx) in enumerate(offsets.tolist()):
        top, left = max_shift - dy, max_shift - dx
        out[i] = padded[i, :, top:top + size, left:left + size]
    return out


def shift_by_offsets_any_shape(images, max_shift, fill, generator):
    """Correct: the same method on any H and W."""
    n, c, h, w = images.shape
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    offsets = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator)
    out = torch.empty_like(images)
    for i, (dy, dx) in enumerate(offsets.tolist()):
        top, left = max_shift - dy, max_shift - dx
        out[i] = padded[i, :, top:top + h, left:left + w]
    return out


def shift_first_channel_only(images, max_shift, fill, generator):
    """Wrong: only channel 0 is moved; the other channels stay `fill`."""
    n, c, h, w = images.shape
    padded = F.pad(images, (max_shift,) * 4, value=fill)
    offsets = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator)
    out = torch.full_like(images, fill)
    for i, (dy, dx) in enumerate(offsets.tolist()):
        top, left = max_shift - dy, max_shift - dx
        out[i, 0] = padded[i, 0, top:top + h, left:left + w]
    return out


CASES += [
    Reject(checks.check_random_shift, shift_first_channel_only, "the channels did not move together"),
    Reject(checks.check_build_and_train, squeezes_the_batch_of_one, "a squeeze() without a dim (anywhere in forward)"),
    Reject(checks.check_build_and_train, trains_on_the_notebooks_digits, "it learnt from other digits than the "
                                                                         "train_set it was given"),
    Reject(checks.check_random_shift, shift_square_only, "raised"),
    Accept(checks.check_random_shift, shift_by_offsets_any_shape),
]



# From a third learner tester (lesson 10): a build_and_train that walks up from its train_set to the dataset it was
# cut from passed every cell (it trained on the grader's validation digits too).
def quick_peeks_at_parent(train_set, time_budget_s):
    everything = train_set.dataset if isinstance(train_set, Subset) else train_set
    return _linear(everything)


def quick_reads_own_indices_of_parent(train_set, time_budget_s):
    # the parent read only at the train_set's own indices: the same digits, so allowed
    return _linear(Subset(train_set.dataset, train_set.indices))


CASES += [
    Reject(checks.check_build_and_train, quick_peeks_at_parent, "not in the train_set it was given"),
    Accept(checks.check_build_and_train, quick_reads_own_indices_of_parent),
]


def stack_by_cat_of_items(dataset):
    # torch.cat of single [1, 28, 28] images: joined along the channel dimension
    pairs = [dataset[i] for i in range(len(dataset))]
    return torch.cat([image for image, _ in pairs]), torch.tensor([label for _, label in pairs])


CASES += [
    Reject(checks.check_stack_dataset, stack_by_cat_of_items, "torch.cat of the single [1, 28, 28] images"),
]


def stack_labels_wrapped(dataset):
    # each label wrapped in a list of its own: labels of shape [N, 1]
    images = torch.stack([dataset[i][0] for i in range(len(dataset))])
    labels = torch.tensor([[dataset[i][1]] for i in range(len(dataset))])
    return images, labels


def stack_batches_of_one(dataset):
    # batches of one item: the images joined right, the labels stacked side by side into [N, 1]
    images, labels = zip(*DataLoader(dataset, batch_size=1))
    return torch.cat(images), torch.stack(labels)


CASES += [
    Reject(checks.check_stack_dataset, stack_labels_wrapped, "each label sits in a row of its own"),
    Reject(checks.check_stack_dataset, stack_batches_of_one, "torch.cat joins them"),
]


def split_seed_mod_two(dataset, val_size, seed):
    # seeds 0 and 2 give the same generator
    g = torch.Generator().manual_seed(seed % 2)
    return tuple(random_split(dataset, [len(dataset) - val_size, val_size], generator=g))


def accuracy_children_flags(model, dataset, batch_size):
    # only the direct children's flags set: a nested dropout still drops
    for child in model.children():
        child.training = False
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(dataset, batch_size=batch_size):
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(dataset)


def accuracy_in_float64(model, dataset, batch_size):
    # the caller's model converted to float64 for precision
    model.eval().double()
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(dataset, batch_size=batch_size):
            correct += (model(x.double()).argmax(1) == y).sum().item()
    return correct / len(dataset)


CASES += [
    Reject(checks.check_make_validation_split, split_seed_mod_two, "for seeds 0 and 2"),
    Reject(checks.check_accuracy_on, accuracy_children_flags, "in training mode"),
    Reject(checks.check_accuracy_on, accuracy_in_float64, "(from torch.float32 to torch.float64)"),
]


# From a fourth learner tester: the raw tensors of the dataset at the top of the chain, read directly
def quick_reads_raw_tensors_of_parent(train_set, time_budget_s):
    base = train_set
    while not hasattr(base, "data"):
        base = base.dataset
    images = ((base.data[:8000].float() / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
    labels = torch.as_tensor(base.targets[:8000]).long()
    return _linear(torch.utils.data.TensorDataset(images, labels))


CASES += [
    Reject(checks.check_build_and_train, quick_reads_raw_tensors_of_parent, "read train_set.dataset's .data directly"),
]


# From a fourth learner tester: build_model mistakes the contract's shapes did not show
class _ListedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def model_layers_in_a_list():
    return _ListedLayers()


class _FunctionalDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(F.dropout(self.features(x), 0.3))


def model_functional_dropout():
    return _FunctionalDropout()


class _NormMadeInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.head = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.head(nn.BatchNorm2d(8)(self.conv(x)))


def model_norm_made_in_forward():
    return _NormMadeInForward()


def model_relu_at_the_end():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 10), nn.ReLU())


def model_fixed_seed_init():
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    g = torch.Generator().manual_seed(42)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def model_zero_init_head():
    # a constant start for the last layer is a design choice, not a fixed seed
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    nn.init.zeros_(model[-1].weight)
    return model


CASES += [
    Reject(checks.check_build_model, model_layers_in_a_list, "layers, a list of layers"),
    Reject(checks.check_build_model, model_functional_dropout, "two calls on the same images gave different scores"),
    Reject(checks.check_build_model, model_norm_made_in_forward, "depend on the other images in its batch"),
    Reject(checks.check_build_model, model_relu_at_the_end, "the scores are clipped at 0"),
    Reject(checks.check_build_model, model_fixed_seed_init, "hold the same random-looking values"),
    Accept(checks.check_build_model, model_zero_init_head),
]


def stack_first_big_batch(dataset):
    """One batch of 4096 taken as the whole dataset: right for any dataset up to 4096 items."""
    return next(iter(DataLoader(dataset, batch_size=4096)))


CASES += [
    Reject(checks.check_stack_dataset, stack_first_big_batch, "hold the first 4096 of the 4099 items"),
]


def stack_normalised_again(dataset):
    """Normalises the images once more with MNIST's mean and std: the dataset's items are normalised already."""
    from helpers.data import MNIST_MEAN, MNIST_STD

    images, labels = zip(*DataLoader(dataset, batch_size=256))
    return (torch.cat(images) - MNIST_MEAN) / MNIST_STD, torch.cat(labels)


CASES += [
    Reject(checks.check_stack_dataset, stack_normalised_again, "a scale and a shift that should not be there"),
]


class _NoisyFeatures(_FunctionalDropout):
    """Noise on the features in every mode: random in eval mode, with no dropout to blame."""

    def forward(self, x):
        features = self.features(x)
        return self.head(features + 0.1 * torch.randn_like(features))


def model_noisy_features():
    return _NoisyFeatures()


CASES += [
    Reject(checks.check_build_model, model_noisy_features, "does not switch off (torch.rand, torch.randn...)"),
]
