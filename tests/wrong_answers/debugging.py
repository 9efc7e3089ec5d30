"""Lesson 09 Debugging: the fixed programs pass, written several ways; the broken ones and plausible wrong fixes fail.

A failing check states the symptom first; the named bug comes last on the hint ladder, and ``str(error)``
holds every level, so a Reject may match the symptom or the named mistake.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

from helpers.checks import debugging as checks
from helpers.reference import debugging as ref
from tests.wrong_answers import Accept, Reject

STILL = "still raises the error it was handed out with"
SAME = "the same as the program you were given"

# ---------------------------------------------------------------- predict_digits


def predict_inline(model, images, device):
    """Correct: the move written inside the call."""
    model = model.to(device).eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1).cpu()


def predict_in_batches(model, images, device):
    """Correct: batch by batch under inference_mode, each batch moved."""
    model.to(device)
    model.eval()
    with torch.inference_mode():
        parts = [model(batch.to(device)).argmax(1) for batch in images.split(2)]
    return torch.cat(parts).cpu()


def predict_keyword_device(model, images, device):
    """Correct: keyword arguments, and the images moved first."""
    images = images.to(device=device)
    model.to(device=device).eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).to("cpu")


def predict_parameters_device(model, images, device):
    """The device read back from the moved model's parameters (lesson 05's idiom)."""
    model.eval()
    model.to(device)
    with torch.no_grad():
        predictions = model(images.to(next(model.parameters()).device)).argmax(dim=-1)
    return predictions.cpu()


def predict_device_read_before_move(model, images, device):
    """The parameters' device read before the model moves: the images stay on the CPU."""
    here = next(model.parameters()).device
    model.to(device).eval()
    with torch.no_grad():
        return model(images.to(here)).argmax(dim=1).cpu()


def predict_returns_logits(model, images, device):
    model = model.to(device).eval()
    with torch.no_grad():
        return model(images.to(device)).cpu()


def predict_argmax_dim0(model, images, device):
    model = model.to(device).eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=0).cpu()


def predict_top_logit(model, images, device):
    """Returns the top logit of each image (torch.max's values), not its class."""
    model = model.to(device).eval()
    with torch.no_grad():
        top, _ = torch.max(model(images.to(device)), dim=1)
    return top.cpu()


def predict_moved_twice_discarded(model, images, device):
    """Still throws the copy away, now with non_blocking."""
    model.to(device)
    images.to(device, non_blocking=True)
    model.eval()
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


def predict_no_copy_back(model, images, device):
    """Right predictions, but returned where they were computed (on the device)."""
    model.to(device).eval()
    with torch.no_grad():
        return torch.argmax(model(images.to(device)), dim=1)


def predict_host_only(model, images, device):
    """Makes the device error go away by keeping everything in host memory."""
    model.to("cpu").eval()
    with torch.no_grad():
        return model(images.to("cpu")).argmax(dim=1)


def predict_no_eval(model, images, device):
    """Moves everything, but predicts in training mode (dropout on)."""
    model.to(device)
    with torch.inference_mode():
        return model(images.to(device)).argmax(1).cpu()


def predict_cuda_method(model, images, device):
    """Wrong: .cuda() ignores `device` (right only when the caller's device is the GPU); .to(torch.device) back."""
    model.cuda()
    model.train(False)
    with torch.no_grad():
        logits = model(images.cuda(non_blocking=True))
    return logits.argmax(dim=-1).to(torch.device("cpu"))


# ---------------------------------------------------------------- SmallCNN


class _Designed(nn.Module):
    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = classifier


class LazyCNN(_Designed):
    """Correct: LazyLinear infers in_features on the first batch."""

    def __init__(self):
        super().__init__(nn.LazyLinear(10))

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class ViewCNN(_Designed):
    """Correct: 576 written out, flattened with view."""

    def __init__(self):
        super().__init__(nn.Linear(576, 10))

    def forward(self, images):
        x = self.features(images)
        return self.classifier(x.view(x.size(0), -1))


class TorchFlattenCNN(_Designed):
    """Correct: torch.flatten, and the size computed from a dummy batch."""

    def __init__(self):
        super().__init__(nn.Identity())
        with torch.no_grad():
            size = self.features(torch.zeros(1, 1, 28, 28)).numel()
        self.classifier = nn.Linear(size, 10)

    def forward(self, images):
        return self.classifier(torch.flatten(self.features(images), 1))


class PaddedCNN(nn.Module):
    """Fixed by padding the second convolution instead of resizing the classifier."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(16 * 7 * 7, 10)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class WiderCNN(nn.Module):
    """Runs, but with other layers than designed (32 channels)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 32, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 6 * 6, 10)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class MissingFlattenCNN(ref.SmallCNN):
    def forward(self, images):
        return self.classifier(self.features(images))


class LayerInForwardCNN(ref.SmallCNN):
    """Runs, but builds its classifier anew at every call (issue 18: no 'padding' or 'in_features' blamed)."""

    def forward(self, images):
        x = self.features(images).flatten(1)
        return nn.Linear(x.shape[1], 10)(x)


# ---------------------------------------------------------------- loss_from_table


def table_view_long(logits, label_column):
    """Correct: view(-1), long, minus one."""
    return F.cross_entropy(logits, label_column.view(-1).long() - 1)


def table_column_index(logits, label_column):
    """Correct: the column taken by index, shifted first, converted with .to(torch.int64)."""
    return F.cross_entropy(logits, (label_column[:, 0] - 1).to(torch.int64))


def table_module_loss(logits, label_column):
    """Correct: nn.CrossEntropyLoss, flatten, sub(1)."""
    return nn.CrossEntropyLoss()(logits, label_column.flatten().long().sub(1))


def table_long_only(logits, label_column):
    return F.cross_entropy(logits, label_column.long())


def table_squeeze_only(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1))


def table_int32(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).int() - 1)


def table_not_shifted(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).long())


def table_clamped(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).long().clamp(max=9))


def table_modulo(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).long() % 10)


def table_detached(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).long() - 1).detach()


def table_in_place(logits, label_column):
    """Right loss, but shifts the caller's column in place."""
    label_column -= 1
    return F.cross_entropy(logits, label_column.squeeze(1).long())


# ---------------------------------------------------------------- GatedBlock


class DetachedGate(ref.GatedBlock):
    def forward(self, x):
        h = torch.sigmoid(self.gate(x)).detach()
        h *= self.linear(x)
        return h + x


class AddedNotMultiplied(ref.GatedBlock):
    def forward(self, x):
        h = torch.sigmoid(self.gate(x))
        h = h + self.linear(x)
        return h + x


