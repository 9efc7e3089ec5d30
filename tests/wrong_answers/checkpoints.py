"""Lesson 06 Saving, loading and resuming: the reference passes, plausible wrong answers fail by name."""

import copy
import functools
import os
import random
import re
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
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


def save_loss_as_tensor(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "loss": torch.tensor(loss)})


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
    checkpoint = torch.load(path, map_location="cpu")
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


def resume_restores_weights_and_scheduler(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # Restores the model and the schedule by hand from the checkpoint, and nothing else
    start = 0
    if os.path.exists(path):
        saved = torch.load(path, map_location="cpu", weights_only=False)
        model.load_state_dict(saved["model"])
        scheduler.load_state_dict(saved["scheduler"])
        start = saved["epoch"] + 1
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


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


def inference_into_a_copy(path, model):
    # Wrong: loads into a copy and returns it; the caller's model keeps its old weights and its mode
    ready = copy.deepcopy(model)
    ready.load_state_dict(torch.load(path, map_location="cpu")["model"])
    return ready.eval()


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
    Reject(checks.check_save_checkpoint_basics, save_loss_as_tensor, "a tensor holding the right value"),
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
    Reject(checks.check_resume_equal, resume_loads_but_skips_rng, "differed from the uninterrupted run's at epoch 2: the "
           "loader generator's state"),
    Reject(checks.check_resume_equal, resume_at_saved_epoch, "off by one"),
    Reject(checks.check_resume_equal, resume_restores_weights_and_scheduler,
           "the optimizer's state (SGD's momentum buffers), torch's global random state (dropout), the loader "
           "generator's state"),
    Accept(checks.check_load_on_cpu, ref.load_on_cpu),
    Accept(checks.check_load_on_cpu, load_with_cpu_device),
    Reject(checks.check_load_on_cpu, load_default_device, "map_location='cpu'"),
    Reject(checks.check_load_on_cpu, load_on_gpu, "map_location='cpu'"),
    Reject(checks.check_load_on_cpu, load_only_model, "whole checkpoint"),
    Accept(checks.check_load_for_inference, ref.load_for_inference),
    Reject(checks.check_load_for_inference, inference_into_a_copy, "returned another model than the one it was given"),
    Reject(checks.check_load_for_inference, inference_no_eval, "call model.eval() (with the parentheses"),
    Reject(checks.check_load_for_inference, inference_whole_checkpoint, "under checkpoint['model']"),
    Reject(checks.check_load_for_inference, inference_unsafe_load, "weights_only=False"),
    Accept(checks.check_strip_module_prefix, ref.strip_module_prefix),
    Accept(checks.check_strip_module_prefix, strip_with_split),
    Reject(checks.check_strip_module_prefix, strip_everywhere, "everywhere in the key"),
    Reject(checks.check_strip_module_prefix, strip_by_slicing, "first 7 characters"),
    Reject(checks.check_strip_module_prefix, strip_nothing, "still start with 'module.'"),
    Reject(checks.check_strip_module_prefix, strip_with_lstrip, "str.lstrip('module.') removes any of the characters"),
] + NEW_CASES


# ---------------------------------------------------------------- issue 18: correct answers written differently


def save_step_by_step(path, model, optimizer, scheduler, generator, epoch, loss):
    checkpoint = {}
    checkpoint["epoch"] = int(epoch)
    checkpoint["model"] = copy.deepcopy(model.state_dict())
    checkpoint["optimizer"] = copy.deepcopy(optimizer.state_dict())
    checkpoint["scheduler"] = scheduler.state_dict()
    checkpoint["torch_rng"] = torch.random.get_rng_state()
    checkpoint["loader_rng"] = generator.get_state().clone()
    checkpoint["loss"] = float(loss)
    torch.save(obj=checkpoint, f=path)


def save_atomically(path, model, optimizer, scheduler, generator, epoch, loss):
    # Write a temporary file, then rename: a job killed while writing never leaves half a checkpoint.
    tmp = Path(path).with_suffix(".tmp")
    ref.save_checkpoint(tmp, model, optimizer, scheduler, generator, epoch, loss)
    os.replace(tmp, path)


def save_with_print(path, model, optimizer, scheduler, generator, epoch, loss):
    print(f"saving epoch {epoch} (loss {loss:.3f}) to {path}")
    ref.save_checkpoint(str(path), model, optimizer, scheduler, generator, epoch, loss)


