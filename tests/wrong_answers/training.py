"""Lesson 05 Training and evaluation: the reference passes, plausible wrong answers fail by name."""

import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks import training as checks
from helpers.reference import training as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- to_class_targets


def targets_dim0(one_hot):
    return one_hot.argmax(dim=0)


def targets_float(one_hot):
    return one_hot.argmax(dim=1).float()


def targets_unchanged(one_hot):
    return one_hot


# ---------------------------------------------------------------- binary_loss


def bce_integer_targets(logits, labels):
    return nn.BCEWithLogitsLoss()(logits, labels)


def bce_double_sigmoid(logits, labels):
    return nn.BCEWithLogitsLoss()(torch.sigmoid(logits), labels.float())


def bce_summed(logits, labels):
    return nn.BCEWithLogitsLoss(reduction="sum")(logits, labels.float())


def bce_on_logits(logits, labels):
    return nn.BCELoss()(logits, labels.float())


def bce_as_number(logits, labels):
    return nn.BCEWithLogitsLoss()(logits, labels.float()).item()


def bce_probabilities(logits, labels):
    # Wrong for large scores, which the task names: sigmoid(30.) is 1.0 in float32 and BCELoss clamps log(0) to -100.
    return nn.BCELoss()(torch.sigmoid(logits), labels.float())


def bce_by_hand_unstable(logits, labels):
    """Wrong: the textbook formula on probabilities; log(1 - sigmoid(x)) is log(0) = -inf for a large x."""
    p, y = logits.sigmoid(), labels.to(logits.dtype)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def bce_softplus(logits, labels):
    """Correct and stable: -log(sigmoid(x)) = softplus(-x) and -log(1 - sigmoid(x)) = softplus(x)."""
    y = labels.float()
    return (y * F.softplus(-logits) + (1 - y) * F.softplus(logits)).mean()


# ---------------------------------------------------------------- accuracy


def accuracy_dim0(logits, targets):
    return (logits.argmax(dim=0) == targets).float().mean().item()


def accuracy_count(logits, targets):
    return (logits.argmax(dim=1) == targets).sum().item()


def accuracy_percent(logits, targets):
    return 100 * (logits.argmax(dim=1) == targets).float().mean().item()


def accuracy_tensor(logits, targets):
    return (logits.argmax(dim=1) == targets).float().mean()


# ---------------------------------------------------------------- train_one_epoch


def epoch_no_zero_grad(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_standardises_batches(model, loader, loss_fn, optimizer, device):
    # Wrong: standardises every batch "to help training", so the model trains on other values
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        inputs = (inputs - inputs.mean()) / inputs.std()
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_no_train_mode(model, loader, loss_fn, optimizer, device):
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_zero_grad_before_step(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_mean_of_batch_means(model, loader, loss_fn, optimizer, device):
    model.train()
    losses = []
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)


def epoch_tensor_total(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss * len(targets)
        count += len(targets)
    return total / count


def epoch_last_loss(model, loader, loss_fn, optimizer, device):
    model.train()
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


# ---------------------------------------------------------------- evaluate


def evaluate_no_eval(model, loader, loss_fn, device):
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total += loss_fn(logits, targets).item() * len(targets)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total / count, correct / count


def evaluate_with_grad(model, loader, loss_fn, device):
    model.eval()
    total, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total += loss_fn(logits, targets).item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    return total / count, correct / count


def evaluate_inference_mode(model, loader, loss_fn, device):
    # Also correct: inference_mode disables gradient tracking too.
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.inference_mode():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total += loss_fn(logits, targets).item() * len(targets)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total / count, correct / count


def evaluate_batch_means(model, loader, loss_fn, device):
    model.eval()
    losses, accs = [], []
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            losses.append(loss_fn(logits, targets).item())
            accs.append((logits.argmax(dim=1) == targets).float().mean().item())
    return sum(losses) / len(losses), sum(accs) / len(accs)


def evaluate_batch_mean_accuracy(model, loader, loss_fn, device):
    model.eval()
    total, accs, count = 0.0, [], 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total += loss_fn(logits, targets).item() * len(targets)
            accs.append((logits.argmax(dim=1) == targets).float().mean().item())
            count += len(targets)
    return total / count, sum(accs) / len(accs)


def epoch_weights_by_loader_batch_size(model, loader, loss_fn, optimizer, device):
    """Wrong: every batch's loss is weighted by the loader's batch_size, the smaller last batch too."""
    model.train()
    total, seen = 0.0, 0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()
        total += loss.item() * loader.batch_size
        seen += targets.numel()
    return total / seen


def evaluate_counts_full_batches(model, loader, loss_fn, device):
    """Wrong: the number of samples taken as len(loader) * batch_size, as if the last batch were full."""
    model.eval()
    total, correct = 0.0, 0
    with torch.inference_mode():
        for inputs, targets in loader:
            logits = model(inputs.to(device))
            targets = targets.to(device)
            total += loss_fn(logits, targets).item() * targets.shape[0]
            correct += int((logits.argmax(1) == targets).sum())
    samples = len(loader) * loader.batch_size
    return total / samples, correct / samples


def evaluate_accuracy_over_full_batches(model, loader, loss_fn, device):
    """Wrong: the loss is right, but the accuracy divides by len(loader) * batch_size."""
    loss, _ = ref.evaluate(model, loader, loss_fn, device)
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x.to(device)).argmax(1) == y.to(device)).sum()) for x, y in loader)
    return loss, correct / (len(loader) * loader.batch_size)


def evaluate_swapped(model, loader, loss_fn, device):
    loss, acc = ref.evaluate(model, loader, loss_fn, device)
    return acc, loss


# ---------------------------------------------------------------- fit


def _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs, clip, per_epoch=False, keep_tensor=False,
              device="cpu"):
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            clip()
            optimizer.step()
            if not per_epoch:
                scheduler.step()
            history.append(loss if keep_tensor else loss.item())
        if per_epoch:
            scheduler.step()
    return history


def fit_scheduler_per_epoch(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), max_norm), per_epoch=True)


def fit_scheduler_before_optimizer(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scheduler.step()
            optimizer.step()
            history.append(loss.item())
    return history


def fit_one_epoch_only(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, 1,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), max_norm))


def fit_no_clipping(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs, lambda: None)


def fit_clip_after_step(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scheduler.step()
            history.append(loss.item())
    return history


def fit_clip_value(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs,
                     lambda: nn.utils.clip_grad_value_(model.parameters(), max_norm))


def fit_fixed_norm(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), 1.0))


def fit_history_tensors(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), max_norm), keep_tensor=True)


