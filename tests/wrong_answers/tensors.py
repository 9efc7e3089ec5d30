"""Lesson 01 Tensors: the reference passes, plausible wrong answers fail by name."""

import torch

from helpers.checks import tensors as checks
from helpers.reference import tensors as ref
from tests.wrong_answers import Accept, Reject


def starter_float_zeros():
    return {**ref.make_starter_tensors(), "zeros": torch.zeros(2, 3)}


def starter_step_not_count():
    return {**ref.make_starter_tensors(), "grid": torch.arange(0, 1.25, 0.25)[:4]}


def starter_missing_key():
    tensors = ref.make_starter_tensors()
    del tensors["sevens"]
    return tensors


def share_by_copy(array):
    return torch.tensor(array)


def share_as_float32(array):
    return torch.from_numpy(array).float()


def channels_by_reshape(images):
    n, h, w, c = images.shape
    return images.reshape(n, c, h, w)


def channels_by_transpose(images):
    return images.transpose(1, 3)


def flatten_with_view(x):
    return x.view(x.shape[0], -1)


def flatten_everything(x):
    return x.flatten()


def center_rows(x):
    return x - x.mean(dim=1, keepdim=True)


def center_global(x):
    return x - x.mean()


def dot_transposed(a, b):
    return b @ a.T


def dot_elementwise(a, b):
    return a * b


def positive_with_zeros(x):
    return x[x >= 0]


def positive_keep_shape(x):
    return x * (x > 0)


def relu_mask(x):
    return (x > 0).float()


def relu_selected(x):
    return x[x > 0]


def pick_all_pairs(scores, labels):
    return scores[:, labels]


def pick_unsqueezed(scores, labels):
    return scores.gather(1, labels.unsqueeze(1))


def one_hot_int64(labels, num_classes):
    return torch.nn.functional.one_hot(labels, num_classes)


def one_hot_from_max(labels, num_classes):
    return torch.eye(int(labels.max()) + 1)[labels]


def normalize_by_sum(x):
    return x / x.sum(dim=1, keepdim=True)


def normalize_whole(x):
    return x / x.norm()


def batch_to_in_place(batch, device):
    for value in batch.values():
        if isinstance(value, torch.Tensor):
            value.to(device)  # the mistake: the moved copy is thrown away
    return batch


def batch_to_tensors_only(batch, device):
    return {key: torch.as_tensor(value).to(device) for key, value in batch.items() if isinstance(value, torch.Tensor)}


# ---------------------------------------------------------------- issue 12: whole classes of mistakes


def starter_default_float64():
    torch.set_default_dtype(torch.float64)  # the mistake: changes every later float tensor in the notebook
    return {**ref.make_starter_tensors(), "zeros": torch.zeros(2, 3)}


def center_in_place(x):
    x -= x.mean(dim=0, keepdim=True)
    return x


def batch_to_mutating(batch, device):
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            batch[key] = value.to(device)
    return batch


def batch_to_cuda(batch, device):
    return {key: value.cuda() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


def relu_float_literal(x):
    return torch.where(x > 0, x, 0.0)


def pick_squeeze_all(scores, labels):
    return scores.gather(1, labels.unsqueeze(1)).squeeze()


def positive_sorted(x):
    return x[x > 0].sort().values


def normalize_without_keepdim(x):
    return x / torch.linalg.vector_norm(x, dim=1)


def one_hot_transposed(labels, num_classes):
    return torch.eye(num_classes)[labels].T


def dot_mean(a, b):
    return a @ b.T / a.shape[1]


NEW_CASES = [
    Reject(checks.check_make_starter_tensors, starter_default_float64, "changed the default dtype"),
    Reject(checks.check_center_columns, center_in_place, "changed its argument 1"),
    Reject(checks.check_batch_to, batch_to_mutating, "build and return a new dict"),
    Reject(checks.check_batch_to, batch_to_cuda, ".cuda() always moves to the GPU"),
    Reject(checks.check_relu, relu_float_literal, "turned it into floats"),
    Reject(checks.check_pick_scores, pick_squeeze_all, "batch of one"),
    Reject(checks.check_positive_values, positive_sorted, "in the wrong order"),
    Reject(checks.check_normalize_rows, normalize_without_keepdim, "without keepdim=True"),
    Reject(checks.check_one_hot, one_hot_transposed, "transpose"),
    Reject(checks.check_pairwise_dot, dot_mean, "a mean where a sum is wanted"),
]

CASES = [
    Accept(checks.check_make_starter_tensors, ref.make_starter_tensors),
    Reject(checks.check_make_starter_tensors, starter_float_zeros, "dtype=torch.float64"),
    Reject(checks.check_make_starter_tensors, starter_step_not_count, "number of points"),
    Reject(checks.check_make_starter_tensors, starter_missing_key, "missing the key(s) ['sevens']"),
    Accept(checks.check_share_numpy, ref.share_numpy),
    Reject(checks.check_share_numpy, share_by_copy, "your tensor is a copy"),
    Reject(checks.check_share_numpy, share_as_float32, "you changed the dtype"),
    Accept(checks.check_to_channels_first, ref.to_channels_first),
    Reject(checks.check_to_channels_first, channels_by_reshape, "reshaped (or used view) instead of permuting"),
    Reject(checks.check_to_channels_first, channels_by_transpose, "height and width are swapped"),
    Accept(checks.check_flatten_batch, ref.flatten_batch),
    Reject(checks.check_flatten_batch, flatten_with_view, "view() needs a contiguous tensor"),
    Reject(checks.check_flatten_batch, flatten_everything, "flattened the batch dimension too"),
    Accept(checks.check_center_columns, ref.center_columns),
    Reject(checks.check_center_columns, center_rows, "each row's mean"),
    Reject(checks.check_center_columns, center_global, "mean of the whole tensor"),
    Accept(checks.check_pairwise_dot, ref.pairwise_dot),
    Reject(checks.check_pairwise_dot, dot_transposed, "your result is transposed"),
    Reject(checks.check_pairwise_dot, dot_elementwise, "raised RuntimeError"),
    Accept(checks.check_positive_values, ref.positive_values),
    Reject(checks.check_positive_values, positive_with_zeros, "kept the zeros"),
    Reject(checks.check_positive_values, positive_keep_shape, "zeroed the negatives but kept the shape"),
    Accept(checks.check_relu, ref.relu),
    Reject(checks.check_relu, relu_mask, "not the values"),
    Reject(checks.check_relu, relu_selected, "returned only the positive values"),
    Accept(checks.check_pick_scores, ref.pick_scores),
    Reject(checks.check_pick_scores, pick_all_pairs, "picks every label for every row"),
    Reject(checks.check_pick_scores, pick_unsqueezed, "squeeze(1)"),
    Accept(checks.check_one_hot, ref.one_hot),
    Reject(checks.check_one_hot, one_hot_int64, "dtype is int64"),
    Reject(checks.check_one_hot, one_hot_from_max, "largest label + 1"),
    Accept(checks.check_normalize_rows, ref.normalize_rows),
    Reject(checks.check_normalize_rows, normalize_by_sum, "each row's sum"),
    Reject(checks.check_normalize_rows, normalize_whole, "norm of the whole tensor"),
    Accept(checks.check_batch_to, ref.batch_to),
    Reject(checks.check_batch_to, batch_to_in_place, "returns a new tensor"),
    Reject(checks.check_batch_to, batch_to_tensors_only, "returned keys"),
] + NEW_CASES
