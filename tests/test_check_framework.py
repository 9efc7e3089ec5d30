"""The framework's default rules: each rejects by name, each opt-out (Allow) accepts, the caller's state comes back.

Rules 1 and 2 live in ``call`` (arguments; state that outlives the call), rules 3 and 4 in the comparisons
(a kept autograd graph; the type the task names). The hint ladder's rendering is tested in test_check_rendering.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset

from helpers.checks import (Allow, CheckError, Mistake, call, call_unchanged, differs_between_calls, expect_close,
                            expect_tensor, expect_type, expect_value, tensor_mistake)


def rejects(fn, *args, allow=Allow(), **kwargs) -> CheckError:
    with pytest.raises(CheckError) as caught:
        call(fn, *args, allow=allow, **kwargs)
    return caught.value


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Dropout(0.5), nn.Linear(3, 1))


# ---------------------------------------------------------------- rule 1: arguments


def pops(batches):
    total = 0
    while batches:
        total += batches.pop().sum().item()
    return total


def appends(items):
    items.append(0)
    return len(items)


def replaces(items):
    items[0] = 9
    return items


def sorts(items):
    items.sort()
    return items


def writes_key(d):
    d["lr"] = 0.0
    return d


def subtracts(x):
    x -= x.mean()
    return x


def sets_requires_grad(x):
    return x.requires_grad_()


def backward_into(w):
    (w * 2).sum().backward()
    return 1


def numpy_in_place(a):
    a *= 2
    return a


def evaluates(m):
    m.eval()
    return 1


def trains_one_step(m):
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m(torch.randn(4, 2, generator=torch.Generator().manual_seed(0))).sum().backward()
    opt.step()
    return 1


def adds_layer(m):
    m.extra = nn.Linear(1, 1)
    return m


def sets_lr(opt):
    opt.param_groups[0]["lr"] = 1.0
    return opt


def steps(opt):
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad = torch.ones_like(p)
    opt.step()
    return 1


def shrinks_subset(ds):
    ds.indices = ds.indices[:1]
    return len(ds)


def overwrites_dataset_tensor(ds):
    ds.tensors[0][0] = 100.0
    return len(ds)


def nested_write(pairs):
    pairs[1][0].zero_()
    return pairs


def test_argument_changes_are_named():
    cases = [
        (pops, [torch.ones(2), torch.ones(2)], "changed the list it was given as `batches`: items were removed",
         "pop(), remove() and del remove them from the caller's list"),
        (appends, [1, 2], "items were added (2 -> 3 items)", "append()"),
        (replaces, [1, 2], "items were replaced", "lst[i] = ..."),
        (sorts, [3, 1, 2], "it was reordered in place", "sorted(...)"),
        (writes_key, {"lr": 0.1}, "changed the dict it was given as `d`: the value under 'lr' was replaced", "new dict"),
        (subtracts, torch.arange(4.0), "changed the tensor it was given as `x`: its values were overwritten",
         "in-place operation"),
        (sets_requires_grad, torch.ones(2), "its requires_grad was switched on", "detach().clone()"),
        (backward_into, torch.ones(2, requires_grad=True), "its .grad was filled", "backward()"),
        (numpy_in_place, np.ones(3), "changed the NumPy array it was given as `a`: its values were overwritten",
         "copy"),
        (evaluates, model(), "changed the model it was given as `m`: it was in training mode and is left in eval mode",
         "model.train(was_training)"),
        (trains_one_step, model().eval(), "its parameter '0.weight' changed: values were overwritten", "optimizer"),
        (adds_layer, model(), "submodules were added or removed", "new model"),
        (sets_lr, torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1),
         "changed the optimizer it was given as `opt`: its lr (param group 0) changed from 0.1 to 1.0", "hyperparameter"),
        (steps, torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1, momentum=0.9), "its state", "step"),
        (shrinks_subset, Subset(TensorDataset(torch.arange(4.0)), [0, 1, 2]), "its length changed from 3 to 1",
         "Subset"),
        (overwrites_dataset_tensor, TensorDataset(torch.arange(4.0)),
         "its attribute 'tensors' changed: item 0 changed: its values were overwritten", "in-place"),
        (nested_write, [torch.ones(1), (torch.ones(2),)], "item 1 changed: item 0 changed: its values were overwritten",
         "in-place"),
    ]
    for fn, argument, symptom, mistake in cases:
        error = rejects(fn, argument)
        assert symptom in error.symptom, (fn.__name__, str(error))
        assert mistake in error.mistake, (fn.__name__, str(error))
        assert error.where and "look at every line that uses" in error.where


def test_allow_changed_accepts_the_named_argument_only():
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)  # momentum: step() leaves a trace in its state

    def fit(m, opt):
        m.train()
        m(torch.randn(4, 2, generator=torch.Generator().manual_seed(0))).sum().backward()
        opt.step()
        return 1

    # task: "trains the model in place" (dropout draws from the global generator)
    assert call(fit, m, opt, allow=Allow(changed=(m, opt), global_rng=True)) == 1
    error = rejects(fit, m, opt, allow=Allow(changed=(m,), global_rng=True))
    assert "optimizer it was given as `opt`" in str(error)


def test_modes_are_given_back_and_allow_modes_keeps_them():
    m = model()
    rejects(evaluates, m)
    assert all(module.training for module in m.modules())  # the caller's mode is back
    assert call(evaluates, m, allow=Allow(modes=True)) == 1
    assert not any(module.training for module in m.modules())


def test_an_unchanged_call_passes_and_returns_the_result():
    m, x = model().eval(), torch.randn(3, 2)
    with torch.no_grad():
        expected = m(x)
    assert torch.equal(call(lambda m, x: m(x).detach(), m, x), expected)
    assert call_unchanged(lambda items: sorted(items), [3, 1, 2]) == [1, 2, 3]
    loader = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2, generator=torch.Generator())
    assert call(lambda loader: sum(len(b[0]) for b in loader), loader) == 4


def test_large_tensors_are_compared_by_a_sample_and_their_sum():
    big = torch.zeros(1 << 21)

    def touches_one(x):
        x[12345] += 1.0
        return 0

    assert "values were overwritten" in str(rejects(touches_one, big))
    assert call(lambda x: float(x.sum()), torch.zeros(1 << 21)) == 0.0


# ---------------------------------------------------------------- rule 2: state that outlives the call


def draws(seed):  # a function handed a seed must draw from it, not from the global generator
    return torch.randn(3)


def reseeds(n):
    torch.manual_seed(0)
    return n


def draws_python(seed):
    return random.random()


def draws_numpy(seed):
    return float(np.random.rand())


def grad_off(n):
    torch.set_grad_enabled(False)
    return n


def anomaly_on(n):
    torch.autograd.set_detect_anomaly(True)
    return n


def float64_default(n):
    torch.set_default_dtype(torch.float64)
    return n


def threads(n):
    torch.set_num_threads(max(1, torch.get_num_threads() - 1) if torch.get_num_threads() > 1 else 2)
    return n


@pytest.mark.parametrize("fn,symptom,allow", [
    (draws, "used the global random generator of torch (its state changed)", Allow(global_rng=True)),
    (reseeds, "reseeded torch's global random generator (torch.manual_seed(0))", Allow(global_rng=True)),
    (draws_python, "global random generator of Python's random", Allow(global_rng=True)),
    (draws_numpy, "global random generator of NumPy", Allow(global_rng=True)),
    (grad_off, "left gradient tracking switched off", Allow(grad_mode=True)),
    (anomaly_on, "left anomaly detection switched on", Allow(anomaly=True)),
    (float64_default, "changed the default dtype for the rest of the program", Allow(dtype=True)),
    (threads, "changed torch's thread count", Allow(threads=True)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_state_changes_are_named_and_given_back(fn, symptom, allow):
    rng = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    settings = torch.is_grad_enabled(), torch.is_anomaly_enabled(), torch.get_default_dtype(), torch.get_num_threads()
    error = rejects(fn, 3)
    assert symptom in error.symptom and error.where, str(error)
    assert error.mistake or "global random generator" in symptom, str(error)  # no generator given: symptom only
    assert torch.equal(rng[0], torch.get_rng_state()) and rng[1] == random.getstate()
    assert np.array_equal(rng[2], np.random.get_state()[1])
    assert settings == (torch.is_grad_enabled(), torch.is_anomaly_enabled(), torch.get_default_dtype(),
                        torch.get_num_threads())
    try:
        call(fn, 3, allow=allow)  # allowed: passes, and the change is left as the task says
    finally:
        torch.set_rng_state(rng[0])
        torch.set_grad_enabled(settings[0])
        torch.autograd.set_detect_anomaly(settings[1])
        torch.set_default_dtype(settings[2])
        torch.set_num_threads(settings[3])


def test_state_is_given_back_when_the_learners_code_crashes():
    def crashes(n):
        torch.set_grad_enabled(False)
        torch.randn(3)
        raise ValueError("boom")

    rng = torch.get_rng_state()
    error = rejects(crashes, 1)
    assert "raised ValueError: boom" in str(error)
    assert torch.is_grad_enabled() and torch.equal(rng, torch.get_rng_state())


def test_a_crash_shows_small_argument_tensors_whole_and_large_ones_by_shape():
    def pick(scores, labels):
        return scores[torch.arange(len(labels)), labels]

    error = rejects(pick, torch.zeros(3, 10), torch.tensor([1, 10, 2]))
    assert "pick(tensor(shape=[3, 10], dtype=torch.float32, device=cpu), tensor([1, 10, 2], dtype=torch.int64)) " \
           "raised IndexError" in str(error)
    error = rejects(pick, torch.zeros(2, 2), labels=torch.tensor([[0.5, 1.0]]))
    assert "labels=tensor([[0.5, 1.]], dtype=torch.float32)) raised IndexError" in str(error)


def test_a_crash_points_at_shapes_or_dtypes_by_what_the_error_says():
    def layer(x, weight):
        return F.linear(x, weight)

    shapes = rejects(layer, torch.zeros(2, 3), torch.zeros(4, 2))
    assert "mat1 and mat2 shapes cannot be multiplied" in str(shapes) and "size" in shapes.where
    # this one names mat1 and mat2 too, but it is about dtypes
    dtypes = rejects(layer, torch.zeros(2, 3, dtype=torch.float16), torch.zeros(4, 3))
    assert "same dtype" in str(dtypes)
    assert "print the .dtype" in dtypes.where, dtypes.where


def test_a_missing_attribute_points_at_its_name_not_at_the_words_in_it():
    def catches(x):
        return torch.autograd.gradcheck.GradcheckError  # a function, not the module: no such attribute

    error = rejects(catches, torch.zeros(1))
    assert "has no attribute" in str(error) and "the name after the dot" in error.where, error.where


def test_cudas_own_error_is_not_read_as_an_index_error():
    def waits(device):
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                           "installed a driver from http://www.nvidia.com/Download/index.aspx")

    error = rejects(waits, torch.device("cuda"))
    assert "reached CUDA itself" in error.where, error.where


def test_drawing_from_the_global_generator_is_a_mistake_only_when_randomness_was_given():
    def shuffles(order, generator=None):
        return torch.randperm(len(order)).tolist()  # ignores the generator it is given

    given = rejects(shuffles, [1, 2, 3], generator=torch.Generator().manual_seed(0))
    assert "draw from the generator (or seed) the task gives you" in given.mistake, str(given)
    rng = torch.get_rng_state()
    assert sorted(call(shuffles, [1, 2, 3])) == [0, 1, 2]  # no generator given: a random draw is its own business
    assert torch.equal(rng, torch.get_rng_state())  # and the caller's stream is given back all the same

    def picks_a_port():
        return random.randrange(20000, 30000)

    assert 20000 <= call(picks_a_port) < 30000


@pytest.mark.parametrize("reset", [
    lambda: (torch.manual_seed(7), torch.randn(2)),  # seeded, then drawn: the state is no seed's own
    lambda: torch.random.manual_seed(3),
    lambda: torch.set_rng_state(torch.Generator().manual_seed(5).get_state()),
    lambda: random.seed(11),
    lambda: np.random.seed(13),
], ids=["torch.manual_seed-then-draw", "torch.random.manual_seed", "torch.set_rng_state", "random.seed",
        "np.random.seed"])
def test_resetting_a_global_generator_is_named_whatever_the_task(reset):
    def resets(n):
        reset()
        return n

    state = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    error = rejects(resets, 3)
    assert "global random generator" in error.symptom and error.where, str(error)
    assert torch.equal(state[0], torch.get_rng_state()) and state[1] == random.getstate()
    assert np.array_equal(state[2], np.random.get_state()[1])
    assert torch.manual_seed is torch.random.manual_seed or torch.manual_seed.__module__ == "torch.random"


def test_a_given_generator_may_be_used():
    g = torch.Generator().manual_seed(0)
    assert call(lambda n, generator: torch.randperm(n, generator=generator).tolist(), 4, generator=g) is not None


# ---------------------------------------------------------------- rule 3: a kept autograd graph


def test_a_result_holding_a_graph_is_rejected_unless_the_reference_holds_one_or_allowed():
    w = torch.ones(2, requires_grad=True)
    got = w * 2
    with pytest.raises(CheckError, match="still attached to the autograd graph") as error:
        expect_tensor(got, torch.full((2,), 2.0), what="f(w)")
    assert ".detach()" in error.value.mistake
    expect_tensor(got, torch.full((2,), 2.0), what="f(w)", allow=Allow(graph=True))
    expect_tensor(got, torch.full((2,), 2.0, requires_grad=True) * 1, what="f(w)")  # the reference's has one too
    expect_tensor(got.detach(), torch.full((2,), 2.0), what="f(w)")
    losses = [(w * 2).sum(), (w * 3).sum()]
    with pytest.raises(CheckError, match=r"\(at \[1\]\) is still attached"):
        expect_value([4.0, losses[1]], [4.0, torch.tensor(6.0)], what="fit(...)")
    with pytest.raises(CheckError, match="still attached"):
        expect_close(losses[0], 4.0, what="total", number_or_tensor=True)
    expect_close(losses[0], 4.0, what="total", number_or_tensor=True, allow=Allow(graph=True))


# ---------------------------------------------------------------- rule 4: the type the task names


def test_expect_close_wants_a_python_number():
    with pytest.raises(CheckError, match="should be a Python number") as error:
        expect_close(torch.tensor(0.5), 0.5, what="accuracy(...)")
    assert ".item()" in error.value.mistake
    expect_close(torch.tensor(0.5), 0.5, what="accuracy(...)", number_or_tensor=True)
    expect_close(1, 1.0, what="count(...)")
    with pytest.raises(CheckError, match="should be 0.5, but yours is 0.4"):
        expect_close(torch.tensor(0.4), 0.5, what="accuracy(...)")  # a wrong value is the symptom first


def test_expect_type_names_the_item_that_is_not_what_the_task_says():
    expect_type([1, 2], list[int], what="shard(...)")
    expect_type({"a": 1.0, "b": 2}, dict[str, float], what="speeds(...)")
    expect_type((1, 2.0), tuple[int, float], what="pair(...)")
    for value, kind, message in [
        ([1, torch.tensor(2)], list[int], "should be a list of ints, but (at [1]) it is tensor"),
        ((1, 2), list[int], "should be a list of ints, but it is (1, 2)"),
        ([True], list[int], "(at [0]) it is True"),
        (torch.tensor(1.0), float, "should be a Python number"),
        ({"a": "x"}, dict[str, float], "(at ['a']) it is 'x'"),
    ]:
        with pytest.raises(CheckError) as error:
            expect_type(value, kind, what="f(...)")
        assert message in error.value.symptom, str(error.value)


# ---------------------------------------------------------------- messages: symptom first, Mistake as the last rung


def test_a_mistake_becomes_the_last_rung_and_the_comparison_the_symptom():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    mistake = Mistake("you summed over dim 0", lambda: x.sum(0), where="look at which dim you reduce over")
    with pytest.raises(CheckError) as caught:
        expect_tensor(x.sum(0), x.sum(1), what="row_sums(x)", given=x, mistakes=[mistake])
    error = caught.value
    assert error.symptom.startswith("row_sums(x) has the right shape and dtype but wrong values")
    assert "expected: [3.0, 7.0]" in error.symptom and "yours:    [4.0, 6.0]" in error.symptom
    assert error.where == "look at which dim you reduce over" and error.mistake == "you summed over dim 0"
    with pytest.raises(CheckError) as caught:  # the framework's own diagnosis, with a generic where
        expect_tensor(x.T, x, what="f(x)")
    assert "transpose" in caught.value.mistake and caught.value.where


# ---------------------------------------------------------------- the stand-in device (helpers.checks.devices)

def test_stand_in_device_rejects_two_devices_with_pytorchs_own_error():
    from helpers.checks.devices import STAND_IN_DEVICE, place

    host, device = place(torch.ones(2, 3), False), place(torch.ones(2, 3), True)
    with pytest.raises(RuntimeError, match=r"^Expected all tensors to be on the same device, but found at least two "
                                           r"devices, cuda:0 and cpu!$"):
        host + device
    assert (device * 2).device == STAND_IN_DEVICE and (device * 2).is_cuda  # results stay where they were computed
    assert host.device.type == "cpu" and not host.is_cuda
    assert torch.equal(device + torch.ones(3), torch.full((2, 3), 2.0))  # a plain tensor goes with either place
    assert (host.sum() + device).device == STAND_IN_DEVICE  # a CPU scalar mixes with any device, as on a GPU
    with pytest.raises(RuntimeError, match="two devices"):
        host + device.sum()  # a device scalar does not mix with CPU tensors


def test_stand_in_device_moves_like_a_gpu():
    from helpers.checks.devices import STAND_IN_DEVICE, OnDevice, OnHost, place

    host = place(torch.arange(4.0), False)
    moved = host.to(STAND_IN_DEVICE)
    assert type(moved) is OnDevice and moved.data_ptr() != host.data_ptr()  # another device: a copy
    assert type(moved.cpu()) is OnHost and type(host.cuda()) is OnDevice
    assert type(host.to("cuda", torch.float64)) is OnDevice and host.to("cuda", torch.float64).dtype == torch.float64
    assert type(host.to(moved)) is OnDevice and type(moved.to(host)) is OnHost  # .to(other): other's device
    assert type(host.to(torch.float16)) is OnHost  # a dtype alone moves nothing
    assert moved.to(STAND_IN_DEVICE).data_ptr() == moved.data_ptr()  # already there: no copy


def test_stand_in_device_reads_fail_only_where_a_gpu_fails():
    from helpers.checks.devices import place

    device = place(torch.tensor([1.5, 2.5]), True)
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()"):
        device.numpy()
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        np.asarray(device)
    assert device.sum().item() == 4.0 and float(device[0]) == 1.5 and device.tolist() == [1.5, 2.5]  # these sync
    assert device.cpu().numpy().tolist() == [1.5, 2.5]


def test_place_model_wants_its_input_where_it_is_and_returns_its_output_there():
    import copy

    from helpers.checks.devices import STAND_IN_DEVICE, model_on_device, place, place_model

    model = place_model(nn.Linear(3, 2))
    assert type(model).__name__ == "Linear" and not model_on_device(model)
    host, device = place(torch.ones(4, 3), False), place(torch.ones(4, 3), True)
    assert model(host).device.type == "cpu" and model(torch.ones(4, 3)).device.type == "cpu"
    with pytest.raises(RuntimeError, match="found at least two devices, cpu and cuda:0!"):
        model(device)  # a model never moved
    assert model.to(STAND_IN_DEVICE) is model and model_on_device(model)
    assert model(device).device == STAND_IN_DEVICE
    with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cpu!"):
        model(host)  # a batch never moved
    with pytest.raises(RuntimeError, match="two devices"):
        model(torch.ones(4, 3))  # a plain tensor is on the host, where a real model's input starts
    # its parameters say where it is, as a real model's do (next(model.parameters()).device)
    assert model.weight.device == STAND_IN_DEVICE and model.bias.is_cuda and isinstance(model.weight, nn.Parameter)
    assert model(device.to(next(model.parameters()).device)).device == STAND_IN_DEVICE
    assert copy.deepcopy(model).weight.device == STAND_IN_DEVICE  # a copy stays where the model is
    twin = copy.deepcopy(model).cpu()  # moving a copy moves only the copy
    assert model_on_device(model) and not model_on_device(twin) and twin(host).device.type == "cpu"
    assert twin.weight.device.type == "cpu" and model.weight.device == STAND_IN_DEVICE
    assert model.to(torch.float64).weight.dtype == torch.float64 and model_on_device(model)
    assert model.weight.device == STAND_IN_DEVICE  # a dtype change leaves the parameters where they were


def test_outputs_on_device_marks_a_plain_models_results():
    from helpers.checks.devices import is_on_device, outputs_on_device, unplaced

    model = outputs_on_device(nn.Linear(3, 2))
    out = model(torch.ones(1, 3))
    assert is_on_device(out) and is_on_device(out.argmax(dim=1)) and not is_on_device(out.cpu())
    assert type(unplaced(out)) is torch.Tensor


def test_host_tensor_fails_unless_moved_and_call_says_so():
    from helpers.checks.devices import HostTensor, NotMovedError, host_collate

    weights = torch.ones(3, 2)
    batch = torch.ones(4, 3).as_subclass(HostTensor)
    with pytest.raises(NotMovedError, match="^Expected all tensors to be on the same device"):
        batch @ weights
    assert type(batch.to("cpu")) is torch.Tensor and type(batch.cpu()) is torch.Tensor
    assert type(batch * 2) is HostTensor and type(batch.to(torch.float64)) is HostTensor
    assert torch.equal(batch.to("cpu") @ weights, torch.full((4, 2), 3.0))

    def forgot(loader: DataLoader) -> torch.Tensor:
        return sum(x @ weights for x, in loader)

    def moved(loader: DataLoader) -> torch.Tensor:
        return sum(x.to("cpu") @ weights for x, in loader)

    loader = DataLoader(TensorDataset(torch.ones(4, 3)), batch_size=2, collate_fn=host_collate,
                        generator=torch.Generator())  # its own: iterating draws a seed
    with pytest.raises(CheckError, match="used a batch without moving it to the device"):
        call(forgot, loader)
    assert torch.equal(call(moved, loader), torch.full((2, 2), 6.0))


def test_saved_on_tags_a_checkpoint_as_a_gpu_writes_it(tmp_path):
    from helpers.checks.devices import CUDA_LOAD_ERROR, save_as_on_device, saved_on, storage_locations

    path = save_as_on_device(tmp_path / "gpu.pt", {"w": torch.ones(2)})
    assert storage_locations(path) == {"cuda:0"}
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match=CUDA_LOAD_ERROR):
            torch.load(path)
    assert torch.equal(torch.load(path, map_location="cpu")["w"], torch.ones(2))
    with saved_on("cuda:1"):
        torch.save({"w": torch.ones(1)}, tmp_path / "rank1.pt")
    torch.save({"w": torch.ones(1)}, tmp_path / "cpu.pt")  # outside the block: an ordinary save
    assert storage_locations(tmp_path / "rank1.pt") == {"cuda:1"} and storage_locations(tmp_path / "cpu.pt") == {"cpu"}


def test_a_task_that_asks_for_nothing_random_names_a_draw():
    def shuffles(n):
        return torch.randperm(n).tolist()

    assert sorted(call(shuffles, 4)) == [0, 1, 2, 3]  # by default, drawing is the function's own business
    rng = torch.get_rng_state()
    error = rejects(shuffles, 4, nothing_random=True)
    assert "the task asks for nothing random from it" in error.symptom and error.where, str(error)
    assert torch.equal(rng, torch.get_rng_state())
    assert call(lambda n: list(range(n)), 3, nothing_random=True) == [0, 1, 2]


def test_a_task_may_allow_draws_from_the_global_generator_but_not_a_reseed():
    assert call(lambda n: torch.randn(n).shape[0], 3, allow=Allow(global_rng="draws")) == 3

    def reseeds_from_the_clock(n):
        torch.manual_seed(12345678)
        return torch.randn(n).shape[0]

    error = rejects(reseeds_from_the_clock, 3, allow=Allow(global_rng="draws"))
    assert "reset a global random generator (torch.manual_seed(12345678))" in error.symptom, str(error)
    assert call(reseeds_from_the_clock, 3, allow=Allow(global_rng=True)) == 3  # where the task seeds, it may


def test_fork_rng_restoring_the_state_is_no_reseed():
    def draws_some_inside_fork_rng(n):
        with torch.random.fork_rng(devices=[]):
            torch.randn(5)  # undone as the block exits, by torch.set_rng_state
        return torch.randn(n).shape[0]  # a draw of its own

    assert call(draws_some_inside_fork_rng, 3) == 3
    assert call(draws_some_inside_fork_rng, 3, allow=Allow(global_rng="draws")) == 3


def _sums(loader: DataLoader) -> list[float]:
    return [batch[0].sum().item() for batch in loader]


def test_a_data_loader_in_order_draws_nothing_of_the_learners():
    """Iterating a DataLoader draws its workers' base seed from torch's global generator, shuffled or not: that
    draw is the library's. A loader in order is no random choice; shuffling, or a draw of the function's own
    beside the loaders, still is."""
    data = TensorDataset(torch.arange(10.0))

    def in_order(dataset):
        return _sums(DataLoader(dataset, batch_size=3))

    def two_epochs_in_order(dataset):
        return [_sums(DataLoader(dataset, batch_size=4)) for _ in range(2)]

    def shuffled(dataset):
        return _sums(DataLoader(dataset, batch_size=3, shuffle=True))

    def in_order_and_a_draw(dataset):
        torch.rand(1)
        return in_order(dataset)

    before = torch.get_rng_state()
    assert call(in_order, data, nothing_random=True) == [3.0, 12.0, 21.0, 9.0]
    call(two_epochs_in_order, data, nothing_random=True)
    assert torch.equal(torch.get_rng_state(), before), "the caller's state comes back whole"
    for drawing in (shuffled, in_order_and_a_draw):
        with pytest.raises(CheckError, match="used the global random generator of torch"):
            call(drawing, data, nothing_random=True)
    assert torch.equal(torch.get_rng_state(), before)


def test_a_raise_the_task_asks_for_does_not_excuse_the_state_left_behind():
    """When raising is the answer, expected_raise hands the check the learner's exception; what the function left
    changed on its way out (here gradient tracking) is still named, and given back."""
    from helpers.checks import expected_raise

    def raises_cleanly(n):
        with torch.no_grad():
            raise RuntimeError(f"{n} is out of reach")

    def raises_with_recording_off(n):
        torch.set_grad_enabled(False)
        raise RuntimeError(f"{n} is out of reach")

    def raises_something_else(n):
        raise ValueError(n)

    with pytest.raises(CheckError) as clean:
        call(raises_cleanly, 3)
    assert isinstance(expected_raise(clean.value, RuntimeError), RuntimeError)
    with pytest.raises(CheckError) as other:
        call(raises_something_else, 3)
    assert expected_raise(other.value, RuntimeError) is None
    with pytest.raises(CheckError) as leaky:
        call(raises_with_recording_off, 3)
    assert torch.is_grad_enabled(), "the caller's setting comes back even when the function raised"
    with pytest.raises(CheckError, match=r"left gradient tracking switched off .*\(when it raised RuntimeError, as "
                                         r"asked\)"):
        expected_raise(leaky.value, RuntimeError)


def test_a_crash_shows_the_arguments_as_they_were_given():
    def grows_then_fails(x):
        x.mul_(10)  # changes the caller's tensor, then fails
        raise ValueError("boom")

    error = rejects(grows_then_fails, torch.tensor([1.0, 2.0, 3.0]))
    assert "grows_then_fails(tensor([1., 2., 3.], dtype=torch.float32)) raised ValueError: boom" in str(error)


class _Noisy(nn.Module):
    def forward(self, x):
        return x + torch.randn_like(x)


class _FunctionalDropout(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5)  # training=True by default, whatever the mode


class _Crashes(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom")


@pytest.mark.parametrize("model, eval_mode, differ, dropout_on", [
    (nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)), False, True, True),   # dropout in training mode
    (nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)), True, False, False),  # eval mode switches it off
    (_FunctionalDropout(), True, True, True),                                # on in eval mode too: named
    (_Noisy(), True, True, False),                                           # random, with no dropout to blame
    (nn.Linear(8, 8), False, False, False),
    (_Crashes(), True, False, False),                                        # another mistake, for the check
], ids=["dropout-train", "dropout-eval", "functional-dropout", "noise", "deterministic", "crash"])
def test_differs_between_calls_tells_randomness_and_names_dropout_only_when_seen(model, eval_mode, differ, dropout_on):
    model.train()
    x = torch.randn(4, 8)
    states = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    calls = differs_between_calls(model, x, eval_mode=eval_mode)
    assert (bool(calls), calls.dropout_on) == (differ, dropout_on)
    assert all(m.training for m in model.modules())  # each module's mode put back
    assert torch.equal(torch.get_rng_state(), states[0]) and random.getstate() == states[1]
    assert np.array_equal(np.random.get_state()[1], states[2])


def test_tensor_mistake_reads_the_values_as_expect_tensor_does():
    logits = torch.randn(6, 10, generator=torch.Generator().manual_seed(3))
    assert "softmax" in tensor_mistake(logits.softmax(dim=1), logits)
    assert tensor_mistake(logits.clone(), logits) is None  # right: nothing to name
    assert tensor_mistake(logits + torch.randn(6, 10), logits) is None  # wrong, with no relation to name
