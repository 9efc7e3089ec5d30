"""Lesson 01 Tensors: the reference passes, plausible wrong answers fail by name."""

import numpy as np
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


def starter_extra_key():
    return {**ref.make_starter_tensors(), "twos": torch.full((2,), 2)}


def share_contiguous_copy(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def positive_positions(x):
    return torch.nonzero(x.flatten() > 0).flatten()


def pick_rebuilt_from_items(scores, labels):
    return torch.tensor([scores[i, int(j)].item() for i, j in enumerate(labels)])


def center_by_columns_count(x):
    return x - x.sum(0) / x.shape[1]


def center_standardised(x):
    return (x - x.mean(0)) / x.std(0)


def normalize_by_square(x):
    return x / x.pow(2).sum(1, keepdim=True)


def batch_to_tensors_everything(batch, device):
    return {key: torch.as_tensor(value, device=device) if not isinstance(value, str) and value is not None
            and not isinstance(value, list) else value for key, value in batch.items()}


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


def relu_float_mask(x):
    return x * (x > 0).float()


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
    Reject(checks.check_center_columns, center_in_place, "its values were overwritten"),
    Reject(checks.check_batch_to, batch_to_mutating, "build and return a new dict"),
    Reject(checks.check_batch_to, batch_to_cuda, ".cuda() always moves to the GPU"),
    Reject(checks.check_relu, relu_float_literal, "turned it into floats"),
    Reject(checks.check_relu, relu_float_mask, "promotes the whole result"),
    Reject(checks.check_pick_scores, pick_squeeze_all, "batch of one"),
    Reject(checks.check_positive_values, positive_sorted, "in the wrong order"),
    Reject(checks.check_normalize_rows, normalize_without_keepdim, "without keepdim=True"),
    Reject(checks.check_one_hot, one_hot_transposed, "transpose"),
    Reject(checks.check_pairwise_dot, dot_mean, "a mean where a sum is wanted"),
]

