"""Three exercises fixed wrongly: the labels only converted, the mode flag set by hand, zero_grad in the wrong place."""

WRONG_CELLS = {
    # .long() alone: the [N, 1] shape still raises the multi-target error (0 of 2)
    "ex_loss_from_table": (
        "def loss_from_table(logits, label_column):\n"
        "    return F.cross_entropy(logits, label_column.long())\n"
    ),
    # model.training = False reaches only the top module: dropout and batch norm stay in training mode (0 of 3)
    "ex_accuracy": (
        "def accuracy(model, images, labels):\n"
        "    model.training = False\n"
        "    with torch.no_grad():\n"
        "        predictions = model(images).argmax(dim=1)\n"
        "    return (predictions == labels).float().mean().item()\n"
    ),
    # zero_grad between backward and step: every step applies zero gradients (0 of 3)
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
}
EXPECTED_SCORE = 12.0
