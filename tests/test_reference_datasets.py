"""Lesson 03's answer key does what the lesson says, and its checks grade parts separately."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import TensorDataset

from helpers.checks import CheckError
from helpers.checks import datasets as checks
from helpers.reference import datasets as ref
from tests.wrong_answers import datasets as wrong


def test_points_dataset_converts_once_with_the_right_dtypes():
    dataset = ref.PointsDataset([[1, 2], [3, 4], [5, 6]], [0, 1, 0])
    assert len(dataset) == 3
    x, y = dataset[2]
    assert x.dtype == torch.float32 and x.tolist() == [5.0, 6.0]
    assert y.dtype == torch.int64 and y.item() == 0


@pytest.mark.parametrize("n,length,expected", [
    (5, 3, [1.0, 2.0, 3.0]), (3, 3, [1.0, 2.0, 3.0]), (2, 4, [1.0, 2.0, 0.0, 0.0]),
])
def test_fix_length_crops_the_start_and_pads_the_end(n, length, expected):
    assert ref.fix_length(torch.arange(1.0, n + 1), length).tolist() == expected


def test_fix_length_keeps_dtype():
    assert ref.fix_length(torch.ones(2, dtype=torch.float64), 5).dtype == torch.float64


def test_clip_dataset_ignores_other_files_and_sorts(tmp_path):
    np.save(tmp_path / "b_1.npy", np.arange(3.0))
    np.save(tmp_path / "a_2.npy", np.arange(6.0))
    (tmp_path / "notes.txt").write_text("not a clip")
    dataset = ref.ClipDataset(tmp_path, 4, ["b", "a"])
    assert len(dataset) == 2
    clip, label = dataset[0]
    assert clip.tolist() == [0.0, 1.0, 2.0, 3.0] and clip.dtype == torch.float32 and label == 1
    clip, label = dataset[1]
    assert clip.tolist() == [0.0, 1.0, 2.0, 0.0] and label == 0


def test_pad_collate_matches_pad_sequence():
    batch = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
    padded, lengths = ref.pad_collate(batch)
    assert torch.equal(padded, pad_sequence(batch, batch_first=True))
    assert lengths.tolist() == [3, 1, 2] and lengths.dtype == torch.int64


def test_collate_sequences_keeps_feature_dimensions():
    padded, lengths, labels = ref.collate_sequences([(torch.ones(2, 3), 1), (torch.ones(4, 3), 0)])
    assert padded.shape == (2, 4, 3) and lengths.tolist() == [2, 4] and labels.tolist() == [1, 0]


def test_mean_std_is_over_all_pixels_whatever_the_batch_size():
    images = torch.rand(23, 1, 5, 5, generator=torch.Generator().manual_seed(0))
    dataset = TensorDataset(images, torch.zeros(23))
    for batch_size in (1, 4, 100):
        mean, std = ref.mean_std(dataset, batch_size)
        assert mean == pytest.approx(images.double().mean().item(), abs=1e-12)
        assert std == pytest.approx(images.double().std(correction=0).item(), abs=1e-9)


def test_split_is_reproducible_and_sized_as_documented():
    dataset = TensorDataset(torch.arange(103))
    train, val = ref.split_train_val(dataset, 0.1, seed=7)
    again, _ = ref.split_train_val(dataset, 0.1, seed=7)
    assert len(val) == 10 and len(train) == 93
    assert list(train.indices) == list(again.indices)
    assert set(train.indices).isdisjoint(val.indices)


def test_make_loaders_pins_only_for_cuda():
    data = TensorDataset(torch.arange(10))
    assert not any(loader.pin_memory for loader in ref.make_loaders(data, data, 4, 0, torch.device("cpu")))
    assert all(loader.pin_memory for loader in ref.make_loaders(data, data, 4, 0, torch.device("cuda")))


# The graded cells split exercises into parts: a mistake in one part must not cost the other.
@pytest.mark.parametrize("check,answer,passing_part,failing_part", [
    (checks.check_fix_length, wrong.fix_length_pad_left, "crop", "pad"),
    (checks.check_fix_length, wrong.fix_length_keep_end, "pad", "crop"),
    (checks.check_pad_collate, wrong.pad_collate_left, "lengths", "padded"),
    (checks.check_pad_collate, wrong.pad_collate_padded_lengths, "padded", "lengths"),
    (checks.check_mean_std, wrong.mean_std_per_image, "mean", "std"),
    (checks.check_make_loaders, wrong.loaders_val_drop_last, "train", "val"),
    (checks.check_make_loaders, wrong.loaders_keep_last, "val", "train"),
    (checks.check_clip_dataset, wrong.ClipsByAge, "len", "items"),
    (checks.check_clip_dataset, wrong.ClipsKeepEnd, "len", "items"),
])
def test_parts_are_graded_separately(check, answer, passing_part, failing_part, capsys):
    check(answer, part=passing_part)
    assert "✔" in capsys.readouterr().out
    with pytest.raises(CheckError):
        check(answer, part=failing_part)


def test_clip_dataset_len_part_still_catches_len_mistakes():
    with pytest.raises(CheckError, match="counted every file"):
        checks.check_clip_dataset(wrong.ClipsCountEveryFile, part="len")
    with pytest.raises(CheckError, match="forgot to convert"):
        checks.check_clip_dataset(wrong.ClipsNumpy, part="len")


def test_checks_leave_the_global_random_state_alone():
    state = torch.get_rng_state()
    for check, answer in [(checks.check_split_train_val, wrong.split_global_seed),
                          (checks.check_make_loaders, wrong.loaders_global_seed)]:
        with pytest.raises(CheckError):
            check(answer)
        assert torch.equal(state, torch.get_rng_state())


def test_a_stub_is_reported_as_not_written():
    class Stub(torch.utils.data.Dataset):
        def __init__(self, *args):
            raise NotImplementedError()

    for check in (checks.check_points_dataset, checks.check_clip_dataset):
        with pytest.raises(CheckError, match="not written yet"):
            check(Stub)


def test_both_graded_parts_of_mean_std_hold_the_batch_rule():
    # the whole dataset in one batch breaks the memory rule of the method: each graded part says so
    from torch.utils.data import DataLoader

    def one_batch(dataset, batch_size):
        images, _ = next(iter(DataLoader(dataset, batch_size=len(dataset))))
        images = images.double()
        return images.mean().item(), images.std().item()

    for part in ("mean", "std"):
        with pytest.raises(CheckError, match="pass the batch_size argument on"):
            checks.check_mean_std(one_batch, part=part)
        checks.check_mean_std(ref.mean_std, part=part)