CASES = [
    Accept(checks.check_make_starter_tensors, ref.make_starter_tensors),
    Reject(checks.check_make_starter_tensors, starter_float_zeros, "dtype=torch.float64"),
    Reject(checks.check_make_starter_tensors, starter_step_not_count, "arange leaves its end out"),
    Reject(checks.check_make_starter_tensors, starter_missing_key, "missing the key(s) ['sevens']"),
    Accept(checks.check_share_numpy, ref.share_numpy),
    Reject(checks.check_share_numpy, share_by_copy, "your tensor is a copy"),
    Reject(checks.check_share_numpy, share_contiguous_copy, "not contiguous): after the call"),
    Reject(checks.check_make_starter_tensors, starter_extra_key, "['twos'] should not be there"),
    Reject(checks.check_positive_values, positive_positions, "positions (indices) into the input"),
    Reject(checks.check_pick_scores, pick_rebuilt_from_items, "should have dtype torch.float64"),
    Reject(checks.check_center_columns, center_by_columns_count, "divided each column's sum by the number of columns D"),
    Reject(checks.check_center_columns, center_standardised, "standard deviation"),
    Reject(checks.check_normalize_rows, normalize_by_square, "squared length"),
    Reject(checks.check_batch_to, batch_to_tensors_everything, "only tensors move"),
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


# ---------------------------------------------------------------- correct answers written differently (issue 18)


def starter_other_calls():
    return {
        "zeros": torch.zeros((2, 3)).double(),
        "identity": torch.eye(3, dtype=torch.float32),
        "evens": torch.tensor([0, 2, 4, 6, 8]),
        "grid": torch.linspace(0.0, 1.0, 5),
        "sevens": torch.ones(2, 2, dtype=torch.int32) * 7,
    }


def starter_printing():
    tensors = {"sevens": torch.full((2, 2), 7).to(torch.int32), "grid": torch.arange(5) / 4,
               "evens": torch.arange(5) * 2, "identity": torch.diag(torch.ones(3)),
               "zeros": torch.zeros(2, 3, dtype=torch.double)}
    print({key: value.dtype for key, value in tensors.items()})
    return tensors


def starter_by_loops():
    identity = torch.zeros(3, 3)
    for i in range(3):
        identity[i, i] = 1.0
    return {"zeros": torch.tensor([[0.0] * 3] * 2, dtype=torch.float64), "identity": identity,
            "evens": torch.tensor([n for n in range(10) if n % 2 == 0]),
            "grid": torch.tensor([i / 4 for i in range(5)]), "sevens": torch.full((2, 2), 7, dtype=torch.int32)}


def share_as_tensor(array):
    return torch.as_tensor(array)


def share_asarray(array):
    return torch.asarray(array)


def share_keyword(array):
    tensor = torch.from_numpy(array)
    print("sharing", tensor.shape)
    return tensor


def channels_movedim(images):
    return images.movedim(3, 1)


def channels_two_transposes(images):
    return images.transpose(1, 3).transpose(2, 3)


def channels_stacked(images):
    return torch.stack([images[..., c] for c in range(images.shape[3])], dim=1)


def channels_function(images):
    return torch.permute(images, dims=(0, 3, 1, 2)).contiguous()


def flatten_reshape(x):
    return x.reshape(x.shape[0], -1)


def flatten_contiguous_view(x):
    return x.contiguous().view(len(x), -1)


def flatten_function(x):
    return torch.flatten(x, 1)


def flatten_rows(x):
    return torch.stack([row.reshape(-1) for row in x])


def center_broadcast(x):
    return x - x.mean(0)


def center_sum(x):
    return x - x.sum(dim=0, keepdim=True) / x.shape[0]


def center_loop(x):
    return torch.stack([x[:, j] - x[:, j].mean() for j in range(x.shape[1])], dim=1)


def dot_einsum(a, b):
    return torch.einsum("nd,md->nm", a, b)


def dot_broadcast(a, b):
    return (a[:, None, :] * b[None, :, :]).sum(dim=-1)


def dot_mm(a, b):
    return torch.mm(a, b.t())


def dot_loop(a, b):
    return torch.stack([torch.stack([row_a @ row_b for row_b in b]) for row_a in a])


def positive_masked_select(x):
    return torch.masked_select(x, x > 0)


def positive_flattened(x):
    flat = x.flatten()
    return flat[flat.gt(0)]


def positive_nonzero(x):
    flat = x.reshape(-1)
    return flat[torch.nonzero(flat > 0).squeeze(1)]


def relu_clamp(x):
    return x.clamp(min=0)


def relu_builtin(x):
    return torch.relu(x)


def relu_where_int(x):
    return torch.where(x > 0, x, 0)


def relu_times_mask(x):
    return x * (x > 0)


def relu_plus_abs_float(x):
    return (x + x.abs()) / 2 if x.is_floating_point() else (x + x.abs()) // 2


def relu_masked_fill(x):
    return x.masked_fill(x <= 0, 0)


def relu_maximum(x):
    return torch.maximum(x, torch.zeros_like(x))


def flatten_keeps_last(x):
    return x.reshape(-1, x.shape[-1])  # merges the wrong dimensions: keeps the last one, not the batch


def means_unsqueezes_labels(features, labels, num_classes):
    labels.unsqueeze_(1)  # the caller's labels are now [N, 1]
    members = (labels == torch.arange(num_classes, device=labels.device)).to(features.dtype)
    return (members.T @ features) / members.sum(dim=0).clamp(min=1)[:, None]


def means_round_trip_cpu(features, labels, num_classes):
    f, l = features.cpu(), labels.cpu()  # computes on the CPU, then moves the result back
    one_hot = torch.nn.functional.one_hot(l, num_classes).to(f.dtype)
    return ((one_hot.T @ f) / one_hot.sum(0).clamp(min=1)[:, None]).to(features.device)


def dot_no_transpose(a, b):
    return a @ b


def pick_arange(scores, labels):
    return scores[torch.arange(len(labels)), labels]


def pick_loop(scores, labels):
    return torch.stack([scores[i, label] for i, label in enumerate(labels)])


def pick_take_along(scores, labels):
    return torch.take_along_dim(scores, labels[:, None], dim=1)[:, 0]


def pick_masked_sum(scores, labels):
    mask = torch.nn.functional.one_hot(labels, scores.shape[1]).bool()
    return scores[mask]


def one_hot_functional_float(labels, num_classes):
    return torch.nn.functional.one_hot(labels, num_classes).float()


def one_hot_scatter(labels, num_classes):
    return torch.zeros(len(labels), num_classes).scatter_(1, labels[:, None], 1.0)


def one_hot_compare(labels, num_classes):
    return (labels[:, None] == torch.arange(num_classes)).to(torch.float32)


def normalize_functional(x):
    return torch.nn.functional.normalize(x, dim=1)


def normalize_norm_method(x):
    return x / x.norm(dim=1, keepdim=True)


def normalize_by_hand(x):
    return x / (x ** 2).sum(dim=1).sqrt()[:, None]


def batch_to_loop(batch, device):
    moved = {}
    for key, value in batch.items():
        moved[key] = value.to(device=device) if torch.is_tensor(value) else value
    return moved


def batch_to_copy_then_replace(batch, device):
    moved = dict(batch)
    for key, value in moved.items():
        if isinstance(value, torch.Tensor):
            moved[key] = value.to(device, non_blocking=True)
    print("moved", len(moved), "values")
    return moved


def batch_to_positional(batch, device):
    return dict((k, torch.Tensor.to(v, device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items())


CASES += [
    Accept(checks.check_make_starter_tensors, starter_other_calls),
    Accept(checks.check_make_starter_tensors, starter_printing),
    Accept(checks.check_make_starter_tensors, starter_by_loops),
    Accept(checks.check_share_numpy, share_as_tensor),
    Accept(checks.check_share_numpy, share_asarray),
    Accept(checks.check_share_numpy, share_keyword),
    Accept(checks.check_to_channels_first, channels_movedim),
    Accept(checks.check_to_channels_first, channels_two_transposes),
    Accept(checks.check_to_channels_first, channels_stacked),
    Accept(checks.check_to_channels_first, channels_function),
    Accept(checks.check_flatten_batch, flatten_reshape),
    Accept(checks.check_flatten_batch, flatten_contiguous_view),
    Accept(checks.check_flatten_batch, flatten_function),
    Accept(checks.check_flatten_batch, flatten_rows),
    Accept(checks.check_center_columns, center_broadcast),
    Accept(checks.check_center_columns, center_sum),
    Accept(checks.check_center_columns, center_loop),
    Accept(checks.check_pairwise_dot, dot_einsum),
    Accept(checks.check_pairwise_dot, dot_broadcast),
    Accept(checks.check_pairwise_dot, dot_mm),
    Accept(checks.check_pairwise_dot, dot_loop),
    Accept(checks.check_positive_values, positive_masked_select),
    Accept(checks.check_positive_values, positive_flattened),
    Accept(checks.check_positive_values, positive_nonzero),
    Accept(checks.check_relu, relu_clamp),
    Accept(checks.check_relu, relu_builtin),
    Accept(checks.check_relu, relu_where_int),
    # "0 elsewhere, for every value, inf and -inf included": -inf * 0 is nan
    Reject(checks.check_relu, relu_times_mask, "where x is -inf your result is nan"),
    Reject(checks.check_relu, relu_plus_abs_float, "where x is -inf your result is nan"),
    Accept(checks.check_relu, relu_masked_fill),
    Accept(checks.check_relu, relu_maximum),
    Accept(checks.check_pick_scores, pick_arange),
    Accept(checks.check_pick_scores, pick_loop),
    Accept(checks.check_pick_scores, pick_take_along),
    Accept(checks.check_pick_scores, pick_masked_sum),
    Accept(checks.check_one_hot, one_hot_functional_float),
    Accept(checks.check_one_hot, one_hot_scatter),
    Accept(checks.check_one_hot, one_hot_compare),
    Accept(checks.check_normalize_rows, normalize_functional),
    Accept(checks.check_normalize_rows, normalize_norm_method),
    Accept(checks.check_normalize_rows, normalize_by_hand),
    Accept(checks.check_batch_to, batch_to_loop),
    Accept(checks.check_batch_to, batch_to_copy_then_replace),
    Accept(checks.check_batch_to, batch_to_positional),
]


# ---------------------------------------------------------------- put it together: class_means


def means_index_add(features, labels, num_classes):
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    sums.index_add_(0, labels, features)
    counts = torch.zeros(num_classes, dtype=features.dtype, device=features.device)
    counts.index_add_(0, labels, torch.ones_like(labels, dtype=features.dtype))
    return sums / counts.clamp(min=1).unsqueeze(1)


def means_loop(features, labels, num_classes):
    rows = []
    for c in range(num_classes):
        chosen = features[labels == c]
        rows.append(chosen.mean(dim=0) if len(chosen) else torch.zeros_like(features[0]))
    return torch.stack(rows)


def means_one_hot_nan_to_num(features, labels, num_classes):
    one_hot = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return torch.nan_to_num((one_hot.T @ features) / one_hot.sum(0, keepdim=True).T)


def means_scatter_reduce(features, labels, num_classes):
    index = labels[:, None].expand_as(features)
    out = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    return out.scatter_reduce(0, index, features, reduce="mean", include_self=False)


def means_nan_for_empty(features, labels, num_classes):
    return torch.stack([features[labels == c].mean(dim=0) for c in range(num_classes)])


def means_divide_by_n(features, labels, num_classes):
    one_hot = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return one_hot.T @ features / len(labels)


def means_from_max_label(features, labels, num_classes):
    return means_loop(features, labels, int(labels.max()) + 1)


def means_float32(features, labels, num_classes):
    one_hot = torch.nn.functional.one_hot(labels, num_classes).float()
    return one_hot.T @ features.float() / one_hot.sum(0).clamp(min=1)[:, None]


def means_counts_on_columns(features, labels, num_classes):
    one_hot = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return one_hot.T @ features / one_hot.sum(0).clamp(min=1)  # broadcasts along the columns


def means_on_cpu(features, labels, num_classes):
    members = (labels[:, None] == torch.arange(num_classes)).to(features.dtype)  # arange on the CPU
    return members.T @ features / members.sum(0).clamp(min=1)[:, None]


def means_inputs_to_cpu(features, labels, num_classes):
    features, labels = features.cpu(), labels.cpu()  # "to be safe": takes them off the GPU they are on
    return means_index_add(features, labels, num_classes)


def means_inputs_to_device_cpu(features, labels, num_classes):
    return means_index_add(features.to("cpu"), labels.to(device=torch.device("cpu")), num_classes)


def means_item_loop(features, labels, num_classes):
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    counts = [0] * num_classes
    for i in range(len(labels)):
        c = labels[i].item()  # each label read into Python: on a GPU, a copy to the CPU per example
        sums[c] += features[i]
        counts[c] += 1
    return sums / torch.tensor([max(n, 1) for n in counts], dtype=features.dtype, device=features.device)[:, None]


def means_float32_zero_rows(features, labels, num_classes):
    device = features.device
    sums = torch.zeros(num_classes, features.shape[1], device=device)  # float32: no dtype=; empty rows are zeros
    counts = torch.zeros(num_classes, device=device)
    sums.index_add_(0, labels, features.float())
    counts.index_add_(0, labels, torch.ones(len(labels), device=device))
    return sums / counts.clamp(min=1)[:, None]


def means_counts_row_vector(features, labels, num_classes):
    members = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return members.T @ features / members.sum(0, keepdim=True).clamp(min=1)  # [1, C] against [C, D]


def means_sums(features, labels, num_classes):
    one_hot = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return one_hot.T @ features


def means_sorts_labels(features, labels, num_classes):
    labels.copy_(labels.sort().values)  # "tidying" the caller's labels
    return means_loop(features, labels, num_classes)


CLASS_MEANS_HIDDEN = [
    (torch.randn(5, 4, generator=torch.Generator().manual_seed(6)), torch.tensor([0, 3, 3, 1, 0]), 4),  # D == C
    (torch.randn(7, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64),
     torch.tensor([1, 1, 2, 3, 1, 2, 3]), 5),  # float64; classes 0 and 4 (smallest, largest) empty
    (torch.tensor([[2.0, -1.0, 4.0]]), torch.tensor([2]), 3),  # one example
]


def hidden_class_means(fn):
    checks.check_class_means(fn, inputs=CLASS_MEANS_HIDDEN)


CASES += [
    Accept(checks.check_class_means, ref.class_means),
    Accept(checks.check_class_means, means_index_add),
    Accept(checks.check_class_means, means_loop),
    Accept(checks.check_class_means, means_one_hot_nan_to_num),
    Accept(checks.check_class_means, means_scatter_reduce),
    Accept(hidden_class_means, ref.class_means),
    Accept(hidden_class_means, means_index_add),
    Accept(hidden_class_means, means_loop),
    Accept(hidden_class_means, means_one_hot_nan_to_num),
    Reject(checks.check_class_means, means_nan_for_empty, "your rows for them are NaN"),
    Reject(checks.check_class_means, means_divide_by_n, "divided every class's sum by the number of examples"),
    Reject(hidden_class_means, means_from_max_label, "from the largest label"),
    Reject(hidden_class_means, means_float32, "dtype"),
    # right values, empty rows zeros: only the dtype is wrong, and the message must not blame the empty rows
    Reject(hidden_class_means, means_float32_zero_rows, "your means are right but torch.float32"),
    Reject(checks.check_class_means, means_counts_row_vector, "give the counts shape [3, 1]"),
    Reject(hidden_class_means, means_counts_on_columns, "line up with the rows"),
    Reject(checks.check_class_means, means_on_cpu, "a tensor made without device= lives on the CPU"),
    Reject(checks.check_class_means, means_sums, "not their means"),
    Reject(checks.check_class_means, means_inputs_to_cpu, "it moved a tensor to the CPU (.cpu())"),
    Reject(hidden_class_means, means_inputs_to_device_cpu, "it moved a tensor to the CPU (.to('cpu'))"),
    Reject(checks.check_class_means, means_item_loop, "single values into Python for 13 examples"),
    Accept(hidden_class_means, means_item_loop),
    Reject(checks.check_class_means, means_sorts_labels, "its values were overwritten"),
    Reject(checks.check_class_means, means_unsqueezes_labels, "(unsqueeze_, squeeze_, t_, transpose_, resize_)"),
    Reject(checks.check_class_means, means_round_trip_cpu, "the work stays on the features' device, with no trip"),
    Reject(checks.check_flatten_batch, flatten_keeps_last, "keep dimension 0 (size"),
    Reject(checks.check_pairwise_dot, dot_no_transpose, "transpose b (b.T)"),
]


# ---------------------------------------------------------------- rules of issue 18: edge cases by rule


def channels_squeezed(images):
    return images.permute(0, 3, 1, 2).squeeze()  # drops a batch of one (and a single channel)


def flatten_3d_only(x):
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])  # right for [N, a, b] only


def hidden_flatten_batch(fn):
    g = torch.Generator().manual_seed(102)
    checks.check_flatten_batch(fn, inputs=[torch.randn(5, 2, 3, 4, generator=g).permute(0, 3, 1, 2),
                                           torch.randn(2, 9, generator=g), torch.randn(1, 3, 1, generator=g)])


def flatten_then_squeeze(x):
    return x.flatten(1).squeeze()  # drops the batch dimension of a batch of one


def hidden_center_columns(fn):
    g = torch.Generator().manual_seed(104)
    checks.check_center_columns(fn, inputs=[torch.randn(7, 5, generator=g) * 3 + 1, torch.tensor([[1.0, 2.0], [3.0, 6.0]]),
                                            torch.randn(4, 3, generator=g, dtype=torch.float64),
                                            torch.randn(6, 2, generator=g, dtype=torch.float64) + 1e8])


def center_as_float32(x):
    x = x.float()  # float64 input loses its precision
    return x - x.mean(dim=0, keepdim=True)


def hidden_pairwise_dot(fn):
    g = torch.Generator().manual_seed(106)
    checks.check_pairwise_dot(fn, inputs=[(torch.randn(4, 3, generator=g), torch.randn(6, 3, generator=g)),
                                          (torch.randn(1, 8, generator=g), torch.randn(1, 8, generator=g)),
                                          (torch.randn(3, 2, generator=g, dtype=torch.float64),
                                           torch.randn(2, 2, generator=g, dtype=torch.float64))])


def dot_as_float32(a, b):
    return a.float() @ b.float().T  # float64 inputs lose their precision


def positive_empty_breaks(x):
    values = x[x > 0]
    return values if len(values) else None  # "nothing to return"


def hidden_positive_values(fn):
    checks.check_positive_values(fn, inputs=[torch.tensor([-1.0, 0.0, 2.5, 0.0, 3.0]), torch.zeros(2, 2)])


CASES += [
    Reject(checks.check_to_channels_first, channels_squeezed, "shape"),
    Reject(hidden_flatten_batch, flatten_3d_only, "raised RuntimeError"),
    Accept(hidden_flatten_batch, ref.flatten_batch),
    Accept(hidden_flatten_batch, flatten_reshape),
    Accept(hidden_flatten_batch, flatten_rows),
    Reject(hidden_flatten_batch, flatten_with_view, "view() needs a contiguous tensor"),
    Reject(hidden_positive_values, positive_empty_breaks, "should return a tensor"),
    Accept(hidden_positive_values, ref.positive_values),
    Accept(hidden_positive_values, positive_masked_select),
    Accept(hidden_positive_values, positive_nonzero),
]

CASES += [Reject(hidden_positive_values, positive_with_zeros, "kept the zeros")]

CASES += [Accept(hidden_flatten_batch, flatten_function), Accept(hidden_positive_values, positive_flattened)]

# Found by a learner who never read the checks: a batch of one, and float64 inputs, in the hidden tests.
CASES += [
    Reject(hidden_flatten_batch, flatten_then_squeeze, "should have shape [1, 3]"),
    Reject(hidden_center_columns, center_as_float32, "dtype torch.float64"),
    Reject(hidden_pairwise_dot, dot_as_float32, "dtype torch.float64"),
    Reject(hidden_center_columns, center_rows, "each row's mean"),
    Reject(hidden_pairwise_dot, dot_transposed, "your result is transposed"),
    *[Accept(hidden_center_columns, f) for f in (ref.center_columns, center_broadcast, center_sum, center_loop)],
    *[Accept(hidden_pairwise_dot, f) for f in (ref.pairwise_dot, dot_einsum, dot_broadcast, dot_mm, dot_loop)],
]


# ---------------------------------------------------------------- round 4: classes found by an independent learner

DEVICE = torch.device("cpu")  # the notebook's global, as on a grader without a GPU


def positive_via_numbers(x):
    return torch.as_tensor([v.item() for v in x.reshape(-1) if v.item() > 0])  # Python numbers: default dtype


def positive_list_with_dtype(x):
    kept = [v for v in x.flatten().tolist() if v > 0]
    return torch.tensor(kept, dtype=x.dtype, device=x.device)


def hidden_positive_dtypes(fn):
    checks.check_positive_values(fn, inputs=[torch.tensor([[0.1, -0.7], [1e-9, 2.0]], dtype=torch.float64),
                                             torch.tensor([-5, 0, -2], dtype=torch.int32)])


def channels_as_float(images):
    return images.permute(0, 3, 1, 2).to(torch.float32)  # "layers want floats": not this function's job


def channels_channels_last_first(images):
    return images.permute(3, 0, 1, 2)


def channels_einsum(images):
    return torch.einsum("nhwc->nchw", images)


def hidden_channels_first(fn):
    g = torch.Generator().manual_seed(101)
    checks.check_to_channels_first(fn, inputs=[torch.randn(3, 7, 5, 3, generator=g),
                                               torch.randn(2, 3, 4, 1, generator=g, dtype=torch.float64)])


def share_on_device(array):
    return torch.as_tensor(array, device=DEVICE)  # a copy wherever DEVICE is a GPU


def share_then_cpu(array):
    return torch.from_numpy(array).to("cpu")  # already there: no copy


def flatten_squeezed_rows(x):
    rows = x.squeeze()
    return rows.reshape(rows.size(0), rows[0].numel())


def batch_to_floats_only(batch, device):
    return {k: v.to(device) if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()}


def batch_to_global_device(batch, device):
    return {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def batch_to_named_gpu(batch, device):
    return {k: v.to("cuda:0") if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def starter_scaled_range():
    return {**ref.make_starter_tensors(), "grid": torch.arange(5) / 5}


def means_counts_from_labels(features, labels, num_classes):
    ones = torch.ones_like(labels, dtype=features.dtype)
    counts = torch.zeros(int(labels.max()) + 1, dtype=features.dtype).scatter_add_(0, labels, ones)
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype).index_add_(0, labels, features)
    return sums / counts.clamp(min=1)[:, None]


def pick_index_as_row(scores, labels):
    return scores.gather(1, labels.view(1, -1)).view(-1)


def pick_along_rows(scores, labels):
    return scores.gather(0, labels[:, None]).flatten()


def dot_cosine(a, b):
    return torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1)


CASES += [
    Reject(checks.check_positive_values, positive_via_numbers, "PyTorch's default dtype"),
    Reject(hidden_positive_dtypes, positive_via_numbers, "PyTorch's default dtype"),
    Reject(hidden_positive_dtypes, positive_keep_shape, "zeroed the negatives but kept the shape"),
    *[Accept(hidden_positive_dtypes, f) for f in (ref.positive_values, positive_masked_select, positive_nonzero,
                                                  positive_list_with_dtype)],
    Accept(checks.check_positive_values, positive_list_with_dtype),
    Reject(checks.check_to_channels_first, channels_as_float, "the dtype changed from torch.uint8"),
    Reject(hidden_channels_first, channels_as_float, "the dtype changed from torch.float64"),
    Reject(checks.check_to_channels_first, channels_channels_last_first, "images.permute(3, 0, 1, 2)"),
    Accept(checks.check_to_channels_first, channels_einsum),
    *[Accept(hidden_channels_first, f) for f in (ref.to_channels_first, channels_movedim, channels_einsum)],
    Reject(checks.check_share_numpy, share_on_device, "your tensor went to DEVICE"),
    Accept(checks.check_share_numpy, share_then_cpu),
    Reject(hidden_flatten_batch, flatten_squeezed_rows, "for a batch of one"),
    Reject(hidden_flatten_batch, flatten_then_squeeze, "squeeze() without a dim drops every dimension of size 1"),
    Reject(checks.check_batch_to, batch_to_floats_only, "only the floating-point tensors moved"),
    Reject(checks.check_batch_to, batch_to_global_device, "another device than the one it was given"),
    Reject(checks.check_batch_to, batch_to_named_gpu, "another device than the one it was given"),
    Reject(checks.check_make_starter_tensors, starter_scaled_range, "stops before the end point"),
    Reject(hidden_class_means, means_counts_from_labels, "a tensor sized from the labels has 4 entries"),
    Reject(checks.check_pick_scores, pick_index_as_row, "comes from row 0"),
    Reject(checks.check_pick_scores, pick_along_rows, "a label was used as a row number"),
    Reject(hidden_channels_first, channels_by_reshape, "reshaped (or used view) instead of permuting"),
    Accept(hidden_channels_first, channels_two_transposes),
    Reject(checks.check_pairwise_dot, dot_cosine, "cosine similarities"),
]


# ---------------------------------------------------------------- round 5: classes found by an independent learner
# Messages that named a cause from a coincidence of sizes, or none where the result showed one.


def relu_abs_doubled(x):
    return torch.maximum(x, -x) + x  # |x| + x is twice relu(x)


def center_unbiased_count(x):
    return x - x.sum(dim=0) / (len(x) - 1)


def center_by_quantile(x):
    return x - x.quantile(0.5, dim=0, keepdim=True)  # the median, not the mean


def center_by_minimum(x):
    return x - x.min(dim=0).values


def center_row_average(x):
    return x - x.sum(dim=1) / x.shape[1]  # one value per row: cannot line up with the columns


def positive_argwhere(x):
    return torch.argwhere(x > 0).flatten()


def positive_where_tuple(x):
    return torch.where(x > 0)


def positive_by_positions(x):
    flat = x.flatten()
    return flat[torch.nonzero(flat > 0).flatten()]  # positions used to select the values: right


def one_hot_fill_columns(labels, num_classes):
    return torch.zeros(len(labels), num_classes).index_fill(1, labels, 1.0)  # every row gets every label


def one_hot_rows_by_label(labels, num_classes):
    out = torch.zeros(len(labels), num_classes)
    out[labels] = 1.0
    return out


def one_hot_paired_index(labels, num_classes):
    out = torch.zeros(len(labels), num_classes)
    out[torch.arange(len(labels)), labels] = 1.0
    return out


def hidden_one_hot(fn):
    checks.check_one_hot(fn, inputs=[(torch.tensor([9, 0, 5]), 10), (torch.tensor([0, 0]), 4)])


def flatten_after_squeeze(x):
    squeezed = x.squeeze()
    return squeezed.reshape(squeezed.size(0), squeezed.size(1), -1).flatten(1)


def starter_evens_short():
    return {**ref.make_starter_tensors(), "evens": torch.arange(0, 7, 2)}


def starter_grid_gaps():
    return {**ref.make_starter_tensors(), "grid": torch.linspace(0, 1, 6)}


def pick_python_floats(scores, labels):
    return torch.as_tensor([float(scores[i, c]) for i, c in enumerate(labels.tolist())])


def means_smoothed(features, labels, num_classes):
    members = torch.nn.functional.one_hot(labels, num_classes).to(features.dtype)
    return (members.T @ features + 1e-8) / (members.sum(0)[:, None] + 1e-8)  # an empty class gets 1, not 0


CASES += [
    Reject(checks.check_relu, relu_abs_doubled, "constant multiple of relu(x)"),
    Reject(checks.check_center_columns, center_unbiased_count, "by N - 1 = 4"),
    Reject(hidden_center_columns, center_unbiased_count, "by N - 1 = 6"),
    Reject(hidden_center_columns, center_by_columns_count, "the number of columns D = 5"),
    Reject(checks.check_center_columns, center_by_quantile, "each column's median"),
    Reject(checks.check_center_columns, center_by_minimum, "one value per column, but not the column's mean"),
    Reject(checks.check_center_columns, center_row_average, "one value per row (5 of them) met the 3 columns"),
    Reject(checks.check_positive_values, positive_argwhere, "where the positive elements are, not the values"),
    Reject(checks.check_positive_values, positive_where_tuple, "where the positive elements are, not the values"),
    Accept(checks.check_positive_values, positive_by_positions),
    Accept(hidden_positive_dtypes, positive_by_positions),
    Reject(checks.check_one_hot, one_hot_fill_columns, "out[:, labels] = 1"),
    Reject(checks.check_one_hot, one_hot_rows_by_label, "used as row numbers"),
    Reject(hidden_one_hot, one_hot_rows_by_label, "a label was used as a row number"),
    Reject(hidden_one_hot, one_hot_from_max, "largest label + 1"),
    Reject(hidden_one_hot, one_hot_fill_columns, "out[:, labels] = 1"),
    Accept(checks.check_one_hot, one_hot_paired_index),
    *[Accept(hidden_one_hot, f) for f in (ref.one_hot, one_hot_paired_index, one_hot_scatter, one_hot_compare)],
    Reject(hidden_flatten_batch, flatten_after_squeeze, "squeeze() turned a tensor of shape [1, 3, 1] into [3]"),
    Reject(checks.check_make_starter_tensors, starter_evens_short, "stops before `end`"),
    Reject(checks.check_make_starter_tensors, starter_grid_gaps, "`steps` is the number of points"),
    Reject(checks.check_pick_scores, pick_python_floats, "not in scores.dtype (torch.float64)"),
    Reject(checks.check_class_means, means_smoothed, "your rows for them are not zeros"),
]


# From a third learner tester (lesson 01): trips through the CPU the meta device could not show (.item(), .tolist()
# and .numpy() raise there, which proves nothing), and the answers with a few reads that stay right.
def means_loop_over_examples(features, labels, num_classes):
    # a Python loop over the N examples, each label read into Python: one copy from the device per example
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    counts = torch.zeros(num_classes, dtype=features.dtype, device=features.device)
    for i in range(len(labels)):
        c = int(labels[i])
        sums[c] += features[i]
        counts[c] += 1
    return sums / counts.clamp(min=1)[:, None]


def means_counter_of_labels(features, labels, num_classes):
    # the counts from collections.Counter over labels.tolist(): every label copied to the CPU
    from collections import Counter
    counted = Counter(labels.tolist())
    counts = torch.tensor([counted.get(c, 0) for c in range(num_classes)], dtype=features.dtype,
                          device=features.device)
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype,
                       device=features.device).index_add_(0, labels, features)
    return sums / counts.clamp(min=1)[:, None]


