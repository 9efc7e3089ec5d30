"""Three wrong exercises: mismatched channels in LeNet, predict without eval(), and a loss that
ignores `reduction` (half credit on that exercise)."""

WRONG_CELLS = {
    # conv2's in_channels does not match conv1's out_channels: forward fails at conv2 (0 of 1 + 2 points)
    "ex_lenet": (
        "class LeNet(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)\n"
        "        self.conv2 = nn.Conv2d(3, 16, kernel_size=5)\n"
        "        self.fc1 = nn.Linear(16 * 5 * 5, 120)\n"
        "        self.fc2 = nn.Linear(120, 84)\n"
        "        self.fc3 = nn.Linear(84, 10)\n"
        "\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        x = F.max_pool2d(F.relu(self.conv1(x)), 2)\n"
        "        x = F.max_pool2d(F.relu(self.conv2(x)), 2)\n"
        "        x = torch.flatten(x, 1)\n"
        "        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))\n"
    ),
    # the mean is right (2 of 2) but reduction is ignored (0 of 1)
    "ex_label_smoothing": (
        "def label_smoothing_cross_entropy(logits, targets, smoothing=0.1, reduction='mean'):\n"
        "    log_probs = F.log_softmax(logits, dim=1)\n"
        "    nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)\n"
        "    return ((1 - smoothing) * nll + smoothing * -log_probs.mean(dim=1)).mean()\n"
    ),
    # no model.eval(): dropout stays active while predicting (0 of 2)
    "ex_predict": (
        "def predict(model, images):\n"
        "    with torch.no_grad():\n"
        "        return model(images).argmax(dim=1)\n"
    ),
}
EXPECTED_SCORE = 14.0
