"""Three wrong exercises: timing without warm-up, no scaler.update(), accumulation without loss / k."""

WRONG_CELLS = {
    # every call is timed, the first (slow) one too: warm-up and synchronize (0 of 2), the median (0 of 1)
    "ex_median_time": (
        "def median_time(fn, device, warmup=2, repeat=5, clock=time.perf_counter):\n"
        "    times = []\n"
        "    for _ in range(repeat):\n"
        "        synchronize(device)\n"
        "        start = clock()\n"
        "        fn()\n"
        "        synchronize(device)\n"
        "        times.append(clock() - start)\n"
        "    return statistics.median(times)\n"
    ),
    # autocast right (2 of 2), scaler.update() forgotten (0 of 2)
    "ex_mixed_precision": (
        "def mixed_precision_step(model, optimizer, loss_fn, inputs, targets, scaler, dtype):\n"
        "    optimizer.zero_grad()\n"
        "    with torch.autocast(device_type=inputs.device.type, dtype=dtype):\n"
        "        loss = loss_fn(model(inputs), targets)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    return loss.item()\n"
    ),
    # each micro-batch's loss not divided by k: the update is k times too large (0 of 2);
    # one step and the right mean loss returned (2 of 2)
    "ex_accumulate": (
        "def accumulated_step(model, optimizer, loss_fn, micro_batches):\n"
        "    optimizer.zero_grad()\n"
        "    total = 0.0\n"
        "    for inputs, targets in micro_batches:\n"
        "        loss = loss_fn(model(inputs), targets)\n"
        "        loss.backward()\n"
        "        total += loss.item() / len(micro_batches)\n"
        "    optimizer.step()\n"
        "    return total\n"
    ),
}
EXPECTED_SCORE = 13.0