def means_numpy_add_at(features, labels, num_classes):
    # NumPy's add.at on .numpy() copies: the data itself goes through the CPU
    sums = np.zeros((num_classes, features.shape[1]))
    counts = np.zeros(num_classes)
    np.add.at(sums, labels.numpy(), features.numpy())
    np.add.at(counts, labels.numpy(), 1)
    return torch.tensor(sums / np.maximum(counts, 1)[:, None], dtype=features.dtype)


def means_skip_empty_with_any(features, labels, num_classes):
    # one check per class (if mask.any()): a few single values read, not the data
    out = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    for c in range(num_classes):
        mask = labels == c
        if mask.any():
            out[c] = features[mask].mean(dim=0)
    return out


def means_with_debug_print(features, labels, num_classes):
    # printing a tensor while debugging reads it, but is not the computation
    means = ref.class_means(features, labels, num_classes)
    print("means:", means, f"total {means.sum():.3f}")
    return means


def means_validating_labels(features, labels, num_classes):
    # two single values read to validate the input
    assert int(labels.max()) < num_classes and bool((labels >= 0).all())
    return ref.class_means(features, labels, num_classes)


CASES += [
    Reject(checks.check_class_means, means_loop_over_examples, "single values into Python for 13 examples"),
    Reject(checks.check_class_means, means_counter_of_labels, "into Python with .tolist()"),
    Reject(checks.check_class_means, means_numpy_add_at, "into Python with .numpy()"),
    Accept(checks.check_class_means, means_skip_empty_with_any),
    Accept(checks.check_class_means, means_with_debug_print),
    Accept(checks.check_class_means, means_validating_labels),
]


