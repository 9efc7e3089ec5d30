# %% [markdown]
# # 02 Autograd
#
# Training a network means nudging its parameters in the direction that lowers
# the loss, and that direction is the gradient. Working gradients out by hand
# stops being practical after a few lines of maths. PyTorch's **autograd** does
# it for you: it records the operations you run on tensors, then walks that
# record backwards and applies the chain rule.
#
# In this lesson you will see what autograd records (`requires_grad`, `grad_fn`,
# leaf tensors) and how to ask it for gradients (`backward`, `.grad`), including
# for outputs with more than one element. You will see why gradients pile up
# until you clear them, and how to switch recording off (`no_grad`, `detach`,
# `inference_mode`). You will use all of this to fit a line by gradient descent,
# first by hand and then with an optimizer, and you will measure what it costs to
# keep loss tensors around instead of plain numbers. At the end come the
# debugging tools (`gradcheck`, anomaly detection, the profiler) and what they
# cost, which is why they stay off until something is wrong.
#
# There are 9 graded exercises worth 20 points; the last one puts the lesson's
# ideas together. Each has a self-check cell right
# below it: run it, read its message, fix, repeat.

# %% locked="setup"
import os
import warnings
import weakref

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from helpers.checks import autograd as check
from helpers.data import MNIST_MEAN, MNIST_STD, mnist_dataset
from helpers.plots import plot_curves
from helpers.timing import time_call

torch.manual_seed(0)
LINE_LR, LINE_STEPS = 0.2, 100  # learning rate and number of steps for the line fits (sections 5 and 6)
N_TRAIN, N_TEST, BATCH = 2000, 1000, 100  # MNIST digits used from section 7 on: enough to learn, quick on a CPU

# %% [markdown]
# ## 1. Tensors that remember where they came from
#
# Create a tensor with `requires_grad=True` and PyTorch starts recording: every
# result computed from it remembers the operation that produced it in its
# `grad_fn`. Together these records form a graph that leads from the result back
# to the tensors you started from.
#
# The tensors you create yourself are the **leaves** of that graph (`is_leaf` is
# True). Tensors computed from them are not leaves: they have a `grad_fn`.

# %%
x = torch.ones(2, 2, requires_grad=True)
y = x + 2
z = y * y * 3
out = z.mean()
print(y)
print("grad_fn of y, z, out:", y.grad_fn.name(), z.grad_fn.name(), out.grad_fn.name())
print("x is a leaf:", x.is_leaf, "| y is a leaf:", y.is_leaf, "| x.grad_fn:", x.grad_fn)

# %% [markdown]
# `out.backward()` walks the graph from `out` back to the leaves and stores
# d out / d x in `x.grad`. Here is the same computation on paper, for the 4
# elements of `x`:
#
# $$\text{out} = \frac{1}{4}\sum_i 3\,(x_i + 2)^2 \quad\Rightarrow\quad
# \frac{\partial\,\text{out}}{\partial x_i} = \frac{3}{2}(x_i + 2) = 4.5 \text{ at } x_i = 1.$$

# %%
out.backward()
print(x.grad)

# %% [markdown]
# Autograd agrees: 4.5 everywhere. Only leaves that require grad get a `.grad`;
# for an intermediate result like `y` it stays `None` (and PyTorch warns when
# you read it) unless you ask for it with `y.retain_grad()` before `backward()`.
#
# The graph itself can be walked: each node lists the nodes that fed it in
# `next_functions`. The `AccumulateGrad` nodes at the bottom are the leaves:
# that is where a gradient is *added* into `.grad`, which will matter in section 3.

# %%
def show_graph(node, depth: int = 0) -> None:
    """Print the autograd graph behind a result, from the result back to its leaves."""
    if node is None:
        return
    print("    " * depth + node.name())
    for parent, _ in node.next_functions:
        show_graph(parent, depth + 1)


x = torch.ones(2, 2, requires_grad=True)
y = x + 2
y.retain_grad()
out = (y * y * 3).mean()
out.backward()
print("y.grad, kept by retain_grad():", y.grad)
show_graph(out.grad_fn)

# %% [markdown]
# **Changed since older tutorials:** old code wraps tensors in
# `torch.autograd.Variable(t, requires_grad=True)`. Since PyTorch 0.4 every
# tensor records gradients itself and `Variable(...)` just returns a tensor, so
# write `torch.tensor(..., requires_grad=True)` or `t.requires_grad_()`.
#
# ### Exercise 1 (1 point): the worked example, for any x
#
# Write `mean_square_grad(x)` that returns the gradient of
# `out = mean(3 * (x + 2) ** 2)` with respect to `x`, computed by autograd, as a
# tensor with `x`'s shape. For `x = torch.ones(2, 2)` it must give 4.5 everywhere.
#
# The `x` you receive does not require grad, and it belongs to the caller: leave
# it exactly as it was (its values and its `requires_grad`).
#
# *Hint:* autograd can only differentiate with respect to a tensor that requires
# grad; section 4's table and `clone` give you one that is not the caller's.

# %% solution="ex_mean_square_grad"
def mean_square_grad(x: torch.Tensor) -> torch.Tensor:
    """d/dx of mean(3 * (x + 2) ** 2), by autograd."""
    ### BEGIN SOLUTION
    x = x.detach().clone().requires_grad_(True)
    out = (3 * (x + 2) ** 2).mean()
    out.backward()
    return x.grad
    ### END SOLUTION


# %% check="ex_mean_square_grad_check"
check.check_mean_square_grad(mean_square_grad)

# %% graded="ex_mean_square_grad_tests" points=1
check.check_mean_square_grad(mean_square_grad)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(201)
check.check_mean_square_grad(mean_square_grad, inputs=[torch.randn(5, generator=hidden_g), torch.full((3, 1, 2), -1.0)])
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Outputs with more than one element
#
# `backward()` with no argument works only on a **scalar** (a one-element
# tensor), like a loss. Call it on anything bigger and PyTorch refuses:

