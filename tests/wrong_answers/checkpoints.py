"""Lesson 06 Saving, loading and resuming: the reference passes, plausible wrong answers fail by name."""

from pathlib import Path

import torch

from helpers.checks import checkpoints as checks
from helpers.reference import checkpoints as ref
from tests.wrong_answers import Accept, Reject

# ---------------------------------------------------------------- save_checkpoint


def _save(path, entries, drop=()):
    torch.save({k: v for k, v in entries.items() if k not in drop}, path)


def _entries(model, optimizer, scheduler, generator, epoch, loss):
    return {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
            "loader_rng": generator.get_state(), "loss": loss}


def save_model_only(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, _entries(model, optimizer, scheduler, generator, epoch, loss), drop=("optimizer",))


def save_whole_model(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "model": model})


def save_without_epoch(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, _entries(model, optimizer, scheduler, generator, epoch, loss), drop=("epoch",))


def save_without_scheduler(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, _entries(model, optimizer, scheduler, generator, epoch, loss), drop=("scheduler",))


def save_without_rng(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, _entries(model, optimizer, scheduler, generator, epoch, loss), drop=("torch_rng", "loader_rng"))


def save_seed_not_state(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "torch_rng": torch.initial_seed()})


def save_global_state_for_loader(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "loader_rng": torch.get_rng_state()})


# ---------------------------------------------------------------- load_checkpoint


def _load(path, model, optimizer, scheduler, generator, skip=(), offset=1):
    checkpoint = torch.load(path, map_location="cpu")
    if "model" not in skip:
        model.load_state_dict(checkpoint["model"])
    if "optimizer" not in skip:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if "scheduler" not in skip:
        scheduler.load_state_dict(checkpoint["scheduler"])
    if "torch_rng" not in skip:
        torch.set_rng_state(checkpoint["torch_rng"])
    if "loader_rng" not in skip:
        generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + offset


def load_without_optimizer(path, model, optimizer, scheduler, generator):
    return _load(path, model, optimizer, scheduler, generator, skip=("optimizer",))


def load_rebinding_model(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path)
    model = checkpoint["model"]  # the mistake: rebinds a name, the caller's model is unchanged  # noqa: F841
    return _load(path, torch.nn.Linear(1, 1), optimizer, scheduler, generator, skip=("model",))


def load_returns_saved_epoch(path, model, optimizer, scheduler, generator):
    return _load(path, model, optimizer, scheduler, generator, offset=0)


def load_without_scheduler(path, model, optimizer, scheduler, generator):
    return _load(path, model, optimizer, scheduler, generator, skip=("scheduler",))


def load_without_rng(path, model, optimizer, scheduler, generator):
    return _load(path, model, optimizer, scheduler, generator, skip=("torch_rng", "loader_rng"))


def load_without_loader_rng(path, model, optimizer, scheduler, generator):
    return _load(path, model, optimizer, scheduler, generator, skip=("loader_rng",))


def load_returns_nothing(path, model, optimizer, scheduler, generator):
    _load(path, model, optimizer, scheduler, generator)


# ---------------------------------------------------------------- train_resumable


def _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch,
               save=ref.save_checkpoint, load=ref.load_checkpoint, start_shift=0, save_each_epoch=True,
               resume=True):
    start = load(path, model, optimizer, scheduler, generator) + start_shift if resume and Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        if save_each_epoch:
            save(path, model, optimizer, scheduler, generator, epoch, loss)
    if not save_each_epoch:
        save(path, model, optimizer, scheduler, generator, epochs - 1, loss)


def resume_at_saved_epoch(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch, start_shift=-1)


def resume_one_too_late(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch, start_shift=1)


def resume_never(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch, resume=False)


def resume_save_at_end_only(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch, save_each_epoch=False)


def resume_without_rng(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch,
               save=save_without_rng, load=lambda *a: _load(*a, skip=("torch_rng", "loader_rng")))


def resume_without_optimizer(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch,
               save=save_model_only, load=lambda *a: _load(*a, skip=("optimizer",)))


def resume_without_scheduler(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch,
               save=save_without_scheduler, load=lambda *a: _load(*a, skip=("scheduler",)))


def resume_loads_but_skips_rng(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # Saves everything, but the loader's state is never restored.
    _resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch,
               load=load_without_loader_rng)


# ---------------------------------------------------------------- map_location, inference, prefixes


def load_default_device(path):
    return torch.load(path)


def load_on_gpu(path):
    return torch.load(path, map_location="cuda")


def load_only_model(path):
    return torch.load(path, map_location="cpu")["model"]


def load_with_cpu_device(path):
    return torch.load(path, map_location=torch.device("cpu"))


def inference_no_eval(path, model):
    model.load_state_dict(torch.load(path, map_location="cpu")["model"])
    return model


def inference_whole_checkpoint(path, model):
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.eval()


def inference_unsafe_load(path, model):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=False)["model"])
    return model.eval()


def strip_everywhere(state_dict):
    return {key.replace("module.", ""): value for key, value in state_dict.items()}


def strip_by_slicing(state_dict):
    return {key[7:]: value for key, value in state_dict.items()}


def strip_nothing(state_dict):
    return dict(state_dict)


def strip_with_lstrip(state_dict):
    return {key.lstrip("module."): value for key, value in state_dict.items()}


def strip_with_split(state_dict):
    # Correct too: drop the first dotted part only when it is "module".
    return {(key.split(".", 1)[1] if key.startswith("module.") else key): value for key, value in state_dict.items()}


