# %% [markdown]
# # 01 Tensors
#
# A tensor is PyTorch's array: a block of numbers with a **shape**, a **dtype**
# (the type of every element) and a **device** (the memory it lives in: CPU or a
# GPU). Everything in the rest of the course (gradients, datasets, models) is
# built out of tensors, so this lesson is about handling them fluently.
#
# You will learn to create tensors, move them to and from NumPy, reshape them,
# index them, do arithmetic and reductions on them, and move them between devices.
# There are 12 graded exercises worth 20 points; the last one puts the lesson's
# ideas together. Each has a self-check cell right
# below it: run it, read its message, fix, repeat.

# %% locked="setup"
import numpy as np
import torch

from helpers.checks import tensors as check
from helpers.device import pick_device

torch.manual_seed(0)
DEVICE = pick_device()

# %% [markdown]
# ## 1. What a tensor is made of
#
# Every tensor answers three questions: what shape is it, what type are its
# elements, and where does it live?

# %%
x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
print("shape:    ", x.shape, "(same as x.size():", x.size(), ")")
print("dims:     ", x.dim())
print("elements: ", x.numel())
print("dtype:    ", x.dtype)
print("type():   ", x.type())
print("device:   ", x.device)

# %% [markdown]
# `x.dtype` is the modern way to ask for the element type; `x.type()` returns the
# older string name (`torch.FloatTensor` for a float32 tensor on the CPU,
# `torch.cuda.FloatTensor` on a GPU) and you will meet it in older code.
#
# ### dtypes
#
# The dtype decides the precision, the memory per element and which operations
# are allowed. The ones you will meet most:
#
# | dtype | also called | bytes | typical use |
# | --- | --- | --- | --- |
# | `torch.float32` | `torch.float` | 4 | the default for weights and data |
# | `torch.float64` | `torch.double` | 8 | numerical checks that need precision |
# | `torch.float16` | `torch.half` | 2 | mixed precision on GPUs |
# | `torch.bfloat16` | | 2 | mixed precision; float32's range, less precision |
# | `torch.int8`, `int16`, `int32` | | 1, 2, 4 | quantised weights, compact labels |
# | `torch.int64` | `torch.long` | 8 | class labels and indices |
# | `torch.bool` | | 1 | masks |

# %%
for dtype in [torch.float32, torch.float64, torch.float16, torch.bfloat16,
              torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]:
    t = torch.zeros(3, dtype=dtype)
    print(f"{str(dtype):16} {t.element_size()} byte(s) per element")

# %% [markdown]
# Python numbers pick a default dtype: integers become `int64`, floats become
# `float32`. `.to(dtype)` converts, and `.item()` turns a one-element tensor back
# into a plain Python number.

# %%
print(torch.tensor([1, 2, 3]).dtype, torch.tensor([1.0, 2.0]).dtype, torch.tensor([True]).dtype)
ints = torch.tensor([1, 2, 3])
print(ints.to(torch.float16), ints.float().dtype)
total = ints.sum()
print(total, "->", total.item(), type(total.item()))

# %% [markdown]
# ## 2. Creating tensors
#
# | function | gives |
# | --- | --- |
# | `torch.tensor(data)` | a copy of a Python list or NumPy array |
# | `torch.empty(2, 3)` | uninitialised memory (whatever was there: fill it before reading) |
# | `torch.zeros`, `torch.ones`, `torch.full(shape, value)` | constant tensors |
# | `torch.eye(n)` | the n x n identity matrix |
# | `torch.rand`, `torch.randn`, `torch.randint(low, high, shape)` | uniform [0, 1), standard normal, random integers |
# | `torch.zeros_like(t)`, `ones_like`, `rand_like`, ... | same shape, dtype and device as `t` |
# | `torch.arange(start, end, step)` | evenly spaced by step; `end` is excluded |
# | `torch.linspace(start, end, steps)` | `steps` evenly spaced points; `end` included |
# | `torch.logspace(start, end, steps)` | points evenly spaced in the exponent: 10**start ... 10**end |
# | `torch.randperm(n)` | a random ordering of 0..n-1 |

