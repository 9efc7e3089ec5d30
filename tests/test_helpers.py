"""Unit tests of the helpers package: data, the check framework, timing, authoring, grading."""

from __future__ import annotations

import gzip
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from coursetools import authoring, grading
from helpers import data
from helpers.checks import CheckError, Mistake, call, expect_close, expect_tensor, same_tensor
from helpers.timing import time_call


# --- data -----------------------------------------------------------------------------------

def write_gz_idx(path: Path, array: np.ndarray) -> None:
    data.write_idx(path.with_suffix(""), array)
    path.write_bytes(gzip.compress(path.with_suffix("").read_bytes()))
    path.with_suffix("").unlink()


@pytest.fixture
def tiny_mnist_source(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    write_gz_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (10, 28, 28), dtype=np.uint8))
    write_gz_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(10, dtype=np.uint8))
    return tmp_path


def test_offline_fixture_is_read_by_torchvision(tiny_mnist_source: Path, tmp_path: Path, monkeypatch):
    root = data.build_offline_mnist(tiny_mnist_source, tmp_path / "root", n_train=7)
    monkeypatch.setenv("COURSE_DATA", str(root))
    train, test = data.mnist_dataset(train=True), data.mnist_dataset(train=False)
    assert (len(train), len(test)) == (7, 3)
    assert [test[i][1] for i in range(3)] == [7, 8, 9]
    source_images = data.read_idx(tiny_mnist_source / "t10k-images-idx3-ubyte.gz")
    assert np.array_equal(np.asarray(train[0][0]), source_images[0])


def test_real_fixture_has_the_expected_split():
    root = Path(__import__("os").environ["COURSE_DATA"])
    assert data.read_idx(root / "MNIST/raw/train-labels-idx1-ubyte").shape == (8000,)
    assert data.read_idx(root / "MNIST/raw/t10k-images-idx3-ubyte").shape == (2000, 28, 28)


