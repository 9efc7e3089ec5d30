"""The sandbox caps a notebook's processes where the grader has no cgroup: a non-root grader (issue 21).

There RLIMIT_NPROC, set inside the sandbox's own user namespace, is the cap: it counts the tasks of that
sandbox alone, not the grader's other processes nor another kernel's. The test runs real grading kernels
(the launcher of ``coursetools/grading/sandbox.py``, bwrap, ipykernel and the guard) as an unprivileged
user, which needs root to set up: it is skipped elsewhere, saying why.
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coursetools.grading import sandbox
from helpers.data import REPO_ROOT
from tests.test_hub import checkout_unreachable, shared_python

pytestmark = pytest.mark.slow
USER = "nobody"
CAP = 64
OTHERS = 100  # processes the grader's user runs outside the sandboxes, more than the cap
# A cell that starts many sleeping children and keeps them: how many started, and the error that stopped it.
FORK = ("import subprocess\n"
        "children, stopped = [], None\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        children.append(subprocess.Popen(['sleep', '120']))\n"
        "except OSError as error:\n"
        "    stopped = error.errno\n"
        "print(len(children), stopped)\n")
RELEASE = "for child in children:\n    child.kill()\n    child.wait()\nprint(len(children))\n"
# Ordinary work once the children are gone: a DataLoader with two worker processes.
NORMAL = ("import torch\n"
          "from torch.utils.data import DataLoader, TensorDataset\n"
          "data = TensorDataset(torch.arange(64.0))\n"
          "print(int(sum(batch[0].sum() for batch in DataLoader(data, batch_size=8, num_workers=2))))\n")


def why_not_here() -> str | None:
    """The reason this machine cannot run a sandboxed kernel as an unprivileged user, or None."""
    if sys.platform != "linux":
        return "the process cap is Linux's RLIMIT_NPROC"
    if os.geteuid() != 0:
        return "starting kernels as an unprivileged user needs root (CI runs as root)"
    if not sandbox.sandboxed():
        return "bubblewrap is not installed or cannot run here (apt-get install bubblewrap)"
    if shutil.which("setpriv") is None:
        return "`setpriv` (util-linux) is not installed"
    account = pwd.getpwnam(USER)
    probe = subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                            "bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"], cwd="/", capture_output=True,
                           text=True)
    if probe.returncode != 0:
        return f"unprivileged user namespaces are off here, so a non-root grader has no sandbox: {probe.stderr.strip()}"
    return checkout_unreachable()


class Kernel:
    """A grading kernel started by the sandbox's launcher as ``USER``, with a client to run cells in it."""

    def __init__(self, python: Path, top: Path, name: str) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        account = pwd.getpwnam(USER)
        self.private, work = top / f"{name}-private", top / f"{name}-work"
        for folder in (self.private, work):
            folder.mkdir()
            os.chown(folder, account.pw_uid, account.pw_gid)
        connection, _ = write_connection_file(str(self.private / "connection.json"), transport="ipc",
                                              ip=str(self.private / "k"))
        os.chown(connection, account.pw_uid, account.pw_gid)
        env = sandbox.kernel_environment(dict(os.environ)) | {sandbox.ENV_PROCESSES: str(CAP)}
        self.process = subprocess.Popen(
            ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", str(python), "-I",
             str(REPO_ROOT / "coursetools" / "grading" / "sandbox.py"), "-f", connection],
            cwd=work, env=env, start_new_session=True)
        self.client = BlockingKernelClient(connection_file=connection)
        self.client.load_connection_file()
        self.client.start_channels(hb=False)  # no heartbeat: it would call a kernel still importing torch dead
        deadline = time.monotonic() + 180
        while True:
            try:
                self.client.wait_for_ready(timeout=5)
                break
            except RuntimeError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = self.private / "kernel.log"
                    raise AssertionError(f"the kernel did not start: {log.read_text() if log.exists() else ''}") from None

    def run(self, code: str) -> str:
        """Run one cell; return what it printed, failing the test if it raised."""
        printed: list[str] = []

        def keep(message: dict) -> None:
            if message["msg_type"] == "stream":
                printed.append(message["content"]["text"])
            elif message["msg_type"] == "error":
                printed.append("\n".join(message["content"]["traceback"]))

        reply = self.client.execute_interactive(code, timeout=120, output_hook=keep)
        assert reply["content"]["status"] == "ok", "".join(printed)
        return "".join(printed)

    def stop(self) -> None:
        self.client.stop_channels()
        self.process.kill()  # bwrap: the sandbox dies with it (--die-with-parent), its children with the kernel
        self.process.wait(timeout=30)


@pytest.fixture
def top() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="course-nproc-", dir="/tmp"))  # short: Unix socket paths <= 107 bytes
    folder.chmod(0o755)  # the user reaches the environment's copy and its folders through it
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


NOT_HERE = why_not_here()


@pytest.mark.skipif(NOT_HERE is not None, reason=str(NOT_HERE))
def test_a_non_root_graders_kernels_are_each_capped(top):
    """Each sandbox gets the whole cap; the grader user's processes outside, and the other kernel, do not count.

    Two kernels of a grader without cgroups, while that user runs more processes than the cap elsewhere:
    a cell in each starts sleeping children until it may not (EAGAIN) and keeps them, so both kernels hold
    nearly the cap at once. Each kernel survives and then runs ordinary work (DataLoader workers).
    """
    python = shared_python(top, ("helpers", "coursetools", "ipykernel", "torch"))
    account = pwd.getpwnam(USER)
    others = [subprocess.Popen(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                                "--clear-groups", "sleep", "300"], cwd="/") for _ in range(OTHERS)]
    kernels: list[Kernel] = []
    try:
        for name in ("a", "b"):
            kernels.append(Kernel(python, top, name))
        started = []
        for kernel in kernels:  # one after the other: the first kernel still holds its children
            count, stopped = kernel.run(FORK).split()
            started.append(int(count))
            assert stopped == str(errno.EAGAIN), (count, stopped)
        # the kernel's own threads and bwrap's init count too, so somewhat fewer than the cap start
        assert all(CAP // 2 <= n < CAP for n in started), started
        for kernel, count in zip(kernels, started):
            assert kernel.run(RELEASE).strip() == str(count)
            assert kernel.run(NORMAL).strip() == str(sum(range(64)))
    finally:
        for kernel in kernels:
            kernel.stop()
        for other in others:
            other.kill()
            other.wait()
