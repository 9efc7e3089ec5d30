"""Unit tests of lesson 06's answer key (helpers.reference.checkpoints) and the CUDA checkpoint maker."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.checks import checkpoints as checks
from helpers.reference import checkpoints as ref


def _uninterrupted(case: checks.Case) -> dict[str, torch.Tensor]:
    s = checks._setup(case)
    for _ in range(case.epochs):
        checks.run_epoch(s.model, s.loader, s.optimizer, s.scheduler)
    return s.model.state_dict()


def _interrupted(case: checks.Case, tmp_path, save=ref.save_checkpoint, load=ref.load_checkpoint):
    """Train ``interrupt_after`` epochs, save; then, in fresh objects with other seeds, load and finish."""
    path = tmp_path / "checkpoint.pt"
    s = checks._setup(case)
    for epoch in range(case.interrupt_after):
        loss = checks.run_epoch(s.model, s.loader, s.optimizer, s.scheduler)
        save(path, s.model, s.optimizer, s.scheduler, s.generator, epoch, loss)
    r = checks._setup(case, restart=True)
    start = load(path, r.model, r.optimizer, r.scheduler, r.generator)
    assert start == case.interrupt_after
    for _ in range(start, case.epochs):
        checks.run_epoch(r.model, r.loader, r.optimizer, r.scheduler)
    return r.model.state_dict()


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("interrupt_after", [1, 2, 3])
def test_resumed_run_equals_uninterrupted_run(tmp_path, interrupt_after):
    case = checks.Case(seed=3, n=14, batch_size=4, epochs=4, interrupt_after=interrupt_after)
    assert _equal(_interrupted(case, tmp_path), _uninterrupted(case))


@pytest.mark.parametrize("dropped", ["optimizer", "scheduler", "torch_rng", "loader_rng"])
def test_every_piece_of_state_is_needed(tmp_path, dropped):
    """The test setup is sensitive: leave out any one state and the resumed run differs."""
    def save_without(path, *args):
        ref.save_checkpoint(path, *args)
        checkpoint = torch.load(path)
        del checkpoint[dropped]
        torch.save(checkpoint, path)

    def load_without(path, model, optimizer, scheduler, generator):
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
        for key, target in [("optimizer", optimizer), ("scheduler", scheduler)]:
            if key in checkpoint:
                target.load_state_dict(checkpoint[key])
        if "torch_rng" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng"])
        if "loader_rng" in checkpoint:
            generator.set_state(checkpoint["loader_rng"])
        return checkpoint["epoch"] + 1

    case = checks.Case(seed=4, n=12, batch_size=4, epochs=3, interrupt_after=1)
    assert not _equal(_interrupted(case, tmp_path, save_without, load_without), _uninterrupted(case))


def test_train_resumable_survives_a_crash(tmp_path):
    case = checks.Case(seed=5, n=10, batch_size=3, epochs=4, interrupt_after=2)
    first, crashed, second, weights, saved = checks._run_resumable(ref.train_resumable, case)
    assert (first, crashed, second, saved["epoch"]) == (2, True, 2, 1)
    assert _equal(weights, _uninterrupted(case))


def test_checkpoint_loads_with_weights_only(tmp_path):
    s = checks._setup(checks.Case())
    ref.save_checkpoint(tmp_path / "c.pt", s.model, s.optimizer, s.scheduler, s.generator, 0, 1.5)
    checkpoint = torch.load(tmp_path / "c.pt", weights_only=True)
    assert sorted(checkpoint) == sorted(checks.CHECKPOINT_KEYS)


def test_cuda_checkpoint_is_tagged_cuda_and_needs_map_location(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3), "epoch": 2}
    path = checks.make_cuda_checkpoint(tmp_path / "gpu.pt", state)
    assert checks.storage_locations(path) == {"cuda:0"}
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            torch.load(path)
    loaded = ref.load_on_cpu(path)
    assert loaded["epoch"] == 2 and loaded["w"].device.type == "cpu" and torch.equal(loaded["w"], state["w"])


def test_ordinary_saves_stay_cpu_tagged(tmp_path):
    checks.make_cuda_checkpoint(tmp_path / "gpu.pt", {"w": torch.ones(1)})
    torch.save({"w": torch.ones(2)}, tmp_path / "cpu.pt")
    assert checks.storage_locations(tmp_path / "cpu.pt") == {"cpu"}
    taggers = [t for _, t, _ in torch.serialization._package_registry if getattr(t, "__qualname__", "") == "_retag"]
    assert len(taggers) == 1, "the course's tagger is registered once, however often the module is imported"


def test_strip_module_prefix_only_strips_the_leading_prefix():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.submodule = nn.Linear(2, 2)

    wrapped = nn.DataParallel(Net())
    stripped = ref.strip_module_prefix(wrapped.state_dict())
    assert list(stripped) == ["submodule.weight", "submodule.bias"]
    Net().load_state_dict(stripped)
    assert ref.strip_module_prefix({"head.module.w": torch.ones(1)}).keys() == {"head.module.w"}


def test_load_for_inference_returns_eval_mode(tmp_path):
    s = checks._setup(checks.Case())
    ref.save_checkpoint(tmp_path / "c.pt", s.model, s.optimizer, s.scheduler, s.generator, 0, 0.0)
    model = ref.load_for_inference(tmp_path / "c.pt", checks._setup(checks.Case(), restart=True).model)
    assert not model.training and _equal(model.state_dict(), s.model.state_dict())
