"""The sandbox caps a notebook's processes where the grader has no cgroup (issue 21).

- A non-root grader: RLIMIT_NPROC, set inside the sandbox's own user namespace, is the cap. It counts the
  tasks of that sandbox alone, not the grader's other processes nor another kernel's.
- A root grader without writable cgroups (a container): RLIMIT_NPROC never binds root, so the kernel runs
  as a uid of its own, which the limit binds. The test hides the machine's cgroups from the launcher (an
  empty tmpfs over /sys/fs/cgroup in a mount namespace of its own), as a container would.

The tests run real grading kernels (the launcher of ``coursetools/grading/sandbox.py``, bwrap, ipykernel and
the guard), which needs root to set up: they are skipped elsewhere, saying why.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
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


# Starts a command as root as in a container: mount and process namespaces of its own (so every grader's launcher
# may have the same pid), where no cgroup can be written. It dies with the test's handle on it (--kill-child).
WITHOUT_CGROUPS = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--kill-child",
                   "sh", "-c", 'mount -t tmpfs -o size=1m,mode=0555 none /sys/fs/cgroup && exec "$@"', "sh"]


def why_not_as_root() -> str | None:
    """The reason this machine cannot start a root grader's sandboxed kernel without cgroups, or None."""
    if sys.platform != "linux":
        return "the process cap is Linux's RLIMIT_NPROC"
    if os.geteuid() != 0:
        return "hiding the machine's cgroups from the grader needs root (CI runs as root)"
    if not sandbox.sandboxed():
        return "bubblewrap is not installed or cannot run here (apt-get install bubblewrap)"
    probe = subprocess.run([*WITHOUT_CGROUPS, "ls", "/sys/fs/cgroup"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip():
        return f"cannot hide the cgroups in a mount namespace here: {probe.stderr.strip()}"
    if sandbox.kernel_user_warning() is not None:
        return f"the kernels must stay root in this checkout: {sandbox.kernel_user_warning()}"
    return None


class Kernel:
    """A grading kernel started by the sandbox's launcher, with a client to run cells in it.

    As ``USER`` (a non-root grader), or as root in a mount namespace without cgroups (``user`` None).
    """

    def __init__(self, python: Path, top: Path, name: str, user: str | None = USER) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.private, work = top / f"{name}-private", top / f"{name}-work"
        for folder in (self.private, work):
            folder.mkdir()
        # what nbgrader's autograde gives the launcher: the notebook's folder, the grader's secret beside the
        # connection file (the guard reads it, then deletes it)
        (work / f"{name}.ipynb").write_text("{}")
        # handed in beside the notebook, which is the kernel's working folder: it must not run instead of ipykernel's
        (work / "ipykernel_launcher.py").write_text("raise SystemExit('the notebook folder\'s ipykernel_launcher.py ran')\n")
        (self.private / "secret").write_text("s3cret")
        connection, _ = write_connection_file(str(self.private / "connection.json"), transport="ipc",
                                              ip=str(self.private / "k"))
        env = sandbox.kernel_environment(dict(os.environ)) | {sandbox.ENV_PROCESSES: str(CAP)}
        env[sandbox.ENV_GUARD] = json.dumps({"secret_file": str(self.private / "secret")})
        launcher = [str(python), "-I", str(REPO_ROOT / "coursetools" / "grading" / "sandbox.py"), "-f", connection]
        if user is None:
            prefix = WITHOUT_CGROUPS
        else:
            account = pwd.getpwnam(user)
            for path in (self.private, work, *self.private.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            prefix = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups"]
        self.process = subprocess.Popen([*prefix, *launcher], cwd=work, env=env, start_new_session=True)
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


def each_holds_nearly_the_cap(kernels: list[Kernel]) -> None:
    """A cell in each kernel starts children until it may not (EAGAIN) and keeps them, one kernel after the
    other, so that all hold nearly the cap at once; then each lets them go and runs ordinary work."""
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
        each_holds_nearly_the_cap(kernels)
    finally:
        for kernel in kernels:
            kernel.stop()
        for other in others:
            other.kill()
            other.wait()


NOT_AS_ROOT = why_not_as_root()
# What the kernel is: its user, whether it can read a file only root may, and whether it can become root again.
WHO = ("import os, getpass, subprocess\n"
       "try:\n"
       "    open('/etc/shadow').read(1)\n"
       "    shadow = 'read'\n"
       "except OSError:\n"
       "    shadow = 'refused'\n"
       "su = subprocess.run(['su', '-c', 'id -u'], capture_output=True, text=True, stdin=subprocess.DEVNULL)\n"
       "caps = {k: v for k, v in (line.split(':') for line in open('/proc/self/status')) if k.startswith('Cap')}\n"
       "no_caps = all(int(caps[k], 16) == 0 for k in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb'))\n"
       "print(os.getuid(), getpass.getuser(), shadow, su.returncode != 0 and su.stdout.strip() != '0', no_caps)\n")


@pytest.mark.skipif(NOT_AS_ROOT is not None, reason=str(NOT_AS_ROOT))
def test_a_root_graders_kernels_are_each_capped_without_cgroups(top):
    """Without cgroups, each kernel of a root grader runs as a uid of its own, and RLIMIT_NPROC caps it.

    Each grader is in a container of its own (its own pid 1), as two graders on one machine would be.

    Two kernels at once: a cell in each starts sleeping children until it may not (EAGAIN) and keeps them, so
    both hold nearly the cap together; each then runs ordinary work (DataLoader workers). The kernel is not
    root, cannot read what only root may, and no setuid program makes it root again.
    """
    kernels: list[Kernel] = []
    try:
        for name in ("a", "b"):
            kernels.append(Kernel(Path(sys.executable), top, name, user=None))
        uids = []
        for kernel in kernels:
            uid, user, shadow, stayed, no_caps = kernel.run(WHO).split()
            uids.append(int(uid))
            assert int(uid) >= sandbox.KERNEL_UID_BASE and user == sandbox.KERNEL_USER, (uid, user)
            assert shadow == "refused" and stayed == "True" and no_caps == "True", (shadow, stayed, no_caps)
            assert not (kernel.private / "secret").exists(), "the guard did not read and delete the grader's secret"
        # each launcher is pid 1 of its own container here: a uid derived from the pid would be the same
        assert len(set(uids)) == 2, f"two kernels share a uid, so they would share one cap: {uids}"
        each_holds_nearly_the_cap(kernels)
    finally:
        for kernel in kernels:
            kernel.stop()


# A root grader without cgroups, grading a class from start to end: nbgrader's autograde, the guard, the probe.
GRADE = ("import json, sys\n"
         "from pathlib import Path\n"
         "from traitlets.config import Config\n"
         "from coursetools import grading\n"
         "from coursetools.grading import sandbox\n"
         "config = Config()\n"
         "config.Execute.timeout = 60\n"
         "config.GraderExecute.notebook_timeout = 180\n"
         f"config.GraderExecute.process_limit = {CAP}\n"
         "results = grading.autograde(sys.argv[1], Path(sys.argv[2]), sys.argv[3:], overrides=config)\n"
         "print(json.dumps({'warning': sandbox.kernel_user_warning(), 'private': sandbox.private_root(),\n"
         "                  'results': {r.student: [r.status, r.score, r.sandboxed] for r in results}}))\n")


@pytest.mark.skipif(NOT_AS_ROOT is not None, reason=str(NOT_AS_ROOT))
def test_a_root_grader_without_cgroups_grades_a_class_as_before(tmp_path):
    """Correct work keeps full marks, wrong work loses them, a forged pass is caught, a fork bomb is capped
    (even beside a file that only root could read)."""
    from coursetools import grading
    from tests.test_grading_integrity import LESSON, SESSION_PATCH, WRONG
    from tests.test_roundtrip import solution_cells, submit

    course = grading.copy_course(tmp_path, lessons=[LESSON])
    grading.release(course, [LESSON])
    right = solution_cells(nbformat.read(course / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4))
    submit(course, "full", LESSON)
    submit(course, "wrong", LESSON, {"ex_to_fahrenheit": WRONG})
    submit(course, "forged", LESSON, {"ex_to_fahrenheit": WRONG + SESSION_PATCH})
    submit(course, "forker", LESSON, {"ex_to_fahrenheit": right["ex_to_fahrenheit"].source + "\n" + FORK + RELEASE})
    # a file only its owner may read, handed in beside the notebook, must not keep the kernel root (uncapped)
    private = course / "grading" / "submitted" / "forker" / LESSON / "mine.txt"
    private.write_text("mine")
    private.chmod(0o600)
    out = subprocess.run([*WITHOUT_CGROUPS, sys.executable, "-c", GRADE, LESSON, str(course),
                          "full", "wrong", "forged", "forker"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    said = json.loads(out.stdout.strip().splitlines()[-1])
    assert said["warning"] is None and said["private"] is None, said  # no memory cgroup: the usual temporary folder
    results = said["results"]
    assert results["full"] == ["graded", 2, True] and results["forker"] == ["graded", 2, True], results
    assert results["wrong"][:2] == ["graded", 0] and results["forged"][:2] == ["suspicious", 0], results
    forker = nbformat.read(course / "grading" / "autograded" / "forker" / LESSON / f"{LESSON}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for cell in forker.cells for o in cell.get("outputs", []))
    stopped = [line.split() for line in printed.splitlines() if line.split()[-1:] == [str(errno.EAGAIN)]]
    assert stopped and int(stopped[0][0]) < CAP, f"the notebook's processes were not capped: {printed[-500:]}"


@pytest.mark.skipif(NOT_AS_ROOT is not None, reason=str(NOT_AS_ROOT))
def test_a_root_grader_is_told_before_grading_what_keeps_its_kernels_uncapped(tmp_path):
    """Data only root can read: the kernel must stay root (it could not load it otherwise), so uncapped; say so.

    Once the folder is readable by all, the kernel runs as a user of its own again, and nothing is said.
    """
    data = tmp_path / "course-data"
    data.mkdir(mode=0o700)
    env = dict(os.environ, COURSE_DATA=str(data))
    probe = ("from coursetools.grading import sandbox\n"
             "print(sandbox.kernel_uid())\n"
             "print(sandbox.kernel_user_warning())\n")

    def kernel_uid_and_warning(prefix: list[str]) -> tuple[str, str]:
        out = subprocess.run([*prefix, sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        uid, warning = out.stdout.strip().splitlines()
        return uid, warning

    uid, warning = kernel_uid_and_warning(WITHOUT_CGROUPS)
    assert uid == "None" and "run as root" in warning and "may start any number of processes" in warning, warning
    assert f"chmod o+rX {data}" in warning, warning
    if sandbox._cgroup_roots().get("pids"):  # with a pids cgroup, the kernel left root is still capped
        uid, warning = kernel_uid_and_warning([])
        assert uid == "None" and "run as root" in warning and "any number" not in warning, warning
    data.chmod(0o755)
    uid, warning = kernel_uid_and_warning(WITHOUT_CGROUPS)
    assert int(uid) >= sandbox.KERNEL_UID_BASE and warning == "None", (uid, warning)
