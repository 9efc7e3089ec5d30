"""ruff finds no undefined or unused names and no over-long lines in helpers/, coursetools/ and tests/."""

import subprocess
import sys

from helpers.data import REPO_ROOT


def test_ruff_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "helpers", "coursetools", "tests", "nbgrader_config.py"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
