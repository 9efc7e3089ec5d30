"""Unit tests of lesson 02's answer key (helpers.reference.autograd) and of its checks' side effects."""

from __future__ import annotations

import torch
from torch import nn

from helpers.checks import autograd as checks
from helpers.reference import autograd as ref


def test_worked_example_gives_4_5():
    assert torch.equal(ref.mean_square_grad(torch.ones(2, 2)), torch.full((2, 2), 4.5))


def test_mean_square_grad_leaves_the_input_alone():
    x = torch.randn(3)
    ref.mean_square_grad(x)
    assert not x.requires_grad and x.grad is None


def test_vector_jacobian_product_is_v_times_jacobian():
    w = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    x, v = torch.randn(3), torch.randn(2)
    got = ref.vector_jacobian_product(lambda t: torch.tanh(w @ t), x, v)
    jacobian = torch.autograd.functional.jacobian(lambda t: torch.tanh(w @ t), x)
    torch.testing.assert_close(got, v @ jacobian)


def test_per_batch_grads_equal_separate_runs_and_ignore_leftovers():
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 3, generator=g), torch.randn(4, generator=g)) for _ in range(3)]
    w = torch.randn(3, generator=g).requires_grad_(True)
    w.grad = torch.full((3,), 9.0)
    got = ref.per_batch_grads(w, batches)
    for grad, (x, y) in zip(got, batches):
        fresh = w.detach().clone().requires_grad_(True)
        ref.batch_loss(fresh, x, y).backward()
        torch.testing.assert_close(grad, fresh.grad)


def test_line_fits_agree_and_find_the_line():
    x = torch.linspace(-1, 1, 50)
    y = 2 * x - 1
    w_hand, b_hand = ref.fit_line_by_hand(x, y, 0.2, 200)
    w_sgd, b_sgd, losses = ref.fit_line_with_sgd(x, y, 0.2, 200)
    assert (w_hand, b_hand) == (w_sgd, b_sgd)
    assert abs(w_hand - 2) < 1e-3 and abs(b_hand + 1) < 1e-3
    assert len(losses) == 200 and all(isinstance(v, float) for v in losses) and losses[-1] < losses[0]


def test_accuracy_counts_correct_predictions_without_a_graph():
    model = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(3))
    images = torch.eye(3)
    assert ref.accuracy(model, images, torch.tensor([0, 1, 2])) == 1.0
    assert abs(ref.accuracy(model, images, torch.tensor([0, 2, 2])) - 2 / 3) < 1e-6
    assert torch.is_grad_enabled()


def test_softplus_backward_matches_autograd():
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(6, dtype=torch.float64)
    torch.nn.functional.softplus(x).backward(upstream)
    torch.testing.assert_close(ref.softplus_backward(x.detach(), upstream), x.grad)


def test_gradients_are_correct_tells_right_from_wrong():
    softplus = torch.nn.functional.softplus
    right = checks.make_function(softplus, ref.softplus_backward, "Softplus")
    wrong = checks.make_function(softplus, lambda x, g: torch.sigmoid(x), "NoChainRule")
    x = torch.randn(5)
    assert ref.gradients_are_correct(right, x) is True
    assert ref.gradients_are_correct(wrong, x) is False


def test_checks_leave_global_state_alone(capsys):
    """Self-check cells run mid-notebook: they must not reseed torch or leave gradients switched off."""
    state = torch.get_rng_state()
    checks.check_accuracy(ref.accuracy)
    checks.check_accuracy_no_graph(ref.accuracy)
    checks.check_fit_line_with_sgd(ref.fit_line_with_sgd)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.is_grad_enabled() and not torch.is_anomaly_enabled()
