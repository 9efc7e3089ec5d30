# %% [markdown]
# # 04 Defining models
#
# A PyTorch model is a Python class. Its `__init__` creates the layers, its
# `forward` says how data flows through them, and `nn.Module`, the class it
# inherits from, does the bookkeeping: it finds every parameter, moves them
# between devices, saves and loads them, and switches the model between
# training and evaluation behaviour.
#
# In this lesson you build two classic image classifiers, LeNet and the MNIST
# network that lesson 05 trains, and learn what surrounds them: how layers must
# fit together, `nn.Sequential`, counting and initialising parameters, writing
# your own loss, `train()` versus `eval()`, and batch normalisation.
# There are 9 graded exercises worth 20 points. Each has a self-check cell right
# below it: run it, read its message, fix, repeat.

# %% locked="setup"
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers.checks import models as check
from helpers.data import MNIST_MEAN, MNIST_STD, mnist_dataset
from helpers.device import pick_device

torch.manual_seed(0)
DEVICE = pick_device()

# %% [markdown]
# ## 1. A model is an `nn.Module` subclass
#
# Every model follows the same pattern:
#
# - `__init__` calls `super().__init__()` first, then creates the layers and
#   assigns them to attributes (`self.hidden = nn.Linear(4, 3)`). Assigning a
#   module to an attribute *registers* it: its parameters now belong to the model.
# - `forward(x)` takes the input and returns the output, using those layers.
#   Any Python is allowed here: `if`, loops, printing, several inputs.

# %%
class TinyNet(nn.Module):
    """Four input features -> three hidden units with ReLU -> two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.hidden(x)))


net = TinyNet()
print(net)
x = torch.randn(5, 4)  # a batch of 5 examples, 4 features each
print("output shape:", net(x).shape)

# %% [markdown]
# Notice the call: `net(x)`, not `net.forward(x)`. Calling the module runs
# `nn.Module.__call__`, which runs `forward` *and* everything registered around
# it: **hooks**. A forward hook is a function PyTorch calls with the module, its
# input and its output every time the module runs. Debuggers, profilers and
# feature extractors are built on hooks, and calling `forward` directly silently
# skips them. Watch:

# %%
seen = []
handle = net.register_forward_hook(lambda module, inputs, output: seen.append(list(output.shape)))
net(x)
print("after net(x):        ", seen)
net.forward(x)
print("after net.forward(x):", seen, " <- the hook did not fire")
handle.remove()  # hooks stay until removed

# %% [markdown]
# `super().__init__()` is not optional. `nn.Module.__init__` creates the
# dictionaries where parameters, submodules and hooks are registered; a class
# that skips it fails at the first layer it assigns:

# %%
class Forgetful(nn.Module):
    def __init__(self) -> None:
        self.hidden = nn.Linear(4, 3)  # no super().__init__() before this line


try:
    Forgetful()
except AttributeError as error:
    print("AttributeError:", error)

# %% [markdown]
# ## 2. Layers must fit together
#
# A `nn.Conv2d(in_channels, out_channels, kernel_size)` expects inputs of shape
# `[N, in_channels, H, W]` and produces `[N, out_channels, H', W']`. So each
# convolution's `in_channels` must equal the previous one's `out_channels`, and a
# `nn.Linear(in_features, out_features)` must be given exactly `in_features`
# numbers per example. Get one wrong and the error only appears when data flows
# through, so learn to read it:

# %%
conv1 = nn.Conv2d(1, 6, kernel_size=5)
conv2 = nn.Conv2d(3, 16, kernel_size=5)  # wrong: conv1 produces 6 channels, not 3
images = torch.randn(2, 1, 32, 32)
try:
    conv2(conv1(images))
except RuntimeError as error:
    print("RuntimeError:", error)
print("conv2.weight has shape", list(conv2.weight.shape), "= [out_channels, in_channels, kernel height, kernel width]")

# %% [markdown]
# Read it as: "conv2's weight is `[16, 3, 5, 5]`, so it wants 3 input channels;
# the tensor arriving (`[2, 6, 28, 28]`, conv1's output) has 6." The fix is
# `nn.Conv2d(6, 16, 5)`. A `Linear` layer with the wrong `in_features` fails
# with a matrix-product message instead: `mat1` is the input `[N, features]`,
# `mat2` the transposed weight `[in_features, out_features]`, and the two middle
# numbers must agree.

# %%
fc = nn.Linear(256, 120)  # wrong: 16 channels of 5 x 5 are 400 features
try:
    fc(torch.randn(2, 400))
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# To get the sizes right, track the spatial size. A convolution with kernel `k`,
# padding `p` and stride `s` turns size `H` into `(H + 2p - k) // s + 1`; a 2 x 2
# max-pool halves it (rounding down). For a 32 x 32 image and two rounds of
# "5 x 5 convolution, then pool":
#
# | layer | output shape |
# | --- | --- |
# | input | `[N, 1, 32, 32]` |
# | conv 5 x 5, 6 channels | `[N, 6, 28, 28]` |
# | max-pool 2 | `[N, 6, 14, 14]` |
# | conv 5 x 5, 16 channels | `[N, 16, 10, 10]` |
# | max-pool 2 | `[N, 16, 5, 5]` |
# | flatten | `[N, 400]` (16 * 5 * 5) |
#
# ## 3. LeNet
#
# LeNet-5 is the classic small convolutional network for 32 x 32 grey-scale
# images. Layers that hold parameters (convolutions, linear layers) are created
# in `__init__`; operations without parameters (ReLU, max-pooling, flatten) can
# be called as functions from `torch.nn.functional` (imported as `F`) inside
# `forward`.
#
# ### Exercise 1 (3 points): LeNet
#
# Complete the class `LeNet` with exactly these layers, under exactly these names
# (they become the keys of the saved weights):
#
# - `conv1`: convolution, 1 -> 6 channels, 5 x 5 kernel
# - `conv2`: convolution, 6 -> 16 channels, 5 x 5 kernel
# - `fc1`: linear, 16 * 5 * 5 -> 120; `fc2`: 120 -> 84; `fc3`: 84 -> 10
#
# and a `forward` that maps `[N, 1, 32, 32]` images to `[N, 10]` scores, calling
# each layer as a module (`self.conv1(x)`, which runs its hooks: section 1): each
# convolution is followed by ReLU and a 2 x 2 max-pool, then flatten, then
# `fc1` and `fc2` each followed by ReLU, and `fc3` with nothing after it (the
# raw scores, called **logits**).
# (Creating a layer draws its first weights from PyTorch's global random
# generator: that is expected here.)
#
# *Hint:* ReLU and max-pooling have functional forms in `torch.nn.functional`;
# look up their arguments. Flattening must keep dimension 0, the batch (the table
# above shows the shapes to expect). One point checks the layers (LeNet has 61,706
# parameters), two check `forward`.

# %% solution="ex_lenet"
class LeNet(nn.Module):
    """LeNet-5: two convolutions, three linear layers; 32x32 grey images to 10 logits."""

    def __init__(self) -> None:
        ### BEGIN SOLUTION
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 1, 32, 32]`` images to ``[N, 10]`` logits."""
        ### BEGIN SOLUTION
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)
        ### END SOLUTION