# ---------------------------------------------------------------- issue 12: whole classes of mistakes

# A learner's notebook namespace: a wrong save_checkpoint (no random states), the right load_checkpoint,
# and DEVICE, which is the CPU on a machine without a GPU.
save_checkpoint = save_without_rng
load_checkpoint = ref.load_checkpoint
DEVICE = torch.device("cpu")


def resumable_on_own_save(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    """Right in itself; calls this namespace's (wrong) save_checkpoint. Graded with the reference one."""
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def resume_records_count(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for done, _ in enumerate(range(start, epochs)):  # the mistake: counts from 0 again after a restart
        loss = run_epoch(model, loader, optimizer, scheduler)
        ref.save_checkpoint(path, model, optimizer, scheduler, generator, done, loss)


def load_onto_device(path):
    return torch.load(path, map_location=DEVICE)


def strip_in_place(state_dict):
    for key in list(state_dict):
        state_dict[key.removeprefix("module.")] = state_dict.pop(key)
    return state_dict


NEW_CASES = [
    Accept(checks.check_resume_equal, resumable_on_own_save),
    Accept(checks.check_resume_epochs, resumable_on_own_save),
    Reject(checks.check_resume_epochs, resume_records_count, "not a count of the epochs since the restart"),
    Reject(checks.check_load_on_cpu, load_onto_device, "went to DEVICE"),
    Reject(checks.check_strip_module_prefix, strip_in_place, "build and return a new dict"),
]

CASES = [
    Accept(checks.check_save_checkpoint_basics, ref.save_checkpoint),
    Reject(checks.check_save_checkpoint_basics, save_model_only, "momentum buffers"),
    Reject(checks.check_save_checkpoint_basics, save_whole_model, "whole Python objects"),
    Reject(checks.check_save_checkpoint_basics, save_without_epoch, "no 'epoch' entry"),
    Accept(checks.check_save_checkpoint_resume_state, ref.save_checkpoint),
    Reject(checks.check_save_checkpoint_resume_state, save_without_scheduler, "start again from its first value"),
    Reject(checks.check_save_checkpoint_resume_state, save_without_rng, "different random masks"),
    Reject(checks.check_save_checkpoint_resume_state, save_seed_not_state, "a seed restarts the random stream"),
    Reject(checks.check_save_checkpoint_resume_state, save_global_state_for_loader, "its own generator"),
    Accept(checks.check_load_checkpoint_states, ref.load_checkpoint),
    Reject(checks.check_load_checkpoint_states, load_without_optimizer, "momentum buffers start again from zero"),
    Reject(checks.check_load_checkpoint_states, load_rebinding_model, "weights were not restored"),
    Accept(checks.check_load_checkpoint_resume, ref.load_checkpoint),
    Reject(checks.check_load_checkpoint_resume, load_returns_saved_epoch, "the saved epoch"),
    Reject(checks.check_load_checkpoint_resume, load_without_scheduler, "scheduler was not restored"),
    Reject(checks.check_load_checkpoint_resume, load_without_rng, "global random state was not restored"),
    Reject(checks.check_load_checkpoint_resume, load_without_loader_rng, "shuffled in a different order"),
    Reject(checks.check_load_checkpoint_resume, load_returns_nothing, "returned None"),
    Accept(checks.check_resume_epochs, ref.train_resumable),
    Reject(checks.check_resume_epochs, resume_at_saved_epoch, "off by one"),
    Reject(checks.check_resume_epochs, resume_one_too_late, "one epoch too few"),
    Reject(checks.check_resume_epochs, resume_never, "ran all"),
    Reject(checks.check_resume_epochs, resume_save_at_end_only, "save a checkpoint at the end of every epoch"),
    Accept(checks.check_resume_equal, ref.train_resumable),
    Reject(checks.check_resume_equal, resume_without_rng, "different random masks"),
    Reject(checks.check_resume_equal, resume_without_optimizer, "momentum buffers"),
    Reject(checks.check_resume_equal, resume_without_scheduler, "learning-rate schedule"),
    Reject(checks.check_resume_equal, resume_loads_but_skips_rng, "must restore the model, optimizer, scheduler"),
    Reject(checks.check_resume_equal, resume_at_saved_epoch, "off by one"),
    Accept(checks.check_load_on_cpu, ref.load_on_cpu),
    Accept(checks.check_load_on_cpu, load_with_cpu_device),
    Reject(checks.check_load_on_cpu, load_default_device, "map_location='cpu'"),
    Reject(checks.check_load_on_cpu, load_on_gpu, "map_location='cpu'"),
    Reject(checks.check_load_on_cpu, load_only_model, "whole checkpoint"),
    Accept(checks.check_load_for_inference, ref.load_for_inference),
    Reject(checks.check_load_for_inference, inference_no_eval, "forgot model.eval()"),
    Reject(checks.check_load_for_inference, inference_whole_checkpoint, "under checkpoint['model']"),
    Reject(checks.check_load_for_inference, inference_unsafe_load, "weights_only=False"),
    Accept(checks.check_strip_module_prefix, ref.strip_module_prefix),
    Accept(checks.check_strip_module_prefix, strip_with_split),
    Reject(checks.check_strip_module_prefix, strip_everywhere, "everywhere in the key"),
    Reject(checks.check_strip_module_prefix, strip_by_slicing, "first 7 characters"),
    Reject(checks.check_strip_module_prefix, strip_nothing, "still start with 'module.'"),
    Reject(checks.check_strip_module_prefix, strip_with_lstrip, "str.lstrip('module.') removes any of the characters"),
] + NEW_CASES
