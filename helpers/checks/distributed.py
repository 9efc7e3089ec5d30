"""Lesson 08 Multiple GPUs and distributed training: checks that run the learner's code in a real process group.

Every check starts a real group of 2 (or 3) processes on this machine with the
Gloo backend (:func:`run_group`), runs the learner's function on every rank,
and reads back what each rank wrote. The processes are forked from the
notebook's kernel, because a function defined in a notebook cannot be sent to
a freshly started (spawned) process; fork copies it along with the rest of the
kernel. Forking a kernel that already ran multi-threaded PyTorch is only safe
when the children do not use the inherited thread pool, so each child uses
one thread.

Nothing can hang a notebook or the grader: every collective has a timeout
(:data:`COLLECTIVE_TIMEOUT_S`, given to ``init_process_group``), the whole
launch has a deadline (:data:`LAUNCH_TIMEOUT_S`) after which the children are
killed, and either is reported as "timed out after N s: a collective that one
rank never reached?". Everything talks over 127.0.0.1, on a port the system
picks.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import socket
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import MutableMapping
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data.distributed import DistributedSampler

from helpers.checks import Allow, CheckError, Mistake, call, describe, expect, expect_tensor, passed
from helpers.checks import substitute
from helpers.checks.devices import CUDA_LOAD_ERROR, saved_on
from helpers.reference import distributed as ref

LAUNCH_TIMEOUT_S = 60.0      # the whole group: start, the learner's code, results written
COLLECTIVE_TIMEOUT_S = 20.0  # one collective (all_reduce, barrier, ...) waiting for the other ranks
HOST = "127.0.0.1"
_HANG_HINT = ("a collective that one rank never reached? Every rank must call the same collectives "
              "(all_reduce, barrier, ...) in the same order; one inside `if rank == 0:` waits forever")
_WHERE_HANG = ("look at every collective (all_reduce, barrier, broadcast...) and the `if` around it: does every rank "
               "reach each one, in the same order?")


# ---------------------------------------------------------------- a real process group, forked from the kernel

class _Report(NamedTuple):
    """What one rank sent back: its result, or the exception it raised and where."""

    result: Any = None
    error: str | None = None      # exception type name
    message: str = ""
    stage: str = "run"            # "init": the group could not start; "run": the code raised
    launcher_reads: tuple = ()    # the launcher's environment variables the code asked for (none is set)


# What torchrun sets for each process, and the notebook's launcher (run_on_ranks, forked ranks joining by tcp://)
# does not: a rank's code that reads them works under one launcher only. The ranks of a check start as the
# notebook's do, without them, and the reads are recorded to be named.
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                      "MASTER_PORT")


# Code in these folders (torch, and the course's helpers) reads launcher variables on its own behalf.
_LIBRARY_DIRS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The functions a read passes through on its way to os.environ (os.getenv, Mapping.get).
_PASSING_FILES = (os.getenv.__code__.co_filename, MutableMapping.get.__code__.co_filename)


def _asked_by_learner() -> bool:
    """The code that asked os.environ (past os.getenv and Mapping.get) is neither torch's nor the course's."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in _PASSING_FILES:
        frame = frame.f_back
    return frame is not None and not frame.f_code.co_filename.startswith(_LIBRARY_DIRS)


class _WatchedEnviron(MutableMapping):
    """``os.environ`` in a check's rank: the same variables, with every read of a launcher variable recorded."""

    def __init__(self, real: MutableMapping, reads: list[str]) -> None:
        self._real, self._reads = real, reads

    def __getitem__(self, key: str) -> str:
        if key in LAUNCHER_VARIABLES and key not in self._reads and _asked_by_learner():
            self._reads.append(key)
        return self._real[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._real[key] = value

    def __delitem__(self, key: str) -> None:
        del self._real[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._real)

    def __len__(self) -> int:
        return len(self._real)

    def copy(self) -> dict[str, str]:
        return dict(self._real)


def _member(rank: int, world_size: int, port: int, target: Callable[..., Any], args: tuple, out: str,
            collective_timeout_s: float) -> None:
    """One rank (a forked child): join the group, run ``target(rank, world_size, *args)``, save a report."""
    code = 1
    try:
        log = open(os.path.join(out, f"rank{rank}.log"), "w", buffering=1)
        os.dup2(log.fileno(), 1)  # the kernel's output channels are not this process's to use
        os.dup2(log.fileno(), 2)
        sys.stdout = sys.stderr = log
        torch.set_num_threads(1)  # the kernel's thread pool did not survive the fork
        for name in LAUNCHER_VARIABLES:
            os.environ.pop(name, None)
        launcher_reads: list[str] = []
        os.environ = _WatchedEnviron(os.environ, launcher_reads)  # this child's own; it ends with os._exit
        try:
            dist.init_process_group("gloo", init_method=f"tcp://{HOST}:{port}", rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=collective_timeout_s))
        except Exception as error:
            report = _Report(error=type(error).__name__, message=str(error), stage="init")
        else:
            try:
                report = _Report(result=target(rank, world_size, *args))
            except BaseException as error:  # the learner's code: report it, never let it escape the child
                traceback.print_exc()
                # A CheckError travels whole (symptom, where, mistake: the hint ladder's rungs).
                report = _Report(result=error if isinstance(error, CheckError) else None,
                                 error=type(error).__name__, message=str(error))
            finally:
                dist.destroy_process_group()
            report = report._replace(launcher_reads=tuple(launcher_reads))
        try:
            torch.save(tuple(report), os.path.join(out, f"rank{rank}.pt"))
        except Exception as error:
            torch.save(tuple(_Report(error="UnsendableResult", message=f"{describe(report.result)} ({error})")),
                       os.path.join(out, f"rank{rank}.pt"))
        code = 0
    finally:
        os._exit(code)  # never return into the kernel's code (or run its exit handlers) in a child


def _launch(target: Callable[..., Any], args: tuple, world_size: int, port: int, timeout_s: float,
            collective_timeout_s: float) -> tuple[list[_Report | None], bool]:
    """Fork ``world_size`` ranks; wait for all of them or the deadline. Returns (reports, timed_out)."""
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="course-group-") as out:
        processes = [context.Process(target=_member, daemon=True,
                                     args=(rank, world_size, port, target, args, out, collective_timeout_s))
                     for rank in range(world_size)]
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout_s
        waiting = {p.sentinel: p for p in processes}
        while waiting and time.monotonic() < deadline:
            for sentinel in multiprocessing.connection.wait(list(waiting), timeout=deadline - time.monotonic()):
                waiting.pop(sentinel).join()
        timed_out = bool(waiting)
        for process in waiting.values():
            process.kill()
            process.join()
        reports = []
        for rank in range(world_size):
            path = Path(out) / f"rank{rank}.pt"
            reports.append(_Report(*torch.load(path, weights_only=False)) if path.exists() else None)
        return reports, timed_out


def _port_clash(report: _Report | None) -> bool:
    return report is not None and report.stage == "init" and "EADDRINUSE" in report.message


def run_group(target: Callable[..., Any], *args: Any, world_size: int = 2, what: str = "your function",
              port: int | None = None, timeout_s: float | None = None, collective_timeout_s: float | None = None,
              explain: Callable[[int, _Report], CheckError | str | None] | None = None) -> list[Any]:
    """Run ``target(rank, world_size, *args)`` on every rank of a real Gloo group; return each rank's result.

    Steps:
        1. Pick a free port on 127.0.0.1 (or use ``port``) and fork ``world_size``
           processes; each joins the group with a timeout on its collectives.
        2. Wait for all of them, at most ``timeout_s``; kill what is left after that.
        3. Turn what went wrong into one message: a deadline or a collective timeout
           ("timed out after N s: a collective that one rank never reached?"), a rank
           that finished while another waited in a collective, the learner's own
           exception (``explain(rank, report)`` may name it first).
    """
    timeout_s = LAUNCH_TIMEOUT_S if timeout_s is None else timeout_s
    collective_timeout_s = COLLECTIVE_TIMEOUT_S if collective_timeout_s is None else collective_timeout_s
    for _attempt in range(3):
        chosen = port if port is not None else ref.free_port()
        reports, timed_out = _launch(target, args, world_size, chosen, timeout_s, collective_timeout_s)
        # Another program may take the free port before rank 0 listens on it (or connect to it while it
        # is free): the group then fails to start. That is the machine's doing, not the learner's: again.
        if port is not None or not any(r is not None and r.stage == "init" for r in reports):
            break
    if timed_out:
        raise CheckError(f"{what} timed out after {timeout_s:g} s", where=_WHERE_HANG, mistake=_HANG_HINT)
    for rank, report in enumerate(reports):
        if report is not None and report.stage == "init":
            if _port_clash(report):
                raise CheckError(f"{what}: rank 0 could not listen on port {chosen}: it is already in use "
                                 "('Address already in use'), by another job on this machine",
                                 where="look at where the port comes from: a fixed number, or one the system "
                                       "chose just now?")
            raise RuntimeError(f"the process group could not start (rank {rank}): {report.error}: {report.message}")
    for rank, report in enumerate(reports):
        if report is not None and report.error == "NotImplementedError":
            raise CheckError(f"{what} is not written yet: it raised NotImplementedError",
                             where="look in its cell for `raise NotImplementedError()`",
                             mistake="replace `raise NotImplementedError()` with your code")
    for rank, report in enumerate(reports):
        if report is not None and report.launcher_reads:
            names = ", ".join(report.launcher_reads)
            raise CheckError(f"{what}: rank {rank} read the environment variable(s) {names}, which this check's "
                             "ranks do not have: like the notebook's run_on_ranks, it starts each rank without them "
                             "(only launchers such as torchrun set them)",
                             where="look at where your function gets the rank and the world size",
                             mistake="a function run on the ranks of a process group asks the group: "
                                     "dist.get_rank() and dist.get_world_size() are right under every launcher")
    gloo = ("Timed out waiting", "Connection closed by peer", "Connection reset by peer", "Broken pipe")
    for rank, report in enumerate(reports):
        if report is not None and report.error:
            named = (explain(rank, report) if explain else None) or _known_error(what, rank, report)
            if named:
                raise named if isinstance(named, CheckError) else CheckError(named)
            if report.error == "CheckError":
                raise report.result  # the rank's CheckError itself, every rung of its ladder
            if not any(sign in report.message for sign in gloo):
                first = report.message.strip().splitlines()[0] if report.message.strip() else ""
                # the same error on every rank: its cause is shared by the ranks, not a difference between them
                everywhere = len(reports) > 1 and all(r is not None and r.error == report.error for r in reports)
                raise CheckError(f"{what} raised {report.error} on every rank (rank {rank}: {first})" if everywhere
                                 else f"{what} raised {report.error} on rank {rank}: {first}",
                                 where="look at the line that raised (run your function for one rank alone to see "
                                       "it): every rank raised it, so its cause is not what differs between them"
                                 if everywhere else
                                 f"look at the line that raised on rank {rank} (run your function for that rank "
                                 "alone to see it) and at what differs between the ranks there")
    for rank, report in enumerate(reports):
        if report is not None and "Timed out waiting" in report.message:
            raise CheckError(f"{what} timed out after {collective_timeout_s:g} s on rank {rank}", where=_WHERE_HANG,
                             mistake=_HANG_HINT)
    for rank, report in enumerate(reports):
        if report is not None and report.error:
            raise CheckError(f"{what}: rank {rank} waited in a collective that another rank never called (that rank "
                             "finished and closed the connection: 'Connection closed by peer')", where=_WHERE_HANG,
                             mistake="every rank must call the same collectives in the same order; is one inside "
                                     "`if rank == 0:`?")
    for rank, report in enumerate(reports):
        if report is None:
            raise CheckError(f"{what}: rank {rank} ended without finishing",
                             where="look for sys.exit(), exit() or os._exit() in your code: did it exit the process?")
    return [report.result for report in reports]


# How a rank that tried to use a GPU fails here: CUDA cannot start in a process forked from one that touched it,
# a machine without a GPU has no driver, and DDP refuses device_ids for a model on the CPU.
_GPU_SIGNS = ("Cannot re-initialize CUDA in forked subprocess", "Found no NVIDIA driver", "No CUDA GPUs are available",
              "Torch not compiled with CUDA enabled", "CUDA driver initialization failed", "invalid device ordinal",
              "device_ids and output_device arguments only work with")
_DAEMON_CHILDREN = "daemonic processes are not allowed to have children"


def _known_error(what: str, rank: int, report: _Report) -> CheckError | None:
    """An exception whose cause the message itself tells: a rank that used a GPU, or that started processes."""
    first = report.message.strip().splitlines()[0] if report.message.strip() else ""
    if any(sign in report.message for sign in _GPU_SIGNS):
        why = (" (they are forked from the notebook's process, and CUDA cannot start in a forked process once its "
               "parent has touched it)" if "forked subprocess" in report.message else
               " (this machine has no usable GPU)" if "device_ids" not in report.message else "")
        return CheckError(f"{what} raised {report.error} on rank {rank}: {first}",
                          where="look for .to(rank), .cuda(), device=... and device_ids=[...] in your function",
                          mistake=f"these ranks run on the CPU with the Gloo backend{why}: keep the model and the "
                                  "data on the CPU and leave out device_ids. The GPU recipe (model.to(local_rank), "
                                  "device_ids=[local_rank]) is for one process per GPU, started with NCCL by a "
                                  "launcher such as torchrun")
    if _DAEMON_CHILDREN in report.message:
        return CheckError(f"{what} raised {report.error} on rank {rank}: {first}: the rank tried to start a "
                          "process of its own",
                          where="look at the arguments of your DataLoader: num_workers",
                          mistake="the ranks here are daemon processes, which cannot start child processes, and a "
                                  "DataLoader with num_workers > 0 starts worker processes to load the batches: use "
                                  "num_workers=0 (the default), so that each rank loads its own batches itself")
    return None


