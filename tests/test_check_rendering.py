"""How a failed check reads: one red line naming the exercise and the mistake (IPython's _render_traceback_).

The browser test (test_jupyterlab) and the feedback test (test_nbgrader_commands) check it in a
real notebook; these check the rendering itself, quickly.
"""

from __future__ import annotations

import pytest
import torch

import helpers.checks as checks
from helpers.checks import CheckError
from helpers.checks import start as check


def failure(fn) -> CheckError:
    with pytest.raises(CheckError) as caught:
        check.check_to_fahrenheit(fn)
    return caught.value


@pytest.fixture(autouse=True)
def fresh_kernel():
    """Each test starts as a fresh kernel does: no failure shown yet."""
    checks._SHOWN.clear()
    yield
    checks._SHOWN.clear()


def red(line: str) -> bool:
    return line.startswith("\x1b[31m") and line.endswith("\x1b[0m")


def test_wrong_answer_first_shows_the_symptom_and_how_to_get_more_help():
    error = failure(lambda c: c * 9 / 5)
    lines = error._render_traceback_()
    assert len(lines) == 2 and all(map(red, lines))
    assert "✘ to_fahrenheit([0.0, 100.0]) has the right shape and dtype but wrong values" in lines[0]
    assert "expected: [32.0, 212.0]" in lines[0] and "yours:    [0.0, 180.0]" in lines[0]
    assert "forgot to add 32" not in lines[0] and checks.WHERE_LABEL not in lines[0]
    assert checks.MORE_HELP in lines[1]
    assert error.exercise() == "to_fahrenheit"
    assert "you forgot to add 32" in str(error)  # str() holds every rung: tests and the autograder read it


def test_the_same_failure_again_climbs_the_ladder():
    shown = ["\n".join(failure(lambda c: c * 9 / 5)._render_traceback_()) for _ in range(4)]
    assert checks.WHERE_LABEL not in shown[0] and checks.MISTAKE_LABEL not in shown[0]
    assert checks.WHERE_LABEL in shown[1] and checks.MISTAKE_LABEL not in shown[1] and "once more" in shown[1]
    assert checks.MISTAKE_LABEL in shown[2] and "you forgot to add 32" in shown[2] and "again" not in shown[2]
    assert shown[3] == shown[2]  # the top rung stays


def test_the_autograder_shows_every_rung_and_validate_points_to_the_notebook(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    graded = "\n".join(failure(lambda c: c * 9 / 5)._render_traceback_())
    assert checks.WHERE_LABEL in graded and "you forgot to add 32" in graded and "again" not in graded
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    validated = "\n".join(failure(lambda c: c * 9 / 5)._render_traceback_())
    assert checks.MORE_HELP_VALIDATE in validated and checks.WHERE_LABEL not in validated


def test_the_ladder_in_an_ipython_shell(capsys):
    """The same failing check cell run three times in one kernel shows the symptom, then where, then the mistake."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(check=check)
    shown = []
    for _ in range(3):
        shell.run_cell("check.check_to_fahrenheit(lambda c: c * 9 / 5)")
        shown.append(capsys.readouterr().out)
    assert "wrong values" in shown[0] and checks.MORE_HELP in shown[0] and checks.WHERE_LABEL not in shown[0]
    assert checks.WHERE_LABEL in shown[1] and checks.MISTAKE_LABEL not in shown[1]
    assert "The mistake: you forgot to add 32" in shown[2]
    assert all("Traceback" not in out and "helpers/" not in out for out in shown)


def test_another_failure_starts_at_the_bottom_rung():
    failure(lambda c: c * 9 / 5)._render_traceback_()
    other = "\n".join(failure(lambda c: c + 32)._render_traceback_())  # another symptom
    assert checks.MORE_HELP in other and checks.WHERE_LABEL not in other


def test_a_message_without_hints_has_no_ladder():
    error = CheckError("f(1) should be 2, but yours is 3")
    assert error._render_traceback_() == ["\x1b[31m\x1b[1m✘ f(1) should be 2, but yours is 3\x1b[0m"]
    assert str(error) == "f(1) should be 2, but yours is 3"


def test_str_holds_every_rung_in_order():
    error = CheckError("f(1) is 3, expected 2", where="look at the sum", mistake="an off-by-one")
    assert str(error) == ("f(1) is 3, expected 2\n   Where to look: look at the sum\n   The mistake: an off-by-one")
    import pickle

    assert str(pickle.loads(pickle.dumps(error))) == str(error)


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


def test_make_progress_shows_the_symptom_only():
    from nbformat import NotebookNode

    from helpers.progress import _error

    error = CheckError("f(1) is 3, expected 2\n   expected: [2]", where="look at the sum", mistake="an off-by-one")
    cell = NotebookNode(outputs=[NotebookNode(output_type="error", ename="CheckError", evalue=str(error))])
    assert _error(cell) == "f(1) is 3, expected 2 expected: [2]"
    assert checks.symptom_of(str(error)) == error.symptom


def test_a_symptom_whose_numbers_change_at_every_run_still_climbs():
    """State kept between calls (a list on a class) shows other numbers at every run: the ladder must still climb."""
    shown = []
    for size in (8, 13, 18):
        error = CheckError(f"len(dataset) is {size} for a folder of 5 clips; expected 5", where="look at __init__",
                           mistake="a list on the class is shared by every dataset")
        shown.append("\n".join(error._render_traceback_()))
    assert checks.WHERE_LABEL not in shown[0] and checks.WHERE_LABEL in shown[1]
    assert "shared by every dataset" in shown[2]