# %%
print(torch.zeros(2, 3))
print(torch.full((2, 2), 3.5))
print(torch.eye(3))
print(torch.arange(0, 10, 3))
print(torch.linspace(0, 1, steps=5))
print(torch.logspace(0, 3, steps=4))
print(torch.randint(0, 10, (2, 4)))
print(torch.randperm(6))
print(torch.ones_like(torch.eye(2)))
print(torch.empty(2, 3).shape, "(its values are whatever was in memory, so we do not print them)")
print(torch.rand(2, 2).dtype, torch.randn(3).shape)

# %% [markdown]
# **Changed since older tutorials:** constructors like `torch.FloatTensor(2, 3)`
# and `torch.set_default_tensor_type(...)` are legacy. Use the functions above with
# `dtype=` and `device=` arguments, and `torch.set_default_dtype(torch.float64)`
# when you really need a different default floating-point type.

# %%
torch.set_default_dtype(torch.float64)
print("with float64 as the default:", torch.tensor([1.5]).dtype, torch.zeros(1).dtype)
torch.set_default_dtype(torch.float32)  # back to the usual default for the rest of the course
print("and back:", torch.tensor([1.5]).dtype)

# %% [markdown]
# ### Exercise 1 (1 point): starter tensors
#
# Write `make_starter_tensors()` returning a dict with exactly these keys:
#
# - `"zeros"`: a 2 x 3 tensor of zeros with dtype float64
# - `"identity"`: the 3 x 3 identity matrix (float32)
# - `"evens"`: the even numbers 0, 2, 4, 6, 8 as int64
# - `"grid"`: 5 evenly spaced points from 0 to 1, both included (float32)
# - `"sevens"`: a 2 x 2 tensor filled with 7, dtype int32
#
# *Hint:* pass `dtype=` where the default is not what is asked.

# %% solution="ex_starter_tensors"
def make_starter_tensors() -> dict[str, torch.Tensor]:
    """Return the five tensors described above."""
    ### BEGIN SOLUTION
    return {
        "zeros": torch.zeros(2, 3, dtype=torch.float64),
        "identity": torch.eye(3),
        "evens": torch.arange(0, 10, 2),
        "grid": torch.linspace(0, 1, steps=5),
        "sevens": torch.full((2, 2), 7, dtype=torch.int32),
    }
    ### END SOLUTION


# %% check="ex_starter_tensors_check"
check.check_make_starter_tensors(make_starter_tensors)

# %% graded="ex_starter_tensors_tests" points=1
check.check_make_starter_tensors(make_starter_tensors)

# %% [markdown]
# ## 3. The NumPy bridge
#
# `torch.from_numpy(array)` and `tensor.numpy()` do not copy: the tensor and the
# array share one block of memory, so writing to one changes the other. That is
# fast, and a classic source of surprises. `torch.tensor(array)` always copies.
# `torch.as_tensor(array)` copies only when it must (a different dtype or
# device was asked for), which makes it the cheap way to turn data into tensors.

# %%
array = np.zeros(3, dtype=np.float32)
shared = torch.from_numpy(array)
copied = torch.tensor(array)
array[0] = 42.0
print("from_numpy sees the change:", shared)
print("torch.tensor made a copy:  ", copied)
back = shared.numpy()
back[1] = -1.0
print("and .numpy() shares too:   ", array)
print("as_tensor shares when it can:", np.shares_memory(torch.as_tensor(array).numpy(), array))

# %% [markdown]
# ### Exercise 2 (1 point): share memory with NumPy
#
# Write `share_numpy(array)` that returns a tensor **sharing memory** with the
# NumPy array (no copy), with the array's own dtype.

# %% solution="ex_share_numpy"
def share_numpy(array: np.ndarray) -> torch.Tensor:
    """Wrap ``array`` as a tensor without copying it."""
    ### BEGIN SOLUTION
    return torch.from_numpy(array)
    ### END SOLUTION