# %% check="ex_lenet_check"
check.check_lenet_layers(LeNet)
check.check_lenet_forward(LeNet)

# %% graded="ex_lenet_layers_tests" points=1
check.check_lenet_layers(LeNet)
### BEGIN HIDDEN TESTS
check.check_lenet_layers(LeNet, inputs=[2, 9])
### END HIDDEN TESTS

# %% graded="ex_lenet_forward_tests" points=2
check.check_lenet_forward(LeNet)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(401)
check.check_lenet_forward(LeNet, inputs=[torch.randn(1, 1, 32, 32, generator=g), torch.randn(6, 1, 32, 32, generator=g) * 4])
### END HIDDEN TESTS

# %% [markdown]
# Now real digits. MNIST images are 28 x 28, so padding 2 pixels on each side
# gives LeNet its 32 x 32. Forward hooks on every layer print the shape of what
# comes out, which is the quickest way to see a network's data flow (and to
# debug one).

# %%
pad_to_32 = transforms.Compose([
    transforms.Pad(2),
    transforms.ToTensor(),
    transforms.Normalize((MNIST_MEAN,), (MNIST_STD,)),
])
digits_32 = mnist_dataset(train=False, transform=pad_to_32)
batch = torch.stack([digits_32[i][0] for i in range(8)])
print("input ", list(batch.shape))

lenet = LeNet()
handles = [layer.register_forward_hook(lambda module, inputs, output, name=name: print(f"{name:6}", list(output.shape)))
           for name, layer in lenet.named_children()]
_ = lenet(batch)  # the hooks print as the batch flows through
for handle in handles:
    handle.remove()

# %% [markdown]
# ### Three ways to flatten
#
# Between the last convolution and the first linear layer, `[N, 16, 5, 5]` must
# become `[N, 400]`. Older code computes the number of features by hand with a
# helper usually called `num_flat_features` and then calls `view`; today
# `torch.flatten(x, 1)` (in `forward`) or an `nn.Flatten()` layer (in a
# `nn.Sequential`, see section 4) do the same in one step. All three keep
# dimension 0, the batch.

# %%
def num_flat_features(x: torch.Tensor) -> int:
    """Features per example: the product of every dimension except the batch."""
    count = 1
    for size in x.shape[1:]:
        count *= size
    return count


maps = torch.randn(8, 16, 5, 5)
by_hand = maps.view(-1, num_flat_features(maps))
print(num_flat_features(maps), list(by_hand.shape),
      torch.equal(by_hand, torch.flatten(maps, 1)), torch.equal(by_hand, nn.Flatten()(maps)))

# %% [markdown]
# All of them are correct for the inputs in this lesson. `torch.flatten` (or
# `reshape`) is the safer habit, though: `view` only works on a contiguous tensor
# (lesson 01), and feature maps are not always contiguous. A batch stored in the
# `channels_last` memory format (a speed-up lesson 07 uses) gives convolution
# outputs in that format too, and `view` then fails:

# %%
channels_last_maps = maps.to(memory_format=torch.channels_last)
print("contiguous:", channels_last_maps.is_contiguous())
try:
    channels_last_maps.view(-1, num_flat_features(channels_last_maps))
except RuntimeError as error:
    print("view failed:", str(error)[:60], "...")
print("torch.flatten works:", torch.equal(torch.flatten(channels_last_maps, 1), by_hand))

# %% [markdown]
# ### Exercise 2 (2 points): the MNIST network
#
# This is the network lesson 05 trains on MNIST. It works on 28 x 28 digits:
#
# - `conv1`: convolution 1 -> 20 channels, 5 x 5; then ReLU and 2 x 2 max-pool
# - `conv2`: convolution 20 -> 50 channels, 5 x 5; then ReLU and 2 x 2 max-pool
# - flatten, `fc1`: linear 4 * 4 * 50 -> 500, then ReLU
# - `fc2`: linear 500 -> 10, returning the raw logits (no softmax: the loss of
#   lesson 05 applies it)
#
# *Hint:* work out why the flattened size is 4 * 4 * 50 with the table of
# section 2: 28 -> 24 -> 12 -> 8 -> 4. The network has 431,080 parameters.

# %% solution="ex_mnist_net"
class MnistNet(nn.Module):
    """Two convolutions (20 and 50 channels) and two linear layers; 28x28 digits to 10 logits."""

    def __init__(self) -> None:
        ### BEGIN SOLUTION
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, kernel_size=5)
        self.conv2 = nn.Conv2d(20, 50, kernel_size=5)
        self.fc1 = nn.Linear(4 * 4 * 50, 500)
        self.fc2 = nn.Linear(500, 10)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 1, 28, 28]`` images to ``[N, 10]`` logits."""
        ### BEGIN SOLUTION
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)
        ### END SOLUTION


# %% check="ex_mnist_net_check"
check.check_mnist_net_layers(MnistNet)
check.check_mnist_net_forward(MnistNet)

# %% graded="ex_mnist_net_layers_tests" points=1
check.check_mnist_net_layers(MnistNet)
### BEGIN HIDDEN TESTS
check.check_mnist_net_layers(MnistNet, inputs=[5])
### END HIDDEN TESTS

# %% graded="ex_mnist_net_forward_tests" points=1
check.check_mnist_net_forward(MnistNet)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(402)
check.check_mnist_net_forward(MnistNet, inputs=[torch.randn(1, 1, 28, 28, generator=g), torch.randn(7, 1, 28, 28, generator=g) * 3])
### END HIDDEN TESTS

# %% [markdown]
# The network runs on a real batch from a `DataLoader` straight away. Its
# weights are still random, so its "predictions" are guesses; lesson 05 trains it.

# %%
to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
test_digits = mnist_dataset(train=False, transform=to_tensor)
images, labels = next(iter(DataLoader(test_digits, batch_size=64)))
mnist_net = MnistNet()
digit_logits = mnist_net(images)
print("images", list(images.shape), "-> logits", list(digit_logits.shape))
print("first row of logits:", digit_logits[0].detach().round(decimals=3))
print("guesses:", digit_logits.argmax(dim=1)[:12].tolist(), " labels:", labels[:12].tolist())

# %% [markdown]
# ## 4. `nn.Sequential` or your own class?
#
# When data flows straight through a chain of layers, `nn.Sequential` builds the
# model without writing a class: each layer's output feeds the next. Because
# there is no `forward` of yours, the operations become layers too: `nn.ReLU()`,
# `nn.MaxPool2d(2)` and `nn.Flatten()`. Here is the MNIST network again:

# %%
mnist_seq = nn.Sequential(
    nn.Conv2d(1, 20, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(4 * 4 * 50, 500), nn.ReLU(),
    nn.Linear(500, 10),
)
print(mnist_seq)

# The same parameters in the same order: copy them across and both give the same output.
with torch.no_grad():
    for mine, theirs in zip(mnist_seq.parameters(), mnist_net.parameters()):
        mine.copy_(theirs)
print("same output:", torch.allclose(mnist_seq(images), mnist_net(images)))

# %% [markdown]
# Use **`nn.Sequential`** for a plain chain of layers, including as a building
# block inside a bigger model. Write **your own `nn.Module`** as soon as the data
# flow is not a straight line: a skip connection that adds the input back, two
# inputs or two outputs, a loop, a layer used twice, or when you want named
# intermediate values to print and debug. A residual block cannot be a
# `Sequential`, because the input has to be kept for the addition at the end:

# %%
class ResidualBlock(nn.Module):
    """Two 3x3 convolutions whose result is added to the block's own input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(  # the straight part is a Sequential inside the custom module
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.body(x))


print(ResidualBlock(4)(torch.randn(2, 4, 8, 8)).shape)

# %% [markdown]
# ## 5. Parameters, named parameters and the state dict
#
# - `model.parameters()` yields every learnable tensor (what an optimiser updates).
# - `model.named_parameters()` yields them with their dotted names.
# - `model.state_dict()` is what gets saved (lesson 06): the parameters **plus
#   buffers**, tensors a layer keeps that are not learned, such as batch norm's
#   running statistics.
#
# A tensor's `numel()` is its number of elements, so counting a model's
# parameters is a sum over `parameters()`.