def starter_zeros_from_empty():
    # torch.empty's memory is often zeros, so this passed on some runs
    return {**ref.make_starter_tensors(), "zeros": torch.empty(2, 3, dtype=torch.float64)}


def starter_zeros_from_empty_then_zeroed():
    return {**ref.make_starter_tensors(), "zeros": torch.empty(2, 3, dtype=torch.float64).zero_()}


CASES += [
    Reject(checks.check_make_starter_tensors, starter_zeros_from_empty, "comes from torch.empty"),
    Accept(checks.check_make_starter_tensors, starter_zeros_from_empty_then_zeroed),
]


def pick_take_without_offsets(scores, labels):
    # torch.take reads scores flattened: without each row's offset every label indexes row 0
    return torch.take(scores, labels)


def normalize_l1_on_negatives(x):
    return x / torch.linalg.vector_norm(x, ord=1, dim=1, keepdim=True)


def pairwise_bmm_squeeze_all(a, b):
    # squeeze() drops the size-1 dims a single row gives, not only the batch dim it was meant for
    return torch.bmm(a.unsqueeze(0), b.T.unsqueeze(0)).squeeze()


CASES += [
    Reject(checks.check_pick_scores, pick_take_without_offsets, "with torch.take (which reads scores flattened)"),
    Reject(checks.check_normalize_rows, normalize_l1_on_negatives, "the sum of each row's absolute values (the L1"),
    Reject(hidden_pairwise_dot, pairwise_bmm_squeeze_all, "squeeze() with no dim"),
]