def in_rank(fn: Callable[..., Any], *args: Any, allow: Allow = Allow()) -> Any:
    """Call the learner's ``fn`` on one rank under the framework's default rules (:func:`call`): its arguments
    and the state outliving the call (global generators, grad mode, ...) must be as they were, unless ``allow``
    says otherwise. An exception of the learner's own code is raised as itself, for :func:`run_group` to read."""
    try:
        return call(fn, *args, allow=allow)
    except CheckError as error:
        cause = error.__cause__
        if isinstance(cause, Exception) and not isinstance(cause, CheckError):
            raise cause from None
        raise


@contextmanager
def occupied(port: int) -> Iterator[dist.TCPStore]:
    """A job's rendezvous store listening on ``port`` (as if another training job were running)."""
    store = dist.TCPStore(HOST, port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    try:
        yield store
    finally:
        del store


# ---------------------------------------------------------------- free_port

def _all_reduce_ranks(rank: int, world_size: int) -> float:
    value = torch.tensor([rank + 1.0])
    dist.all_reduce(value)
    return value.item()


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


def _expect_port(port: Any, what: str, bound: list[tuple[int, int]]) -> int:
    """``port`` is a TCP port number; ``bound``: (socket type, port) of the sockets bound during the call."""
    if isinstance(port, tuple):
        raise CheckError(f"{what} returned the tuple {port!r}; expected the port, an int",
                         where="look at what you return from getsockname()",
                         mistake="getsockname() gives (host, port); return its [1]")
    if isinstance(port, bool) or not isinstance(port, int):
        raise CheckError(f"{what} should return the port as an int, but returned {describe(port)}",
                         where="look at your return statement")
    if port == 0 and not any(kind == socket.SOCK_STREAM for kind, _ in bound):
        raise CheckError(f"{what} returned 0, and no TCP socket was bound during the call: 0 is no port to "
                         "listen on (it is what bind() is given to ask the system for a free one, and what an unbound "
                         "socket's getsockname() reports)",
                         where="look at where the number you return comes from: a socket you created and bound, "
                               "then getsockname()?",
                         mistake="the socket was never bound: probe.bind(('127.0.0.1', 0)) asks the system for a free "
                                 "port, and getsockname()[1] afterwards gives the one it chose")
    if port == 0:
        raise CheckError(f"{what} returned 0, which no program can listen on",
                         where="look at which port you return: the one you asked for, or the one the system chose?",
                         mistake="binding port 0 asks the system to choose a port; return the one it chose, "
                                 "probe.getsockname()[1]")
    expect(0 < port < 65536, f"{what} returned {port}, which is not a TCP port (1-65535)",
           where="look at where the number you return comes from")
    return port


@contextmanager
def _watching_binds() -> Iterator[list[tuple[int, int]]]:
    """Record (socket type, port it got) for every socket bound through Python's socket module meanwhile."""
    bound: list[tuple[int, int]] = []
    real_bind = socket.socket.bind

    def bind(self: socket.socket, address: Any) -> None:
        real_bind(self, address)
        name = self.getsockname()
        if isinstance(name, tuple) and len(name) >= 2:
            bound.append((self.type, name[1]))

    socket.socket.bind = bind  # type: ignore[method-assign]
    try:
        yield bound
    finally:
        socket.socket.bind = real_bind  # type: ignore[method-assign]


_ASK_THE_SYSTEM = "bind a TCP socket to port 0 and return the port the system chose for it"
_ANEW = ("a port is free only at the moment the system is asked, and the job that got it first is still using it: "
         "find a new one on every call (bind a TCP socket to port 0 inside free_port() and return the port the system "
         "chose)")


def _expect_bound(fn: Callable[[], int], port: int, bound: list[tuple[int, int]]) -> None:
    """The port came from a TCP socket that was bound to it during the call (so it was free then)."""
    kinds = {kind for kind, got in bound if got == port}
    if socket.SOCK_STREAM in kinds:
        return
    if kinds:
        raise CheckError(f"free_port() returned {port}, a port it got for a UDP socket (SOCK_DGRAM); the group's rank "
                         "0 listens on TCP",
                         where="look at the arguments of socket.socket(...)",
                         mistake="a free UDP port says nothing about TCP's: use a SOCK_STREAM socket "
                                 "(socket.socket()'s default)")
    again = _second_answer(fn, port)
    if again == port:
        raise CheckError(f"free_port() returned {port}, and {port} again on the next call while a job held it; no "
                         "socket was bound to that port during either call: the number was fixed before the call (a "
                         "constant, or a port found once and kept)",
                         where="look at where the number you return comes from: is it found inside the function, "
                               "on every call?",
                         mistake=_ANEW)
    raise CheckError(f"free_port() returned {port}, but no socket was bound to that port during the call: nothing "
                     "asked the system whether it is free (another program may be using it)",
                     where="look at where the number you return comes from",
                     mistake=_ASK_THE_SYSTEM)


def _second_answer(fn: Callable[[], int], port: int) -> Any:
    """What ``fn()`` returns next while a job holds ``port`` (where it is free to hold); None if that call fails.
    The global generators start from another state than the first call's (which ``call`` put back), so that a
    port drawn from them is not taken for a fixed one."""
    python_state, numpy_state = random.getstate(), numpy.random.get_state()
    with ExitStack() as job, torch.random.fork_rng(devices=[]):
        torch.manual_seed(port)
        random.seed(port)
        numpy.random.seed(port)
        if not _port_in_use(port):
            job.enter_context(occupied(port))
        try:
            return call(fn)
        except CheckError:
            return None
        finally:
            random.setstate(python_state)
            numpy.random.set_state(numpy_state)


def check_free_port(fn: Callable[[], int], inputs: Sequence[int] | None = None) -> None:
    """``fn()`` returns a port nothing uses, even while other jobs hold the ports it gave before.

    ``inputs``: how many earlier jobs keep their ports while the next one asks (default 1).
    """
    inputs = inputs or [1]
    checks = 0
    for jobs in inputs:
        with ExitStack() as running_jobs:
            held: list[int] = []
            for job in range(jobs + 1):
                with _watching_binds() as bound:
                    port = call(fn)
                port = _expect_port(port, "free_port()", bound)
                if port in held and not any(got == port for _, got in bound):
                    raise CheckError(f"free_port() returned {port} again while another job was using it, and no "
                                     "socket was bound to that port during this call: it is the port an earlier "
                                     "call found, kept",
                                     where="look at where the number you return comes from: is it found inside the "
                                           "function, on every call?",
                                     mistake=_ANEW)
                if port in held:
                    raise CheckError(f"free_port() returned {port} again while another job was using it",
                                     where="look at where the number you return comes from: a constant?",
                                     mistake="a fixed port clashes ('Address already in use') as soon as two jobs "
                                             "share a machine. Bind port 0 and return the port the system chose")
                _expect_bound(fn, port, bound)
                if _port_in_use(port):
                    raise CheckError(f"port {port} is still in use after free_port() returned it",
                                     where="look at what happens to your socket before the function returns",
                                     mistake="close the socket before returning (a `with socket.socket() as probe:` "
                                             "block does)")
                if job < jobs:
                    running_jobs.enter_context(occupied(port))
                    held.append(port)
                else:
                    totals = run_group(_all_reduce_ranks, what=f"a process group on port {port} from free_port()",
                                       port=port)
                    expect(totals == [3.0, 3.0], f"a group on port {port} did not work: all_reduce gave {totals}",
                           where="look at the port you return: is it free, and a TCP one?")
                checks += 1
    passed("free_port", checks)


# ---------------------------------------------------------------- average_gradients

class GradCase(NamedTuple):
    """A gradient case: seed, input features, whole-batch size (a multiple of the world size), world size."""

    seed: int = 0
    n_features: int = 5
    batch: int = 8
    world_size: int = 2


def _small_model(n_features: int) -> nn.Module:
    """A small regressor with one parameter that takes no part in the loss (its .grad stays None, as the hint
    warns): Sequential's forward runs its modules only, never a parameter registered on it directly."""
    model = nn.Sequential(nn.Linear(n_features, 4), nn.Tanh(), nn.Linear(4, 2))
    model.register_parameter("unused", nn.Parameter(torch.zeros(3)))
    return model


def _grad_data(case: GradCase) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + case.seed)
    x, y = torch.randn(case.batch, case.n_features, generator=g), torch.randn(case.batch, 2, generator=g)
    torch.manual_seed(case.seed)
    return _small_model(case.n_features), x, y


def _grads(model: nn.Module) -> dict[str, torch.Tensor | None]:
    return {name: None if p.grad is None else p.grad.detach().clone() for name, p in model.named_parameters()}


class _Exchanges(NamedTuple):
    """What a rank's ``fn(model)`` passed to ``dist.all_reduce`` (watched in this child only)."""

    calls: int = 0        # all_reduce calls
    on_grads: int = 0     # of those, on a tensor sharing memory with a parameter's .grad
    on_weights: int = 0   # of those, on a tensor sharing memory with a parameter itself
    reduces: int = 0      # dist.reduce calls (the result reaches one rank only)
    broadcasts: int = 0   # dist.broadcast calls (one rank's tensor copied to all)
    reduced: tuple = ()   # the parameters whose .grad itself all_reduce was given
    unwaited: int = 0     # all_reduce(..., async_op=True) calls whose work handle was never waited on


