"""Plausible wrong answers for lesson 07 (Training faster)."""

from __future__ import annotations

import statistics
import time

import torch
from torch.utils.checkpoint import checkpoint

from helpers.checks import faster as checks
from helpers.reference import faster as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- synchronize


def sync_always_cuda(device):
    torch.cuda.synchronize()


def sync_cuda_only(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sync_current_gpu(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def sync_nothing(device):
    return None


def sync_with_accelerator(device):
    # Correct too: torch.accelerator picks the machine's accelerator.
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


# ---------------------------------------------------------------- median_time


def time_without_warmup(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = clock()
        fn()
        synchronize(device)
        times.append(clock() - start)
    return statistics.median(times)


def time_without_sync(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def time_sync_only_after(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        synchronize(device)
        times.append(clock() - start)
    return statistics.median(times)


def time_sync_only_before(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _timed(fn, device, warmup, repeat, clock):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = clock()
        fn()
        synchronize(device)
        times.append(clock() - start)
    return times


def time_mean(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    return statistics.mean(_timed(fn, device, warmup, repeat, clock))


def time_min(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    return min(_timed(fn, device, warmup, repeat, clock))


def time_in_ms(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    return statistics.median(_timed(fn, device, warmup, repeat, clock)) * 1000


def time_total_over_repeat(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = clock()
    for _ in range(repeat):
        fn()
    synchronize(device)
    return (clock() - start) / repeat


def time_with_perf_counter(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_torch_median(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # Correct too: torch.median returns the lower of the two middle values for an even count.
    return torch.tensor(_timed(fn, device, warmup, repeat, clock), dtype=torch.float64).median().item()


def time_cuda_sync_everywhere(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = clock()
        fn()
        torch.cuda.synchronize()
        times.append(clock() - start)
    return statistics.median(times)


synchronize = ref.synchronize  # the learner's notebook has its own synchronize next to median_time

# ---------------------------------------------------------------- learning-rate scaling


def lr_inverted(base_lr, base_batch_size, batch_size):
    return base_lr * base_batch_size / batch_size


def lr_sqrt(base_lr, base_batch_size, batch_size):
    return base_lr * (batch_size / base_batch_size) ** 0.5


def lr_floor_division(base_lr, base_batch_size, batch_size):
    return base_lr * (batch_size // base_batch_size)


def lr_unchanged(base_lr, base_batch_size, batch_size):
    return base_lr


# ---------------------------------------------------------------- gradient accumulation


def accumulate_not_divided(model, optimizer, loss_fn, micro_batches):
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        total += loss.item() / len(micro_batches)
    optimizer.step()
    return total


def accumulate_step_every_micro_batch(model, optimizer, loss_fn, micro_batches):
    total = 0.0
    for inputs, targets in micro_batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets) / len(micro_batches)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total


def accumulate_zero_grad_inside(model, optimizer, loss_fn, micro_batches):
    total = 0.0
    for inputs, targets in micro_batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def accumulate_without_clearing(model, optimizer, loss_fn, micro_batches):
    total = 0.0
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()  # cleared after the step, so leftovers from before were used
    return total


def accumulate_returns_undivided_sum(model, optimizer, loss_fn, micro_batches):
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets)
        (loss / len(micro_batches)).backward()
        total += loss.item()
    optimizer.step()
    return total


def accumulate_with_modulo(model, optimizer, loss_fn, micro_batches):
    # Correct too: the usual loop with a step every k-th micro-batch.
    k = len(micro_batches)
    optimizer.zero_grad()
    total = 0.0
    for i, (inputs, targets) in enumerate(micro_batches):
        loss = loss_fn(model(inputs), targets) / k
        loss.backward()
        total += loss.item()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
    return total


# ---------------------------------------------------------------- mixed precision


def amp_no_autocast(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_cuda_device_type(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type="cuda", dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_always_bfloat16(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=torch.bfloat16):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_backward_inside_unscaled(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
        loss.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_backward_inside_scaled(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_without_update(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss.item()


def amp_unscaled_backward(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_optimizer_step(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()
    return loss.item()


def amp_update_before_step(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.update()
    scaler.step(optimizer)
    return loss.item()


def amp_returns_scaled_loss(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    return scaled.item()


def amp_with_unscale_for_clipping(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Correct too: unscale_ before clipping, then step and update.
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=100.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


# ---------------------------------------------------------------- activation checkpointing


def checkpoint_reentrant(blocks, inputs):
    x = inputs
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=True)
    return x


def checkpoint_default_variant(blocks, inputs):
    x = inputs
    for block in blocks:
        x = checkpoint(block, x)
    return x


def checkpoint_nothing(blocks, inputs):
    return blocks(inputs)


def checkpoint_all_but_first(blocks, inputs):
    x = blocks[0](inputs)
    for block in list(blocks)[1:]:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def checkpoint_under_no_grad(blocks, inputs):
    with torch.no_grad():
        return ref.checkpointed_forward(blocks, inputs)


def checkpoint_whole_model(blocks, inputs):
    # Correct too: one checkpoint around all blocks still recomputes every block.
    return checkpoint(blocks, inputs, use_reentrant=False)


# ---------------------------------------------------------------- losses on the device


def epoch_item_every_step(model, optimizer, loss_fn, batches):
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)


def epoch_float_every_step(model, optimizer, loss_fn, batches):
    total = 0.0
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += float(loss)
    return total / len(batches)


def epoch_zero_filled(model, optimizer, loss_fn, batches):
    total = 0.0
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return (total / len(batches)).item()


def epoch_never_zeroed(model, optimizer, loss_fn, batches):
    total = 0.0
    for inputs, targets in batches:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return (total / len(batches)).item()


def epoch_returns_sum(model, optimizer, loss_fn, batches):
    total = 0.0
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total.item()


def epoch_returns_tensor(model, optimizer, loss_fn, batches):
    total = 0.0
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total / len(batches)


def epoch_stacked_losses(model, optimizer, loss_fn, batches):
    # Correct too: keep the losses on the device in a list, one sync at the end.
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).mean().item()


CASES = [
    Accept(checks.check_synchronize, ref.synchronize),
    Accept(checks.check_synchronize, sync_with_accelerator),
    Reject(checks.check_synchronize, sync_always_cuda, "a CPU has nothing to wait for"),
    Reject(checks.check_synchronize, sync_cuda_only, "torch.mps.synchronize()"),
    Reject(checks.check_synchronize, sync_current_gpu, "not for GPU 1"),
    Reject(checks.check_synchronize, sync_nothing, "for a CUDA device call torch.cuda.synchronize(device)"),
    Accept(checks.check_median_time_sync, ref.median_time),
    Accept(checks.check_median_time_sync, time_torch_median),
    Reject(checks.check_median_time_sync, time_without_warmup, "there is no warm-up"),
    Reject(checks.check_median_time_sync, time_without_sync, "synchronize was never called"),
    Reject(checks.check_median_time_sync, time_sync_only_after, "started the clock while earlier work"),
    Reject(checks.check_median_time_sync, time_sync_only_before, "only the time to queue it"),
    Reject(checks.check_median_time_sync, time_with_perf_counter, "the clock you were given was never read"),
    Accept(checks.check_median_time_value, ref.median_time),
    Accept(checks.check_median_time_value, time_torch_median),
    Reject(checks.check_median_time_value, time_mean, "that is the mean of the timed runs"),
    Reject(checks.check_median_time_value, time_min, "the fastest run"),
    Reject(checks.check_median_time_value, time_in_ms, "milliseconds"),
    Reject(checks.check_median_time_value, time_total_over_repeat, "that is the mean of the timed runs"),
    Reject(checks.check_median_time_value, time_without_warmup, "there is no warm-up"),
    Reject(checks.check_median_time_value, time_cuda_sync_everywhere, "for a CPU device"),
    Accept(checks.check_scaled_learning_rate, ref.scaled_learning_rate),
    Reject(checks.check_scaled_learning_rate, lr_inverted, "upside down"),
    Reject(checks.check_scaled_learning_rate, lr_sqrt, "square-root rule"),
    Reject(checks.check_scaled_learning_rate, lr_floor_division, "integer division"),
    Reject(checks.check_scaled_learning_rate, lr_unchanged, "did not change"),
    Accept(checks.check_accumulation_update, ref.accumulated_step),
    Accept(checks.check_accumulation_update, accumulate_with_modulo),
    Reject(checks.check_accumulation_update, accumulate_not_divided, "divide each micro-batch's loss by k"),
    Reject(checks.check_accumulation_update, accumulate_zero_grad_inside, "zero_grad() inside the loop"),
    Reject(checks.check_accumulation_update, accumulate_without_clearing, "already in .grad"),
    Reject(checks.check_accumulation_update, accumulate_step_every_micro_batch, "once per micro-batch"),
    Accept(checks.check_accumulation_steps, ref.accumulated_step),
    Accept(checks.check_accumulation_steps, accumulate_with_modulo),
    Reject(checks.check_accumulation_steps, accumulate_step_every_micro_batch, "stepped after every micro-batch"),
    Reject(checks.check_accumulation_steps, accumulate_returns_undivided_sum, "times the mean"),
    Accept(checks.check_amp_autocast, ref.mixed_precision_step),
    Accept(checks.check_amp_autocast, amp_with_unscale_for_clipping),
    Reject(checks.check_amp_autocast, amp_no_autocast, "did not run under autocast"),
    Reject(checks.check_amp_autocast, amp_cuda_device_type, "you asked for device_type='cuda'"),
    Reject(checks.check_amp_autocast, amp_always_bfloat16, "autocast ran in torch.bfloat16"),
    Reject(checks.check_amp_autocast, amp_backward_inside_unscaled, "inside the autocast block on the unscaled float16"),
    Reject(checks.check_amp_autocast, amp_backward_inside_scaled, "backward ran inside the autocast block."),
    Accept(checks.check_amp_scaler, ref.mixed_precision_step),
    Accept(checks.check_amp_scaler, amp_with_unscale_for_clipping),
    Reject(checks.check_amp_scaler, amp_without_update, "scaler.update() was never called"),
    Reject(checks.check_amp_scaler, amp_unscaled_backward, "scaler.scale(loss) was never called"),
    Reject(checks.check_amp_scaler, amp_backward_inside_unscaled, "scaler.scale(loss) was never called"),
    Reject(checks.check_amp_scaler, amp_optimizer_step, "called optimizer.step() directly"),
    Reject(checks.check_amp_scaler, amp_update_before_step, "in the order"),
    Reject(checks.check_amp_scaler, amp_returns_scaled_loss, "that is the scaled loss"),
    Accept(checks.check_checkpointed_forward, ref.checkpointed_forward),
    Accept(checks.check_checkpointed_forward, checkpoint_whole_model),
    Reject(checks.check_checkpointed_forward, checkpoint_reentrant, "use_reentrant=True passes gradients only"),
    Reject(checks.check_checkpointed_forward, checkpoint_default_variant, "it still defaults to True"),
    Reject(checks.check_checkpointed_forward, checkpoint_nothing, "every block ran only once"),
    Reject(checks.check_checkpointed_forward, checkpoint_all_but_first, "block(s) 0 ran only once"),
    Reject(checks.check_checkpointed_forward, checkpoint_under_no_grad, "computed under torch.no_grad()"),
    Accept(checks.check_train_epoch_on_device, ref.train_epoch_on_device),
    Accept(checks.check_train_epoch_on_device, epoch_stacked_losses),
    Reject(checks.check_train_epoch_on_device, epoch_item_every_step, "calls of .item()"),
    Reject(checks.check_train_epoch_on_device, epoch_float_every_step, "calls of float()"),
    Reject(checks.check_train_epoch_on_device, epoch_zero_filled, "tensors of zeros"),
    Reject(checks.check_train_epoch_on_device, epoch_never_zeroed, "left over from the previous step"),
    Reject(checks.check_train_epoch_on_device, epoch_returns_sum, "the sum over the"),
    Reject(checks.check_train_epoch_on_device, epoch_returns_tensor, "should return a Python float"),
]
