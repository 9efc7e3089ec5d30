"""The grader's own run of a graded cell (coursetools.grading.verify), without a kernel.

The kernel's side is :func:`sandbox.call_in_kernel` on a namespace of this process; the tests that grade real
notebooks through real kernels are in test_grading_integrity.py (tricks) and test_roundtrip.py (every lesson).
"""

from __future__ import annotations

import os

import pytest
import torch

from coursetools.grading import sandbox, verify

IMPORTS = {"check": ("helpers.checks", "start"), "torch": ("torch", None)}
CELL = "check.check_to_fahrenheit(to_fahrenheit)\n"


def kernel(**functions):
    """A ``send`` that makes the grader's calls with ``functions``, as a kernel would with the notebook's."""
    return lambda request: sandbox.call_in_kernel(functions, request)


def test_learner_names_are_what_the_cell_reads_but_neither_binds_nor_imports():
    source = ("check.check_accuracy(accuracy)\n"
              "with torch.random.fork_rng():\n"
              "    hidden_model = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))\n"
              "check.check_accuracy(accuracy, inputs=[(hidden_model, test_images[:3], [len(x) for x in range(2)])])\n")
    assert verify.learner_names(source, {**IMPORTS, "nn": ("torch.nn", None)}) == ["accuracy", "test_images"]
    assert verify.learner_names("%timeit f()\n", IMPORTS) is None


def test_a_right_answer_passes_and_a_wrong_one_fails_with_the_checks_message():
    run, failure = verify.run_cell(CELL, IMPORTS, kernel(to_fahrenheit=lambda c: c * 9 / 5 + 32))
    assert run.unverifiable is None and failure is None
    run, failure = verify.run_cell(CELL, IMPORTS, kernel(to_fahrenheit=lambda c: c * 9 / 5))
    assert run.unverifiable is None and failure and "32" in failure, failure


def test_the_learners_exception_reaches_the_check_as_the_same_builtin():
    def raises(celsius):
        raise ValueError("no temperatures today")

    run, failure = verify.run_cell(CELL, IMPORTS, kernel(to_fahrenheit=raises))
    assert run.unverifiable is None and "ValueError" in failure and "no temperatures today" in failure, failure


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class Runs:
    def __reduce__(self):
        return (os.system, ("echo the grader ran this",))


@pytest.mark.parametrize("returned, why", [
    (lambda c: (c * 9 / 5).as_subclass(Agreeable), "cannot be brought back as plain data"),
    (lambda c: Runs(), "cannot be brought back as plain data"),
    (lambda c: (lambda: 0), "cannot be sent"),
])
def test_what_comes_back_is_plain_data_or_the_cell_is_not_verified(returned, why):
    """A tensor subclass, an object whose loading runs code, a function: none is loaded by the grader."""
    run, failure = verify.run_cell(CELL, IMPORTS, kernel(to_fahrenheit=returned))
    assert run.unverifiable and why in run.unverifiable, (run.unverifiable, failure)


def test_numpy_arrays_and_torch_results_come_back():
    import numpy as np

    text = sandbox.pack({"a": np.arange(3.0), "max": torch.ones(2, 3).max(dim=0), "s": slice(1, 2),
                         "n": np.float32(1.5)})
    back = verify.unpack(text)
    assert back["a"].tolist() == [0.0, 1.0, 2.0] and back["max"].values.shape == (3,) and back["n"] == 1.5


def test_the_global_random_stream_follows_on_across_calls():
    """Each call sees the grader's random state and hands back the one it left: two draws differ, as in one process."""
    source = ("torch.manual_seed(0)\n"
              "first, second = draw(), draw()\n"
              "assert not torch.equal(first, second)\n"
              "torch.manual_seed(0)\n"
              "assert torch.equal(draw(), first)\n")
    run, failure = verify.run_cell(source, IMPORTS, kernel(draw=lambda: torch.rand(3)))
    assert run.unverifiable is None and failure is None, failure