def save_reseeds(path, model, optimizer, scheduler, generator, epoch, loss):
    torch.manual_seed(epoch)  # "so the next epoch is reproducible": resets the caller's random stream
    ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def save_switches_to_eval(path, model, optimizer, scheduler, generator, epoch, loss):
    model.eval()  # "weights for inference": the caller's model goes on training without dropout
    ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def load_keywords(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(f=path, map_location=torch.device("cpu"), weights_only=True)
    model.load_state_dict(state_dict=checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.random.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return int(checkpoint["epoch"]) + 1


def load_storage_lambda(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, map_location=lambda storage, location: storage)
    generator.set_state(checkpoint["loader_rng"])
    torch.set_rng_state(checkpoint["torch_rng"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    model.load_state_dict(checkpoint["model"])
    next_epoch = checkpoint["epoch"] + 1
    print(f"resuming at epoch {next_epoch}")
    return next_epoch


def load_device_dict(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, {"cuda:0": "cpu"})
    return _load_from(checkpoint, model, optimizer, scheduler, generator)


def _load_from(checkpoint, model, optimizer, scheduler, generator):
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1


def load_without_map_location(path, model, optimizer, scheduler, generator):
    return _load_from(torch.load(path), model, optimizer, scheduler, generator)


def resume_while_loop(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    epoch = 0
    if os.path.exists(path):
        epoch = load_checkpoint(path, model, optimizer, scheduler, generator)
    while epoch < epochs:
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
        epoch += 1


def resume_one_thread_for_determinism(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # "one thread makes the runs reproducible": the caller's thread count stays changed after the call
    torch.set_num_threads(1)
    resume_while_loop(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)


def resume_catches_the_kill(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # a killed job does not run its except clause: the check's stop is not an Exception, so this still crashes
    try:
        resume_while_loop(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)
    except Exception:
        print("training stopped early")


def resume_try_except(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    try:
        start = load_checkpoint(path, model, optimizer, scheduler, generator)
    except FileNotFoundError:
        start = 0
    for epoch in range(start, epochs):
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch,
                        run_epoch(model, loader, optimizer, scheduler))


def resume_is_file_with_print(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    path = Path(path)
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if path.is_file() else 0
    print(f"starting at epoch {start} of {epochs}")
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
        print(f"epoch {epoch}: loss {loss:.3f}")


def resume_reseeds(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    torch.manual_seed(0)  # "for reproducibility": every restart replays the same dropout masks from 0
    ref.train_resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)


def load_cpu_positional(path):
    return torch.load(path, "cpu", weights_only=True)


def load_cpu_lambda(path):
    return torch.load(path, map_location=lambda storage, location: storage)


def load_cpu_device_dict(path):
    return torch.load(path, map_location={"cuda:0": "cpu"})


def inference_train_false(path, model):
    state = torch.load(path, map_location="cpu")["model"]
    model.load_state_dict(state_dict=state, strict=True)
    model.train(False)
    return model


def inference_frozen(path, model):
    model.load_state_dict(torch.load(path, map_location=torch.device("cpu"))["model"])
    model.requires_grad_(False)  # also fine for predictions: no gradients needed
    return model.eval()


def inference_every_module(path, model):
    checkpoint = torch.load(path, map_location=lambda storage, location: storage, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    for module in model.modules():
        module.eval()
    return model


def inference_default_device(path, model):
    model.load_state_dict(torch.load(path)["model"])
    return model.eval()


def strip_regex(state_dict):
    return OrderedDict((re.sub(r"^module\.", "", key), value) for key, value in state_dict.items())


def strip_loop_startswith(state_dict):
    stripped = {}
    for key, value in state_dict.items():
        if key.startswith("module."):
            key = key[len("module."):]
        stripped[key] = value
    return stripped


def strip_with_print(state_dict):
    print(f"{sum(k.startswith('module.') for k in state_dict)} keys had the prefix")
    return {key.removeprefix("module."): value for key, value in state_dict.items()}


ISSUE_18_CASES = [
    *[Accept(check, answer) for check in (checks.check_save_checkpoint_basics, checks.check_save_checkpoint_resume_state)
      for answer in (save_step_by_step, save_atomically, save_with_print)],
    Reject(checks.check_save_checkpoint_basics, save_reseeds, "to record a stream, read its state (torch.get_rng_state()"),
    Reject(checks.check_save_checkpoint_basics, save_switches_to_eval, "left in eval mode"),
    *[Accept(check, answer) for check in (checks.check_load_checkpoint_states, checks.check_load_checkpoint_resume)
      for answer in (load_keywords, load_storage_lambda, load_device_dict)],
    Reject(checks.check_load_checkpoint_states, load_without_map_location, "map_location='cpu'"),
    Reject(checks.check_load_checkpoint_resume, load_without_map_location, "map_location='cpu'"),
    *[Accept(check, answer) for check in (checks.check_resume_epochs, checks.check_resume_equal)
      for answer in (resume_while_loop, resume_try_except, resume_is_file_with_print)],
    Reject(checks.check_resume_equal, resume_reseeds, "resumed weights differ"),
    # the framework's rules hold here too (the function is called through `call`)
    Reject(checks.check_resume_epochs, resume_one_thread_for_determinism, "changed torch's thread count"),
    Accept(checks.check_resume_epochs, resume_catches_the_kill),
    Accept(checks.check_load_on_cpu, load_cpu_positional),
    Accept(checks.check_load_on_cpu, load_cpu_lambda),
    # {"cuda:0": "cpu"} maps only the first GPU: a checkpoint saved on cuda:1 still fails (an independent learner)
    Reject(checks.check_load_on_cpu, load_cpu_device_dict, "maps only the devices it names"),
    Accept(checks.check_load_for_inference, inference_train_false),
    Accept(checks.check_load_for_inference, inference_frozen),
    Accept(checks.check_load_for_inference, inference_every_module),
    Reject(checks.check_load_for_inference, inference_default_device, "map_location='cpu'"),
    Accept(checks.check_strip_module_prefix, strip_regex),
    Accept(checks.check_strip_module_prefix, strip_loop_startswith),
    Accept(checks.check_strip_module_prefix, strip_with_print),
]

CASES = CASES + ISSUE_18_CASES


# ---------------------------------------------------------------- the put-together exercise


def _jittered(run, epochs, path, after_epoch, *, keys=("torch", "python"), notify_first=False, offset=1,
              reseed=False, announce=False, shuffle=True):
    model, optimizer, scheduler, _, generator = run
    if reseed:
        torch.manual_seed(0)
    start = 0
    try:
        saved = torch.load(path, map_location="cpu")
    except FileNotFoundError:
        saved = None
    if saved is not None:
        model.load_state_dict(saved["weights"])
        optimizer.load_state_dict(saved["adam"])
        scheduler.load_state_dict(saved["schedule"])
        if shuffle:
            generator.set_state(saved["shuffle"])
        if "torch" in keys:
            torch.set_rng_state(saved["dropout"])
        if "python" in keys:
            random.setstate(saved["noise"])
        start = saved["finished"] + offset
    for epoch in range(start, epochs):
        loss = checks.jitter_epoch(run)
        if notify_first:
            after_epoch(epoch)
        tmp = Path(path).with_suffix(".tmp")
        torch.save({"finished": epoch, "weights": model.state_dict(), "adam": optimizer.state_dict(),
                    "schedule": scheduler.state_dict(), "shuffle": generator.get_state(),
                    "dropout": torch.get_rng_state(), "noise": random.getstate(), "loss": loss}, tmp)
        os.replace(tmp, path)  # a kill while writing never leaves half a file
        if announce:
            print(f"epoch {epoch}: loss {loss:.3f}, saved")
        if not notify_first:
            after_epoch(epoch)


def jittered_own_keys_atomic(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch)


def jittered_with_prints(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, announce=True)


def jittered_while_loop(run, epochs, path, after_epoch):
    model, optimizer, scheduler, _, generator = run
    state = {"epoch": -1}
    if os.path.isfile(path):
        state = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
        for obj, key in ((model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler")):
            obj.load_state_dict(state[key])
        torch.set_rng_state(state["torch_rng"])
        generator.set_state(state["loader_rng"])
        random.setstate(state["python_rng"])
    epoch = state["epoch"] + 1
    while epoch < epochs:
        loss = checks.jitter_epoch(run)
        state = {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                 "loader_rng": generator.get_state(), "python_rng": random.getstate(), "loss": loss}
        torch.save(state, path)
        after_epoch(epoch)
        epoch += 1


def _jittered_pickled(run, epochs, path, after_epoch, *, objects):
    """Exact on resume, but the file holds what torch.load's default refuses; it loads its own file unsafely."""
    model, optimizer, scheduler, _, generator = run
    start = 0
    if os.path.exists(path):
        saved = torch.load(path, weights_only=False)
        if objects:
            model.load_state_dict(saved["model"].state_dict())
            optimizer.load_state_dict(saved["optimizer"].state_dict())
            scheduler.load_state_dict(saved["scheduler"].state_dict())
        else:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            np.random.set_state(saved["numpy_rng"])
        generator.set_state(saved["loader_rng"])
        torch.set_rng_state(saved["torch_rng"])
        random.setstate(saved["python_rng"])
        start = saved["epoch"] + 1
    for epoch in range(start, epochs):
        checks.jitter_epoch(run)
        state = {"epoch": epoch, "loader_rng": generator.get_state(), "torch_rng": torch.get_rng_state(),
                 "python_rng": random.getstate()}
        if objects:
            state.update(model=model, optimizer=optimizer, scheduler=scheduler)
        else:
            state.update(model=model.state_dict(), optimizer=optimizer.state_dict(),
                         scheduler=scheduler.state_dict(), numpy_rng=np.random.get_state())
        torch.save(state, path)
        after_epoch(epoch)


def jittered_saves_objects(run, epochs, path, after_epoch):
    _jittered_pickled(run, epochs, path, after_epoch, objects=True)


def jittered_saves_numpy_state(run, epochs, path, after_epoch):
    _jittered_pickled(run, epochs, path, after_epoch, objects=False)


def jittered_without_python_rng(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, keys=("torch",))


def jittered_without_torch_rng(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, keys=("python",))


def jittered_notifies_before_saving(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, notify_first=True)


def jittered_resumes_at_saved_epoch(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, offset=0)


def jittered_reseeds(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, reseed=True)


def _jittered_stream_reseeded(run, epochs, path, after_epoch, stream):
    # Saves everything but one random stream, and on a restart reseeds that stream from the saved epoch instead
    model, optimizer, scheduler, _, generator = run
    start = 0
    if os.path.exists(path):
        saved = torch.load(path, map_location="cpu", weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        generator.set_state(saved["loader_rng"])
        if stream == "python":
            torch.set_rng_state(saved["torch_rng"])
            random.seed(saved["epoch"] + 1)
        else:
            random.setstate(saved["python_rng"])
            torch.manual_seed(saved["epoch"] + 7)
        start = saved["epoch"] + 1
    for epoch in range(start, epochs):
        loss = checks.jitter_epoch(run)
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "loader_rng": generator.get_state(),
                    "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(), "loss": loss}, path)
        after_epoch(epoch)


def jittered_reseeds_python_on_restart(run, epochs, path, after_epoch):
    _jittered_stream_reseeded(run, epochs, path, after_epoch, "python")


def jittered_reseeds_torch_on_restart(run, epochs, path, after_epoch):
    _jittered_stream_reseeded(run, epochs, path, after_epoch, "torch")


JITTER_CASES = [
    Reject(checks.check_train_jittered, jittered_reseeds_python_on_restart, "what a restart gets wrong is Python's"),
    Reject(checks.check_train_jittered, jittered_reseeds_torch_on_restart, "what a restart gets wrong is torch's"),
    Accept(checks.check_train_jittered, ref.train_jittered),
    Accept(checks.check_train_jittered, jittered_own_keys_atomic),
    Accept(checks.check_train_jittered, jittered_with_prints),
    Accept(checks.check_train_jittered, jittered_while_loop),
    Reject(checks.check_train_jittered, jittered_without_python_rng, "random.getstate()"),
    Reject(checks.check_train_jittered, jittered_without_torch_rng, "dropout and torch.randn_like"),
    Reject(checks.check_train_jittered, jittered_notifies_before_saving, "nothing of that epoch was saved yet"),
    Reject(checks.check_train_jittered, jittered_resumes_at_saved_epoch, "the epochs run were"),
    Reject(checks.check_train_jittered, jittered_reseeds, "a run that was never stopped ends with other weights"),
    Reject(checks.check_train_jittered, jittered_saves_objects, "refuses your file"),
    Reject(checks.check_train_jittered, jittered_saves_numpy_state, "a NumPy array (np.random.get_state() holds one)"),
]

CASES = CASES + JITTER_CASES


# ---------------------------------------------------------------- issue 18, independent learner: classes of mistakes

# As in the notebook, train_resumable calls the save_checkpoint and load_checkpoint of its namespace (the checks swap
# in the reference ones and watch the calls)
save_checkpoint, load_checkpoint = ref.save_checkpoint, ref.load_checkpoint


def strip_from_a_deep_copy(state_dict):
    return {key.removeprefix("module."): value for key, value in copy.deepcopy(state_dict).items()}


def load_cpu_first_gpu_only(path):
    return torch.load(path, map_location={"cuda:0": "cpu", "cpu": "cpu"})


def load_cpu_every_gpu_dict(path):
    # Also correct: every GPU a file can name here is mapped
    return torch.load(path, map_location={f"cuda:{i}": "cpu" for i in range(8)})


def resume_saves_before_the_epoch(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    epoch = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    while epoch < epochs:
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, float("nan"))
        run_epoch(model, loader, optimizer, scheduler)
        epoch += 1


def resume_epochs_more(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    first = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    for epoch in range(first, first + epochs):
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch,
                            run_epoch(model, loader, optimizer, scheduler))


def resume_next_of_next(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    first = 0
    if os.path.exists(path):
        first = 1 + load_checkpoint(path, model, optimizer, scheduler, generator)
    for epoch in range(first, epochs):
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch,
                            run_epoch(model, loader, optimizer, scheduler))


def load_checkpoint_if_any(path, model, optimizer, scheduler, generator):
    return load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).is_file() else 0


def jittered_without_shuffle_state(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, shuffle=False)


def jittered_reports_then_saves(run, epochs, path, after_epoch):
    _jittered(run, epochs, path, after_epoch, notify_first=True, announce=True)


LEARNER_CLASSES = [
    Reject(checks.check_strip_module_prefix, strip_from_a_deep_copy, "the task asks for the same tensors"),
    Reject(checks.check_load_on_cpu, load_cpu_first_gpu_only, "maps only the devices it names"),
    Accept(checks.check_load_on_cpu, load_cpu_every_gpu_dict),
    Reject(checks.check_resume_epochs, resume_saves_before_the_epoch, "you saved before run_epoch ran"),
    Reject(checks.check_resume_epochs, resume_epochs_more, "the number of epochs in total"),
    Reject(checks.check_resume_equal, resume_epochs_more, "the number of epochs in total"),
    Reject(checks.check_resume_epochs, resume_next_of_next, "adding 1 to it skips an epoch"),
    Reject(checks.check_train_jittered, jittered_without_shuffle_state, "the loader's generator was not restored"),
    Reject(checks.check_train_jittered, jittered_reports_then_saves, "save the checkpoint first"),
]

CASES = CASES + LEARNER_CLASSES


# ---------------------------------------------------------------- issue 18, independent round 3: classes of mistakes


def save_global_seed_for_loader(path, model, optimizer, scheduler, generator, epoch, loss):
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "loader_rng": torch.initial_seed()})


def save_logs_a_fresh_seed(path, model, optimizer, scheduler, generator, epoch, loss):
    entries = _entries(model, optimizer, scheduler, generator, epoch, loss)
    print(f"saving epoch {epoch}, loader seed {generator.seed()}")  # seed() reseeds, it does not read
    _save(path, entries)


def save_draws_a_run_id(path, model, optimizer, scheduler, generator, epoch, loss):
    run_id = int(torch.randint(0, 1000, (1,), generator=generator))  # draws from the caller's loader generator
    _save(path, {**_entries(model, optimizer, scheduler, generator, epoch, loss), "run_id": run_id})


def save_pytorch_tutorial_keys(path, model, optimizer, scheduler, generator, epoch, loss):
    entries = _entries(model, optimizer, scheduler, generator, epoch, loss)
    entries["state_dict"] = entries.pop("model")
    _save(path, entries)


def load_maps_a_named_device(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, map_location={"cuda:1": "cpu"})  # the file comes from cuda:0
    return _load_from(checkpoint, model, optimizer, scheduler, generator)


def load_then_builds_a_layer(path, model, optimizer, scheduler, generator):
    start = _load(path, model, optimizer, scheduler, generator)
    torch.nn.Linear(2, 2)  # initialising a layer draws from the global generator just restored
    return start


def load_into_a_new_generator(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, map_location="cpu")
    start = _load_from({**checkpoint, "loader_rng": generator.get_state()}, model, optimizer, scheduler, generator)
    restored = torch.Generator()
    restored.set_state(checkpoint["loader_rng"])  # the DataLoader never sees this generator
    return start


def resume_saves_every_third_epoch(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    start = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        if epoch % 3 == 2 or epoch == epochs - 1:
            save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def resume_saves_even_epochs(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    start = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        if epoch % 2 == 0:
            save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


ROUND_3_CLASSES = [
    Reject(checks.check_save_checkpoint_resume_state, save_global_seed_for_loader,
           "checkpoint['loader_rng'] is a number (a seed?)"),
    Reject(checks.check_save_checkpoint_basics, save_logs_a_fresh_seed, "generator.seed() does not return the seed"),
    Reject(checks.check_save_checkpoint_resume_state, save_logs_a_fresh_seed, "has another state after the call"),
    Reject(checks.check_save_checkpoint_basics, save_draws_a_run_id, "has another state after the call"),
    Reject(checks.check_save_checkpoint_resume_state, save_pytorch_tutorial_keys, "no 'model' entry"),
    Reject(checks.check_load_checkpoint_states, load_maps_a_named_device, "maps only the devices it names"),
    Reject(checks.check_load_checkpoint_resume, load_then_builds_a_layer, "something drew from (or reseeded)"),
    Reject(checks.check_load_checkpoint_resume, load_into_a_new_generator, "on the generator argument itself"),
    Reject(checks.check_resume_epochs, resume_saves_every_third_epoch, "at the end of every epoch"),
    Reject(checks.check_resume_epochs, resume_saves_even_epochs, "after epochs [0] only"),
]

CASES = CASES + ROUND_3_CLASSES


# ---------------------------------------------------------------- issue 18, independent round 4: classes of mistakes


def resume_saves_the_last_epoch_on_ctrl_c(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # Saving when stopped: the stop comes in the middle of an epoch, so this files a half-done epoch as finished
    start = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    loss = float("nan")
    for epoch in range(start, epochs):
        try:
            loss = run_epoch(model, loader, optimizer, scheduler)
        except KeyboardInterrupt:
            save_checkpoint(path, model, optimizer, scheduler, generator, epoch - 1, loss)
            raise
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def resume_reports_ctrl_c(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # Also correct: a handler that only reports the stop and lets it through
    start = load_checkpoint_if_any(path, model, optimizer, scheduler, generator)
    try:
        for epoch in range(start, epochs):
            save_checkpoint(path, model, optimizer, scheduler, generator, epoch,
                            run_epoch(model, loader, optimizer, scheduler))
    except KeyboardInterrupt:
        print(f"stopped; {path} holds the last finished epoch")
        raise


def load_on_cpu_unless_gpu(path):
    # The device where the tensors end up depends on the machine: on a GPU machine they go to cuda:0
    return torch.load(path, map_location=torch.device("cuda", 0) if torch.cuda.device_count() > 0 else "cpu")


def load_on_cpu_by_storage(path):
    # Also correct: a function map_location that keeps every storage on the CPU
    return torch.load(path, map_location=lambda storage, location: storage.cpu())


def load_into_a_copy_of_the_model(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, map_location="cpu")
    start = _load(path, model, optimizer, scheduler, generator, skip=("model",))
    model = copy.deepcopy(model)  # the name now means another model: the caller's keeps its weights
    model.load_state_dict(checkpoint["model"])
    return start


def load_into_a_rebuilt_optimizer(path, model, optimizer, scheduler, generator):
    checkpoint = torch.load(path, map_location="cpu")
    start = _load(path, model, optimizer, scheduler, generator, skip=("optimizer",))
    optimizer = type(optimizer)(model.parameters(), **optimizer.defaults)  # another optimizer than the caller's
    optimizer.load_state_dict(checkpoint["optimizer"])
    return start


def jittered_noise_state_read_once(run, epochs, path, after_epoch):
    model, optimizer, scheduler, _, generator = run
    first = 0
    if Path(path).exists():
        saved = torch.load(path, map_location="cpu")
        for obj, key in ((model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler")):
            obj.load_state_dict(saved[key])
        torch.set_rng_state(saved["torch_rng"])
        generator.set_state(saved["loader_rng"])
        random.setstate(saved["python_rng"])
        first = saved["epoch"] + 1
    noise_state = random.getstate()  # read once: every checkpoint gets the state of the start
    for epoch in range(first, epochs):
        loss = checks.jitter_epoch(run)
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "loader_rng": generator.get_state(), "python_rng": noise_state, "loss": loss}, path)
        after_epoch(epoch)


def jittered_reports_ctrl_c(run, epochs, path, after_epoch):
    # Also correct: the kill reaches an except KeyboardInterrupt that only reports it
    try:
        ref.train_jittered(run, epochs, path, after_epoch)
    except KeyboardInterrupt:
        print("killed; resume from", path)
        raise


ROUND_4_CLASSES = [
    Reject(checks.check_resume_epochs, resume_saves_the_last_epoch_on_ctrl_c, "wrote the checkpoint file after the stop"),
    Reject(checks.check_resume_equal, resume_saves_the_last_epoch_on_ctrl_c, "a half-done epoch"),
    Accept(checks.check_resume_epochs, resume_reports_ctrl_c),
    Accept(checks.check_resume_equal, resume_reports_ctrl_c),
    Reject(checks.check_load_on_cpu, load_on_cpu_unless_gpu, "which puts every tensor on the GPU"),
    Accept(checks.check_load_on_cpu, load_on_cpu_by_storage),
    Reject(checks.check_load_checkpoint_states, load_into_a_copy_of_the_model, "load_state_dict on another model"),
    Reject(checks.check_load_checkpoint_states, load_into_a_rebuilt_optimizer, "load_state_dict on another optimizer"),
    Reject(checks.check_train_jittered, jittered_noise_state_read_once, "Python random state you save is the one read once"),
    Accept(checks.check_train_jittered, jittered_reports_ctrl_c),
]

CASES = CASES + ROUND_4_CLASSES


# ---------------------------------------------------------------- round 5: a learner who never read the checks


def resume_saves_epoch_plus_one(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # saves after run_epoch, as it should, but files the epoch as "epochs done"
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch + 1, loss)


def resume_torch_saves_epoch_plus_one(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # the same mistake through torch.save itself: no save_checkpoint call shows when each epoch was saved
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        torch.save({"epoch": epoch + 1, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "loader_rng": generator.get_state(), "loss": loss}, path)


def save_seed_read_with_torch_seed(path, model, optimizer, scheduler, generator, epoch, loss):
    # torch.seed() reads like "the current seed"; it reseeds the global generator
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "torch_rng": torch.seed(),
                "loader_rng": generator.get_state(), "loss": loss}, path)


ROUND_5_CLASSES = [
    Reject(checks.check_resume_epochs, resume_saves_epoch_plus_one, "you passed epoch + 1"),
    Reject(checks.check_resume_equal, resume_saves_epoch_plus_one, "you passed epoch + 1"),
    Reject(checks.check_resume_epochs, resume_torch_saves_epoch_plus_one, "with the loop's own epoch (not epoch + 1)"),
    Reject(checks.check_save_checkpoint_basics, save_seed_read_with_torch_seed, "torch.seed() does not tell you the seed"),
    Reject(checks.check_load_checkpoint_resume, load_without_loader_rng,
           "call generator.set_state(checkpoint['loader_rng']) on the generator argument itself"),
]

CASES = CASES + ROUND_5_CLASSES


# From a third learner tester who never read the checks (lesson 06).
def resumable_saves_only_a_new_best(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    best = float("inf")
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        if loss < best:  # an epoch whose loss rose is never saved: a stop after it loses it
            best = loss
            save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def load_on_cpu_when_plain_load_fails(path):  # on a machine with a GPU the first load works, onto the GPU
    try:
        return torch.load(path)
    except RuntimeError:
        return torch.load(path, map_location="cpu")


CASES += [
    Reject(checks.check_resume_epochs, resumable_saves_only_a_new_best, "save a checkpoint at the end of every epoch"),
    Reject(checks.check_load_on_cpu, load_on_cpu_when_plain_load_fails, "calls torch.load without a map_location"),
]


def load_whole_checkpoint_not_strict(path, model, optimizer, scheduler, generator):
    # the whole checkpoint into the model: strict=False skips every key it does not know, so nothing loads
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint, strict=False)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1


CASES += [
    Reject(checks.check_load_checkpoint_states, load_whole_checkpoint_not_strict, "strict=False let that pass"),
]


def load_then_step_scheduler(path, model, optimizer, scheduler, generator):
    # restores everything, then steps the scheduler once more: the learning rate moves one epoch ahead
    epoch = ref.load_checkpoint(path, model, optimizer, scheduler, generator)
    scheduler.step()
    return epoch


CASES += [
    Reject(checks.check_load_checkpoint_states, load_then_step_scheduler, "momentum buffers are right, but its learning rate"),
    Reject(checks.check_load_checkpoint_resume, load_then_step_scheduler, "restored and then stepped 1 more time(s)"),
]


# ---------------------------------------------------------------- from a fourth learner tester


def load_assigning_parameters(path, model, optimizer, scheduler, generator):
    # assign=True: the model gets new Parameters, and the optimizer still steps the old ones
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"], assign=True)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1


def load_onto_the_notebook_device(path, model, optimizer, scheduler, generator):
    # map_location=DEVICE: the CPU here, a GPU on a machine with one
    checkpoint = torch.load(path, map_location=DEVICE)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    generator.set_state(checkpoint["loader_rng"])
    return checkpoint["epoch"] + 1


def load_then_set_last_epoch(path, model, optimizer, scheduler, generator):
    # the scheduler restored, then its last_epoch overwritten with the saved epoch (one short)
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator)
    scheduler.last_epoch = start - 1
    return start


def load_then_reseed_generator(path, model, optimizer, scheduler, generator):
    # the loader's state restored, then its stream started again from its seed
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator)
    generator.manual_seed(generator.initial_seed())
    return start


def resume_saving_at_epoch_start(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # each epoch saves the one before it: the last epoch is never recorded
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    loss = None
    for epoch in range(start, epochs):
        if epoch > start:
            ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch - 1, loss)
        loss = run_epoch(model, loader, optimizer, scheduler)


def resume_deleting_when_done(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # the checkpoint removed at the end: a second start trains everything again
    ref.train_resumable(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch)
    Path(path).unlink()


def resume_stepping_scheduler_again(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # run_epoch steps the scheduler already
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        scheduler.step()
        ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


def resume_reports_last_loss(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # a job started again once finished runs no epoch, and has no loss to report
    start = ref.load_checkpoint(path, model, optimizer, scheduler, generator) if Path(path).exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        ref.save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
    print(f"finished, last loss {loss:.3f}")


def inference_onto_the_notebook_device(path, model):
    model.load_state_dict(torch.load(path, map_location=DEVICE)["model"])
    return model.eval()


def strip_module_without_dot(state_dict):
    return {(k[7:] if k.startswith("module") else k): v for k, v in state_dict.items()}


def strip_prefixed_first(state_dict):
    prefixed = {k.removeprefix("module."): v for k, v in state_dict.items() if k.startswith("module.")}
    return {**prefixed, **{k: v for k, v in state_dict.items() if not k.startswith("module.")}}


def jittered_reports_saved_epoch_again(run, epochs, path, after_epoch):
    # after a restart, the saved epoch is reported once more before the loop
    model, optimizer, scheduler, _, generator = run
    start = 0
    if Path(path).exists():
        checkpoint = torch.load(path, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["torch_rng"])
        generator.set_state(checkpoint["loader_rng"])
        random.setstate(checkpoint["python_rng"])
        start = checkpoint["epoch"] + 1
        after_epoch(checkpoint["epoch"])
    for epoch in range(start, epochs):
        loss = checks.jitter_epoch(run)
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "loader_rng": generator.get_state(), "python_rng": random.getstate(), "loss": loss}, path)
        after_epoch(epoch)


def jittered_steps_scheduler_again(run, epochs, path, after_epoch):
    # jitter_epoch steps the scheduler already
    model, optimizer, scheduler, _, generator = run
    start = 0
    if Path(path).exists():
        checkpoint = torch.load(path, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["torch_rng"])
        generator.set_state(checkpoint["loader_rng"])
        random.setstate(checkpoint["python_rng"])
        start = checkpoint["epoch"] + 1
    for epoch in range(start, epochs):
        loss = checks.jitter_epoch(run)
        scheduler.step()
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "loader_rng": generator.get_state(), "python_rng": random.getstate(), "loss": loss}, path)
        after_epoch(epoch)


CASES += [
    Reject(checks.check_load_checkpoint_states, load_assigning_parameters, "no longer the model's parameters"),
    Reject(checks.check_load_checkpoint_states, load_onto_the_notebook_device, "map_location=DEVICE"),
    Reject(checks.check_load_checkpoint_resume, load_then_set_last_epoch, "and then changed: its last_epoch"),
    Reject(checks.check_load_checkpoint_resume, load_then_reseed_generator, "the generator's state was another one"),
    Reject(checks.check_resume_epochs, resume_saving_at_epoch_start, "a save at the start of the next epoch never"),
    Reject(checks.check_resume_epochs, resume_deleting_when_done, "no checkpoint file was left"),
    Reject(checks.check_resume_epochs, resume_reports_last_loss, "raised UnboundLocalError when started once more"),
    Reject(checks.check_resume_equal, resume_stepping_scheduler_again, "run_epoch steps the scheduler once"),
    Reject(checks.check_load_for_inference, inference_onto_the_notebook_device, "map_location=DEVICE"),
    Reject(checks.check_strip_module_prefix, strip_module_without_dot, "test key.startswith('module.')"),
    Reject(checks.check_strip_module_prefix, strip_prefixed_first, "in a different order"),
    Reject(checks.check_train_jittered, jittered_reports_saved_epoch_again, "reported epoch 1 to after_epoch again"),
    Reject(checks.check_train_jittered, jittered_steps_scheduler_again, "step it nowhere else"),
]


# ---------------------------------------------------------------- learner tester, lesson 06 (t06f): answers that passed

CHECKPOINT_DIR = Path(tempfile.mkdtemp(prefix="course-checkpoints-"))  # the notebook's folder: one of its own, not shared


def save_named_parameters(path, model, optimizer, scheduler, generator, epoch, loss):
    torch.save({
        "epoch": epoch, "model": {k: v.detach() for k, v in model.named_parameters()},
        "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(), "loader_rng": generator.get_state(), "loss": loss,
    }, path)


def save_stepping_scheduler(path, model, optimizer, scheduler, generator, epoch, loss):
    scheduler.step()
    torch.save({
        "epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
        "loader_rng": generator.get_state(), "loss": loss,
    }, path)


@functools.lru_cache(maxsize=None)
def _read_checkpoint_cached(path):
    return torch.load(path, map_location="cpu")


def load_through_lru_cache(path, model, optimizer, scheduler, generator):
    ckpt = _read_checkpoint_cached(str(path))
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    torch.set_rng_state(ckpt["torch_rng"])
    generator.set_state(ckpt["loader_rng"])
    return ckpt["epoch"] + 1


def load_fast_forwarding_scheduler(path, model, optimizer, scheduler, generator):
    ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    for _ in range(ckpt["epoch"] + 1):
        scheduler.step()
    torch.set_rng_state(ckpt["torch_rng"])
    generator.set_state(ckpt["loader_rng"])
    return ckpt["epoch"] + 1


def load_without_cache(path, model, optimizer, scheduler, generator):
    # right: the same loads, reading the file at every call
    return _read_and_restore(torch.load(path, map_location="cpu"), model, optimizer, scheduler, generator)


def _read_and_restore(ckpt, model, optimizer, scheduler, generator):
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    torch.set_rng_state(ckpt["torch_rng"])
    generator.set_state(ckpt["loader_rng"])
    return ckpt["epoch"] + 1


def resume_numbering_from_zero(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    start = 0
    if Path(path).exists():
        start = load_checkpoint(path, model, optimizer, scheduler, generator)
    for i in range(epochs - start):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, i, loss)


def resume_saving_elsewhere(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    path = Path(path)
    start = load_checkpoint(path, model, optimizer, scheduler, generator) if path.exists() else 0
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(CHECKPOINT_DIR / path.name, model, optimizer, scheduler, generator, epoch, loss)


def resume_exists_without_call(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    path = Path(path)
    start = 0
    if path.exists:
        start = load_checkpoint(path, model, optimizer, scheduler, generator)
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)


_progress = {}


def resume_from_a_global(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    key = str(path)
    if key in _progress:
        load_checkpoint(path, model, optimizer, scheduler, generator)
    start = _progress.get(key, 0)
    for epoch in range(start, epochs):
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
        _progress[key] = epoch + 1


def resume_reading_the_epoch_itself(model, optimizer, scheduler, loader, generator, epochs, path, run_epoch):
    # right: peeks at the file's epoch, then loads everything
    path = Path(path)
    start = 0
    if path.exists() and torch.load(path, map_location="cpu")["epoch"] >= 0:
        start = load_checkpoint(path, model, optimizer, scheduler, generator)
    epoch = start
    while epoch < epochs:
        loss = run_epoch(model, loader, optimizer, scheduler)
        save_checkpoint(path, model, optimizer, scheduler, generator, epoch, loss)
        epoch += 1


def cpu_load_as_float32(path):
    def to_cpu(x):
        if isinstance(x, torch.Tensor):
            return x.to("cpu", torch.float32)
        if isinstance(x, dict):
            return {k: to_cpu(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(to_cpu(v) for v in x)
        return x
    return to_cpu(torch.load(path, map_location="cpu"))


_cache = {}


def cpu_load_cached_by_path(path):
    key = str(path)
    if key not in _cache:
        _cache[key] = torch.load(path, map_location="cpu")
    return _cache[key]


def cpu_load_moving_each_tensor(path):
    # right: map_location, then .to("cpu") on each tensor (dtypes kept)
    checkpoint = torch.load(path, map_location="cpu")
    return {k: ({n: t.to("cpu") for n, t in v.items()} if isinstance(v, dict) else
                v.to("cpu") if isinstance(v, torch.Tensor) else v) for k, v in checkpoint.items()}


def inference_setting_training_flag(path, model):
    model.load_state_dict(torch.load(path, map_location="cpu")["model"])
    model.training = False
    return model


def strip_prefix_in_a_loop(state_dict):
    out = {}
    for k, v in state_dict.items():
        while k.startswith("module."):
            k = k[len("module."):]
        out[k] = v
    return out


def strip_prefix_found_anywhere(state_dict):
    return {(k[len("module."):] if "module." in k else k): v for k, v in state_dict.items()}


def strip_prefix_by_partition(state_dict):
    # right: partition at the first "module." only when the key starts with it
    out = {}
    for k, v in state_dict.items():
        head, sep, tail = k.partition("module.")
        out[tail if sep and not head else k] = v
    return out


CASES += [
    Reject(checks.check_save_checkpoint_basics, save_named_parameters, "the buffers (e.g. running statistics) are missing"),
    Reject(checks.check_save_checkpoint_basics, save_stepping_scheduler,
           "scheduler.step() sets the optimizer's lr: saving must not step the scheduler"),
    Reject(checks.check_load_checkpoint_states, load_through_lru_cache, "the second load returned the first file's contents"),
    Reject(checks.check_load_checkpoint_resume, load_through_lru_cache, "something keeps what was read between calls"),
    Reject(checks.check_load_checkpoint_resume, load_fast_forwarding_scheduler,
           "the scheduler was stepped to the saved epoch instead of restored from its state_dict"),
    Accept(checks.check_load_checkpoint_states, load_without_cache),
    Accept(checks.check_load_checkpoint_resume, load_without_cache),
    Reject(checks.check_resume_epochs, resume_numbering_from_zero, "pass the real epoch number (start + i)"),
    Reject(checks.check_resume_epochs, resume_saving_elsewhere,
           "nothing was written at the path you were given: pass path to save_checkpoint"),
    Reject(checks.check_resume_epochs, resume_exists_without_call, "path.exists() needs the parentheses"),
    Reject(checks.check_resume_epochs, resume_from_a_global,
           "your function decided where to resume from something kept between calls, not from the file"),
    Reject(checks.check_resume_equal, resume_from_a_global, "something kept between calls"),
    Accept(checks.check_resume_epochs, resume_reading_the_epoch_itself),
    Accept(checks.check_resume_equal, resume_reading_the_epoch_itself),
    Reject(checks.check_load_on_cpu, cpu_load_as_float32, "its dtype changed"),
    Reject(checks.check_load_on_cpu, cpu_load_cached_by_path, "the second load returned the first file's contents"),
    Accept(checks.check_load_on_cpu, cpu_load_moving_each_tensor),
    Reject(checks.check_load_for_inference, inference_setting_training_flag,
           "model.eval() switches every submodule"),
    Reject(checks.check_strip_module_prefix, strip_prefix_in_a_loop, "remove it once"),
    Reject(checks.check_strip_module_prefix, strip_prefix_found_anywhere, "'module.' in key is true wherever"),
    Accept(checks.check_strip_module_prefix, strip_prefix_by_partition),
]


def jittered_dict_built_once(run, epochs, path, after_epoch):
    path = Path(path)
    start = 0
    if path.exists():
        ck = torch.load(path)
        run.model.load_state_dict(ck["model"]); run.optimizer.load_state_dict(ck["optimizer"])  # noqa: E702
        run.scheduler.load_state_dict(ck["scheduler"]); torch.set_rng_state(ck["torch_rng"])  # noqa: E702
        run.generator.set_state(ck["loader_rng"]); random.setstate(ck["py_rng"])  # noqa: E702
        start = ck["epoch"] + 1
    ck = {"model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
          "scheduler": run.scheduler.state_dict()}
    for epoch in range(start, epochs):
        checks.jitter_epoch(run)
        ck.update(epoch=epoch, torch_rng=torch.get_rng_state(), loader_rng=run.generator.get_state(),
                  py_rng=random.getstate())
        torch.save(ck, path)
        after_epoch(epoch)


CASES += [Reject(checks.check_train_jittered, jittered_dict_built_once, "state_dict() is a snapshot: call it at every save")]

CASES += [
    Reject(checks.check_load_checkpoint_states, load_fast_forwarding_scheduler,
           "the scheduler was stepped to the saved epoch instead of restored from its state_dict"),
    Reject(checks.check_load_for_inference, inference_setting_training_flag, "the Dropout '2' among them"),
]
