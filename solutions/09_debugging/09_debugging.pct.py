# %% [markdown]
# # 09 Debugging: the common errors
#
# Most PyTorch bugs are one of a dozen or so. Some stop the program with an
# error whose message is cryptic the first time and obvious the tenth; others
# raise nothing at all and quietly give a worse model. This lesson produces each
# of them on purpose: every error below is the real exception of the PyTorch you
# have installed, caught and printed so that the notebook runs from top to
# bottom. Each is explained and then fixed.
#
# The exercises are different from the earlier lessons: the cell of each one
# already holds a **broken program**, and none of them is the example above it
# again. Run the self-check below it: it tells you what the program *does*
# wrong (the input, what came back, what was expected), the way a bug report
# would. Finding the bug is the exercise. Stuck? Run the check again and it adds
# where to look; a third time, it names the bug. The checks run your fixed program
# on new inputs and compare what it does with the correct program; they do not
# read your code, so any correct fix passes.
#
# There are 8 fix-the-bug exercises worth 20 points; 4 of them are silent bugs,
# and the last program has three bugs, each worth its own points.

# %% locked="setup"
import re
import sys
import textwrap
import traceback
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import debugging as check
from helpers.data import MNIST_MEAN, MNIST_STD, mnist_dataset
from helpers.device import pick_device
from helpers.memory import SavedTensorBytes
from helpers.timing import time_call

torch.manual_seed(0)
DEVICE = pick_device()
N_TRAIN, N_TEST, BATCH = 2000, 1000, 100  # MNIST digits used here: enough to learn, quick on a CPU