# %%
for name, param in mnist_net.named_parameters():
    print(f"{name:12} {str(list(param.shape)):18} {param.numel():>7,}  requires_grad={param.requires_grad}")
print("total:", f"{sum(p.numel() for p in mnist_net.parameters()):,}")

norm = nn.BatchNorm2d(4)
print("BatchNorm2d parameters:", [name for name, _ in norm.named_parameters()])
print("BatchNorm2d state_dict:", list(norm.state_dict().keys()))

# %% [markdown]
# A parameter whose `requires_grad` is `False` is **frozen**: no gradient is
# computed for it, so training leaves it alone. Fine-tuning a pretrained network
# often freezes the early layers with `layer.requires_grad_(False)`; the number of
# *trainable* parameters then differs from the total.
#
# ### Exercise 3 (2 points): count parameters
#
# Write `count_parameters(model, trainable_only=False)` returning, as a Python
# `int`, the number of scalar parameters in `model`; with `trainable_only=True`,
# only those of parameters with `requires_grad=True`.
#
# *Hint:* every tensor knows its number of elements (look up `numel`). Of the
# ways section 5 lists to reach a model's tensors, pick the one that yields
# exactly the learnable ones: `state_dict()` also holds buffers.

# %% solution="ex_count_parameters"
def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter values in ``model`` (only trainable ones if ``trainable_only``)."""
    ### BEGIN SOLUTION
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
    ### END SOLUTION


# %% check="ex_count_parameters_check"
check.check_count_parameters(count_parameters)

# %% graded="ex_count_parameters_tests" points=2
check.check_count_parameters(count_parameters)
### BEGIN HIDDEN TESTS
def _mlp_with_norm() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))


def _mlp_last_frozen() -> nn.Module:
    model = _mlp_with_norm()
    model[3].requires_grad_(False)
    return model


check.check_count_parameters(count_parameters, inputs=[(_mlp_with_norm, False), (_mlp_last_frozen, True),
                                                       (_mlp_last_frozen, False)])
### END HIDDEN TESTS

# %%
frozen = MnistNet()
frozen.conv1.requires_grad_(False)
frozen.conv2.requires_grad_(False)
print(f"LeNet: {count_parameters(LeNet()):,}   MnistNet: {count_parameters(MnistNet()):,}")
print(f"MnistNet with frozen convolutions: {count_parameters(frozen, trainable_only=True):,} trainable")

# %% [markdown]
# Because the model knows all its parameters and buffers, one call moves them all
# to a device: `model.to(DEVICE)`. Unlike a tensor's `.to`, a module's `.to` moves
# the model in place (and returns it). Inputs must then go to the same device.

# %% tags=["nbval-ignore-output"]
moved = MnistNet().to(DEVICE)
print("DEVICE is", DEVICE, "- parameters now on:", {p.device.type for p in moved.parameters()})
print("logits on:", moved(images[:2].to(DEVICE)).device)

# %% [markdown]
# ## 6. Initialising weights
#
# Every layer initialises itself when it is created (PyTorch's default for
# `Conv2d` and `Linear` is a scaled uniform distribution). To choose another
# scheme, overwrite the tensors with the functions in `torch.nn.init`. Their names
# end in an underscore, PyTorch's convention for "changes the tensor in place".
# Kaiming (He) initialisation draws weights with standard deviation
# `sqrt(2 / fan_in)`, where `fan_in` is the number of inputs per output, which
# keeps the size of the signal roughly constant through ReLU layers.
#
# **Changed since older tutorials:** the spellings without the underscore
# (`nn.init.xavier_uniform`, `nn.init.kaiming_normal`, `nn.init.constant`) are
# deprecated and warn; use `xavier_uniform_`, `kaiming_normal_`, `constant_`,
# `zeros_`.

# %%
layer = nn.Linear(800, 500)
print(f"default init:  std {layer.weight.std():.4f}")
nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
nn.init.zeros_(layer.bias)
print(f"kaiming_normal_: std {layer.weight.std():.4f}  (sqrt(2 / 800) = {(2 / 800) ** 0.5:.4f})")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nn.init.xavier_uniform(layer.weight)  # the old spelling
print(caught[0].category.__name__ + ":", caught[0].message)

# %% [markdown]
# For a whole model there are two idioms. Iterate over `model.modules()` (every
# submodule, recursively, the model itself included) and pick layers with
# `isinstance`, or write a function of one module and hand it to
# `model.apply(fn)`, which calls it on every submodule for you.

# %%
model = MnistNet()
for module in model.modules():
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
print([type(m).__name__ for m in model.modules()])


def report(module: nn.Module) -> None:
    print("apply visits", type(module).__name__)


_ = model.apply(report)  # children first, the model itself last

# %% [markdown]
# Why bother? Stack eight ReLU layers and watch the size of the signal. With a
# scale that ignores the ReLU (which zeroes half of its input) it shrinks layer
# after layer; Kaiming's factor of 2 keeps it steady.

# %%
def signal_sizes(init_weight) -> list[float]:
    """Standard deviation of the activations after each of 8 Linear+ReLU layers."""
    torch.manual_seed(1)
    x, sizes = torch.randn(512, 256), []
    for _ in range(8):
        layer = nn.Linear(256, 256)
        init_weight(layer.weight)
        x = F.relu(layer(x))
        sizes.append(round(x.std().item(), 3))
    return sizes


print("default:", signal_sizes(lambda w: None))
print("kaiming:", signal_sizes(lambda w: nn.init.kaiming_normal_(w, nonlinearity="relu")))

# %% [markdown]
# ### Exercise 4 (2 points): an init function for `model.apply`
#
# Write `init_weights(module)` for use as `model.apply(init_weights)`. After
# `model.apply(init_weights)`, every `nn.Conv2d` and `nn.Linear` has Kaiming-normal
# weights for ReLU networks (`nn.init.kaiming_normal_` with `nonlinearity="relu"`
# and its default `mode="fan_in"`) and zero biases; every other kind of module is
# left exactly as it was. It fills the layers' existing parameters in place (an
# optimizer built before keeps pointing at them: do not assign new ones) and
# returns nothing.
#
# *Hint:* some layers are built with `bias=False` (section 9): what is their
# `bias` then? `model.apply` already visits every module, so your function looks
# at one module only.

# %% solution="ex_init_weights"
def init_weights(module: nn.Module) -> None:
    """Kaiming-normal weights and zero biases for Conv2d and Linear layers; others untouched."""
    ### BEGIN SOLUTION
    if isinstance(module, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    ### END SOLUTION


# %% check="ex_init_weights_check"
check.check_init_weights(init_weights)

# %% graded="ex_init_weights_tests" points=2
check.check_init_weights(init_weights)
### BEGIN HIDDEN TESTS
check.check_init_weights(init_weights, inputs=[
    lambda: nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8, 4, bias=False)),
    lambda: nn.Sequential(nn.Linear(20, 30), nn.LayerNorm(30), nn.Linear(30, 5)),
])
### END HIDDEN TESTS

# %%
model = MnistNet()
model.apply(init_weights)
for name, module in model.named_children():
    fan_in = module.weight[0].numel()
    print(f"{name}: weight std {module.weight.std():.4f} vs sqrt(2 / {fan_in}) = {(2 / fan_in) ** 0.5:.4f},"
          f" bias all zero: {bool((module.bias == 0).all())}")

# %% [markdown]
# ## 7. A custom loss: a function or a module
#
# A loss is just a computation that ends in a scalar, built from tensor
# operations, so autograd differentiates it like anything else. The simplest form
# is a plain function. The same loss as an `nn.Module` keeps its settings
# (chosen once in `__init__`), is called like PyTorch's own losses
# (`loss_fn = nn.CrossEntropyLoss()`, then `loss_fn(logits, targets)`), and can
# hold tensors (say, per-class weights) that move with `.to(device)` along with
# the model. Here is the mean absolute error both ways, against PyTorch's
# `nn.L1Loss`:

# %%
def mean_absolute_error(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Average of |prediction - target| over all elements."""
    return (predictions - targets).abs().mean()


