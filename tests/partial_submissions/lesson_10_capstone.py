"""Two wrong exercises: an unseeded split, and a weak capstone that is on time but reaches no accuracy tier."""

WRONG_CELLS = {
    # random_split without a generator: a different split on every call (0 of 2)
    "ex_split": (
        "def make_validation_split(dataset, val_size, seed):\n"
        "    return random_split(dataset, [len(dataset) - val_size, val_size])\n"
    ),
    # a small fully connected network, 2 epochs: the contract (1 of 1) and the time limit (1 of 1) are
    # met, but it gets about 93-94% of the held-out digits, far below the lowest tier (0 of 8)
    "ex_build_and_train": (
        "def build_and_train(train_set, time_budget_s):\n"
        "    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))\n"
        "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
        "    loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))\n"
        "    for epoch in range(2):\n"
        "        for images, labels in loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.cross_entropy(model(images), labels).backward()\n"
        "            optimizer.step()\n"
        "    return model\n"
    ),
}
EXPECTED_SCORE = 10.0