def as_inputs(dataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n digits of an MNIST dataset as normalised [n, 1, 28, 28] floats, and their labels."""
    images = (dataset.data[:n].float() / 255 - MNIST_MEAN) / MNIST_STD
    return images.unsqueeze(1), dataset.targets[:n]


train_images, train_labels = as_inputs(mnist_dataset(train=True), N_TRAIN)
test_images, test_labels = as_inputs(mnist_dataset(train=False), N_TEST)

# %% [markdown]
# ## 1. Reading an error
#
# When a cell fails, Python prints a **traceback**: the chain of calls that led
# to the error, oldest first. Read it from the bottom:
#
# 1. The **last line** is the exception's type and message: what went wrong.
# 2. Going up, the first frames are inside PyTorch (paths in the folder of
#    installed packages, `site-packages/torch`);
#    they say which operation failed, rarely why.
# 3. Keep going up until you reach **your own code** (a notebook cell shows as
#    `Cell In[N], line L`): that line is where to look.
#
# Here is a whole traceback of a small model whose layers do not fit together
# (section 3 explains the error itself). The paths and cell numbers depend on your
# machine, so only the shape of it matters:

# %% tags=["nbval-ignore-output"]
def make_mismatched_model() -> nn.Sequential:
    """A layer of 8 outputs followed by a layer that expects 6 inputs."""
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(6, 2))


INSTALLED = str(Path(torch.__file__).parent.parent)  # the folder of installed packages on this machine

try:
    make_mismatched_model()(torch.randn(3, 4))
except RuntimeError as error:
    # the folders differ from machine to machine: show them as <installed> and <this cell>
    shown = "".join(traceback.format_exception(error)).replace(INSTALLED, "<installed>")
    print(re.sub(r'File "[^"]*ipykernel[^"]*"', 'File "<this cell>"', shown))

# %% [markdown]
# The last line says two matrices of shapes `3x8` and `6x2` could not be
# multiplied; the frames above it go through `Sequential.forward` and
# `Linear.forward` inside torch; the only frame in our code is the line that
# called the model. So: the model's own layers disagree, and the numbers say which
# (8 features arrive where 6 are expected).
#
# From now on every error is printed by `report`, which shows exactly those two
# things: the last line of the traceback, and the line of *our* code that raised
# it (the last frame that is not inside an installed library).

# %%
def report(error: Exception) -> None:
    """Print what to read first in a traceback: the exception and message, then the line of our code that raised it."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    print(textwrap.fill(f"{type(error).__name__}: {message}", width=110, subsequent_indent="    "))
    ours = [frame for frame in traceback.extract_tb(error.__traceback__)
            if "site-packages" not in frame.filename and "/lib/python" not in frame.filename]
    if ours:
        print(f"  raised at our line: {ours[-1].line}")


try:
    make_mismatched_model()(torch.randn(3, 4))
except RuntimeError as error:
    report(error)

# %% [markdown]
# ## 2. Tensors on different devices
#
# An operation runs on one device, so all of its tensors must be there: a model
# moved to the GPU with `model.to(device)` cannot take a batch that is still in
# the CPU's memory. On a GPU the message is
# `Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!`.
#
# To show the error on any computer, the cell below uses the GPU when there is one,
# and otherwise PyTorch's `meta` device, a device that records shapes but holds no
# data: it is a different device from the CPU, so the mismatch is just as real
# (its message is worded differently).

# %%
OTHER_DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("meta")
layer_there = nn.Linear(4, 2).to(OTHER_DEVICE)
batch_here = torch.randn(3, 4)
try:
    layer_there(batch_here)
except RuntimeError as error:
    report(error)

# %% [markdown]
# The fix is to move the batch to where the model is. In a training or
# evaluation loop that means every tensor of every batch, inputs and labels alike:

# %%
out = layer_there(batch_here.to(OTHER_DEVICE))
print("output:", list(out.shape), "on", out.device.type)

# %% [markdown]
# Without a GPU, forgetting `.to(device)` changes nothing (everything is on the
# CPU anyway), so the bug waits until the code first runs on a GPU. The check
# below gives your function images that behave like tensors on another device: a
# batch that was never moved fails, as it would on a GPU.
#
# ### Exercise 1 (2 points): fix `predict_digits`
#
# `predict_digits(model, images, device)` should return the predicted class of each
# image, computed on `device` and returned on the CPU (moving the model to `device`
# and putting it in eval mode is part of its job). Its author moved everything to
# the device, and yet on a GPU it stops with the error above. Fix it.

# %% starter="ex_predict_digits"
def predict_digits(model: nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Predicted class of each image, computed on ``device``, returned on the CPU."""
    model.to(device)
    images.to(device)
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).cpu()


# %% solution="ex_predict_digits"
def predict_digits(model: nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Predicted class of each image, computed on ``device``, returned on the CPU."""
    ### BEGIN SOLUTION
    model.to(device)  # Module.to moves the module in place
    images = images.to(device)  # Tensor.to returns a moved copy: keep it
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1).cpu()
    ### END SOLUTION


# %% check="ex_predict_digits_check"
check.check_predict_digits(predict_digits)

# %% graded="ex_predict_digits_tests" points=2
check.check_predict_digits(predict_digits)
### BEGIN HIDDEN TESTS
check.check_predict_digits(predict_digits, inputs=[(5, 1), (6, 9)])
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Layers that do not fit together
#
# Each layer expects a certain size of input: `nn.Linear(in_features, ...)` a last
# dimension of `in_features`, `nn.Conv2d(in_channels, ...)` that many channels in
# dimension 1. When the previous layer delivers something else, the error names
# both sizes. For a linear layer, "mat1" is the batch, flattened to
# `[batch, features]`, and "mat2" the layer's weight, transposed to `[in, out]`:

# %%
flat_features = torch.randn(8, 1568)  # e.g. 32 channels of 7 x 7, flattened
try:
    nn.Linear(800, 10)(flat_features)
except RuntimeError as error:
    report(error)

# %% [markdown]
# For a convolution, the message quotes the weight's shape
# `[out_channels, in_channels, kernel, kernel]` and the input's shape:

# %%
try:
    nn.Conv2d(16, 32, kernel_size=3)(torch.randn(8, 8, 14, 14))
except RuntimeError as error:
    report(error)

# %% [markdown]
# The fix is to make the sizes agree: `nn.Linear(1568, 10)`, or `nn.Conv2d(8, 32, 3)`.
# To find the right number, do not compute it in your head: run one batch through
# the layers before the failing one and print the shape that arrives.
#
# ### Exercise 2 (2 points): fix `SmallCNN`
#
# `SmallCNN` fails on the first batch of digits. The convolutions are as designed
# (keep them, padding included, and create every layer in `__init__`): make the
# classifier fit them.

# %% starter="ex_small_cnn"
class SmallCNN(nn.Module):
    """Two convolution blocks and a linear classifier for 28 x 28 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 7 * 7, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


# %% solution="ex_small_cnn"
class SmallCNN(nn.Module):
    """Two convolution blocks and a linear classifier for 28 x 28 digits."""

    def __init__(self) -> None:
        super().__init__()
        ### BEGIN SOLUTION
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 28 -> 28 -> 14
            nn.Conv2d(8, 16, kernel_size=3), nn.ReLU(), nn.MaxPool2d(2),             # 14 -> 12 -> 6
        )
        self.classifier = nn.Linear(16 * 6 * 6, 10)  # no padding in the second convolution: 6 x 6, not 7 x 7
        ### END SOLUTION

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


# %% check="ex_small_cnn_check"
check.check_small_cnn(SmallCNN)

# %% graded="ex_small_cnn_tests" points=2
check.check_small_cnn(SmallCNN)
### BEGIN HIDDEN TESTS
check.check_small_cnn(SmallCNN, inputs=[(7, 3), (8, 1)])
### END HIDDEN TESTS

# %% [markdown]
# ## 4. What the loss functions expect
#
# `nn.CrossEntropyLoss` (and `F.cross_entropy`) takes logits of shape `[N, C]` and,
# as targets, **one class index per sample**: a 1-D tensor of shape `[N]` with
# dtype `int64` (`torch.long`). Two common ways to get that wrong are labels
# read from a table as a column `[N, 1]`, and labels stored as floats:

# %%
logits = torch.randn(4, 10)
label_column = torch.tensor([[3], [1], [4], [1]])  # shape [4, 1]
try:
    F.cross_entropy(logits, label_column)
except RuntimeError as error:
    report(error)
float_labels = torch.tensor([3.0, 1.0, 4.0, 1.0])  # shape [4], but floats
try:
    F.cross_entropy(logits, float_labels)
except RuntimeError as error:
    report(error)

# %% [markdown]
# "Multi-target" means a target with a second dimension: cross-entropy would
# read each row as several targets for one sample, which it does not support.
# (A float target of the same shape as the logits *is* allowed: it is read as
# class probabilities, for label smoothing or soft labels.) The fix is
# `squeeze(1)` for the shape and `.long()` for the dtype:

# %%
print("loss:", F.cross_entropy(logits, label_column.squeeze(1)).item())
print("loss:", F.cross_entropy(logits, float_labels.long()).item())

# %% [markdown]
# ### Labels out of range
#
# With `C` outputs, the class indices are `0` to `C - 1`. A label of `C` or more
# (classes numbered from 1 in a file, or a label that means "unknown") points past
# the last output. On the CPU that is an `IndexError` that names the label:

# %%
labels_from_one = torch.tensor([1, 5, 10, 3])  # a file that numbers the ten classes 1 to 10
try:
    F.cross_entropy(torch.randn(4, 10), labels_from_one)
except IndexError as error:
    report(error)

# %% [markdown]
# On a GPU the same mistake is much harder to read. The check runs inside a GPU
# kernel, which can only stop with `CUDA error: device-side assert triggered`
# (after a line such as ``Assertion `t >= 0 && t < n_classes` failed``); the
# error may surface at a later, innocent line because GPU work runs
# asynchronously, and afterwards the GPU refuses all further work until the
# Python process restarts. Two ways out: run the same code on the CPU to get the
# readable message above, or set `CUDA_LAUNCH_BLOCKING=1` so the error is reported
# at the line that caused it. The cell below runs the mistake in a separate
# process when there is a GPU, so that this notebook's GPU keeps working.

# %%
import os
import subprocess

PYTHON = sys.executable  # the Python that runs this notebook

CUDA_MISTAKE = ("import torch; logits = torch.randn(4, 10, device='cuda'); "
                "labels = torch.tensor([1, 5, 10, 3], device='cuda'); "
                "print(torch.nn.functional.cross_entropy(logits, labels).item())")
if torch.cuda.is_available():
    run = subprocess.run([PYTHON, "-c", CUDA_MISTAKE], capture_output=True, text=True,
                         env={**os.environ, "CUDA_LAUNCH_BLOCKING": "1"})
    shown = [line for line in run.stderr.splitlines() if "assert" in line.lower() or "Error" in line]
    print("\n".join(shown[:4]) or run.stderr[-500:])
else:
    print("No GPU here: on a GPU this mistake stops with 'CUDA error: device-side assert triggered' instead.")

# %% [markdown]
# The fix is to map the labels to `0 .. C-1` where the data is read, here by
# subtracting one:

# %%
print("loss:", F.cross_entropy(torch.randn(4, 10), labels_from_one - 1).item())

# %% [markdown]
# ### Exercise 3 (3 points): fix `loss_from_table`
#
# The labels of a dataset were read from a CSV file into a float column of shape
# `[N, 1]`, and the file numbers the ten digit classes 1 to 10 (1 is the digit 0).
# `loss_from_table(logits, label_column)` should return the mean cross-entropy of a
# 10-output model's `logits` `[N, 10]` against those labels (a tensor that
# `backward()` can follow). Fix it. Each fix may uncover the next error: read each
# one. Careful: a fix that only makes an error go away can leave the labels wrong.

# %% starter="ex_loss_from_table"
def loss_from_table(logits: torch.Tensor, label_column: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [N, 10] against the labels of a table (see the task)."""
    return F.cross_entropy(logits, label_column)


# %% solution="ex_loss_from_table"
def loss_from_table(logits: torch.Tensor, label_column: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [N, 10] against the labels of a table (see the task)."""
    ### BEGIN SOLUTION
    class_indices = label_column.squeeze(1).long() - 1  # [N] int64, the file's 1..10 as 0..9
    return F.cross_entropy(logits, class_indices)
    ### END SOLUTION


# %% check="ex_loss_from_table_check"
check.check_loss_from_table(loss_from_table)

# %% graded="ex_loss_from_table_tests" points=3
check.check_loss_from_table(loss_from_table)
### BEGIN HIDDEN TESTS
check.check_loss_from_table(loss_from_table, inputs=[(9, 7), (10, 1), (11, 30)])
### END HIDDEN TESTS

# %% [markdown]
# ### Binary cross-entropy wants float targets
#
# For two classes (or several independent yes/no labels) the loss is
# `nn.BCEWithLogitsLoss` (`F.binary_cross_entropy_with_logits`): one logit per
# sample and a target that is a **probability**, so a float of the same shape as
# the logits. Integer 0/1 labels fail:

# %%
binary_logits = torch.randn(4)
is_even = torch.tensor([1, 0, 0, 1])  # int64
try:
    F.binary_cross_entropy_with_logits(binary_logits, is_even)
except RuntimeError as error:
    report(error)

# %% [markdown]
# The result of the loss is a float, and PyTorch refuses to write it into a
# tensor of the target's integer type. A model that ends in `nn.Linear(..., 1)`
# adds a second pitfall: its output has shape `[N, 1]`, the labels `[N]`:

# %%
try:
    F.binary_cross_entropy_with_logits(binary_logits.unsqueeze(1), is_even.float())
except ValueError as error:
    report(error)

# %% [markdown]
# Fix: `is_even.float()`, and the same shape on both sides (`squeeze(1)` the
# logits, or `unsqueeze(1)` the targets).

# %%
print("loss:", F.binary_cross_entropy_with_logits(binary_logits, is_even.float()).item())

# %% [markdown]
# ## 5. Autograd errors
#
# ### `backward()` on a tensor with more than one element
#
# `loss.backward()` computes the gradient of one number. Called on a tensor of
# several numbers, it would need to know how to weigh them, so it refuses. The
# usual cause is a loss with `reduction="none"` (one loss per sample):

# %%
model = nn.Linear(4, 3)
per_sample = F.cross_entropy(model(torch.randn(5, 4)), torch.tensor([0, 2, 1, 1, 0]), reduction="none")
try:
    per_sample.backward()
except RuntimeError as error:
    report(error)

# %% [markdown]
# Reduce to one number first: `per_sample.mean()` gives the same gradients as
# the default `reduction="mean"`; `.sum()` gives gradients N times larger, which
# changes the effective learning rate.

# %%
per_sample.mean().backward()
print("gradient shape:", list(model.weight.grad.shape))

# %% [markdown]
# ### `backward()` twice through the same graph
#
# To save memory, `backward()` frees the intermediate values it used. A second
# `backward()` through the same part of the graph finds them gone. This happens
# when a result computed **once, outside the loop** is reused in every step:

# %%
torch.manual_seed(0)
encoder, head = nn.Linear(4, 8), nn.Linear(8, 2)
optimizer = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
inputs, targets = torch.randn(6, 4), torch.tensor([0, 1, 1, 0, 1, 0])
features = torch.relu(encoder(inputs))  # computed once: its graph is shared by every step below
try:
    for step in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(head(features), targets)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
except RuntimeError as error:
    report(error)

# %% [markdown]
# Step 0 worked; step 1 had to go back through the encoder's part of the graph
# again, which step 0 had already freed. The message suggests
# `retain_graph=True`, but here that would be wrong: the encoder's weights change
# at every step, yet the features (and so the encoder's gradient) would stay those
# of step 0. Compute everything inside the loop instead:

# %%
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(head(torch.relu(encoder(inputs))), targets)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")

# %% [markdown]
# (If the encoder is meant to stay fixed, compute the features once under
# `torch.no_grad()`, or `.detach()` them: then there is no encoder graph to go
# back through. The same `detach()` is the fix for a recurrent network's hidden
# state carried from one batch to the next.)
#
# ### An in-place change of a tensor autograd still needs
#
# Many operations save a tensor for the backward pass: `relu` and `sigmoid` save
# their output, a multiplication saves both inputs. Changing such a tensor in
# place (`x += ...`, `x[...] = ...`, a method ending in `_`) would make the
# gradient wrong, so autograd counts versions and refuses at `backward()` time:

# %%
layer = nn.Linear(4, 3)
hidden = torch.relu(layer(torch.randn(2, 4)))
hidden[:, 0] = 0.0  # switch off the first unit, in place
try:
    hidden.sum().backward()
except RuntimeError as error:
    report(error)

# %% [markdown]
# Read the message: the tensor of shape `[2, 3]` that is the output of `Relu` is
# at version 1 (changed once) and its backward expected version 0. Note that the
# error comes from `backward()`, not from the line that did the change; the
# message's hint, anomaly detection (section 8), shows the forward line
# whose saved tensor was changed. The fix is an out-of-place version that makes a
# new tensor:

# %%
hidden = torch.relu(layer(torch.randn(2, 4)))
mask = torch.tensor([0.0, 1.0, 1.0])
hidden = hidden * mask  # a new tensor; relu's saved output is untouched
hidden.sum().backward()
print("gradient of the weight, row 0 (switched off):", layer.weight.grad[0].tolist())

# %% [markdown]
# ### Exercise 4 (2 points): fix `GatedBlock`
#
# `GatedBlock` computes `x + sigmoid(gate(x)) * linear(x)`. Its forward pass runs,
# but training fails at `backward()`. Fix `forward` so that the output stays the
# same and the gradients flow to both layers. (Keep the two layers as they are.)

# %% starter="ex_gated_block"
class GatedBlock(nn.Module):
    """A gated residual block: x + sigmoid(gate(x)) * linear(x)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.gate(x))
        h *= self.linear(x)
        return h + x


# %% solution="ex_gated_block"
class GatedBlock(nn.Module):
    """A gated residual block: x + sigmoid(gate(x)) * linear(x)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        h = torch.sigmoid(self.gate(x))
        h = h * self.linear(x)  # a new tensor: sigmoid's backward needs its output unchanged
        return h + x
        ### END SOLUTION


# %% check="ex_gated_block_check"
check.check_gated_block(GatedBlock)

# %% graded="ex_gated_block_tests" points=2
check.check_gated_block(GatedBlock)
### BEGIN HIDDEN TESTS
check.check_gated_block(GatedBlock, inputs=[(13, 5, 7), (14, 1, 3)])
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Silent bugs: no error, a worse model
#
# The bugs in this section raise nothing. The program runs, the loss is a
# number, and the only symptom is a model that learns worse, or an accuracy that
# is wrong. They are found by knowing them, and by comparing with a run that is
# known to be right.
#
# ### Forgetting `zero_grad()`
#
# `backward()` **adds** to `.grad` (lesson 02). Without `optimizer.zero_grad()` at
# every step, each step's gradient is the sum of all the gradients so far, so the
# update keeps pushing in old directions. Here is the same small MNIST model
# trained twice, identical except for that one line:

# %%
def make_digit_model() -> nn.Sequential:
    """A small MNIST classifier with dropout, the same initial weights every time."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))


def train_digits(zero_grad: bool, epochs: int = 2) -> tuple[nn.Module, list[float]]:
    """Train on the training digits with SGD; return the model and the loss of every step."""
    model, losses = make_digit_model(), []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    for _ in range(epochs):
        for start in range(0, N_TRAIN, BATCH):
            if zero_grad:
                optimizer.zero_grad()
            loss = F.cross_entropy(model(train_images[start:start + BATCH]), train_labels[start:start + BATCH])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return model, losses


def test_set_accuracy(model: nn.Module) -> float:
    """Accuracy on the test digits, in eval mode."""
    model.eval()
    with torch.no_grad():
        return (model(test_images).argmax(dim=1) == test_labels).float().mean().item()


with_zero_grad, losses_with = train_digits(zero_grad=True)
without_zero_grad, losses_without = train_digits(zero_grad=False)
print("every 4th step's loss, with zero_grad:   ", [round(v, 2) for v in losses_with[::4]])
print("every 4th step's loss, without zero_grad:", [round(v, 2) for v in losses_without[::4]])
print(f"test accuracy: {test_set_accuracy(with_zero_grad):.1%} with zero_grad, "
      f"{test_set_accuracy(without_zero_grad):.1%} without")

# %% [markdown]
# With `zero_grad()` the loss falls, with some noise from batch to batch. Without it, the loss jumps up and
# down, because each update still carries every earlier batch's gradient, and the
# model ends up worse. Nothing warned us; only the curve did. (Accumulating
# gradients on purpose, over a few small batches before one step, is a real
# technique, lesson 07; then `zero_grad()` comes after each `step()`.)
#
# ### Exercise 5 (2 points): fix `fit`
#
# `fit(model, loader, epochs, lr)` trains `model` in place with SGD and
# cross-entropy, in training mode whatever mode the model arrives in, and returns
# the loss of every step, as Python floats. It runs
# without error, but its model learns worse than the same loop written correctly.
# Fix it.

# %% starter="ex_fit"
def fit(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """Train ``model`` with SGD and cross-entropy; return the loss of every step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        for inputs, targets in loader:
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


# %% solution="ex_fit"
def fit(model: nn.Module, loader: DataLoader, epochs: int, lr: float) -> list[float]:
    """Train ``model`` with SGD and cross-entropy; return the loss of every step."""
    ### BEGIN SOLUTION
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()  # every step, not every epoch: each step starts from zero gradients
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses
    ### END SOLUTION


# %% check="ex_fit_check"
check.check_fit(fit)

# %% graded="ex_fit_tests" points=2
check.check_fit(fit)
### BEGIN HIDDEN TESTS
check.check_fit(fit, inputs=[check.FitCase(15, 30, 7, 2, 0.05), check.FitCase(16, 12, 4, 1, 0.3)])
### END HIDDEN TESTS

# %% [markdown]
# ### Forgetting `eval()`
#
# Dropout switches units off at random, and batch norm normalises with the
# statistics of the current batch, but only in **training mode**. A model is in
# training mode from the moment it is built until `model.eval()` is called
# (lesson 04). Evaluate it in training mode and its predictions are randomly
# damaged, and change from one call to the next:

# %%
model = with_zero_grad  # the model trained above, with dropout
model.train()  # as it is after training, if nobody calls eval()
with torch.no_grad():
    first, second = model(test_images).argmax(dim=1), model(test_images).argmax(dim=1)
    print(f"training mode: accuracy {(first == test_labels).float().mean().item():.1%}, "
          f"{(first != second).sum().item()} of {N_TEST} predictions changed between two calls")
print(f"eval mode:     accuracy {test_set_accuracy(model):.1%}")

# %% [markdown]
# `torch.no_grad()` does not switch the mode: it only stops recording the graph.
# Evaluation needs both, `model.eval()` and `no_grad()`.
#
# ### Exercise 6 (2 points): fix `accuracy`
#
# `accuracy(model, images, labels)` should return, as a Python float, the share of
# `images` the model classifies right, and leave the model in eval mode. It
# returns a number, but not the model's real accuracy. Fix it.

# %% starter="ex_accuracy"
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    model.training = False
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


# %% solution="ex_accuracy"
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose predicted class equals ``labels``."""
    ### BEGIN SOLUTION
    model.train(False)  # what model.eval() does: every submodule's flag; dropout off, batch norm's running statistics
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()
    ### END SOLUTION


# %% check="ex_accuracy_check"
check.check_accuracy(accuracy)

# %% graded="ex_accuracy_tests" points=2
check.check_accuracy(accuracy)
### BEGIN HIDDEN TESTS
check.check_accuracy(accuracy, inputs=[(17, 33), (18, 8)])
### END HIDDEN TESTS

# %% [markdown]
# ### Softmax before `cross_entropy`
#
# `F.cross_entropy` (and `nn.CrossEntropyLoss`) applies log-softmax to its input
# itself, so it wants the raw logits. A model that ends in `nn.Softmax` hands it
# probabilities instead, which it treats as logits: softmax is applied twice. No
# error; but with ten classes the loss can no longer go below about 1.46, even
# for perfect predictions, and the gradients shrink, so training crawls:

# %%
batch_images, batch_labels = train_images[:BATCH], train_labels[:BATCH]
with torch.no_grad():
    logits = model(batch_images)
    perfect = F.one_hot(batch_labels, 10).float()  # the probabilities of a model that is always sure and right
    print(f"cross_entropy(logits):            {F.cross_entropy(logits, batch_labels).item():.3f}")
    print(f"cross_entropy(softmax(logits)):   {F.cross_entropy(logits.softmax(dim=1), batch_labels).item():.3f}")
    print(f"after a softmax, at best:         {F.cross_entropy(perfect, batch_labels).item():.3f}")

# %% [markdown]
# Keep the model's last layer a plain `nn.Linear` and pass its output to the
# loss; apply `softmax` only where you want to show probabilities.
#
# ### A shuffled test set compared with labels in order
#
# Predictions must be compared with the labels **of the same samples**. A loader
# with `shuffle=True` hands out the samples in a new random order, so its
# predictions no longer line up with a label list taken from the dataset in
# order. The accuracy drops to chance (10% for ten digits) and looks like a model
# that learned nothing:

# %%
test_set = TensorDataset(test_images, test_labels)
model.eval()
for shuffle in (True, False):
    loader = DataLoader(test_set, batch_size=BATCH, shuffle=shuffle)
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    print(f"shuffle={shuffle!s:5}: accuracy {(predictions == test_labels).float().mean().item():.1%}")

# %% [markdown]
# Evaluate with `shuffle=False` (shuffling helps training only), or compare each
# batch's predictions with the labels of that same batch. The same pairing bug
# appears when images and labels are shuffled or sorted separately.
#
# ### Exercise 7 (2 points): fix `dataset_accuracy`
#
# `dataset_accuracy(model, test_set, batch_size)` should return, as a Python
# float, the share of the dataset's samples that the model classifies right. Its
# author took the labels from the loader itself, so that they come in the same
# batches as the predictions; yet it reports an accuracy near chance for a model
# that is good. Fix it.

# %% starter="ex_dataset_accuracy"
def dataset_accuracy(model: nn.Module, test_set: torch.utils.data.Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    loader = DataLoader(test_set, batch_size=batch_size, shuffle=True)
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images).argmax(dim=1) for images, _ in loader])
    labels = torch.cat([labels for _, labels in loader])
    return (predictions == labels).float().mean().item()


