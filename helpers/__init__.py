"""Helpers for the PyTorch course.

The learner never needs to open this package: notebooks teach PyTorch, and
these modules only hold what every lesson shares.

- ``helpers.reference.<lesson>``: the answer key, as small typed functions.
- ``helpers.checks.<lesson>``: self-checks and graded checks that compare a
  learner's function with its reference twin and name the mistake.
- ``helpers.data``: where data lives, and MNIST through torchvision.
- ``helpers.device``, ``helpers.timing``, ``helpers.plots``: device choice,
  honest timing, and the plots the lessons draw.
- ``helpers.starters``: the broken programs lesson 09's fix-the-bug cells start from.
- ``helpers.progress``: ``make progress``, which exercises pass, fail or wait for you.

It holds exactly what notebooks import (and ``progress``, which learners run); the
grading sandbox mounts only this package. The course's own tooling (building
lessons, grading, class reports, benchmarks) is the ``coursetools`` package beside it.
"""

__version__ = "0.1.0"