class _WatchedWork:
    """The work handle of an ``async_op=True`` collective, noting whether the code waited on it (wait(),
    synchronize(), or its future); everything else goes to the real handle."""

    def __init__(self, work: Any) -> None:
        self._work, self.waited = work, False

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        self.waited = True
        return self._work.wait(*args, **kwargs)

    def synchronize(self, *args: Any, **kwargs: Any) -> Any:
        self.waited = True
        return self._work.synchronize(*args, **kwargs)

    def get_future(self, *args: Any, **kwargs: Any) -> Any:
        self.waited = True  # waited on through the future (torch.futures.wait_all, future.wait())
        return self._work.get_future(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _all_reduce_kind(tensor: Any, named: list[tuple[str, nn.Parameter]]) -> tuple[str, str | None]:
    """What one dist.all_reduce call was given, among the parameters ``named``: a parameter's .grad ("grad", with the
    parameter's name), a parameter itself ("weight") or another tensor ("other": a flat buffer, or a copy)."""
    if not isinstance(tensor, torch.Tensor):
        return "other", None
    memory = tensor.data_ptr()
    for name, p in named:
        if p.grad is not None and p.grad.data_ptr() == memory:
            return "grad", name
    return ("weight" if any(p.data_ptr() == memory for _, p in named) else "other"), None


def _grad_target(rank: int, world_size: int, fn: Callable[[nn.Module], None], cases: list[GradCase]) -> list[tuple]:
    out = []
    real_all_reduce, real_reduce, real_broadcast = dist.all_reduce, dist.reduce, dist.broadcast
    for case in cases:
        model, x, y = _grad_data(case)
        nn.functional.mse_loss(model(x[rank::world_size]), y[rank::world_size]).backward()
        own = _grads(model)
        named = list(model.named_parameters())
        seen: dict[str, Any] = {"calls": 0, "on_grads": 0, "on_weights": 0, "reduces": 0, "broadcasts": 0,
                                "reduced": ()}
        handles: list[_WatchedWork] = []

        def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if tensor is None:
                raise _none_grad(rank, "dist.all_reduce was given None")
            kind, name = _all_reduce_kind(tensor, named)
            seen["calls"] += 1
            seen["on_grads"] += kind == "grad"
            seen["on_weights"] += kind == "weight"
            if name is not None:
                seen["reduced"] = (*seen["reduced"], name)
            work = real_all_reduce(tensor, *args, **kwargs)
            if work is not None and (kwargs.get("async_op") or (len(args) >= 3 and args[2])):
                handles.append(_WatchedWork(work))
                return handles[-1]
            return work

        def reduce(*args: Any, **kwargs: Any) -> Any:
            seen["reduces"] += 1
            return real_reduce(*args, **kwargs)

        def broadcast(*args: Any, **kwargs: Any) -> Any:
            seen["broadcasts"] += 1
            return real_broadcast(*args, **kwargs)

        dist.all_reduce, dist.reduce, dist.broadcast = all_reduce, reduce, broadcast
        try:
            # task: "replaces every parameter's `.grad` with its mean over all ranks, on every rank, in place"
            in_rank(fn, model, allow=Allow(changed=(model,)))
        finally:
            dist.all_reduce, dist.reduce, dist.broadcast = real_all_reduce, real_reduce, real_broadcast
        seen["unwaited"] = sum(not handle.waited for handle in handles)
        grads = _grads(model)  # what the code left, read before the handles it left are waited on below
        for handle in handles:
            if not handle.waited:
                handle._work.wait()  # before the next case's collectives, and before the group ends
        out.append((own, grads, _Exchanges(**seen)))
    return out


def _unchanged_grad_cause(exchanges: _Exchanges) -> str:
    """Why a rank's .grad can still be its own shard's gradient, as far as the all_reduce calls show."""
    if exchanges.calls == 0 and exchanges.broadcasts:
        return ("dist.broadcast was called and dist.all_reduce never: broadcast copies one rank's tensor to every "
                "rank (rank 0 kept its own gradient, the others got it), where all_reduce sums the ranks' tensors on "
                "every rank, to be divided by the world size")
    if exchanges.calls == 0:
        return "dist.all_reduce was never called: the ranks never exchanged their gradients"
    if exchanges.on_grads == 0 and exchanges.on_weights:
        return (f"dist.all_reduce was called {exchanges.calls} time(s), on the parameters (the weights) and never "
                "on their .grad: the gradients were not exchanged")
    if exchanges.on_grads == 0:
        return (f"dist.all_reduce was called {exchanges.calls} time(s), but never on a parameter's .grad itself: "
                "all_reduce changes the tensor it is given, in place, so the result stayed in that other tensor "
                "(a copy?) and .grad kept this rank's own value. Reduce p.grad itself, or write the result back")
    return ("dist.all_reduce was called on the gradients, but .grad holds this rank's own value afterwards: was the "
            "result replaced by the value from before the exchange?")


def _whole_batch_grads(case: GradCase) -> dict[str, torch.Tensor]:
    model, x, y = _grad_data(case)
    nn.functional.mse_loss(model(x), y).backward()
    return _grads(model)


def _by_world_size(cases: Sequence[Any]) -> dict[int, list[Any]]:
    groups: dict[int, list[Any]] = {}
    for case in cases:
        groups.setdefault(case.world_size, []).append(case)
    return groups


def _none_grad(rank: int, error: str) -> CheckError:
    """A parameter's .grad was None (it took no part in the loss) and the learner's code used it."""
    return CheckError(f"average_gradients(model) failed on rank {rank}: {error}",
                      where="look at what your loop does with a parameter whose .grad is None",
                      mistake="the model has a parameter that takes no part in the loss (`unused`), so its .grad is "
                              "None: there is nothing to average for it; skip it")


def _explain_none_grad(rank: int, report: _Report) -> CheckError | None:
    """Arithmetic on None: the parameter whose .grad is None (it took no part in the loss)."""
    if report.error in ("TypeError", "AttributeError") and "NoneType" in report.message:
        return _none_grad(rank, f"{report.error}: {report.message.strip().splitlines()[0]}")
    return None


def _other_ops(world_size: int, shards: list[torch.Tensor]) -> list[Mistake]:
    """The ranks' own gradients combined element by element with another reduce op than a sum (then divided by
    the world size, or not)."""
    stacked = torch.stack(shards)
    combined = {"maximum": ("MAX", stacked.amax(0)), "minimum": ("MIN", stacked.amin(0)),
                "product": ("PRODUCT", stacked.prod(0))}
    return [Mistake(f"the values are the element-wise {name} over the {world_size} ranks' gradients{divided}, not "
                    f"their mean: all_reduce combines the ranks' tensors with its op (ReduceOp.SUM by default), and "
                    f"ReduceOp.{op} keeps the {name}. Sum (then divide by the world size), or use ReduceOp.AVG where "
                    "the backend has it", lambda value=value * scale: value,
                    where="look at the op you give all_reduce")
            for name, (op, value) in combined.items()
            for divided, scale in (("", 1.0), (" divided by the world size", 1.0 / world_size))]


def check_average_gradients(fn: Callable[[nn.Module], None], inputs: Sequence[GradCase] | None = None) -> None:
    """After ``fn(model)`` on every rank, every rank holds the whole-batch gradient."""
    inputs = inputs or [GradCase(), GradCase(1, 3, 9, 3)]
    checks = 0
    with torch.random.fork_rng(devices=[]):
        for world_size, cases in _by_world_size(inputs).items():
            per_rank = run_group(_grad_target, fn, cases, world_size=world_size, what="average_gradients(model)",
                                 explain=_explain_none_grad)
            for index, case in enumerate(cases):
                expected = _whole_batch_grads(case)
                rank0_ok = all(per_rank[0][index][1][k] is not None
                               and torch.allclose(per_rank[0][index][1][k], v, atol=1e-6) for k, v in expected.items()
                               if v is not None)
                for rank in range(world_size):
                    own, got, exchanges = per_rank[rank][index]
                    if exchanges.unwaited:
                        raise CheckError(
                            f"average_gradients(model) with {world_size} processes: on rank {rank}, "
                            f"{exchanges.unwaited} dist.all_reduce(..., async_op=True) call(s) returned a work handle "
                            "that was never waited on (no .wait()) before the function returned: the gradients it left "
                            "depend on how far each exchange had got",
                            where="look at what you do with what dist.all_reduce returns",
                            mistake="with async_op=True, all_reduce returns at once, before the sum has arrived, and "
                                    "the tensor is read (divided, returned) while the exchange may still be writing "
                                    "it: call .wait() on the handle it returns before using the tensor, or leave out "
                                    "async_op (the plain call returns once the sum is there)")
                    for name, want in expected.items():
                        what = f"with {world_size} processes, rank {rank}'s {name}.grad"
                        if want is None:  # took no part in the loss: nothing to average (zeros are as good)
                            expect(got[name] is None or not got[name].any(), f"{what} was None before the call (the "
                                   f"parameter takes no part in the loss) and is {describe(got[name])} afterwards",
                                   where="look at what your loop does with a parameter whose .grad is None",
                                   mistake="there is nothing to average for it: leave it None")
                            continue
                        expect(got[name] is not None, f"{what} is None afterwards",
                               where="look for assignments to p.grad (p.grad = None, zero_grad) in your function",
                               mistake="average the gradients, keep them")
                        shard = own[name]
                        mistakes = []
                        if exchanges.reduced and name not in exchanges.reduced:
                            mistakes.append(Mistake(
                                f"dist.all_reduce was given the .grad of {', '.join(sorted(set(exchanges.reduced)))} "
                                f"but never {name}.grad: average every parameter's gradient (loop over "
                                "model.parameters(), skipping only a .grad that is None)", matches=lambda got: True,
                                where="look at which parameters your loop reduces"))
                        if rank > 0 and rank0_ok:
                            mistakes.append(Mistake(
                                "rank 0 ended with the average, this rank with the sum over the ranks: only rank 0 "
                                "divided by the world size. After all_reduce every rank holds the sum, and every "
                                "rank must divide its own copy", lambda want=want: want * world_size,
                                where="look at the condition around your division: which ranks run it?"))
                            if exchanges.reduces:
                                mistakes.append(Mistake(
                                    "rank 0 ended with the average but this rank did not: only rank 0 got the result. "
                                    "dist.reduce gives it to one rank (and leaves the others' tensors undefined); "
                                    "dist.all_reduce gives it to every rank", matches=lambda got: True,
                                    where="look at which collective you call: does every rank receive its result?"))
                        mistakes += [
                            Mistake(f"it is the sum over the {world_size} ranks, not the average: divide by the world "
                                    "size (dist.get_world_size()) after all_reduce. (With a sum, a learning rate "
                                    "tuned for one process is world_size times too large)",
                                    lambda want=want: want * world_size,
                                    where="look at what happens to each gradient after all_reduce"),
                            Mistake(f"it is the sum divided by 2, but the world size is {world_size}: divide by "
                                    "dist.get_world_size(), not by a fixed number", lambda want=want: want * world_size / 2,
                                    where="look at the number you divide by after all_reduce"),
                        ]
                        mistakes.append(Mistake("it is still this rank's own shard gradient: "
                                                + _unchanged_grad_cause(exchanges), lambda shard=shard: shard,
                                                where="look at the tensor you give all_reduce, and where the "
                                                      "result is afterwards"))
                        mistakes += _other_ops(world_size, [per_rank[r][index][0][name] for r in range(world_size)])
                        expect_tensor(got[name], want, what=what, mistakes=mistakes, atol=1e-6)
                checks += 1
    passed("average_gradients", checks)


# ---------------------------------------------------------------- shard_indices

class ShardCase(NamedTuple):
    """A sampler case: dataset size, world size, epoch, seed."""

    n: int = 12
    world_size: int = 2
    epoch: int = 0
    seed: int = 0


def _shard_target(rank: int, world_size: int, fn: Callable[..., Any], cases: list[ShardCase]) -> list[Any]:
    """Every case's answer, then every case's answer again (the same calls in the same order): an answer that
    depends only on its arguments is the same both times."""
    first = [in_rank(fn, case.n, rank, world_size, case.epoch, case.seed) for case in cases]
    again = [in_rank(fn, case.n, rank, world_size, case.epoch, case.seed) for case in cases]
    return list(zip(first, again))


def _as_index_list(value: Any) -> list[int] | None:
    """``value`` if it is a list of ints (the type both tasks name), else None."""
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _not_a_list_of_ints(value: Any) -> str:
    """What ``value`` is instead of a list of ints, and how it becomes one."""
    if isinstance(value, torch.Tensor):
        return f"a tensor ({describe(value)}): .tolist() turns it into a list of ints"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return (f"a {type(value).__name__} of tensors ({describe(value[0])}, ...): .tolist() on the tensor gives "
                "Python ints")
    return describe(value)


def _shuffled(n: int, seed: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def _expect_same_again(what: str, case: ShardCase, world_size: int, got: list[list[int]], both: list[list[tuple]],
                       index: int, cases: list[ShardCase]) -> None:
    """The same call, made again after every case had been called once, gives the same indices; when it does not,
    the order comes from something kept between calls (a generator seeded once), and a wrong answer says so."""
    for rank in range(world_size):
        first, again = got[rank], _as_index_list(both[rank][index][1])
        if first == ref.shard_indices(case.n, rank, world_size, case.epoch, case.seed) or first == again:
            continue
        shown = what.replace("rank=r", f"rank={rank}")
        right_at_zero = [c for i, c in enumerate(cases) if c.epoch == 0 and i < index
                         and both[rank][i][0] == ref.shard_indices(c.n, rank, world_size, 0, c.seed)]
        matched = (f". An earlier call for epoch 0, shard_indices(n={right_at_zero[0].n}, rank={rank}, world_size="
                   f"{world_size}, epoch=0, seed={right_at_zero[0].seed}), matched DistributedSampler's; this later "
                   f"one does not" if right_at_zero else "")
        raise CheckError(f"{shown} should give {ref.shard_indices(case.n, rank, world_size, case.epoch, case.seed)}, "
                         f"but gave {first}, and {describe(both[rank][index][1]) if again is None else again} when called again "
                         f"with the same arguments{matched}",
                         where="look at where your generator is made and seeded: inside the function, on every call?",
                         mistake="the order depends on something kept between calls (a generator seeded once, at "
                                 "module level or on the first call, goes on drawing new orders): seed a new "
                                 "generator with seed + epoch inside every call, torch.Generator().manual_seed(seed "
                                 "+ epoch), so that the same arguments always give the same indices")


def check_shard_indices(fn: Callable[..., list[int]], inputs: Sequence[ShardCase] | None = None) -> None:
    """Every rank's ``fn(n, rank, world_size, epoch, seed)`` equals DistributedSampler's indices for it."""
    inputs = inputs or [ShardCase(12, 2, 0, 0), ShardCase(12, 2, 1, 0), ShardCase(7, 2, 0, 0), ShardCase(1, 3, 0, 2)]
    checks = 0
    for world_size, cases in _by_world_size(inputs).items():
        both = run_group(_shard_target, fn, cases, world_size=world_size, what="shard_indices")
        per_rank = [[first for first, _ in calls] for calls in both]
        for index, case in enumerate(cases):
            n, epoch, seed = case.n, case.epoch, case.seed
            what = f"shard_indices(n={n}, rank=r, world_size={world_size}, epoch={epoch}, seed={seed})"
            got = [_as_index_list(per_rank[rank][index]) for rank in range(world_size)]
            for rank, value in enumerate(got):
                expect(value is not None, f"{what.replace('rank=r', f'rank={rank}')} should return a list of ints, "
                       f"but returned {_not_a_list_of_ints(per_rank[rank][index])}",
                       where="look at the type of what you return: a tensor becomes a list of ints with .tolist()")
            _expect_same_again(what, case, world_size, got, both, index, cases)
            lengths = [len(value) for value in got]
            per = -(-n // world_size)
            if not n % world_size and set(lengths) == {n // world_size + 1}:
                raise CheckError(f"{what}: every rank got {lengths[0]} indices, one more than its share: {n} divides "
                                 f"evenly among {world_size} ranks, {n // world_size} each, with no padding",
                                 where="look at how you compute the padded length",
                                 mistake="the padded length is n rounded up to a multiple of world_size: "
                                         "ceil(n / world_size) * world_size, -(-n // world_size) * world_size in "
                                         "integers; (n // world_size + 1) * world_size is one index per rank too many "
                                         "when n divides evenly")
            if len(set(lengths)) > 1:
                longer = per * world_size - n > n
                raise CheckError(f"{what}: the ranks got different numbers of indices ({lengths}). Then one rank runs "
                                 "one more step than the other and waits forever in its all_reduce",
                                 where="look at what you do when n is not a multiple of world_size",
                                 mistake="pad: repeat indices from the start of the shuffled list until the length is "
                                         "a multiple of world_size, as DistributedSampler does"
                                 + (f". Here the padding ({per * world_size - n}) is longer than the list ({n}): "
                                    "the list repeats more than once" if longer else ""))
            order = _shuffled(n, seed + epoch)
            if lengths[0] == n // world_size and n % world_size:
                raise CheckError(f"{what}: each rank got {lengths[0]} indices and {n % world_size} of the {n} samples "
                                 "are never seen",
                                 where="look at what you do when n is not a multiple of world_size",
                                 mistake="that is drop_last=True. DistributedSampler's default pads instead, "
                                         "repeating indices from the start so that no sample is lost")
            for rank in range(world_size):
                want = ref.shard_indices(n, rank, world_size, epoch, seed)
                if got[rank] == want:
                    continue
                padded = order + order[: per * world_size - n]
                if got[rank] == padded[rank * per:(rank + 1) * per]:
                    raise CheckError(f"{what}: rank {rank} got a contiguous block of the shuffled indices",
                                     where="look at how you pick this rank's share of the shuffled list",
                                     mistake="DistributedSampler deals them out like cards: indices[rank::world_size]")
                if epoch and got[rank] == ref.shard_indices(n, rank, world_size, 0, seed):
                    raise CheckError(f"{what}: epoch {epoch} gives the same order as epoch 0",
                                     where="look at the seed of your shuffle: does it depend on the epoch?",
                                     mistake="seed the shuffle with seed + epoch (this is what sampler.set_epoch(epoch) "
                                             "changes)")
                unshuffled = list(range(n)) + list(range(per * world_size - n))
                if got[rank] == unshuffled[rank::world_size]:
                    raise CheckError(f"{what}: rank {rank}'s indices are not shuffled (they are in index order)",
                                     where="look at the start of your function: where is range(n) shuffled?",
                                     mistake="shuffle range(n) with torch.randperm(n, "
                                             "generator=torch.Generator().manual_seed(seed + epoch)) first")
                padding = [k for k, i in enumerate(range(rank, per * world_size, world_size)) if i >= n]
                if padding and len(got[rank]) == len(want) and all(
                        got[rank][k] == want[k] for k in range(len(want)) if k not in padding):
                    raise CheckError(f"{what}: rank {rank} should get {want}, but got {got[rank]}: only the padding "
                                     f"differs (the entries past the {n} shuffled indices)",
                                     where="look at what you pad the shuffled list with",
                                     mistake="DistributedSampler pads by repeating the shuffled indices from the start "
                                             "(order[0], order[1], ..., and from the start again when the padding is "
                                             "longer than the list)")
                raise CheckError(f"{what}: rank {rank} should get {want}, but got {got[rank]}",
                                 where="look at each step for this small case: the shuffled order of range(n) "
                                       "(randperm with seed + epoch), the padding, then indices[rank::world_size]")
            checks += 1
    passed("shard_indices", checks)


# ---------------------------------------------------------------- epoch_batches

class EpochCase(NamedTuple):
    """A loader case: dataset size, global batch size, epochs, world size."""

    n: int = 16
    global_batch_size: int = 4
    epochs: int = 2
    world_size: int = 2


def _as_batches(value: Any) -> list[list[list[int]]] | None:
    if not isinstance(value, (list, tuple)):
        return None
    epochs = []
    for epoch in value:
        if not isinstance(epoch, (list, tuple)):
            return None
        batches = [_as_index_list(batch) for batch in epoch]
        if any(batch is None for batch in batches):
            return None
        epochs.append(batches)
    return epochs


class _SamplerUse(NamedTuple):
    """What a rank's code did with DistributedSamplers: how many it made, which ones (numbered in the order they
    were made) were told an epoch with set_epoch, and which ones were iterated (by a DataLoader, or directly)."""

    made: int = 0
    told: tuple = ()
    iterated: tuple = ()


@contextmanager
def _watching_samplers(use: dict[str, Any]) -> Iterator[None]:
    """While open, DistributedSampler's construction, set_epoch and iteration are noted in ``use`` (see
    :class:`_SamplerUse`)."""
    real_init, real_set_epoch, real_iter = (DistributedSampler.__init__, DistributedSampler.set_epoch,
                                            DistributedSampler.__iter__)
    numbers: dict[int, int] = {}

    def number(sampler: Any) -> int:
        return numbers.setdefault(id(sampler), len(numbers))

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        use["made"] += 1
        number(self)

    def set_epoch(self: Any, epoch: int) -> None:
        use["told"] = (*use["told"], number(self))
        return real_set_epoch(self, epoch)

    def iterate(self: Any) -> Any:
        use["iterated"] = (*use["iterated"], number(self))
        return real_iter(self)

    DistributedSampler.__init__, DistributedSampler.set_epoch, DistributedSampler.__iter__ = init, set_epoch, iterate
    try:
        yield
    finally:
        DistributedSampler.__init__, DistributedSampler.set_epoch, DistributedSampler.__iter__ = (
            real_init, real_set_epoch, real_iter)


def _epoch_target(rank: int, world_size: int, fn: Callable[..., Any], cases: list[EpochCase]) -> list[tuple]:
    out = []
    for case in cases:
        dataset = list(range(case.n))
        use: dict[str, Any] = {"made": 0, "told": (), "iterated": ()}
        # task: "builds a DistributedSampler(dataset) ... and a DataLoader": a DataLoader's iterator draws its
        # base seed from torch's global generator
        with _watching_samplers(use):
            got = in_rank(fn, dataset, case.global_batch_size, case.epochs, allow=Allow(global_rng=True))
        out.append((got, ref.epoch_batches(dataset, case.global_batch_size, case.epochs), _SamplerUse(**use)))
    return out


def _sampler_batches(case: EpochCase, world_size: int, rank: int, seed: int,
                     epoch_of: Callable[[int], int], drop_last: bool = False) -> list[list[list[int]]]:
    """What a DistributedSampler seeded with ``seed`` (and ``drop_last``), told the epoch ``epoch_of(epoch)``,
    gives ``rank``."""
    sampler = DistributedSampler(range(case.n), num_replicas=world_size, rank=rank, seed=seed, drop_last=drop_last)
    per_process = case.global_batch_size // world_size
    out = []
    for epoch in range(case.epochs):
        sampler.set_epoch(epoch_of(epoch))
        order = list(sampler)
        out.append([order[i:i + per_process] for i in range(0, len(order), per_process)])
    return out


def _epoch_twins(case: EpochCase, world_size: int, rank: int) -> list[tuple[str, list]]:
    """Wrong answers whose batches can be told apart from the right ones, and their causes. The ranks are checked
    in order, so a later rank fails only where rank 0 was right: an epoch off by one would have shifted rank 0 too,
    and a seed per rank is the seed 0 on rank 0 (rank 1 seeded with 1 in epoch e sees what seed 0 gives in e + 1)."""
    dropped = (f"rank {rank} saw the share of a DistributedSampler(..., drop_last=True): it leaves out the "
               f"{case.n % world_size} sample(s) that do not divide evenly among the {world_size} ranks; the task's "
               "sampler keeps its defaults, which pad the shares to equal length by repeating samples instead",
               _sampler_batches(case, world_size, rank, 0, lambda e: e, drop_last=True))
    if rank:
        return [(f"rank {rank}'s order is that of a sampler seeded with its rank ({rank}): every rank must shuffle "
                 "with the same seed (the default, 0), or the ranks' shares overlap and some samples are never seen",
                 _sampler_batches(case, world_size, rank, rank, lambda e: e)), dropped]
    return [("epoch e saw the order the sampler gives for epoch e + 1. The order comes from seed + epoch, so "
             "either set_epoch was given epoch + 1 (it takes the loop's epoch, counting from 0: "
             "sampler.set_epoch(epoch)), or the sampler was made with seed=1 (the task keeps the default, 0)",
             _sampler_batches(case, world_size, rank, 0, lambda e: e + 1)),
            ("epoch e saw the order the sampler gives for epoch e - 1 (epoch 0's twice): set_epoch(epoch) ran after "
             "the epoch's batches were drawn, so each epoch reads the previous one's. Call it at the start of each "
             "epoch, before iterating the loader", _sampler_batches(case, world_size, rank, 0, lambda e: max(e - 1, 0))),
            dropped]


def check_epoch_batches(fn: Callable[..., Any], inputs: Sequence[EpochCase] | None = None) -> None:
    """Each rank sees its own share of the data, in a new order every epoch, in per-process batches."""
    # 21 samples on 2 ranks: padded shares of 11, batches of 4, 4 and a shorter 3 (a sampler that dropped the odd
    # sample would end with 2, a loader that dropped the short batch with none)
    inputs = inputs or [EpochCase(21, 8, 2, 2)]
    checks = 0
    for world_size, cases in _by_world_size(inputs).items():
        per_rank = run_group(_epoch_target, fn, cases, world_size=world_size, what="epoch_batches")
        for index, case in enumerate(cases):
            what = (f"epoch_batches(list(range({case.n})), global_batch_size={case.global_batch_size}, "
                    f"epochs={case.epochs}) with {world_size} processes")
            for rank in range(world_size):
                raw, want, use = per_rank[rank][index]
                got = _as_batches(raw)
                if got is None:
                    batch = next((b for epoch in raw for b in epoch), None) if isinstance(raw, (list, tuple)) and all(
                        isinstance(epoch, (list, tuple)) for epoch in raw) else None
                    shown = _not_a_list_of_ints(batch) if batch is not None else describe(raw)
                    raise CheckError(f"{what}: rank {rank} should return a list (one per epoch) of lists of batches, "
                                     f"each a list of ints (batch.tolist()); its first batch is {shown}"
                                     if batch is not None else
                                     f"{what}: rank {rank} should return a list (one per epoch) of lists of batches "
                                     f"(lists of ints, batch.tolist()), but returned {shown}",
                                     where="look at what you append for each batch and each epoch")
                if got == want:
                    continue
                expect(len(got) == case.epochs, f"{what}: rank {rank} returned {len(got)} epochs, expected {case.epochs}",
                       where="look at your loop over the epochs and where you append each epoch's batches")
                seen = [sum(epoch, []) for epoch in got]
                share = len(sum(want[0], []))
                if len(seen[0]) == case.n and share < case.n:
                    raise CheckError(f"{what}: rank {rank} saw all {case.n} samples in one epoch; with {world_size} "
                                     f"processes each should see its share ({share})",
                                     where="look at the arguments of your DataLoader: what decides which samples "
                                           "this rank loads?",
                                     mistake="pass sampler=DistributedSampler(dataset) to the DataLoader")
                sizes = {len(batch) for epoch in got for batch in epoch}
                if max(sizes) > case.global_batch_size // world_size:
                    raise CheckError(f"{what}: rank {rank}'s batches hold {max(sizes)} samples; expected "
                                     f"{case.global_batch_size // world_size}",
                                     where="look at the batch_size you give the DataLoader",
                                     mistake=f"each process should load global_batch_size // world_size = "
                                             f"{case.global_batch_size // world_size}, so that one step of all ranks "
                                             "together uses the global batch")
                in_order = (list(range(case.n)) * 2)[:len(sum(want[0], [])) * world_size][rank::world_size]
                if case.n > 2 and all(epoch == in_order for epoch in seen):
                    raise CheckError(f"{what}: rank {rank} saw its samples in index order {in_order} in every epoch, "
                                     f"expected the shuffled {want}",
                                     where="look at what shuffles the samples: the sampler's arguments",
                                     mistake="nothing shuffled them: DistributedSampler(dataset) shuffles by default; "
                                             "shuffle=False turns that off")
                unread = sorted(set(use.told) - set(use.iterated))
                if case.epochs > 1 and all(epoch == seen[0] for epoch in seen[1:]) and unread and use.iterated:
                    raise CheckError(f"{what}: rank {rank} saw the same shuffled order {seen[0]} in every epoch, "
                                     f"expected a new order each epoch; {use.made} DistributedSampler(s) were made, "
                                     f"and set_epoch went to {len(unread)} that nothing ever iterated",
                                     where="look at which sampler your DataLoader was built with, and which one you "
                                           "call set_epoch on",
                                     mistake="the DataLoader still iterates the sampler it was built with, whose epoch "
                                             "never changed: a sampler made afterwards is not the loader's. Keep one "
                                             "sampler and call its set_epoch(epoch) each epoch (or build a new "
                                             "DataLoader with each new sampler)")
                if case.epochs > 1 and all(epoch == seen[0] for epoch in seen[1:]):
                    raise CheckError(f"{what}: rank {rank} saw the same shuffled order {seen[0]} in every epoch, "
                                     "expected a new order each epoch",
                                     where="look at what tells the DataLoader's sampler which epoch it is",
                                     mistake="the sampler shuffles with seed + epoch, and its epoch never changed "
                                             "before an epoch's batches were drawn: sampler.set_epoch(epoch) at the "
                                             "start of each epoch, before the loader is iterated, sets it (a call "
                                             "after the epoch's batches comes one epoch too late)")
                per_process = case.global_batch_size // world_size
                full = [[batch for batch in epoch if len(batch) == per_process] for epoch in want]
                if full != want and got == full:
                    last = [epoch[-1] for epoch in want if len(epoch[-1]) < per_process]
                    raise CheckError(f"{what}: rank {rank} should see the batches {want}, but saw {got}: every "
                                     f"epoch's last, shorter batch ({', '.join(map(str, last))}) is missing, and "
                                     "every other batch is right",
                                     where="look at the arguments of your DataLoader (or batch sampler): which one "
                                           "leaves out a batch that is not full?",
                                     mistake=f"drop_last=True drops each epoch's last batch when it holds fewer than "
                                             f"{per_process} samples, so this rank never sees those samples; the "
                                             "task's DataLoader takes only the batch size and the sampler, and keeps "
                                             "that batch (drop_last=False, the default)"
                                     if full != _sampler_batches(case, world_size, rank, 0, lambda e: e, True) else
                                     "drop_last=True does this, on the DataLoader (it drops a last batch that is "
                                     "not full) or on the DistributedSampler (it drops the samples that do not "
                                     "divide evenly among the ranks, here this rank's last one); the task's sampler "
                                     "and loader keep their defaults (drop_last=False)")
                if not use.made:
                    raise CheckError(f"{what}: rank {rank} should see the batches {want}, but saw {got}: these are "
                                     "not the order of a DistributedSampler, and the function made none",
                                     where="look at what decides which samples this rank loads, and in which order",
                                     mistake="the task builds DistributedSampler(dataset) and gives it to the "
                                             "DataLoader (sampler=sampler): its order (shuffled with seed 0 + epoch, "
                                             "then dealt out to the ranks) is the one every rank must see; a Subset "
                                             "of your own or a loader with shuffle=True orders the samples otherwise")
                for cause, twin in _epoch_twins(case, world_size, rank):
                    if got == twin:
                        raise CheckError(f"{what}: rank {rank} should see the batches {want}, but saw {got}",
                                         where="look at the sampler's arguments and at what you give set_epoch",
                                         mistake=cause)
                raise CheckError(f"{what}: rank {rank} should see the batches {want}, but saw {got}",
                                 where="look at the arguments of your DistributedSampler and your DataLoader, the "
                                       "batch size and what you give set_epoch")
            checks += 1
    passed("epoch_batches", checks)


# ---------------------------------------------------------------- train_by_hand and train_ddp

class TrainCase(NamedTuple):
    """A training case: seed, steps, learning rate, world size, whole-batch size (a multiple of the world size)."""

    seed: int = 1
    steps: int = 3
    lr: float = 0.1
    world_size: int = 2
    batch: int = 12


def make_regressor() -> nn.Module:
    """The model every rank builds in the training checks: 3 inputs, 2 outputs, and one buffer (a constant that
    takes no part in the forward), so that a returned state dict without the buffers shows: the contract returns
    "the model's parameters and buffers by name"."""
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    model[2].register_buffer("scale", torch.ones(2))
    return model


def _buffer_names() -> list[str]:
    return [name for name, _ in make_regressor().named_buffers()]


def _train_data(case: TrainCase) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(200 + case.seed)
    return torch.randn(case.batch, 3, generator=g), torch.randn(case.batch, 2, generator=g)


def _row_indices(batch: Any, x: torch.Tensor) -> list[int]:
    """Which rows of ``x`` the rows of ``batch`` are (-1 for a row that is none of them)."""
    if not isinstance(batch, torch.Tensor) or batch.dim() != 2 or batch.shape[1] != x.shape[1]:
        return []
    rows = batch.detach().to("cpu", torch.float32)
    return [next((i for i in range(len(x)) if torch.equal(row, x[i])), -1) for row in rows]


# What happened on this rank, in order, during one training case (in a forked child: each rank has its own):
# "backward" when a backward pass reached a training forward's output, "average" (or "average-cleared", when every
# parameter's .grad was None or zero then) when the code called average_gradients (see _watched_average_gradients)
_TIMELINE: list[str] = []


_REFERENCE_AVERAGE = ref.average_gradients  # itself: substitute() may put the spy below in the reference's module


def _watched_average_gradients(model: nn.Module) -> None:
    """The reference average_gradients, noting in the rank's timeline whether there were gradients to average."""
    try:
        cleared = all(p.grad is None or not p.grad.any() for p in model.parameters())
    except Exception:  # not a model: the reference says what is wrong
        cleared = False
    _TIMELINE.append("average-cleared" if cleared else "average")
    return _REFERENCE_AVERAGE(model)


def _averaged_before_backward(timeline: list[str]) -> int:
    """How many times average_gradients ran, when every call found no gradients (every .grad None or zero) and
    was followed by a backward pass before the next call; 0 otherwise."""
    calls = [i for i, event in enumerate(timeline) if event.startswith("average")]
    if not calls or any(timeline[i] != "average-cleared" for i in calls):
        return 0
    ends = [*calls[1:], len(timeline)]
    if all("backward" in timeline[i + 1:end] for i, end in zip(calls, ends)):
        return len(calls)
    return 0


def _recording_factory(x: torch.Tensor) -> tuple[Callable[[], nn.Module], list[dict[str, Any]]]:
    """``make_regressor`` that records, for every model it builds, its first weights and the rows of ``x`` each
    training forward saw: a forward whose output a backward pass reached (a forward hook and a hook on its
    output; both fire inside a DistributedDataParallel wrapper too). A forward only looked at (a logged loss,
    an evaluation) is not training."""
    built: list[dict[str, Any]] = []

    def make_model() -> nn.Module:
        model = make_regressor()
        record: dict[str, Any] = {"initial": {k: v.detach().clone() for k, v in model.state_dict().items()},
                                  "forwards": [], "model": model}

        def seen(module: nn.Module, args: tuple, output: Any) -> None:
            if args and isinstance(output, torch.Tensor) and output.requires_grad:
                rows = _row_indices(args[0], x)

                def reached(grad: torch.Tensor, rows: list[int] = rows) -> None:
                    _TIMELINE.append("backward")
                    if not any(r is rows for r in record["forwards"]):
                        record["forwards"].append(rows)

                output.register_hook(reached)

        model.register_forward_hook(seen)
        built.append(record)
        return model

    return make_model, built


@contextmanager
def _watching_all_reduce(built: list[dict[str, Any]]) -> Iterator[None]:
    """While open, each dist.all_reduce call notes in the rank's timeline what it was given: a parameter's .grad
    ("all_reduce-grad"), a parameter itself ("all_reduce-weight") or another tensor (a flat buffer: "all_reduce-other"),
    for the models ``make_model`` built (``built``: their records hold them under "model")."""
    real = dist.all_reduce

    def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensor, torch.Tensor):
            kind, _ = _all_reduce_kind(tensor, [item for record in built for item in record["model"].named_parameters()])
            _TIMELINE.append(f"all_reduce-{kind}")
        return real(tensor, *args, **kwargs)

    dist.all_reduce = all_reduce
    try:
        yield
    finally:
        dist.all_reduce = real


@contextmanager
def _watching_loss_targets(y: torch.Tensor, seen: list[list[int]]) -> Iterator[None]:
    """While open, each nn.functional.mse_loss (nn.MSELoss calls it too) whose backward runs notes in ``seen``
    which rows of ``y`` it was given as targets. A loss only looked at (logged, evaluated) is not training, and a loss written by
    hand is not seen."""
    real = nn.functional.mse_loss

    def mse_loss(input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - PyTorch's own names
        loss = real(input, target, *args, **kwargs)
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            rows = _row_indices(target, y)
            loss.register_hook(lambda grad: seen.append(rows))
        return loss

    nn.functional.mse_loss = mse_loss
    try:
        yield
    finally:
        nn.functional.mse_loss = real


@contextmanager
def _watching_ddp() -> Iterator[None]:
    """While open, building a DistributedDataParallel wrapper notes "ddp-built" in the rank's timeline, and calling
    it (its forward) "ddp-forward"."""
    from torch.nn.parallel import DistributedDataParallel

    real_init, real_forward = DistributedDataParallel.__init__, DistributedDataParallel.forward

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        _TIMELINE.append("ddp-built")
        real_init(self, *args, **kwargs)

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        _TIMELINE.append("ddp-forward")
        return real_forward(self, *args, **kwargs)

    DistributedDataParallel.__init__, DistributedDataParallel.forward = init, forward
    try:
        yield
    finally:
        DistributedDataParallel.__init__, DistributedDataParallel.forward = real_init, real_forward


def _train_target(rank: int, world_size: int, fn: Callable[..., Any], cases: list[TrainCase]) -> list[Any]:
    out = []
    for case in cases:
        x, y = _train_data(case)
        make_model, built = _recording_factory(x)
        torch.manual_seed(1234 + rank)  # whatever state each process happens to have: only `seed` may matter
        _TIMELINE.clear()
        targets: list[list[int]] = []
        with _watching_all_reduce(built), _watching_loss_targets(y, targets), _watching_ddp():
            # task: "the model comes from make_model, built right after torch's global generator is seeded with seed"
            result = in_rank(fn, make_model, x, y, case.steps, case.seed, case.lr, allow=Allow(global_rng=True))
        if isinstance(result, dict):
            result = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in result.items()}
        for record in built:  # the records go back to the check's process; the models stay here
            record.pop("model", None)
            record["loss_targets"] = targets
        out.append((result, built, list(_TIMELINE)))
    return out


def _simulated(case: TrainCase, **kwargs: Any) -> list[dict[str, torch.Tensor]]:
    x, y = _train_data(case)
    seeds = kwargs.pop("seeds", [case.seed] * case.world_size)
    with torch.random.fork_rng(devices=[]):
        return ref.simulate_data_parallel(make_regressor, x, y, case.steps, seeds, case.lr, **kwargs)


def _whole_batch(case: TrainCase) -> dict[str, torch.Tensor]:
    """One process, the whole batch: the run data parallelism must reproduce."""
    return _simulated(case._replace(world_size=1))[0]


def _built_with(seed: int) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_regressor().state_dict()


def _strided_by(rows: list[int], rank: int, n: int, world_size: int) -> int | None:
    """The step k (2 or more, not ``world_size``) when ``rows`` are the samples rank, rank + k, ... of ``n``."""
    if len(rows) < 2:
        return None
    return next((k for k in range(2, n + 1) if k != world_size and rows == list(range(rank, n, k))), None)


def _hard_coded_world(fixed: int, world_size: int, shown: str) -> str:
    """The mistake of a world size written into the code."""
    return (f"that is {shown}: a world size of {fixed}, written into the code, while this group has {world_size} "
            "processes. Ask the group: world_size = dist.get_world_size()")


def _expect_training_contract(what: str, case: TrainCase, rank: int, built: list[dict[str, Any]]) -> int:
    """The contract's how: models from make_model() right after manual_seed(seed), trained on this rank's shard
    only. Returns how many forwards with gradients the trained model(s) ran (one per step is expected)."""
    world_size = case.world_size
    if not built:
        raise CheckError(f"{what}: rank {rank} never called make_model()",
                         where="look at where your model comes from",
                         mistake="the model must come from make_model() (right after torch.manual_seed(seed))")
    trained = [record for record in built if record["forwards"]] or built[-1:]
    start = _built_with(case.seed)
    for record in trained:
        first = record["initial"]
        if all(torch.equal(first[k], start[k]) for k in start):
            continue
        candidates = [(case.seed + rank, "a different seed per rank (seed + rank): seed with `seed` itself on "
                       "every rank"),
                      (rank, "the rank as the seed: seed with `seed` on every rank"),
                      (0, "the seed 0 instead of the `seed` argument"),
                      (1234 + rank, "the model was built from the generator's state before the call: "
                       "torch.manual_seed(seed) must come before make_model(), not after it (or be missing)")]
        cause = next((text for s, text in candidates if s != case.seed
                      and all(torch.equal(first[k], v) for k, v in _built_with(s).items())), None)
        key = next(iter(start))
        raise CheckError(f"{what}: rank {rank}'s model started from other weights than make_model() gives right "
                         f"after torch.manual_seed({case.seed}) ({key}[0, 0] is {first[key].flatten()[0].item():.6g}, "
                         f"expected {start[key].flatten()[0].item():.6g})",
                         where="look at where you seed torch's global generator, with what, and where you build "
                               "the model",
                         mistake=cause and f"the ranks' models were seeded wrongly: {cause}. The contract: every "
                                           "rank builds its model right after torch.manual_seed(seed)")
    shard = list(range(rank, case.batch, world_size))
    covered: set[int] = set()
    for record in trained:
        for step, rows in enumerate(record["forwards"]):
            covered.update(rows)
            if rows and set(rows) <= set(shard):
                continue
            cause = None
            if sorted(rows) == list(range(case.batch)):
                cause = ("every rank trained on the whole batch: the averaged gradient is then the same, so the "
                         "weights match, but every rank did the work of all of them")
            elif rows == list(range(case.batch))[rank * len(shard):(rank + 1) * len(shard)]:
                cause = ("that is a contiguous block of the batch (chunk, split or a slice [start:stop]); the "
                         "contract deals the samples out like cards: inputs[rank::world_size]")
            elif (fixed := _strided_by(rows, rank, case.batch, world_size)) is not None:
                cause = _hard_coded_world(fixed, world_size, f"inputs[rank::{fixed}]")
            raise CheckError(f"{what}: forward {step + 1} of rank {rank}'s model (with gradients) saw the samples "
                             f"{rows} of the {case.batch}; rank {rank}'s shard is {shard}, the samples r, "
                             f"r + world_size, ...",
                             where="look at which rows of inputs and targets each rank gives its model",
                             mistake=cause)
    if covered and covered != set(shard):
        raise CheckError(f"{what}: rank {rank}'s model trained on the samples {sorted(covered)} only; its shard is "
                         f"{shard}", where="look at which rows of inputs each rank gives its model")
    for record in trained:
        for rows in record.get("loss_targets", []):
            if not rows or rows in record["forwards"] or not record["forwards"]:
                continue
            contiguous = rows == list(range(case.batch))[rank * len(shard):(rank + 1) * len(shard)]
            shown = [r if r >= 0 else "?" for r in rows]
            raise CheckError(f"{what}: rank {rank}'s model saw the samples {record['forwards'][0]}, but its loss "
                             f"compared them with the targets of the samples {shown}",
                             where="look at which rows of targets each rank gives the loss, next to the rows of "
                                   "inputs it gives the model",
                             mistake="pick the targets exactly as the inputs, so that each output meets its own "
                                     "sample's target: targets[rank::world_size]"
                                     + (" (yours are a contiguous block of the batch)" if contiguous else ""))
    return sum(len(record["forwards"]) for record in trained)


def _check_training(fn: Callable[..., Any], inputs: Sequence[TrainCase], name: str, extra: Callable[[TrainCase], list],
                    exchanges_gradients: bool = False, through_wrapper: bool = False) -> int:
    """Every rank's weights equal the whole-batch run; ``exchanges_gradients``: the ranks all-reduced gradients, not
    only weights (the contract of train_by_hand: the weights alone cannot show what the ranks exchanged);
    ``through_wrapper``: wrong weights from a DistributedDataParallel wrapper that was built but never called are
    named (train_ddp)."""
    checks = 0
    for world_size, cases in _by_world_size(inputs).items():
        per_rank = run_group(_train_target, fn, cases, world_size=world_size, what=name)
        for index, case in enumerate(cases):
            expected = _whole_batch(case)
            what = f"{name}(..., steps={case.steps}, seed={case.seed}, lr={case.lr}) with {world_size} processes"
            forwards = []
            for rank in range(world_size):  # the contract on every rank first: one rank's slip skews all weights
                got, built, _ = per_rank[rank][index]
                expect(isinstance(got, dict), f"{what}: rank {rank} should return the model's state_dict(), "
                       f"but returned {describe(got)}",
                       where="look at your return statement")
                if got and all(isinstance(k, str) and k.startswith("module.") for k in got):
                    raise CheckError(f"{what}: the keys start with 'module.' ({next(iter(got))!r}); expected the "
                                     "plain model's keys",
                                     where="look at which model's state_dict() you return",
                                     mistake="that is the DDP wrapper's state_dict; return "
                                             "ddp_model.module.state_dict(), the plain model's")
                missing = sorted(set(expected) - set(got))
                if missing and set(got) < set(expected) and set(missing) <= set(_buffer_names()):
                    raise CheckError(f"{what}: rank {rank} returned the keys {sorted(got)}: the model's buffer(s) "
                                     f"{missing} are missing (the model's state_dict() has {sorted(expected)})",
                                     where="look at what you return: the parameters only, or the state dict?",
                                     mistake="named_parameters() (or parameters()) leaves out the buffers; the "
                                             "contract returns the model's parameters and buffers by name, which is "
                                             "model.state_dict()")
                expect(set(got) == set(expected), f"{what}: rank {rank} returned the keys {sorted(got)}, expected the "
                       f"model's {sorted(expected)}",
                       where="look at which model's state_dict() you return")
                forwards.append(_expect_training_contract(what, case, rank, built))
            twins = extra(case)
            start = _built_with(case.seed)
            for rank in range(world_size):
                got, _, timeline = per_rank[rank][index]
                if case.steps and all(torch.equal(got[k], start[k]) for k in start):
                    raise CheckError(f"{what}: rank {rank} returned the weights make_model() starts from: no step "
                                     "changed them",
                                     where="look at which parameters the optimizer updates, and which model you "
                                           "train and return",
                                     mistake=(f"the model ran {forwards[rank]} training forward and backward passes, "
                                              "but no optimizer step changed its weights: give the optimizer the "
                                              "parameters of the model you train" if forwards[rank] else None))
                wrong = next((k for k in expected if not torch.allclose(got[k], expected[k], atol=1e-5)), None)
                if (through_wrapper and wrong is not None and forwards[rank] and "ddp-built" in timeline
                        and "ddp-forward" not in timeline):
                    raise CheckError(f"{what}: rank {rank}'s {wrong} after training is not the one-process run's on the "
                                     f"whole batch; rank {rank} wrapped its model in DistributedDataParallel, but its "
                                     f"{forwards[rank]} training forward(s) never called the wrapper",
                                     where="look at which model computes the outputs in each step",
                                     mistake="the forward must call the DDP wrapper, ddp_model(x): a forward through "
                                             "the inner model (ddp_model.module(x), or the model you wrapped) skips "
                                             "DDP's gradient averaging, so each rank stepped with its own shard's "
                                             "gradient")
                early = _averaged_before_backward(timeline)
                for key, want in expected.items():
                    mistakes = []
                    if forwards[rank] != case.steps:
                        mistakes.append(Mistake(f"rank {rank}'s model ran {forwards[rank]} forward passes with gradients "
                                                f"for steps={case.steps}: one step is one forward, backward and "
                                                "optimizer step; count the loop", matches=lambda got: True,
                                                where="look at how many times your loop runs"))
                    if early:
                        mistakes.append(Mistake(
                            f"average_gradients ran before backward(): each of its {early} call(s) on rank {rank} "
                            "found every parameter's .grad None or zero (cleared, and not yet written by that step's "
                            "backward()), so it had nothing to average, and the backward() after it wrote this "
                            "rank's own gradients for optimizer.step(). Call average_gradients(model) after "
                            "loss.backward() and before optimizer.step()", matches=lambda got: True,
                            where="look at the order of the calls in each step of your loop"))
                    mistakes += [Mistake(message, lambda twin=twin, rank=rank, key=key: twin[min(rank, len(twin) - 1)][key],
                                         where="look at each step of the training loop: the shard, the loss, "
                                               "backward, the gradient exchange, the step")
                                 for message, twin in twins]
                    expect_tensor(got[key], want, what=f"{what}: rank {rank}'s {key} after training", mistakes=mistakes,
                                  atol=1e-5)
                reduced = [event.removeprefix("all_reduce-") for event in timeline if event.startswith("all_reduce-")]
                expect(not exchanges_gradients or set(reduced) != {"weight"},
                       f"{what}: rank {rank}'s weights are right, but the ranks all-reduced the weights themselves "
                       f"({len(reduced)} time(s)) and never a gradient; the contract has them exchange the gradients "
                       "with average_gradients, before each update",
                       where="look at each step of your loop: backward(), then average_gradients(model), then the "
                             "update",
                       mistake="averaging the weights after each step gives the same weights with plain SGD only "
                               "(not with momentum or weight decay); exchange the gradients, as the task asks")
            checks += 1
    return checks


_NOT_AVERAGED = ("the ranks ended with different weights, each trained on its own shard only: the gradients "
                 "optimizer.step() used were not averaged across the ranks")


def _divided_again(case: TrainCase, averaged_by: str) -> tuple[str, list[dict[str, torch.Tensor]]]:
    """The twin of a run whose averaged gradients were divided by the world size once more (for plain SGD the same
    weights as a learning rate divided by it)."""
    return (f"the weights are those of a run with the learning rate divided by the world size ({case.lr} / "
            f"{case.world_size}): the updates are {case.world_size} times too small. {averaged_by} already averages "
            "the gradients: do not divide them (or the learning rate) by the world size again",
            _simulated(case._replace(lr=case.lr / case.world_size)))
_MOMENTUM = "the weights are those of SGD with momentum=0.9: the task trains with plain SGD, lr={lr} and nothing else"
_SUMMED_LOSS = ("the loss is summed over the shard: use the mean (the default reduction), so that the average over "
                "the ranks is the whole batch's mean")
_ACCUMULATED = ("the gradients of every step were added to those of the steps before: clear them before each "
                "backward (optimizer.zero_grad()); backward() adds to .grad")


def check_train_by_hand(fn: Callable[..., Any], inputs: Sequence[TrainCase] | None = None) -> None:
    """Every rank's weights after ``steps`` steps equal one process trained on the whole batch."""
    inputs = inputs or [TrainCase(), TrainCase(2, 2, 0.1, 3, 9)]

    def twins(case: TrainCase) -> list:
        return [(_NOT_AVERAGED + ": call average_gradients(model) after backward() (which writes them) and before "
                 "optimizer.step()", _simulated(case, average=False)),
                (_SUMMED_LOSS, _simulated(case, reduction="sum")),
                (_ACCUMULATED, _simulated(case, accumulate=True)),
                (f"the weights are those of a run with the learning rate times the world size ({case.world_size} x "
                 f"{case.lr}): the gradients were summed over the ranks, not averaged. average_gradients(model) "
                 "divides the sum by the world size", _simulated(case._replace(lr=case.lr * case.world_size))),
                _divided_again(case, "average_gradients"),
                (_MOMENTUM.format(lr=case.lr), _simulated(case, momentum=0.9))]

    # graded with the reference average_gradients: a bug there costs exercise 2's points, not these too
    # (watched: whether it had gradients to average when it ran)
    with torch.random.fork_rng(devices=[]), substitute(fn, average_gradients=_watched_average_gradients):
        checks = _check_training(fn, inputs, "train_by_hand", twins, exchanges_gradients=True)
    passed("train_by_hand", checks)


def check_train_ddp(fn: Callable[..., Any], inputs: Sequence[TrainCase] | None = None) -> None:
    """With DistributedDataParallel: every rank's weights after ``steps`` steps equal the whole-batch run."""
    inputs = inputs or [TrainCase(), TrainCase(2, 2, 0.1, 3, 9)]

    def twins(case: TrainCase) -> list:
        return [(_NOT_AVERAGED + ": wrap the model in DistributedDataParallel before training, and train the wrapper",
                 _simulated(case, average=False)),
                (_SUMMED_LOSS, _simulated(case, reduction="sum")),
                (_ACCUMULATED, _simulated(case, accumulate=True)),
                (f"the weights are those of a run with the learning rate times the world size ({case.world_size} x "
                 f"{case.lr}): DistributedDataParallel averages the gradients, so the one-process lr stays as it is",
                 _simulated(case._replace(lr=case.lr * case.world_size))),
                _divided_again(case, "DistributedDataParallel"),
                (_MOMENTUM.format(lr=case.lr), _simulated(case, momentum=0.9))]

    with torch.random.fork_rng(devices=[]):
        checks = _check_training(fn, inputs, "train_ddp", twins, through_wrapper=True)
    passed("train_ddp", checks)


# ---------------------------------------------------------------- save_and_load

class SaveCase(NamedTuple):
    """A save-and-load case: seed, world size, and whether an older checkpoint already sits at the path."""

    seed: int = 0
    world_size: int = 2
    older_file: bool = True


def _weights(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return nn.Linear(4, 3).state_dict()


def _events(folder: str, rank: int) -> list[str]:
    path = Path(folder) / f"events{rank}.txt"
    return path.read_text().split() if path.exists() else []


def _record(folder: str, rank: int, event: str) -> None:
    with open(Path(folder) / f"events{rank}.txt", "a") as log:
        log.write(event + "\n")


_RELEASING = {"save", "load", "barrier", "sync", "done"}  # a rank that did one of these has moved on, or is waiting
_SYNCS = ("all_reduce", "broadcast", "broadcast_object_list", "all_gather", "all_gather_object", "gather", "reduce",
          "scatter", "recv")  # other collectives that can hold a rank until rank 0 gets there


def _wait_for_the_others(folder: str, world_size: int, releasing: frozenset | set = frozenset(_RELEASING)) -> None:
    """Hold rank 0's write until another rank has loaded (or is waiting, or finished): a missing barrier then
    shows every time. A rank's first event is "start"; 10 s after every rank started, rank 0 goes on anyway
    (a rank waiting somewhere the spies do not see), and never later than the collectives' timeout allows.
    ``releasing``: the events of another rank that let rank 0 go on."""
    started_all = None
    give_up = time.monotonic() + COLLECTIVE_TIMEOUT_S / 2 + 10
    while time.monotonic() < give_up:
        events = [_events(folder, r) for r in range(1, world_size)]
        if any(releasing & set(e) for e in events):
            return
        if started_all is None and all(events):
            started_all = time.monotonic()
        if started_all is not None and time.monotonic() > started_all + 10:
            return
        time.sleep(0.01)


def _save_target(rank: int, world_size: int, fn: Callable[..., Any], case: SaveCase, folder: str) -> tuple:
    """Rank 0 holds the trained weights, the others older ones. torch.save, torch.load, barrier and the other
    collectives are watched (this child's copies only), and rank 0 writes only once another rank has moved on
    (a load finished, a barrier or another collective reached, the function returned), so a missing barrier
    shows every time, not by chance."""
    real_save, real_load, real_barrier = torch.save, torch.load, dist.barrier
    real_syncs = {name: getattr(dist, name) for name in _SYNCS}

    def save(obj: Any, *args: Any, **kwargs: Any) -> Any:
        _record(folder, rank, "save-module" if isinstance(obj, nn.Module) else "save")
        if rank == 0:
            _wait_for_the_others(folder, world_size)
        with saved_on(f"cuda:{rank}"):  # as on a GPU machine, where rank r's tensors live on cuda:r
            return real_save(obj, *args, **kwargs)

    def load(*args: Any, **kwargs: Any) -> Any:
        if len(args) < 2 and kwargs.get("map_location") is None:
            _record(folder, rank, "load-unmapped")  # the file's tensors go back to the GPU they came from
        try:
            return real_load(*args, **kwargs)
        finally:  # after the read: rank 0 must not start writing while this rank still reads
            _record(folder, rank, "load")

    def barrier(*args: Any, **kwargs: Any) -> Any:
        _record(folder, rank, "barrier")
        return real_barrier(*args, **kwargs)

    def sync(name: str) -> Callable[..., Any]:
        def collective(*args: Any, **kwargs: Any) -> Any:
            _record(folder, rank, "sync")
            return real_syncs[name](*args, **kwargs)
        return collective

    checkpoint = os.path.abspath(Path(folder) / "model.pt")
    real_removes = {name: getattr(os, name) for name in ("remove", "unlink")}  # Path.unlink calls os.unlink

    def deleting(name: str) -> Callable[..., Any]:
        def delete(path: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                target = os.path.abspath(os.fspath(path))
            except TypeError:  # not a path (a file descriptor): not the checkpoint
                target = None
            try:
                return real_removes[name](path, *args, **kwargs)
            finally:  # noted once the file is gone (or the attempt failed), so that rank 0 starts after it
                if target == checkpoint:
                    _record(folder, rank, "delete")
        return delete

    torch.save, torch.load, dist.barrier = save, load, barrier
    for name in _SYNCS:
        setattr(dist, name, sync(name))
    for name in real_removes:
        setattr(os, name, deleting(name))
    model = nn.Linear(4, 3)
    model.load_state_dict(_weights(case.seed if rank == 0 else case.seed + 100 + rank))
    _record(folder, rank, "start")
    if rank == 0:
        # rank 0 starts once another rank has gone ahead (deleted the checkpoint, reached a barrier, loaded...): a
        # delete of the file by another rank, not kept apart from rank 0's save by a barrier, then shows every time
        _wait_for_the_others(folder, world_size, _RELEASING | {"delete"})
    try:
        # task: "every rank loads the file into its `model`"
        in_rank(fn, model, Path(folder) / "model.pt", allow=Allow(changed=(model,)))
    finally:
        _record(folder, rank, "done")
        torch.save, torch.load, dist.barrier = real_save, real_load, real_barrier
        for name, real in real_syncs.items():
            setattr(dist, name, real)
        for name, real in real_removes.items():
            setattr(os, name, real)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, _events(folder, rank)


def _barrier_on_some_ranks(folder: str, world_size: int) -> str | None:
    """The ranks that called dist.barrier() and those that did not, when only some did."""
    called = [r for r in range(world_size) if "barrier" in _events(folder, r)]
    if called and len(called) < world_size:
        missing = [r for r in range(world_size) if r not in called]
        return (f"rank(s) {called} called dist.barrier(), rank(s) {missing} did not: a barrier waits until every "
                "rank has called it, so every rank must call it (outside `if rank == 0:`), after the save and "
                "before the load")
    return None


def _barrier_after_load(folder: str, world_size: int, failed: int | None = None) -> str | None:
    """When no rank called dist.barrier() before its load, and some called it only after loading: the barrier is
    there, in the wrong place. ``failed``: a rank whose load raised (its code never got past it)."""
    events = [_events(folder, r) for r in range(world_size)]
    loaded = [r for r, e in enumerate(events) if "load" in e]
    late = [r for r in loaded if "barrier" in events[r] and events[r].index("load") < events[r].index("barrier")]
    if not late or any("barrier" in e and ("load" not in e or e.index("barrier") < e.index("load")) for e in events):
        return None
    never = [r for r in loaded if "barrier" not in events[r]]
    shown = ""
    if failed in never:
        shown = (f", and rank {failed} loaded it before calling any barrier (its load failed, so it never got "
                 "further)"
                 + (f"; rank(s) {[r for r in never if r != failed]} loaded it and never called dist.barrier()"
                    if len(never) > 1 else ""))
    elif never:
        shown = f", and rank(s) {never} loaded it and never called dist.barrier()"
    who = "every rank" if late == list(range(world_size)) else f"rank(s) {late}"
    return (f"{who} called dist.barrier() only after loading the file{shown}: a barrier after the load makes no "
            "rank wait for the file. The barrier must come after the save and before the load: call dist.barrier() "
            "there, on every rank")


def _unordered_delete(folder: str, world_size: int) -> CheckError | None:
    """A rank other than 0 that deleted the checkpoint with no barrier (or other collective) between its delete and
    rank 0's save: it could have deleted the new file. Rank 0 saves after its b-th collective; a delete before
    rank r's (k + 1)-th collective comes surely before that save only when b > k."""
    events = [_events(folder, r) for r in range(world_size)]
    syncs = {"barrier", "sync"}
    saves = [i for i, event in enumerate(events[0]) if event in ("save", "save-module")]
    if not saves:
        return None
    before_save = sum(event in syncs for event in events[0][:saves[0]])
    for rank in range(1, world_size):
        for i, event in enumerate(events[rank]):
            if event == "delete" and sum(e in syncs for e in events[rank][:i]) >= before_save:
                return CheckError(f"save_and_load: rank {rank} deleted the checkpoint file at the path, and no "
                                  "barrier stood between its delete and rank 0's save: nothing keeps the delete from "
                                  "running after the save, deleting the new checkpoint before the loads after the "
                                  "barrier (which of the two comes first is down to timing)",
                                  where="look at which ranks touch the file before the barrier, and the `if` around "
                                        "each line",
                                  mistake="only rank 0 touches the file (removing the older one, if you do, and "
                                          "saving): put the delete inside `if dist.get_rank() == 0:`; the other ranks "
                                          "only wait at dist.barrier(), then load")
    return None


def _uncalled_get_rank(fn: Callable[..., Any]) -> str | None:
    """The mistake when the function's source compares dist.get_rank itself (not its result) with a rank."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    if not re.search(r"get_rank\s*(==|!=|<=|>=|<|>|\bin\b)|(==|!=)\s*(dist\.)?get_rank\b(?!\s*\()", source):
        return None
    return ("dist.get_rank without parentheses is the function itself, which never equals a rank: no rank passes "
            "the test. Call it: dist.get_rank() == 0")


def _unmapped_load(rank: int, symptom: str) -> CheckError:
    """The failure for a rank that loaded the checkpoint without map_location."""
    return CheckError(f"save_and_load: on rank {rank}, {symptom} (the check's rank 0 saves as a GPU machine does: "
                      "every tensor in the file is tagged 'cuda:0')",
                      where="look at the arguments of your torch.load call",
                      mistake="without map_location, torch.load puts every tensor back on the device it was saved "
                              "from: rank 0's GPU, on every rank, and on a machine without CUDA it cannot load at all; "
                              "the task loads with map_location=\"cpu\"")


def check_save_and_load(fn: Callable[..., Any], inputs: Sequence[SaveCase] | None = None) -> None:
    """Only rank 0 writes the file; every rank ends with rank 0's weights, read after the file was complete."""
    inputs = inputs or [SaveCase(0, 2, older_file=False), SaveCase(1, 2, older_file=True)]
    checks = 0
    for case in inputs:
        with tempfile.TemporaryDirectory(prefix="course-save-") as folder, torch.random.fork_rng(devices=[]):
            older = _weights(case.seed + 50)
            if case.older_file:
                torch.save(older, Path(folder) / "model.pt")  # yesterday's checkpoint, still at the path

            def explain(rank: int, report: _Report) -> CheckError | None:
                if report.error == "RuntimeError" and CUDA_LOAD_ERROR in report.message:
                    raise _unmapped_load(rank, "torch.load raised RuntimeError: "
                                               f"{report.message.strip().splitlines()[0]}")
                saved = any({"save", "save-module"} & set(_events(folder, r)) for r in range(case.world_size))
                if report.error == "FileNotFoundError" and (deleted := _unordered_delete(folder, case.world_size)):
                    return deleted
                if report.error == "FileNotFoundError" and not saved:
                    return CheckError(f"save_and_load: rank {rank} could not load the checkpoint "
                                      "(FileNotFoundError): no rank had saved it",
                                      where="look at the condition around your torch.save: is it true on rank 0?",
                                      mistake=_uncalled_get_rank(fn))
                if rank > 0 and report.error == "FileNotFoundError":
                    early = (f"save_and_load: rank {rank} tried to load the file before rank 0 had written it "
                             "(FileNotFoundError)")
                    uneven = _barrier_after_load(folder, case.world_size, rank) or _barrier_on_some_ranks(
                        folder, case.world_size)
                    return CheckError(early, where="look at what the other ranks do while rank 0 saves: what makes "
                                                   "them wait until the file is complete?",
                                      mistake=uneven or "call dist.barrier() between saving and loading")
                return None

            results = run_group(_save_target, fn, case, folder, world_size=case.world_size,
                                what="save_and_load(model, path)", explain=explain)
            trained = _weights(case.seed)
            what = f"save_and_load with {case.world_size} processes"
            writers = [rank for rank, (_, events) in enumerate(results) if {"save", "save-module"} & set(events)]
            if any(rank > 0 for rank in writers):
                raise CheckError(f"{what}: rank {max(writers)} wrote the checkpoint too",
                                 where="look at the condition around your torch.save",
                                 mistake="only rank 0 should save (`if dist.get_rank() == 0:`); several processes "
                                         "writing one file can corrupt it")
            expect(writers == [0], f"{what}: rank 0 never saved the model",
                   where="look at the condition around your torch.save, and what it saves",
                   mistake=_uncalled_get_rank(fn) or "torch.save(model.state_dict(), path) on rank 0")
            if "save-module" in results[0][1]:
                raise CheckError(f"{what}: rank 0 saved the model object itself (torch.save(model, path)); the task "
                                 "saves model.state_dict(), the weights by name",
                                 where="look at what you give torch.save",
                                 mistake="a pickled module needs its class's code to load (and weights_only=False, "
                                         "which runs whatever the file holds); a state_dict loads into any model "
                                         "of that shape")
            deleted = _unordered_delete(folder, case.world_size)
            if deleted:
                raise deleted
            unmapped = [rank for rank, (_, events) in enumerate(results) if "load-unmapped" in events]
            if unmapped:  # a grader with CUDA loads such a file without an error: the spy sees it there
                raise _unmapped_load(unmapped[0], "torch.load was called without map_location")
            for rank, (weights, events) in enumerate(results):
                if case.older_file and all(torch.equal(weights[k], older[k]) for k in older):
                    early = (f"{what}: rank {rank} loaded the file before rank 0 had written it (it read the "
                             "older checkpoint that was still there)")
                    uneven = _barrier_after_load(folder, case.world_size) or _barrier_on_some_ranks(
                        folder, case.world_size)
                    raise CheckError(early, where="look at what the other ranks do while rank 0 saves: what makes "
                                                  "them wait until the file is complete?",
                                     mistake=uneven or "call dist.barrier() between saving and loading")
                if rank > 0 and "load" not in events:
                    other_way = all(torch.equal(weights[k], want) for k, want in _weights(case.seed).items())
                    raise CheckError(f"{what}: rank {rank} never loaded the checkpoint"
                                     + (" (it has rank 0's weights, so they came some other way: a broadcast?)"
                                        if other_way else ""),
                                     where="look at how the other ranks get the weights" if other_way else
                                     "look at the condition around your torch.load",
                                     mistake="the task has every rank read the file rank 0 wrote (after the "
                                             "barrier): that is what a resumed run does, and it checks the file "
                                             "itself" if other_way else
                                             "every rank must load it (after the barrier) to get rank 0's weights")
                own = _weights(case.seed + 100 + rank)
                if rank > 0 and all(torch.equal(weights[k], own[k]) for k in own):
                    raise CheckError(f"{what}: rank {rank} called torch.load, but the model it was given still holds "
                                     "its own weights from before the call",
                                     where="look at where the weights torch.load returned go",
                                     mistake="model.load_state_dict(state) copies them into the caller's model; "
                                             "assigning to a name (model = ...) or loading into another model "
                                             "leaves the caller's model as it was")
                for key, want in trained.items():
                    expect_tensor(weights[key], want, what=f"{what}: rank {rank}'s {key} afterwards")
            checks += 1
    passed("save_and_load", checks)


# ---------------------------------------------------------------- put together: train_distributed

class WholeCase(NamedTuple):
    """A put-together case: seed, samples, global batch size, epochs, world size, input features, classes."""

    seed: int = 1
    n: int = 24
    batch_size: int = 8
    epochs: int = 2
    world_size: int = 2
    features: int = 5
    classes: int = 3


class _ReadCounting(torch.utils.data.Dataset):
    """A dataset of (features, label) items that remembers which items were read from it, in order."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y, self.order = x, y, []

    @property
    def reads(self) -> int:
        return len(self.order)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        self.order.append(int(index))
        return self.x[index], int(self.y[index])


def _whole_data(case: WholeCase) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(300 + case.seed)
    return torch.randn(case.n, case.features, generator=g), torch.randint(0, case.classes, (case.n,), generator=g)


def _whole_model(case: WholeCase) -> Callable[[], nn.Module]:
    def make_model() -> nn.Module:
        return nn.Sequential(nn.Linear(case.features, 6), nn.ReLU(), nn.Linear(6, case.classes))
    return make_model


class _GlobalSeeds:
    """The reseeds a function makes of torch's global generator (through torch.manual_seed or
    torch.random.manual_seed) once its first argument, ``make_model``, has built the model."""

    def __init__(self) -> None:
        self.after_model: list[int] = []
        self.seeds_before_model: list[int] = []  # the seeds set before the model was built
        self.initial: dict[str, torch.Tensor] = {}  # the weights the model was built with

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        built = [False]

        @functools.wraps(fn)
        def watched(make_model: Callable[[], nn.Module], *args: Any, **kwargs: Any) -> Any:
            originals = torch.manual_seed, torch.random.manual_seed

            def spy(seed: Any, *more: Any, **options: Any) -> Any:
                (self.after_model if built[0] else self.seeds_before_model).append(int(seed))
                return originals[0](seed, *more, **options)

            def building() -> nn.Module:
                model = make_model()
                if not built[0]:
                    self.initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
                built[0] = True
                return model

            torch.manual_seed = torch.random.manual_seed = spy
            try:
                return fn(building, *args, **kwargs)
            finally:
                torch.manual_seed, torch.random.manual_seed = originals
        return watched


def _whole_target(rank: int, world_size: int, fn: Callable[..., Any], cases: list[WholeCase]) -> list[tuple]:
    out = []
    for case in cases:
        x, y = _whole_data(case)
        dataset = _ReadCounting(x, y)
        torch.manual_seed(4321 + rank)  # whatever state each process happens to have: only `seed` may matter
        seeds = _GlobalSeeds()
        # task: "trains the same model to the same weights as train_one_process" (which seeds torch's global
        # generator, once, before building the model); `dataset` is the check's own stand-in, which records every
        # read, and `seeds` the reseeds after the model is built (see _expect_seeded_once)
        result = in_rank(seeds.wrap(fn), _whole_model(case), dataset, case.epochs, case.batch_size, 0.1, case.seed,
                         allow=Allow(global_rng=True, changed=(dataset,)))
        if isinstance(result, dict):
            result = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in result.items()}
        out.append((result, dataset.order, seeds.after_model, (seeds.seeds_before_model, seeds.initial)))
    return out


def _expect_seeded_once(what: str, case: WholeCase, rank: int, after_model: list[int]) -> None:
    """train_one_process seeds torch's global generator once, before it builds the model: a reseed after that
    throws away the random stream the rest of the program shares, even where the order it gives is right."""
    if after_model:
        shown = ", ".join(f"torch.manual_seed({seed})" for seed in after_model)
        raise CheckError(f"{what}: the weights are right, but rank {rank} reseeded torch's global random generator "
                         f"after building the model ({shown}); train_one_process seeds it once, with "
                         f"seed={case.seed}, before building the model",
                         where="look for manual_seed calls after the model is built, and for what draws the epoch's "
                               "order",
                         mistake="reseeding the global generator (with seed + epoch, say) throws away the random "
                                 "stream the rest of the program shares (dropout, augmentation, the caller's next "
                                 "draw); train_one_process draws each epoch's order from a torch.Generator of its "
                                 "own, and DistributedSampler(dataset, seed=seed) with set_epoch(epoch) does the same")


def _single_run(case: WholeCase, batch_size: int, order: Callable[[int], list[int]],
                momentum: float = 0.9, lr: float = 0.1) -> dict[str, torch.Tensor]:
    """The given single-process training with another batch size, order of the samples (epoch -> order),
    momentum or learning rate."""
    x, y = _whole_data(case)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(case.seed)
        model = _whole_model(case)()
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        for epoch in range(case.epochs):
            indices = order(epoch)
            for start in range(0, len(indices), batch_size):
                batch = indices[start:start + batch_size]
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
                optimizer.step()
        return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _expect_steps(what: str, case: WholeCase, world_size: int, reads: list[list[int]], cause: str | None) -> None:
    """Each step, the ranks together read the one-process run's batch (in any split among them): the first step
    where they did not, from the order each rank read the dataset in (per-process batches of
    batch_size // world_size)."""
    per = case.batch_size // world_size
    if per == 0 or any(len(read) != case.n // world_size * case.epochs for read in reads):
        return  # not read in equal shares: the weights' message says more than a step would
    steps = case.n // case.batch_size
    for epoch in range(case.epochs):
        order = _shuffled(case.n, case.seed + epoch)
        for step in range(steps):
            want = order[step * case.batch_size:(step + 1) * case.batch_size]
            at = (epoch * steps + step) * per
            got = [index for read in reads for index in read[at:at + per]]
            if sorted(got) != sorted(want):
                raise CheckError(f"{what}: in epoch {epoch}, step {step + 1} the ranks together read the samples "
                                 f"{sorted(got)}; the one-process run's batch there is {sorted(want)} (its order: "
                                 f"randperm with seed + epoch)",
                                 where="look at which samples each rank takes in each step, in which order",
                                 mistake=cause)


def _own_block(case: WholeCase, reads: list[list[int]]) -> str | None:
    """The mistake when every rank read, in every epoch, only from its own contiguous block of the dataset."""
    world_size, share = len(reads), case.n // len(reads)
    if world_size < 2 or not all(read and set(read) <= set(range(rank * share, (rank + 1) * share))
                                 for rank, read in enumerate(reads)):
        return None
    return (f"every rank read only its own contiguous block of the dataset in every epoch (rank r: the samples "
            f"r * {share} to (r + 1) * {share} - 1), while the one-process run's batches mix samples from all of "
            "it: shuffle the whole dataset each epoch and deal that order out to the ranks, as DistributedSampler "
            "does")


def _drawn_in_turn(n: int, seed: int) -> Callable[[int], list[int]]:
    """Epoch -> order, when every epoch's order is the next randperm of one generator seeded once with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    orders: list[list[int]] = []

    def order(epoch: int) -> list[int]:
        while len(orders) <= epoch:
            orders.append(torch.randperm(n, generator=generator).tolist())
        return orders[epoch]
    return order


def _block_of_order(case: WholeCase, reads: list[list[int]]) -> str | None:
    """The mistake when every rank read, in every epoch, a contiguous block of the epoch's order (rank r: the
    positions r * share to (r + 1) * share - 1), in batches of its own."""
    world_size, share = len(reads), case.n // len(reads)
    if world_size < 2 or any(len(read) != share * case.epochs for read in reads):
        return None
    for epoch in range(case.epochs):
        order = _shuffled(case.n, case.seed + epoch)
        if any(read[epoch * share:(epoch + 1) * share] != order[rank * share:(rank + 1) * share]
               for rank, read in enumerate(reads)):
            return None
    per = case.batch_size // world_size
    return (f"each rank took a contiguous block of the whole epoch's order (rank r: the positions r * {share} to "
            f"(r + 1) * {share} - 1 of randperm with seed + epoch) and cut it into batches of {per}: the ranks' "
            f"batches in one step then come from different parts of the epoch, not from the one-process run's batch "
            f"of {case.batch_size}. Deal each batch out to the ranks (DistributedSampler deals the epoch's order out "
            f"like cards, order[rank::world_size], and a DataLoader cuts that into batches)")


def _is_subsequence(part: list[int], order: list[int]) -> bool:
    remaining = iter(order)
    return all(index in remaining for index in part)


def _expect_own_shares(what: str, case: WholeCase, reads: list[list[int]]) -> None:
    """In every epoch the ranks' shares are disjoint (``len(dataset)`` is a multiple of the batch size, so no
    sampler pads): the first epoch where the ranks read the same samples, or where their shares overlap."""
    world_size, share = len(reads), case.n // len(reads)
    if world_size < 2 or any(len(read) != share * case.epochs for read in reads):
        return  # not read in equal shares: the other messages say more
    for epoch in range(case.epochs):
        parts = [read[epoch * share:(epoch + 1) * share] for read in reads]
        if all(sorted(part) == sorted(parts[0]) for part in parts[1:]):
            raise CheckError(f"{what}: in epoch {epoch} every rank read the same {share} samples "
                             f"{sorted(parts[0])}; together the ranks should read each of the {case.n} samples once",
                             where="look at which part of the epoch's order each rank takes: does it depend on the "
                                   "rank?",
                             mistake="every rank took the same part of the order, so the samples outside it were "
                                     "never read: rank r takes its own part (DistributedSampler deals the order out "
                                     "by rank)")
        counts = Counter(index for part in parts for index in part)
        twice = sorted(index for index, count in counts.items() if count > 1)
        if not twice:
            continue
        never = sorted(set(range(case.n)) - set(counts))
        order = _shuffled(case.n, case.seed + epoch)
        follow = [rank for rank, part in enumerate(parts) if _is_subsequence(part, order)]
        if follow and len(follow) < world_size:
            others = [rank for rank in range(world_size) if rank not in follow]
            cause = (f"rank(s) {follow} read in the one-process run's order for the epoch (randperm with seed + "
                     f"epoch) and rank(s) {others} did not: the ranks shuffled differently (a seed that depends on "
                     "the rank?), so their shares overlap. Every rank must draw the same order (the same seed + "
                     "epoch on every rank, or DistributedSampler(dataset, seed=seed)) and take its own part of it")
        else:
            cause = ("the ranks' shares of the epoch overlap: every rank must take a part of the same order (the "
                     "same seed + epoch on every rank) that no other rank takes, as DistributedSampler does")
        raise CheckError(f"{what}: in epoch {epoch} the ranks' shares overlap: the samples {twice} were read by more "
                         f"than one rank, and {never} by none (each rank read {share}; together they should read "
                         f"each of the {case.n} once)",
                         where="look at the order each rank shuffles the samples into, and which part of it each "
                               "rank takes",
                         mistake=cause)


def _strided_reads(case: WholeCase, reads: list[list[int]]) -> int | None:
    """The step k (2 or more, not the world size) when every rank r read, in each step, the samples r, r + k, ...
    of the one-process run's batch: a world size written into the code as k."""
    world_size = len(reads)
    orders = [_shuffled(case.n, case.seed + epoch) for epoch in range(case.epochs)]
    batches = [order[start:start + case.batch_size] for order in orders
               for start in range(0, case.n, case.batch_size)]
    for k in range(2, case.batch_size + 1):
        if k != world_size and all(read == [i for batch in batches for i in batch[rank::k]]
                                   for rank, read in enumerate(reads)):
            return k
    return None


_WHERE_ORDER = "look at which samples each rank takes in each step, in which order"
_WHERE_LR = "look at the learning rate you give the optimizer, and at the loss: is either scaled by the world size?"


def check_train_distributed(fn: Callable[..., Any], inputs: Sequence[WholeCase] | None = None) -> None:
    """On every rank, ``fn`` reads only its share of the data and ends with the given single-process run's weights."""
    inputs = inputs or [WholeCase(), WholeCase(2, 12, 6, 2, 3)]
    checks = 0
    for world_size, cases in _by_world_size(inputs).items():
        per_rank = run_group(_whole_target, fn, cases, world_size=world_size, what="train_distributed")
        for index, case in enumerate(cases):
            x, y = _whole_data(case)
            with torch.random.fork_rng(devices=[]):
                expected = ref.train_one_process(_whole_model(case), _ReadCounting(x, y), case.epochs,
                                                 case.batch_size, 0.1, case.seed)

            def shuffled(seed: int) -> Callable[[int], list[int]]:
                return lambda epoch: torch.randperm(case.n, generator=torch.Generator().manual_seed(seed)).tolist()

            twins = [
                ("every epoch used the first epoch's order: the order is shuffled with seed + epoch, and the epoch "
                 "never changed it (with a DistributedSampler, call sampler.set_epoch(epoch) at the start of each "
                 "epoch)",
                 _single_run(case, case.batch_size, lambda epoch: shuffled(case.seed)(0)), _WHERE_ORDER),
                (f"the steps took {world_size} x {case.batch_size} samples: each process loaded the whole "
                 f"batch_size; it should load batch_size // world_size = {case.batch_size // world_size}",
                 _single_run(case, case.batch_size * world_size,
                             lambda epoch: shuffled(case.seed + epoch)(epoch)), _WHERE_ORDER),
                ("the samples came in the order of a sampler seeded with 0 + epoch, not with `seed` + epoch: "
                 "DistributedSampler(dataset, seed=...) takes the seed", _single_run(
                     case, case.batch_size, lambda epoch: shuffled(epoch)(epoch)), _WHERE_ORDER),
                ("epoch 0's order is right and the later epochs' are not: they are the next draws of one generator "
                 "seeded once with `seed` (randperm called again on the same generator). The order of epoch e is "
                 "randperm with a generator seeded with seed + e: seed a new generator with seed + epoch every epoch "
                 "(DistributedSampler(dataset, seed=seed) with sampler.set_epoch(epoch) does)",
                 _single_run(case, case.batch_size, _drawn_in_turn(case.n, case.seed)), _WHERE_ORDER),
                ("the samples were not shuffled (index order every epoch): DistributedSampler shuffles by default; "
                 "shuffle=False turns that off", _single_run(case, case.batch_size, lambda epoch: list(range(case.n))),
                 _WHERE_ORDER),
                ("the weights are those of plain SGD: train_one_process's optimizer has momentum=0.9",
                 _single_run(case, case.batch_size, lambda epoch: shuffled(case.seed + epoch)(epoch), momentum=0.0),
                 "look at the optimizer you make: its settings are train_one_process's"),
                (f"the weights are those of a run with the learning rate divided by the world size (0.1 / "
                 f"{world_size}): the updates are {world_size} times too small. The gradients are averaged over the "
                 "ranks already (DistributedDataParallel does it): do not divide the loss or the learning rate by "
                 "the world size", _single_run(case, case.batch_size, lambda epoch: shuffled(case.seed + epoch)(epoch),
                                               lr=0.1 / world_size), _WHERE_LR),
                (f"the weights are those of a run with the learning rate multiplied by the world size (0.1 x "
                 f"{world_size}): the updates are {world_size} times too large. The task trains to the single-process "
                 "run's weights, with its learning rate: the gradients are averaged over the ranks, so each step "
                 "is the one-process step", _single_run(case, case.batch_size,
                                                        lambda epoch: shuffled(case.seed + epoch)(epoch),
                                                        lr=0.1 * world_size), _WHERE_LR),
            ]
            twins = [(message, twin, where) for message, twin, where in twins
                     if any(not torch.allclose(twin[k], expected[k], atol=1e-5) for k in expected)]
            what = (f"train_distributed(make_model, dataset of {case.n}, epochs={case.epochs}, "
                    f"batch_size={case.batch_size}, lr=0.1, seed={case.seed}) with {world_size} processes")
            results = []
            fixed = _strided_reads(case, [per_rank[rank][index][1] for rank in range(world_size)])
            for rank in range(world_size):
                got, read, *_ = per_rank[rank][index]
                reads = len(read)
                expect(isinstance(got, dict), f"{what}: rank {rank} should return the model's state_dict(), "
                       f"but returned {describe(got)}",
                       where="look at your return statement")
                if got and all(isinstance(k, str) and k.startswith("module.") for k in got):
                    raise CheckError(f"{what}: rank {rank} returned keys that start with 'module.' "
                                     f"({next(iter(got))!r}), the single-process run's have none",
                                     where="look at which model's state_dict you return",
                                     mistake="that is the DDP wrapper's state_dict; the plain model's is "
                                             "ddp_model.module.state_dict()")
                expect(set(got) == set(expected), f"{what}: rank {rank} returned the keys {sorted(got)}, expected "
                       f"the model's {sorted(expected)}",
                       where="look at which model's state_dict() you return")
                share = case.n // world_size * case.epochs
                if fixed is not None:
                    raise CheckError(f"{what}: rank {rank} read {reads} samples from the dataset in {case.epochs} "
                                     f"epoch(s): in every step the samples at positions {rank}, {rank + fixed}, ... of "
                                     f"the one-process run's batch of {case.batch_size}; its share is {share} "
                                     f"({case.n} // {world_size} per epoch), {case.batch_size // world_size} of "
                                     "every batch",
                                     where="look at every number in the code that picks this rank's samples: is "
                                           "one of them the world size, written as a number?",
                                     mistake=_hard_coded_world(fixed, world_size, f"batch[rank::{fixed}]"))
                if reads > share:
                    raise CheckError(f"{what}: rank {rank} read {reads} samples from the dataset in {case.epochs} "
                                     f"epoch(s); its share is {share} ({case.n} // {world_size} per epoch)",
                                     where="look at which indices each rank reads from the dataset",
                                     mistake="each rank should load only its own share of every batch (a "
                                             "DistributedSampler gives a DataLoader exactly that)")
                results.append(got)
            for rank in range(1, world_size):
                if any(not torch.allclose(results[rank][k], results[0][k], atol=1e-5) for k in expected):
                    raise CheckError(f"{what}: rank {rank} ended with other weights than rank 0; the "
                                     "single-process run has one set of weights",
                                     where="look at which model computes the loss in each step",
                                     mistake="the ranks started from the same weights, so their gradients were not "
                                             "averaged before each step: under DistributedDataParallel, is the "
                                             "wrapper the model that computes the loss? By hand, is every .grad "
                                             "all-reduced and divided by the world size before optimizer.step()?")
            if any(not torch.allclose(results[0][k], expected[k], atol=1e-5) for k in expected):
                before, initial = per_rank[0][index][3]
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(case.seed)
                    seeded = _whole_model(case)().state_dict()
                # rank 0's initial weights are the ones every rank trains (DDP copies them from rank 0)
                if initial and any(not torch.equal(initial[k], v) for k, v in seeded.items() if k in initial):
                    seeded_with = (f" (the seeds set before it: {before})" if before else
                                   " (no torch.manual_seed before it)")
                    raise CheckError(f"{what}: rank 0's model started from other weights than the single-process "
                                     f"run's, which seeds with torch.manual_seed({case.seed}) and then calls "
                                     f"make_model(){seeded_with}",
                                     where="look at the order of torch.manual_seed(seed) and make_model()",
                                     mistake="seed torch's global generator with seed first, then build the model: "
                                             "a model built before the seed (or with another seed) starts from other "
                                             "weights" if case.seed not in before else None)
                reads = [per_rank[rank][index][1] for rank in range(world_size)]
                _expect_own_shares(what, case, reads)
                _expect_steps(what, case, world_size, reads,
                              next((message for message, twin, _ in twins
                                    if all(torch.allclose(results[0][k], twin[k], atol=1e-5) for k in expected)), None)
                              or _own_block(case, reads) or _block_of_order(case, reads))
            for key, want in expected.items():
                mistakes = [Mistake(message, lambda twin=twin, key=key: twin[key], where=where)
                            for message, twin, where in twins]
                expect_tensor(results[0][key], want, what=f"{what}: the weights {key} after training, against the "
                              "single-process run's", mistakes=mistakes, atol=1e-5)
            for rank in range(world_size):
                _expect_seeded_once(what, case, rank, per_rank[rank][index][2])
            checks += 1
    passed("train_distributed", checks)
