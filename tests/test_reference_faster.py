"""Unit tests of lesson 07's answer key (helpers.reference.faster) and of the fakes its checks rely on."""

from __future__ import annotations

import statistics

import pytest
import torch
from torch import nn

from helpers.checks import faster as checks
from helpers.reference import faster as ref


def test_median_time_on_a_real_clock_is_the_median_of_the_timed_calls():
    ticks = iter(range(100))
    calls = []
    # clock reads 0,1 | 2,3 | 4,5 ... every timed call lasts one tick
    assert ref.median_time(lambda: calls.append(1), torch.device("cpu"), warmup=3, repeat=4,
                           clock=lambda: next(ticks)) == 1
    assert len(calls) == 7


def test_fake_gpu_makes_unsynchronised_timing_measure_only_the_queueing():
    case = checks.TimingCase("cuda", 2, 5, 0)
    world = checks.FakeDevice(case, 7)
    for _ in range(2):
        world.fn()
    start = world.clock()
    world.fn()
    assert world.clock() - start == pytest.approx(checks._HOST)  # returned before the work was done
    world.synchronize("cuda", (), {})
    assert not world.busy


def test_reference_passes_every_timing_case_with_the_expected_median():
    case = checks.TimingCase("cpu", 2, 5, 2)
    got, world = checks._run_timing(ref.median_time, case)
    assert got == pytest.approx(statistics.median(world.timed_intervals(case.warmup)))
    assert checks._OUTLIER + checks._HOST in world.timed_intervals(case.warmup)  # the outlier is among the timed


@pytest.mark.parametrize("base_lr,base,batch,want", [(0.1, 64, 256, 0.4), (0.01, 64, 32, 0.005)])
def test_linear_scaling_rule(base_lr, base, batch, want):
    assert ref.scaled_learning_rate(base_lr, base, batch) == pytest.approx(want)


def test_accumulated_step_equals_one_large_batch_step():
    case = checks.StepCase(3, 4, 5)
    run = checks._accumulation_run(ref.accumulated_step, case)
    loss, want = checks._large_batch(case)
    assert run.step_at == [case.batches] and run.losses == case.batches and run.largest == case.size
    assert run.result == pytest.approx(loss, rel=1e-5)
    params = run.params
    assert checks._same_params(params, want)


