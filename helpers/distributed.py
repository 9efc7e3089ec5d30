"""Plumbing for lesson 08's launchers that a learner does not need to read."""

from __future__ import annotations

from typing import Callable, TypeVar

import torch.multiprocessing as mp

T = TypeVar("T")


def again_if_unconnected(launch: Callable[[], T], attempts: int = 3) -> T:
    """Call ``launch()``; call it again (at most ``attempts`` times in all) while a rank gave up connecting.

    On a busy machine a rank can give up connecting to its partners (Gloo's "connectFullMesh" error)
    before they are up. That happens before any worker code ran, so starting the group again, on a new
    port, is safe. Any other failure is raised at once.
    """
    for attempt in range(attempts):
        try:
            return launch()
        except mp.ProcessRaisedException as error:
            if "connectFullMesh" not in str(error) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