class MeanAbsoluteError(nn.Module):
    """The same loss as a module, with the reduction chosen when it is created."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        errors = (predictions - targets).abs()
        return errors.sum() if self.reduction == "sum" else errors.mean()


predictions, targets = torch.tensor([1.0, 2.0, 5.0]), torch.tensor([1.5, 2.0, 3.0])
print(mean_absolute_error(predictions, targets), MeanAbsoluteError()(predictions, targets),
      nn.L1Loss()(predictions, targets))
print(MeanAbsoluteError("sum")(predictions, targets), nn.L1Loss(reduction="sum")(predictions, targets))

# %% [markdown]
# ### Label smoothing
#
# A classifier's usual loss, cross-entropy, compares the predicted probabilities
# with a one-hot target: all weight on the true class. **Label smoothing** moves a
# small share `smoothing` of that weight evenly onto all `C` classes, so the target
# becomes `(1 - smoothing) * one_hot + smoothing / C`; the model is then not
# pushed towards infinitely confident logits. Per example, with
# `log_p = log_softmax(logits)`:
#
# `loss = (1 - smoothing) * (-log_p[target]) + smoothing * mean over classes of (-log_p)`
#
# ### Exercise 5 (3 points): label-smoothed cross-entropy as a function
#
# Write `label_smoothing_cross_entropy(logits, targets, smoothing=0.1, reduction="mean")`.
# `logits` is `[N, C]`, `targets` holds class indices `[N]` (int64). Return the
# mean of the per-example losses for `reduction="mean"`, their sum for `"sum"`,
# and the `[N]` tensor itself for `"none"`.
#
# *Hint:* the log of a softmax underflows to `-inf` for large logits; PyTorch has
# one function that computes both stably. Picking one entry per row is lesson
# 01's `gather` (or advanced indexing). Two points for `"mean"`, one for the other
# reductions.

# %% solution="ex_label_smoothing"
def label_smoothing_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                                  smoothing: float = 0.1, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy against targets smoothed to (1 - smoothing) * one_hot + smoothing / C."""
    ### BEGIN SOLUTION
    log_probs = F.log_softmax(logits, dim=1)
    nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
    loss = (1 - smoothing) * nll + smoothing * -log_probs.mean(dim=1)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
    ### END SOLUTION