# %%
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x ** 2
try:
    y.backward()
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# The reason: when `y` has several elements, "the gradient" of `y` with respect to
# `x` is a whole matrix, the **Jacobian** $J_{ij} = \partial y_i / \partial x_j$.
# PyTorch never builds it. Instead `y.backward(gradient=v)` computes the
# **vector-Jacobian product** $v^\top J$: the gradient of the scalar
# $\sum_i v_i\, y_i$. That is all backpropagation ever needs, and it is much
# cheaper than the full matrix. (For a scalar loss, `backward()` is the same as
# `backward(gradient=torch.tensor(1.0))`.)
#
# The fix for the error above is therefore one of two: reduce `y` to a scalar
# first (`y.sum().backward()`, `y.mean().backward()`), or pass `gradient=v`.
#
# For `y = W @ x` the Jacobian is `W` itself, so the result must equal `v @ W`:

# %%
W = torch.tensor([[1.0, 2.0, 0.0],
                  [0.0, 1.0, -1.0]])
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = W @ x
v = torch.tensor([1.0, 10.0])
y.backward(gradient=v)
print("x.grad      :", x.grad)
print("v @ W       :", v @ W)
print("the Jacobian:\n", torch.autograd.functional.jacobian(lambda t: W @ t, x))

# %% [markdown]
# `torch.autograd.grad(y, x, grad_outputs=v)` computes the same product and
# returns it, instead of adding it into `x.grad`; it is handy when you want a
# gradient without touching any `.grad`.
#
# ### Exercise 2 (2 points): a vector-Jacobian product
#
# Write `vector_jacobian_product(f, x, v)` that returns $v^\top J$, where $J$ is
# the Jacobian of the function `f` at `x` and `v` has the shape of `f(x)`. The
# result has the shape of `x`.
#
# Leave the caller's `x` as it was.
#
# *Hint:* the worked example above computes exactly this for one `f`; look up
# `backward`'s `gradient` argument (or `grad_outputs` of `torch.autograd.grad`).

