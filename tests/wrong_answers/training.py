"""Lesson 05 Training and evaluation: the reference passes, plausible wrong answers fail by name."""

import torch
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
    # Correct, only less stable numerically: must be accepted.
    return nn.BCELoss()(torch.sigmoid(logits), labels.float())


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
    Accept(checks.check_binary_loss, bce_probabilities),
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
