"""Lesson 08: the answer key agrees with PyTorch, and the check launcher stops every kind of hang."""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest
import torch
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

from helpers.checks import CheckError
from helpers.checks import distributed as check
from helpers.reference import distributed as ref


@pytest.mark.parametrize("n,world_size", [(12, 2), (7, 2), (11, 3), (2, 3), (1, 4), (10, 4)])
@pytest.mark.parametrize("epoch,seed", [(0, 0), (1, 0), (3, 5)])
def test_shard_indices_is_distributed_samplers_contract(n, world_size, epoch, seed):
    for rank in range(world_size):
        sampler = DistributedSampler(list(range(n)), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
        sampler.set_epoch(epoch)
        assert ref.shard_indices(n, rank, world_size, epoch, seed) == list(sampler)


def test_equal_shards_averaged_reproduce_the_whole_batch():
    torch.manual_seed(0)
    x, y = torch.randn(12, 3), torch.randn(12, 2)
    whole = ref.simulate_data_parallel(check.make_regressor, x, y, steps=4, seeds=[3], lr=0.1)[0]
    for world_size in (2, 3, 4):
        for replica in ref.simulate_data_parallel(check.make_regressor, x, y, 4, [3] * world_size, 0.1):
            assert all(torch.allclose(replica[k], whole[k], atol=1e-6) for k in whole)
    apart = ref.simulate_data_parallel(check.make_regressor, x, y, 4, [3, 4], 0.1)
    assert not torch.allclose(apart[0]["0.weight"], apart[1]["0.weight"])


def test_free_port_is_free():
    port = ref.free_port()
    assert 0 < port < 65536 and not check._port_in_use(port)


# ---------------------------------------------------------------- the launcher: real groups, every way of hanging

@pytest.fixture(autouse=True)
def _children_before():
    """Children that were alive before a test (multiprocessing's resource tracker, from an earlier
    test's process pool, lives as long as pytest) are not that test's leftovers."""
    global _EARLIER
    _EARLIER = {p.pid for p in psutil.Process().children(recursive=True)}
    yield


_EARLIER: set[int] = set()


def _children_alive() -> list[psutil.Process]:
    """Processes started during this test that are still running."""
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in _EARLIER and p.is_running() and p.status() != "zombie"]


def _mismatched(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))
    else:
        dist.barrier()


def _spins(rank: int, world_size: int) -> None:
    if rank == 1:
        while True:
            pass


def _leaves_early(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))


def _raises(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("shapes do not match")


def test_a_mismatched_collective_is_stopped_by_the_collective_timeout():
    started = time.monotonic()
    with pytest.raises(CheckError, match=r"timed out after 3 s on rank \d\n[\s\S]*a collective that one rank never reached\?"):
        check.run_group(_mismatched, collective_timeout_s=3, what="mismatched")
    assert time.monotonic() - started < 30
    assert not _children_alive()


def test_a_rank_that_never_returns_is_killed_at_the_deadline():
    started = time.monotonic()
    with pytest.raises(CheckError, match=r"spins timed out after 4 s\n[\s\S]*a collective that one rank never reached\?"):
        check.run_group(_spins, timeout_s=4, what="spins")
    assert time.monotonic() - started < 30
    assert not _children_alive(), "the launcher must kill what is left after its deadline"


def test_a_rank_that_leaves_early_is_named():
    with pytest.raises(CheckError, match="waited in a collective that another rank never called"):
        check.run_group(_leaves_early, what="leaves_early")


def test_the_learners_exception_is_named_with_its_rank():
    with pytest.raises(CheckError, match="raises raised ValueError on rank 1: shapes do not match"):
        check.run_group(_raises, what="raises")


def test_average_gradients_that_hangs_is_reported_as_a_hang(monkeypatch):
    """The learner's own function, in the real check: stopped by the timeout, and said so."""
    def average_then_wait(model):
        if dist.get_rank() == 0:
            ref.average_gradients(model)
        else:
            dist.barrier()

    monkeypatch.setattr(check, "COLLECTIVE_TIMEOUT_S", 3.0)
    with pytest.raises(CheckError, match=r"timed out after 3 s on rank .\n[\s\S]*a collective that one rank never reached"):
        check.check_average_gradients(average_then_wait)
    assert not _children_alive()


def test_a_taken_port_is_named():
    port = ref.free_port()
    with check.occupied(port), pytest.raises(CheckError, match="already in use"):
        check.run_group(check._all_reduce_ranks, port=port)


# ---------------------------------------------------------------- the torchrun script's backend choice

def _lesson_script() -> str:
    """The text of the script lesson 08 writes to runs/ddp_mnist.py (the same in the learner's notebook)."""
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "solutions" / "08_distributed" / "08_distributed.pct.py").read_text()
    start = source.index("SCRIPT.write_text('''\\\n") + len("SCRIPT.write_text('''\\\n")
    return source[start:source.index("''')", start)]


