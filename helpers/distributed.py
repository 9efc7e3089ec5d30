"""Plumbing for lesson 08's launchers that a learner does not need to read."""

from __future__ import annotations

from subprocess import CompletedProcess
from typing import Callable, TypeVar

import torch.multiprocessing as mp

T = TypeVar("T")

# How Gloo and torch's TCP store say that the port they were told to listen on is taken
PORT_TAKEN = "EADDRINUSE"


def again_if_unconnected(launch: Callable[[], T], attempts: int = 3) -> T:
    """Call ``launch()``; call it again (at most ``attempts`` times in all) while a rank gave up connecting.

    On a busy machine a rank can give up connecting to its partners (Gloo's "connectFullMesh" error)
    before they are up, or rank 0 can find that another program took the free port it was given
    (``EADDRINUSE``). Both happen before any worker code ran, so starting the group again, on a new
    port, is safe. Any other failure is raised at once.
    """
    for attempt in range(attempts):
        try:
            return launch()
        except mp.ProcessRaisedException as error:
            if not any(sign in str(error) for sign in ("connectFullMesh", PORT_TAKEN)) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def again_if_port_taken(launch: Callable[[], list[CompletedProcess]], attempts: int = 3) -> list[CompletedProcess]:
    """Call ``launch()``, which starts launchers meeting at a fresh port; again while a port was already taken.

    ``free_port()`` can only say that a port was free when it asked: another program may take it before the
    launcher listens on it (``EADDRINUSE``). That happens before any worker ran, so launching again, on a new
    port, is safe. At most ``attempts`` launches; the last one's results are returned whatever they are.
    """
    for _ in range(attempts - 1):
        done = launch()
        if not any(process.returncode != 0 and PORT_TAKEN in (process.stderr or "") for process in done):
            return done
    return launch()