def test_the_grader_keeps_its_own_torch_state():
    before = torch.get_rng_state(), torch.get_default_dtype()
    verify.run_cell("torch.set_default_dtype(torch.float64)\ntorch.manual_seed(5)\nf()\n", IMPORTS,
                    kernel(f=lambda: torch.rand(1)))
    assert torch.equal(torch.get_rng_state(), before[0]) and torch.get_default_dtype() == before[1]


def test_a_cell_the_answer_key_passes_in_another_process_is_verified():
    assert verify.runs_in_grader(CELL, IMPORTS) is None


@pytest.mark.parametrize("source, imports, why", [
    # the check hands the function a file it wrote in the grader's process
    ("import tempfile, pathlib\n"
     "path = pathlib.Path(tempfile.mkdtemp()) / 'x.pt'\n"
     "torch.save({'w': torch.ones(1)}, path)\n"
     "check.check_to_fahrenheit(to_fahrenheit)\n"
     "to_fahrenheit(path)\n", IMPORTS, "a file's path"),
    # the check looks at memory the function's result shares with its argument (only the kernel has both)
    ("check.check_share_numpy(share_numpy)\n", {"check": ("helpers.checks", "tensors")}, "the answer key fails it"),
    # the exercise is a class: what it builds is an object with code of its own (and the check looks inside it)
    ("check.check_points_dataset(PointsDataset)\n", {"check": ("helpers.checks", "datasets")}, "is a class"),
    # the function trains the model it is given in place: the model the check looks at would be the kernel's
    ("check.check_train_spirals(train_spirals)\n", {"check": ("helpers.checks", "training")}, "returns nothing"),
    # the check runs the function in processes of its own (a process group's ranks)
    ("check.check_shard_indices(shard_indices)\n", {"check": ("helpers.checks", "distributed")},
     "in processes of its own"),
])
def test_a_cell_that_needs_what_only_the_kernel_has_is_left_to_the_kernel(source, imports, why):
    found = verify.runs_in_grader(source, imports)
    assert found is not None and why in found, found


def test_a_gradient_left_on_an_argument_reaches_the_function():
    """torch.save leaves ``.grad`` out; a check that hands over a tensor with a leftover gradient hands it over."""
    source = ("w = torch.ones(2, requires_grad=True)\n"
              "w.grad = torch.full((2,), 3.0)\n"
              "assert torch.equal(leftover(w), torch.full((2,), 3.0))\n"
              "model = torch.nn.Linear(2, 1)\n"
              "model(torch.ones(1, 2)).sum().backward()\n"
              "assert torch.equal(leftover(model), model.weight.grad)\n")

    def leftover(value):
        return (value.weight if isinstance(value, torch.nn.Module) else value).grad.clone()

    run, failure = verify.run_cell(source, IMPORTS, kernel(leftover=leftover))
    assert run.unverifiable is None and failure is None, failure


def test_a_draw_from_the_global_generator_is_named_as_one_not_as_a_reseed():
    """The grader hands the random state over through the generator itself, which the checks' watch on reseeds
    (torch.set_rng_state called outside torch) does not take for the learner's."""
    def shift_with_global_draws(images, max_shift, fill, generator):
        dy = torch.randint(-max_shift, max_shift + 1, (len(images),))  # no generator=
        return torch.stack([torch.roll(image, int(d), dims=1) for image, d in zip(images, dy)])

    run, failure = verify.run_cell("check.check_random_shift(random_shift)\n", {"check": ("helpers.checks", "capstone")},
                                   kernel(random_shift=shift_with_global_draws))
    assert run.unverifiable is None and failure and "used the global random generator" in failure, failure
    assert "reset a global random generator" not in failure


def _relu_in_place(x):
    x[x < 0] = 0
    return x.clone()


def _batch_to_in_place(batch, device):
    batch["images"] = batch["images"].to(device)  # a new tensor under the caller's key
    return dict(batch)


def _flags_the_caller(x):
    x.requires_grad_()
    y = x.detach().clone().requires_grad_()
    ((y ** 2).mean()).backward()
    return y.grad