# %% check="ex_share_numpy_check"
check.check_share_numpy(share_numpy)

# %% graded="ex_share_numpy_tests" points=1
check.check_share_numpy(share_numpy)
### BEGIN HIDDEN TESTS
check.check_share_numpy(share_numpy, inputs=[np.arange(10, dtype=np.int64), np.eye(3, dtype=np.float64), np.arange(20.0).reshape(4, 5).T])
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Changing shape
#
# A tensor's elements sit in one flat block of memory; its shape and **strides**
# say how to walk that block. Many shape operations only change the walk, not
# the data:
#
# - `view(shape)` reinterprets the block. It needs a **contiguous** tensor (one
#   whose elements are stored in row order); otherwise it raises an error.
# - `reshape(shape)` does the same when it can and copies when it must. Use it
#   unless you need the guarantee that no copy happens.
# - `flatten(start_dim=1)` merges dimensions into one; `squeeze`/`unsqueeze`
#   remove/add dimensions of size 1.
# - `transpose(i, j)` swaps two dimensions; `permute(...)` reorders all of them.
#   Neither moves data, so the result is usually not contiguous.

# %%
t = torch.arange(6)
print(t.view(2, 3))
print(t.reshape(3, -1))           # -1: "work this dimension out for me"
m = t.view(2, 3).T                # transposed: same memory, new strides
print("contiguous after .T?", m.is_contiguous(), "strides:", m.stride())
try:
    m.view(6)
except RuntimeError as error:
    print("view failed:", str(error)[:70], "...")
print("reshape copes:", m.reshape(6))
print("unsqueeze(0):", t.unsqueeze(0).shape, " squeeze():", torch.zeros(1, 3, 1).squeeze().shape)

# %% [markdown]
# `expand` and `repeat` both make a dimension of size 1 larger. `expand` is free:
# it fakes the copies with a stride of 0. `repeat` really copies the data.
# `cat` joins tensors along an existing dimension; `stack` adds a new one.

# %%
row = torch.tensor([[1, 2, 3]])
print(row.expand(2, 3), "stride", row.expand(2, 3).stride())
print(row.repeat(2, 1), "stride", row.repeat(2, 1).stride())
a, b = torch.zeros(2, 3), torch.ones(2, 3)
print("cat dim 0:", torch.cat([a, b]).shape, " cat dim 1:", torch.cat([a, b], dim=1).shape,
      " stack:", torch.stack([a, b]).shape)

# %% [markdown]
# ### Exercise 3 (2 points): channels first
#
# Image libraries often store a batch of images as `[N, H, W, C]` (height, width,
# then colour channels). PyTorch's layers expect `[N, C, H, W]`. Write
# `to_channels_first(images)`: the same elements with the same dtype (8-bit
# images stay 8-bit), only the order of the dimensions changes.
#
# *Hint:* a reshape keeps the elements in the same order, so it cannot move
# channels. You need to reorder dimensions.

# %% solution="ex_channels_first"
def to_channels_first(images: torch.Tensor) -> torch.Tensor:
    """Reorder ``[N, H, W, C]`` to ``[N, C, H, W]``."""
    ### BEGIN SOLUTION
    return images.permute(0, 3, 1, 2)
    ### END SOLUTION


# %% check="ex_channels_first_check"
check.check_to_channels_first(to_channels_first)