# %% check="ex_label_smoothing_check"
check.check_label_smoothing_cross_entropy(label_smoothing_cross_entropy)
check.check_label_smoothing_reductions(label_smoothing_cross_entropy)

# %% graded="ex_label_smoothing_mean_tests" points=2
check.check_label_smoothing_cross_entropy(label_smoothing_cross_entropy)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(405)
check.check_label_smoothing_cross_entropy(label_smoothing_cross_entropy, inputs=[
    (torch.randn(8, 10, generator=g), torch.randint(0, 10, (8,), generator=g), 0.05),
    (torch.randn(3, 3, generator=g) * 200, torch.tensor([2, 1, 0]), 0.3),
    (torch.randn(1, 7, generator=g), torch.tensor([6]), 0.0),
])
### END HIDDEN TESTS

# %% graded="ex_label_smoothing_reduction_tests" points=1
check.check_label_smoothing_reductions(label_smoothing_cross_entropy)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(406)
check.check_label_smoothing_reductions(label_smoothing_cross_entropy, inputs=[
    (torch.randn(5, 4, generator=g), torch.tensor([3, 3, 0, 1, 2]), 0.2),
])
### END HIDDEN TESTS

# %% [markdown]
# PyTorch has this built in since version 1.10, as the `label_smoothing` argument
# of `F.cross_entropy` and `nn.CrossEntropyLoss`. Checked on the untrained
# network's logits for the real digits from section 3:

# %%
with torch.no_grad():
    mine = label_smoothing_cross_entropy(digit_logits, labels, smoothing=0.1)
    builtin = F.cross_entropy(digit_logits, labels, label_smoothing=0.1)
    plain = F.cross_entropy(digit_logits, labels)
print(f"yours {mine:.5f}   F.cross_entropy {builtin:.5f}   plain cross-entropy {plain:.5f}")

# %% [markdown]
# ### Exercise 6 (1 point): the same loss as a module
#
# Complete `LabelSmoothingLoss(smoothing=0.1, reduction="mean")`, an `nn.Module`
# whose `__init__` stores the two settings and whose `forward(logits, targets)`
# returns the loss with those settings.
#
# *Hint:* `forward` can reuse exercise 5, or PyTorch's built-in from the cell
# above. Remember what every module's `__init__` must do first.

# %% solution="ex_label_smoothing_module"
class LabelSmoothingLoss(nn.Module):
    """Label-smoothed cross-entropy, configured once and called as loss_fn(logits, targets)."""

    def __init__(self, smoothing: float = 0.1, reduction: str = "mean") -> None:
        ### BEGIN SOLUTION
        super().__init__()
        self.smoothing = smoothing
        self.reduction = reduction
        ### END SOLUTION

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of ``logits`` [N, C] against class indices ``targets`` [N]."""
        ### BEGIN SOLUTION
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing, reduction=self.reduction)
        ### END SOLUTION


# %% check="ex_label_smoothing_module_check"
check.check_label_smoothing_loss(LabelSmoothingLoss)

# %% graded="ex_label_smoothing_module_tests" points=1
check.check_label_smoothing_loss(LabelSmoothingLoss)
### BEGIN HIDDEN TESTS
check.check_label_smoothing_loss(LabelSmoothingLoss, inputs=[(0.25, "none"), (0.0, "sum")])
### END HIDDEN TESTS

# %% [markdown]
# ## 8. `train()` and `eval()`
#
# Two common layers behave differently while training and while evaluating:
#
# - **Dropout** (`nn.Dropout(p)`) zeroes each value with probability `p` during
#   training and scales the survivors by `1 / (1 - p)`, so the expected value is
#   unchanged. In evaluation it does nothing.
# - **Batch normalisation** (`nn.BatchNorm1d/2d`) normalises with the statistics
#   of the current batch during training, and updates running averages of them;
#   in evaluation it uses those running averages, so an example's output no
#   longer depends on the rest of its batch.
#
# `model.train()` and `model.eval()` set the `training` flag on the model and all
# its submodules. Models start in training mode. `eval()` does not turn off
# gradients; that is `torch.no_grad()`'s job, and prediction wants both.

# %%
dropout = nn.Dropout(p=0.5)
ones = torch.ones(1, 8)
print("train:", dropout(ones))
print("train:", dropout(ones), " <- a different random half")
dropout.eval()
print("eval: ", dropout(ones))

norm = nn.BatchNorm1d(3)
values = torch.tensor([[1.0, 10.0, 100.0], [3.0, 30.0, 300.0], [5.0, 50.0, 500.0]])
print("train:", norm(values)[0].detach(), " running mean now", norm.running_mean)
norm.eval()
print("eval: ", norm(values)[0].detach(), " <- normalised with the running statistics instead")

# %%
net_with_dropout = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
net_with_dropout.eval()
print("eval() reaches every submodule:", [m.training for m in net_with_dropout.modules()])
net_with_dropout.train()
print("train() switches them back:    ", [m.training for m in net_with_dropout.modules()])

# %% [markdown]
# ### Exercise 7 (2 points): predict
#
# Write `predict(model, images)` returning the predicted class of each image: a
# `[N]` int64 tensor with the index of the largest logit. The contract:
#
# - predictions do not depend on chance or on the other images in the batch:
#   every dropout and batch-norm layer, however deep, runs in evaluation mode;
# - the model runs through `model(images)`, so its hooks run;
# - no autograd graph is recorded (none is needed to predict).
#
# The rule for the rest of the course: a function that predicts or evaluates
# calls `model.eval()` and leaves the model in eval mode; code that trains calls
# `model.train()` first (lesson 05's training loop starts with it). So `predict`
# does not switch the model back.
#
# *Hint:* section 8 shows the switch that reaches every submodule (setting
# `model.training = False` by hand reaches only the top one) and names the
# context manager that turns autograd off. Which dimension holds the classes?

# %% solution="ex_predict"
def predict(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Class index of the largest logit for each image, computed in eval mode without autograd."""
    ### BEGIN SOLUTION
    model.eval()
    with torch.no_grad():
        logits = model(images)
    return logits.argmax(dim=1)
    ### END SOLUTION


