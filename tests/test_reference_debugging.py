"""Unit tests of lesson 09's answer key, its broken programs, and the starter mechanism that hands them out."""

from __future__ import annotations

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from coursetools import authoring
from helpers.checks import CheckError
from helpers.checks import debugging as checks
from helpers.data import REPO_ROOT
from helpers.reference import debugging as ref
from helpers.starters import InsertStarters, is_untouched_starter

LESSON = REPO_ROOT / "solutions" / "09_debugging" / "09_debugging.ipynb"
CHECKS = {
    "ex_predict_digits": ("predict_digits", checks.check_predict_digits),
    "ex_small_cnn": ("SmallCNN", checks.check_small_cnn),
    "ex_loss_from_table": ("loss_from_table", checks.check_loss_from_table),
    "ex_gated_block": ("GatedBlock", checks.check_gated_block),
    "ex_fit": ("fit", checks.check_fit),
    "ex_accuracy": ("accuracy", checks.check_accuracy),
    "ex_dataset_accuracy": ("dataset_accuracy", checks.check_dataset_accuracy),
    "ex_three_bugs": ("train_and_evaluate", checks.check_train_and_evaluate),
}


def starters() -> dict[str, str]:
    nb = nbformat.read(LESSON, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["starter"] for c in nb.cells if "starter" in c.metadata}


def test_every_exercise_has_a_starter_and_a_broken_twin():
    assert set(starters()) == set(CHECKS) == set(checks.BROKEN)


@pytest.mark.parametrize("grade_id", sorted(CHECKS))
def test_starter_fails_its_check_as_the_broken_twin_does(grade_id: str):
    """The program a learner gets is the broken twin: its check names the original bug, as for the twin."""
    name, check = CHECKS[grade_id]
    namespace = {"torch": torch, "nn": nn, "F": F, "DataLoader": DataLoader}
    exec("from __future__ import annotations\n" + starters()[grade_id], namespace)
    with pytest.raises(CheckError) as from_starter:
        check(namespace[name])
    with pytest.raises(CheckError) as from_twin:
        check(checks.BROKEN[grade_id])
    assert str(from_starter.value) == str(from_twin.value)
    assert "still raises" in str(from_starter.value) or "the same as the program you were given" in \
        str(from_starter.value) or "things go wrong" in str(from_starter.value)


def test_no_starter_repeats_the_example_fix():
    """Symptom first: a failing check's first words describe behaviour; the fix comes only at the ladder's end."""
    with pytest.raises(CheckError) as error:
        checks.check_accuracy(checks.broken_accuracy)
    first = str(error.value).split(" Where to look")[0].split("\n")[0]
    assert "model.eval()" not in first and "returns" in first


@pytest.mark.parametrize("part", checks.PARTS)
def test_three_bugs_each_part_is_graded_alone(part: str):
    """Fixing one of the three bugs passes that part's check and no other."""
    import inspect

    fixes = {"training": ("outputs = model(inputs).softmax(dim=1)", "outputs = model(inputs)"),
             "history": ("history.append(loss)", "history.append(loss.item())"),
             "evaluation": ("    correct = 0\n", "    model.eval()\n    correct = 0\n")}
    source = inspect.getsource(checks.broken_train_and_evaluate).replace(*fixes[part])
    namespace = {"torch": torch, "nn": nn, "F": F, "DataLoader": DataLoader, "Dataset": object, "Any": object}
    exec("from __future__ import annotations\n" + source, namespace)
    fixed_one = namespace["broken_train_and_evaluate"]
    checks.check_train_and_evaluate(fixed_one, part)
    for other in set(checks.PARTS) - {part}:
        with pytest.raises(CheckError):
            checks.check_train_and_evaluate(fixed_one, other)


def test_reference_models_run_on_digits():
    torch.manual_seed(0)
    assert ref.SmallCNN()(torch.randn(3, 1, 28, 28)).shape == (3, 10)
    block = ref.GatedBlock(4)
    x = torch.randn(2, 4, requires_grad=True)
    block(x).sum().backward()
    assert x.grad is not None and block.gate.weight.grad is not None


def test_reference_fit_lowers_the_loss():
    case = checks.FitCase(0, 48, 8, 10, 0.2)
    losses = checks._fit_run(ref.fit, case).value["losses"]
    assert sum(losses[-6:]) / 6 < sum(losses[:6]) / 6


def test_silent_twins_are_really_silent_and_different():
    """Each silent bug runs without an error and gives another result than the fix: the check can tell them apart."""
    model, images, labels = checks._eval_setup(0, 40)
    assert checks.broken_accuracy(model, images, labels) != ref.accuracy(checks._eval_setup(0, 40)[0], images, labels)
    model, dataset = checks._test_setup(0, 30)
    torch.manual_seed(0)
    assert checks.broken_dataset_accuracy(model, dataset, 8) < ref.dataset_accuracy(model, dataset, 8)
    assert checks._fit_run(checks.broken_fit, checks.FitCase()).value["losses"] != \
        checks._fit_run(ref.fit, checks.FitCase()).value["losses"]


def test_insert_starters_replaces_the_stub():
    from nbgrader.preprocessors import ClearSolutions

    cell = nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    cell.metadata = {"nbgrader": {"solution": True, "grade": False, "locked": False, "grade_id": "ex_f",
                                  "schema_version": 3, "task": False}, "starter": "def f():\n    return 2\n"}
    plain = nbformat.v4.new_code_cell("def g():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    plain.metadata = {"nbgrader": {**cell.metadata["nbgrader"], "grade_id": "ex_g"}}
    nb = nbformat.v4.new_notebook(cells=[cell, plain])
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python"}
    for step in (ClearSolutions(code_stub={"python": "raise NotImplementedError()"}), InsertStarters()):
        nb, _ = step.preprocess(nb, {})
    assert nb.cells[0].source == "def f():\n    return 2\n" and is_untouched_starter(nb.cells[0])
    assert "raise NotImplementedError()" in nb.cells[1].source and not is_untouched_starter(nb.cells[1])


def test_authoring_attaches_starters_and_refuses_orphans(tmp_path):
    source = tmp_path / "x.pct.py"
    source.write_text('# %% starter="ex_f"\ndef f():\n    return 2\n\n'
                      '# %% solution="ex_f"\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n')
    nb = authoring.source_to_notebook(source)
    assert len(nb.cells) == 1 and nb.cells[0].metadata["starter"].startswith("def f():\n    return 2")
    source.write_text('# %% starter="ex_missing"\ndef f():\n    return 2\n')
    with pytest.raises(ValueError, match="ex_missing"):
        authoring.source_to_notebook(source)
