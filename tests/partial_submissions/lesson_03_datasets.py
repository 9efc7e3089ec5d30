"""Three wrong exercises: left padding, a per-image std, and an unseeded split."""

WRONG_CELLS = {
    # pads on the left (0 of 1 for the padded batch), lengths are right (1 of 1)
    "ex_pad_collate": (
        "def pad_collate(batch):\n"
        "    lengths = torch.tensor([len(s) for s in batch])\n"
        "    padded = torch.zeros(len(batch), int(lengths.max()), dtype=batch[0].dtype)\n"
        "    for row, sequence in enumerate(batch):\n"
        "        padded[row, padded.shape[1] - len(sequence):] = sequence\n"
        "    return padded, lengths\n"
    ),
    # the mean is right (1 of 1), the std is the average of per-image stds (0 of 2)
    "ex_mean_std": (
        "def mean_std(dataset, batch_size=1000):\n"
        "    count, total, stds = 0, 0.0, []\n"
        "    for images, _ in DataLoader(dataset, batch_size=batch_size):\n"
        "        count += images.numel()\n"
        "        total += images.double().sum().item()\n"
        "        stds += [image.std().item() for image in images]\n"
        "    return total / count, sum(stds) / len(stds)\n"
    ),
    # no generator: random_split draws from the global generator (0 of 1)
    "ex_split": (
        "def split_train_val(dataset, val_fraction, seed):\n"
        "    n_val = int(len(dataset) * val_fraction)\n"
        "    train, val = random_split(dataset, [len(dataset) - n_val, n_val])\n"
        "    return train, val\n"
    ),
}
EXPECTED_SCORE = 16.0