# %% solution="ex_vjp"
def vector_jacobian_product(f, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v @ J, with J the Jacobian of f at x."""
    ### BEGIN SOLUTION
    x = x.detach().clone().requires_grad_(True)
    f(x).backward(gradient=v)
    return x.grad
    ### END SOLUTION


# %% check="ex_vjp_check"
check.check_vector_jacobian_product(vector_jacobian_product)

# %% graded="ex_vjp_tests" points=2
check.check_vector_jacobian_product(vector_jacobian_product)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(202)
hidden_a = torch.randn(2, 4, generator=hidden_g)
hidden_b = torch.randn(4, 4, generator=hidden_g)
check.check_vector_jacobian_product(vector_jacobian_product, inputs=[
    (lambda t: torch.tanh(hidden_a @ t), torch.randn(4, generator=hidden_g), torch.randn(2, generator=hidden_g)),
    (lambda t: hidden_b @ t.sin(), torch.randn(4, generator=hidden_g), torch.randn(4, generator=hidden_g)),
])
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Gradients accumulate
#
# `backward()` does not overwrite `.grad`; it **adds** to it. Run the same
# computation three times and the gradient triples:

# %%
w = torch.tensor([1.0, -1.0], requires_grad=True)
for call in range(1, 4):
    loss = (w ** 2).sum()  # d loss / d w = 2 * w = [2, -2], every time
    loss.backward()
    print(f"after backward #{call}: w.grad = {w.grad}")

w.grad.zero_()  # clear in place ...
print("after zero_():", w.grad)
w.grad = None  # ... or drop it; the next backward() starts from nothing
print("after w.grad = None:", w.grad)

# %% [markdown]
# Adding up is deliberate: it lets several losses, or several small batches,
# contribute to one update (lesson 07 uses that for gradient accumulation). The
# price is that a training loop must clear the gradients at every step, or each
# step uses the sum of all previous gradients. `optimizer.zero_grad()` does it
# for all parameters at once; since PyTorch 2.0 it sets them to `None`
# (`set_to_none=True`), which is cheaper than writing zeros.
#
# Notice also that the loop recomputes `loss` each time. `backward()` frees the
# values the graph saved for it, so a graph can be walked only once:

# %%
loss = (w ** 2).sum()
loss.backward()
try:
    loss.backward()
except RuntimeError as error:
    print("RuntimeError:", str(error).split(".")[0] + ".")

# %% [markdown]
# (`backward(retain_graph=True)` keeps the graph for a second pass; you rarely
# need it.)
#
# ### Exercise 3 (3 points): one gradient per batch
#
# Write `per_batch_grads(w, batches)`. `w` is a weight vector that requires
# grad, and `batches` is a list of `(x, y)` pairs. For each batch compute the
# loss `((x @ w - y) ** 2).mean()`, backpropagate it, and collect the gradient of
# **that batch alone** with respect to `w`. Return the list of gradients, one
# tensor per batch.
#
# Careful: `w` may arrive already holding a gradient from earlier work; it must
# not leak into your first result. Leave `w`'s values as they are (its `.grad`
# may change).
#
# *Hint:* section 3: where does `backward()` put a gradient, and when do
# gradients add up? And what happens to a tensor already in your list when the
# tensor it *is* gets zeroed in place later?

# %% solution="ex_per_batch_grads"
def per_batch_grads(w: torch.Tensor, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """The gradient of each batch's mean squared error with respect to w, batch by batch."""
    ### BEGIN SOLUTION
    grads = []
    for x, y in batches:
        w.grad = None
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        grads.append(w.grad.clone())
    return grads
    ### END SOLUTION


# %% check="ex_per_batch_grads_check"
check.check_per_batch_grads(per_batch_grads)  # w starts without a gradient
check.check_per_batch_grads_leftover(per_batch_grads)  # w arrives holding an old gradient

# %% graded="ex_per_batch_grads_tests" points=2
check.check_per_batch_grads(per_batch_grads)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(203)
check.check_per_batch_grads(per_batch_grads, inputs=[
    (torch.randn(4, generator=hidden_g).requires_grad_(),
     [(torch.randn(6, 4, generator=hidden_g), torch.randn(6, generator=hidden_g)) for _ in range(5)]),
])
### END HIDDEN TESTS

# %% graded="ex_per_batch_grads_leftover_tests" points=1
check.check_per_batch_grads_leftover(per_batch_grads)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(204)
hidden_w = torch.randn(2, generator=hidden_g).requires_grad_()
hidden_w.grad = torch.tensor([-3.0, 7.0])
check.check_per_batch_grads_leftover(per_batch_grads, inputs=[
    (hidden_w, [(torch.randn(3, 2, generator=hidden_g), torch.randn(3, generator=hidden_g)) for _ in range(3)]),
])
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Switching recording off
#
# Recording costs time and memory, and some computations must not be recorded at
# all. Four tools:
#
# | tool | what it does | typical use |
# | --- | --- | --- |
# | `with torch.no_grad():` | nothing computed inside is recorded | evaluation; updating weights by hand |
# | `t.detach()` | a tensor sharing `t`'s memory, cut off from the graph | logging, plotting, `.numpy()` |
# | `t.requires_grad_(flag)` | switches recording on or off for the tensor `t` itself | freezing some parameters |
# | `with torch.inference_mode():` | like `no_grad`, a little faster; its results can never join a graph later | pure inference |
# | `with torch.set_grad_enabled(flag):` | records if `flag` is True, like `no_grad` if False | one function that trains or evaluates |

# %%
w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
with torch.no_grad():
    doubled = w * 2
print("inside no_grad:", doubled.requires_grad, doubled.grad_fn)


@torch.no_grad()  # the same switch as a decorator, for a whole function
def predict(t: torch.Tensor) -> torch.Tensor:
    return t * w


print("decorated:", predict(torch.ones(3)).requires_grad)

for training in (True, False):
    with torch.set_grad_enabled(training):  # the switch with an argument
        print(f"set_grad_enabled({training}):", (w * 2).requires_grad)
print("after the blocks, recording is back on:", torch.is_grad_enabled())

tracked = w * 2
cut = tracked.detach()
print("detach shares memory:", cut.untyped_storage().data_ptr() == tracked.untyped_storage().data_ptr(),
      "| requires_grad:", cut.requires_grad)
try:
    tracked.numpy()
except RuntimeError as error:
    print("RuntimeError:", error)
print("after detach():", tracked.detach().numpy())

# %% [markdown]
# `requires_grad_()` flips the flag on an existing tensor, in place (the trailing
# underscore marks in-place methods in PyTorch). It is how you freeze part of a
# model, or start tracking a tensor you built from data.

# %%
frozen = torch.randn(3).requires_grad_(True)
frozen.requires_grad_(False)
print("frozen:", frozen.requires_grad, "| (frozen * w).sum() still depends on w:", (frozen * w).sum().requires_grad)

with torch.inference_mode():
    features = torch.ones(3) * 2
print("made in inference mode:", features.is_inference())
try:
    (features * w).sum().backward()
except RuntimeError as error:
    print("RuntimeError:", str(error).split(".")[0] + ".")

# %% [markdown]
# That last error is `inference_mode`'s trade-off: tensors made inside it skip
# even the bookkeeping `no_grad` keeps, so autograd cannot use them later. Use
# `no_grad` when results may feed a training step, `inference_mode` when they
# never will.
#
# ## 5. Gradient descent by hand: fitting a line
#
# Here are 50 noisy points around the line $y = 2x - 1$. We pretend not to know
# the slope $w$ and intercept $b$ and learn them from the points.

# %%
line_gen = torch.Generator().manual_seed(0)
x_line = torch.linspace(-1, 1, 50)
y_line = 2.0 * x_line - 1.0 + 0.2 * torch.randn(50, generator=line_gen)

# %% [markdown]
# The loss is the mean squared error of the line $w x + b$:
# $L(w, b) = \frac{1}{N}\sum_i (w x_i + b - y_i)^2$. Gradient descent repeats one
# step: compute $L$, get its gradients, and move each parameter a little against
# its gradient, $w \leftarrow w - \text{lr} \cdot \partial L / \partial w$ (the
# gradient points uphill; the learning rate `lr` sets the size of the step).
#
# Three details make this work with autograd:
#
# 1. **Update inside `torch.no_grad()`.** The update is not part of the model and
#    must not be recorded. Autograd also forbids changing a leaf that requires
#    grad in place while it records, because the graph may need its old value.
# 2. **Update in place** (`w -= ...`), so `w` stays the same leaf tensor.
#    `w = w - ...` would make `w` a new, computed tensor whose `.grad` is never filled.
# 3. **Zero the gradients after each update**, or they accumulate (section 3).
#
# The first point, live:

# %%
w = torch.zeros((), requires_grad=True)
loss = ((w * x_line - y_line) ** 2).mean()
loss.backward()
try:
    w -= 0.1 * w.grad  # outside no_grad: refused
except RuntimeError as error:
    print("RuntimeError:", error)
with torch.no_grad():
    w -= 0.1 * w.grad  # inside no_grad: fine
print("w after one step:", w)

# %% [markdown]
# ### Exercise 4 (3 points): gradient descent by hand
#
# Write `fit_line_by_hand(x, y, lr, steps)`: exactly `steps` updates of plain
# gradient descent (the rule above, with learning rate `lr`) on the mean squared
# error of the line `w * x + b` against `y`, starting from `w = b = 0`, written
# by hand (no `torch.optim`). Return `(w, b)` as Python floats. Leave `x` and `y`
# as they are.
#
# *Hint:* the three details above, and section 3. The check tries several
# learning rates.

# %% solution="ex_fit_line_by_hand"
def fit_line_by_hand(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> tuple[float, float]:
    """Gradient descent on the mean squared error of w * x + b, from w = b = 0."""
    ### BEGIN SOLUTION
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    for _ in range(steps):
        loss = ((w * x + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
    return w.item(), b.item()
    ### END SOLUTION


# %% check="ex_fit_line_by_hand_check"
check.check_fit_line_by_hand(fit_line_by_hand)

# %% graded="ex_fit_line_by_hand_tests" points=3
check.check_fit_line_by_hand(fit_line_by_hand)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(205)
hidden_x = torch.linspace(-3, 1, 40)
hidden_x2 = torch.linspace(-1, 1, 16)
check.check_fit_line_by_hand(fit_line_by_hand, inputs=[
    (hidden_x, 0.7 * hidden_x + 2 + 0.3 * torch.randn(40, generator=hidden_g), 0.03, 80),
    (hidden_x2, 4 * hidden_x2 + 0.2 * torch.randn(16, generator=hidden_g), 0.5, 25),
])
### END HIDDEN TESTS

# %% [markdown]
# With your function, the fit lands close to the true line (the noise moves it a
# little):

# %%
w_hand, b_hand = fit_line_by_hand(x_line, y_line, LINE_LR, LINE_STEPS)
print(f"learned w = {w_hand:.3f}, b = {b_hand:.3f} (true: 2, -1)")
plt.figure(figsize=(5, 3))
plt.scatter(x_line, y_line, s=12, label="data")
plt.plot(x_line, w_hand * x_line + b_hand, color="C1", label=f"fit: {w_hand:.2f} x + {b_hand:.2f}")
plt.legend()
plt.show()

# %% [markdown]
# ## 6. The same with an optimizer
#
# `torch.optim` packages the update. An optimizer is given the parameters once;
# then `optimizer.zero_grad()` clears their gradients and `optimizer.step()`
# applies the update (under `no_grad`, in place, as you did by hand). `SGD` is
# exactly the rule above; lesson 05 adds momentum, Adam and AdamW. Every
# training loop in the course has this shape:
#
# ```python
# for batch in data:
#     optimizer.zero_grad()      # 1. forget the previous step's gradients
#     loss = loss_fn(model(x), y)  # 2. forward pass, recorded
#     loss.backward()            # 3. gradients of the loss for every parameter
#     optimizer.step()           # 4. update the parameters
# ```
#
# To watch training, log the loss at every step. Log `loss.item()`, a plain
# Python float: section 7 measures what goes wrong when you keep the tensor.
#
# ### Exercise 5 (3 points: 1 for the fit, 2 for the log): fit with `torch.optim.SGD`
#
# Write `fit_line_with_sgd(x, y, lr, steps)`: the fit of exercise 4 (same start,
# same number of updates), with `torch.optim.SGD` making the updates. Return
# `(w, b, losses)`: `w` and `b` as Python floats, and `losses` a list with the
# loss of every step (the loss computed at that step, before its update), each
# **a Python float**.

# %% solution="ex_fit_line_with_sgd"
def fit_line_with_sgd(x: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> tuple[float, float, list[float]]:
    """The fit of exercise 4 with torch.optim.SGD; also returns every step's loss as a float."""
    ### BEGIN SOLUTION
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((w * x + b - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return w.item(), b.item(), losses
    ### END SOLUTION


# %% check="ex_fit_line_with_sgd_check"
check.check_fit_line_with_sgd(fit_line_with_sgd)
check.check_loss_log(fit_line_with_sgd)

# %% graded="ex_fit_line_with_sgd_tests" points=1
check.check_fit_line_with_sgd(fit_line_with_sgd)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(206)
hidden_x = torch.linspace(0, 2, 30)
hidden_y = -1.5 * hidden_x + 0.5 + 0.1 * torch.randn(30, generator=hidden_g)
hidden_x2 = torch.linspace(-1, 1, 12)
hidden_y2 = 3 - hidden_x2 + 0.3 * torch.randn(12, generator=hidden_g)
check.check_fit_line_with_sgd(fit_line_with_sgd, inputs=[(hidden_x, hidden_y, 0.15, 70), (hidden_x2, hidden_y2, 0.4, 30)])
### END HIDDEN TESTS

# %% graded="ex_loss_log_tests" points=2
check.check_loss_log(fit_line_with_sgd)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(207)
hidden_x = torch.linspace(-1, 3, 25)
hidden_y = 0.8 * hidden_x - 2 + 0.2 * torch.randn(25, generator=hidden_g)
check.check_loss_log(fit_line_with_sgd, inputs=[(hidden_x, hidden_y, 0.05, 45)])
### END HIDDEN TESTS

# %% [markdown]
# The optimizer and your hand-written loop do the same arithmetic, so they land
# on the same line, and the float log plots directly:

# %%
w_sgd, b_sgd, line_losses = fit_line_with_sgd(x_line, y_line, LINE_LR, LINE_STEPS)
print(f"by hand: w = {w_hand:.4f}, b = {b_hand:.4f} | SGD: w = {w_sgd:.4f}, b = {b_sgd:.4f}")
print(f"loss: {line_losses[0]:.3f} at the first step, {line_losses[-1]:.4f} at the last")
fig = plot_curves({"training loss": line_losses}, xlabel="step", title="Fitting y = w x + b with SGD")

# %% [markdown]
# ## 7. Keep numbers, not loss tensors
#
# A loss tensor is not just a number: through its `grad_fn` it holds on to its
# whole graph, and a graph that has not been through `backward()` also holds every
# intermediate result saved for it. Keep the tensor (in a list, or in a running
# total `total += loss`) and all of that stays in memory for as long as the list
# does. `loss.item()` copies out the number and lets the rest go.
#
# Let us measure it on real data: MNIST digits, loaded through torchvision's
# `MNIST` class. Lesson 03 covers datasets and transforms properly; here we take
# the whole `uint8` image tensor the dataset holds (`.data`) and normalise it
# ourselves with MNIST's mean and standard deviation.

# %% locked="load_mnist"
def as_inputs(dataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n digits of an MNIST dataset as normalised [n, 1, 28, 28] floats, and their labels."""
    images = (dataset.data[:n].float() / 255 - MNIST_MEAN) / MNIST_STD
    return images.unsqueeze(1), dataset.targets[:n]


train_images, train_labels = as_inputs(mnist_dataset(train=True), N_TRAIN)
test_images, test_labels = as_inputs(mnist_dataset(train=False), N_TEST)
print("train:", list(train_images.shape), "test:", list(test_images.shape), "first labels:", train_labels[:8].tolist())

# %% [markdown]
# A small network (lesson 04 explains `nn` modules; here it is simply a function
# with parameters) and a cross-entropy loss:

# %%
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_epoch(keep_tensors: bool) -> list:
    """One pass over the training digits; returns the logged losses.

    Steps per batch: zero_grad, forward, loss, backward, step, then log the loss,
    as the tensor itself if ``keep_tensors`` (the mistake) or as ``loss.item()``.
    """
    log = []
    for start in range(0, N_TRAIN, BATCH):
        images, labels = train_images[start:start + BATCH], train_labels[start:start + BATCH]
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        log.append(loss if keep_tensors else loss.item())
    return log


# %% [markdown]
# To see what such lists keep alive, we count two things. The graph nodes: walk
# from each kept tensor's `grad_fn` through `next_functions` (both public). And
# the memory the graphs still hold: `torch.autograd.graph.saved_tensors_hooks`
# lets you see every tensor autograd saves for the backward pass as it is saved
# (its `pack` function receives it, and whatever `pack` returns is what the graph
# keeps). `SavedTensors` keeps a weak reference to each one, so it can tell later
# which are still alive: `backward()`, or dropping the graph, frees them. Memory
# that exists anyway (the parameters, the dataset) is left out.

# %%
class _Saved:
    """What the graph keeps instead of a saved tensor: the tensor, in a box we can weakly reference."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class SavedTensors:
    """Inside ``with SavedTensors() as saved:``, records every tensor autograd saves for backward."""

    def __init__(self) -> None:
        self.boxes: list[weakref.ref] = []

    def pack(self, tensor: torch.Tensor) -> _Saved:
        # detach(): the same memory without the tensor's own grad_fn, which would otherwise
        # refer back to this box and keep the graph alive in a reference cycle
        box = _Saved(tensor.detach())
        self.boxes.append(weakref.ref(box))
        return box

    def __enter__(self) -> "SavedTensors":
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda box: box.tensor)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.hooks.__exit__(*exc)

    def bytes_held(self, owned: list[torch.Tensor]) -> int:
        """Bytes of the saved tensors some graph still holds, each block of memory once, ``owned`` left out."""
        skip = {t.untyped_storage().data_ptr() for t in owned}
        held = {}
        for ref in self.boxes:
            box = ref()  # None once the graph that held it was freed
            if box is not None and box.tensor.untyped_storage().data_ptr() not in skip:
                held[box.tensor.untyped_storage().data_ptr()] = box.tensor.untyped_storage().nbytes()
        return sum(held.values())


def graph_nodes(tensors: list) -> int:
    """The number of graph nodes reachable from the ``grad_fn`` of each tensor in ``tensors``."""
    nodes, todo = set(), [t.grad_fn for t in tensors if isinstance(t, torch.Tensor)]
    while todo:
        node = todo.pop()
        if node is not None and node not in nodes:
            nodes.add(node)
            todo.extend(parent for parent, _ in node.next_functions)
    return len(nodes)


OWNED = [*model.parameters(), train_images, train_labels, test_images, test_labels]


def validation_losses(record: bool) -> list[torch.Tensor]:
    """The loss of every test batch, computed with recording on or off; the tensors are kept."""
    losses = []
    with torch.set_grad_enabled(record):  # no_grad() when record is False, a no-op when True
        for start in range(0, N_TEST, BATCH):
            losses.append(loss_fn(model(test_images[start:start + BATCH]), test_labels[start:start + BATCH]))
    return losses


runs = {"training, loss.item()": lambda: train_epoch(keep_tensors=False),
        "training, loss tensors": lambda: train_epoch(keep_tensors=True),
        "validation, loss tensors, recording on": lambda: validation_losses(record=True),
        "validation, loss tensors, under no_grad": lambda: validation_losses(record=False)}
logs = {}
for what, run in runs.items():
    with SavedTensors() as saved:
        logs[what] = kept = run()
    held = saved.bytes_held(OWNED)
    print(f"{what:42} {len(kept):3} values keep {graph_nodes(kept):4} graph nodes and "
          f"{held / 1024:7.1f} KiB of saved tensors")
first_epoch, second_epoch = logs["training, loss.item()"], logs["training, loss tensors"]
print("logged with .item():", type(first_epoch[0]).__name__, "| logged as tensors:", second_epoch[0])

# %% [markdown]
# Read the table from the top:
#
# - Floats keep nothing.
# - Training loss tensors keep every step's graph nodes. `backward()` already
#   freed the saved activations, so here the cost is bookkeeping that grows by a
#   few nodes per step, plus one tensor per step: small, but it never stops growing.
# - Validation without `backward()` is the expensive case: every batch's graph
#   still holds its activations (each hidden layer output, 100 x 128 floats here).
#   That grows with the batch size, the width of the model and the number of
#   batches; with a real model it is how an evaluation loop runs out of memory.
# - `no_grad` builds no graph, so even kept tensors hold nothing but their values.
#
# Rule: log `loss.item()` (it also copies the number to the CPU, so on a GPU do
# it every few steps rather than in a tight loop, see lesson 07), and evaluate
# under `torch.no_grad()`.

# %%
fig = plot_curves({"training loss": first_epoch + [t.item() for t in second_epoch]}, xlabel="step (batch of 100)",
                  title="MNIST, two epochs")

# %% [markdown]
# ## 8. Evaluating without a graph
#
# Evaluation only runs the model forward. Under `torch.no_grad()` no graph is
# built at all, which saves the memory measured above and the time to record
# it. Calling `.detach()` or `.item()` on the result afterwards is too late: the
# graph was already built during the forward pass.

# %%
with SavedTensors() as saved:
    logits = model(test_images)
print("recording on :", saved.bytes_held(OWNED) // 1024, "KiB saved for a backward that never comes")
with SavedTensors() as saved, torch.no_grad():
    logits = model(test_images)
print("under no_grad:", saved.bytes_held(OWNED) // 1024, "KiB; requires_grad =", logits.requires_grad)

# %% [markdown]
# ### Exercise 6 (2 points: 1 for the value, 1 for building no graph): accuracy
#
# Write `accuracy(model, images, labels)` that returns the fraction (between 0 and
# 1) of `images` whose highest-scoring class (`argmax` over dimension 1 of the
# model's output) equals the label, as a Python float. The forward pass must run
# under `torch.no_grad()` (or `torch.inference_mode()`), and the call must not
# change the model's parameters (nor their `requires_grad`) or autograd's global
# state (`torch.set_grad_enabled(False)` as a plain call would leave recording
# off for the rest of the program). The model here has no dropout, so its
# train/eval mode does not matter yet; lesson 04 adds the rule for it: a function
# that predicts calls `model.eval()` and leaves the model in eval mode, and code
# that trains calls `model.train()` first.

# %% solution="ex_accuracy"
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of correct predictions, computed without recording a graph."""
    ### BEGIN SOLUTION
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()
    ### END SOLUTION


# %% check="ex_accuracy_check"
check.check_accuracy(accuracy)
check.check_accuracy_no_graph(accuracy)

# %% graded="ex_accuracy_value_tests" points=1
check.check_accuracy(accuracy)
### BEGIN HIDDEN TESTS
with torch.random.fork_rng():
    torch.manual_seed(208)
    hidden_model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
check.check_accuracy(accuracy, inputs=[(hidden_model, test_images[:300], test_labels[:300])])
### END HIDDEN TESTS

# %% graded="ex_accuracy_no_graph_tests" points=1
check.check_accuracy_no_graph(accuracy)
### BEGIN HIDDEN TESTS
with torch.random.fork_rng():
    torch.manual_seed(209)
    hidden_model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.Tanh(), nn.Linear(32, 10))
check.check_accuracy_no_graph(accuracy, inputs=[(hidden_model, test_images[:200], test_labels[:200])])
### END HIDDEN TESTS

# %% [markdown]
# Two epochs on 2,000 digits already classify most test digits correctly:

# %%
print(f"test accuracy after two epochs: {accuracy(model, test_images, test_labels):.1%}")

# %% [markdown]
# ## 9. Debugging tools, and what they cost
#
# ### gradcheck: is this gradient right?
#
# When you write a gradient yourself, `torch.autograd.gradcheck(fn, inputs)`
# compares it with **finite differences**: it nudges each input element by a tiny
# `eps` and watches how the output moves. Those differences cancel most of a
# number's digits, so gradcheck needs **float64** inputs that require grad; in
# float32 even a correct gradient fails.

# %%
x64 = torch.randn(4, dtype=torch.float64, requires_grad=True)
print("torch.sin, float64:", torch.autograd.gradcheck(torch.sin, (x64,)))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # gradcheck warns about float32 inputs, rightly
    x32 = x64.detach().float().requires_grad_()
    print("torch.sin, float32:", torch.autograd.gradcheck(torch.sin, (x32,), raise_exception=False))

# %% [markdown]
# Where do hand-written gradients come from? A custom `torch.autograd.Function`
# defines `forward` (compute the result and save what backward will need in
# `ctx`) and `backward` (receive `grad_output`, the gradient of the final loss
# with respect to this function's output, and return the gradient with respect to
# its input). By the chain rule that is `grad_output` times the local derivative.
# Here is $x^3$:

# %%
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x ** 2  # chain rule: upstream gradient times d(x^3)/dx


print("Cube passes gradcheck:", torch.autograd.gradcheck(Cube.apply, (x64,)))

# %% [markdown]
# ### Exercise 7 (2 points): the backward of softplus
#
# `softplus(x) = log(1 + exp(x))` is a smooth version of ReLU. Write
# `softplus_backward(x, grad_output)`: the gradient its custom `Function` must
# return. Work out $\frac{d}{dx}\log(1 + e^x)$ on paper, then apply the chain rule.
# Keep the dtype of `x` (the check uses float64).
#
# The result must stay finite for large |x| too (the check tries x = ±800).
#
# *Hint:* the derivative you find has a name in PyTorch (an activation function),
# and a numerically stable implementation comes with it.

# %% solution="ex_softplus_backward"
def softplus_backward(x: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """Gradient of softplus at x, times the upstream gradient grad_output."""
    ### BEGIN SOLUTION
    return grad_output * torch.sigmoid(x)
    ### END SOLUTION


# %% check="ex_softplus_backward_check"
check.check_softplus_backward(softplus_backward)

# %% graded="ex_softplus_backward_tests" points=2
check.check_softplus_backward(softplus_backward)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(210)
check.check_softplus_backward(softplus_backward, inputs=[
    (10 * torch.randn(3, 4, generator=hidden_g, dtype=torch.float64), torch.randn(3, 4, generator=hidden_g, dtype=torch.float64)),
])
### END HIDDEN TESTS

# %% [markdown]
# Plug your backward into a `Function` and let gradcheck judge it:

# %%
class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.log1p(torch.exp(x))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return softplus_backward(x, grad_output)


print("Softplus passes gradcheck:", torch.autograd.gradcheck(Softplus.apply, (x64,)))

# %% [markdown]
# ### Exercise 8 (1 point): a gradient test you can call
#
# Write `gradients_are_correct(fn, x)` that returns `True` when `fn`'s autograd
# gradient at `x` agrees with finite differences and `False` when it does not,
# without raising an error either way. `x` may be float32 and may not require
# grad; leave the caller's `x` as it is. Keep gradcheck's default tolerances:
# some of the tested gradients are wrong by only a fraction of a percent.
#
# *Hint:* the gradcheck section above says what the test needs from its input.
# Read `torch.autograd.gradcheck`'s documentation for how it reports a mismatch.

# %% solution="ex_gradients_are_correct"
def gradients_are_correct(fn, x: torch.Tensor) -> bool:
    """gradcheck of fn at a float64 copy of x (default tolerances), as True or False."""
    ### BEGIN SOLUTION
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    return torch.autograd.gradcheck(fn, (x64,), raise_exception=False)
    ### END SOLUTION


# %% check="ex_gradients_are_correct_check"
check.check_gradients_are_correct(gradients_are_correct)

# %% graded="ex_gradients_are_correct_tests" points=1
check.check_gradients_are_correct(gradients_are_correct)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(211)
check.check_gradients_are_correct(gradients_are_correct, inputs=[
    (check.make_function(torch.sin, lambda t, g: g * torch.cos(t), "Sine"), torch.randn(5, generator=hidden_g), True),
    (check.make_function(torch.sin, lambda t, g: g * torch.sin(t), "SineWrong"), torch.randn(5, generator=hidden_g), False),
    (torch.sigmoid, torch.randn(3, 2, generator=hidden_g), True),
])
### END HIDDEN TESTS

# %% [markdown]
# ### Anomaly detection: where did the NaN come from?
#
# A NaN gradient usually appears far from its cause. The distance between two
# points is a classic: when the points coincide, the square root's derivative is
# infinite, and infinity times zero gives NaN, silently:

# %%
a = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([1.0, 2.0])
distance = torch.sqrt(((a - b) ** 2).sum())
distance.backward()
print("gradient:", a.grad)

# %% [markdown]
# Anomaly detection checks every backward step for NaN and, when one appears,
# raises an error naming the operation and warns with the line of *your* code
# whose forward pass created it. Switch it on for a block with
# `torch.autograd.detect_anomaly()`, or globally with
# `torch.autograd.set_detect_anomaly(True)`.

# %%
def forward_line(message: str) -> str:
    """The last line of your own code quoted in an anomaly-detection warning (library frames skipped)."""
    lines = message.splitlines()
    quoted = [(lines[i], lines[i + 1].strip()) for i in range(len(lines) - 1) if lines[i].lstrip().startswith("File ")]
    own = [code for where, code in quoted if "site-packages" not in where and "lib/python" not in where]
    return own[-1] if own else message


a.grad = None
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        with torch.autograd.detect_anomaly():
            distance = torch.sqrt(((a - b) ** 2).sum())
            distance.backward()
    except RuntimeError as error:
        print("RuntimeError:", error)
for warning in caught:
    if "Error detected" in str(warning.message):
        print("created by:", forward_line(str(warning.message)))

# %% [markdown]
# The error names `PowBackward0`, the backward of `** 2`, not the square root:
# backward runs from the output towards the inputs, and the square root's
# backward, first, produces `inf` (its derivative at 0), which anomaly detection
# does not flag. The next step, the backward of `(a - b) ** 2`, multiplies that
# `inf` by `2 * (a - b) = 0`, and `inf * 0` is the first NaN. So the node named
# is where the NaN first appeared; the forward line quoted with it (the whole
# expression here) and the operation just before it in backward order, the
# square root at 0, are where to look. A common fix is a small `eps` inside it,
# `torch.sqrt(squares.sum() + 1e-12)`.
#
# ### The profiler: where does the time go?
#
# `torch.profiler.profile` records every operation run inside it, with its time
# (and, on a GPU, the kernels). Lesson 07 uses it to find bottlenecks; here it
# looks at five training steps of the MNIST model. The numbers change from run
# to run and from machine to machine.

# %% tags=["nbval-ignore-output"]
os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # keeps the profiler's C++ start/stop log lines out of the notebook
batch_images, batch_labels = train_images[:BATCH], train_labels[:BATCH]


def training_step() -> None:
    optimizer.zero_grad()
    loss_fn(model(batch_images), batch_labels).backward()
    optimizer.step()


with profile(activities=[ProfilerActivity.CPU]) as profiler:
    for _ in range(5):
        training_step()
print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))

# %% [markdown]
# ### What the tools cost
#
# Anomaly detection saves a Python traceback for every recorded operation and
# inspects every backward result; the profiler records every operation. Time
# five training steps with each switched on and compare with the same steps
# plain. Other programs on the machine disturb single runs, so each is timed
# many times after a warm-up and the table uses the best run; the median shows
# how much the runs scattered.

# %% tags=["nbval-ignore-output"]
STEPS_PER_RUN = 5


def plain_steps() -> None:
    for _ in range(STEPS_PER_RUN):
        training_step()


def steps_with_anomaly_detection() -> None:
    with torch.autograd.detect_anomaly():
        for _ in range(STEPS_PER_RUN):
            training_step()


def steps_with_profiler() -> None:
    with profile(activities=[ProfilerActivity.CPU]):
        for _ in range(STEPS_PER_RUN):
            training_step()


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # detect_anomaly warns that it is slow each time it starts
    timings = {"plain": time_call(plain_steps, warmup=2, repeat=30),
               "anomaly detection": time_call(steps_with_anomaly_detection, warmup=1, repeat=5),  # slow: fewer runs
               "profiler": time_call(steps_with_profiler, warmup=2, repeat=30)}
for name, timing in timings.items():
    best_ms, median_ms = (t / STEPS_PER_RUN * 1e3 for t in (timing.best, timing.median))
    print(f"{name:18} {best_ms:7.2f} ms per step (median {median_ms:7.2f})  "
          f"{timing.best / timings['plain'].best:5.1f}x plain")

# %% [markdown]
# Both tools add work to every single operation, so every step gets slower; how
# much depends on the machine and the model, which is why the table shows your
# own numbers. (Anomaly detection is especially slow inside a notebook, where the
# call stack it saves for each operation is deep.) They are for finding a
# problem, not for every run: make sure nothing leaves
# `torch.autograd.set_detect_anomaly(True)` switched on, profile a few steps
# rather than a whole training run, and run `gradcheck` in tests, not in the
# training loop.

# %%
torch.autograd.set_detect_anomaly(True)  # the global switch, e.g. at the top of a debugging script
print("anomaly detection is on:", torch.is_anomaly_enabled())
torch.autograd.set_detect_anomaly(False)  # ... and off again before real training
print("anomaly detection is on:", torch.is_anomaly_enabled())

# %% [markdown]
# ## 10. Put it together
#
# ### Exercise 9 (3 points): train until good enough
#
# Real training rarely runs a fixed number of steps: it stops when the model is
# good enough, and gives up, loudly, when it does not get there. Write
# `fit_to_target(predict, params, x, y, lr, target, max_steps)`:
#
# - `params` is a list of tensors that require grad (leaves), and
#   `predict(params, x)` returns predictions with `y`'s shape, computed from them.
# - Change the tensors in `params` in place by plain gradient descent with
#   learning rate `lr` on the mean squared error of `predict(params, x)` against
#   `y` (every step uses all of `x`), until that error is at most `target`.
# - Return the mean squared error of the final `params`, as a Python float.
# - Params that already meet the target are left exactly as they are. When
#   `max_steps` updates do not reach the target, raise a `RuntimeError` that says
#   so.
# - Leave `x`, `y` and autograd's global state as they were.
#
# The graded tests call it with models and data you never see (a small neural
# network among them), with a target out of reach, and with params that already
# meet it. The updates must be exactly those of gradient descent with `lr` (the
# check follows the path it takes), so either write them by hand or use
# `torch.optim.SGD` with that learning rate and nothing else.
#
# *Hint:* everything in sections 3 to 6. Ask yourself when the error you compare
# with `target` was computed, relative to the last update.

# %% [markdown]
# For example, a line `w * x + b` as a `predict` function, and its two params:

# %%
def predict_line(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The line w * x + b, with params = [w, b]."""
    w, b = params
    return w * x + b


line_params = [torch.zeros((), requires_grad=True), torch.zeros((), requires_grad=True)]
print("error at the start:", ((predict_line(line_params, x_line) - y_line) ** 2).mean().item())

# %% solution="ex_fit_to_target"
def fit_to_target(predict, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                  lr: float, target: float, max_steps: int) -> float:
    """Gradient descent on params, in place, until the mean squared error is at most target; returns that error."""
    ### BEGIN SOLUTION
    for step in range(max_steps + 1):
        loss = ((predict(params, x) - y) ** 2).mean()
        if loss.item() <= target:
            return loss.item()
        if step == max_steps:
            raise RuntimeError(f"{max_steps} steps did not bring the error to {target}")
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    ### END SOLUTION


# %% check="ex_fit_to_target_check"
check.check_fit_to_target(fit_to_target)
check.check_fit_to_target_edges(fit_to_target)

# %% graded="ex_fit_to_target_tests" points=2
check.check_fit_to_target(fit_to_target)
### BEGIN HIDDEN TESTS
hidden_g = torch.Generator().manual_seed(212)
hidden_x = torch.linspace(-2, 2, 50)
check.check_fit_to_target(fit_to_target, inputs=[
    (check._tanh_net, check._leaves(0.5 * torch.randn(1, 8, generator=hidden_g), torch.zeros(8),
                                    0.5 * torch.randn(8, generator=hidden_g), torch.tensor(0.0)),
     hidden_x, torch.sin(2 * hidden_x) + 0.05 * torch.randn(50, generator=hidden_g), 0.1, 0.05, 2000),
    (check._poly3, check._leaves(torch.tensor([1.0, 0.0, 0.0, 0.0])), hidden_x / 2,
     1 - hidden_x / 2 + 0.1 * torch.randn(50, generator=hidden_g), 0.2, 0.015, 1000),
])
### END HIDDEN TESTS

# %% graded="ex_fit_to_target_edge_tests" points=1
check.check_fit_to_target_edges(fit_to_target)
### BEGIN HIDDEN TESTS
hidden_x = torch.linspace(0, 1, 12)
hidden_y = 3 * hidden_x - 1
check.check_fit_to_target_edges(fit_to_target, inputs=[
    ("already", (check._line, check._leaves(torch.tensor(3.0), torch.tensor(-1.0)), hidden_x, hidden_y, 0.1, 0.0, 5)),
    ("unreachable", (check._line, check._leaves(torch.tensor(0.0), torch.tensor(0.0)), hidden_x, hidden_y, 0.01, 1e-3, 3)),
])
### END HIDDEN TESTS

# %% [markdown]
# Your function on the noisy line of section 5. No line can explain the noise, so
# the smallest error any line reaches (the least-squares fit, computed directly
# by `torch.linalg.lstsq`) sets what a sensible target is: ask for 10% more than
# that, then for less than that.

# %%
columns = torch.stack([x_line, torch.ones_like(x_line)], dim=1)  # [N, 2]: w multiplies x, b multiplies 1
best_line = torch.linalg.lstsq(columns, y_line[:, None]).solution.squeeze(1)
best_error = ((columns @ best_line - y_line) ** 2).mean().item()
final_error = fit_to_target(predict_line, line_params, x_line, y_line, LINE_LR, 1.1 * best_error, 1000)
print(f"best possible error {best_error:.4f}; reached {final_error:.4f} with "
      f"w = {line_params[0].item():.3f}, b = {line_params[1].item():.3f}")
try:
    fit_to_target(predict_line, line_params, x_line, y_line, LINE_LR, 0.5 * best_error, 1000)
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# ## Summary
#
# - `requires_grad=True` starts recording; results get a `grad_fn`; leaves get `.grad` from `backward()`.
# - `backward()` needs a scalar; for a tensor, reduce it or pass `gradient=v` (a vector-Jacobian product).
# - Gradients add up across `backward()` calls: clear them every step (`optimizer.zero_grad()`).
# - `no_grad`, `detach`, `requires_grad_`, `inference_mode` switch recording off where it is not wanted.
# - Gradient descent: loss, backward, update in place under `no_grad`, zero; an optimizer does the last two.
# - Log `loss.item()`, evaluate under `no_grad`: kept tensors keep their graphs.
# - `gradcheck` (float64), anomaly detection and the profiler find bugs and cost time: off by default.
# - A training loop that stops at a target checks the error of the params it returns, and raises when it gives up.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