# %% solution="ex_dataset_accuracy"
def dataset_accuracy(model: nn.Module, test_set: torch.utils.data.Dataset, batch_size: int) -> float:
    """Accuracy of ``model`` over a dataset of (image, label) pairs, predicted batch by batch."""
    ### BEGIN SOLUTION
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=batch_size):  # one pass: each batch with its labels
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(test_set)
    ### END SOLUTION


# %% check="ex_dataset_accuracy_check"
check.check_dataset_accuracy(dataset_accuracy)

# %% graded="ex_dataset_accuracy_tests" points=2
check.check_dataset_accuracy(dataset_accuracy)
### BEGIN HIDDEN TESTS
check.check_dataset_accuracy(dataset_accuracy, inputs=[(19, 40, 16), (20, 9, 9)])
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Memory
#
# ### Memory that grows: kept loss tensors
#
# A loss tensor holds on to the graph that computed it, and a graph that has
# not been through `backward()` holds every intermediate result saved for it
# (lesson 02). Keep the loss tensors in a list, and all those graphs stay alive;
# memory grows with every batch until the list goes away. The course's
# `SavedTensorBytes` (in `helpers.memory`) measures it: inside its `with` block
# it sees every tensor autograd saves for a backward pass (through
# `torch.autograd.graph.saved_tensors_hooks`), and `saved.held()` counts the bytes
# that some graph still holds. Tensors that exist anyway, like the weights and the
# images, are not counted.

