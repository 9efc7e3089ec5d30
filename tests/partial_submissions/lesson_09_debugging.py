"""Four exercises fixed wrongly or in part: labels only converted, no mode switch, zero_grad in the wrong place,
and one of the three bugs of train_and_evaluate fixed."""

WRONG_CELLS = {
    # .long() alone: the [N, 1] shape still raises the multi-target error (0 of 3)
    "ex_loss_from_table": (
        "def loss_from_table(logits, label_column):\n"
        "    return F.cross_entropy(logits, label_column.long())\n"
    ),
    # the mode line deleted instead of fixed: dropout and batch norm stay in training mode (0 of 2)
    "ex_accuracy": (
        "def accuracy(model, images, labels):\n"
        "    with torch.no_grad():\n"
        "        predictions = model(images).argmax(dim=1)\n"
        "    return (predictions == labels).float().mean().item()\n"
    ),
    # zero_grad between backward and step: every step applies zero gradients (0 of 2)
    "ex_fit": (
        "def fit(model, loader, epochs, lr):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n"
        "    model.train()\n"
        "    losses = []\n"
        "    for _ in range(epochs):\n"
        "        for inputs, targets in loader:\n"
        "            loss = F.cross_entropy(model(inputs), targets)\n"
        "            loss.backward()\n"
        "            optimizer.zero_grad()\n"
        "            optimizer.step()\n"
        "            losses.append(loss.item())\n"
        "    return losses\n"
    ),
    # only the softmax removed: the training part passes (2 of 5), evaluation and history do not
    "ex_three_bugs": (
        "def train_and_evaluate(model, train_set, test_set, epochs, lr):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n"
        "    history = []\n"
        "    model.train()\n"
        "    for _ in range(epochs):\n"
        "        for inputs, targets in DataLoader(train_set, batch_size=8):\n"
        "            optimizer.zero_grad()\n"
        "            loss = F.cross_entropy(model(inputs), targets)\n"
        "            loss.backward()\n"
        "            optimizer.step()\n"
        "            history.append(loss)\n"
        "    correct = 0\n"
        "    with torch.no_grad():\n"
        "        for inputs, targets in DataLoader(test_set, batch_size=64):\n"
        "            correct += (model(inputs).argmax(dim=1) == targets).sum().item()\n"
        "    return history, correct / len(test_set)\n"
    ),
}
EXPECTED_SCORE = 10.0
