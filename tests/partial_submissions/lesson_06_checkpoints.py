"""Three wrong exercises: a checkpoint without random states, prefixes stripped everywhere, no eval()."""

WRONG_CELLS = {
    # no random states: model/optimizer/epoch/loss right (2 of 2), scheduler and RNG (0 of 2);
    # train_resumable, which calls this save_checkpoint, is graded with the reference save_checkpoint
    # and load_checkpoint (one bug loses one exercise's points), so it keeps its 4 of 4
    "ex_save_checkpoint": (
        "def save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss):\n"
        "    torch.save({'epoch': epoch, 'model': model.state_dict(), 'optimizer': optimizer.state_dict(),\n"
        "                'scheduler': scheduler.state_dict(), 'loss': loss}, path)\n"
    ),
    # 'module.' removed everywhere in the key (0 of 2)
    "ex_strip_prefix": (
        "def strip_module_prefix(state_dict):\n"
        "    return {key.replace('module.', ''): value for key, value in state_dict.items()}\n"
    ),
    # weights loaded but the model is left in training mode (0 of 2)
    "ex_load_for_inference": (
        "def load_for_inference(path, model):\n"
        "    model.load_state_dict(torch.load(path, map_location='cpu')['model'])\n"
        "    return model\n"
    ),
}
EXPECTED_SCORE = 14.0
