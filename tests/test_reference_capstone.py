"""Unit tests of lesson 10's answer key and of the grading machinery in helpers.checks.capstone.

The full reference training (about 30 s of CPU) is exercised by the wrong-answer
tests and the round trip; these tests use small data and short budgets.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.checks import CheckError, differs_between_calls
from helpers.checks import capstone as checks
from helpers.reference import capstone as ref


def test_random_shift_moves_each_image_by_its_drawn_offset():
    images = torch.rand(50, 2, 9, 9) + 1
    g = torch.Generator().manual_seed(3)
    got = ref.random_shift(images, 2, -1.0, g)
    g = torch.Generator().manual_seed(3)
    dy, dx = torch.randint(-2, 3, (50,), generator=g), torch.randint(-2, 3, (50,), generator=g)
    for i in range(50):
        assert torch.equal(got[i], checks._shifted(images[i], int(dy[i]), int(dx[i]), -1.0))


def test_shifted_helper_moves_down_and_right():
    image = torch.arange(9.0).view(1, 3, 3)
    assert checks._shifted(image, 1, 0, -1.0)[0].tolist() == [[-1, -1, -1], [0, 1, 2], [3, 4, 5]]
    assert checks._shifted(image, 0, -1, -1.0)[0].tolist() == [[1, 2, -1], [4, 5, -1], [7, 8, -1]]


def test_validation_split_is_reproducible_and_leaves_global_state():
    state = torch.get_rng_state()
    a = ref.make_validation_split(list(range(20)), 5, 1)
    b = ref.make_validation_split(list(range(20)), 5, 1)
    assert list(a[1]) == list(b[1]) and len(a[0]) == 15
    assert torch.equal(state, torch.get_rng_state())


def test_accuracy_counts_over_the_whole_dataset():
    model = nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
        model.bias.zero_()
    x = torch.tensor([[1.0, 0.0]] * 3 + [[0.0, 1.0]])
    y = torch.tensor([0, 0, 1, 1])  # the third is wrong
    assert ref.accuracy_on(model, TensorDataset(x, y), batch_size=3) == 0.75


def test_reference_model_contract():
    model = ref.build_model()
    assert model(torch.randn(3, 1, 28, 28)).shape == (3, 10)
    assert sum(p.numel() for p in model.parameters()) < 100_000


def _tiny_set(n: int = 32) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g))


def test_training_past_the_limit_is_stopped_with_a_message():
    def endless(train_set, time_budget_s):
        while True:
            try:
                sum(range(10_000))  # busy: the limit counts CPU time
            except Exception:  # the stop is not an Exception, so learner code cannot swallow it by accident
                pass

    result = checks._train(endless, _tiny_set(), budget_s=0.4, limit_s=0.6, threads=1, seed=0)
    assert result.cpu_seconds < 3, "stopped near the CPU limit (the clock depends on how busy the machine is)"
    assert result.model is None and "was stopped after" in str(result.error)
    assert "plus the 50% allowed for a slower grading machine" in str(result.error)
    # the contract's small run keeps the graded run's limit, many times its own budget: no percentage is made up
    result = checks._train(endless, _tiny_set(), budget_s=0.1, limit_s=0.6, threads=1, seed=0)
    assert "although it was given a time_budget_s of 0.1 s" in str(result.error)
    assert "allowed" not in str(result.error)


def test_training_over_the_limit_that_swallows_the_stop_is_still_caught():
    def stubborn(train_set, time_budget_s):
        deadline = time.process_time() + 0.8
        while time.process_time() < deadline:
            try:
                sum(range(10_000))
            except BaseException:  # a bare except: swallows even the stop
                pass
        return ref.build_model()

    result = checks._train(stubborn, _tiny_set(), budget_s=0.4, limit_s=0.5, threads=1, seed=0)
    assert "more than the time limit" in str(result.error)


def test_a_training_stopped_after_changing_the_threads_names_the_threads():
    def two_threads(train_set, time_budget_s):
        torch.set_num_threads(2)  # forbidden, and every thread's CPU time counts towards the limit
        while True:
            sum(range(10_000))

    saved = torch.get_num_threads()
    result = checks._train(two_threads, _tiny_set(), budget_s=0.4, limit_s=0.6, threads=1, seed=0)
    assert "was stopped after" in str(result.error)
    assert "changed PyTorch's number of threads to 2" in str(result.error)
    assert torch.get_num_threads() == saved


def test_waiting_costs_no_budget():
    def sleeper(train_set, time_budget_s):
        time.sleep(0.5)  # like waiting for a core that another program holds
        return ref.build_model()

    result = checks._train(sleeper, _tiny_set(), budget_s=0.2, limit_s=0.3, threads=1, seed=0)
    assert result.error is None and result.seconds >= 0.5 and result.cpu_seconds < 0.3


def test_graded_training_restores_threads_and_random_state():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)

    seen = {}

    def spy(train_set, time_budget_s):
        seen["threads"] = torch.get_num_threads()
        seen["first_draw"] = torch.rand(1)
        return ref.build_model()

    result = checks._train(spy, _tiny_set(), budget_s=10, limit_s=15, threads=1, seed=0)
    assert result.error is None and seen["threads"] == 1
    torch.manual_seed(0)
    assert torch.equal(seen["first_draw"], torch.rand(1)), "the grader seeds with 0 before the call"
    assert torch.get_num_threads() == threads
    torch.manual_seed(123)
    assert torch.equal(torch.rand(3), expected_next)


def test_crash_names_the_error_and_keeps_the_learners_exception():
    def crash(train_set, time_budget_s):
        raise ValueError("bad shapes")

    result = checks._train(crash, _tiny_set(), budget_s=10, limit_s=15, threads=1, seed=0)
    assert "raised ValueError: bad shapes" in str(result.error)
    assert isinstance(result.error.__cause__, ValueError)


def test_held_out_digits_are_the_test_split():
    from helpers.data import mnist_dataset

    images, labels = checks.held_out_digits()
    assert len(labels) == len(mnist_dataset(train=False)) and images.shape[1:] == (1, 28, 28)


def test_a_training_that_reads_the_held_out_digits_fails_and_the_next_one_starts_clean():
    from helpers.data import mnist_dataset

    def peeks(train_set, time_budget_s):
        try:
            mnist_dataset(train=False)
        except Exception:
            pass  # hiding the read does not hide it from the watch
        return ref.build_model()

    def honest(train_set, time_budget_s):
        return ref.build_model()

    result = checks._train(peeks, _tiny_set(), budget_s=10, limit_s=15, threads=1, seed=0)
    assert result.model is None and "opened t10k-images-idx3-ubyte while it trained" in str(result.error)
    checks.held_out_digits()  # the grader's own read, outside any training
    result = checks._train(honest, _tiny_set(), budget_s=10, limit_s=15, threads=1, seed=0)
    assert result.error is None


def test_a_model_random_in_eval_mode_is_noticed_and_the_random_state_kept():
    class AlwaysDropout(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x.flatten(1)[:, :10], 0.5)

    images, model = torch.randn(16, 1, 28, 28), ref.build_model().eval()
    state = torch.get_rng_state()
    calls = differs_between_calls(AlwaysDropout().eval(), images, eval_mode=True)
    assert calls and calls.dropout_on
    assert not differs_between_calls(model, images, eval_mode=True)
    assert torch.equal(torch.get_rng_state(), state)


def test_graded_run_is_cached_per_function():
    calls = []

    def quick(train_set, time_budget_s):
        calls.append(len(train_set))
        return ref.build_model()

    run = checks.GradedRun(train_digits=600, val_digits=100)
    first = checks.graded_run(quick, run)
    assert checks.graded_run(quick, run) is first and calls == [500]
    assert first.error is None and 0.0 <= first.val_accuracy <= 1.0
    with pytest.raises(CheckError, match="is below 99.0%"):
        checks.check_held_out_99(quick, inputs=[run])


def test_an_interrupted_training_is_reported_not_raised():
    def interrupted(train_set, time_budget_s):
        raise KeyboardInterrupt  # what the kernel raises when the cell is stopped

    result = checks._train(interrupted, _tiny_set(), budget_s=10, limit_s=15, threads=1, seed=0)
    assert result.model is None and "was interrupted after" in str(result.error)


def test_cpu_seconds_counts_the_child_processes_the_grader_counts():
    import subprocess
    import sys

    start_cpu, start_own = checks.cpu_seconds(), time.process_time()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"],
                   check=True)
    assert checks.cpu_seconds() - start_cpu >= 0.35
    assert time.process_time() - start_own < 0.35, "the child's time is not this process's own"


def test_validation_estimate_states_the_interval_and_the_tiers():
    accuracy, low, high = checks.accuracy_interval(990, 1000)
    assert accuracy == 0.99 and 0.98 < low < 0.99 < high < 0.996
    assert checks.tier_outlook(990, 1000, 0.97) == "likely"
    assert checks.tier_outlook(990, 1000, 0.99) == "uncertain"
    assert checks.tier_outlook(60, 1000, 0.97) == "unlikely"
    assert "95% interval" in checks.validation_estimate(990, 1000)


def _solution_notebook():
    import nbformat

    from helpers.data import REPO_ROOT

    return nbformat.read(REPO_ROOT / "solutions" / "10_capstone" / "10_capstone.ipynb", as_version=4)


def test_every_cell_that_can_train_the_capstone_has_the_clock_limit_of_a_cpu_timed_cell():
    from coursetools.grading.autograder import CPU_TIMED, LONG_CELL_TIMEOUT_S, cell_timeout

    training = [c for c in _solution_notebook().cells if c.cell_type == "code" and any(
        name in c.source for name in ("check_within_budget", "graded_model", "check_build_and_train", "check_held_out"))]
    assert len(training) == 7
    for cell in training:
        assert CPU_TIMED in cell.metadata.get("tags", []), cell.source
        assert cell_timeout(cell, 120) == LONG_CELL_TIMEOUT_S
    # the clock allows the CPU limit even when a busy machine runs the training at a third of its speed
    assert LONG_CELL_TIMEOUT_S >= 3 * checks.TIME_BUDGET_S * checks.TOLERANCE + 60
    assert cell_timeout({"metadata": {}}, 120) == 120


def test_nbgrader_config_gives_cpu_timed_cells_their_clock_limit():
    from coursetools.grading import load_config
    from helpers.data import REPO_ROOT

    config = load_config(REPO_ROOT)
    timeout = config.Execute.timeout_func
    assert timeout({"metadata": {"tags": ["cpu-timed"]}}) == 600 and timeout({"metadata": {}}) == config.Execute.timeout


def test_progress_reports_points_only_the_autograder_can_grade():
    import nbformat

    from helpers import progress

    assert progress.AUTOGRADER_ONLY == checks.AUTOGRADER_ONLY
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell("def build_and_train(train_set, time_budget_s): ...")
    solution.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "ex_build_and_train", "locked": False}
    cells = [solution]
    for grade_id, points, text in (("ex_budget_tests", 1, "✔ trained\n"),
                                   ("ex_held_out_97_tests", 2, f"{checks.AUTOGRADER_ONLY} 97% likely\nmore\n"),
                                   ("ex_held_out_99_tests", 2, f"{checks.AUTOGRADER_ONLY} 99% uncertain\n")):
        cell = nbformat.v4.new_code_cell("...", outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": grade_id, "points": points,
                                     "locked": True}
        cells.append(cell)
    nb.cells = cells
    (result,) = progress.exercises("10_capstone", nb)
    assert result.status == progress.AUTOGRADER and result.points == 1 and result.max_points == 5
    assert "4 points graded only by the autograder" in result.message and "97% likely, 99% uncertain" in result.message