class GateAsValue(ref.GatedBlock):
    """The gate's layer computes the value too: self.linear is never called (no graph is cut)."""

    def forward(self, x):
        g = self.gate(x)
        return x + torch.sigmoid(g) * g


class AddsIntoInput(ref.GatedBlock):
    """The product made out of place, but the residual added into the caller's x in place."""

    def forward(self, x):
        x.add_(torch.sigmoid(self.gate(x)) * self.linear(x))
        return x


class MulUnderscore(ref.GatedBlock):
    """Still in place: mul_ is the same operation as *=."""

    def forward(self, x):
        h = torch.sigmoid(self.gate(x))
        return h.mul_(self.linear(x)) + x


class ClonedGate(ref.GatedBlock):
    """Correct: the in-place product works on a copy."""

    def forward(self, x):
        h = torch.sigmoid(self.gate(x)).clone()
        h *= self.linear(x)
        return h + x


class OneLineGate(ref.GatedBlock):
    """Correct: one expression, the product written the other way round."""

    def forward(self, x):
        return x + self.linear(x) * torch.sigmoid(self.gate(x))


class AddcmulGate(ref.GatedBlock):
    """Correct: torch.addcmul computes x + a * b out of place."""

    def forward(self, x):
        return torch.addcmul(x, torch.sigmoid(self.gate(x)), self.linear(x))


# ---------------------------------------------------------------- fit


def fit_model_zero_grad(model, loader, epochs, lr):
    """Correct: model.zero_grad() and a list built with +=."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            model.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses += [loss.item()]
    return losses


def fit_zero_after_step(model, loader, epochs, lr):
    """Correct: zeroed after each step (the model arrives without gradients), set_to_none=False."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            losses.append(float(loss))
    return losses


def fit_module_loss(model, loader, epochs, lr):
    """Correct: nn.CrossEntropyLoss, keyword lr, print per epoch."""
    optimizer = torch.optim.SGD(params=model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    model.train()
    losses = []
    for epoch in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: {losses[-1]:.3f}")
    return losses


def fit_logs_tensors(model, loader, epochs, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss)
    return losses


# ---------------------------------------------------------------- accuracy


def accuracy_train_false(model, images, labels):
    """Correct: train(False) is eval(); the share computed with sum / len."""
    model.train(False)
    with torch.no_grad():
        right = (model(images).argmax(1) == labels).sum().item()
    return right / len(labels)


def accuracy_inference_mode(model, images, labels):
    """Correct: eval() and inference_mode, the mean of a float tensor as .item()."""
    model.eval()
    with torch.inference_mode():
        return model(images).argmax(dim=1).eq(labels).float().mean().item()


def accuracy_grad_left_off(model, images, labels):
    """Right accuracy, but switches gradient tracking off for the rest of the notebook."""
    model.eval()
    torch.set_grad_enabled(False)
    return (model(images).argmax(dim=1) == labels).float().mean().item()


def accuracy_each_submodule(model, images, labels):
    """Correct, if roundabout: every submodule's flag set by hand."""
    for module in model.modules():
        module.training = False
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def accuracy_children_flags(model, images, labels):
    """Switches the flags of the top-level layers only: the layers inside a block keep training."""
    model.training = False
    for _, child in model.named_children():
        child.training = False
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean().item()


def accuracy_no_switch(model, images, labels):
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def accuracy_back_to_train(model, images, labels):
    result = ref.accuracy(model, images, labels)
    model.train()
    return result


def accuracy_classes_of_samples(model, images, labels):
    """Takes the argmax over the samples (dim 0): one entry per class, compared with one label per sample."""
    model.eval()
    with torch.no_grad():
        predictions = torch.argmax(model(images), 0)
    return (labels == predictions).float().mean().item()


def accuracy_tensor(model, images, labels):
    model.eval()
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean()


# ---------------------------------------------------------------- dataset_accuracy


def dataset_accuracy_one_pass(model, test_set, batch_size):
    """Correct: one pass, each batch compared with its own labels (no shuffle)."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=batch_size):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(test_set)


def dataset_accuracy_dataset_labels(model, test_set, batch_size):
    """Correct: shuffle=False, labels read from the dataset in order."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.tensor([label for _, label in test_set])
    return (predictions == labels).float().mean().item()


def dataset_accuracy_shuffled_pairs(model, test_set, batch_size):
    """Correct: shuffled, but each batch's predictions and labels from the same pass."""
    model.eval()
    predictions, labels = [], []
    with torch.no_grad():
        for images, batch_labels in DataLoader(test_set, batch_size=batch_size, shuffle=True):
            predictions.append(model(images).argmax(dim=1))
            labels.append(batch_labels)
    return (torch.cat(predictions) == torch.cat(labels)).float().mean().item()


def dataset_accuracy_seeded_shuffle(model, test_set, batch_size):
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.tensor([label for _, label in test_set])
    return (predictions == labels).float().mean().item()


def dataset_accuracy_mean_of_batches(model, test_set, batch_size):
    model.eval()
    scores = []
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=batch_size):
            scores.append((model(images).argmax(dim=1) == labels).float().mean().item())
    return sum(scores) / len(scores)


def dataset_accuracy_no_eval(model, test_set, batch_size):
    """Pairs each batch with its labels, but evaluates in training mode (dropout on)."""
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=batch_size):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(test_set)


def dataset_accuracy_full_batches_only(model, test_set, batch_size):
    """Walks the dataset by hand in full batches: the remainder never reaches the model."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for start in range(0, len(test_set) - batch_size + 1, batch_size):
            samples = [test_set[i] for i in range(start, start + batch_size)]
            images = torch.stack([image for image, _ in samples])
            labels = torch.tensor([label for _, label in samples])
            correct += (model(images).argmax(dim=1) == labels).sum().item()
            total += len(labels)
    return correct / total


def dataset_accuracy_collected_lists(model, test_set, batch_size):
    """Correct: predictions and labels collected as Python lists in one pass, compared with zip."""
    model.eval()
    predicted, actual = [], []
    with torch.inference_mode():
        for images, labels in DataLoader(test_set, batch_size):
            predicted += model(images).argmax(1).tolist()
            actual += labels.tolist()
    return sum(p == a for p, a in zip(predicted, actual)) / len(actual)


def fit_adam(model, loader, epochs, lr):
    """zero_grad fixed, but trains with Adam."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def fit_weight_decay(model, loader, epochs, lr):
    """zero_grad fixed, but adds weight decay to SGD."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


# ---------------------------------------------------------------- train_and_evaluate: the three bugs


def _three_bugs(*, raw_logits: bool, item: bool, eval_mode: bool, history_value=None):
    """train_and_evaluate with some of its three bugs fixed."""
    def train_and_evaluate(model, train_set, test_set, epochs, lr):
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        history = []
        model.train()
        for _ in range(epochs):
            for inputs, targets in DataLoader(train_set, batch_size=8):
                optimizer.zero_grad()
                outputs = model(inputs) if raw_logits else model(inputs).softmax(dim=1)
                loss = F.cross_entropy(outputs, targets)
                loss.backward()
                optimizer.step()
                history.append(history_value(loss) if history_value else loss.item() if item else loss)
        if eval_mode:
            model.eval()
        correct = 0
        with torch.no_grad():
            for inputs, targets in DataLoader(test_set, batch_size=64):
                correct += (model(inputs).argmax(dim=1) == targets).sum().item()
        return history, correct / len(test_set)
    return train_and_evaluate


def three_bugs_never_train_mode(model, train_set, test_set, epochs, lr):
    """Wrong: the three bugs fixed, and model.train() left out (the model may come in eval mode)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(dim=1) == y).sum().item() for x, y in DataLoader(test_set, batch_size=64))
    return history, correct / len(test_set)


