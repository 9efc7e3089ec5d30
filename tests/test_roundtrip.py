"""The nbgrader round trip on a temporary copy of the course.

For every lesson: the release regenerates to exactly what is committed, the
solutions score full marks, the blank release scores 0, and a partially wrong
submission scores exactly its expected total. Then the failure modes nbgrader
hides: a dead kernel, an infinite loop, and a broken ``helpers`` import.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from coursetools import grading
from coursetools.authoring import comparable
from helpers.data import REPO_ROOT
from helpers.starters import is_untouched_starter

LESSONS = grading.lessons(REPO_ROOT)
pytestmark = pytest.mark.slow


def solution_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def submit(course: Path, student: str, lesson: str, replacements: dict[str, str] | None = None, blank: bool = False) -> None:
    """Write a submission: the release with every solution cell filled in from
    solutions/ (unless ``blank``), except the cells in ``replacements``."""
    release = nbformat.read(course / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    answers = solution_cells(nbformat.read(course / "solutions" / lesson / f"{lesson}.ipynb", as_version=4))
    replacements = replacements or {}
    unknown = set(replacements) - set(answers)
    assert not unknown, f"WRONG_CELLS names cells that are not solution cells: {unknown}"
    for grade_id, cell in solution_cells(release).items():
        if grade_id in replacements:
            cell.source = replacements[grade_id]
        elif not blank:
            cell.source = answers[grade_id].source
    folder = course / "grading" / "submitted" / student / lesson
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(release, folder / f"{lesson}.ipynb")


@pytest.fixture(scope="module")
def released(course_copy: Path) -> Path:
    shutil.rmtree(course_copy / "notebooks")
    grading.release(course_copy)
    return course_copy


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_matches_committed_notebooks(released: Path, lesson: str):
    fresh = released / "notebooks" / lesson / f"{lesson}.ipynb"
    committed = REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    assert committed.exists(), f"{committed} is missing: run `make release`"
    assert comparable(nbformat.read(fresh, as_version=4)) == comparable(nbformat.read(committed, as_version=4)), \
        f"notebooks/{lesson} is stale: run `make release` and commit"


def test_every_lesson_is_released():
    released = sorted(p.parent.name for p in (REPO_ROOT / "notebooks").glob("*/*.ipynb"))
    assert released == LESSONS


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_holds_no_solutions_or_hidden_tests(lesson: str):
    nb = nbformat.read(REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    for cell in nb.cells:
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in cell.source, f"{lesson}: release contains '{marker}'"
        assert not cell.get("outputs"), f"{lesson}: release notebook carries outputs"
    answers = solution_cells(nbformat.read(REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4))
    for grade_id, cell in solution_cells(nb).items():
        assert "raise NotImplementedError()" in cell.source or is_untouched_starter(cell), \
            f"{lesson}/{grade_id}: neither the stub nor its starter (the program to fix)"
        assert cell.source != answers[grade_id].source


# The graded cells the grader runs again in its own process (coursetools.grading.verify): those whose check the
# answer key passes with its functions called in another process. A cell that leaves the list (a check changed to
# need what only the kernel has) should be a decision, not an accident.
VERIFIED_IN_GRADER = {
    "00_start_here": ["ex_to_fahrenheit_more_tests", "ex_to_fahrenheit_tests"],
    "01_tensors": sorted(["ex_starter_tensors_tests", "ex_channels_first_tests", "ex_flatten_batch_tests",
                          "ex_masks_positive_tests", "ex_masks_relu_tests", "ex_pick_scores_tests",
                          "ex_center_columns_tests", "ex_normalize_rows_tests", "ex_pairwise_dot_tests",
                          "ex_one_hot_tests", "ex_batch_to_tests", "ex_class_means_tests", "ex_class_means_edge_tests"]),
    "02_autograd": sorted(["ex_mean_square_grad_tests", "ex_per_batch_grads_tests", "ex_per_batch_grads_leftover_tests",
                           "ex_fit_line_by_hand_tests", "ex_fit_line_with_sgd_tests", "ex_loss_log_tests",
                           "ex_softplus_backward_tests"]),
    "03_datasets": sorted(["ex_fix_length_crop_tests", "ex_fix_length_pad_tests", "ex_pad_collate_padded_tests",
                           "ex_pad_collate_lengths_tests", "ex_collate_sequences_tests"]),
    "04_models": sorted(["ex_count_parameters_tests", "ex_label_smoothing_mean_tests",
                         "ex_label_smoothing_reduction_tests", "ex_sequential_tests", "ex_build_classifier_tests"]),
    "05_training": sorted(["ex_class_targets_tests", "ex_accuracy_tests"]),
    "07_training_faster": ["ex_scaled_lr_tests"],
    "09_debugging": sorted(["ex_loss_from_table_tests", "ex_fit_tests", "ex_accuracy_tests"]),
    "10_capstone": sorted(["ex_shift_tests", "ex_model_tests"]),
}


@pytest.mark.parametrize("lesson", LESSONS)
def test_roundtrip_scores(released: Path, lesson: str):
    spec = importlib.import_module(f"tests.partial_submissions.lesson_{lesson}")
    submit(released, "full", lesson)
    submit(released, "blank", lesson, blank=True)
    submit(released, "partial", lesson, spec.WRONG_CELLS)
    results = {r.student: r for r in grading.autograde(lesson, released, ["full", "blank", "partial"])}
    assert all(r.status == "graded" for r in results.values()), grading.format_table(list(results.values()))
    full = results["full"]
    assert full.max_score > 0 and full.max_score == round(full.max_score)
    assert full.score == full.max_score, f"solutions scored {full.score}/{full.max_score}"
    # the graded cells whose checks the grader can run in its own process were run there, and passed
    assert sorted(full.verified) == VERIFIED_IN_GRADER.get(lesson, []), full.verified
    assert results["blank"].score == 0
    assert results["partial"].score == spec.EXPECTED_SCORE


OWN_CLASS_CLASSIFIER = """\
class Classifier(nn.Module):
    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.MaxPool2d(4))
        self.head = nn.Linear(8 * 7 * 7, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def build_classifier(in_channels: int, num_classes: int) -> nn.Module:
    return Classifier(in_channels, num_classes)
"""


def test_a_model_of_the_learners_own_class_keeps_full_marks_and_is_only_noted(released: Path):
    """The grader cannot load a model of the notebook's own class: the kernel's run alone judges that cell, and the
    submission is graded, in full, with a note, never flagged."""
    lesson = "04_models"
    submit(released, "own_class", lesson, {"ex_build_classifier": OWN_CLASS_CLASSIFIER})
    result = grading.autograde(lesson, released, ["own_class"])[0]
    table = grading.format_table([result])
    assert result.status == "graded" and result.score == result.max_score, table
    assert "ex_build_classifier_tests" not in result.verified and "ex_sequential_tests" in result.verified, table
    assert any(r.startswith("judged by the kernel's run alone: ex_build_classifier_tests") and "(Classifier)" in r
               for r in result.reasons), result.reasons


@pytest.fixture(scope="module")
def failure_course(tmp_path_factory) -> Path:
    """A separate copy (its own gradebook) for the failure-mode tests, on lesson 00."""
    root = grading.copy_course(tmp_path_factory.mktemp("failures"), lessons=["00_start_here"])
    grading.release(root, ["00_start_here"])
    return root


def test_dead_kernel_and_infinite_loop_are_reported_not_zeroed(failure_course: Path):
    lesson = "00_start_here"
    submit(failure_course, "crasher", lesson, {"ex_to_fahrenheit": "import os\nos._exit(1)\n"})
    submit(failure_course, "looper", lesson, {"ex_to_fahrenheit": "while True:\n    pass\n"})
    submit(failure_course, "zero", lesson, blank=True)
    submit(failure_course, "mangled", lesson)
    mangled = failure_course / "grading" / "submitted" / "mangled" / lesson / f"{lesson}.ipynb"
    mangled.write_text(mangled.read_text()[:500])  # a truncated upload
    quick = Config()
    quick.Execute.timeout = 20  # long enough for importing torch on a busy machine
    results = {r.student: r for r in grading.autograde(lesson, failure_course, overrides=quick)}
    table = grading.format_table(list(results.values()))
    assert results["crasher"].status == "kernel died" and results["crasher"].score is None, table
    assert results["looper"].status == "timed out", table
    assert results["zero"].status == "graded" and results["zero"].score == 0, table
    assert results["mangled"].status == "unreadable" and "not a valid notebook" in results["mangled"].detail, table
    assert mangled.read_text().startswith("{"), "grading must not delete or rewrite the learner's file"
    assert "kernel died" in table and "timed out" in table


def test_the_graders_environment_cannot_break_the_kernels_helpers(failure_course: Path, tmp_path: Path, monkeypatch):
    """A broken `helpers` first on the grader's PYTHONPATH (or an installed copy of another checkout) does not reach
    the kernel: it imports the helpers of the course being graded, and correct work keeps its points."""
    fake = tmp_path / "site" / "helpers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('helpers is broken in this environment')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    submit(failure_course, "anyone", "00_start_here")
    result = grading.autograde("00_start_here", failure_course, ["anyone"])[0]
    assert result.status == "graded" and result.score == result.max_score == 2, grading.format_table([result])


def test_broken_helpers_import_fails_loudly(failure_course: Path, monkeypatch):
    """Where `helpers` fails to import in the locked setup cell and in a clean Python too, grading stops."""
    monkeypatch.setattr(grading, "classify", lambda nb: ("helpers missing", "ImportError: helpers is broken"))
    monkeypatch.setattr(grading, "_imports_cleanly", lambda nb: False)
    submit(failure_course, "someone", "00_start_here")
    with pytest.raises(grading.GradingError, match="helpers` failed to import"):
        grading.autograde("00_start_here", failure_course, ["someone"])


def test_grade_command_exit_codes(failure_course: Path, monkeypatch, capsys):
    """`make grade` exits 1 and says so when a submission needs a person."""
    monkeypatch.chdir(failure_course)
    code = grading.main(["autograde", "00_start_here", "--timeout", "20"])
    out = capsys.readouterr().out
    assert code == 1 and "need a person" in out
