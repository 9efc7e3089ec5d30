"""Three wrong exercises: a collective on rank 0 only, no set_epoch, every rank saving."""

WRONG_CELLS = {
    # all_reduce only on rank 0: rank 1 leaves, rank 0 hears its connection close (0 of 3).
    # train_by_hand, which calls it, is graded with the reference average_gradients (keeps its 2 of 2).
    "ex_average_gradients": (
        "def average_gradients(model):\n"
        "    if dist.get_rank() == 0:\n"
        "        for p in [p for p in model.parameters() if p.grad is not None]:\n"
        "            dist.all_reduce(p.grad)\n"
        "            p.grad /= dist.get_world_size()\n"
    ),
    # sampler.set_epoch never called: every epoch repeats the first one's order (0 of 3)
    "ex_epoch_batches": (
        "def epoch_batches(dataset, global_batch_size, epochs):\n"
        "    sampler = DistributedSampler(dataset)\n"
        "    loader = DataLoader(dataset, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler)\n"
        "    return [[batch.tolist() for batch in loader] for _ in range(epochs)]\n"
    ),
    # every rank writes the checkpoint (0 of 3)
    "ex_save_and_load": (
        "def save_and_load(model, path):\n"
        "    torch.save(model.state_dict(), path)\n"
        "    dist.barrier()\n"
        "    model.load_state_dict(torch.load(path, map_location='cpu'))\n"
    ),
}
EXPECTED_SCORE = 11.0