def center_mean_in_float32(x):
    # the result keeps x's dtype, but the mean was taken in float32
    return x - x.mean(dim=0, keepdim=True, dtype=torch.float32).to(x.dtype)


CASES += [
    Reject(hidden_center_columns, center_mean_in_float32, "the means were computed in float32"),
]


# From a fourth learner tester (lesson 01): wrong answers the default inputs let through (a float32 round trip of
# integers and of float64 features, view on a non-contiguous input, a 4-D batch), and messages that named no cause.
def relu_through_float32(x):
    return torch.relu(x.float()).to(x.dtype)  # the dtype comes back, 2**40 + 3 does not


def positive_flat_view(x):
    flat = x.view(-1)  # raises on a transposed x
    return flat[flat > 0]


def positive_by_coordinates(x):
    return x[torch.nonzero(x > 0)]  # coordinates as one index into dim 0: whole rows


def pick_flat_view(scores, labels):
    n, c = scores.shape
    return scores.view(-1)[torch.arange(n) * c + labels]  # raises on transposed scores


def pick_flat_offset_by_rows(scores, labels):
    n = scores.shape[0]
    return scores.flatten()[torch.arange(n) * n + labels]  # a row is C values long, not N


def means_float32_round_trip(features, labels, num_classes):
    f = features.float()
    members = (labels[:, None] == torch.arange(num_classes, device=f.device)).float()
    return ((members.T @ f) / members.sum(0).clamp(min=1)[:, None]).to(features.dtype)


