"""Lesson 04's answer key does what the lesson says it does."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from helpers.reference import models as ref


def test_parameter_counts_match_the_lesson():
    assert ref.count_parameters(ref.LeNet()) == 61_706
    assert ref.count_parameters(ref.MnistNet()) == 431_080


def test_output_shapes():
    assert ref.LeNet()(torch.randn(3, 1, 32, 32)).shape == (3, 10)
    assert ref.MnistNet()(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_mnist_net_layer_names_later_lessons_rely_on():
    assert [name for name, _ in ref.MnistNet().named_children()] == ["conv1", "conv2", "fc1", "fc2"]


def test_count_parameters_trainable_only_skips_frozen_and_buffers():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model[0].requires_grad_(False)
    assert ref.count_parameters(model) == 8 + 4
    assert ref.count_parameters(model, trainable_only=True) == 4


def test_label_smoothing_equals_pytorch():
    g = torch.Generator().manual_seed(0)
    logits, targets = torch.randn(7, 5, generator=g) * 30, torch.randint(0, 5, (7,), generator=g)
    for smoothing in (0.0, 0.1, 0.4):
        for reduction in ("mean", "sum", "none"):
            want = F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction=reduction)
            got = ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction)
            assert torch.allclose(got, want, atol=1e-5)
            assert torch.allclose(ref.LabelSmoothingLoss(smoothing, reduction)(logits, targets), want, atol=1e-5)


def test_init_weights_kaiming_and_zero_bias():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1000, 400), nn.BatchNorm1d(400), nn.Conv2d(3, 8, 3, bias=False))
    model.apply(ref.init_weights)
    assert abs(model[0].weight.std().item() - (2 / 1000) ** 0.5) < 1e-3
    assert torch.equal(model[0].bias, torch.zeros(400))
    assert torch.equal(model[1].weight, torch.ones(400))  # batch norm untouched


def test_sequential_version_matches_conv_block_net():
    custom, seq = ref.ConvBlockNet(), ref.sequential_version()
    with torch.no_grad():
        for mine, theirs in zip(list(seq.parameters()) + list(seq.buffers()),
                                list(custom.parameters()) + list(custom.buffers())):
            mine.copy_(theirs)
    x = torch.randn(4, 1, 28, 28)
    assert torch.allclose(seq(x), custom(x), atol=1e-5)
    seq.eval(), custom.eval()
    assert torch.allclose(seq(x), custom(x), atol=1e-5)


def test_predict_is_deterministic_and_leaves_no_graph():
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.Dropout(0.5))
    x = torch.randn(5, 1, 28, 28)
    first, second = ref.predict(model, x), ref.predict(model, x)
    assert torch.equal(first, second) and first.dtype == torch.int64 and first.shape == (5,)
    assert not first.requires_grad
