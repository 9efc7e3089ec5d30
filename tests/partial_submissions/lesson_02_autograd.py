"""Three wrong exercises: a non-scalar backward, zeroing too late, and a loss log of tensors."""

WRONG_CELLS = {
    # forgot the mean: backward() on a non-scalar raises (0 of 1 point)
    "ex_mean_square_grad": (
        "def mean_square_grad(x):\n"
        "    x = x.detach().clone().requires_grad_(True)\n"
        "    out = 3 * (x + 2) ** 2\n"
        "    out.backward()\n"
        "    return x.grad\n"
    ),
    # zeroes after backward: right when w starts clean (2 of 2), wrong with a leftover gradient (0 of 1)
    "ex_per_batch_grads": (
        "def per_batch_grads(w, batches):\n"
        "    grads = []\n"
        "    for x, y in batches:\n"
        "        loss = ((x @ w - y) ** 2).mean()\n"
        "        loss.backward()\n"
        "        grads.append(w.grad.clone())\n"
        "        w.grad.zero_()\n"
        "    return grads\n"
    ),
    # logs the loss tensors: the fit is right (2 of 2), the log keeps every graph alive (0 of 2)
    "ex_fit_line_with_sgd": (
        "def fit_line_with_sgd(x, y, lr, steps):\n"
        "    w = torch.zeros((), requires_grad=True)\n"
        "    b = torch.zeros((), requires_grad=True)\n"
        "    optimizer = torch.optim.SGD([w, b], lr=lr)\n"
        "    losses = []\n"
        "    for _ in range(steps):\n"
        "        optimizer.zero_grad()\n"
        "        loss = ((w * x + b - y) ** 2).mean()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        losses.append(loss)\n"
        "    return w.item(), b.item(), losses\n"
    ),
}
EXPECTED_SCORE = 16.0
