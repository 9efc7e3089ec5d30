"""Lesson 09 Debugging: the fixed programs pass; the broken ones and plausible wrong fixes fail by name."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from helpers.checks import debugging as checks
from helpers.reference import debugging as ref
from tests.wrong_answers import Accept, Reject

STILL = "still raises the original error"
SILENT = "still no exception"

# ---------------------------------------------------------------- predict_digits


def predict_returns_logits(model, images, device):
    model = model.to(device).eval()
    with torch.no_grad():
        return model(images.to(device)).cpu()


def predict_moves_only_the_model(model, images, device):
    model = model.to(device)
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


# ---------------------------------------------------------------- SmallCNN


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


class LazyCNN(nn.Module):
    """A different correct fix: LazyLinear infers in_features on the first batch."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.LazyLinear(10)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


class MissingFlattenCNN(ref.SmallCNN):
    def forward(self, images):
        return self.classifier(self.features(images))


# ---------------------------------------------------------------- loss_from_table


def table_long_only(logits, label_column):
    return F.cross_entropy(logits, label_column.long())


def table_squeeze_only(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1))


def table_detached(logits, label_column):
    return F.cross_entropy(logits, label_column.squeeze(1).long()).detach()


def table_view_long(logits, label_column):
    return F.cross_entropy(logits, label_column.view(-1).long())


# ---------------------------------------------------------------- loss_with_file_labels


def labels_clamped(logits, file_labels):
    return F.cross_entropy(logits, file_labels.clamp(max=9))


def labels_modulo(logits, file_labels):
    return F.cross_entropy(logits, file_labels % 10)


def labels_shifted_up(logits, file_labels):
    return F.cross_entropy(logits, file_labels + 1)


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


class ClonedGate(ref.GatedBlock):
    """Also a correct fix: the in-place product works on a copy."""

    def forward(self, x):
        h = torch.sigmoid(self.gate(x)).clone()
        h *= self.linear(x)
        return h + x


# ---------------------------------------------------------------- fit


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


def accuracy_flag_by_hand(model, images, labels):
    model.training = False
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def accuracy_back_to_train(model, images, labels):
    result = ref.accuracy(model, images, labels)
    model.train()
    return result


def accuracy_tensor(model, images, labels):
    model.eval()
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean()


# ---------------------------------------------------------------- dataset_accuracy


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


def dataset_accuracy_batch_labels(model, test_set, batch_size):
    """Also correct: shuffled, but each batch compared with its own labels."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=batch_size, shuffle=True):
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(test_set)


CASES = [
    Accept(checks.check_predict_digits, ref.predict_digits),
    Reject(checks.check_predict_digits, checks.broken_predict_digits, STILL),
    Reject(checks.check_predict_digits, predict_moves_only_the_model, "Call images.to(device)"),
    Reject(checks.check_predict_digits, predict_returns_logits, "should have shape [6]"),

    Accept(checks.check_small_cnn, ref.SmallCNN),
    Accept(checks.check_small_cnn, LazyCNN),
    Reject(checks.check_small_cnn, checks.BrokenSmallCNN, STILL),
    Reject(checks.check_small_cnn, PaddedCNN, "instead of the designed [4, 16, 6, 6]"),
    Reject(checks.check_small_cnn, WiderCNN, "instead of the designed [4, 16, 6, 6]"),
    Reject(checks.check_small_cnn, MissingFlattenCNN, "raises RuntimeError: mat1 and mat2"),

    Accept(checks.check_loss_from_table, ref.loss_from_table),
    Accept(checks.check_loss_from_table, table_view_long),
    Reject(checks.check_loss_from_table, checks.broken_loss_from_table, STILL),
    Reject(checks.check_loss_from_table, table_long_only, STILL),
    Reject(checks.check_loss_from_table, table_squeeze_only, "the class indices are still floats"),
    Reject(checks.check_loss_from_table, table_detached, "without a graph"),

    Accept(checks.check_loss_with_file_labels, ref.loss_with_file_labels),
    Reject(checks.check_loss_with_file_labels, checks.broken_loss_with_file_labels, STILL),
    Reject(checks.check_loss_with_file_labels, labels_clamped, "clamping moves label 10 onto class 9"),
    Reject(checks.check_loss_with_file_labels, labels_modulo, "% 10 turns label 10 into class 0"),
    Reject(checks.check_loss_with_file_labels, labels_shifted_up, "a label is still outside 0..9"),

    Accept(checks.check_gated_block, ref.GatedBlock),
    Accept(checks.check_gated_block, ClonedGate),
    Reject(checks.check_gated_block, checks.BrokenGatedBlock, STILL),
    Reject(checks.check_gated_block, DetachedGate, "the gate gets no gradient"),
    Reject(checks.check_gated_block, AddedNotMultiplied, "the output differs"),

    Accept(checks.check_fit, ref.fit),
    Reject(checks.check_fit, checks.broken_fit, "Are the gradients zeroed each step?"),
    Reject(checks.check_fit, checks._zero_grad_late, "zero_grad() runs between backward() and step()"),
    Reject(checks.check_fit, checks._zero_grad_per_epoch, "zeroed once per epoch"),
    Reject(checks.check_fit, fit_logs_tensors, "list of Python floats"),

    Accept(checks.check_accuracy, ref.accuracy),
    Reject(checks.check_accuracy, checks.broken_accuracy, "Call model.eval() before evaluating"),
    Reject(checks.check_accuracy, accuracy_flag_by_hand, SILENT),
    Reject(checks.check_accuracy, accuracy_back_to_train, "not in eval mode"),
    Reject(checks.check_accuracy, accuracy_tensor, "use .item()"),

    Accept(checks.check_dataset_accuracy, ref.dataset_accuracy),
    Accept(checks.check_dataset_accuracy, dataset_accuracy_batch_labels),
    Reject(checks.check_dataset_accuracy, checks.broken_dataset_accuracy, "Evaluate with shuffle=False"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_seeded_shuffle, "but the fixed program gives"),
    Reject(checks.check_dataset_accuracy, dataset_accuracy_mean_of_batches, "but the fixed program gives"),
]
