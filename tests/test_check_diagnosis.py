"""The check framework's general mechanisms: diagnoses of wrong tensors, calls that must leave their
arguments and PyTorch's global state alone, every submodule's mode, the device stand-in, substitution."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import (CheckError, call, call_unchanged, expect_close, expect_mode, expect_tensor, host_collate,
                            substitute)

X = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])


@pytest.mark.parametrize("got,expected,given,message", [
    (X.sum(0), X.mean(0), X, "2 times the expected one; 2 is the size of the input's dim 0"),
    (-X, X, None, "the sign is flipped"),
    (X[:, :2].T, X[:, :2], None, "transpose of the expected one"),
    (X.T, X, None, "The mistake: your result is the transpose"),
    ((X * 1.3).floor(), X * 1.3, None, "rounded down (floor)"),
    (X.flatten().flip(0).reshape(2, 3), X, None, "right values, but in the wrong order"),
    (X.roll(1, 1), X, None, "shifted by one position along dim 1"),
    (X + 2, X, None, "off by the same amount (+2)"),
    (torch.where(X < 0, 7.0, X), X, X, "right except where the input is negative (2 of 6 elements)"),
    (X.mean(1, keepdim=True), X.mean(1), X, "extra dimension of size 1"),
    (X.mean(1), X.mean(1, keepdim=True), X, "a dimension of size 1 is missing"),
    (X.mean(1), X.mean(0), X, "the input reduced over dim 1; reduce over dim 0"),
    (torch.tensor([1.0, 0.0]), torch.tensor([1, 0]), torch.tensor([1, -2]), "turned it into floats"),
    ((X * 1.3).long(), X * 1.3, None, "truncated by a conversion to an integer type"),
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 1.0]), torch.tensor([0.0, 800.0]), "overflows"),
    (X.softmax(1), X, None, "the softmax of the expected ones along dim 1"),
    (X.log_softmax(0), X, None, "the log-softmax of the expected ones along dim 0"),
    (X.sigmoid(), X, None, "the sigmoid of the expected ones"),
    ((X - 0.5) / 2, X, None, "the expected one times 0.5, plus -0.25: a scale and a shift"),
])
def test_expect_tensor_names_the_relation(got, expected, given, message):
    with pytest.raises(CheckError) as error:
        expect_tensor(got, expected, what="f(x)", given=given)
    assert message in str(error.value)


@pytest.mark.parametrize("got,expected", [
    (torch.tensor([97.0]), torch.tensor([97.88])),  # floored: one number is always some factor of another
    (torch.tensor(3.0), torch.tensor(2.5)),
    (torch.tensor([[5.0]]), torch.tensor([[4.0]])),
])
def test_one_element_shows_no_factor_and_no_offset(got, expected):
    with pytest.raises(CheckError) as error:
        expect_tensor(got, expected, what="f(x)")
    assert "times the expected" not in str(error.value) and "off by the same amount" not in str(error.value)
    if got.item() == 97.0:
        assert "rounded down (floor)" in str(error.value), str(error.value)


def test_where_to_look_offers_the_example_only_when_one_is_shown():
    with pytest.raises(CheckError) as small:
        expect_tensor(X.exp(), X, what="f(x)")
    with pytest.raises(CheckError) as large:
        expect_tensor(torch.arange(20.0).exp(), torch.arange(20.0), what="f(x)")
    assert "expected: " in str(small.value) and "work through the small example" in str(small.value)
    assert "expected: " not in str(large.value) and "a small input of your own" in str(large.value), str(large.value)


def test_values_that_only_resemble_an_activation_are_not_called_one():
    scores = X.softmax(1)
    with pytest.raises(CheckError) as error:  # probabilities, but of other scores
        expect_tensor(scores, (X + torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])), what="f(x)")
    assert "softmax" not in str(error.value) and "sigmoid" not in str(error.value), str(error.value)


def test_positions_where_values_were_expected_are_named():
    x = torch.tensor([-1.0, 2.5, 0.0, 3.0])
    with pytest.raises(CheckError) as error:
        expect_tensor(torch.where(x > 0)[0], x[x > 0], what="positive_values(x)", given=x)
    assert "positions (indices) into the input" in str(error.value), str(error.value)
    with pytest.raises(CheckError) as error:  # integers that are no positions: the dtype alone is the symptom
        expect_tensor(torch.tensor([20, 31]), x[x > 0], what="positive_values(x)", given=x)
    assert "positions" not in str(error.value)


def test_small_tensors_come_with_a_worked_example():
    with pytest.raises(CheckError, match=r"input: +\[0.0, 2.0\]\n +expected: \[0.0, 2.0\]\n +yours: +\[0.0, 3.0\]"):
        expect_tensor(torch.tensor([0.0, 3.0]), torch.tensor([0.0, 2.0]), what="f(x)", given=torch.tensor([0.0, 2.0]))


def test_a_factor_equal_to_a_size_is_named_a_missing_mean_only_for_a_reduction():
    # relu written as x + x.abs(): every value twice the expected, and the input has 2 rows, by coincidence
    with pytest.raises(CheckError) as error:
        expect_tensor(X + X.abs(), X.relu(), what="relu(x)", given=X)
    assert "times 2: a constant factor is wrong or missing (2 is also the size of the input's dim 0: if your " \
           "code divides by a count" in str(error.value)
    assert "1/N" not in str(error.value) and "a sum where a mean" not in str(error.value)


def test_expect_close_names_a_size_or_a_sign_only():
    with pytest.raises(CheckError, match="3 is the size of the input's dim 0"):
        expect_close(1.0, 3.0, what="f(x)", given=torch.zeros(3, 2))
    with pytest.raises(CheckError, match=r"should be 3, but yours is 6") as error:
        expect_close(6.0, 3.0, what="f(x)")  # a factor of 2 alone is no evidence of a cause
    assert error.value.mistake is None
    with pytest.raises(CheckError, match="Python number"):
        expect_close(torch.tensor(3.0), 3.0, what="f(x)")


def test_call_unchanged_names_what_changed():
    def in_place(x):
        x -= 1
        return x

    def tracks(x):
        return x.requires_grad_()

    def mutates(d):
        d["new"] = 1
        return d

    def sorts(items):
        items.sort()
        return items

    def switches_off(x):
        torch.set_grad_enabled(False)
        return x

    for fn, arg, message in [(in_place, torch.ones(2), "values were overwritten"),
                             (tracks, torch.ones(2), "requires_grad was switched on"),
                             (mutates, {"a": 1}, "keys ['new'] were added"),
                             (sorts, [3, 1, 2], "reordered in place"),
                             (switches_off, torch.ones(2), "left gradient tracking switched off")]:
        with pytest.raises(CheckError, match=message.replace("[", r"\[").replace("]", r"\]")):
            call_unchanged(fn, arg)
    assert torch.is_grad_enabled()  # given back to the caller
    assert call_unchanged(lambda x: x + 1, torch.ones(2)).tolist() == [2.0, 2.0]


def test_expect_mode_sees_every_submodule():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    model.training = False
    with pytest.raises(CheckError, match="changes only the top-level flag"):
        expect_mode(model, False, "predict")
    expect_mode(model.eval(), False, "predict")


def test_a_batch_never_moved_fails_on_a_cpu_grader():
    loader = DataLoader(TensorDataset(torch.randn(4, 3), torch.tensor([0, 1, 0, 1])), batch_size=2,
                        collate_fn=host_collate, generator=torch.Generator())  # its own: iterating draws a seed
    model = nn.Linear(3, 2)

    def moved(model, loader, device):
        return [model(x.to(device)).argmax(1).eq(y.to(device)).sum().item() for x, y in loader]

    def not_moved(model, loader, device):
        return [model(x).argmax(1).eq(y).sum().item() for x, y in loader]

    assert len(call(moved, model, loader, torch.device("cpu"))) == 2
    with pytest.raises(CheckError, match="without moving it to the device"):
        call(not_moved, model, loader, torch.device("cpu"))


def helper(x):
    return x + 1


def uses_helper(x):
    return helper(x)


def test_substitute_swaps_a_name_for_the_duration_only():
    with substitute(uses_helper, helper=lambda x: x * 10):
        assert uses_helper(2) == 20
    assert uses_helper(2) == 3


ODD_ANSWERS = {"None": None, "a string": "text", "a 3x3 tensor": torch.zeros(3, 3), "a dict": {"a": 1},
               "a pair of tensors": (torch.zeros(2), torch.zeros(2)), "a 4-vector": torch.arange(4.0)}


@pytest.mark.parametrize("lesson", ["tensors", "autograd", "datasets", "models", "training", "checkpoints"])
def test_checks_never_crash_on_an_odd_answer(lesson, capsys):
    """Whatever a learner's function returns, a check answers with a CheckError, never its own exception."""
    import importlib

    module = importlib.import_module(f"helpers.checks.{lesson}")
    for name in sorted(n for n in dir(module) if n.startswith("check_")):
        for label, value in ODD_ANSWERS.items():
            def answer(*args, _value=value, **kwargs):
                return _value
            answer.__name__ = f"returns {label}"
            try:
                getattr(module, name)(answer)
            except CheckError:
                pass
            finally:
                torch.set_grad_enabled(True)