HISTORY_SCALED = _three_bugs(raw_logits=True, item=True, eval_mode=True, history_value=lambda loss: loss.item() * 8)
HISTORY_ROUNDED = _three_bugs(raw_logits=True, item=True, eval_mode=True,
                              history_value=lambda loss: round(loss.item(), 2))
HISTORY_ZEROS = _three_bugs(raw_logits=True, item=True, eval_mode=True, history_value=lambda loss: 0.0)


def three_bugs_whole_test_set(model, train_set, test_set, epochs, lr):
    """Correct: a loader with keyword arguments, float(loss), the test set in one tensor."""
    optimizer = torch.optim.SGD(lr=lr, params=model.parameters())
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(dataset=train_set, batch_size=8, shuffle=False):
            optimizer.zero_grad()
            loss = nn.CrossEntropyLoss()(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(float(loss.detach()))
    model.train(False)
    images, labels = test_set.tensors
    with torch.inference_mode():
        return history, (model(images).argmax(1) == labels).float().mean().item()


def three_bugs_summed_losses(model, train_set, test_set, epochs, lr):
    """Raw logits, but the per-sample losses summed (reduction='none' then .sum()): steps 8 times too large."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets, reduction="none").sum()
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    with torch.no_grad():
        images, labels = test_set.tensors
        return history, (model(images).argmax(dim=1) == labels).float().mean().item()


def three_bugs_log_softmax(model, train_set, test_set, epochs, lr):
    """Correct: log_softmax and nll_loss are cross_entropy in two steps."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.nll_loss(F.log_softmax(model(inputs), dim=1), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


def three_bugs_random_sampler(model, train_set, test_set, epochs, lr):
    """All three fixed, but the training batches are drawn by a RandomSampler (not the dataset's order)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8, sampler=RandomSampler(train_set)):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    with torch.no_grad():
        images, labels = test_set.tensors
        return history, (model(images).argmax(dim=1) == labels).float().mean().item()


def three_bugs_validates_every_epoch(model, train_set, test_set, epochs, lr):
    """All three fixed, but the accuracy is measured after every epoch and train() is called once, before the loop:
    from the second epoch on, the model trains in eval mode."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    accuracy = 0.0
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        model.eval()
        with torch.no_grad():
            images, labels = test_set.tensors
            accuracy = (model(images).argmax(dim=1) == labels).float().mean().item()
    return history, accuracy


def three_bugs_momentum(model, train_set, test_set, epochs, lr):
    """All three fixed, but SGD with momentum."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    with torch.no_grad():
        images, labels = test_set.tensors
        return history, (model(images).argmax(dim=1) == labels).float().mean().item()


def three_bugs_epoch_means(model, train_set, test_set, epochs, lr):
    """All three fixed, but the history holds each epoch's mean loss, not every step's."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        total, batches = 0.0, 0
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        history.append(total / batches)
    model.eval()
    with torch.no_grad():
        images, labels = test_set.tensors
        return history, (model(images).argmax(dim=1) == labels).float().mean().item()


FIXED = _three_bugs(raw_logits=True, item=True, eval_mode=True)
ONLY_TRAINING = _three_bugs(raw_logits=True, item=False, eval_mode=False)
ONLY_EVALUATION = _three_bugs(raw_logits=False, item=False, eval_mode=True)
ONLY_HISTORY = _three_bugs(raw_logits=False, item=True, eval_mode=False)
DETACHED_HISTORY = _three_bugs(raw_logits=True, item=False, eval_mode=True, history_value=lambda loss: loss.detach())
check_training = lambda fn: checks.check_train_and_evaluate(fn, "training")  # noqa: E731
check_evaluation = lambda fn: checks.check_train_and_evaluate(fn, "evaluation")  # noqa: E731
check_history = lambda fn: checks.check_train_and_evaluate(fn, "history")  # noqa: E731



# ---------------------------------------------------------------- issue 18: messages that name only what the evidence shows


def predict_to_host_name(model, images, device):
    """Keeps the moved copy, but moves it to a fixed place (the host), not to the `device` argument."""
    model.to(device).eval()
    batch = images.to("cpu")
    with torch.no_grad():
        return model(batch).argmax(dim=1).cpu()


def predict_never_moved(model, images, device):
    """Moves the model only."""
    model.to(device)
    model.eval()
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


class RenamedHeadCNN(_Designed):
    """Correct: the classifier under another name, after a Flatten module (the task leaves names open)."""

    def __init__(self):
        super().__init__(nn.Flatten())
        self.head = nn.Linear(16 * 6 * 6, 10)

    def forward(self, images):
        return self.head(self.classifier(self.features(images)))


class WholeSequentialCNN(nn.Sequential):
    """Correct: the whole network one Sequential, the convolutions unchanged."""

    def __init__(self):
        super().__init__(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(576, 10))


class ExtraHiddenCNN(_Designed):
    """Fits the classifier by adding a hidden layer: another network than the designed one."""

    def __init__(self):
        super().__init__(nn.Sequential(nn.Linear(576, 64), nn.ReLU(), nn.Linear(64, 10)))

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class AvgPoolCNN(_Designed):
    """The designed weights fit (by order), but a pooling layer changed: the function differs."""

    def __init__(self):
        super().__init__(nn.Linear(576, 10))
        self.features[5] = nn.AvgPool2d(2)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class FiveByFiveCNN(_Designed):
    """Miscounts the size: 16 x 5 x 5."""

    def __init__(self):
        super().__init__(nn.Linear(16 * 5 * 5, 10))

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class ReshapedCNN(_Designed):
    """Keeps the designed classifier and reshapes the features to fit it."""

    def __init__(self):
        super().__init__(nn.Linear(16 * 7 * 7, 10))

    def forward(self, images):
        return self.classifier(self.features(images).reshape(-1, 784))


def table_summed(logits, label_column):
    """Sums the per-sample losses instead of averaging."""
    return F.cross_entropy(logits, label_column[:, 0].long() - 1, reduction="none").sum()


def table_extra_last_column(logits, label_column):
    """Appends a zero logit so that label 10 fits, labels unshifted."""
    return F.cross_entropy(torch.cat([logits, torch.zeros(len(logits), 1)], dim=1), label_column.flatten().long())


def table_squeeze_all(logits, label_column):
    """squeeze() without a dim: fine for N > 1, a 0-d target for one row."""
    return nn.CrossEntropyLoss()(logits, label_column.squeeze().long() - 1)


def fit_step_first(model, loader, epochs, lr):
    """Steps before backward: each step finds no gradient."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            model.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            optimizer.step()
            loss.backward()
            losses.append(loss.item())
    return losses


def fit_summed(model, loader, epochs, lr):
    """Sums the batch's losses."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def fit_divided_by_batches(model, loader, epochs, lr):
    """Divides each batch's loss by the number of batches."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets) / len(loader)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def three_bugs_accuracy_tensor(model, train_set, test_set, epochs, lr):
    """Wrong: the evaluation returns the right accuracy as a tensor."""
    history, _ = FIXED(model, train_set, test_set, epochs, lr)
    x, y = test_set.tensors
    with torch.no_grad():
        return history, (model(x).argmax(dim=1) == y).float().mean()


def fit_no_step(model, loader, epochs, lr):
    """Computes the gradients and never steps."""
    torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            model.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            losses.append(loss.item())
    return losses


def accuracy_method_not_called(model, images, labels):
    """Names model.eval without calling it."""
    switch = model.eval  # noqa: F841
    with torch.no_grad():
        hits = model(images).argmax(dim=1).eq(labels)
    return hits.sum().item() / len(labels)


def accuracy_eval_afterwards(model, images, labels):
    """Predicts first, switches to eval mode afterwards."""
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    model.eval()
    return (predictions == labels).float().mean().item()


def three_bugs_batch_mean(model, train_set, test_set, epochs, lr):
    """All three fixed in the training, but the reported accuracy is the mean of the test batches' accuracies."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    with torch.no_grad():
        scores = torch.stack([(model(x).argmax(1) == y).float().mean() for x, y in DataLoader(test_set, batch_size=64)])
    return history, scores.mean().item()


def three_bugs_nll_on_probabilities(model, train_set, test_set, epochs, lr):
    """Keeps the softmax and takes nll_loss of it."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = nn.NLLLoss()(torch.softmax(model(inputs), dim=1), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


check_one_row_table = lambda fn: checks.check_loss_from_table(fn, inputs=[(10, 1)])  # noqa: E731
check_evaluation_80 = lambda fn: checks.check_train_and_evaluate(  # noqa: E731
    fn, "evaluation", inputs=[checks.TrainCase(2, 64, 80, 3, 0.3)])


CASES = [
    Accept(checks.check_predict_digits, ref.predict_digits),
    Accept(checks.check_predict_digits, predict_inline),
    Accept(checks.check_predict_digits, predict_in_batches),
    Accept(checks.check_predict_digits, predict_keyword_device),
    Accept(checks.check_predict_digits, predict_parameters_device),
    Reject(checks.check_predict_digits, predict_device_read_before_move, "Expected all tensors to be on the same device"),
    Reject(checks.check_predict_digits, checks.broken_predict_digits, STILL),
    Reject(checks.check_predict_digits, checks.broken_predict_digits, "images.to(device) returns a moved copy"),
    Reject(checks.check_predict_digits, predict_moved_twice_discarded, "Expected all tensors to be on the same device"),
    Reject(checks.check_predict_digits, predict_returns_logits, "should have shape [6]"),
    Reject(checks.check_predict_digits, predict_argmax_dim0, "should have shape [6]"),
    Reject(checks.check_predict_digits, predict_top_logit, "the highest scores (the values of max over dim 1)"),
    Reject(checks.check_predict_digits, predict_no_copy_back, "returns the right predictions, but on the device"),
    Reject(checks.check_predict_digits, predict_host_only, "the model computed them on the CPU, not on device"),
    Reject(checks.check_predict_digits, predict_no_eval, "(Dropout) in training mode"),
    Reject(checks.check_predict_digits, predict_cuda_method, "ignores the device argument: hard-coded cuda"),

    Accept(checks.check_small_cnn, ref.SmallCNN),
    Accept(checks.check_small_cnn, LazyCNN),
    Accept(checks.check_small_cnn, ViewCNN),
    Accept(checks.check_small_cnn, TorchFlattenCNN),
    Reject(checks.check_small_cnn, checks.BrokenSmallCNN, STILL),
    Reject(checks.check_small_cnn, checks.BrokenSmallCNN, "mat1 and mat2 shapes cannot be multiplied (4x576"),
    Reject(checks.check_small_cnn, PaddedCNN, "the designed convolutions give [4, 16, 6, 6]"),
    Reject(checks.check_small_cnn, WiderCNN, "the designed convolutions give [4, 16, 6, 6]"),
    Reject(checks.check_small_cnn, MissingFlattenCNN, "raises RuntimeError: mat1 and mat2"),
    Reject(checks.check_small_cnn, LayerInForwardCNN, "two calls on the same batch give different outputs"),

    Accept(checks.check_loss_from_table, ref.loss_from_table),
    Accept(checks.check_loss_from_table, table_view_long),
    Accept(checks.check_loss_from_table, table_column_index),
    Accept(checks.check_loss_from_table, table_module_loss),
    Reject(checks.check_loss_from_table, checks.broken_loss_from_table, STILL),
    Reject(checks.check_loss_from_table, table_long_only, STILL),
    Reject(checks.check_loss_from_table, table_squeeze_only, "expected target dtype to be Long or Byte, but got Float"),
    Reject(checks.check_loss_from_table, table_int32, "but got Int"),
    Reject(checks.check_loss_from_table, table_not_shifted, "Target 10 is out of bounds"),
    Reject(checks.check_loss_from_table, table_clamped, "clamping moves label 10 onto class 9"),
    Reject(checks.check_loss_from_table, table_modulo, "label 10 became class 0 and every other label kept its number"),
    Reject(checks.check_loss_from_table, table_detached, "backward() cannot follow"),
    Reject(checks.check_loss_from_table, table_in_place, "changed the tensor it was given as `label_column`"),

    Accept(checks.check_gated_block, ref.GatedBlock),
    Accept(checks.check_gated_block, ClonedGate),
    Accept(checks.check_gated_block, OneLineGate),
    Accept(checks.check_gated_block, AddcmulGate),
    Reject(checks.check_gated_block, checks.BrokenGatedBlock, STILL),
    Reject(checks.check_gated_block, MulUnderscore, STILL),
    Reject(checks.check_gated_block, DetachedGate, "gate.weight, gate.bias get no gradient"),
    Reject(checks.check_gated_block, AddedNotMultiplied, "the output differs"),
    Reject(checks.check_gated_block, GateAsValue, "forward never calls self.linear"),
    Reject(checks.check_gated_block, AddsIntoInput, "the caller's input x (x += ..., x.add_)"),

    Accept(checks.check_fit, ref.fit),
    Accept(checks.check_fit, fit_model_zero_grad),
    Accept(checks.check_fit, fit_zero_after_step),
    Accept(checks.check_fit, fit_module_loss),
    Reject(checks.check_fit, checks.broken_fit, "they part at step 3"),
    Reject(checks.check_fit, checks.broken_fit, "zero_grad() runs once per epoch"),
    Reject(checks.check_fit, checks._zero_grad_late, "zero_grad() runs between backward() and step()"),
    Reject(checks.check_fit, checks._no_zero_grad, "the gradients are never zeroed"),
    Reject(checks.check_fit, fit_logs_tensors, "expected a list of Python floats"),
    Reject(checks.check_fit, fit_divided_by_batches, "each batch's loss is divided by"),
    Reject(checks.check_fit, fit_adam, "its steps are taken by Adam, where the task's loop steps SGD(lr=0.1)"),
    Reject(checks.check_fit, fit_weight_decay, "its SGD steps with weight_decay=0.01 (the task's: 0)"),

    Accept(checks.check_accuracy, ref.accuracy),
    Accept(checks.check_accuracy, accuracy_train_false),
    Accept(checks.check_accuracy, accuracy_inference_mode),
    Accept(checks.check_accuracy, accuracy_each_submodule),
    Reject(checks.check_accuracy, checks.broken_accuracy, "predictions in eval mode agree with 0.750"),
    Reject(checks.check_accuracy, checks.broken_accuracy, "sets the flag of the outer module only"),
    Reject(checks.check_accuracy, accuracy_no_switch, SAME),
    Reject(checks.check_accuracy, accuracy_no_switch, "1.0 (BatchNorm1d), 1.2 (Dropout) in training mode"),
    Reject(checks.check_accuracy, accuracy_children_flags, "1.0 (BatchNorm1d), 1.2 (Dropout) in training mode"),
    Reject(checks.check_accuracy, accuracy_back_to_train, "afterwards these submodules are in training mode"),
    Reject(checks.check_accuracy, accuracy_tensor, "expected a Python number"),
    Reject(checks.check_accuracy, accuracy_classes_of_samples, "argmax(dim=0) reduces over the samples"),
    Reject(checks.check_accuracy, accuracy_grad_left_off, "gradient tracking"),

    Accept(checks.check_dataset_accuracy, ref.dataset_accuracy),
    Accept(checks.check_dataset_accuracy, dataset_accuracy_one_pass),
    Accept(checks.check_dataset_accuracy, dataset_accuracy_dataset_labels),
    Accept(checks.check_dataset_accuracy, dataset_accuracy_shuffled_pairs),
    Reject(checks.check_dataset_accuracy, checks.broken_dataset_accuracy, "agree with 0.800 of the labels"),
    Reject(checks.check_dataset_accuracy, checks.broken_dataset_accuracy, "every pass over a shuffle=True loader"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_seeded_shuffle, "its loader read the samples in a shuffled order"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_mean_of_batches, "which is no share of the 30 samples"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_mean_of_batches, "the mean of the batches' accuracies"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_no_eval, "(Dropout) in training mode"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_full_batches_only,
           "the model predicted 24 samples, and the dataset has 30"),
    Accept(checks.check_dataset_accuracy, dataset_accuracy_collected_lists),

    Accept(checks.check_train_and_evaluate, ref.train_and_evaluate),
    Accept(checks.check_train_and_evaluate, FIXED),
    Accept(checks.check_train_and_evaluate, three_bugs_whole_test_set),
    Accept(checks.check_train_and_evaluate, three_bugs_log_softmax),
    Reject(checks.check_train_and_evaluate, checks.broken_train_and_evaluate, "3 things go wrong"),
    Reject(check_training, checks.broken_train_and_evaluate, "the weights after training differ"),
    Reject(check_evaluation, checks.broken_train_and_evaluate, "evaluated in eval mode, scores"),
    Reject(check_history, checks.broken_train_and_evaluate, "tensors that each keep their step's whole graph"),
    *[Accept(check_part, answer) for check_part in (check_training, check_evaluation, check_history)
      for answer in (FIXED, three_bugs_whole_test_set, three_bugs_log_softmax)],
    Accept(check_training, ONLY_TRAINING),
    Reject(check_evaluation, ONLY_TRAINING, "Call model.eval() before evaluating"),
    Reject(check_history, ONLY_TRAINING, "loss.item() gives the number alone"),
    Accept(check_evaluation, ONLY_EVALUATION),
    Reject(check_training, ONLY_EVALUATION, "softmax before it squashes them"),
    Reject(check_training, three_bugs_summed_losses, "summed over each batch of 8 instead of averaged"),
    Accept(check_evaluation, three_bugs_summed_losses),
    Accept(check_history, ONLY_HISTORY),
    Reject(checks.check_train_and_evaluate, ONLY_HISTORY, "2 things go wrong"),
    Reject(check_history, DETACHED_HISTORY, "30 of them are tensors (without a graph), expected Python floats"),
    Reject(check_history, DETACHED_HISTORY, "detach() drops the graph, but the item is still a tensor"),
    Reject(check_history, three_bugs_epoch_means, "a history of 5 items, expected 30 (one per step"),
    Reject(check_history, three_bugs_epoch_means, "the append runs after the batch loop"),
    Accept(check_training, three_bugs_epoch_means),
    Reject(check_history, HISTORY_SCALED, "every value is 8 times that step's loss"),
    Reject(check_evaluation, three_bugs_accuracy_tensor, "the right value, but a tensor"),
    Accept(check_training, three_bugs_accuracy_tensor),
    Reject(check_history, HISTORY_ROUNDED, "the losses are rounded to 2 decimals"),
    Reject(check_history, HISTORY_ZEROS, "step 1 holds 0, but the loss that step's backward() ran on was"),
    *[Accept(check_part, answer) for check_part in (check_training, check_evaluation)
      for answer in (HISTORY_SCALED, HISTORY_ROUNDED)],
    Reject(check_training, three_bugs_never_train_mode, "the model was handed over in eval mode"),
    Accept(check_history, three_bugs_never_train_mode),
    Accept(check_evaluation, three_bugs_never_train_mode),
    Reject(check_training, three_bugs_random_sampler, "its loader shuffles"),
    Reject(check_training, three_bugs_validates_every_epoch,
           "from training step 7 on, the model trains with 1 (BatchNorm1d), 3 (Dropout) in eval mode"),
    Reject(check_training, three_bugs_momentum, "its SGD steps with momentum=0.9 (the task's: 0)"),
    *[Accept(check_part, answer) for check_part in (check_evaluation, check_history)
      for answer in (three_bugs_random_sampler, three_bugs_momentum)],

    # issue 18: a named cause only where the evidence shows it
    Reject(checks.check_predict_digits, predict_to_host_name, "the images were moved only to cpu, not to the `device`"),
    Reject(checks.check_predict_digits, predict_never_moved, "the images are never moved"),
    Accept(checks.check_small_cnn, RenamedHeadCNN),
    Accept(checks.check_small_cnn, WholeSequentialCNN),
    Reject(checks.check_small_cnn, ExtraHiddenCNN, "the designed network's weights do not fit its layers"),
    Reject(checks.check_small_cnn, AvgPoolCNN, "with the designed network's weights loaded its output differs"),
    Reject(checks.check_small_cnn, FiveByFiveCNN, "the classifier's in_features (the first size of mat2)"),
    Reject(checks.check_small_cnn, ReshapedCNN, "a reshape to a fixed number of features per image"),
    Reject(checks.check_loss_from_table, table_summed, "summed over the 5 samples instead of averaged"),
    Reject(checks.check_loss_from_table, table_extra_last_column, "an extra logit column makes label 10 fit"),
    Reject(check_one_row_table, table_squeeze_all, "the labels reached cross_entropy without a batch dimension"),
    # the learner's own check has a one-row table too, so it agrees with the graded cell's hidden tests
    Reject(checks.check_loss_from_table, table_squeeze_all, "the labels reached cross_entropy without a batch dimension"),
    Reject(check_one_row_table, checks.broken_loss_from_table, STILL),
    *[Accept(check_one_row_table, answer) for answer in (ref.loss_from_table, table_view_long, table_column_index,
                                                         table_module_loss)],
    Reject(checks.check_fit, fit_step_first, "the first step() runs before any backward()"),
    Reject(checks.check_fit, fit_summed, "its first loss is 6 times the correct one (a batch holds 6 samples)"),
    Reject(checks.check_fit, fit_summed, "the loss is summed over the batch instead of averaged"),
    Reject(checks.check_fit, fit_no_step, "the loop takes no optimizer step"),
    Reject(checks.check_accuracy, accuracy_method_not_called, "nothing had switched the model to eval mode"),
    Reject(checks.check_accuracy, accuracy_eval_afterwards, "it is in eval mode only afterwards"),
    Reject(check_evaluation_80, three_bugs_batch_mean, "is no share of the 80 test samples"),
    Reject(check_evaluation_80, three_bugs_batch_mean, "the mean of the batches' accuracies weighs each batch alike"),
    Accept(check_training, three_bugs_batch_mean),
    Reject(check_evaluation_80, checks.broken_train_and_evaluate, "evaluated in eval mode, scores"),
    *[Accept(check_evaluation_80, answer) for answer in (ref.train_and_evaluate, FIXED, three_bugs_whole_test_set,
                                                         three_bugs_log_softmax)],
    Reject(check_training, three_bugs_nll_on_probabilities, "a cross-entropy is never below 0"),
    Reject(check_training, three_bugs_nll_on_probabilities, "nll_loss on probabilities"),
]


# ---------------------------------------------------------------- round 5: evidence for mode, creation time, batch


def predict_model_stays_home(model, images, device):
    """Moves the images to the CPU, where the model still is: runs, never uses the device."""
    model.eval()
    with torch.no_grad():
        return model(images.cpu()).argmax(dim=1)


class HeadOnFirstCallCNN(_Designed):
    """Registers its classifier during the first forward, sized from what arrives."""

    def __init__(self):
        super().__init__(nn.Identity())
        self.head_ready = False

    def forward(self, images):
        x = torch.flatten(self.features(images), start_dim=1)
        if not self.head_ready:
            self.add_module("classifier", nn.Linear(x.size(1), 10))
            self.head_ready = True
        return self.classifier(x)


class WholeFlattenCNN(_Designed):
    """torch.flatten without start_dim: the batch goes into the features too."""

    def __init__(self):
        super().__init__(nn.Linear(16 * 6 * 6, 10))

    def forward(self, images):
        return self.classifier(torch.flatten(self.features(images)))


class MeasuredInInitCNN(_Designed):
    """Correct: measures the features' size with a dummy batch in __init__."""

    def __init__(self):
        super().__init__(nn.Identity())
        with torch.no_grad():
            size = self.features(torch.zeros(1, 1, 28, 28)).numel()
        self.classifier = nn.Linear(size, 10)

    def forward(self, images):
        return self.classifier(self.features(images).view(len(images), -1))


def fit_never_switches_mode(model, loader, epochs, lr):
    """zero_grad fixed, model.train() dropped: the model trains in whatever mode it arrives in."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def fit_eval_per_epoch(model, loader, epochs, lr):
    """zero_grad fixed, but switches to eval mode at the start of every epoch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        model.eval()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def fit_train_inside_loop(model, loader, epochs, lr):
    """Correct: model.train(True) at every step, zero_grad(set_to_none=True)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            model.train(True)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach().item())
    return losses


CASES += [
    Reject(checks.check_predict_digits, predict_model_stays_home, "move the model there (model.to(device)"),
    Reject(checks.check_small_cnn, HeadOnFirstCallCNN, "after its first forward it also has ['classifier.weight'"),
    Reject(checks.check_small_cnn, HeadOnFirstCallCNN, "a layer created in forward does not exist yet"),
    Reject(checks.check_small_cnn, WholeFlattenCNN, "the classifier received 1 row(s) of 2304 features"),
    Reject(checks.check_small_cnn, WholeFlattenCNN, "the flattening merged the batch into the features"),
    Reject(checks.check_small_cnn, MissingFlattenCNN, "the classifier received 384 row(s) of 6 features"),
    Accept(checks.check_small_cnn, MeasuredInInitCNN),
    Reject(checks.check_fit, fit_never_switches_mode, "from training step 1 on, the model (handed over in eval mode) "
                                                      "trains with 2 (Dropout) in eval mode"),
    Reject(checks.check_fit, fit_eval_per_epoch, "the model was in eval mode while it trained"),
    Accept(checks.check_fit, fit_train_inside_loop),
]


def accuracy_integer_division(model, images, labels):
    """Wrong: // turns the fraction into 0 unless every prediction is right."""
    model.eval()
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return ((predictions == labels).sum() // len(labels)).item()


CASES += [
    Reject(checks.check_accuracy, accuracy_integer_division, "// is integer division"),
]



# From a third learner tester who never read the checks (lesson 09, 110 answers).
def accuracy_over_samples_labels_cut_to_fit(model, images, labels):  # one prediction per class, 3 labels kept
    model.eval()
    with torch.no_grad():
        predictions = model(images).argmax(dim=0)
    return (predictions == labels[:predictions.shape[0]]).float().mean().item()


CASES += [
    Reject(checks.check_accuracy, accuracy_over_samples_labels_cut_to_fit, "comparing them with the first 3 labels"),
]


_NOTEBOOK_DEVICE = torch.device("cpu")  # the notebook's DEVICE on a machine without a GPU


def predict_on_notebook_device(model, images, device):
    # the notebook's DEVICE instead of the `device` argument: on a CPU-only machine nothing moves to the caller's
    model.to(_NOTEBOOK_DEVICE)
    images = images.to(_NOTEBOOK_DEVICE)
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).cpu()


CASES += [
    Reject(checks.check_predict_digits, predict_on_notebook_device, "the notebook's DEVICE?"),
]


# From a fourth learner tester (lesson 09): the device argument, factories given device=, wrong causes named.
def predict_hard_coded_cuda(model, images, device):
    """Ignores `device`: .cuda() whatever the caller passes."""
    model.cuda().eval()
    with torch.no_grad():
        return model(images.cuda()).argmax(dim=1).cpu()


def predict_hard_coded_cuda_string(model, images, device):
    """Ignores `device`: .to("cuda") whatever the caller passes."""
    model.to("cuda")
    model.eval()
    with torch.no_grad():
        logits = model(images.to("cuda"))
    return logits.argmax(dim=1).cpu()


def predict_as_tensor_device(model, images, device):
    """Correct: the moved copy made by torch.as_tensor with device=."""
    model.to(device).eval()
    images = torch.as_tensor(images, device=device)
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


def predict_empty_like_copy(model, images, device):
    """Correct: an empty tensor made on the device, then filled with copy_."""
    model.to(device)
    model.eval()
    moved = torch.empty_like(images, device=device).copy_(images)
    with torch.no_grad():
        return model(moved).argmax(dim=1).to("cpu")


def predict_images_follow_unmoved_model(model, images, device):
    """The images go where the model's parameters are, but the model is never moved: all on the CPU."""
    model.eval()
    with torch.no_grad():
        return model(images.to(next(model.parameters()).device)).argmax(dim=1).cpu()


CASES += [
    Reject(checks.check_predict_digits, predict_hard_coded_cuda, "ignores the device argument: hard-coded cuda"),
    Reject(checks.check_predict_digits, predict_hard_coded_cuda_string, "ignores the device argument: hard-coded cuda"),
    Accept(checks.check_predict_digits, predict_as_tensor_device),
    Accept(checks.check_predict_digits, predict_empty_like_copy),
    Reject(checks.check_predict_digits, predict_images_follow_unmoved_model,
           "the model was never moved, and the images followed it"),
]


def table_where_ten_to_zero(logits, label_column):
    """Maps label 10 to class 0 with torch.where and leaves the others unshifted."""
    labels = label_column.squeeze(1).long()
    return F.cross_entropy(logits, torch.where(labels == 10, 0, labels))


CASES += [
    Reject(checks.check_loss_from_table, table_where_ten_to_zero, "label 10 became class 0"),
]


def three_bugs_drop_last(model, train_set, test_set, epochs, lr):
    """The three bugs fixed, but drop_last=True: each epoch's last, shorter batch is never trained on."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8, drop_last=True):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


def fit_logs_loss_after_step(model, loader, epochs, lr):
    """A correct step, then the loss recomputed under no_grad for logging: a second forward, after the update."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                losses.append(F.cross_entropy(model(inputs), targets).item())
    return losses


def fit_step_before_backward(model, loader, epochs, lr):
    """zero_grad moved into the loop, but step() before backward(): the weights change under the loss's graph."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            optimizer.step()
            loss.backward()
            losses.append(loss.item())
    return losses


CASES += [
    Reject(checks.check_train_and_evaluate, three_bugs_drop_last, "drop_last=True drops it"),
    Reject(check_training, three_bugs_drop_last, "batches of 8 over 43 samples for 4 epochs take 24"),
    Reject(check_history, three_bugs_drop_last, "drop_last=True drops it"),
    Accept(check_evaluation, three_bugs_drop_last),
    Reject(checks.check_fit, fit_logs_loss_after_step, "a second forward pass after step()"),
    Reject(checks.check_fit, fit_step_before_backward, "optimizer.step() runs before loss.backward()"),
]


class SoftmaxOutputCNN(ref.SmallCNN):
    """Ends with a softmax: probabilities where the designed network gives logits."""

    def forward(self, images):
        return torch.softmax(self.classifier(self.features(images).flatten(1)), dim=1)


class LogSoftmaxOutputCNN(ref.SmallCNN):
    def forward(self, images):
        return nn.functional.log_softmax(super().forward(images), dim=-1)


CASES += [
    Reject(checks.check_small_cnn, SoftmaxOutputCNN, "your values are the softmax of the expected ones along dim 1"),
    Reject(checks.check_small_cnn, LogSoftmaxOutputCNN, "the log-softmax of the expected ones along dim 1"),
]


def three_bugs_softmax_over_batch(model, train_set, test_set, epochs, lr):
    """The other fixes made, but the softmax kept and moved to dim 0 (across the batch's samples)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs).softmax(dim=0), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


CASES += [
    Reject(check_training, three_bugs_softmax_over_batch, "softmax before it squashes them (here over dim 0, across"),
]


def dataset_accuracy_sorted_separately(model, test_set, batch_size):
    """Keeps the two passes over a shuffling loader, then sorts predictions and labels each on its own."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=True)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.cat([labels for _, labels in loader])
    return (predictions.sort().values == labels.sort().values).float().mean().item()


CASES += [
    Reject(checks.check_dataset_accuracy, dataset_accuracy_sorted_separately,
           "sorting the predictions and the labels separately pairs equal values"),
]


class GatedThroughData(checks.BrokenGatedBlock):
    """Multiplies into h.data: the version counter stays, backward runs, and autograd never sees the product."""

    def forward(self, x):
        h = torch.sigmoid(self.gate(x))
        h.data *= self.linear(x)
        return h + x


CASES += [
    Reject(checks.check_gated_block, GatedThroughData, "linear.weight, linear.bias get no gradient, and gate.weight"),
    Reject(checks.check_gated_block, GatedThroughData, "an in-place change of h.data"),
]


class DropoutAddedCNN(ref.SmallCNN):
    """Fixes the size, and adds a dropout before the classifier that the program did not have."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, images):
        return self.classifier(self.drop(self.features(images).flatten(1)))


CASES += [
    Reject(checks.check_small_cnn, DropoutAddedCNN, "look for a dropout in forward"),
    Reject(checks.check_small_cnn, LayerInForwardCNN, "a layer created inside forward gets new random weights"),
]


def accuracy_over_full_batches(model, test_set, batch_size):
    """Counts the right predictions, but divides by len(loader) * batch_size (the last batch is smaller)."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / (len(loader) * batch_size)


def accuracy_over_batches(model, test_set, batch_size):
    """Counts the right predictions, and divides by the number of batches."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(loader)


CASES += [
    Reject(checks.check_dataset_accuracy, accuracy_over_full_batches, "divided by len(loader) * batch_size (4 x 8) = 32"),
    Reject(checks.check_dataset_accuracy, accuracy_over_batches, "divided by the number of batches, len(loader) = 4"),
]


# From a fifth learner tester (lesson 09, 110 answers).
def loss_log_of_softmax(logits, label_column):
    """log(softmax) by hand: -inf where softmax rounds a probability to 0 (the lesson's section 8)."""
    return F.nll_loss(torch.log(torch.softmax(logits, dim=1)), label_column.squeeze(1).long() - 1)


def loss_of_probabilities(logits, label_column):
    return F.cross_entropy(logits.softmax(dim=1), label_column.squeeze(1).long() - 1)


def loss_nll_of_logits(logits, label_column):
    return F.nll_loss(logits, label_column.squeeze(1).long() - 1)


def loss_log_softmax_twice(logits, label_column):
    """Correct: log-softmax of log-probabilities changes nothing, so cross_entropy of them is the same loss."""
    return F.cross_entropy(F.log_softmax(logits, dim=1), label_column.squeeze(1).long() - 1)


def loss_logsumexp(logits, label_column):
    """Correct: the cross-entropy written out with logsumexp."""
    labels = label_column.squeeze(1).long() - 1
    return (torch.logsumexp(logits, dim=1) - logits.gather(1, labels[:, None]).squeeze(1)).mean()


def dataset_accuracy_tensors(model, test_set, batch_size):
    """Reads the labels from .tensors, which only a TensorDataset has."""
    loader = DataLoader(test_set, batch_size=batch_size)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    return (predictions == test_set.tensors[1]).float().mean().item()


CASES += [
    Reject(checks.check_loss_from_table, loss_log_of_softmax, "softmax rounds the probability of sample 0's class to 0"),
    Reject(checks.check_loss_from_table, loss_of_probabilities, "cross_entropy was given probabilities"),
    Reject(checks.check_loss_from_table, loss_nll_of_logits, "nll_loss was given the raw logits"),
    Accept(checks.check_loss_from_table, loss_log_softmax_twice),
    Accept(checks.check_loss_from_table, loss_logsumexp),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_tensors, "not a TensorDataset (.tensors)"),
]


def fit_input_noise(model, loader, epochs, lr):
    """Adds noise to the inputs ("augmentation"): the task's loop has none."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs + 0.1 * torch.randn_like(inputs)), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def predict_with_noise(model, images, device):
    model.to(device).eval()
    with torch.no_grad():
        logits = model(images.to(device) + 0.3 * torch.randn_like(images.to(device)))
    return logits.argmax(dim=1).cpu()


CASES += [
    Reject(checks.check_fit, fit_input_noise, "torch.randn_like (8 calls)"),
    Reject(checks.check_predict_digits, predict_with_noise, "drew random values that the program you were given"),
]


def three_bugs_dropout_on_outputs(model, train_set, test_set, epochs, lr):
    """The three bugs fixed, and an F.dropout on the outputs while training (the model has dropout of its own)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            loss = F.cross_entropy(F.dropout(model(inputs), p=0.2), targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
    correct = 0
    model.eval()
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


class GateWithDropout(ref.GatedBlock):
    """A dropout on the gate, always on (no training=self.training)."""

    def forward(self, x):
        return x + F.dropout(torch.sigmoid(self.gate(x)), p=0.1) * self.linear(x)


CASES += [
    Reject(check_training, three_bugs_dropout_on_outputs, "F.dropout switched on"),
    Reject(checks.check_gated_block, GateWithDropout, "your program drew random values that the program you were given"),
]


class GateSquashedOutput(ref.GatedBlock):
    """A sigmoid around the whole sum."""

    def forward(self, x):
        return torch.sigmoid(x + torch.sigmoid(self.gate(x)) * self.linear(x))


class GateHalved(ref.GatedBlock):
    """The average of the two terms instead of their sum."""

    def forward(self, x):
        return (x + torch.sigmoid(self.gate(x)) * self.linear(x)) / 2


CASES += [
    Reject(checks.check_gated_block, GateSquashedOutput, "your values are the sigmoid of the expected ones"),
    Reject(checks.check_gated_block, GateHalved, "the expected one divided by 2"),
]


def fit_softmax_into_loss(model, loader, epochs, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(torch.softmax(model(inputs), dim=-1), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


CASES += [
    Reject(checks.check_fit, fit_softmax_into_loss, "cross_entropy was given probabilities"),
]


class ListedClassifierCNN(nn.Module):
    """Fixes the size, but keeps the classifier in a plain list: PyTorch does not register it."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = [nn.Linear(16 * 6 * 6, 10)]

    def forward(self, images):
        return self.head[0](self.features(images).flatten(1))


CASES += [
    Reject(checks.check_small_cnn, ListedClassifierCNN, "head, a list of layers"),
]