# %%
OWNED = [*model.parameters(), test_images, test_labels]
for keep in ("loss tensors", "loss.item()"):
    with SavedTensorBytes(OWNED) as saved:
        log = []
        for batch, start in enumerate(range(0, N_TEST, BATCH), start=1):
            loss = F.cross_entropy(model(test_images[start:start + BATCH]), test_labels[start:start + BATCH])
            log.append(loss if keep == "loss tensors" else loss.item())
            if batch in (1, 5, 10):
                print(f"{keep:12}: after {batch:2} batches the graphs hold {saved.held() / 2**20:5.2f} MiB")
    del loss, log

# %% [markdown]
# Kept tensors: the memory grows by the same amount with every batch, the saved
# activations of one forward pass. With `loss.item()` only the current batch's
# graph exists (the last one, still referenced by `loss`, shows as the small
# constant), and it is freed when `loss` is replaced. In a real evaluation loop
# with a large model, the growing version is how a GPU runs out of memory halfway
# through. The rules: log `loss.item()`, and evaluate under `torch.no_grad()`,
# which builds no graph at all.
#
# ### Out of memory: what to try
#
# When a tensor does not fit, the allocator raises. On a GPU this is
# `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`, with a
# summary of what is in use; on the CPU it is a `RuntimeError` from
# `DefaultCPUAllocator`. Asking for an absurd amount fails at once without using
# any memory, which makes a safe demonstration:

# %%
try:
    torch.empty(2**50, dtype=torch.uint8, device=DEVICE)  # one petabyte
except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError too
    report(error)

# %% [markdown]
# What to try, in this order:
#
# 1. **A smaller batch.** The activations saved for backward grow with the batch
#    size (measured below); the weights do not. Half the batch is roughly half
#    the activation memory. (To keep the effect of a large batch, accumulate the
#    gradients of several small ones before each step, lesson 07.)
# 2. **`torch.no_grad()` wherever nothing is trained**: evaluation, predictions,
#    metrics. No graph, no saved activations.
# 3. **Release references** you no longer need: loss tensors in lists (above),
#    outputs kept "for later", a model from an earlier experiment. `del` the name
#    and the memory can be reused.
# 4. **Smaller numbers**: mixed precision halves the activations (lesson 07).
# 5. **Activation checkpointing** (`torch.utils.checkpoint.checkpoint(block, x,
#    use_reentrant=False)`): the activations inside `block` are not saved but
#    computed again during backward, trading compute for memory (lesson 07).
# 6. **Fragmentation**: when the error says much memory is "reserved by PyTorch
#    but unallocated", the free memory is there but in pieces too small for the
#    new tensor. Setting the environment variable
#    `PYTORCH_ALLOC_CONF=expandable_segments:True` (older releases read
#    `PYTORCH_CUDA_ALLOC_CONF`) before PyTorch starts lets the allocator grow its
#    blocks instead.
# 7. **Last resort: `torch.cuda.empty_cache()`.** PyTorch keeps freed GPU memory
#    in a cache for reuse; `empty_cache()` hands that cache back to the driver, so
#    that *other* processes can use it, and frees nothing you still reference.
#    It does not fix a leak; it only makes `nvidia-smi` show less.
#
# The measurement for points 1 and 2: bytes saved for backward by one forward
# pass of the digit model, for several batch sizes, and under `no_grad`:

# %%
for batch_size in (50, 100, 200):
    with SavedTensorBytes(OWNED) as saved:
        loss = F.cross_entropy(model(test_images[:batch_size]), test_labels[:batch_size])
        print(f"batch {batch_size:3}: {saved.held() / 2**10:6.0f} KiB saved for backward")
with SavedTensorBytes(OWNED) as saved, torch.no_grad():
    loss = F.cross_entropy(model(test_images[:200]), test_labels[:200])
    print(f"batch 200 under no_grad: {saved.held() / 2**10:.0f} KiB saved for backward")
del loss

# %% [markdown]
# On a GPU, `torch.cuda.memory_allocated()` (memory your tensors use now),
# `torch.cuda.max_memory_allocated()` (the peak) and `torch.cuda.memory_summary()`
# show where the memory goes:

# %% tags=["nbval-ignore-output"]
if torch.cuda.is_available():
    before = torch.cuda.memory_allocated()
    big = torch.empty(64, 2**20, device="cuda")  # 256 MiB of float32
    print(f"allocated: {before / 2**20:.0f} MiB before, {torch.cuda.memory_allocated() / 2**20:.0f} MiB with `big`")
    del big  # release the reference: the memory goes back to PyTorch's cache
    print(f"after del: {torch.cuda.memory_allocated() / 2**20:.0f} MiB allocated, "
          f"{torch.cuda.memory_reserved() / 2**20:.0f} MiB still reserved by the cache")
    torch.cuda.empty_cache()  # the last resort: give the cache back to the driver
    print(f"after empty_cache: {torch.cuda.memory_reserved() / 2**20:.0f} MiB reserved")