def test_fixture_builder_names_missing_files(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.gz"):
        data.build_offline_mnist(tmp_path, tmp_path / "out")
    assert data.main(["build-offline", "--source", str(tmp_path), "--dest", str(tmp_path / "out")]) == 1


def test_read_idx_rejects_other_files(tmp_path: Path):
    bad = tmp_path / "not-idx"
    bad.write_bytes(b"\x12\x34\x56\x78rest")
    with pytest.raises(ValueError, match="not an MNIST IDX file"):
        data.read_idx(bad)


def test_data_root_follows_environment(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA", str(tmp_path / "elsewhere"))
    assert data.data_root() == tmp_path / "elsewhere" and data.data_root().is_dir()
    monkeypatch.delenv("COURSE_DATA")
    assert data.data_root() == data.REPO_ROOT / "data"


def test_missing_mnist_without_network_explains_what_to_do(tmp_path: Path, monkeypatch):
    from torchvision import datasets

    def no_network(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz")

    monkeypatch.setattr(datasets.MNIST, "download", no_network)
    monkeypatch.setenv("COURSE_DATA", str(tmp_path))
    with pytest.raises(RuntimeError, match="COURSE_DATA"):
        data.mnist_dataset(train=True)


# --- check framework --------------------------------------------------------------------------

def test_call_explains_stub_and_crash():
    def stub(x):
        raise NotImplementedError()

    def crash(x):
        return x @ x

    with pytest.raises(CheckError, match="not written yet"):
        call(stub, 1)
    with pytest.raises(CheckError, match=r"crash\(tensor\(shape=\[4, 5\].*raised RuntimeError"):
        call(crash, torch.zeros(4, 5))  # large: by shape
    with pytest.raises(CheckError, match=r"crash\(tensor\(\[\[0\., 0\., 0\.\], \[0\., 0\., 0\.\]\], dtype=torch\.float32\)\) "
                                         r"raised RuntimeError"):
        call(crash, torch.zeros(2, 3))  # small: whole
    with pytest.raises(CheckError, match="pass the function itself"):
        call(42)


def test_expect_tensor_names_each_kind_of_difference():
    want = torch.arange(6.0).reshape(2, 3)
    with pytest.raises(CheckError, match="should return a tensor"):
        expect_tensor([0, 1], want, what="f(x)")
    with pytest.raises(CheckError, match=r"should have shape \[2, 3\], but yours has shape \[3, 2\]"):
        expect_tensor(want.T, want, what="f(x)")
    with pytest.raises(CheckError, match="dtype torch.float32, but yours has dtype torch.int64"):
        expect_tensor(want.long(), want, what="f(x)")
    with pytest.raises(CheckError, match="wrong values: at flat index 4"):
        expect_tensor(want + torch.tensor([0, 0, 0, 0, 1.0, 0]).reshape(2, 3), want, what="f(x)")
    expect_tensor(want + 1e-7, want, what="f(x)")  # float noise is not a mistake


def test_known_mistake_wins_over_generic_message():
    want = torch.tensor([1.0, 2.0])
    mistakes = [Mistake("you doubled it", lambda: want * 2), Mistake("never", matches=lambda got: False)]
    with pytest.raises(CheckError, match="you doubled it"):
        expect_tensor(want * 2, want, what="f(x)", mistakes=mistakes)
    broken = Mistake("crashes", lambda: 1 / 0)
    assert not broken.explains(want)


def test_expect_close_numbers():
    expect_close(4.5, 4.5, what="grad")
    expect_close(torch.tensor(4.5), 4.5, what="grad", number_or_tensor=True)
    with pytest.raises(CheckError, match="should be a Python number"):
        expect_close(torch.tensor(4.5), 4.5, what="grad")
    with pytest.raises(CheckError, match="should be 4.5, but yours is 3"):
        expect_close(3.0, 4.5, what="grad")
    with pytest.raises(CheckError, match="should be a number"):
        expect_close("4.5", 4.5, what="grad")


def test_same_tensor_detects_shared_memory():
    base = torch.zeros(4)
    assert same_tensor(base, base.view(2, 2)) and not same_tensor(base, base.clone())


# --- timing -----------------------------------------------------------------------------------

def test_time_call_warms_up_then_times():
    calls = []
    timing = time_call(lambda: calls.append(1), warmup=2, repeat=3)
    assert len(calls) == 5 and timing.runs == 3 and 0 <= timing.best <= timing.median
    with pytest.raises(ValueError):
        time_call(lambda: None, repeat=0)


# --- authoring ----------------------------------------------------------------------------------

@pytest.mark.parametrize("source", authoring.lesson_sources(), ids=lambda p: p.parent.name)
def test_stored_notebook_matches_its_source(source: Path):
    problem = authoring.out_of_sync(source)
    assert problem is None, f"{problem}: run `make solutions LESSONS={source.parent.name}`"


def test_markers_become_nbgrader_metadata(tmp_path: Path):
    source = tmp_path / "x.pct.py"
    source.write_text('# %% locked="setup"\nimport torch\n\n# %% solution="ex"\nx = 1\n\n'
                      '# %% graded="ex_tests" points=3\nassert x\n')
    cells = authoring.source_to_notebook(source).cells
    setup, solution, graded = (c.metadata["nbgrader"] for c in cells)
    assert setup["locked"] and not setup["grade"] and not setup["solution"]
    assert solution["solution"] and not solution["locked"]
    assert graded["grade"] and graded["points"] == 3 and graded["locked"]


def test_authoring_rejects_ambiguous_sources(tmp_path: Path):
    source = tmp_path / "x.pct.py"
    source.write_text('# %% solution="ex"\nx = 1\n\n# %% check="ex"\nx\n')
    with pytest.raises(ValueError, match="used twice"):
        authoring.source_to_notebook(source)
    source.write_text('# %% graded="ex_tests"\nassert True\n')
    with pytest.raises(ValueError, match="needs points"):
        authoring.source_to_notebook(source)


# --- grading ------------------------------------------------------------------------------------

def notebook_with_error(ename: str, evalue: str, locked: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x")
    if locked:
        cell.metadata["nbgrader"] = {"locked": True, "grade_id": "setup", "solution": False, "grade": False}
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])]
    return nbformat.v4.new_notebook(cells=[cell])


def test_classify_autograded_notebooks():
    assert grading.classify(None)[0] == "kernel died"
    missing = ("ModuleNotFoundError", "No module named 'helpers'")
    assert grading.classify(notebook_with_error(*missing, locked=True))[0] == "helpers missing"
    # the same error in the learner's own cell (a typo in their import) is their mistake, not the environment's
    assert grading.classify(notebook_with_error(*missing))[0] == "graded"
    assert grading.classify(notebook_with_error("CellTimeoutError", ""))[0] == "timed out"
    assert grading.classify(notebook_with_error("CheckError", "wrong values"))[0] == "graded"
    assert grading.classify(notebook_with_error("ModuleNotFoundError", "No module named 'pandas'"))[0] == "graded"