@pytest.fixture(scope="module")
def lesson_script(tmp_path_factory):
    import importlib.util

    path = tmp_path_factory.mktemp("script") / "ddp_mnist.py"
    path.write_text(_lesson_script())
    spec = importlib.util.spec_from_file_location("lesson08_ddp_mnist", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gpus,backend", [(0, "gloo"), (1, "gloo"), (2, "nccl"), (4, "nccl")])
def test_two_processes_use_nccl_only_with_a_gpu_each(lesson_script, gpus, backend):
    chosen, why = lesson_script.choose_backend(2, gpus)
    assert chosen == backend
    assert why and (("no GPU" in why) if gpus == 0 else (f"{gpus} GPU" in why))


def test_one_process_on_one_gpu_uses_nccl(lesson_script):
    assert lesson_script.choose_backend(1, 1)[0] == "nccl"
    assert lesson_script.choose_backend(1, 0)[0] == "gloo"


def test_the_script_takes_its_device_from_the_choice(lesson_script):
    """No other path to CUDA: the script sets a CUDA device only when the choice was NCCL, and prints the reason."""
    text = _lesson_script()
    assert "torch.cuda.is_available()" not in text
    assert text.count("torch.cuda.set_device") == 1 and 'if backend == "nccl":\n        torch.cuda.set_device' in text
    assert "LOCAL_WORLD_SIZE" in text and "({why})" in text


def test_lesson_uses_no_private_cpu_probe_and_shards_on_a_cpu_mesh():
    """Issue 20: no private torch.cpu._ probe, no bf16 because CUDA exists; fully_shard gets the CPU mesh."""
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "solutions" / "08_distributed" / "08_distributed.pct.py").read_text()
    assert "torch.cpu._" not in source and "bf16-mixed\" if" not in source
    calls = [line for line in source.splitlines() if "fully_shard(" in line and "import" not in line]
    assert calls and all("mesh=mesh" in line for line in calls)
    assert 'init_device_mesh("cpu"' in source


def _finished(returncode: int, stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["torchrun"], returncode, "", stderr)


def test_a_launch_whose_port_was_taken_runs_again_and_nothing_else_does():
    from helpers.distributed import again_if_port_taken

    taken = [_finished(1, "... name: EADDRINUSE ..."), _finished(-9)]
    results = iter([taken, taken, [_finished(0), _finished(0)]])
    calls = []
    assert [p.returncode for p in again_if_port_taken(lambda: calls.append(1) or next(results))] == [0, 0]
    assert len(calls) == 3
    # any other failure is the launch's own result, returned at once
    other = [_finished(1, "ValueError: bad script"), _finished(-9)]
    calls.clear()
    assert again_if_port_taken(lambda: calls.append(1) or other) is other and len(calls) == 1
    # a port taken every time: the last launch's results, after 3 launches
    calls.clear()
    assert again_if_port_taken(lambda: calls.append(1) or taken) is taken and len(calls) == 3


def test_a_group_whose_port_was_taken_starts_again():
    import torch.multiprocessing as mp

    from helpers.distributed import again_if_unconnected

    failures = iter([mp.ProcessRaisedException("RuntimeError: ... EADDRINUSE ...", 0, 1)])

    def launch():
        error = next(failures, None)
        if error:
            raise error
        return "done"

    assert again_if_unconnected(launch) == "done"
    with pytest.raises(mp.ProcessRaisedException):
        again_if_unconnected(lambda: (_ for _ in ()).throw(mp.ProcessRaisedException("ValueError: mine", 0, 1)))
