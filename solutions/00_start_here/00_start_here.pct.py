# %% [markdown]
# # 00 Start here
#
# Welcome. This course teaches PyTorch through notebooks like this one: short
# explanations, code you run, and graded exercises that check your answers as you
# go. This first notebook shows how the course works and checks that your
# computer is ready. It has one warm-up exercise (2 points) so you can see the
# whole cycle once.
#
# ## The course
#
# | lesson | what you learn |
# | --- | --- |
# | 00 Start here | how the course and grading work; your environment |
# | 01 Tensors | creating, reshaping, indexing and computing with tensors |
# | 02 Autograd | automatic gradients and gradient descent |
# | 03 Datasets and DataLoaders | feeding data to a model, fast |
# | 04 Defining models | `nn.Module`, layers, parameters, initialisation |
# | 05 Training and evaluation | the training loop; an MNIST classifier |
# | 06 Saving, loading and resuming | checkpoints that resume exactly |
# | 07 Training faster | measuring and speeding up training |
# | 08 Multiple GPUs | DataParallel, DistributedDataParallel (runs on a CPU too) |
# | 09 Debugging | the common errors, live |
# | 10 Capstone | your best MNIST classifier within a time budget |
#
# ## JupyterLab in one minute
#
# - A notebook is a list of **cells**. Text cells (like this one) explain; code
#   cells run Python.
# - Run the selected cell with **Shift+Enter** (it moves to the next one).
#   **Kernel > Restart Kernel and Run All Cells** runs the whole notebook from a
#   fresh start, which is the best way to be sure it works top to bottom.
# - The number left of a code cell (`[3]`) says in which order cells ran. Cells
#   share one Python process, the **kernel**: a variable defined in one cell is
#   visible in every cell run after it.
# - Some cells are **locked** (read-only): the imports, self-checks and graded
#   tests. You cannot edit them, and when your work is graded they are restored
#   exactly as they were released, so editing a copy changes nothing.
#
# ## Exercises, self-checks and grading
#
# Every exercise has the same four parts:
#
# 1. A text cell that states the task (what your function receives, what it
#    returns, the rules it must keep) and a hint that names the idea to use.
# 2. A code cell with a function to finish. It contains
#    `raise NotImplementedError()`: replace that line with your code.
# 3. A **self-check** cell right below. Run it. It either prints one line
#    starting with ✔, or stops with a short red message starting with ✘. That
#    message first shows only the **symptom**: what your function was given,
#    what it returned and what was expected, for example
#    *"to_fahrenheit([0.0, 100.0]) has the right shape and dtype but wrong
#    values ... expected: [32.0, 212.0], yours: [32.0, 87.5556]"*.
#    Try to find the bug from that first.
# 4. A **graded** cell. It runs the same checks as the self-check and, when your
#    instructor grades the notebook, some extra hidden ones (other inputs you
#    never see), so write code that is correct in general, not just for the
#    visible examples.
#
# **The hint ladder.** Stuck after reading the symptom? Run the self-check again
# without changing anything: the same failure now adds **where to look** (say,
# "look at the factor you multiply by"). Run it a third time and it names the
# **likely mistake** and its fix. Each rung gives away a little more, so climb
# only as far as you need. The **Validate** button shows the symptom; the
# feedback from grading can show all three. When your own code raised an error, the message names
# the error and the lines below it point at the line of your cell where it
# happened.
#
# Your instructor grades with **nbgrader**: it runs your whole notebook from top
# to bottom in a fresh kernel, and each graded cell that runs without an error
# earns its points. So a notebook that only works when cells are run in a
# particular order, or that depends on something you did by hand, loses points.
#
# The **Validate** button in the notebook toolbar (from nbgrader) does the same
# run on your computer and tells you which graded cells fail. Use it before you
# submit. Cells that run forever are stopped after two minutes when graded.

# %% locked="setup"
import os
from pathlib import Path

import torch

from helpers import device as course_device
from helpers.checks import start as check
from helpers.data import data_root
from helpers.device import environment_report

# %% [markdown]
# ## Your environment
#
# The next cell reports the versions the course runs on and the **device** it
# will compute on. PyTorch can run on an NVIDIA GPU (**CUDA**), on the GPU of an
# Apple-silicon Mac (**MPS**), or on the **CPU**. The course picks the first of
# these that is available. Every lesson is written to run on a plain CPU within
# a minute or two; a GPU only makes some lessons faster (lesson 07 shows by how
# much).

# %% tags=["nbval-ignore-output"]
for label, value in environment_report().items():
    print(f"{label:>22}: {value}")

