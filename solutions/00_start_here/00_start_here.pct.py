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
# 1. A text cell that says what to write, what to return, and gives a hint.
# 2. A code cell with a function to finish. It contains
#    `raise NotImplementedError()`: replace that line with your code.
# 3. A **self-check** cell right below. Run it. It either prints one line
#    starting with ✔, or stops with a message that says what is wrong, for
#    example *"the ratio is upside down: multiply by 9/5, not 5/9"*.
# 4. A **graded** cell. It runs the same checks as the self-check and, when your
#    instructor grades the notebook, some extra hidden ones, so write code that
#    is correct in general, not just for the visible examples.
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
import torch

from helpers.checks import start as check
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
# The **data folder** is where datasets such as MNIST are stored. The first
# lesson that needs MNIST downloads it there (about 20 MB). To keep data
# somewhere else, set the environment variable `COURSE_DATA` to a folder before
# starting JupyterLab.
#
# ## Warm-up exercise (2 points)
#
# Write `to_fahrenheit(celsius)`: it receives a tensor of temperatures in degrees
# Celsius and returns a tensor of the same shape in degrees Fahrenheit, using
# F = C × 9/5 + 32. Arithmetic on a tensor applies to every element, so the
# formula is all you need.
#
# Try a wrong version first (say, forget the `+ 32`) and run the self-check to
# see what a failure looks like; then fix it.

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
check.check_to_fahrenheit(to_fahrenheit, inputs=[torch.tensor([-273.15, 1000.0], dtype=torch.float64), torch.zeros(2, 2, 2)])
### END HIDDEN TESTS

# %% [markdown]
# ## What next
#
# Open `01_tensors` from the `notebooks/` folder in the file browser on the
# left. If a self-check message is unclear or a cell fails in a way you cannot
# explain, that is worth reporting to your instructor: the checks are meant to
# tell you exactly what went wrong.
