"""How a failed check reads: one red line naming the exercise and the mistake (IPython's _render_traceback_).

The browser test (test_jupyterlab) and the feedback test (test_nbgrader_commands) check it in a
real notebook; these check the rendering itself, quickly.
"""

from __future__ import annotations

import pytest
import torch

from helpers.checks import CheckError
from helpers.checks import start as check


def failure(fn) -> CheckError:
    with pytest.raises(CheckError) as caught:
        check.check_to_fahrenheit(fn)
    return caught.value


def test_wrong_answer_renders_as_one_red_line():
    error = failure(lambda c: c * 9 / 5)
    lines = error._render_traceback_()
    assert len(lines) == 1 and lines[0].startswith("\x1b[31m") and lines[0].endswith("\x1b[0m")
    assert "✘ to_fahrenheit([0.0, 100.0]): you forgot to add 32" in lines[0]
    assert error.exercise() == "to_fahrenheit"


def test_message_without_the_exercise_name_gets_it_in_front():
    error = failure(torch.zeros(2))  # not a function
    assert error.headline() == f"✘ to_fahrenheit: {error}"


def test_crash_in_learner_code_keeps_the_cause_and_no_helpers_lines():
    def to_fahrenheit(celsius):
        return celsius + "32"

    error = failure(to_fahrenheit)
    assert isinstance(error.__cause__, TypeError)
    rendered = "\n".join(error._render_traceback_())
    assert "raised TypeError" in rendered and "helpers" not in rendered and "File " not in rendered
