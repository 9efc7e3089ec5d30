"""Plausible wrong answers for lesson 07 (Training faster)."""

from __future__ import annotations

import contextlib
import statistics
import time
from unittest import mock

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


def sync_accelerator_by_keyword(device):
    # Wrong: torch.accelerator.synchronize's device is positional-only, so the real call raises TypeError.
    if device.type != "cpu":
        torch.accelerator.synchronize(device=device)


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
    # torch.median returns the lower of the two middle values for an even count: not statistics.median there.
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


def amp_model_converted(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Wrong: the weights converted to 16 bits instead of autocast
    optimizer.zero_grad()
    model.to(dtype)
    loss = loss_fn(model(inputs.to(dtype)), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
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
    # One checkpoint around all blocks: every block is recomputed, but all at once, not each under its own.
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


def epoch_returns_last_loss(model, optimizer, loss_fn, batches):
    # Wrong: the last batch's loss, read once (no graph kept alive: it is the loss itself), not the mean
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


def epoch_zero_between_backward_and_step(model, optimizer, loss_fn, batches):
    # Wrong: zero_grad clears what backward wrote, so every step finds no gradient
    total = 0.0
    for inputs, targets in batches:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        total = total + loss.detach()
    return (total / len(batches)).item()


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


def epoch_copied_then_read(model, optimizer, loss_fn, batches):
    # Correct too: one copy to the host, then its value (on a GPU only the copy waits)
    total = torch.zeros(())
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return (total / len(batches)).cpu().item()


# ---------------------------------------------------------------- written differently, and the default rules


def sync_keyword(device):
    # Correct: the device by keyword, and the CPU handled first.
    if device.type == "cpu":
        return
    if device.type == "cuda":
        torch.cuda.synchronize(device=device)
    else:
        torch.mps.synchronize()


def sync_match(device):
    # Correct: a match statement on the device type, with an extra print.
    match device.type:
        case "cuda":
            torch.cuda.synchronize(device)
        case "mps":
            torch.mps.synchronize()
        case _:
            print("nothing to wait for on", device)


def sync_mps_with_device(device):
    # torch.mps.synchronize() takes no argument: the real one raises TypeError.
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize(device)


def sync_cuda_for_every_gpu(device):
    # The real torch.cuda.synchronize raises ValueError for an 'mps' device.
    if device.type != "cpu":
        torch.cuda.synchronize(device)


def time_median_as_tensor(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # Wrong: the right median, as a 0-d tensor
    return torch.tensor(_timed(fn, device, warmup, repeat, clock), dtype=torch.float64).quantile(0.5)


def time_numpy_median(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # Correct: a while loop for the warm-up and NumPy's median.
    import numpy as np
    done = 0
    while done < warmup:
        fn()
        done += 1
    times = []
    for _ in range(repeat):
        synchronize(device)
        start = clock()
        fn()
        synchronize(device)
        times.append(clock() - start)
    return float(np.median(times))


def lr_ratio_first(base_lr, base_batch_size, batch_size):
    # Correct: the ratio first, keyword-free.
    ratio = batch_size / base_batch_size
    return ratio * base_lr


def lr_divided(base_lr, base_batch_size, batch_size):
    # Correct: the learning rate per sample, times the new batch size.
    return float(base_lr / base_batch_size * batch_size)


def accumulate_steps_after_the_first(model, optimizer, loss_fn, micro_batches):
    # Wrong: `if i % k == 0` with i from 0 steps after the first micro-batch, before the others' gradients
    optimizer.zero_grad()
    k = len(micro_batches)
    total = 0.0
    for i, (inputs, targets) in enumerate(micro_batches):
        loss = loss_fn(model(inputs), targets) / k
        loss.backward()
        total += loss.item()
        if i % k == 0:
            optimizer.step()
    return total


def accumulate_with_its_own_loss(model, optimizer, loss_fn, micro_batches):
    # Right in what it computes: nn.CrossEntropyLoss is the loss the caller hands over
    criterion = torch.nn.CrossEntropyLoss()
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        loss = criterion(model(inputs), targets) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def accumulate_concatenated(model, optimizer, loss_fn, micro_batches):
    # Wrong in purpose: the same step, from the micro-batches joined into the large batch (its memory too)
    optimizer.zero_grad()
    inputs = torch.cat([x for x, _ in micro_batches])
    targets = torch.cat([y for _, y in micro_batches])
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def accumulate_one_backward(model, optimizer, loss_fn, micro_batches):
    # The same step, but one backward on the mean of the losses: every micro-batch's graph stays in memory until
    # then, the large batch's memory that accumulation avoids (a third lesson 07 tester: torch.cat is rejected for it)
    optimizer.zero_grad()
    losses = [loss_fn(model(x), y) for x, y in micro_batches]
    loss = torch.stack(losses).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def accumulate_pops_the_list(model, optimizer, loss_fn, micro_batches):
    # Empties the caller's list.
    optimizer.zero_grad()
    k = len(micro_batches)
    total = 0.0
    while micro_batches:
        x, y = micro_batches.pop()
        loss = loss_fn(model(x), y) / k
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def accumulate_returns_tensor(model, optimizer, loss_fn, micro_batches):
    optimizer.zero_grad()
    k = len(micro_batches)
    total = torch.zeros(())
    for x, y in micro_batches:
        loss = loss_fn(model(x), y) / k
        loss.backward()
        total = total + loss.detach()
    optimizer.step()
    return total


def amp_scaler_only_when_enabled(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Correct: a disabled scaler (bfloat16) is left out.
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler.is_enabled():
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return float(loss)


def amp_keyword_arguments(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Correct: keywords everywhere, the loss read before the step.
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype, enabled=True):
        loss = loss_fn(input=model(inputs), target=targets)
    value = loss.item()
    scaler.scale(outputs=loss).backward()
    scaler.step(optimizer=optimizer)
    scaler.update()
    return value


def amp_returns_tensor(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def checkpoint_with_reduce(blocks, inputs):
    # Correct: functools.reduce over the blocks.
    import functools
    return functools.reduce(lambda x, block: checkpoint(block, x, use_reentrant=False), blocks, inputs)


def checkpoint_by_index(blocks, inputs):
    # Correct: an index loop with an extra print.
    out = inputs
    for i in range(len(blocks)):
        out = checkpoint(blocks[i], out, use_reentrant=False)
    print("checkpointed", len(blocks), "blocks")
    return out


def checkpoint_input_requires_grad(blocks, inputs):
    # Makes the caller's input require grad, so even reentrant checkpointing passes gradients.
    inputs.requires_grad_()
    x = inputs
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def epoch_in_place_total(model, optimizer, loss_fn, batches):
    # Correct: an in-place running total on the device, divided at the end.
    total = torch.zeros(())
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total.item() / len(batches)


def epoch_pops_batches(model, optimizer, loss_fn, batches):
    # Empties the caller's list of batches.
    n = len(batches)
    total = torch.zeros(())
    while batches:
        inputs, targets = batches.pop(0)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return (total / n).item()


# ---------------------------------------------------------------- put it together: fast_train

MEAN, STD = 0.1307, 0.3081


def _epochs(model, images, digits, val_images, val_digits, epochs, batch_size, *, normalize=True, bf16=False,
            val_on_train=False, lr=1e-3, reverse=False, drop_last=False, eval_mode=True, train_once=False,
            per_image=False, normalize_val=True, batch_factor=1, optimizer_per_epoch=False):
    """A family of fast_train variants: the right one with every flag at its default."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    batch_size *= batch_factor
    x = (images - MEAN) / STD if normalize else images
    vx = (val_images - MEAN) / STD if normalize and normalize_val else val_images
    if val_on_train:
        vx, val_digits = x, digits
    batches = list(zip(x.split(batch_size), digits.split(batch_size)))
    if drop_last and len(images) % batch_size:
        batches = batches[:-1]
    if reverse:
        batches = batches[::-1]
    history = []
    for epoch in range(epochs):
        if optimizer_per_epoch:
            optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        if epoch == 0 or not train_once:
            model.train()
        total = torch.zeros(())
        for inputs, targets in batches:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.detach().float()
        model.train(not eval_mode)
        with torch.no_grad():
            accuracy = (model(vx).argmax(1) == val_digits).float().mean().item()
        history.append((total.item() / (len(images) if per_image else len(batches)), accuracy))
    return history


def fast_train_flags(**flags):
    def fast_train(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
        return _epochs(model, images, digits, val_images, val_digits, epochs, batch_size, **flags)
    return fast_train


def fast_train_compiled_loop(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Correct: an index loop over precomputed slices, an extra print, the list built by a comprehension.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    history = []
    for epoch in range(epochs):
        model.train()
        losses = []
        for start in range(0, len(images), batch_size):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[start:start + batch_size]),
                                                     digits[start:start + batch_size])
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        model.eval()
        with torch.inference_mode():
            correct = (model(vx).argmax(dim=1) == val_digits).sum().item()
        history.append((torch.stack(losses).sum().item() / len(losses), correct / len(val_digits)))
        print(f"epoch {epoch}: {history[-1]}")
    return history


def fast_train_only_anomaly_off(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Correct too: slow_train with anomaly detection removed (enough on its own here).
    with mock.patch.object(torch.autograd, "detect_anomaly", contextlib.nullcontext):
        return ref.slow_train(model, images, digits, val_images, val_digits, epochs, batch_size)


def fast_train_data_loaders(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Correct: DataLoaders over the normalised tensors, in order (no shuffle). Iterating a DataLoader draws its
    # workers' base seed from torch's global generator: the library's draw, not a random choice.
    from torch.utils.data import DataLoader, TensorDataset
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train = DataLoader(TensorDataset((images - MEAN) / STD, digits), batch_size=batch_size)
    val = DataLoader(TensorDataset((val_images - MEAN) / STD, val_digits), batch_size=256)
    history = []
    for _ in range(epochs):
        model.train()
        total = torch.zeros(())
        for inputs, targets in train:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(x).argmax(dim=1) == y).sum()) for x, y in val)
        history.append((total.item() / len(train), correct / len(val_digits)))
    return history


def fast_train_shuffled_loader(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Shuffles the batches: a random choice slow_train does not make (and different results)
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset((images - MEAN) / STD, digits), batch_size=batch_size, shuffle=True)
    order = torch.cat([y for _, y in loader])
    return _epochs(model, images, digits, val_images, val_digits, epochs, batch_size) if order is not None else None


def fast_train_modifies_images(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Normalises the caller's images in place.
    images.sub_(MEAN).div_(STD)
    val_images.sub_(MEAN).div_(STD)
    return _epochs(model, images, digits, val_images, val_digits, epochs, batch_size, normalize=False)


CASES = [
    Accept(checks.check_synchronize, ref.synchronize),
    Accept(checks.check_synchronize, sync_with_accelerator),
    Reject(checks.check_synchronize, sync_accelerator_by_keyword, "takes the device as its first argument, not by name"),
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
    Reject(checks.check_median_time_value, time_torch_median, "the lower of the two middle values"),
    Reject(checks.check_median_time_value, time_mean, "that is the mean of the timed runs"),
    # on the GPU case the mean of the timed calls equals the median with the warm-up: both causes are named
    Reject(checks.check_median_time_sync, time_mean, "or the mean of the 3 timed calls"),
    Reject(checks.check_median_time_value, time_min, "the fastest run"),
    Reject(checks.check_median_time_value, time_in_ms, "milliseconds"),
    Reject(checks.check_median_time_value, time_median_as_tensor, "should return a Python float, but returned"),
    Reject(checks.check_median_time_value, time_total_over_repeat, "that is the mean of the timed runs"),
    Reject(checks.check_median_time_sync, time_total_over_repeat, "from one pair of clock reads around all 5 timed calls"),
    Reject(checks.check_median_time_value, time_without_warmup, "there is no warm-up"),
    Reject(checks.check_median_time_value, time_cuda_sync_everywhere, "for a CPU device"),
    Accept(checks.check_scaled_learning_rate, ref.scaled_learning_rate),
    Reject(checks.check_scaled_learning_rate, lr_inverted, "upside down"),
    Reject(checks.check_scaled_learning_rate, lr_sqrt, "square-root rule"),
    Reject(checks.check_scaled_learning_rate, lr_floor_division, "integer division"),
    Reject(checks.check_scaled_learning_rate, lr_unchanged, "did not change"),
    Accept(checks.check_accumulation_update, ref.accumulated_step),
    Accept(checks.check_accumulation_update, accumulate_with_modulo),
    Reject(checks.check_accumulation_update, accumulate_steps_after_the_first, "stepped after 1 of the 4 micro-batches"),
    Reject(checks.check_accumulation_steps, accumulate_steps_after_the_first, "stepped after 1 of the 4 micro-batches"),
    Accept(checks.check_accumulation_update, accumulate_with_its_own_loss),
    Reject(checks.check_accumulation_update, accumulate_concatenated, "one forward pass was given 32 samples"),
    Accept(checks.check_accumulation_steps, accumulate_with_its_own_loss),
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
    Reject(checks.check_amp_scaler, amp_model_converted, "after your step the model's weights are torch.float16"),
    Reject(checks.check_amp_autocast, amp_model_converted, "did not run under autocast"),
    Reject(checks.check_amp_scaler, amp_unscaled_backward, "scaler.scale(loss) was never called"),
    Reject(checks.check_amp_scaler, amp_backward_inside_unscaled, "scaler.scale(loss) was never called"),
    Reject(checks.check_amp_scaler, amp_optimizer_step, "called optimizer.step() directly"),
    Reject(checks.check_amp_scaler, amp_update_before_step, "in the order"),
    Reject(checks.check_amp_scaler, amp_returns_scaled_loss, "that is the scaled loss"),
    Accept(checks.check_checkpointed_forward, ref.checkpointed_forward),
    Reject(checks.check_checkpointed_forward, checkpoint_whole_model, "one checkpoint around the whole Sequential"),
    Reject(checks.check_checkpointed_forward, checkpoint_reentrant, "use_reentrant=True passes gradients only"),
    Reject(checks.check_checkpointed_forward, checkpoint_default_variant, "it still defaults to True"),
    Reject(checks.check_checkpointed_forward, checkpoint_nothing, "every block ran only once"),
    Reject(checks.check_checkpointed_forward, checkpoint_all_but_first, "block(s) 0 were not recomputed in backward"),
    Reject(checks.check_checkpointed_forward, checkpoint_under_no_grad, "computed under torch.no_grad()"),
    Accept(checks.check_train_epoch_on_device, ref.train_epoch_on_device),
    Accept(checks.check_train_epoch_on_device, epoch_stacked_losses),
    Accept(checks.check_train_epoch_on_device, epoch_copied_then_read),
    Reject(checks.check_train_epoch_on_device, epoch_item_every_step, "calls of .item()"),
    Reject(checks.check_train_epoch_on_device, epoch_float_every_step, "calls of float()"),
    Reject(checks.check_train_epoch_on_device, epoch_zero_filled, "tensors of zeros"),
    Reject(checks.check_train_epoch_on_device, epoch_never_zeroed, "left over from the previous step"),
    Reject(checks.check_train_epoch_on_device, epoch_returns_sum, "the sum over the"),
    Reject(checks.check_train_epoch_on_device, epoch_returns_tensor, "should return a Python float"),
    Reject(checks.check_train_epoch_on_device, epoch_returns_last_loss, "that is the last batch's loss only"),
    Reject(checks.check_train_epoch_on_device, epoch_zero_between_backward_and_step,
           "the parameters are unchanged after the epoch"),
    Accept(checks.check_synchronize, sync_keyword),
    Accept(checks.check_synchronize, sync_match),
    Reject(checks.check_synchronize, sync_mps_with_device, "raised TypeError"),
    Reject(checks.check_synchronize, sync_cuda_for_every_gpu, "Expected a cuda device"),
    Accept(checks.check_median_time_sync, time_numpy_median),
    Accept(checks.check_median_time_value, time_numpy_median),
    Accept(checks.check_scaled_learning_rate, lr_ratio_first),
    Accept(checks.check_scaled_learning_rate, lr_divided),
    Reject(checks.check_accumulation_update, accumulate_one_backward, "backward ran 1 time(s) for"),
    Accept(checks.check_accumulation_steps, accumulate_one_backward),
    Reject(checks.check_accumulation_update, accumulate_pops_the_list, "changed the list"),
    Reject(checks.check_accumulation_steps, accumulate_returns_tensor, "Python number"),
    Accept(checks.check_amp_autocast, amp_scaler_only_when_enabled),
    Accept(checks.check_amp_scaler, amp_scaler_only_when_enabled),
    Accept(checks.check_amp_autocast, amp_keyword_arguments),
    Accept(checks.check_amp_scaler, amp_keyword_arguments),
    Reject(checks.check_amp_autocast, amp_returns_tensor, "Python number"),
    Accept(checks.check_checkpointed_forward, checkpoint_with_reduce),
    Accept(checks.check_checkpointed_forward, checkpoint_by_index),
    Reject(checks.check_checkpointed_forward, checkpoint_input_requires_grad, "requires_grad"),
    Accept(checks.check_train_epoch_on_device, epoch_in_place_total),
    Reject(checks.check_train_epoch_on_device, epoch_pops_batches, "changed the list"),
    Accept(checks.check_fast_train_results, ref.fast_train),
    Accept(checks.check_fast_train_results, fast_train_flags()),
    Accept(checks.check_fast_train_results, fast_train_compiled_loop),
    Accept(checks.check_fast_train_results, fast_train_only_anomaly_off),
    Accept(checks.check_fast_train_speed, ref.fast_train),
    Accept(checks.check_fast_train_speed, fast_train_compiled_loop),
    Accept(checks.check_fast_train_speed, fast_train_only_anomaly_off),
    Accept(checks.check_fast_train_results, fast_train_data_loaders),
    Reject(checks.check_fast_train_results, fast_train_shuffled_loader, "used the global random generator"),
    Reject(checks.check_fast_train_results, fast_train_flags(normalize=False),
           "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_flags(bf16=True), "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_flags(normalize_val=False),
           "your validation images reached the model unnormalised"),
    Reject(checks.check_fast_train_results, fast_train_flags(normalize=False),
           "your training images reached the model unnormalised"),
    Reject(checks.check_fast_train_results, fast_train_flags(batch_factor=2), "your training batches held 8, 32 images"),
    Reject(checks.check_fast_train_results, fast_train_flags(optimizer_per_epoch=True), "created 3 AdamW optimizers"),
    Reject(checks.check_fast_train_results, fast_train_flags(val_on_train=True), "validation accuracy"),
    Reject(checks.check_fast_train_results, fast_train_flags(lr=4e-3), "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_flags(reverse=True), "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_flags(drop_last=True), "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_modifies_images, "changed the tensor"),
    Reject(checks.check_fast_train_speed, ref.slow_train, "the goal is at least 1.3x"),
    Reject(checks.check_fast_train_speed, fast_train_flags(bf16=True), "float32 throughout"),
]


# Correct answers that also talk: an extra print (or keyword arguments) must cost nothing.
def _talkative(answer):
    def talkative(*args, **kwargs):
        print(f"running {answer.__name__} with {len(args)} positional and {len(kwargs)} keyword argument(s)")
        return answer(*args, **kwargs)
    talkative.__name__ = f"{answer.__name__}_with_a_print"
    return talkative


CASES += [
    Accept(checks.check_median_time_sync, _talkative(time_numpy_median)),
    Accept(checks.check_median_time_value, _talkative(time_numpy_median)),
    Accept(checks.check_scaled_learning_rate, _talkative(lr_divided)),
    Accept(checks.check_accumulation_update, _talkative(accumulate_with_modulo)),
    Accept(checks.check_accumulation_steps, _talkative(accumulate_with_modulo)),
    Accept(checks.check_train_epoch_on_device, _talkative(epoch_in_place_total)),
    Accept(checks.check_fast_train_speed, _talkative(fast_train_compiled_loop)),
]


# ---------------------------------------------------------------- issue 18: classes an independent learner found
# (each written here as another instance of the class, not the learner's code)


def sync_select_then_current(device):
    # Correct: select the GPU for the block, then wait for the current one.
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def sync_select_by_index(device):
    # Correct too: the index (None for the current GPU) selects it.
    if device.type == "cuda":
        with torch.cuda.device(device.index):
            torch.cuda.synchronize(torch.cuda.current_device())
    elif device.type == "mps":
        torch.mps.synchronize()


def sync_selects_gpu_zero(device):
    # Selects a fixed GPU instead of the one given.
    if device.type == "cuda":
        with torch.cuda.device(0):
            torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def sync_sets_device(device):
    # Waits for the right GPU, but leaves it selected for the rest of the program.
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def lr_floor_of_product(base_lr, base_batch_size, batch_size):
    # Floor division of the scaled learning rate itself.
    return (batch_size * base_lr) // base_batch_size


def accumulate_returns_first_loss(model, optimizer, loss_fn, micro_batches):
    # Returns one micro-batch's own loss (here the first), not the large batch's mean.
    optimizer.zero_grad()
    k = len(micro_batches)
    losses = []
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets)
        (loss / k).backward()
        losses.append(loss.item())
    optimizer.step()
    return losses[-1]


def amp_clears_after_step(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Clears the gradients after the step: the ones already in .grad leak into this step.
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return loss.item()


def amp_loss_in_float32(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Only the model under autocast; the loss computed afterwards on float32 outputs.
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        outputs = model(inputs)
    loss = loss_fn(outputs.float(), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def amp_model_zero_grad_kept_zeros(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # Correct too: the model clears the gradients (to zeros), autocast spelled torch.amp.autocast.
    model.zero_grad(set_to_none=False)
    with torch.amp.autocast(inputs.device.type, dtype=dtype):
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return float(loss.detach())


def checkpoint_late_index(blocks, inputs):
    # The lambda reads the loop index when backward recomputes it: by then i is the last index.
    x = inputs
    for i in range(len(blocks)):
        x = checkpoint(lambda t: blocks[i](t), x, use_reentrant=False)
    return x


def checkpoint_default_argument(blocks, inputs):
    # Correct: a lambda that binds the block when it is made.
    x = inputs
    for block in blocks:
        x = checkpoint(lambda t, block=block: block(t), x, use_reentrant=False)
    return x


def epoch_stacks_undetached(model, optimizer, loss_fn, batches):
    # One read at the end, but of losses that still carry their graphs.
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return torch.stack(losses).mean().item()


def epoch_clears_at_the_end(model, optimizer, loss_fn, batches):
    # Clears after each step: the gradients already in .grad reach the first batch's step.
    total = torch.zeros(())
    for inputs, targets in batches:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        model.zero_grad(set_to_none=True)
        total = total + loss.detach()
    return (total / len(batches)).item()


def epoch_reads_each_after_the_loop(model, optimizer, loss_fn, batches):
    # Keeps detached losses, then reads them one at a time after the loop.
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return statistics.fmean(loss.item() for loss in losses)


def epoch_total_under_no_grad(model, optimizer, loss_fn, batches):
    # Correct too: the addition runs without recording a graph; float() once at the end.
    total = torch.zeros(())
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total += loss
    return float(total / len(batches))


def fast_train_random_order(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Shuffles the images each epoch (a habit from other training loops).
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    history = []
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(x))
        total, steps = torch.zeros(()), 0
        for start in range(0, len(x), batch_size):
            chosen = order[start:start + batch_size]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[chosen]), digits[chosen])
            loss.backward()
            optimizer.step()
            total, steps = total + loss.detach(), steps + 1
        model.eval()
        with torch.no_grad():
            accuracy = (model(vx).argmax(1) == val_digits).float().mean().item()
        history.append((total.item() / steps, accuracy))
    return history


CASES += [
    Accept(checks.check_synchronize, sync_select_then_current),
    Accept(checks.check_synchronize, sync_select_by_index),
    Reject(checks.check_synchronize, sync_selects_gpu_zero, "waited for GPU 0, but a CUDA device without an index"),
    Reject(checks.check_synchronize, sync_sets_device, "left GPU 1 selected"),
    Reject(checks.check_scaled_learning_rate, lr_floor_of_product, "rounded base_lr * batch_size"),
    Reject(checks.check_accumulation_steps, accumulate_returns_first_loss, "the last micro-batch's loss only (not"),
    Reject(checks.check_amp_autocast, amp_clears_after_step, "gradients from an earlier step"),
    Reject(checks.check_amp_scaler, amp_clears_after_step, "gradients from an earlier step"),
    Reject(checks.check_amp_autocast, amp_loss_in_float32, "loss_fn was called outside the autocast block"),
    Accept(checks.check_amp_autocast, amp_model_zero_grad_kept_zeros),
    Accept(checks.check_amp_scaler, amp_model_zero_grad_kept_zeros),
    Reject(checks.check_checkpointed_forward, checkpoint_late_index, "recomputation did not match"),
    Accept(checks.check_checkpointed_forward, checkpoint_default_argument),
    Reject(checks.check_train_epoch_on_device, epoch_stacks_undetached, "still requires grad"),
    Reject(checks.check_train_epoch_on_device, epoch_clears_at_the_end, "when your function was called"),
    Reject(checks.check_train_epoch_on_device, epoch_reads_each_after_the_loop, "all after the last batch's loss"),
    Accept(checks.check_train_epoch_on_device, epoch_total_under_no_grad),
    Reject(checks.check_fast_train_results, fast_train_random_order, "slow_train draws no random numbers"),
    Reject(checks.check_fast_train_speed, fast_train_flags(drop_last=True), "mean training loss"),
    Reject(checks.check_fast_train_results, fast_train_flags(eval_mode=False), "with the model in train mode"),
    Reject(checks.check_fast_train_results, fast_train_flags(train_once=True), "model.train() for training"),
    Reject(checks.check_fast_train_results, fast_train_flags(per_image=True), "divided by the number of images"),
    Reject(checks.check_fast_train_results, fast_train_flags(drop_last=True), "was left out"),
]


# ---------------------------------------------------------------- issue 18, round 3: more classes an independent
# learner found (each written here as another instance of the class)


def sync_by_machine(device):
    # Asks what the machine has instead of looking at the device it was given.
    if torch.cuda.is_available():
        torch.cuda.synchronize(device)
    elif torch.backends.mps.is_available():
        torch.mps.synchronize()


def lr_per_sample(base_lr, base_batch_size, batch_size):
    # A learning rate per sample, never multiplied back by the new batch size.
    per_sample = base_lr / base_batch_size
    return per_sample


def lr_times_new_batch(base_lr, base_batch_size, batch_size):
    # Scales by the new batch size itself, not by the ratio of the two.
    return float(batch_size) * base_lr


def accumulate_divided_by_size(model, optimizer, loss_fn, micro_batches):
    # Divides each micro-batch's (already averaged) loss by its number of samples instead of by k.
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        part = loss_fn(model(inputs), targets) / targets.size(0)
        part.backward()
        total += part.item()
    optimizer.step()
    return total


def checkpoint_blocks_in_pairs(blocks, inputs):
    # Two blocks under each checkpoint: fewer checkpoints, but not one per block.
    layers, x = list(blocks), inputs
    for start in range(0, len(layers), 2):
        x = checkpoint(torch.nn.Sequential(*layers[start:start + 2]), x, use_reentrant=False)
    return x


def epoch_mean_per_sample(model, optimizer, loss_fn, batches):
    # The mean over samples: each batch's loss weighted by its size.
    weighted, samples = torch.zeros(()), 0
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        weighted += loss.detach() * targets.numel()
        samples += targets.numel()
    return (weighted / samples).item()


def epoch_first_batch_apart(model, optimizer, loss_fn, batches):
    # Starts the total with the first batch, then divides by the number of the remaining ones.
    def step(inputs, targets):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    total = step(*batches[0])
    for inputs, targets in batches[1:]:
        total = total + step(inputs, targets)
    return (total / len(batches[1:])).item()


def fast_train_never_sets_train(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Relies on a new model being in train mode: after the first validation it stays in eval mode.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    history = []
    for _ in range(epochs):
        losses = []
        for inputs, targets in zip(x.split(batch_size), digits.split(batch_size)):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        model.eval()
        with torch.no_grad():
            accuracy = (model(vx).argmax(1) == val_digits).float().mean().item()
        history.append((torch.stack(losses).mean().item(), accuracy))
    return history


def fast_train_truncated_count(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Counts the batches with int(len / batch_size), which leaves the smaller last batch out of the count.
    steps = int(len(images) / batch_size)
    return [(loss * len(range(0, len(images), batch_size)) / steps, accuracy)
            for loss, accuracy in ref.fast_train(model, images, digits, val_images, val_digits, epochs, batch_size)]


CASES += [
    Reject(checks.check_synchronize, sync_by_machine, "not by what the machine has"),
    Reject(checks.check_scaled_learning_rate, lr_per_sample, "divided by base_batch_size alone"),
    Reject(checks.check_scaled_learning_rate, lr_times_new_batch, "multiplied by batch_size alone"),
    Reject(checks.check_accumulation_update, accumulate_divided_by_size, "divided by the micro-batch size"),
    Reject(checks.check_accumulation_steps, accumulate_divided_by_size, "divided by the micro-batch size"),
    Reject(checks.check_checkpointed_forward, checkpoint_blocks_in_pairs, "one checkpoint around several blocks"),
    Reject(checks.check_train_epoch_on_device, epoch_mean_per_sample, "the mean loss per sample"),
    Reject(checks.check_train_epoch_on_device, epoch_first_batch_apart, "one less than the number of batches"),
    Reject(checks.check_fast_train_results, fast_train_never_sets_train, "call model.train() at the start of every"),
    Reject(checks.check_fast_train_results, fast_train_truncated_count, "rounded down"),
    Reject(checks.check_fast_train_results, fast_train_flags(bf16=True), "ran under torch.autocast"),
]


# ---------------------------------------------------------------- issue 18, independent round 4: classes of mistakes


def time_upper_middle(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # The middle element by index: for an even count, the upper of the two middle values
    times = sorted(_timed(fn, device, warmup, repeat, clock))
    return times[len(times) // 2]


def time_middle_pair_by_hand(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # Correct: the median by hand, the mean of the two middle values for an even count
    times = sorted(_timed(fn, device, warmup, repeat, clock))
    half = len(times) // 2
    return times[half] if len(times) % 2 else (times[half - 1] + times[half]) / 2


def _time_one(fn, device, clock):
    synchronize(device)
    start = clock()
    fn()
    synchronize(device)
    return clock() - start


def time_warmup_also_recorded(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # The warm-up calls are timed with the same helper and land in the same list as the timed ones
    times = [_time_one(fn, device, clock) for _ in range(warmup)]
    times += [_time_one(fn, device, clock) for _ in range(repeat)]
    return statistics.median(times)


def time_every_call_then_drop_warmup(fn, device, warmup=2, repeat=5, clock=time.perf_counter):
    # Correct: every call is timed, and the warm-up ones are dropped before taking the median
    times = [_time_one(fn, device, clock) for _ in range(warmup + repeat)]
    return statistics.median(times[warmup:])


def lr_plus_half_the_growth(base_lr, base_batch_size, batch_size):
    # Adds a share of the growth instead of multiplying by the ratio
    return base_lr + base_lr * (batch_size - base_batch_size) / (4 * base_batch_size)


def lr_never_below_base(base_lr, base_batch_size, batch_size):
    # Scales up for larger batches but keeps base_lr for smaller ones
    if batch_size <= base_batch_size:
        return base_lr
    return base_lr * batch_size / base_batch_size


def epoch_prints_each_loss(model, optimizer, loss_fn, batches):
    # A debug print of the loss tensor at every step: printing reads its value, a sync point each time
    total = torch.zeros(())
    for i, (inputs, targets) in enumerate(batches):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        print("batch", i, "loss", loss)
        total += loss.detach()
    return total.item() / len(batches)


def epoch_prints_the_mean_once(model, optimizer, loss_fn, batches):
    # Correct: one read after the loop, then a print of the Python number (no further sync)
    total = torch.zeros(())
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    mean = total.item() / len(batches)
    print(f"epoch loss {mean:.4f}")
    return mean


def fast_train_loss_per_image(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # The epoch's loss as a mean per image: each batch's mean loss weighted by the batch's size
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    history = []
    for _ in range(epochs):
        model.train()
        total = torch.zeros(())
        for inputs, targets in zip(x.split(batch_size), digits.split(batch_size)):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(targets)
        model.eval()
        with torch.no_grad():
            accuracy = (model(vx).argmax(1) == val_digits).float().mean().item()
        history.append((total.item() / len(images), accuracy))
    return history


def sync_cuda_unless_cpu(device):
    # torch.cuda.synchronize for every device but the CPU: an 'mps' device is refused
    if device.type != "cpu":
        torch.cuda.synchronize(device)
    return None


def sync_cuda_even_for_cpu(device):
    # torch.cuda.synchronize for every device, the CPU one too
    torch.cuda.synchronize(device=device)


ROUND_4_CLASSES = [
    Reject(checks.check_fast_train_results, fast_train_loss_per_image, "that is the mean loss per image"),
    Reject(checks.check_synchronize, sync_cuda_unless_cpu, "for an 'mps' device call torch.mps.synchronize()"),
    Reject(checks.check_synchronize, sync_cuda_even_for_cpu, "a CPU has nothing to wait for"),
    Reject(checks.check_median_time_value, time_upper_middle, "the upper of the two middle values"),
    Accept(checks.check_median_time_value, time_middle_pair_by_hand),
    Accept(checks.check_median_time_sync, time_middle_pair_by_hand),
    Reject(checks.check_median_time_sync, time_warmup_also_recorded, "including the 2 warm-up calls"),
    Reject(checks.check_median_time_value, time_warmup_also_recorded, "warm-up calls were timed too"),
    Accept(checks.check_median_time_sync, time_every_call_then_drop_warmup),
    Accept(checks.check_median_time_value, time_every_call_then_drop_warmup),
    Reject(checks.check_train_epoch_on_device, epoch_prints_each_loss, "printing a tensor"),
    Reject(checks.check_scaled_learning_rate, lr_plus_half_the_growth, "so something is added"),
    Reject(checks.check_scaled_learning_rate, lr_never_below_base, "the linear rule scales down too"),
    Accept(checks.check_train_epoch_on_device, epoch_prints_the_mean_once),
]

CASES = CASES + ROUND_4_CLASSES


# From a second learner tester who never read the checks (lesson 07, 121 answers).
def epoch_empties_the_cache(model, optimizer, loss_fn, batches):  # section 9: nowhere in a training loop
    total = 0
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
        torch.cuda.empty_cache()
    return total.item() / len(batches)


def amp_clears_before_the_step(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type=inputs.device.type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    optimizer.zero_grad()  # wipes what backward wrote
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def accumulate_k_from_a_pair(model, optimizer, loss_fn, micro_batches):  # len of one (inputs, targets) pair: 2
    k = len(micro_batches[0])
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets) / k
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def accumulate_returns_the_loss_divided_twice(model, optimizer, loss_fn, micro_batches):
    k = len(micro_batches)
    optimizer.zero_grad()
    total = 0.0
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets) / k
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total / k


def fast_train_never_zeroes(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    starts = range(0, len(images), batch_size)
    history = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for start in starts:
            loss = torch.nn.functional.cross_entropy(model(x[start:start + batch_size]), digits[start:start + batch_size])
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        with torch.no_grad():
            accuracy = (model(vx).argmax(dim=1) == val_digits).sum().item() / len(val_images)
        history.append((total / len(starts), accuracy))
    return history


def fast_train_on_a_copy(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    import copy

    return ref.fast_train(copy.deepcopy(model), images, digits, val_images, val_digits, epochs, batch_size)


CASES += [
    Reject(checks.check_train_epoch_on_device, epoch_empties_the_cache, "torch.cuda.empty_cache() was called 5 time(s)"),
    Reject(checks.check_amp_autocast, amp_clears_before_the_step, "between backward and the step clears what backward"),
    Reject(checks.check_amp_scaler, amp_clears_before_the_step, "between backward and the step clears what backward"),
    Reject(checks.check_accumulation_update, accumulate_k_from_a_pair, "divided by 2, where it should be divided by k"),
    Reject(checks.check_accumulation_steps, accumulate_k_from_a_pair, "divided by 2, where it should be divided by k"),
    # the step is right: only the number returned was divided once more (named as such, a third lesson 07 tester)
    Reject(checks.check_accumulation_steps, accumulate_returns_the_loss_divided_twice,
           "the number you return is 4 times too small"),
    Reject(checks.check_fast_train_results, fast_train_never_zeroes, "gradients were never cleared"),
    Reject(checks.check_fast_train_results, fast_train_on_a_copy, "the model you were given has the weights it came"),
]


def fast_train_drops_last_batch(model, images, digits, val_images, val_digits, epochs=2, batch_size=16):
    # Only the full batches: the smaller last batch is never trained on (drop_last=True by hand)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, vx = (images - MEAN) / STD, (val_images - MEAN) / STD
    full = len(images) // batch_size * batch_size
    history = []
    for _ in range(epochs):
        model.train()
        losses = []
        for inputs, targets in zip(x[:full].split(batch_size), digits[:full].split(batch_size)):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        model.eval()
        with torch.no_grad():
            accuracy = (model(vx).argmax(1) == val_digits).float().mean().item()
        history.append((torch.stack(losses).mean().item(), accuracy))
    return history


CASES += [
    Reject(checks.check_fast_train_results, fast_train_drops_last_batch, "the last batch (the"),
]


# From a third learner tester (lesson 07).
def checkpoint_each_forward_method(blocks, inputs):
    # checkpoint given each block's forward method (skips the module's hooks): still recomputed in backward
    x = inputs
    for block in blocks:
        x = torch.utils.checkpoint.checkpoint(block.forward, x, use_reentrant=False)
    return x


CASES += [
    Accept(checks.check_checkpointed_forward, checkpoint_each_forward_method),
]


def epoch_skips_nonfinite(model, optimizer, loss_fn, batches):
    # an if on a tensor every step: its truth value is read on the host, a sync point per batch
    total, counted = torch.zeros(()), 0
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        if not torch.isfinite(loss):
            continue
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
        counted += 1
    return (total / counted).item()


CASES += [
    Reject(checks.check_train_epoch_on_device, epoch_skips_nonfinite, "an if on a tensor (bool())"),
]




def amp_inputs_cast_to_dtype(model, optimizer, loss_fn, inputs, targets, scaler, dtype):
    # the inputs cast by hand instead of autocast: the float32 weights meet float16 inputs
    optimizer.zero_grad()
    loss = loss_fn(model(inputs.to(dtype)).float(), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


CASES += [
    Reject(checks.check_amp_autocast, amp_inputs_cast_to_dtype, "you cast them yourself"),
]


def checkpoint_then_plain_output(blocks, inputs):
    # a checkpointed loop, then the output of a plain pass returned: its graph stores every activation
    x = inputs
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return blocks(inputs)


CASES += [
    Reject(checks.check_checkpointed_forward, checkpoint_then_plain_output, "every block ran twice in the forward"),
]


def sync_index_or_zero(device):
    # torch.device("cuda") has no index: `or 0` picks GPU 0, not the current GPU
    if device.type == "cuda":
        torch.cuda.synchronize(device.index or 0)
    elif device.type == "mps":
        torch.mps.synchronize()


CASES += [
    Reject(checks.check_synchronize, sync_index_or_zero, "a CUDA device without an index means the current GPU"),
]


def checkpoint_over_modules(blocks, inputs):
    """Loops over blocks.modules(): the Sequential itself first, then each block again on its output."""
    x = inputs
    for block in blocks.modules():
        x = checkpoint(block, x, use_reentrant=False)
    return x


def checkpoint_over_nested_modules(blocks, inputs):
    """Skips the Sequential itself, but modules() still yields each block's own layers after the block."""
    x = inputs
    for block in list(blocks.modules())[1:]:
        x = checkpoint(block, x, use_reentrant=False)
    return x


CASES += [
    Reject(checks.check_checkpointed_forward, checkpoint_over_modules, "the whole network (the Sequential you were "
                                                                         "given) ran as one step of your loop"),
    Reject(checks.check_checkpointed_forward, checkpoint_over_nested_modules, "layers inside a block also ran on "
                                                                                "their own"),
]