def means_scatter_reduce_include_self(features, labels, num_classes):
    out = features.new_zeros(num_classes, features.shape[1])
    return out.scatter_reduce(0, labels[:, None].expand_as(features), features, reduce="mean")  # include_self=True


def means_scatter_add_one_column(features, labels, num_classes):
    sums = features.new_zeros(num_classes, features.shape[1])
    sums.scatter_add_(0, labels[:, None], features)  # an index of one column fills column 0 only
    counts = features.new_zeros(num_classes).index_add_(0, labels, torch.ones_like(features[:, 0]))
    return sums / counts.clamp(min=1)[:, None]


def means_sums_sized_from_features(features, labels, num_classes):
    sums = torch.zeros_like(features[:num_classes])  # N rows when N < num_classes
    sums.index_add_(0, labels, features)
    counts = torch.zeros_like(features[:num_classes, 0]).index_add_(0, labels, torch.ones_like(features[:, 0]))
    return sums / counts.clamp(min=1)[:, None]


def means_loop_over_present_labels(features, labels, num_classes):
    # a loop over the classes present (at most num_classes), with boolean masks: the meta device has no kernel for
    # unique() or masks, so the meta run proves nothing, and the task does not ask for one; it reads no labels into
    # Python, and its few reads (one per class) are those of means_skip_empty_with_any
    out = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device)
    for c in labels.unique():
        out[c] = features[labels == c].mean(0)
    return out