# %% graded="ex_channels_first_tests" points=2
check.check_to_channels_first(to_channels_first)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(101)
check.check_to_channels_first(to_channels_first, inputs=[torch.randn(3, 7, 5, 3, generator=g), torch.randn(1, 4, 6, 2, generator=g),
                                                         torch.randn(2, 3, 4, 1, generator=g, dtype=torch.float64)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 4 (1 point): flatten all but the batch
#
# Write `flatten_batch(x)` that turns `[N, d1, d2, ...]` into `[N, d1*d2*...]`.
# It must work when `x` is not contiguous (for example after a transpose), and for
# any sizes, a batch of one or dimensions of size 1 included.

# %% solution="ex_flatten_batch"
def flatten_batch(x: torch.Tensor) -> torch.Tensor:
    """Keep dimension 0 and merge all the others into one."""
    ### BEGIN SOLUTION
    return x.flatten(start_dim=1)
    ### END SOLUTION


# %% check="ex_flatten_batch_check"
check.check_flatten_batch(flatten_batch)

# %% graded="ex_flatten_batch_tests" points=1
check.check_flatten_batch(flatten_batch)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(102)
check.check_flatten_batch(flatten_batch, inputs=[torch.randn(5, 2, 3, 4, generator=g).permute(0, 3, 1, 2), torch.randn(2, 9, generator=g),
                                                 torch.randn(1, 3, 1, generator=g)])
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Indexing
#
# Tensors index like NumPy arrays: slices, negative indices, `...` for "all the
# remaining dimensions", integer tensors to pick positions, and boolean masks.

# %%
grid = torch.arange(12).reshape(3, 4)
print(grid)
print("row 1:", grid[1], " last column:", grid[:, -1], " every other column:\n", grid[:, ::2])
print("... means all leading dims:", grid[..., 0])
mask = grid % 3 == 0
print("mask:\n", mask)
print("grid[mask]:", grid[mask], " masked_select:", torch.masked_select(grid, mask))
print("nonzero (positions of True):\n", mask.nonzero())
print("take (index the flattened tensor):", torch.take(grid, torch.tensor([0, 5, 11])))

# %% [markdown]
# `torch.where` has two forms. With one argument, `torch.where(mask)` returns the
# coordinates of the True elements (like `nonzero`, one tensor per dimension).
# With three, `torch.where(mask, a, b)` picks from `a` where the mask is True and
# from `b` elsewhere, elementwise.

# %%
print(torch.where(mask))
print(torch.where(mask, grid, -1))

# %% [markdown]
# `gather(dim, index)` picks one element per position along a dimension: for
# `dim=1`, `out[i][j] = src[i][index[i][j]]`. It is how you pick, for each row of
# a score matrix, the score of that row's label.

# %%
scores = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]])
picks = torch.tensor([[1], [0]])
print(scores.gather(1, picks))

# %% [markdown]
# ### Exercise 5 (2 points, 1 each): masks
#
# a. `positive_values(x)`: the strictly positive elements of `x`, as a 1-D tensor
#    in their original order, with `x`'s dtype.
#
# b. `relu(x)`: a tensor with `x`'s shape and dtype that keeps `x` where it is
#    positive and is 0 elsewhere, for every value, `inf` and `-inf` included.
#    Integer inputs must stay integers.
#
# *Hint:* `torch.where` (or a clamp) does it elementwise. When two values of
# different types meet, PyTorch promotes to the wider type (an int64 tensor and a
# Python float give floats), so mind the type of the zero you bring in.

# %% solution="ex_masks"
def positive_values(x: torch.Tensor) -> torch.Tensor:
    """The elements of ``x`` that are > 0, flattened to 1-D."""
    ### BEGIN SOLUTION
    return x[x > 0]
    ### END SOLUTION


def relu(x: torch.Tensor) -> torch.Tensor:
    """``x`` where it is positive, 0 elsewhere."""
    ### BEGIN SOLUTION
    return torch.where(x > 0, x, torch.zeros_like(x))
    ### END SOLUTION


# %% check="ex_masks_check"
check.check_positive_values(positive_values)
check.check_relu(relu)

# %% graded="ex_masks_positive_tests" points=1
check.check_positive_values(positive_values)
### BEGIN HIDDEN TESTS
check.check_positive_values(positive_values, inputs=[torch.tensor([-1.0, 0.0, 2.5, 0.0, 3.0]), torch.zeros(2, 2),
                                                     torch.tensor([[0.1, -0.7], [1e-9, 2.0]], dtype=torch.float64),
                                                     torch.tensor([-5, 0, -2], dtype=torch.int32)])
### END HIDDEN TESTS

