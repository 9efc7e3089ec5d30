"""Three wrong exercises: a loop without zero_grad, evaluation without eval(), a schedule stepped per epoch."""

WRONG_CELLS = {
    # no optimizer.zero_grad(): the updates are wrong (0 of 2), and so the losses (0 of 2)
    "ex_train_one_epoch": (
        "def train_one_epoch(model, loader, loss_fn, optimizer, device):\n"
        "    model.train()\n"
        "    total, count = 0.0, 0\n"
        "    for inputs, targets in loader:\n"
        "        inputs, targets = inputs.to(device), targets.to(device)\n"
        "        loss = loss_fn(model(inputs), targets)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        total += loss.item() * len(targets)\n"
        "        count += len(targets)\n"
        "    return total / count\n"
    ),
    # no model.eval(): the modes fail (0 of 2); the averaging is right (2 of 2)
    "ex_evaluate": (
        "def evaluate(model, loader, loss_fn, device):\n"
        "    total_loss, correct, count = 0.0, 0, 0\n"
        "    with torch.no_grad():\n"
        "        for inputs, targets in loader:\n"
        "            inputs, targets = inputs.to(device), targets.to(device)\n"
        "            logits = model(inputs)\n"
        "            total_loss += loss_fn(logits, targets).item() * len(targets)\n"
        "            correct += (logits.argmax(dim=1) == targets).sum().item()\n"
        "            count += len(targets)\n"
        "    return total_loss / count, correct / count\n"
    ),
    # OneCycleLR stepped once per epoch: schedule 0 of 2, clipping 1 of 1 (checked with a
    # constant schedule), history 1 of 1 (it is compared with the losses this run computed: one bug
    # costs one cell); train_spirals, which calls this fit, is graded with the reference fit: 4 of 4
    "ex_fit": (
        "def fit(model, loader, loss_fn, optimizer, scheduler, device, epochs=1, max_norm=1.0):\n"
        "    model.train()\n"
        "    history = []\n"
        "    for _ in range(epochs):\n"
        "        for inputs, targets in loader:\n"
        "            inputs, targets = inputs.to(device), targets.to(device)\n"
        "            optimizer.zero_grad()\n"
        "            loss = loss_fn(model(inputs), targets)\n"
        "            loss.backward()\n"
        "            nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
        "            optimizer.step()\n"
        "            history.append(loss.item())\n"
        "        scheduler.step()\n"
        "    return history\n"
    ),
}
EXPECTED_SCORE = 12.0