@pytest.mark.parametrize("cell, imports, function, seen", [
    ("check.check_relu(relu)\n", {"check": ("helpers.checks", "tensors")}, {"relu": _relu_in_place},
     "changed the tensor it was given as `x`: its values were overwritten"),
    ("check.check_batch_to(batch_to)\n", {"check": ("helpers.checks", "tensors")}, {"batch_to": _batch_to_in_place},
     "changed the dict it was given as `batch`: the value under 'images' was replaced"),
    ("check.check_mean_square_grad(mean_square_grad)\n", {"check": ("helpers.checks", "autograd")},
     {"mean_square_grad": _flags_the_caller}, "its requires_grad was switched on"),
])
def test_what_the_function_changes_in_its_arguments_the_graders_check_sees(cell, imports, function, seen):
    """A wrong answer that writes into its input fails the grader's run as it fails the kernel's, with the same
    symptom: the changes the call made to the kernel's copies are made to the check's own arguments."""
    run, failure = verify.run_cell(cell, imports, kernel(**function))
    assert run.unverifiable is None and failure and seen in failure, failure


def test_every_kind_of_change_is_replayed_and_then_put_back():
    import numpy as np

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())
    shared = torch.zeros(3)
    grader = [torch.arange(4.0), shared, {"a": shared, "b": 1}, [shared, torch.ones(1)], np.zeros(2), model,
              torch.ones(2, requires_grad=True)]
    originals = [t.clone() for t in (grader[0], shared)], model[0].weight, model.training

    def change_everything(values, dict_, list_, array, net, leaf):
        values[0].add_(1)
        values[1][0] = 5.0  # the same tensor is also in the dict and the list
        dict_["a"], dict_["c"] = torch.full((1,), 7.0), "new"
        list_.reverse()
        list_.append(torch.zeros(2))
        array[1] = 3.0
        net.eval()
        net[0].weight = torch.nn.Parameter(torch.zeros(2, 2))
        leaf.sum().backward()

    copy = sandbox.unpack_trusted(sandbox.pack(grader))
    objects = sandbox._objects(copy)
    before = [sandbox._looks(value) for value in objects]
    change_everything(copy[:2], copy[2], copy[3], copy[4], copy[5], copy[6])
    changed = verify.unpack(sandbox.pack(sandbox.changes(objects, before)))
    undo: list = []
    verify.replay(changed, sandbox._objects(grader), undo)
    assert grader[0].tolist() == [1.0, 2.0, 3.0, 4.0] and shared.tolist() == [5.0, 0.0, 0.0]
    assert grader[2]["a"].tolist() == [7.0] and grader[2]["c"] == "new"
    assert grader[3][1] is shared and len(grader[3]) == 3 and grader[4].tolist() == [0.0, 3.0]
    assert not model.training and not model[1].training and model[0].weight.abs().sum() == 0
    assert grader[6].grad.tolist() == [1.0, 1.0]
    for put_back in reversed(undo):
        put_back()
    assert torch.equal(grader[0], originals[0][0]) and torch.equal(shared, originals[0][1])
    assert grader[2] == {"a": shared, "b": 1} and grader[3][0] is shared and len(grader[3]) == 2
    assert grader[4].tolist() == [0.0, 0.0] and model[0].weight is originals[1] and model.training
    assert grader[6].grad is None


def test_a_change_made_to_the_checks_own_input_does_not_reach_the_next_learner(monkeypatch):
    """An argument may be the check module's own default input: after the cell it is as it was."""
    import sys
    import types

    module = types.ModuleType("fake_checks")
    module.DEFAULT = torch.tensor([-1.0, 2.0])
    exec("def check_it(fn):\n    fn(DEFAULT)\n    assert DEFAULT.min() >= 0, 'changed'\n", vars(module))
    monkeypatch.setitem(sys.modules, "fake_checks", module)
    run, failure = verify.run_cell("check.check_it(relu)\n", {"check": ("fake_checks", None)},
                                   kernel(relu=_relu_in_place))
    assert run.unverifiable is None and failure is None  # the cell saw the change (and this check allows it) ...
    assert module.DEFAULT.tolist() == [-1.0, 2.0]  # ... and the grading process keeps its input as it was