def one_hot_from_empty(labels, num_classes):
    out = torch.empty(len(labels), num_classes)  # uninitialised: often zeros, not always
    out[torch.arange(len(labels)), labels] = 1.0
    return out


def one_hot_from_empty_zeroed(labels, num_classes):
    out = torch.empty(len(labels), num_classes).zero_()
    out[torch.arange(len(labels)), labels] = 1.0
    return out


def one_hot_scatter_dim0(labels, num_classes):
    return torch.zeros(len(labels), num_classes).scatter_(0, labels[:, None], 1.0)


def normalize_plus_eps(x):
    return x / (torch.linalg.vector_norm(x, dim=1, keepdim=True) + 1e-3)


def normalize_by_max_abs(x):
    return x / x.abs().amax(dim=1, keepdim=True)


def normalize_by_largest_row_norm(x):
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).max()


def starter_grid_logspace():
    return {**ref.make_starter_tensors(), "grid": torch.logspace(0, 1, 5)}


def dot_einsum_b_as_columns(a, b):
    return torch.einsum("nd,dm->nm", a, b)


def dot_outer_of_sums(a, b):
    return torch.outer(a.sum(1), b.sum(1))


def square_pairwise_dot(fn):
    # b square: a @ b has the expected shape, so only the values show the missing transpose
    g = torch.Generator().manual_seed(106)
    checks.check_pairwise_dot(fn, inputs=[(torch.randn(3, 2, generator=g, dtype=torch.float64),
                                           torch.randn(2, 2, generator=g, dtype=torch.float64))])


