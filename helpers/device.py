"""Which device the course uses, and a report of the learner's environment."""

from __future__ import annotations

import os
import platform
import sys

import torch


def pick_device() -> torch.device:
    """Return the fastest device available: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable ``COURSE_DEVICE`` (e.g. ``cpu``) to override.
    """
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def why_this_device(device: torch.device) -> str:
    """One sentence on why :func:`pick_device` chose ``device``."""
    if os.environ.get("COURSE_DEVICE"):
        return "chosen by the COURSE_DEVICE environment variable"
    if device.type == "cuda":
        return f"an NVIDIA GPU is available ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "this Mac's GPU is available through Apple's Metal (MPS)"
    return "no CUDA or Apple MPS GPU was found, so tensors stay on the CPU (every lesson runs there)"


def environment_report() -> dict[str, str]:
    """Versions and hardware the course runs on, as label -> value."""
    import torchvision

    from helpers.data import data_root

    device = pick_device()
    return {
        "Python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "CPU threads torch uses": str(torch.get_num_threads()),
        "CUDA available": str(torch.cuda.is_available()),
        "device": str(device),
        "why": why_this_device(device),
        "data folder": str(data_root()),
    }
