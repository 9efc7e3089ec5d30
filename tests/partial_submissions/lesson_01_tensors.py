"""Three wrong exercises: scrambled pixels, half of the masks exercise, and a crash."""

WRONG_CELLS = {
    # reshape instead of permute: right shape, scrambled values (0 of 2 points)
    "ex_channels_first": (
        "def to_channels_first(images):\n"
        "    n, h, w, c = images.shape\n"
        "    return images.reshape(n, c, h, w)\n"
    ),
    # positive_values keeps zeros (0 of 1), relu is right (1 of 1)
    "ex_masks": (
        "def positive_values(x):\n"
        "    return x[x >= 0]\n"
        "\n"
        "def relu(x):\n"
        "    return torch.where(x > 0, x, torch.zeros_like(x))\n"
    ),
    # a crash inside the learner's function (0 of 2)
    "ex_batch_to": (
        "def batch_to(batch, device):\n"
        "    return {key: value.to(device) for key, value in batch.items()}\n"
    ),
}
EXPECTED_SCORE = 15.0