# %% graded="ex_masks_relu_tests" points=1
check.check_relu(relu)
### BEGIN HIDDEN TESTS
check.check_relu(relu, inputs=[torch.tensor([-3.0, 0.0, 3.0]), torch.arange(-4, 4).reshape(2, 4)])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 6 (2 points): the score of each label
#
# A classifier produces `scores` of shape `[N, C]` (one row per example, one
# column per class) and you have the true `labels`, shape `[N]`, values in
# `0..C-1`. Write `pick_scores(scores, labels)` returning the `[N]` tensor whose
# element `i` is `scores[i, labels[i]]`.
#
# *Hint:* `gather` (section 5) picks one element per row. Alternatively, index
# with one integer tensor per dimension: such index tensors pair up element by
# element. Either way, the result must have shape `[N]`, also when N is 1.

# %% solution="ex_pick_scores"
def pick_scores(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """For each row i, the score in column labels[i]."""
    ### BEGIN SOLUTION
    return scores.gather(1, labels.unsqueeze(1)).squeeze(1)
    ### END SOLUTION


# %% check="ex_pick_scores_check"
check.check_pick_scores(pick_scores)

# %% graded="ex_pick_scores_tests" points=2
check.check_pick_scores(pick_scores)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(103)
check.check_pick_scores(pick_scores, inputs=[(torch.randn(6, 10, generator=g), torch.tensor([9, 0, 3, 3, 7, 1])), (torch.randn(1, 2, generator=g), torch.tensor([1])), (torch.randn(3, 5, generator=g, dtype=torch.float64), torch.tensor([4, 0, 2]))])
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Arithmetic and broadcasting
#
# `+ - * /` and `**` work elementwise (`a * b` is the same as `torch.mul(a, b)`), as do functions like `torch.exp`,
# `torch.log`, `torch.sqrt` and `torch.pow`. Rounding comes in four flavours:
# `floor` (down), `ceil` (up), `round` (to nearest, halves to even), `trunc`
# (towards zero); `frac` keeps what `trunc` drops. `clamp(min, max)` limits values
# to a range.

# %%
v = torch.tensor([-1.5, -0.5, 0.5, 1.5, 2.7])
for name in ["floor", "ceil", "round", "trunc", "frac"]:
    print(f"{name:6}", getattr(torch, name)(v))
print("clamp ", v.clamp(min=-1, max=1))
print("exp/log/sqrt/pow:", torch.exp(torch.tensor(1.0)), torch.log(torch.tensor(100.0)), torch.sqrt(torch.tensor(2.0)), torch.pow(torch.tensor(2.0), 10))

# %% [markdown]
# **Broadcasting** lets two tensors of different shapes combine. Line the shapes
# up from the right; each pair of sizes must be equal, or one of them must be 1
# (or missing), and the size-1 side is stretched (without copying). A `[3, 4]`
# tensor and a `[4]` tensor combine row by row; `[3, 1]` and `[1, 4]` give `[3, 4]`.

# %%
col = torch.tensor([[0], [10], [20]])      # [3, 1]
row = torch.tensor([1, 2, 3, 4])           # [4] -> treated as [1, 4]
print(col + row)
try:
    torch.ones(3, 4) + torch.ones(3)
except RuntimeError as error:
    print("shapes [3, 4] and [3] do not broadcast:", str(error)[:60], "...")

# %% [markdown]
# ### Reductions
#
# `sum`, `mean`, `max`, `min`, `prod`, `argmax` and `argmin` reduce a whole tensor
# to one value, or, with `dim=`, along one dimension. `keepdim=True` keeps the
# reduced dimension with size 1, which is exactly what you need to broadcast the
# result back against the original. `max(dim=...)` returns both the values and
# their positions.

# %%
scores = torch.tensor([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0]])
print("sum:", scores.sum(), " per column:", scores.sum(dim=0), " per row:", scores.sum(dim=1))
print("mean per row, keepdim:", scores.mean(dim=1, keepdim=True).shape)
print("max per row:", scores.max(dim=1))
print("argmax per row:", scores.argmax(dim=1), " argmin overall:", scores.argmin(), " prod:", scores.prod())