def test_changes_the_grader_cannot_make_leave_the_cell_unverified():
    """A kernel's answer whose changes do not fit the grader's arguments is not trusted, and grading goes on."""
    def send(request: str) -> str:
        asked = sandbox.unpack_trusted(request)
        return sandbox.pack({"result": asked["args"][0] * 9 / 5 + 32, "rng": torch.get_rng_state(),
                             "changed": [(99, "tensor", (None, False, "same"))]})

    run, failure = verify.run_cell(CELL, IMPORTS, send)
    assert run.unverifiable and "cannot be made to the grader's copies" in run.unverifiable, run.unverifiable


@pytest.mark.parametrize("write", [
    lambda x: setattr(x, "data", x.data.clamp(min=0)),  # .data = ...: no version counter moves
    lambda x: x.numpy().__setitem__(0, 9.0),  # through a NumPy view of the tensor
    lambda x: x.set_(torch.zeros(3)),
])
def test_writes_the_version_counter_misses_are_seen_too(write):
    grader = torch.tensor([-1.0, 2.0, float("nan")])
    copy = sandbox.unpack_trusted(sandbox.pack(grader))
    objects = sandbox._objects(copy)
    before = [sandbox._looks(value) for value in objects]
    write(copy)
    verify.replay(verify.unpack(sandbox.pack(sandbox.changes(objects, before))), sandbox._objects(grader), [])
    assert torch.equal(grader.nan_to_num(-7.0), copy.nan_to_num(-7.0)), (grader, copy)


def test_an_unchanged_tensor_holding_nan_is_not_sent_back():
    copy = sandbox.unpack_trusted(sandbox.pack([torch.tensor([float("nan"), 1.0])]))
    objects = sandbox._objects(copy)
    before = [sandbox._looks(value) for value in objects]
    assert sandbox.changes(objects, before) == []


# ------------------------------------------------------------------ a model the learner's function returns

CLASSIFIER = "check.check_build_classifier(build_classifier)\n"
MODELS = {"check": ("helpers.checks", "models"), "torch": ("torch", None), "nn": ("torch.nn", None)}


def _classifier(in_channels, num_classes, norm=True):
    layers = [torch.nn.Conv2d(in_channels, 8, 3, padding=1, bias=not norm), *([torch.nn.BatchNorm2d(8)] if norm else []),
              torch.nn.ReLU(), torch.nn.MaxPool2d(4), torch.nn.Flatten(), torch.nn.Linear(8 * 7 * 7, num_classes)]
    return torch.nn.Sequential(*layers)


class Classifier(torch.nn.Module):  # a learner's own class, as lesson 04 teaches
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.layers = _classifier(in_channels, num_classes)

    def forward(self, x):
        return self.layers(x)


def test_a_model_of_torch_layers_comes_back_and_the_graders_check_runs_it():
    assert verify.runs_in_grader(CLASSIFIER, MODELS) is None
    run, failure = verify.run_cell(CLASSIFIER, MODELS, kernel(build_classifier=_classifier))
    assert run.unverifiable is None and run.kernel_only is None and failure is None, (run.unverifiable, failure)
    run, failure = verify.run_cell(CLASSIFIER, MODELS, kernel(build_classifier=lambda c, n: _classifier(c, n, False)))
    assert run.unverifiable is None and failure and "batch" in failure, failure
    # a model in a tuple comes back too
    text = sandbox.call_in_kernel({"f": lambda: (_classifier(1, 3), 2)}, sandbox.pack(
        {"name": "f", "args": (), "kwargs": {}, "rng": torch.get_rng_state(), "dtype": torch.float32, "grad": True}))
    assert isinstance(verify.unpack(text)["result"][0], torch.nn.Sequential)


def test_a_model_of_the_notebooks_own_class_is_left_to_the_kernel_and_is_no_problem():
    run, failure = verify.run_cell(CLASSIFIER, MODELS, kernel(build_classifier=Classifier))
    assert run.unverifiable is None and run.kernel_only and "own class (Classifier)" in run.kernel_only, run.kernel_only


_CACHED = {}
_STEM = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU())