CASES += [
    Reject(checks.check_relu, relu_through_float32, "a trip through float32 loses integers above 2**24"),
    Reject(checks.check_positive_values, positive_flat_view, "view() needs a contiguous tensor (elements stored"),
    Reject(checks.check_positive_values, positive_by_coordinates, "the coordinates that nonzero() (or argwhere())"),
    Reject(checks.check_pick_scores, pick_flat_view, "view() needs a contiguous tensor (elements stored"),
    Reject(checks.check_pick_scores, pick_flat_offset_by_rows, "the number of rows N: in the flattened scores"),
    Reject(checks.check_class_means, means_float32_round_trip, "7 significant digits lose what a class's mean keeps"),
    Reject(checks.check_class_means, means_scatter_reduce_include_self, "with include_self=True, the default"),
    Reject(checks.check_class_means, means_scatter_add_one_column, "only column 0 of your result holds the class"),
    Reject(hidden_class_means, means_sums_sized_from_features, "fewer examples (1) than classes (3)"),
    Accept(checks.check_class_means, means_loop_over_present_labels),
    Accept(hidden_class_means, means_loop_over_present_labels),
    Reject(checks.check_one_hot, one_hot_from_empty, "torch.empty only reserves memory (uninitialised"),
    Accept(checks.check_one_hot, one_hot_from_empty_zeroed),
    Reject(checks.check_one_hot, one_hot_scatter_dim0, "you scattered along dim 0"),
    Reject(checks.check_flatten_batch, flatten_3d_only, "x.shape[1] * x.shape[2] (15)"),
    Reject(hidden_flatten_batch, flatten_3d_only, "only for a 3-D input; this x has 4 dimensions"),
    Reject(checks.check_normalize_rows, normalize_plus_eps, "its norm plus 0.001 (an eps"),
    Reject(checks.check_normalize_rows, normalize_by_max_abs, "its largest absolute value (the max norm"),
    Reject(checks.check_normalize_rows, normalize_by_largest_row_norm, "the largest row length (5)"),
    Reject(checks.check_make_starter_tensors, starter_grid_logspace, "spaced evenly in the exponent"),
    Reject(checks.check_pairwise_dot, dot_einsum_b_as_columns, "your subscripts read b as [D, M]"),
    Reject(square_pairwise_dot, dot_einsum_b_as_columns, "you multiplied a by b itself"),
    Reject(checks.check_pairwise_dot, dot_outer_of_sums, "the product of the two rows' sums"),
]


def dot_transpose_matmul(a, b):
    """Correct: the transpose taken with .mT, then a matrix product."""
    return a @ b.mT


CASES += [
    Accept(square_pairwise_dot, ref.pairwise_dot),
    Accept(square_pairwise_dot, dot_einsum),
    Accept(square_pairwise_dot, dot_broadcast),
    Accept(square_pairwise_dot, dot_transpose_matmul),
    Reject(square_pairwise_dot, dot_outer_of_sums, "the product of the two rows' sums"),
]