# %% [markdown]
# ### Exercise 7 (2 points): centre the columns
#
# Write `center_columns(x)` for a `[N, D]` floating-point tensor: subtract from each
# column its own mean, so that every column of the result averages 0. The result
# keeps `x`'s dtype.
#
# *Hint:* reduce over the rows and keep the dimension so the result broadcasts.

# %% solution="ex_center_columns"
def center_columns(x: torch.Tensor) -> torch.Tensor:
    """Subtract each column's mean from that column."""
    ### BEGIN SOLUTION
    return x - x.mean(dim=0, keepdim=True)
    ### END SOLUTION


# %% check="ex_center_columns_check"
check.check_center_columns(center_columns)

# %% graded="ex_center_columns_tests" points=2
check.check_center_columns(center_columns)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(104)
check.check_center_columns(center_columns, inputs=[torch.randn(7, 5, generator=g) * 3 + 1, torch.tensor([[1.0, 2.0], [3.0, 6.0]]),
                                                   torch.randn(4, 3, generator=g, dtype=torch.float64),
                                                   # float64 far from 0: a mean taken in float32 loses the centred values
                                                   torch.randn(6, 2, generator=g, dtype=torch.float64) + 1e8])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 8 (1 point): unit-length rows
#
# Write `normalize_rows(x)` that scales each row of a `[N, D]` tensor to Euclidean
# length 1 (its L2 norm). Look up `torch.linalg.vector_norm` and its `dim` and
# `keepdim` arguments.
# (Older code writes `x.norm(...)`; `torch.norm` is deprecated in favour of the
# `torch.linalg` functions.)

# %% solution="ex_normalize_rows"
def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Divide each row by its Euclidean length."""
    ### BEGIN SOLUTION
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True)
    ### END SOLUTION


# %% check="ex_normalize_rows_check"
check.check_normalize_rows(normalize_rows)

# %% graded="ex_normalize_rows_tests" points=1
check.check_normalize_rows(normalize_rows)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(105)
check.check_normalize_rows(normalize_rows, inputs=[torch.randn(6, 2, generator=g), torch.tensor([[0.0, 5.0, 0.0]])])
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Matrix products
#
# `*` multiplies elementwise. For matrix products:
#
# | call | shapes | use |
# | --- | --- | --- |
# | `torch.mm(a, b)` | `[n, m] @ [m, p]` | 2-D only |
# | `torch.bmm(a, b)` | `[B, n, m] @ [B, m, p]` | a batch of matrix products, 3-D only |
# | `a @ b`, `torch.matmul(a, b)` | any | picks the right one, and broadcasts batch dimensions |

# %%
a, b = torch.randn(2, 3), torch.randn(3, 4)
print(torch.mm(a, b).shape, (a @ b).shape)
batch_a, batch_b = torch.randn(5, 2, 3), torch.randn(5, 3, 4)
print(torch.bmm(batch_a, batch_b).shape, torch.matmul(batch_a, b).shape, "(b broadcast over the batch)")
print("vector @ vector is a dot product:", torch.tensor([1.0, 2.0]) @ torch.tensor([3.0, 4.0]))

# %% [markdown]
# ### Exercise 9 (2 points): all pairwise dot products
#
# Given `a` of shape `[N, D]` and `b` of shape `[M, D]`, write `pairwise_dot(a, b)`
# returning the `[N, M]` matrix whose element `[i, j]` is the dot product of
# `a[i]` and `b[j]`, in the inputs' dtype. One matrix product does it.

# %% solution="ex_pairwise_dot"
def pairwise_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Dot products of every row of ``a`` with every row of ``b``."""
    ### BEGIN SOLUTION
    return a @ b.T
    ### END SOLUTION


# %% check="ex_pairwise_dot_check"
check.check_pairwise_dot(pairwise_dot)