# %% [markdown]
# ### How the device is chosen
#
# Every lesson asks `helpers.device.pick_device()` for its device. It is a few
# lines you can write yourself, and you will want them in your own projects:
#
# 1. If the environment variable `COURSE_DEVICE` is set (for example to `cpu`),
#    use it. This lets you force the CPU on a machine with a GPU, say to compare
#    speeds, without changing any code.
# 2. Otherwise use CUDA if `torch.cuda.is_available()`,
# 3. else Apple's GPU if `torch.backends.mps.is_available()`,
# 4. else the CPU, which is always there.

# %% tags=["nbval-ignore-output"]
def pick_device() -> torch.device:
    """The device to compute on: COURSE_DEVICE if set, else CUDA, else Apple's MPS, else the CPU."""
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


device = pick_device()
assert device == course_device.pick_device(), "the lessons' helper chooses the same device"
x = torch.arange(3.0, device=device)  # created directly on the device
print(f"computing on {device}; x lives on {x.device}")

# %% [markdown]
# New tensors live on the CPU unless you pass `device=`; `tensor.to(device)`
# returns a copy on another device, and `model.to(device)` moves a model's
# parameters (lesson 04). An operation needs all of its tensors on the same
# device: adding a CUDA tensor to a CPU tensor raises an error that names both
# devices.
#
# ### The data folder
#
# The **data folder** is where datasets such as MNIST are stored. The first
# lesson that needs MNIST has torchvision download it there when it is missing.
# To keep data somewhere else, set the environment variable `COURSE_DATA` to a
# folder before starting JupyterLab. The next cell shows what is there and how
# much disk space it takes.

# %% tags=["nbval-ignore-output"]
def folder_size_mb(folder: Path) -> float:
    """The total size of the files under ``folder``, in megabytes."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


mnist_folder = data_root() / "MNIST"
if mnist_folder.exists():
    print(f"MNIST is in {mnist_folder} and takes {folder_size_mb(mnist_folder):.1f} MB")
else:
    print(f"MNIST is not here yet: the first lesson that needs it downloads it into {mnist_folder}")

# %% [markdown]
# ## Warm-up exercise (2 points)
#
# Write `to_fahrenheit(celsius)`: it receives a tensor of temperatures in degrees
# Celsius and returns a tensor of the same shape in degrees Fahrenheit, using
# F = C × 9/5 + 32. Arithmetic on a tensor applies to every element, so the
# formula is all you need.
#
# Try a wrong version first (say, forget the `+ 32`) and run the self-check
# three times to climb the hint ladder once; then fix it.

# %% solution="ex_to_fahrenheit"
def to_fahrenheit(celsius: torch.Tensor) -> torch.Tensor:
    """Convert each temperature from Celsius to Fahrenheit."""
    ### BEGIN SOLUTION
    return celsius * 9 / 5 + 32
    ### END SOLUTION


# %% check="ex_to_fahrenheit_check"
check.check_to_fahrenheit(to_fahrenheit)

# %% graded="ex_to_fahrenheit_tests" points=1
check.check_to_fahrenheit(to_fahrenheit)

# %% [markdown]
# The cell above and the one below are graded separately (1 point each), so
# partly working code earns partial credit. The one below also runs hidden
# cases when your instructor grades: other shapes, and other dtypes, whose
# precision your function should keep.

# %% graded="ex_to_fahrenheit_more_tests" points=1
check.check_to_fahrenheit(to_fahrenheit, inputs=[torch.tensor([36.6])])
### BEGIN HIDDEN TESTS
check.check_to_fahrenheit(to_fahrenheit, inputs=[torch.tensor([-273.15, 1000.0], dtype=torch.float64), torch.zeros(2, 2, 2),
                                                  torch.tensor(36.5)])
### END HIDDEN TESTS

# %% [markdown]
# ## Your progress
#
# `show_progress` runs a copy of each of your notebooks the way **Validate**
# does (your notebooks are not changed) and lists every exercise: passed,
# failing with the check's message, or not attempted yet, with its points; then
# it draws your points per lesson. It reads the notebooks as they are saved on
# disk, so save first (**Ctrl+S**). The cell below reports on this lesson only;
# `show_progress()` with no argument reports on every lesson (a few minutes), and
# so does `make progress` in a terminal.

# %% tags=["nbval-ignore-output"]
from helpers.progress import show_progress

show_progress(["00_start_here"])

# %% [markdown]
# ## What next
#
# Open `01_tensors` from the `notebooks/` folder in the file browser on the
# left. If a self-check message is unclear or a cell fails in a way you cannot
# explain, that is worth reporting to your instructor: the checks are meant to
# tell you exactly what went wrong.