def test_a_one_place_shift_of_padding_is_stated_without_guessing_an_index():
    padded_left = torch.tensor([0.0, 0.0, 1.0, 2.0, 3.0])
    with pytest.raises(CheckError) as error:
        expect_tensor(padded_left.roll(-1), padded_left, what="pad(x)")
    assert "shifted by one position along dim 0" in str(error.value) and "off-by-one" not in str(error.value)
    values = torch.tensor([3.0, 1.0, 2.0, 4.0, 5.0])
    with pytest.raises(CheckError, match=r"shifted by one position along dim 0 \(an off-by-one index\?\)"):
        expect_tensor(values.roll(1), values, what="f(x)")


def test_a_small_example_shows_tiny_values_as_they_are_not_as_zeros():
    x = torch.tensor([0.1, -1.0, 1e-7, 2.0])
    with pytest.raises(CheckError) as error:
        expect_tensor(x[x > 1e-6], x[x > 0], what="positive_values(x)", given=x)
    assert "expected: [0.1, 1e-07, 2.0]" in str(error.value), str(error.value)


def test_integers_wrong_by_a_tiny_relative_amount_get_a_message_not_a_crash():
    x = torch.tensor([-2, 0, 3, 2**40 + 3])
    with pytest.raises(CheckError) as error:  # 2**40 against 2**40 + 3: close by rtol, yet not equal
        expect_tensor(torch.relu(x.float()).long(), torch.relu(x), what="relu(x)", given=x)
    assert "at flat index 3 it is 1099511627776, expected 1099511627779" in str(error.value), str(error.value)