# %% graded="ex_pairwise_dot_tests" points=2
check.check_pairwise_dot(pairwise_dot)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(106)
check.check_pairwise_dot(pairwise_dot, inputs=[(torch.randn(4, 3, generator=g), torch.randn(6, 3, generator=g)), (torch.randn(1, 8, generator=g), torch.randn(1, 8, generator=g)),
                                               (torch.randn(3, 2, generator=g, dtype=torch.float64), torch.randn(2, 2, generator=g, dtype=torch.float64))])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 10 (1 point): one-hot encoding
#
# Write `one_hot(labels, num_classes)`: for `[N]` integer labels return a
# float32 `[N, num_classes]` tensor with a 1 in column `labels[i]` of row `i` and
# 0 elsewhere.
#
# *Hint:* integer-tensor indexing (section 5) or a comparison that broadcasts
# (section 6) each do it without a loop. `torch.nn.functional.one_hot` exists
# too; mind its dtype.

# %% solution="ex_one_hot"
def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Float32 one-hot rows for integer class labels."""
    ### BEGIN SOLUTION
    return torch.eye(num_classes)[labels]
    ### END SOLUTION


# %% check="ex_one_hot_check"
check.check_one_hot(one_hot)

# %% graded="ex_one_hot_tests" points=1
check.check_one_hot(one_hot)
### BEGIN HIDDEN TESTS
check.check_one_hot(one_hot, inputs=[(torch.tensor([9, 0, 5]), 10), (torch.tensor([0, 0]), 4)])
### END HIDDEN TESTS

# %% [markdown]
# ## 8. Devices
#
# A tensor lives on one device, and an operation needs all its tensors on the
# same one. `t.to(device)` returns a copy on `device` (or `t` itself if it is
# already there); it does not move `t` in place. Creating a tensor directly on
# its device (`torch.zeros(3, device=DEVICE)`) avoids a copy altogether.
#
# Copies between the CPU and a GPU travel over the PCIe bus, which is much slower
# than the GPU's own memory: move data once, keep it there, and avoid patterns
# that bounce back and forth (`.item()`, `.cpu()`, printing) inside a hot loop.
# Lesson 07 measures this.

# %%
print("this course will use:", DEVICE)
on_device = torch.zeros(3, device=DEVICE)
print(on_device.device, on_device.to("cpu").device)
if torch.cuda.is_available():
    big = torch.randn(4096, 4096)
    from helpers.timing import time_call
    print("CPU -> GPU copy of 64 MB:", time_call(lambda: big.to("cuda"), device="cuda"))
else:
    print("No GPU here: the host-to-device copy timing is skipped (it needs CUDA).")

# %% [markdown]
# ### Exercise 11 (2 points): move a batch
#
# Data loaders often yield a dict holding tensors and other things (file names,
# epoch numbers). Write `batch_to(batch, device)` that returns a **new** dict with
# every tensor moved to `device` and every other value unchanged.
#
# The check uses PyTorch's `"meta"` device, which exists on every machine, so you
# can prove your code moves tensors even without a GPU.

# %% solution="ex_batch_to"
def batch_to(batch: dict, device: torch.device | str) -> dict:
    """Move the tensors in ``batch`` to ``device``; keep everything else."""
    ### BEGIN SOLUTION
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in batch.items()}
    ### END SOLUTION


# %% check="ex_batch_to_check"
check.check_batch_to(batch_to)

# %% graded="ex_batch_to_tests" points=2
check.check_batch_to(batch_to)
### BEGIN HIDDEN TESTS
check.check_batch_to(batch_to, inputs=[{"a": torch.ones(1), "b": torch.zeros(2, dtype=torch.int64), "c": None, "d": "text"}])
### END HIDDEN TESTS

# %% [markdown]
# ## 9. Put it together
#
# ### Exercise 12 (3 points): the mean of each class
#
# A classifier's features are easier to understand (and a simple classifier is
# easy to build) once you know the average feature vector of each class. Write
# `class_means(features, labels, num_classes)`:
#
# - `features` is an `[N, D]` floating-point tensor, of any float dtype, on any
#   device; `labels` is an `[N]` int64 tensor of classes `0 .. num_classes - 1`,
#   on the same device.
# - It returns the `[num_classes, D]` tensor whose row `c` is the mean of the rows
#   of `features` labelled `c`, and a row of zeros for a class without examples.
# - The result has `features`' dtype and is computed on `features`' device, with
#   no trip through the CPU (on a GPU, copying the data over and back would cost
#   more than the computation); the inputs are left as they are. Reading the
#   labels into Python, all at once or one per example, is such a trip too.
#
# Try to do it without a Python loop over the N examples: with a million
# examples, such a loop takes seconds where tensor operations take milliseconds.
#
# The graded tests use inputs you never see: other sizes, float64 features,
# classes without examples (the first and the last among them), a single example,
# and inputs on PyTorch's `meta` device (section 8) to see where your result lands.
#
# *Hint:* a mean is a sum divided by a count, per class here; the comparisons,
# matrix products, reductions and broadcasting of this lesson compute both for
# all classes at once. Then decide what a class with a count of 0 needs.

# %% solution="ex_class_means"
def class_means(features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Row c: the mean feature vector of class c (zeros if c has no examples); features' dtype and device."""
    ### BEGIN SOLUTION
    members = (labels[:, None] == torch.arange(num_classes, device=labels.device)).to(features.dtype)
    counts = members.sum(dim=0)
    return (members.T @ features) / counts.clamp(min=1)[:, None]
    ### END SOLUTION