# %% check="ex_predict_check"
check.check_predict(predict)

# %% graded="ex_predict_tests" points=2
check.check_predict(predict)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(407)
check.check_predict(predict, inputs=[
    (lambda: nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(784, 10)), torch.randn(16, 1, 28, 28, generator=g)),
    (lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 26 * 26, 10)),
     torch.randn(5, 1, 28, 28, generator=g) + 1),
])
### END HIDDEN TESTS

# %% [markdown]
# On the real test digits, the untrained network from section 3 does no better
# than guessing: it puts nearly every digit into one or two classes, so it is
# right only when the digit happens to belong to one of them. Lesson 05 changes that.

# %%
guesses, truth = [], []
for batch_images, batch_labels in DataLoader(test_digits, batch_size=500):  # batches keep memory small
    guesses.append(predict(mnist_net, batch_images))
    truth.append(batch_labels)
guesses, truth = torch.cat(guesses), torch.cat(truth)
print("guesses:", guesses[:16].tolist())
print("labels: ", truth[:16].tolist())
print(f"accuracy of the untrained network on {len(truth)} digits: {(guesses == truth).float().mean():.1%}")

# %% [markdown]
# ## 9. `bias=False` before batch norm
#
# Batch norm subtracts each channel's mean over the batch, then multiplies by its
# own learnable scale and adds its own learnable shift. A constant added to a
# channel just before it (which is what a convolution's bias is) is removed by the
# mean subtraction, so it can never change the output: that bias is wasted
# parameters, memory and computation. Create convolutions followed by batch norm
# with `bias=False`. Proof, and the count:

# %%
images_small = images[:16]
conv_with_bias = nn.Conv2d(1, 8, 3, padding=1)
conv_no_bias = nn.Conv2d(1, 8, 3, padding=1, bias=False)
with torch.no_grad():
    conv_no_bias.weight.copy_(conv_with_bias.weight)
norm = nn.BatchNorm2d(8)
print("same output with and without the bias:",
      torch.allclose(norm(conv_with_bias(images_small)), norm(conv_no_bias(images_small)), atol=1e-5))


def conv_bn(in_channels: int, out_channels: int, bias: bool) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=bias),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


for width in (64, 256):
    with_bias = count_parameters(conv_bn(width, width, bias=True))
    without = count_parameters(conv_bn(width, width, bias=False))
    print(f"conv {width}->{width} + batch norm: {with_bias:,} parameters with bias, {without:,} without "
          f"({with_bias - without} saved per block)")

# %% [markdown]
# ## 10. Normalising inputs, and batch norm
#
# Networks train best when their inputs are centred around 0 with a spread of
# about 1. For MNIST that is what `transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))`
# does: the pixels that `ToTensor` scales to [0, 1] have mean 0.1307 and standard
# deviation 0.3081 over the training set (lesson 03 computes them), so subtracting
# the mean and dividing by the deviation gives mean 0 and deviation 1 over the
# training set (and close to it on any large sample of digits).

# %%
raw_digits = mnist_dataset(train=True, transform=transforms.ToTensor())
pixels = torch.stack([raw_digits[i][0] for i in range(2000)])
normalised = (pixels - MNIST_MEAN) / MNIST_STD
print(f"ToTensor only:  mean {pixels.mean():.3f}  std {pixels.std():.3f}")
print(f"normalised:     mean {normalised.mean():.3f}  std {normalised.std():.3f}")

# %% [markdown]
# Batch normalisation applies the same idea *inside* the network, to every
# channel of a layer's output, using the statistics of the current batch (then a
# learnable scale and shift). Deep networks then see well-scaled values at every
# layer, not only at the input, which makes training faster and less sensitive to
# the learning rate and the initialisation. On the real batch:

# %%
features = nn.Conv2d(1, 4, 5)(images)
normed = nn.BatchNorm2d(4)(features)
print("per-channel mean before:", features.mean(dim=(0, 2, 3)).detach().round(decimals=3))
print("per-channel std before: ", features.std(dim=(0, 2, 3)).detach().round(decimals=3))
print("per-channel mean after: ", normed.mean(dim=(0, 2, 3)).detach().round(decimals=3).abs())
print("per-channel std after:  ", normed.std(dim=(0, 2, 3)).detach().round(decimals=3))

# %% [markdown]
# ### Exercise 8 (1 point): a custom module as `nn.Sequential`
#
# `ConvBlockNet` below puts together this lesson's last sections: a convolution
# without bias, batch norm, ReLU, max-pooling, then a linear layer. Its data flow
# is a straight line, so it fits in an `nn.Sequential`.

# %%
class ConvBlockNet(nn.Module):
    """conv 3x3 (no bias) -> batch norm -> ReLU -> 2x2 max-pool -> linear, on 28x28 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


# %% [markdown]
# Write `sequential_version()` returning an `nn.Sequential` with the same layers,
# in the same order and of the same sizes, so that once `ConvBlockNet`'s
# parameters and buffers are copied into it in order, it gives the same output in
# both training and evaluation mode.
#
# *Hint:* the operations that `forward` writes as function calls need layers of
# their own in a `Sequential`.

# %% solution="ex_sequential"
def sequential_version() -> nn.Sequential:
    """ConvBlockNet's layers as an nn.Sequential."""
    ### BEGIN SOLUTION
    return nn.Sequential(nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    ### END SOLUTION


# %% check="ex_sequential_check"
check.check_sequential_version(sequential_version)

# %% graded="ex_sequential_tests" points=1
check.check_sequential_version(sequential_version)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(408)
check.check_sequential_version(sequential_version, inputs=[torch.randn(1, 1, 28, 28, generator=g), torch.randn(9, 1, 28, 28, generator=g) * 2])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 9 (4 points): put it together, a model that meets a contract
#
# Write `build_classifier(in_channels, num_classes)` returning a new, untrained
# model for images of `in_channels` x 28 x 28 pixels. The architecture is yours
# to choose; the model must meet this contract:
#
# - `model(x)` for `x` of shape `[N, in_channels, 28, 28]` returns raw float32
#   logits `[N, num_classes]`, for every `N` from 1 up, in training mode and in
#   evaluation mode;
# - it has at most 10,000 parameters;
# - it uses batch normalisation: in training mode an image's logits depend on the
#   other images of its batch; in evaluation mode they do not, and two calls give
#   the same logits;
# - no parameter is wasted: when a loss computed in training mode is
#   backpropagated, every parameter receives a gradient that is not all zeros.
#
# The graded test builds it for other numbers of channels and classes. (Creating
# the layers draws from PyTorch's global random generator: that is expected.)
#
# *Hint:* sections 2 (sizes), 4, 5 (counting), 8, 9 and 10 each settle one part
# of the contract. Count your parameters before you run the check, and think about
# what a batch norm needs to normalise a batch of one.

# %% solution="ex_build_classifier"
def build_classifier(in_channels: int, num_classes: int) -> nn.Module:
    """A new model: [N, in_channels, 28, 28] images to [N, num_classes] logits, meeting the contract above."""
    ### BEGIN SOLUTION
    # conv without bias (batch norm follows), batch norm, ReLU, pool: 28 -> 14 -> 7; then 784 features
    features = [nn.Conv2d(in_channels, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(16),
                nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(16 * 7 * 7, num_classes))
    ### END SOLUTION


# %% check="ex_build_classifier_check"
check.check_build_classifier(build_classifier)

# %% graded="ex_build_classifier_tests" points=4
check.check_build_classifier(build_classifier)
### BEGIN HIDDEN TESTS
check.check_build_classifier(build_classifier, inputs=[(2, 7), (1, 2), (4, 10)])
### END HIDDEN TESTS

# %%
classifier = build_classifier(1, 10)
print(f"{count_parameters(classifier):,} parameters; logits for 4 digits:", list(classifier(images[:4]).shape))

# %% [markdown]
# ## Summary
#
# - A model subclasses `nn.Module`: `super().__init__()` first, layers in
#   `__init__`, data flow in `forward`; call it as `model(x)` so hooks run.
# - Each layer's `in_channels`/`in_features` must match what the previous one
#   produces; track the spatial size, and flatten with `torch.flatten(x, 1)` or
#   `nn.Flatten()`.
# - `nn.Sequential` for straight chains, your own class for anything else.
# - `parameters()` are learned, `state_dict()` adds buffers; count with `numel()`.
# - Initialise with the in-place `nn.init.*_` functions, via `modules()` or `apply`.
# - A loss is a function or an `nn.Module` that returns a scalar tensor.
# - `model.eval()` for dropout and batch norm at prediction time, together with
#   `torch.no_grad()`; `model.train()` before training again.
# - No bias right before batch norm; normalise the inputs too.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