def test_accumulation_without_division_moves_k_times_as_far():
    case = checks.StepCase(3, 4, 5)
    before = checks._params(checks._model(case.seed))
    _, want = checks._large_batch(case)
    undivided = checks._variant(case, divide=False, zero_each=False, zero_first=True)
    for b, w, u in zip(before, want, undivided):
        assert torch.allclose(u - b, case.batches * (w - b), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mixed_precision_step_with_a_real_grad_scaler_is_close_to_float32(dtype):
    case = checks.AmpCase(5, 16, dtype)
    torch.manual_seed(0)
    model, _ = checks._amp_model(case.seed)
    before = checks._params(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=checks.LR)
    scaler = torch.amp.GradScaler("cpu", enabled=dtype == torch.float16)
    inputs, targets = checks._amp_data(case)
    loss = ref.mixed_precision_step(model, optimizer, nn.functional.cross_entropy, inputs, targets, scaler, dtype)
    want_loss, want = checks._float32_step(case)
    assert loss == pytest.approx(want_loss, rel=2e-2)
    assert checks._relative_update_error(checks._params(model), want, before) < checks.AMP_TOLERANCE


def test_autocast_spy_sees_backward_outside_autocast_for_the_reference():
    run = checks._amp_run(ref.mixed_precision_step, checks.AmpCase(1, 8, torch.bfloat16), factor=1.0)
    assert run.spy.forward_states[0][:2] == (True, torch.bfloat16)
    assert run.spy.backward_states == [False]
    assert run.scaler.calls == ["scale", "step", "update"]


def test_scaler_spy_skips_a_step_with_infinite_gradients():
    layer = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    before = checks._params(layer)
    scaler = checks.ScalerSpy(1e38)
    scaler.scale(layer(torch.full((1, 2), 1e10)).sum()).backward()
    scaler.step(optimizer)
    assert checks._same_params(checks._params(layer), before, atol=0, rtol=0)


def test_checkpointed_forward_recomputes_and_keeps_gradients():
    case = checks.CheckpointCase(2, 4, 3, False)
    blocks, x = checks._blocks(case), checks._ckpt_input(case)
    runs = []
    for block in blocks:
        block.register_forward_pre_hook(lambda *_: runs.append(1))
    checks._weighted(ref.checkpointed_forward(blocks, x)).backward()
    _, want, _ = checks._plain_grads(case)
    assert len(runs) == 2 * len(blocks)
    assert all(torch.allclose(p.grad, w, atol=1e-6) for p, w in zip(blocks.parameters(), want))


def test_reentrant_checkpoint_really_loses_the_first_blocks_gradients():
    """The mistake the lesson warns about happens in this PyTorch version."""
    case = checks.CheckpointCase(2, 4, 3, False)
    blocks, x = checks._blocks(case), checks._ckpt_input(case)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = x
        for block in blocks:
            out = torch.utils.checkpoint.checkpoint(block, out, use_reentrant=True)
    assert not out.requires_grad


def test_train_epoch_on_device_syncs_once_and_frees_gradients():
    run = checks._epoch_run(ref.train_epoch_on_device, checks.StepCase(1, 4, 5), learner=False)
    result, syncs, arrivals = run.result, run.syncs, run.arrivals
    assert [sync.how for sync in syncs] == [".item()"] and not syncs[0].requires_grad
    assert set(arrivals) == {"none"}
    assert isinstance(result, float)
    # the last batch is smaller, so the mean per batch differs from the mean per sample
    assert run.sizes == [5, 5, 5, 2]
    assert result == pytest.approx(sum(loss.item() for loss in run.losses) / 4)


@pytest.mark.parametrize("kind, args, error", [
    ("mps", (torch.device("mps"),), TypeError),  # torch.mps.synchronize() takes no argument
    ("cuda", (torch.device("mps"),), ValueError),  # torch.cuda.synchronize wants a CUDA device
    ("cuda", ("cpu",), ValueError),
    ("cuda", (0, 1), TypeError),
])
def test_sync_stand_ins_reject_what_the_real_ones_reject(kind, args, error):
    with pytest.raises(error):
        checks._reject_like_the_real(kind, "cuda", args, {})


@pytest.mark.parametrize("kind, args", [("cuda", ()), ("cuda", (torch.device("cuda", 1),)), ("cuda", (2,)),
                                        ("cuda", ("cuda:0",)), ("mps", ()), ("accelerator", (torch.device("cuda"),))])
def test_sync_stand_ins_accept_what_the_real_ones_accept(kind, args):
    checks._reject_like_the_real(kind, "cuda", args, {})


def test_a_disabled_scaler_stand_in_scales_by_nothing():
    scaler = checks.ScalerSpy(1024.0, enabled=False)
    loss = torch.tensor(2.0)
    assert not scaler.is_enabled() and scaler.scale(loss).item() == 2.0


def test_every_cell_that_compiles_has_the_clock_limit_of_a_long_cell():
    """A busy grading machine must not cut lesson 07's torch.compile at nbgrader's 120 s per cell."""
    import nbformat

    from coursetools.grading.autograder import COMPILES, LONG_CELL_TIMEOUT_S, cell_timeout
    from helpers.data import REPO_ROOT

    for folder in ("solutions", "notebooks"):
        notebook = nbformat.read(REPO_ROOT / folder / "07_training_faster" / "07_training_faster.ipynb", as_version=4)
        compiling = [c for c in notebook.cells if c.cell_type == "code" and "torch.compile(" in c.source]
        assert compiling, f"{folder}: no cell of lesson 07 compiles"
        for cell in compiling:
            assert COMPILES in cell.metadata.get("tags", []), cell.source
            assert cell_timeout(cell, 120) == LONG_CELL_TIMEOUT_S