def fit_history_detached(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    history = fit_history_tensors(model, loader, loss_fn, optimizer, scheduler, device, epochs, max_norm)
    return [loss.detach() for loss in history]


def fit_history_per_epoch(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    history = ref.fit(model, loader, loss_fn, optimizer, scheduler, device, epochs, max_norm)
    per_epoch = len(history) // epochs
    return [sum(history[i:i + per_epoch]) / per_epoch for i in range(0, len(history), per_epoch)]


def fit_returns_nothing(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    ref.fit(model, loader, loss_fn, optimizer, scheduler, device, epochs, max_norm)


# ---------------------------------------------------------------- issue 12: whole classes of mistakes


def epoch_never_moves(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:  # the mistake: the batch stays where the loader made it
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def evaluate_moves_inputs_only(model, loader, loss_fn, device):
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            logits = model(inputs.to(device))
            total_loss += loss_fn(logits, targets).item() * len(targets)
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total_loss / count, correct / count


def evaluate_flag_by_hand(model, loader, loss_fn, device):
    model.training = False  # only the top-level flag: the Dropout inside stays in training mode
    with torch.no_grad():
        return _evaluate_body(model, loader, loss_fn, device)


def evaluate_grad_off_globally(model, loader, loss_fn, device):
    model.eval()
    torch.set_grad_enabled(False)  # never switched back on
    return _evaluate_body(model, loader, loss_fn, device)


def _evaluate_body(model, loader, loss_fn, device):
    total_loss, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total_loss += loss_fn(logits, targets).item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    return total_loss / count, correct / count


def fit_without_train_mode(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    history = []  # the mistake: no model.train(), so a model handed over in eval mode trains in eval mode
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
    return history


def optimizer_sgd_plain(kind, params, lr):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)  # no momentum
    return ref.make_optimizer(kind, params, lr)


def optimizer_adam_l2(kind, params, lr):
    if kind == "adamw":
        return torch.optim.Adam(params, lr=lr, weight_decay=0.01)
    return ref.make_optimizer(kind, params, lr)


def optimizer_fixed_lr(kind, params, lr):
    return ref.make_optimizer(kind, params, 1e-3)


def classify_not_moved(model, images):
    model.eval()
    with torch.no_grad():
        return model(images).argmax(dim=1)


def classify_logits(model, images):
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        return model(images.to(device))


def classify_in_train_mode(model, images):
    device = next(model.parameters()).device
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1)


def targets_keepdim(one_hot):
    return one_hot.argmax(dim=1, keepdim=True)


NEW_CASES = [
    Reject(checks.check_to_class_targets, targets_keepdim, "extra dimension of size 1"),
    Accept(checks.check_make_optimizer, ref.make_optimizer),
    Reject(checks.check_make_optimizer, optimizer_sgd_plain, "pass momentum=0.9"),
    Reject(checks.check_make_optimizer, optimizer_adam_l2, "Use torch.optim.AdamW"),
    Reject(checks.check_make_optimizer, optimizer_fixed_lr, "use the lr argument"),
    Accept(checks.check_classify, ref.classify),
    Reject(checks.check_classify, classify_not_moved, "without moving it to the device"),
    Reject(checks.check_classify, classify_logits, "you returned the logits"),
    Reject(checks.check_classify, classify_in_train_mode, "call model.eval() first"),
    Reject(checks.check_train_one_epoch_updates, epoch_never_moves, "without moving it to the device"),
    Reject(checks.check_evaluate_values, evaluate_moves_inputs_only, "without moving it to the device"),
    Reject(checks.check_evaluate_modes, evaluate_flag_by_hand, "changes only the top-level flag"),
    Reject(checks.check_evaluate_modes, evaluate_grad_off_globally, "left gradient tracking switched off"),
    Reject(checks.check_fit_schedule, fit_without_train_mode, "call model.train() at the start of fit"),
]

CASES = [
    Accept(checks.check_to_class_targets, ref.to_class_targets),
    Reject(checks.check_to_class_targets, targets_dim0, "argmax over dim=0"),
    Reject(checks.check_to_class_targets, targets_float, "int64"),
    Reject(checks.check_to_class_targets, targets_unchanged, "still one-hot"),
    Accept(checks.check_binary_loss, ref.binary_loss),
    Reject(checks.check_binary_loss, bce_probabilities, "the sigmoid rounds to exactly 1.0"),
    Reject(checks.check_binary_loss, bce_by_hand_unstable, "the result is inf or nan"),
    Accept(checks.check_binary_loss, bce_softplus),
    Reject(checks.check_binary_loss, bce_integer_targets, "needs float targets"),
    Reject(checks.check_binary_loss, bce_double_sigmoid, "applies its own"),
    Reject(checks.check_binary_loss, bce_summed, "reduction='sum'"),
    Reject(checks.check_binary_loss, bce_on_logits, "BCELoss expects probabilities"),
    Reject(checks.check_binary_loss, bce_as_number, "should return the loss as a tensor"),
    Accept(checks.check_accuracy, ref.accuracy),
    Reject(checks.check_accuracy, accuracy_dim0, "dim=0"),
    Reject(checks.check_accuracy, accuracy_count, "number of correct predictions"),
    Reject(checks.check_accuracy, accuracy_percent, "percentage"),
    Reject(checks.check_accuracy, accuracy_tensor, "return a Python float"),
    Accept(checks.check_train_one_epoch_updates, ref.train_one_epoch),
    Reject(checks.check_train_one_epoch_updates, epoch_no_zero_grad, "you forgot optimizer.zero_grad()"),
    Reject(checks.check_train_one_epoch_updates, epoch_standardises_batches,
           "forward pass 1 was given other values than the loader's batch"),
    Reject(checks.check_train_one_epoch_updates, epoch_no_train_mode, "you forgot model.train()"),
    Reject(checks.check_train_one_epoch_updates, epoch_zero_grad_before_step, "did not change"),
    Accept(checks.check_train_one_epoch_loss, ref.train_one_epoch),
    Reject(checks.check_train_one_epoch_loss, epoch_mean_of_batch_means, "averaged the batch means"),
    Reject(checks.check_train_one_epoch_loss, epoch_tensor_total, "is a tensor"),
    Reject(checks.check_train_one_epoch_loss, epoch_last_loss, "only the last batch"),
    Reject(checks.check_train_one_epoch_loss, epoch_no_zero_grad, "fix the updates first"),
    Accept(checks.check_train_one_epoch, ref.train_one_epoch),
    Reject(checks.check_train_one_epoch, epoch_no_zero_grad, "you forgot optimizer.zero_grad()"),
    Reject(checks.check_train_one_epoch, epoch_mean_of_batch_means, "averaged the batch means"),
    Accept(checks.check_evaluate_modes, ref.evaluate),
    Accept(checks.check_evaluate_modes, evaluate_inference_mode),
    Reject(checks.check_evaluate_modes, evaluate_no_eval, "you forgot model.eval()"),
    Reject(checks.check_evaluate_modes, evaluate_with_grad, "torch.no_grad()"),
    Accept(checks.check_evaluate_values, ref.evaluate),
    Reject(checks.check_evaluate_values, evaluate_batch_means, "averaged the batch means"),
    Reject(checks.check_evaluate_values, evaluate_batch_mean_accuracy, "averaged the batch accuracies"),
    Reject(checks.check_evaluate_values, evaluate_swapped, "(loss, accuracy) in that order"),
    Accept(checks.check_evaluate, ref.evaluate),
    Reject(checks.check_evaluate, evaluate_no_eval, "you forgot model.eval()"),
    Reject(checks.check_evaluate, evaluate_batch_means, "averaged the batch means"),
    Accept(checks.check_fit_schedule, ref.fit),
    Reject(checks.check_fit_schedule, fit_scheduler_per_epoch, "once per epoch"),
    Reject(checks.check_fit_schedule, fit_scheduler_before_optimizer, "before optimizer.step()"),
    Reject(checks.check_fit_schedule, fit_one_epoch_only, "loop over all"),
    Accept(checks.check_fit_clipping, ref.fit),
    Reject(checks.check_fit_clipping, fit_no_clipping, "were not clipped"),
    Reject(checks.check_fit_clipping, fit_clip_after_step, "were not clipped"),
    Reject(checks.check_fit_clipping, fit_clip_value, "clip_grad_value_"),
    Reject(checks.check_fit_clipping, fit_fixed_norm, "fixed norm of 1.0"),
    Accept(checks.check_fit_history, ref.fit),
    Reject(checks.check_fit_history, fit_history_tensors, "still attached to their graphs"),
    Reject(checks.check_fit_history, fit_history_detached, "holds tensors"),
    Reject(checks.check_fit_history, fit_history_per_epoch, "one value per epoch"),
    Reject(checks.check_fit_history, fit_returns_nothing, "returned None"),
] + NEW_CASES


# ---------------------------------------------------------------- issue 18: correct answers written differently


def targets_max_indices(one_hot):
    return torch.max(one_hot, dim=1).indices


def targets_loop(one_hot):
    rows = one_hot.tolist()
    return torch.tensor([row.index(max(row)) for row in rows], dtype=torch.int64)


def targets_last_dim_with_print(one_hot):
    print("converting", len(one_hot), "rows")
    return torch.argmax(one_hot, dim=-1).long()


def targets_flat_argmax(one_hot):
    return one_hot.argmax()  # no dim: one index into the flattened tensor


def targets_nonzero(one_hot):
    return one_hot.nonzero()[:, 1]  # right for one-hot rows, wrong for probabilities


def bce_functional(logits, labels):
    return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def bce_by_formula(logits, labels):
    y = labels.float()
    return (logits.clamp(min=0) - logits * y + torch.log1p(torch.exp(-logits.abs()))).mean()


def bce_keywords(logits, labels):
    return nn.BCEWithLogitsLoss(reduction="mean")(input=logits, target=labels.float())


def accuracy_loop(logits, targets):
    hits = sum(int(row.argmax()) == int(t) for row, t in zip(logits, targets))
    return hits / len(targets)


def accuracy_count_over_numel(logits, targets):
    return (logits.argmax(1) == targets).sum().item() / targets.numel()


def accuracy_max_double(logits, targets):
    return torch.eq(torch.max(logits, 1).indices, targets).double().mean().item()


def accuracy_float_of_tensor(logits, targets):
    return float((logits.argmax(dim=1) == targets).float().mean())


def accuracy_mean_of_bools(logits, targets):
    # Wrong: mean() of a bool tensor raises
    return (logits.argmax(dim=1) == targets).mean().item()


def epoch_model_zero_grad_and_keywords(model, loader, loss_fn, optimizer, device):
    model.train()
    total = 0.0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device=device), targets.to(device=device)
        model.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * inputs.size(0)
    return total / len(loader.dataset)


def epoch_zero_grad_at_end_with_print(model, loader, loss_fn, optimizer, device):
    model.train()
    losses, sizes = [], []
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        sizes.append(len(targets))
        print(f"batch {step}: loss {loss.item():.3f}")
    weights = torch.tensor(sizes, dtype=torch.float32)
    return (torch.stack(losses) * weights).sum().item() / weights.sum().item()


def epoch_float_of_loss(model, loader, loss_fn, optimizer, device):
    model.train(True)
    total, count = 0.0, 0
    for batch in loader:
        inputs, targets = (t.to(device) for t in batch)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += float(loss) * len(targets)
        count += len(targets)
    return total / count


def epoch_reseeds(model, loader, loss_fn, optimizer, device):
    torch.manual_seed(0)  # "for reproducibility": resets the caller's random stream
    return ref.train_one_epoch(model, loader, loss_fn, optimizer, device)


def epoch_extra_draw(model, loader, loss_fn, optimizer, device):
    result = ref.train_one_epoch(model, loader, loss_fn, optimizer, device)
    torch.rand(1)  # a draw of its own
    return result


def epoch_shuffles_dataset_in_place(model, loader, loss_fn, optimizer, device):
    x, y = loader.dataset.tensors
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x.copy_(x[order])  # the caller's data, reordered
    y.copy_(y[order])
    return ref.train_one_epoch(model, loader, loss_fn, optimizer, device)


def _eval_loop(model, loader, loss_fn, device):
    total, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total += loss_fn(logits, targets).item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    return total / count, correct / count


@torch.no_grad()
def evaluate_decorated(model, loader, loss_fn, device):
    model.eval()
    return _eval_loop(model, loader, loss_fn, device)


def evaluate_concatenated(model, loader, loss_fn, device):
    model.eval()
    with torch.no_grad():
        pairs = [(model(x.to(device)), y.to(device)) for x, y in loader]
        logits = torch.cat([p for p, _ in pairs])
        targets = torch.cat([t for _, t in pairs])
        return loss_fn(logits, targets).item(), (logits.argmax(1) == targets).float().mean().item()


def evaluate_restores_mode(model, loader, loss_fn, device):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return _eval_loop(model, loader, loss_fn, device)
    finally:
        model.train(was_training)


def evaluate_tensor_values(model, loader, loss_fn, device):
    loss, acc = ref.evaluate(model, loader, loss_fn, device)
    return torch.tensor(loss), torch.tensor(acc)


def evaluate_draws(model, loader, loss_fn, device):
    torch.manual_seed(0)
    return ref.evaluate(model, loader, loss_fn, device)


def _fit_with(model, loader, loss_fn, optimizer, scheduler, device, epochs, clip):
    # cleared before the first batch (the model may come with gradients of an earlier step) and after every step
    model.train()
    optimizer.zero_grad()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            clip()
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            history.append(float(loss))
    return history


def fit_without_zero_grad(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # Wrong: the gradients are never cleared
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
    return history


def fit_keywords_zero_grad_after(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    return _fit_with(model, loader, loss_fn, optimizer, scheduler, device, epochs,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm, norm_type=2.0))


def fit_by_epochs(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    history = []
    for epoch in range(epochs):
        model.train()
        epoch_losses = []
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm)
            optimizer.step()
            scheduler.step()
            epoch_losses.append(loss.item())
        print(f"epoch {epoch}: mean batch loss {sum(epoch_losses) / len(epoch_losses):.3f}")
        history.extend(epoch_losses)
    return history


def fit_clip_by_hand(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    def clip():
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        factor = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(factor)
    return _fit_with(model, loader, loss_fn, optimizer, scheduler, device, epochs, clip)


def fit_always_rescales(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    """Wrong: "a smaller gradient is left as it is"; this scales every gradient to max_norm, a small one up."""
    def clip():
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
        for g in grads:
            g.mul_(max_norm / (norm + 1e-6))
    return _fit_with(model, loader, loss_fn, optimizer, scheduler, device, epochs, clip)


def fit_own_one_cycle(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    """Wrong: ignores the scheduler it was given and steps one of its own."""
    own = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, epochs=epochs, steps_per_epoch=len(loader))
    return _fit_loop(model, loader, loss_fn, optimizer, own, epochs,
                     lambda: nn.utils.clip_grad_norm_(model.parameters(), max_norm))


def fit_reseeds(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    torch.manual_seed(epochs)
    return ref.fit(model, loader, loss_fn, optimizer, scheduler, device, epochs, max_norm)


def optimizer_by_table(kind, params, lr):
    makers = {"sgd": lambda: torch.optim.SGD(params, lr, momentum=0.9),
              "adam": lambda: torch.optim.Adam(params, lr),
              "adamw": lambda: torch.optim.AdamW(params, lr, weight_decay=0.01)}
    return makers[kind]()


def optimizer_by_match(kind, params, lr):
    match kind:
        case "sgd":
            return torch.optim.SGD(params=params, lr=lr, momentum=0.9, nesterov=False)
        case "adam":
            return torch.optim.Adam(params=params, lr=lr, betas=(0.9, 0.999))
        case _:
            return torch.optim.AdamW(params=params, lr=lr, weight_decay=0.01)


def optimizer_lowercased_with_print(kind, params, lr):
    print(f"building {kind} with lr={lr}")
    return ref.make_optimizer(kind.lower(), params, lr)


def optimizer_pops_params(kind, params, lr):
    first = params.pop(0)  # the caller's list loses its first parameter
    return ref.make_optimizer(kind, [first, *params], lr)


def classify_inference_mode(model, images):
    device = next(model.parameters()).device
    model.eval()
    with torch.inference_mode():
        return torch.argmax(model(images.to(device)), 1).to("cpu")


def classify_restores_mode(model, images):
    param = next(iter(model.parameters()))
    was_training = model.training
    model.eval()
    with torch.no_grad():
        classes = model(images.to(param.device)).max(dim=1).indices.cpu()
    model.train(was_training)
    return classes


def classify_batched(model, images):
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        parts = [model(chunk.to(device)).argmax(dim=1).cpu() for chunk in images.split(2)]
    return torch.cat(parts)


# ---------------------------------------------------------------- the put-together exercise


def spirals_with_fit(model, train_set):
    ref_fit = ref.fit
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=40 * len(loader))
    ref_fit(model, loader, nn.CrossEntropyLoss(), optimizer, scheduler, "cpu", 40, 1.0)


def spirals_own_loop_constant_adam(model, train_set):
    points, rows = train_set.tensors
    labels = rows.argmax(dim=1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(points, labels), batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for epoch in range(60):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    print("trained for 60 epochs")


def spirals_sgd_one_cycle(model, train_set):
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, epochs=40, steps_per_epoch=len(loader))
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(40):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            scheduler.step()


def spirals_full_batch(model, train_set):
    points, rows = train_set[:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.03)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.03, total_steps=300)
    model.train()
    for _ in range(300):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(points), rows).backward()
        optimizer.step()
        scheduler.step()


def spirals_tutorial_sgd(model, train_set):
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    model.train()
    for _ in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()


def spirals_too_short(model, train_set):
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for x, y in loader:  # one epoch
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def spirals_new_model(model, train_set):
    model = type(model)()  # trains a new model; the caller's stays untrained
    spirals_with_fit(model, train_set)


def spirals_normalises_in_place(model, train_set):
    points, _ = train_set.tensors
    points /= points.abs().max()  # the caller's data changes
    spirals_with_fit(model, train_set)


def spirals_diverges(model, train_set):
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=50.0, momentum=0.9)
    model.train()
    for _ in range(5):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()


def spirals_leaves_grad_off(model, train_set):
    spirals_with_fit(model, train_set)
    torch.set_grad_enabled(False)  # "for the evaluation afterwards"


ISSUE_18_CASES = [
    Accept(checks.check_to_class_targets, targets_max_indices),
    Accept(checks.check_to_class_targets, targets_loop),
    Accept(checks.check_to_class_targets, targets_last_dim_with_print),
    Reject(checks.check_to_class_targets, targets_flat_argmax, "shape"),
    Reject(checks.check_to_class_targets, targets_nonzero, "shape"),
    Accept(checks.check_binary_loss, bce_functional),
    Accept(checks.check_binary_loss, bce_by_formula),
    Accept(checks.check_binary_loss, bce_keywords),
    Accept(checks.check_accuracy, accuracy_loop),
    Accept(checks.check_accuracy, accuracy_count_over_numel),
    Accept(checks.check_accuracy, accuracy_max_double),
    Accept(checks.check_accuracy, accuracy_float_of_tensor),
    Reject(checks.check_accuracy, accuracy_mean_of_bools, "convert the bool or integer one with .float() first"),
    Reject(checks.check_fit_clipping, fit_without_zero_grad, "you forgot optimizer.zero_grad()"),
    Reject(checks.check_fit_schedule, fit_without_zero_grad, "you forgot optimizer.zero_grad()"),
    *[Accept(check, answer) for check in (checks.check_train_one_epoch_updates, checks.check_train_one_epoch_loss,
                                           checks.check_train_one_epoch)
      for answer in (epoch_model_zero_grad_and_keywords, epoch_float_of_loss)],
    # gradients cleared only after the step: the first update adds the model's leftover gradients (a reversal of an
    # earlier decision that accepted it, when no check handed over a model holding gradients)
    Reject(checks.check_train_one_epoch_updates, epoch_zero_grad_at_end_with_print, "arrived holding gradients"),
    Reject(checks.check_train_one_epoch_loss, epoch_zero_grad_at_end_with_print, "the parameter updates differ"),
    Reject(checks.check_train_one_epoch_updates, epoch_reseeds, "reseeded it"),
    Reject(checks.check_train_one_epoch_updates, epoch_extra_draw, "drew random numbers of its own"),
    Reject(checks.check_train_one_epoch_updates, epoch_shuffles_dataset_in_place, "changed"),
    *[Accept(check, answer) for check in (checks.check_evaluate_modes, checks.check_evaluate_values,
                                           checks.check_evaluate)
      for answer in (evaluate_decorated, evaluate_concatenated, evaluate_restores_mode)],
    Reject(checks.check_evaluate_values, evaluate_tensor_values, "Python float"),
    Reject(checks.check_evaluate_modes, evaluate_draws, "global random"),
    *[Accept(check, answer) for check in (checks.check_fit_schedule, checks.check_fit_clipping,
                                           checks.check_fit_history)
      for answer in (fit_keywords_zero_grad_after, fit_by_epochs, fit_clip_by_hand)],
    Reject(checks.check_fit_schedule, fit_reseeds, "global random generator"),
    Accept(checks.check_make_optimizer, optimizer_by_table),
    Accept(checks.check_make_optimizer, optimizer_by_match),
    Accept(checks.check_make_optimizer, optimizer_lowercased_with_print),
    Reject(checks.check_make_optimizer, optimizer_pops_params, "changed the list"),
    Accept(checks.check_classify, classify_inference_mode),
    Accept(checks.check_classify, classify_restores_mode),
    Accept(checks.check_classify, classify_batched),
    Accept(checks.check_train_spirals, ref.train_spirals),
    Accept(checks.check_train_spirals, spirals_own_loop_constant_adam),
    Accept(checks.check_train_spirals, spirals_sgd_one_cycle),
    Accept(checks.check_train_spirals, spirals_full_batch),
    Reject(checks.check_train_spirals, spirals_tutorial_sgd, "the target is 98%"),
    Reject(checks.check_train_spirals, spirals_too_short, "the target is 98%"),
    Reject(checks.check_train_spirals, spirals_new_model, "initial weights still"),
    Reject(checks.check_train_spirals, spirals_normalises_in_place, "changed"),
    Reject(checks.check_train_spirals, spirals_diverges, "nan"),
    Reject(checks.check_train_spirals, spirals_leaves_grad_off, "gradient tracking"),
]

# ---------------------------------------------------------------- issue 18, independent learner: classes of mistakes


def targets_amax(one_hot):
    return torch.amax(one_hot, dim=1).long()  # the largest value, not its position


def targets_nonzero_columns(one_hot):
    return torch.nonzero(one_hot, as_tuple=True)[1]


def targets_expected_class(one_hot):
    return (one_hot @ torch.arange(one_hot.shape[1], dtype=one_hot.dtype)).long()


def bce_swapped(logits, labels):
    return nn.BCEWithLogitsLoss()(labels.float(), logits)


def bce_softmax(logits, labels):
    return nn.functional.cross_entropy(logits, labels.float())


def accuracy_floor_division(logits, targets):
    return (logits.argmax(dim=1) == targets).sum().item() // targets.numel()


def accuracy_max_values(logits, targets):
    return (logits.amax(dim=1) == targets).float().mean().item()


def accuracy_over_classes(logits, targets):
    return (logits.argmax(dim=1) == targets).sum().item() / logits.size(-1)


def epoch_stacks_loss_tensors(model, loader, loss_fn, optimizer, device):
    model.train()
    weighted, count = [], 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        weighted.append(loss * len(targets))  # each keeps its batch's graph
        count += len(targets)
    return torch.stack(weighted).sum().item() / count


def epoch_full_batches_count(model, loader, loss_fn, optimizer, device):
    model.train()
    total = 0.0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
    return total / (len(loader) * loader.batch_size)


def epoch_own_loss(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = nn.CrossEntropyLoss()(model(inputs), targets)  # not the loss_fn it was given
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def evaluate_back_to_train(model, loader, loss_fn, device):
    result = ref.evaluate(model, loader, loss_fn, device)
    model.train(True)  # "back to training" whatever mode it came in
    return result


def evaluate_own_loss(model, loader, loss_fn, device):
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total += nn.CrossEntropyLoss(reduction="sum")(logits, targets).item()
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total / count, correct / count


def evaluate_restores_each_submodule(model, loader, loss_fn, device):
    before = {name: m.training for name, m in model.named_modules()}
    result = ref.evaluate(model, loader, loss_fn, device)
    for name, m in model.named_modules():
        m.training = before[name]
    return result


def optimizer_builds_all(kind, params, lr):
    built = {"sgd": torch.optim.SGD(params, lr=lr, momentum=0.9), "adam": torch.optim.Adam(params, lr=lr),
             "adamw": torch.optim.AdamW(params, lr=lr, weight_decay=0.01)}
    return built[kind]


def optimizer_listed_first(kind, params, lr):
    params = list(params)  # read once, usable by every branch
    return ref.make_optimizer(kind, params, lr)


def classify_stays_on_device(model, images):
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1)


def classify_notebook_device(model, images):
    model.eval()
    with torch.no_grad():
        return model(images.to(DEVICE)).argmax(dim=1).cpu()  # noqa: F821 - the notebook's global


def classify_to_cpu_keyword(model, images):
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        return model(images.to(device=device)).max(dim=1).indices.to(device="cpu")


LEARNER_CLASSES = [
    Reject(checks.check_to_class_targets, targets_amax, "largest value, not its position"),
    Reject(checks.check_to_class_targets, targets_nonzero_columns, "nonzero() lists every nonzero entry"),
    Reject(checks.check_to_class_targets, targets_expected_class, "probability-weighted average"),
    Reject(checks.check_binary_loss, bce_swapped, "arguments are swapped"),
    Reject(checks.check_binary_loss, bce_softmax, "that is CrossEntropyLoss"),
    Reject(checks.check_accuracy, accuracy_floor_division, "integer division"),
    Reject(checks.check_accuracy, accuracy_max_values, "largest score"),
    Reject(checks.check_accuracy, accuracy_over_classes, "number of classes"),
    Reject(checks.check_train_one_epoch_loss, epoch_stacks_loss_tensors, "graphs of earlier batches were still alive"),
    Reject(checks.check_train_one_epoch_loss, epoch_full_batches_count, "batch_size x number of batches"),
    Reject(checks.check_train_one_epoch_loss, epoch_weights_by_loader_batch_size, "by the full batch size"),
    Reject(checks.check_evaluate_values, evaluate_counts_full_batches, "batch_size x number of batches"),
    Reject(checks.check_evaluate_values, evaluate_accuracy_over_full_batches,
           "divided the correct predictions by batch_size x number of batches"),
    Reject(checks.check_train_one_epoch_updates, epoch_own_loss, "loss_fn you were given"),
    Reject(checks.check_evaluate_modes, evaluate_back_to_train, "handed over in eval mode was left in training mode"),
    Reject(checks.check_evaluate_values, evaluate_own_loss, "loss_fn you were given"),
    *[Accept(check, evaluate_restores_each_submodule)
      for check in (checks.check_evaluate_modes, checks.check_evaluate_values)],
    Reject(checks.check_make_optimizer, optimizer_builds_all, "can be read only once"),
    Accept(checks.check_make_optimizer, optimizer_listed_first),
    Reject(checks.check_classify, classify_stays_on_device, "call .cpu()"),
    Reject(checks.check_classify, classify_notebook_device, "notebook's DEVICE"),
    Accept(checks.check_classify, classify_to_cpu_keyword),
]

CASES = CASES + ISSUE_18_CASES + LEARNER_CLASSES


def fit_own_loss(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)  # not the loss_fn it was given
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
    return history


CASES = CASES + [Reject(checks.check_fit_schedule, fit_own_loss, "loss_fn you were given")]


# ---------------------------------------------------------------- issue 18, independent round 3: classes of mistakes


def accuracy_column_of_predictions(logits, targets):
    # [N, 1] predictions against [N] targets: the comparison broadcasts to an N x N table
    predictions = logits.max(dim=1, keepdim=True).indices
    return torch.eq(predictions, targets).float().mean().item()


def accuracy_softmax_over_batch(logits, targets):
    probabilities = nn.functional.softmax(logits, dim=0)  # normalises each class over the batch
    return (probabilities.argmax(dim=-1) == targets).double().mean().item()


def fit_clips_layer_by_layer(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    def clip_each_layer():
        for layer in model.modules():
            for parameter in layer.parameters(recurse=False):
                nn.utils.clip_grad_norm_(parameter, max_norm)
    return _fit_loop(model, loader, loss_fn, optimizer, scheduler, epochs, clip_each_layer)


def fit_logs_a_recomputed_loss(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # two mistakes: a fixed clipping norm, and the history records a loss computed after the update
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss_fn(model(inputs), targets).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            with torch.no_grad():
                history.append(loss_fn(model(inputs), targets).item())
    return history


def fit_schedule_per_epoch_logging_twice(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # the schedule is stepped once per epoch; the history itself is right, but the loss is computed twice per batch
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            logits = model(inputs)
            loss_fn(logits, targets).backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            history.append(loss_fn(logits, targets).item())
        scheduler.step()
    return history


ROUND_3_CLASSES = [
    Reject(checks.check_accuracy, accuracy_column_of_predictions, "broadcast to a 4 x 4 table"),
    Reject(checks.check_accuracy, accuracy_softmax_over_batch, "softmax over dim=0"),
    Reject(checks.check_fit_clipping, fit_clips_layer_by_layer, "clipped each parameter's gradient"),
    # the history cell grades the history against the losses of the learner's own run
    Reject(checks.check_fit_history, fit_logs_a_recomputed_loss, "the loss your run computed for batch 0"),
    # ... and, where it cannot tell them apart, says that the updates are the cause
    Reject(checks.check_fit_history, fit_schedule_per_epoch_logging_twice, "fix the updates first"),
]

CASES = CASES + ROUND_3_CLASSES


# ---------------------------------------------------------------- round 5: rules the outputs did not show


def spirals_on_fresh_points(model, train_set):
    """Wrong: trains on spirals it draws itself (more points, seed of its own) instead of on train_set."""
    points, rows = checks.make_spirals(3 * len(train_set), seed=77).tensors
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(points, rows.argmax(dim=1)),
                                         batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(25):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()


def optimizer_adam_default_lr(kind, params, lr):
    """Wrong: the 'adam' branch leaves out lr=, so Adam runs at its default 1e-3."""
    builders = {"sgd": lambda: torch.optim.SGD(params, lr=lr, momentum=0.9),
                "adam": lambda: torch.optim.Adam(params),
                "adamw": lambda: torch.optim.AdamW(params, lr=lr, weight_decay=0.01)}
    return builders[kind]()


def targets_flat_argmax(one_hot):
    """Wrong: argmax with no dim, over the flattened rows."""
    return torch.argmax(one_hot)


def bce_as_cross_entropy(logits, labels):
    """Wrong: the multi-class loss for yes/no labels."""
    return nn.CrossEntropyLoss()(logits, labels)


CASES = CASES + [
    Reject(checks.check_train_spirals, spirals_on_fresh_points, "train on the train_set you are given"),
    Reject(checks.check_make_optimizer, optimizer_adam_default_lr, "use the lr argument (0.003)"),
    Reject(checks.check_to_class_targets, targets_flat_argmax, "argmax without dim= indexes the flattened tensor"),
    Reject(checks.check_binary_loss, bce_as_cross_entropy, "each score here is its own yes/no decision"),
]


# ---------------------------------------------------------------- round 5: a learner who never read the checks


def classify_moves_the_model(model, images):
    # runs everything on the CPU by moving the caller's model there
    model = model.cpu()
    model.eval()
    with torch.no_grad():
        return model(images.cpu()).argmax(dim=1)


def classify_moves_the_model_by_name(model, images):
    model.to("cpu").eval()
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


def classify_to_own_device(model, images):
    # also correct: moving the model to the device it is on changes nothing
    device = next(model.parameters()).device
    model.to(device).eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1).cpu()


def classify_on_a_copy(model, images):
    # also correct (if slow): a copy on the CPU leaves the caller's model where it is
    import copy

    on_cpu = copy.deepcopy(model).cpu().eval()
    with torch.no_grad():
        return on_cpu(images.cpu()).argmax(dim=1)


CASES = CASES + [
    Reject(checks.check_classify, classify_moves_the_model, "moved the model it was given to the CPU (model.cpu())"),
    Reject(checks.check_classify, classify_moves_the_model_by_name, "(model.to('cpu'))"),
    Accept(checks.check_classify, classify_to_own_device),
    Accept(checks.check_classify, classify_on_a_copy),
]


# from a learner tester: clipping that scales small gradients up, and a scheduler of the function's own
CASES += [
    Reject(checks.check_fit_clipping, fit_always_rescales, "a smaller one up too"),
    Reject(checks.check_fit_schedule, fit_always_rescales, "a smaller one up too"),
    Reject(checks.check_fit_clipping, fit_own_one_cycle, "you stepped a scheduler of your own"),
    Reject(checks.check_fit_schedule, fit_own_one_cycle, "you stepped a scheduler of your own"),
]


def epoch_counts_samples_first(model, loader, loss_fn, optimizer, device):
    """Wrong: a first pass over the loader to count the samples draws a shuffle, so training sees another order."""
    n_samples = sum(len(targets) for _, targets in loader)
    model.train()
    total = 0.0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
    return total / n_samples


def accuracy_target_probability(logits, targets):
    """Wrong: counts a row right when its target's probability is over 0.5 (not the largest score)."""
    return (logits.softmax(dim=1).gather(1, targets[:, None]) > 0.5).float().mean().item()


def accuracy_down_the_batch(logits, targets):
    """Wrong: argmax over dim=0."""
    return (logits.argmax(dim=0) == targets).float().mean().item()


CASES += [
    Reject(checks.check_train_one_epoch_updates, epoch_counts_samples_first,
           "your function went through the loader 2 times"),
    Reject(checks.check_accuracy, accuracy_down_the_batch, "you took argmax over dim=0"),
    Reject(checks.check_accuracy, accuracy_target_probability, "its target's probability is over 0.5"),
]



# From a third learner tester who never read the checks (lesson 05).
def make_optimizer_sgd_with_decay(kind, params, lr):  # the task's SGD has momentum=0.9 and nothing else
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=0.01)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


def make_optimizer_foreach(kind, params, lr):  # how PyTorch runs the step is free
    settings = {"sgd": (torch.optim.SGD, {"momentum": 0.9}), "adam": (torch.optim.Adam, {}),
                "adamw": (torch.optim.AdamW, {"weight_decay": 0.01})}
    cls, extra = settings[kind]
    return cls(params, lr=lr, foreach=True, **extra)


CASES += [
    Reject(checks.check_make_optimizer, make_optimizer_sgd_with_decay, "your SGD has weight_decay=0.01"),
    Accept(checks.check_make_optimizer, make_optimizer_foreach),
]


# Messages that had been generic (from the third lesson 05 tester).
def accuracy_over_numel(logits, targets):
    return (logits.argmax(dim=1) == targets).sum().item() / logits.numel()


def evaluate_batch_means_over_samples(model, loader, loss_fn, device):
    # each batch's mean loss added, then divided by the number of samples: the sizes divided out twice
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            total_loss += loss_fn(logits, targets).item()
            correct += (logits.argmax(dim=1) == targets).sum().item()
            count += len(targets)
    return total_loss / count, correct / count


CASES += [
    Reject(checks.check_accuracy, accuracy_over_numel, "you divided by logits.numel()"),
    Reject(checks.check_evaluate_values, evaluate_batch_means_over_samples, "the sizes were divided out twice"),
]


# ---------------------------------------------------------------- from a fourth learner tester


def bce_detached_leaf(logits, labels):
    # a loss of the right value on a copy of the logits: its graph never reaches the caller's
    return nn.BCEWithLogitsLoss()(logits.detach().requires_grad_(), labels.float())


def bce_log1p_exp(logits, labels):
    # exact for moderate logits; exp overflows to inf past about 88 in float32
    return (torch.log1p(torch.exp(logits)) - labels * logits).mean()


def bce_float64(logits, labels):
    return nn.functional.binary_cross_entropy_with_logits(logits.double(), labels.double())


def epoch_loss_times_batch_size(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        (loss * len(targets)).backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_clipped(model, loader, loss_fn, optimizer, device):
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


CASES += [
    Reject(checks.check_binary_loss, bce_detached_leaf, "does not reach the logits it was given"),
    Reject(checks.check_binary_loss, bce_log1p_exp, "the result is inf or nan"),
    Reject(checks.check_binary_loss, bce_float64, "dtype"),
    Reject(checks.check_train_one_epoch_updates, epoch_loss_times_batch_size, "multiplied by its number of samples"),
    Reject(checks.check_train_one_epoch_updates, epoch_clipped, "the gradients were clipped"),
]


def epoch_logs_loss_after_step(model, loader, loss_fn, optimizer, device):
    # a second forward under no_grad after the step, to log the loss
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
        with torch.no_grad():
            total += loss_fn(model(inputs), targets).item() * len(targets)
        count += len(targets)
    return total / count


CASES += [
    Reject(checks.check_train_one_epoch_updates, epoch_logs_loss_after_step, "ran 3 more without gradient tracking"),
]


def targets_by_topk(one_hot):
    # squeeze() without a dim: a batch of one loses its batch dimension
    return one_hot.topk(1, dim=1).indices.squeeze()


def classify_on_available_gpu(model, images):
    # the device guessed from the machine, not taken from the model
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1).cpu()


CASES += [
    Reject(checks.check_to_class_targets, targets_by_topk, "squeeze()"),
    Reject(checks.check_classify, classify_on_available_gpu, "take the device from the model itself"),
]


def epoch_zero_grad_on_model_first(model, loader, loss_fn, optimizer, device):
    # gradients cleared through the model, before each backward; the batch unpacked by a generator expression
    model.train(True)
    total, count = 0.0, 0
    for batch in loader:
        inputs, targets = (t.to(device) for t in batch)
        model.zero_grad(set_to_none=False)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += float(loss) * targets.shape[0]
        count += targets.shape[0]
    return total / count


CASES += [Accept(check, epoch_zero_grad_on_model_first)
          for check in (checks.check_train_one_epoch_updates, checks.check_train_one_epoch_loss,
                        checks.check_train_one_epoch)]


def epoch_train_mode_at_end_of_loop(model, loader, loss_fn, optimizer, device):
    # model.train() at the end of the loop body: the first batch trains in eval mode
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
        model.train()
    return total / count


CASES += [
    Reject(checks.check_train_one_epoch_updates, epoch_train_mode_at_end_of_loop, "forward pass(es) [1] of"),
]


def binary_loss_clamped_probabilities(logits, labels):
    """Sigmoid, then probabilities clamped to [1e-7, 1 - 1e-7] against log(0): the loss stops growing at 16.1."""
    p = torch.sigmoid(logits).clamp(1e-7, 1 - 1e-7)
    y = labels.float()
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def binary_loss_clamped_log(logits, labels):
    """log-probabilities clamped at -20: right until a logit is 20 past the wrong side."""
    y = labels.float()
    log_p, log_not_p = F.logsigmoid(logits).clamp(min=-20), F.logsigmoid(-logits).clamp(min=-20)
    return -(y * log_p + (1 - y) * log_not_p).mean()


CASES += [
    Reject(checks.check_binary_loss, binary_loss_clamped_probabilities, "your loss is 15.94 both times"),
    Reject(checks.check_binary_loss, binary_loss_clamped_log, "your loss is 20 both times"),
]


# ---------------------------------------------------------------- a learner tester's findings (lesson 05)

BATCH_SIZE = 64  # the notebook's global batch size, which a wrong answer below uses


def targets_threshold_half(one_hot):
    # wrong: a row whose largest probability is below 0.5 has no entry left
    return (one_hot > 0.5).long().argmax(dim=1)


def targets_cast_long_first(one_hot):
    # wrong: .long() turns every probability below 1 into 0
    return one_hot.long().argmax(dim=1)


def targets_by_row_loop(one_hot):
    out = []
    for row in one_hot:
        best = 0
        for j in range(len(row)):
            if row[j] > row[best]:
                best = j
        out.append(best)
    return torch.tensor(out, dtype=torch.long, device=one_hot.device)


def targets_softmax_first(one_hot):
    return torch.softmax(one_hot.float(), dim=1).argmax(dim=1).long()


CASES += [
    Reject(checks.check_to_class_targets, targets_threshold_half, "largest probability is below 0.5"),
    Reject(checks.check_to_class_targets, targets_cast_long_first, "turns every probability below 1 into 0"),
    Accept(checks.check_to_class_targets, targets_by_row_loop),
    Accept(checks.check_to_class_targets, targets_softmax_first),
]


def fit_zero_grad_after_step(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # wrong: never cleared before the first backward, which adds to the gradients the model came with
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            history.append(loss.item())
    return history


def fit_zero_grad_before_loop_and_after_step(model, loader, loss_fn, optimizer, scheduler, device, epochs=1,
                                             max_norm=1.0):
    # right: cleared before the first batch and after every step
    model.train()
    optimizer.zero_grad()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            loss = loss_fn(model(inputs.to(device)), targets.to(device))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=False)
            history.append(loss.item())
    return history


def fit_l1_clipping(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # wrong: the L1 norm is larger than the L2 norm: over-clips
    model.train()
    history = []
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=1)
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
    return history


def fit_schedule_started_before_loop(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):
    # wrong: one scheduler.step() up front (after an optimizer.step(), against PyTorch's warning): one step ahead
    model.train()
    history = []
    optimizer.step()
    scheduler.step()
    for _ in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            if len(history) < epochs * len(loader) - 1:
                scheduler.step()
            history.append(loss.item())
    return history


CASES += [
    Reject(checks.check_fit_schedule, fit_zero_grad_after_step, "arrived holding gradients of an earlier step"),
    Reject(checks.check_fit_clipping, fit_zero_grad_after_step, "before backward: cleared only after the step"),
    Accept(checks.check_fit_schedule, fit_zero_grad_before_loop_and_after_step),
    Accept(checks.check_fit_clipping, fit_zero_grad_before_loop_and_after_step),
    Accept(checks.check_fit_history, fit_zero_grad_before_loop_and_after_step),
    Reject(checks.check_fit_clipping, fit_l1_clipping, "you clipped the L1 norm"),
    Reject(checks.check_fit_schedule, fit_schedule_started_before_loop, "the schedule is one step ahead"),
    Reject(checks.check_fit_clipping, fit_schedule_started_before_loop, "the optimizer.step() before the loop"),
]


def classify_device_from_buffers(model, images):
    # wrong: the model has no buffers, so the device is always the fallback's, the CPU
    device = next(model.buffers(), torch.empty(0)).device
    model.eval()
    with torch.no_grad():
        return model(images.to(device)).argmax(dim=1).cpu()


def classify_image_by_image(model, images):
    device = next(iter(model.parameters())).device
    was = model.training
    model.eval()
    preds = []
    with torch.inference_mode():
        for img in images:
            preds.append(model(img.unsqueeze(0).to(device)).argmax(dim=1).to("cpu"))
    model.train(was)
    return torch.cat(preds).long()


@torch.no_grad()
def classify_to_a_parameter(model, images):
    # the device given as a tensor: .to(other) moves to other's device
    model.eval()
    return torch.max(model(images.to(next(model.parameters()))), dim=1).indices.to(torch.device("cpu"), torch.int64)


def classify_moves_model_to_images(model, images):
    # wrong: the model is moved to where the images are (the CPU), the images "to the model's device" after it
    model.to(images.device).eval()
    with torch.no_grad():
        return model(images.to(next(model.parameters()).device)).argmax(dim=1).cpu()


CASES += [
    Reject(checks.check_classify, classify_device_from_buffers, "the images reached the model still on the CPU"),
    Reject(checks.check_classify, classify_moves_model_to_images, "moved the model it was given"),
    Accept(checks.check_classify, classify_image_by_image),
    Accept(checks.check_classify, classify_to_a_parameter),
]


def accuracy_argmin(logits, targets):
    # wrong: predictions at the smallest scores
    return (logits.argmin(dim=1) == targets).float().mean().item()


def accuracy_integer_division(logits, targets):
    # wrong: // drops the fraction
    return (logits.argmax(dim=1) == targets).sum().item() // len(targets)


def accuracy_by_python_loop(logits, targets):
    correct = 0
    for row, t in zip(logits.tolist(), targets.tolist()):
        if row.index(max(row)) == t:
            correct += 1
    return correct / len(targets)


CASES += [
    Reject(checks.check_accuracy, accuracy_argmin, "the position of each row's smallest score"),
    Reject(checks.check_accuracy, accuracy_integer_division, "// is integer division"),
    Accept(checks.check_accuracy, accuracy_by_python_loop),
]


_OPTIMIZER_CACHE = {}


def optimizer_cached(kind, params, lr):
    # wrong: the optimizer of the first call comes back on every later one
    if kind not in _OPTIMIZER_CACHE:
        if kind == "sgd":
            _OPTIMIZER_CACHE[kind] = torch.optim.SGD(params, lr=lr, momentum=0.9)
        elif kind == "adam":
            _OPTIMIZER_CACHE[kind] = torch.optim.Adam(params, lr=lr)
        else:
            _OPTIMIZER_CACHE[kind] = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    return _OPTIMIZER_CACHE[kind]


def optimizer_from_table(kind, params, lr):
    table = {"sgd": (torch.optim.SGD, {"momentum": 0.9}), "adam": (torch.optim.Adam, {}),
             "adamw": (torch.optim.AdamW, {"weight_decay": 1e-2})}
    cls, kwargs = table[kind]
    return cls(list(params), lr=lr, **kwargs)


def reset_optimizer_cache(kind, params, lr):
    # the wrong answer above, its cache emptied at the check's first call (SGD with a list) so that every run of the
    # check starts alike; the check's next call (SGD with a generator) gets the cached optimizer
    if kind == "sgd" and isinstance(params, list):
        _OPTIMIZER_CACHE.clear()
    return optimizer_cached(kind, params, lr)


CASES += [
    Reject(checks.check_make_optimizer, reset_optimizer_cache, "the optimizer returned is the one built on an earlier call"),
    Accept(checks.check_make_optimizer, optimizer_from_table),
]


def bce_swapped_with_probabilities(logits, labels):
    # wrong: the labels as the scores, the probabilities as the targets
    return F.binary_cross_entropy_with_logits(labels.float(), torch.sigmoid(logits))


def bce_summed_over_labels(logits, labels):
    # wrong: summed over each row's labels, then averaged over the rows
    per = F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="none")
    return per.sum(dim=-1).mean() if per.dim() > 1 else per.mean()


def bce_logsigmoid(logits, labels):
    y = labels.to(logits.dtype)
    return -(y * F.logsigmoid(logits) + (1 - y) * F.logsigmoid(-logits)).mean()


def bce_two_class_cross_entropy(logits, labels):
    two = torch.stack([torch.zeros_like(logits), logits], dim=-1).reshape(-1, 2)
    return F.cross_entropy(two, labels.reshape(-1).long())


CASES += [
    Reject(checks.check_binary_loss, bce_swapped_with_probabilities, "probabilities (sigmoid of the logits) as the targets"),
    Reject(checks.check_binary_loss, bce_summed_over_labels, "summed over the 3 labels of each row"),
    Accept(checks.check_binary_loss, bce_logsigmoid),
    Accept(checks.check_binary_loss, bce_two_class_cross_entropy),
]


def epoch_clipped(model, loader, loss_fn, optimizer, device):
    # wrong: the gradients clipped between backward and step
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_gradients_halved(model, loader, loss_fn, optimizer, device):
    # wrong: the gradients scaled between backward and step (no clipping twin matches this one)
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        for parameter in model.parameters():
            parameter.grad.mul_(0.5)
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


def epoch_weighted_by_global_batch_size(model, loader, loss_fn, optimizer, device):
    # wrong: every batch weighted by the notebook's BATCH_SIZE, not its own size
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * BATCH_SIZE
        count += len(targets)
    return total / count


CASES += [
    Reject(checks.check_train_one_epoch_updates, epoch_clipped, "between backward() and step()"),
    Reject(checks.check_train_one_epoch_updates, epoch_gradients_halved,
           "the gradients were changed between backward() and step() (clipping?)"),
    Reject(checks.check_train_one_epoch_loss, epoch_weighted_by_global_batch_size, "not a fixed number"),
]


def evaluate_on_probabilities(model, loader, loss_fn, device):
    # wrong: the loss of the softmax, not of the logits
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            probs = model(inputs).softmax(dim=1)
            total_loss += loss_fn(probs, targets).item() * len(targets)
            correct += (probs.argmax(1) == targets).sum().item()
            count += len(targets)
    return total_loss / count, correct / count


def evaluate_totals_in_default(model, loader, loss_fn, device, totals=[0.0, 0, 0]):  # noqa: B006 - the mistake
    # wrong: the default list is made once and every call adds to it
    model.eval()
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            totals[0] += loss_fn(logits, targets).item() * len(targets)
            totals[1] += (logits.argmax(1) == targets).sum().item()
            totals[2] += len(targets)
    return totals[0] / totals[2], totals[1] / totals[2]



def evaluate_one_loss_call(model, loader, loss_fn, device):
    model.eval()
    outs, ys = [], []
    with torch.set_grad_enabled(False):
        for x, y in loader:
            outs.append(model(x.to(device)))
            ys.append(y.to(device))
    logits, targets = torch.cat(outs), torch.cat(ys)
    return loss_fn(logits, targets).item(), (logits.argmax(1) == targets).float().mean().item()


CASES += [
    Reject(checks.check_evaluate_values, evaluate_on_probabilities, "you passed probabilities to the loss"),
    Reject(checks.check_evaluate_values, evaluate_totals_in_default, "keeps totals from earlier calls"),
    Reject(checks.check_evaluate_values, evaluate_totals_in_default, "a mutable default argument"),
    Accept(checks.check_evaluate_values, evaluate_one_loss_call),
]