# %% check="ex_class_means_check"
check.check_class_means(class_means)

# %% graded="ex_class_means_tests" points=2
check.check_class_means(class_means)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(107)
check.check_class_means(class_means, inputs=[
    (torch.randn(5, 4, generator=g), torch.tensor([0, 3, 3, 1, 0]), 4),  # as many classes as features
    (torch.randn(9, 2, generator=g) + 3, torch.tensor([2, 0, 1, 1, 2, 0, 0, 2, 1]), 3),
])
### END HIDDEN TESTS

# %% graded="ex_class_means_edge_tests" points=1
check.check_class_means(class_means)
### BEGIN HIDDEN TESTS
g = torch.Generator().manual_seed(108)
check.check_class_means(class_means, inputs=[
    (torch.randn(7, 3, generator=g, dtype=torch.float64), torch.tensor([1, 1, 2, 3, 1, 2, 3]), 5),  # 0 and 4 empty
    (torch.tensor([[2.0, -1.0, 4.0]]), torch.tensor([2]), 3),  # one example
])
### END HIDDEN TESTS

# %% [markdown]
# The class means of a few points on a plane, and the class each point is
# closest to (a "nearest centroid" classifier in two lines):

# %%
points = torch.tensor([[0.0, 0.0], [0.2, 0.1], [3.0, 3.0], [2.8, 3.2], [0.0, 3.0], [0.1, 2.7]])
point_labels = torch.tensor([0, 0, 1, 1, 2, 2])
centroids = class_means(points, point_labels, 3)
print("class means:\n", centroids)
distances = torch.linalg.vector_norm(points[:, None, :] - centroids[None, :, :], dim=2)  # [N, C] by broadcasting
print("nearest class of each point:", distances.argmin(dim=1).tolist(), "| labels:", point_labels.tolist())

# %% [markdown]
# ## Summary
#
# - A tensor has a shape, a dtype and a device; check all three when something fails.
# - Create tensors with `zeros/ones/full/eye/rand*/arange/linspace` and `dtype=`/`device=`.
# - `from_numpy`/`.numpy()`/`as_tensor` share memory; `torch.tensor` copies.
# - `view` needs contiguous memory, `reshape` copes; `permute` reorders dimensions.
# - Masks, `torch.where` and `gather` select without Python loops.
# - Broadcasting lines shapes up from the right; `keepdim=True` keeps reductions broadcastable.
# - `@` for matrix products; `.to(device)` returns a copy.
# - Together: a comparison that broadcasts, a matrix product and a division that
#   broadcasts compute per-class statistics without a loop.
#
# Before you submit: **Kernel > Restart Kernel and Run All Cells**, then the
# **Validate** button, to see exactly what the autograder will see.