else:
    print("No GPU here: this cell would show torch.cuda.memory_allocated() before and after `del` and empty_cache().")

# %% [markdown]
# ## 8. NaNs, and anomaly detection
#
# A loss that turns into `nan` usually comes from a number that overflowed or
# underflowed a few operations earlier: `log(0) = -inf`, then `0 * -inf = nan`,
# and from there every operation passes the NaN on. A cross-entropy written by
# hand as `log(softmax(...))` does exactly that when one logit is far larger than
# the others, because softmax rounds the small probabilities to exactly 0:

# %%
def hand_written_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy as the formula reads: -sum(one_hot * log(softmax)). Numerically fragile."""
    probabilities = logits.softmax(dim=1)
    return -(F.one_hot(labels, logits.shape[1]) * probabilities.log()).sum(dim=1).mean()


large_logits = torch.tensor([[300.0, -300.0, 0.0]], requires_grad=True)
print("loss:", hand_written_cross_entropy(large_logits, torch.tensor([1])))

# %% [markdown]
# `torch.autograd.detect_anomaly()` (for a block) or
# `torch.autograd.set_detect_anomaly(True)` (from then on) makes the backward pass
# check every operation's result for NaN and stop at the first one, naming the
# operation, and warn with the line of the forward pass that created it:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        with torch.autograd.detect_anomaly():
            hand_written_cross_entropy(large_logits, torch.tensor([1])).backward()
    except RuntimeError as error:
        report(error)
for warning in caught:
    if "Traceback of forward call" in str(warning.message):
        print("forward line:", str(warning.message).splitlines()[-2].strip())

# %% [markdown]
# `LogBackward0` is the backward of `.log()`: the logarithm of the probabilities
# that softmax rounded to zero. The fix is the numerically stable function that
# never takes the logarithm of a rounded probability: `F.log_softmax`, or simply
# `F.cross_entropy`, which takes the logits directly:

# %%
stable = F.cross_entropy(large_logits, torch.tensor([1]))
stable.backward()
print("loss:", stable.item(), " gradient:", large_logits.grad.tolist())

# %% [markdown]
# Anomaly detection records a traceback for every operation and checks every
# backward result, so every step gets slower. Here are 10 training steps of the
# digit model with and without it, timed as lesson 07 taught: a warm-up run,
# then the median of several runs, since one run can be slowed by anything else
# the machine does (the times vary from machine to machine):

# %% tags=["nbval-ignore-output"]
def ten_steps(anomaly_detection: bool) -> None:
    """10 training steps of the digit model on one batch, with or without anomaly detection."""
    model = make_digit_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with warnings.catch_warnings(), torch.autograd.set_detect_anomaly(anomaly_detection):
        warnings.simplefilter("ignore")  # it warns that it is slow each time it is switched on
        for _ in range(10):
            optimizer.zero_grad()
            F.cross_entropy(model(train_images[:BATCH]), train_labels[:BATCH]).backward()
            optimizer.step()


plain = time_call(lambda: ten_steps(False), repeat=5)
detecting = time_call(lambda: ten_steps(True), repeat=5)
print(f"10 steps, plain:                  {plain}")
print(f"10 steps, with anomaly detection: {detecting}")
print(f"with anomaly detection, 10 steps took {detecting.median / plain.median:.1f}x the plain time (ratio of the medians)")

# %% [markdown]
# Switch it on to find a NaN, and off again for real training (`set_detect_anomaly`
# works as a `with` block too, as above). Other places NaNs
# come from: a learning rate so high the weights overflow (the loss grows, then
# becomes `inf`, then `nan`), `sqrt` of 0 in backward (lesson 02), division by a
# zero standard deviation, and `nan` already in the data
# (`torch.isnan(images).any()` checks).
#
# ## 9. How to debug: a checklist
#
# 1. **Read the last line of the traceback first**, then go up to the last line
#    of your own code. The numbers in the message (shapes, versions, labels) are
#    usually the whole story.
# 2. **Print shapes, dtypes and devices** of every tensor on the failing line.
#    Nearly every error above is one of the three.
# 3. **Run one batch** through the whole program (forward, loss, backward, step)
#    before starting a long run: most errors appear in the first step.
# 4. **Overfit one batch**: train on a single small batch for a hundred steps.
#    A correct model and training loop drive its loss close to 0. If it does not,
#    the bug is in the model, the loss or the loop, not in the data or the
#    hyperparameters of a long run.
# 5. **NaN?** Check the data, lower the learning rate, and switch on anomaly
#    detection to find the operation.
# 6. **Out of memory?** Smaller batch, `no_grad()` for evaluation, release
#    references (`.item()` for logs), then mixed precision, activation
#    checkpointing, `expandable_segments`; `empty_cache()` last.
# 7. **Silent bug suspected?** Compare with a run you trust: `zero_grad()` every
#    step, `train()` to train and `eval()` to evaluate, raw logits into
#    `cross_entropy`, predictions and labels in the same order.
#
# Points 2, 3 and 4 together, on the digit model: print what flows through one
# batch, then overfit that batch.

# %%
def describe_tensors(**tensors: torch.Tensor) -> None:
    """One line per tensor: its shape, dtype and device."""
    for name, t in tensors.items():
        print(f"{name:8} shape={list(t.shape)!s:16} dtype={str(t.dtype):14} device={t.device.type}")


one_batch_images, one_batch_labels = train_images[:32], train_labels[:32]
model = make_digit_model()
describe_tensors(images=one_batch_images, labels=one_batch_labels, logits=model(one_batch_images))

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
for step in range(1, 101):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(one_batch_images), one_batch_labels)
    loss.backward()
    optimizer.step()
    if step in (1, 25, 50, 100):
        print(f"step {step:3}: loss {loss.item():.4f}")

# %% [markdown]
# The loss goes close to zero: the model can fit the data it sees, and the loop
# updates it correctly. Had the loss stayed near `ln(10) = 2.3` (guessing), the
# bug would be in these few lines, and they are far easier to inspect than a
# whole training run.
#
# ## 10. Three bugs in one program
#
# Real programs rarely have one bug at a time. `train_and_evaluate(model,
# train_set, test_set, epochs, lr)` trains `model` in place with SGD and
# cross-entropy on `train_set`, in batches of 8 in the dataset's order (the
# model's training mode and the SGD step are part of the job), and returns two
# things: the loss of every step as Python floats, and the accuracy of the trained
# model on `test_set` as a Python float. It runs without an error, yet it has
# **three bugs**, each from this lesson. They are not marked; use the checklist
# above and the self-check's symptoms to find them. Each bug you fix earns its
# own points (2 for the training, 2 for the evaluation, 1 for the history).
#
# ### Exercise 8 (5 points): fix `train_and_evaluate`

# %% starter="ex_three_bugs"
def train_and_evaluate(model: nn.Module, train_set: torch.utils.data.Dataset, test_set: torch.utils.data.Dataset,
                       epochs: int, lr: float) -> tuple[list[float], float]:
    """Train ``model`` in place; return the loss of every step and the accuracy on ``test_set``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            outputs = model(inputs).softmax(dim=1)
            loss = F.cross_entropy(outputs, targets)
            loss.backward()
            optimizer.step()
            history.append(loss)
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)