def _cached(in_channels, num_classes):
    return _CACHED.setdefault((in_channels, num_classes), _classifier(in_channels, num_classes))


def _shared_stem(in_channels, num_classes):
    stem = _STEM if in_channels == 1 else _classifier(in_channels, 8)[:3]
    return torch.nn.Sequential(stem, torch.nn.MaxPool2d(4), torch.nn.Flatten(), torch.nn.Linear(8 * 7 * 7, num_classes))


@pytest.mark.parametrize("build", [_cached, _shared_stem])
def test_a_model_sharing_layers_with_an_earlier_result_is_left_to_the_kernel(build):
    """Each result loads afresh in the grader, so sharing across calls (which the check may look for) is lost there:
    the kernel's run, which sees it, judges the cell."""
    run, failure = verify.run_cell(CLASSIFIER + CLASSIFIER, MODELS, kernel(build_classifier=build))
    assert run.unverifiable is None and run.kernel_only and "shares layers with one it returned before" in \
        run.kernel_only, (run.kernel_only, run.unverifiable, failure)


def test_a_function_whose_answer_is_no_model_cannot_claim_a_class_of_its_own():
    """The kernel says "a model of my own class" for to_fahrenheit: nothing to run, and it is not trusted."""
    run, failure = verify.run_cell(CELL, IMPORTS, kernel(to_fahrenheit=lambda c: Classifier(1, 2)))
    assert run.kernel_only is None and run.unverifiable and "a class of the notebook's own" in run.unverifiable


def _hooked(in_channels, num_classes):
    model = _classifier(in_channels, num_classes)
    model[0].register_forward_hook(torch.nn.Identity)  # a torch.nn class: it pickles, and would run in the grader
    return model


def _forward_replaced(in_channels, num_classes):
    model = _classifier(in_channels, num_classes)
    model.forward = torch.nn.Flatten  # an attribute standing in for the method
    return model


@pytest.mark.parametrize("build", [_hooked, _forward_replaced])
def test_a_model_that_came_back_with_more_than_layers_is_not_trusted(build):
    run, failure = verify.run_cell(CLASSIFIER, MODELS, kernel(build_classifier=build))
    assert run.kernel_only is None and run.unverifiable and "cannot be brought back" in run.unverifiable, \
        (run.unverifiable, failure)


def test_a_model_made_from_what_it_is_given_is_not_tried():
    found = verify.runs_in_grader("check.check_build_and_train(build_and_train)\n",
                                  {"check": ("helpers.checks", "capstone")})
    assert found and "makes its model from what it is given" in found, found


class CallsALayer:
    """Pickles as a call of a layer's constructor (REDUCE), with sizes of the kernel's choosing."""

    def __reduce__(self):
        return (torch.nn.Linear, (3, 4))


def test_a_layers_constructor_is_never_called_while_an_answer_loads():
    assert isinstance(verify.unpack(sandbox.pack({"model": _classifier(1, 2)}))["model"][0], torch.nn.Conv2d)
    with pytest.raises(Exception, match="calls Linear"):
        verify.unpack(sandbox.pack({"model": CallsALayer()}))


def test_a_malformed_answer_about_parameters_leaves_the_names_out_and_nothing_else():
    """The kernel answers the grader's question about the function's parameters with nonsense: the check names the
    argument by its position, as it did before it asked, and judges the answer as usual."""
    real = kernel(relu=_relu_in_place)

    def send(request):
        if sandbox.unpack_trusted(request).get("parameters_only"):
            return sandbox.pack({"parameters": [("not a name!", 99, True)]})
        return real(request)

    run, failure = verify.run_cell("check.check_relu(relu)\n", {"check": ("helpers.checks", "tensors")}, send)
    assert run.unverifiable is None and failure and "as argument 1: its values were overwritten" in failure, failure


def test_a_process_the_check_forked_never_asks_the_kernel_about_parameters():
    asked = []
    function = verify.LearnerFunction("relu", lambda request: asked.append(request) or "", verify.GraderRun())
    function._pid = -1  # as in a child of the grading process (lesson 08's checks fork)
    assert function.__signature__ is None and not asked
