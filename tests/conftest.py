"""Shared fixtures: the offline MNIST data root and a temporary copy of the course."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.data import REPO_ROOT, build_offline_mnist, mnist_is_present
from coursetools.grading import copy_course

MNIST_SOURCE = Path(os.environ.get("MNIST_SOURCE", REPO_ROOT.parent / "shared" / "data" / "mnist"))


def pytest_configure(config):
    """Point COURSE_DATA at the offline fixture before any kernel starts.

    Kernels started by nbval, nbclient, nbgrader and JupyterLab inherit this
    environment, so every notebook loads the same 8,000/2,000 real digits.
    """
    if os.environ.get("COURSE_DATA") and mnist_is_present(Path(os.environ["COURSE_DATA"])):
        return
    root = REPO_ROOT / ".cache" / "course-data"
    if not mnist_is_present(root):
        build_offline_mnist(MNIST_SOURCE, root)
    os.environ["COURSE_DATA"] = str(root)
    # Notebooks must never wait on a download in tests.
    os.environ.setdefault("COURSE_DEVICE", "cpu")


@pytest.fixture(scope="session")
def course_copy(tmp_path_factory) -> Path:
    """A throwaway copy of the course (solutions, notebooks, config) for nbgrader to write into."""
    return copy_course(tmp_path_factory.mktemp("course"), ("solutions", "notebooks"))