# %% solution="ex_three_bugs"
def train_and_evaluate(model: nn.Module, train_set: torch.utils.data.Dataset, test_set: torch.utils.data.Dataset,
                       epochs: int, lr: float) -> tuple[list[float], float]:
    """Train ``model`` in place; return the loss of every step and the accuracy on ``test_set``."""
    ### BEGIN SOLUTION
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        for inputs, targets in DataLoader(train_set, batch_size=8):
            optimizer.zero_grad()
            logits = model(inputs)  # raw logits: cross_entropy applies log-softmax itself
            loss = F.cross_entropy(logits, targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())  # a number; the tensor would keep the step's graph alive
    model.eval()  # dropout off, batch norm with its running statistics
    correct = 0
    with torch.no_grad():
        for inputs, targets in DataLoader(test_set, batch_size=64):
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return history, correct / len(test_set)
    ### END SOLUTION


# %% check="ex_three_bugs_check"
check.check_train_and_evaluate(train_and_evaluate)

# %% graded="ex_three_bugs_training_tests" points=2
check.check_train_and_evaluate(train_and_evaluate, "training")
### BEGIN HIDDEN TESTS
check.check_train_and_evaluate(train_and_evaluate, "training",
                               inputs=[check.TrainCase(2, 64, 80, 3, 0.3), check.TrainCase(3, 35, 40, 6, 0.3)])
### END HIDDEN TESTS

# %% graded="ex_three_bugs_evaluation_tests" points=2
check.check_train_and_evaluate(train_and_evaluate, "evaluation")
### BEGIN HIDDEN TESTS
check.check_train_and_evaluate(train_and_evaluate, "evaluation",
                               inputs=[check.TrainCase(2, 64, 80, 3, 0.3), check.TrainCase(3, 35, 40, 6, 0.3)])
### END HIDDEN TESTS

# %% graded="ex_three_bugs_history_tests" points=1
check.check_train_and_evaluate(train_and_evaluate, "history")
### BEGIN HIDDEN TESTS
check.check_train_and_evaluate(train_and_evaluate, "history",
                               inputs=[check.TrainCase(2, 64, 80, 3, 0.3), check.TrainCase(3, 35, 40, 6, 0.3)])
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# | symptom | usual cause | fix |
# | --- | --- | --- |
# | `Expected all tensors to be on the same device` | a batch (or a new tensor) not on the model's device | `.to(device)` on every tensor of the batch |
# | `mat1 and mat2 shapes cannot be multiplied`, `expected input ... to have N channels` | a layer's size does not match the previous layer's output | print the shape that arrives; fix `in_features` / `in_channels` |
# | `multi-target not supported`, `expected target dtype to be Long` | cross-entropy targets of shape `[N, 1]` or float | `squeeze(1)`, `.long()` |
# | `Target N is out of bounds` (GPU: `device-side assert triggered`) | labels outside `0 .. C-1` | map the labels where the data is read |
# | `result type Float can't be cast to ... Long`, `Target size ... must be the same as input size` | BCE with integer or differently shaped targets | `.float()`, same shape |
# | `grad can be implicitly created only for scalar outputs` | backward on a per-sample loss | `.mean()` |
# | `Trying to backward through the graph a second time` | a result computed once and reused in every step | compute it inside the loop, or `detach()` it |
# | `modified by an inplace operation` | `x *= ...`, `x[...] = ...` on a tensor autograd saved | an out-of-place version |
# | loss jumps around, no error | no `zero_grad()` | `optimizer.zero_grad()` every step |
# | accuracy lower and random, no error | no `eval()` | `model.eval()` before evaluating |
# | loss stuck above 1.46 (ten classes), no error | softmax before `cross_entropy` | pass the raw logits |
# | accuracy at chance, no error | shuffled predictions, labels in order | `shuffle=False` to evaluate |
# | memory grows every batch | loss tensors kept | `loss.item()`, `no_grad()` |
# | `out of memory` | too much at once | smaller batch, `no_grad()`, release references, mixed precision, checkpointing |
# | `nan` loss | overflow or `log(0)` | stable functions; anomaly detection to find it |
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
