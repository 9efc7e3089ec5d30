"""The kernel an autograded notebook runs in: bubblewrap's sandbox, limits, and a guard on the checks.

nbgrader's autograde starts this course's grading kernelspec (:data:`KERNEL_NAME`,
installed by :func:`install_kernelspec`), whose command runs this file (``python -I sandbox.py``).
That launcher, still outside the sandbox:

1. sets the kernel's resource limits (memory: the data segment, so that PyTorch's
   large read-only library mappings do not count; the size of any one file it writes) and,
   where it may make control groups (root), caps the processes and memory of the notebook
   as a whole (:func:`cgroup_limits`);
2. starts ``bwrap`` (Debian's ``bubblewrap``) around an ordinary IPython kernel, with
   - a new process namespace (``--unshare-pid``, ``--die-with-parent``): nothing the
     notebook starts outlives the kernel, and the grader's processes are not visible,
     so they cannot be signalled;
   - no network (``--unshare-net``: only a loopback of its own, which the kernel reaches
     the grader through jupyter_client's ``ipc`` transport, Unix sockets in a folder
     both sides see);
   - a file system that holds only what a kernel needs, read-only (the system, Python,
     the virtual environment, ``helpers/``, the guard's own file, the course data), a
     private ``/tmp`` and ``/dev/shm`` of bounded size, and the notebook's folder as a
     bounded scratch space over the submission's files (read-only): nothing the kernel
     writes outlives it but its sockets. The root is read-only. The course's ``solutions/``,
     ``grading/`` (gradebook, other learners' work), ``coursetools/`` and ``.git`` are not
     there at all;
   - no capabilities (``--cap-drop ALL``), even when grading runs as root;
   - for a grader that is not root, a user namespace of its own, in which this file, run
     first inside the sandbox, caps the processes and threads of the kernel and all it starts
     (``RLIMIT_NPROC``, :func:`process_capped`) before it starts the kernel;
   - for a root grader, no root in the sandbox: this file, run first inside it with only the
     capabilities to change its user, sets the same cap and becomes a user of its own, a uid
     no account and no other kernel has (:func:`kernel_uid`), before it starts the kernel.
     Root, even without capabilities, would read every root-owned file the sandbox shows
     (``/etc/shadow``, the machine's SSH host keys), and RLIMIT_NPROC never binds it.
   Without ``bwrap`` the same kernel runs unsandboxed, with the same limits and guard.

   The process cap (:data:`ENV_PROCESSES`, 512 by default) therefore holds: as root, through
   the kernel's pids cgroup where the grader may make one, and through RLIMIT_NPROC on the
   kernel's own uid in any case (a container without writable cgroups); as any other user,
   through RLIMIT_NPROC in the sandbox's user namespace, which counts that sandbox's tasks
   alone (Linux 5.14 and later). Unsandboxed, only the cgroup can cap it.
3. runs :func:`_guard_kernel` in the kernel before any of the notebook's cells.

The guard records what the checks rely on (the functions of the modules the locked
cells import, torch's comparison functions, builtins, IPython's input and AST
transformers and hooks) and answers the grader's probe after every graded cell,
through a ``user_expressions`` request that IPython evaluates without passing it
through the learner's input transformers. The grader, not the kernel, decides whether a
graded cell passed: the probe reports whether the cell raised (recorded by the guard's own
``post_run_cell`` callback, not read from the kernel's reply) for the grader's one-time
nonce, signed with a secret the guard read (and deleted) before the notebook ran. The
secret never leaves the guard, so code that rewrites the kernel's messages (drops an
error, turns a reply into "ok", answers the probe itself) cannot forge a pass: the cell
fails and is flagged. Code that digs the secret out of the kernel (frames, closures, the
garbage collector) is what :mod:`coursetools.grading.scan` flags, and tracing or profiling
hooks, swapped code objects and a patched message session are reported by the probe:
the guard raises the bar; the scan and a person close it.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import types
from functools import lru_cache
from pathlib import Path

KERNEL_NAME = "pytorch-course-grader"
# Settings the grader passes the launcher (environment variables of the kernel's process).
ENV_MEMORY = "COURSE_SANDBOX_MEMORY"        # bytes of memory the kernel may allocate
ENV_FILE_SIZE = "COURSE_SANDBOX_FILE_SIZE"  # bytes, the largest file it may write
ENV_TMP_SIZE = "COURSE_SANDBOX_TMP_SIZE"    # bytes of its private /tmp
ENV_SANDBOX = "COURSE_SANDBOX"              # "bwrap" (default when installed) or "none"
ENV_GUARD = "COURSE_SANDBOX_GUARD"          # json: modules to record, file holding the secret
PROBE = "__course_integrity__"              # the builtin the grader's probe calls
CALL = "__course_call__"                    # the builtin through which the grader calls the learner's functions
ENV_PROCESSES = "COURSE_SANDBOX_PROCESSES"  # processes (and threads) the kernel and what it starts may run at once
ENV_MEMORY_TOTAL = "COURSE_SANDBOX_MEMORY_TOTAL"  # bytes of memory they may use together
CGROUP_PARENT = "pytorch-course-grader"     # the kernels' control groups live under this one
DEFAULT_PROCESSES = 512
DEFAULT_MEMORY = 2 * 2**30
DEFAULT_FILE_SIZE = 256 * 2**20
DEFAULT_TMP_SIZE = 512 * 2**20
# A root grader runs each kernel as a user of its own, whom RLIMIT_NPROC binds: a uid drawn at random from
# [KERNEL_UID_BASE, KERNEL_UID_BASE + KERNEL_UIDS), above any account's uid and systemd's container ranges. Drawn,
# not derived from a pid: graders in containers that share the machine's users each have their own pid 1.
KERNEL_UID_BASE = 0x70000000
KERNEL_UIDS = 0x0FFFFFFE
KERNEL_USER = "course-kernel"  # that user's name in the sandbox's /etc/passwd


def install_kernelspec() -> str:
    """Write the grading kernelspec into this environment (idempotent) and return its name."""
    folder = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec = {
        # by path, isolated (-I): a broken or shadowed `helpers` must not stop the kernel from starting
        "argv": [sys.executable, "-I", str(Path(__file__).resolve()), "-f", "{connection_file}"],
        "display_name": "PyTorch course (autograding sandbox)",
        "language": "python",
        # bwrap does not pass signals on: interrupts go to the kernel as messages
        "interrupt_mode": "message",
        "metadata": {"debugger": False},
    }
    text = json.dumps(spec, indent=1)
    path = folder / "kernel.json"
    if not path.exists() or path.read_text() != text:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return KERNEL_NAME


@lru_cache(maxsize=1)
def bwrap() -> str | None:
    """bubblewrap's path when it is installed and can create a sandbox here, else None."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent",
                            "--cap-drop", "ALL", "true"], capture_output=True)
    return path if probe.returncode == 0 else None


def sandboxed() -> bool:
    """Whether autograded kernels run in the sandbox (bwrap works and COURSE_SANDBOX is not "none")."""
    return os.environ.get(ENV_SANDBOX, "bwrap") != "none" and bwrap() is not None


def unsandboxed_warning() -> str:
    """One line for the instructor: grading runs unsandboxed, and the true reason why."""
    if os.environ.get(ENV_SANDBOX, "bwrap") == "none":
        why = f"{ENV_SANDBOX}=none is set"
        fix = f"Unset {ENV_SANDBOX} to grade in the sandbox."
    else:
        why = "bubblewrap (bwrap) is not installed or cannot run here"
        fix = "Install it (Debian/Ubuntu: apt-get install bubblewrap) and grade again."
    return (f"warning: grading UNSANDBOXED: {why}, so every learner's notebook runs with the grader's rights "
            f"(it can read the solutions and change the gradebook). {fix}")


# The kernel's environment: these variables of the grader's and nothing else (no tokens, passwords or
# database URLs reach a learner's code). Prefixes end with "_" or "*".
KERNEL_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "USER", "LOGNAME", "COURSE_*", "NBGRADER_*",
                      "JPY_*", "MPLBACKEND", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                      "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def kernel_environment(environ: dict[str, str]) -> dict[str, str]:
    """The allowed part of ``environ`` (see :data:`KERNEL_ENVIRONMENT`)."""
    import fnmatch

    allowed = {k: v for k, v in environ.items() if any(fnmatch.fnmatchcase(k, pattern) for pattern in KERNEL_ENVIRONMENT)}
    if allowed.get("COURSE_DATA"):
        # the sandbox mounts the data where it really is: a COURSE_DATA reached through a symbolic link (data kept
        # on another disk) would point the kernel at a link that is not there
        allowed["COURSE_DATA"] = os.pathsep.join(str(Path(p).resolve()) if Path(p).is_absolute() else p
                                                 for p in allowed["COURSE_DATA"].split(os.pathsep) if p)
    return allowed


def checkout() -> Path:
    """The folder that holds this course's ``helpers/`` (beside this package: the checkout, or site-packages)."""
    return Path(__file__).resolve().parents[2]


def _course_secrets(path: Path) -> bool:
    """Whether mounting ``path`` would show the kernel the answers or the grades: a folder holding
    ``solutions/`` or ``grading/``, or one above the course."""
    course = checkout()
    return course.is_relative_to(path) or (path / "solutions").exists() or (path / "grading").exists()


def _readable_paths() -> list[Path]:
    """What the kernel needs to see, read-only: the system, Python, the environment, helpers, the guard, the data."""
    # Of the course's code, only the learner package (helpers/, beside this package in the same checkout or
    # site-packages) and this one file, which the kernel runs as its guard: none of the grading tooling.
    this_file = Path(__file__).resolve()
    paths = [Path("/usr"), Path("/etc"), Path("/sys"), Path(sys.prefix), Path(sys.base_prefix),
             Path(sys.executable).resolve().parent.parent, checkout() / "helpers", this_file]
    extra = [Path(p) for variable in ("COURSE_DATA", "PYTHONPATH") for p in os.environ.get(variable, "").split(os.pathsep)
             if p]
    if not os.environ.get("COURSE_DATA"):
        extra.append(checkout() / "data")  # helpers.data's default data root
    paths += [p for p in extra if p.is_absolute() and p.exists() and not _course_secrets(p.resolve())]
    found = []
    for path in paths:
        if path.is_absolute() and path.exists() and path.resolve() not in found:
            found.append(path.resolve())
    # a folder inside another one already listed needs no mount of its own
    return sorted(p for p in found if not any(q != p and p.is_relative_to(q) for q in found))


def bwrap_command(workdir: Path, private: Path, tmp_size: int, uid: int | None = None) -> list[str]:
    """bwrap's arguments: ``private`` (the connection folder) and a bounded scratch ``workdir`` writable, nothing kept.

    With ``uid`` (a root grader's kernel, which runs as that user, :func:`kernel_uid`), the first process
    keeps only the capabilities to change its user, the writable folders are open to it, and
    ``/etc/passwd`` names it (``private/passwd``, written by :func:`launch`).
    """
    # the writable tmpfs folders: root's by default; open to the kernel's own user when it is not root
    writable = ["--perms", "1777"] if uid is not None else []
    # the machine's own hostname is kept: /etc/hosts resolves it to loopback, which torchrun's rendezvous needs
    command = [bwrap(), "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL",
               # only to become the kernel's user (cap_processes), which leaves no capability at all
               *(["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if uid is not None else []),
               # a user namespace of the sandbox's own, where the process cap counts only its tasks (see
               # process_capped). bwrap makes one anyway for a non-root user unless it is installed setuid; root is
               # left without: its kernel would keep kuid 0 in one, which RLIMIT_NPROC never binds
               *(["--unshare-user-try"] if os.getuid() != 0 else []),
               "--proc", "/proc", "--dev", "/dev", *writable, "--size", str(tmp_size), "--tmpfs", "/tmp",
               # shared memory (DataLoader workers pass batches through it) is RAM: bounded like /tmp
               *writable, "--size", str(tmp_size), "--tmpfs", "/dev/shm"]
    for name in ("bin", "lib", "lib64", "sbin"):
        link = Path("/") / name
        if link.is_symlink():
            command += ["--symlink", os.readlink(link), str(link)]
        elif link.exists():
            command += ["--ro-bind", str(link), str(link)]
    readable = _readable_paths()
    if uid is not None:
        # bwrap, as root, makes the folders above what it mounts (/work above /work/course/helpers) readable by
        # root alone: the kernel's user must pass through them
        above = {parent for path in [*readable, workdir, private] for parent in path.parents if parent != Path("/")}
        for folder in sorted(above, key=lambda folder: len(folder.parts)):
            command += ["--perms", "0755", "--dir", str(folder)]
    for path in readable:
        command += ["--ro-bind", str(path), str(path)]
    # The notebook's folder: a tmpfs as large as /tmp over it, with the submission's own files read-only in it.
    # What the kernel writes there (checkpoints, runs/) is bounded, and is gone with the kernel.
    command += [*writable, "--size", str(tmp_size), "--tmpfs", str(workdir)]
    for entry in sorted(workdir.iterdir()):
        # a link stays a link: bwrap, as root, would mount whatever it points at (the solutions, the gradebook)
        command += ["--symlink", os.readlink(entry), str(entry)] if entry.is_symlink() else [
            "--ro-bind", str(entry), str(entry)]
    # the connection folder: the kernel creates its sockets there, beside the grader's files
    command += ["--bind", str(private), str(private)]
    if uid is not None:  # getpass, torch.compile's cache folder and `whoami` look the kernel's user up
        command += ["--ro-bind", str(private / "passwd"), "/etc/passwd",
                    "--setenv", "USER", KERNEL_USER, "--setenv", "LOGNAME", KERNEL_USER]
    # ipykernel watches JPY_PARENT_PID, which a new process namespace hides: --die-with-parent does that job
    command += ["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--unsetenv", "JPY_PARENT_PID",
                "--chdir", str(workdir),
                # the root bwrap builds is a tmpfs of no size (RAM beyond the memory limit): read-only once mounted
                "--remount-ro", "/"]
    return command


def _cgroup_roots() -> dict[str, Path]:
    """The writable cgroup hierarchies holding the pids and memory controllers: {"pids": ..., "memory": ...}.

    cgroup v1 (one hierarchy per controller, /sys/fs/cgroup/pids) or v2 (one, /sys/fs/cgroup, whose
    subtree enables them). Empty where there are none this process may write (not root, a container).
    """
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():  # v2
        enabled = (base / "cgroup.subtree_control").read_text().split() if (base / "cgroup.subtree_control").exists() else []
        return {c: base for c in ("pids", "memory") if c in enabled and os.access(base, os.W_OK)}
    return {c: base / c for c in ("pids", "memory") if (base / c / "tasks").exists() and os.access(base / c, os.W_OK)}


def private_root() -> str | None:
    """Where the grader makes a kernel's connection folder: shared memory when a memory cgroup caps the kernel.

    The kernel creates its sockets in that folder, so it must be writable from inside the sandbox. Pages
    written to a tmpfs are charged to the writer's memory cgroup: there, anything else the kernel writes
    into the folder stops at the kernel's memory limit. Without such a cgroup, the usual temporary folder
    (None), where only the per-file size limit (RLIMIT_FSIZE) applies.
    """
    shm = Path("/dev/shm")
    if _cgroup_roots().get("memory") and shm.is_dir() and os.access(shm, os.W_OK):
        return str(shm)
    return None


def cgroup_limits(name: str, processes: int, memory: int) -> list[Path]:
    """Move this process (and so everything it will start) into new control groups capping the number of
    processes and their memory together; return the groups made, for :func:`remove_cgroups`.

    Per-process limits (``RLIMIT_DATA``) cannot cap a notebook that starts many processes, and
    ``RLIMIT_NPROC`` does not bind root. Where no cgroup can be made (not root, a container), nothing is
    capped here (best effort): the sandbox caps the processes itself (:func:`process_capped`).
    """
    made: list[Path] = []
    for controller, root in _cgroup_roots().items():
        try:
            parent = root / CGROUP_PARENT
            parent.mkdir(exist_ok=True)
            if (root / "cgroup.controllers").exists():  # v2: the parent hands both controllers down
                (parent / "cgroup.subtree_control").write_text("+pids +memory")
            group = parent / name
            group.mkdir(exist_ok=True)
            made.append(group)
            v2 = (root / "cgroup.controllers").exists()
            limits = {"pids": {"pids.max": processes},
                      "memory": {"memory.max": memory} if v2 else {"memory.limit_in_bytes": memory}}[controller]
            for file, value in limits.items():
                (group / file).write_text(str(value))
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            continue
    return made


def _closed_to_others(paths: list[Path]) -> list[Path]:
    """Those of ``paths`` that a user other than their owner cannot read (or, for a folder, enter)."""
    import stat

    closed = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
        if mode & needed != needed:
            closed.append(path)
    return closed


def kernel_uid() -> int | None:
    """The user a root grader's sandboxed kernel runs as (see :data:`KERNEL_UID_BASE`); None to keep the grader's.

    Root, even without capabilities, reads every root-owned file the sandbox shows (``/etc/shadow``, the SSH
    host keys under ``/etc``), and RLIMIT_NPROC never binds it: where :func:`cgroup_limits` cannot cap the
    processes (a container), nothing would. So a root grader's kernel gives up root inside the sandbox, for a
    uid that no account and no other kernel has. What the course mounts for every kernel (Python, the
    environment, helpers, the data) must then be readable by other users; where something is not, the kernel
    stays root (:func:`kernel_user_warning` tells the instructor before grading starts). The submission's own
    files play no part: a learner could otherwise keep their kernel root by handing in a file only its owner
    may read. A non-root grader's kernel keeps the grader's user, in a user namespace of its own.
    """
    import secrets

    if os.getuid() != 0 or not sandboxed() or kernel_user_warning() is not None:
        return None
    # two kernels share a cap only if they draw the same of 268 million uids while both run
    return KERNEL_UID_BASE + secrets.randbelow(KERNEL_UIDS)


def kernel_user_warning() -> str | None:
    """One line for the instructor when a root grader's kernels would have to stay root, else None."""
    if not sandboxed() or os.getuid() != 0:
        return None  # unsandboxed: the other warning says it; not root: the kernel never is
    closed = _closed_to_others(_readable_paths())
    if not closed:
        return None
    shown = " ".join(str(p) for p in closed[:5])
    uncapped = "" if _cgroup_roots().get("pids") else ", may start any number of processes (no writable pids cgroup)"
    return (f"warning: graded notebooks run as root: they can read root's files in the sandbox (such as /etc/shadow)"
            f"{uncapped}. They would run as a user of their own, but other users cannot read {shown}. Make them "
            f"readable (chmod o+rX {shown}) and grade again.")


def remove_cgroups(name: str) -> None:
    """Remove the control groups :func:`cgroup_limits` made for ``name`` once their processes are gone."""
    import time

    for root in set(_cgroup_roots().values()):
        group = root / CGROUP_PARENT / name
        for _ in range(50):  # the kernel's processes may take a moment to be reaped
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


def launch(argv: list[str]) -> None:
    """The kernelspec's command: limits, then the kernel, inside bwrap when it is available. Does not return."""
    connection_file = Path(argv[argv.index("-f") + 1]).resolve()
    memory = int(os.environ.get(ENV_MEMORY, DEFAULT_MEMORY))
    file_size = int(os.environ.get(ENV_FILE_SIZE, DEFAULT_FILE_SIZE))
    tmp_size = int(os.environ.get(ENV_TMP_SIZE, DEFAULT_TMP_SIZE))
    # RLIMIT_DATA counts what the kernel allocates (heap, tensors), not the libraries it maps
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    processes = int(os.environ.get(ENV_PROCESSES, DEFAULT_PROCESSES))
    # the notebook and every process it starts, together: processes and memory (the connection folder's name)
    cgroup_limits(connection_file.parent.name, processes, int(os.environ.get(ENV_MEMORY_TOTAL, 2 * memory)))
    # the guard is loaded by path, under a name of its own, so it does not depend on `helpers` importing
    guard = (f"__import__('runpy').run_path({str(Path(__file__).resolve())!r}, run_name='_course_guard')"
             "['_guard_kernel']()")
    # -P: the kernel's own module, not an ipykernel_launcher.py handed in beside the notebook (its working folder)
    kernel = [sys.executable, "-P", "-m", "ipykernel_launcher", *argv, f"--IPKernelApp.exec_lines={guard}"]
    # the kernel's own terminal output (its banner, a learner's os.write(2, ...)) stays off the grader's
    log = os.open(connection_file.parent / "kernel.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    # the kernel imports exactly this course's helpers, whatever the environment's installed copy points at
    os.environ["PYTHONPATH"] = str(checkout())
    if sandboxed():
        workdir, private = Path.cwd().resolve(), connection_file.parent
        uid = kernel_uid()
        if uid is not None:
            # the kernel's user makes its sockets in the connection folder and reads (then deletes) the secret there
            (private / "passwd").write_text(Path("/etc/passwd").read_text()
                                            + f"{KERNEL_USER}:x:{uid}:{uid}:autograded notebook:/tmp:/usr/sbin/nologin\n")
            for path in (private, *private.iterdir()):
                os.chown(path, uid, uid)
        kernel = bwrap_command(workdir, private, tmp_size, uid) + ["--", *process_capped(kernel, processes, uid)]
    os.execv(kernel[0], kernel)


CAP_PROCESSES = "--cap-processes"  # this file's mode that caps the processes inside the sandbox, then runs the kernel


def _user_namespace() -> int | None:
    """This process's user namespace (the inode of ``/proc/self/ns/user``), None where the kernel has none."""
    try:
        return os.stat("/proc/self/ns/user").st_ino
    except OSError:
        return None


def _nproc_per_user_namespace() -> bool:
    """Whether RLIMIT_NPROC counts per user namespace here (Linux 5.14 and later). Before, it counted all the
    processes of the grader's user, on the whole machine: a cap set in the sandbox would count those too."""
    import re

    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return sys.platform == "linux" and found is not None and tuple(map(int, found.groups())) >= (5, 14)


def process_capped(command: list[str], processes: int, uid: int | None = None) -> list[str]:
    """``command`` started by this file inside the sandbox, which first caps the processes (and threads) that
    the kernel and everything it starts may run at once at ``processes`` (:func:`cap_processes`).

    The grader's own processes must not count, nor other kernels': RLIMIT_NPROC is counted per user namespace
    and user (Linux >= 5.14), so it is set inside the sandbox's own user namespace, after bwrap made it. Set
    before, by the launcher, it would be recorded as the limit of the namespace's creator, and the kernel's
    every fork would also be checked against all the processes the grader's user runs. RLIMIT_NPROC never binds
    kuid 0, so a root grader's kernel becomes ``uid`` (:func:`kernel_uid`) once the limit is set: no other
    process has that uid, so it counts the sandbox's tasks alone, on any Linux. A kernel left root is capped by
    the control group of :func:`cgroup_limits` alone, if there is one; a non-root user's, on Linux before 5.14
    (see :func:`_nproc_per_user_namespace`), by nothing.
    """
    if uid is not None:
        return [sys.executable, "-I", str(Path(__file__).resolve()), CAP_PROCESSES, str(processes), "-",
                "--as", str(uid), "--", *command]
    if os.getuid() == 0 or not _nproc_per_user_namespace():
        return command
    return [sys.executable, "-I", str(Path(__file__).resolve()), CAP_PROCESSES, str(processes),
            str(_user_namespace()), "--", *command]


def cap_processes(argv: list[str]) -> None:
    """Inside the sandbox: ``argv`` = processes, the grader's user namespace, [``--as`` uid], ``--``, the kernel's
    command.

    Sets RLIMIT_NPROC (soft and hard: the notebook cannot raise it) when this process is in a user namespace
    other than the grader's, where it counts the sandbox's tasks alone, then runs the kernel. With ``--as``
    (a root grader), sets it, then becomes that user, which leaves it no capability and
    no way to regain one (no_new_privs), and runs the kernel as that user. Does not return.
    """
    processes, graders, command = int(argv[0]), argv[1], argv[argv.index("--") + 1:]
    if "--as" in argv[:argv.index("--")]:
        import ctypes

        uid = int(argv[argv.index("--as") + 1])
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another user: the permitted and effective capabilities go with it
        libc = ctypes.CDLL(None, use_errno=True)
        # and the inheritable ones bwrap left (CAP_SETUID, CAP_SETGID): capset(version 3, this process, all empty)
        header, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
        if libc.capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: no setuid program gives any back
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        os.execv(command[0], command)
    if str(_user_namespace()) != graders and _user_namespace() is not None:
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        limit = processes if hard == resource.RLIM_INFINITY else min(processes, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    os.execv(command[0], command)


# ---------------------------------------------------------------- inside the kernel

# What the checks compare with: these attributes of these modules must stay the originals.
# (Other torch attributes are rewrapped by PyTorch itself, e.g. torch.manual_seed once torch._dynamo loads.)
WATCHED_ATTRIBUTES = {
    "torch": ["allclose", "equal", "isclose", "eq", "ne", "all", "any", "is_tensor", "isfinite", "isnan", "abs",
              "max", "min", "sum", "tensor", "as_tensor", "from_numpy", "is_grad_enabled", "get_default_dtype",
              "testing", "Tensor", "nn"],
    "torch.nn.functional": ["cross_entropy", "nll_loss", "mse_loss", "softmax", "log_softmax", "one_hot", "relu"],
    "numpy": ["allclose", "array_equal", "isclose", "asarray", "array", "testing"],
}


def _attributes(obj: object, names: list[str] | None = None) -> dict[str, object]:
    """The attributes of ``obj`` (a module or class) that the checks rely on: ``names``; else every attribute of a
    course module (its tolerances and constants too), and what the checks may call of anything else."""
    namespace = vars(obj)
    if names is not None:
        return {name: namespace[name] for name in names if name in namespace}
    if isinstance(obj, type(sys)) and obj.__name__.startswith("helpers"):
        return {name: value for name, value in list(namespace.items()) if not name.startswith("__")}
    return {name: value for name, value in list(namespace.items())
            if callable(value) or isinstance(value, (staticmethod, classmethod, property, type(sys)))}


def _same(a: object, b: object) -> bool:
    # a bound method (builtins.get_ipython) is a new object each time it is looked up
    return a is b or (hasattr(a, "__self__") and hasattr(a, "__func__") and a == b)


def _code(value: object) -> object:
    """The code object a function (or a method's function) runs: swapping it in place changes no identity."""
    return getattr(value, "__code__", None) or getattr(getattr(value, "__func__", None), "__code__", None)


def _fingerprint(value: object, course: bool) -> tuple | None:
    """What a function (or a method's function) runs: its code and, for the course's own functions, its defaults
    and the contents of its closure. Each can be changed in place, keeping the function's identity
    (``f.__kwdefaults__["atol"] = 1e9`` loosens every comparison that leaves atol to its default)."""
    function = value if hasattr(value, "__code__") else getattr(value, "__func__", None)
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    if not course:
        return (code,)
    keywords = function.__kwdefaults__ or {}
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            cells.append(None)
    defaults = [*(function.__defaults__ or ()), *keywords.values()]
    # a default object's fields (check.call's allow=Allow()) can be changed without replacing the object
    fields = [field for value in defaults if not isinstance(value, (type, type(sys), types.FunctionType))
              for field in getattr(value, "__dict__", {}).values()]
    return (code, function.__defaults__, function.__kwdefaults__, *keywords.keys(), *keywords.values(), *cells,
            *fields)


def _same_parts(a: tuple | None, b: tuple | None) -> bool:
    return a is b or (a is not None and b is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b)))


def _codes(obj: object, attributes: dict[str, object]) -> dict[str, tuple]:
    """Fingerprints of ``attributes`` and, for classes a course module defines, of their methods."""
    module = getattr(obj, "__name__", "")
    course = module.startswith("helpers")
    codes = {name: _fingerprint(value, course) for name, value in attributes.items()}
    for name, value in attributes.items():
        if isinstance(value, type) and value.__module__ == module and course:
            codes.update({f"{name}.{m}": _fingerprint(f, course) for m, f in vars(value).items()
                          if _code(f) is not None})
    return {name: code for name, code in codes.items() if code is not None}


def _now_code(obj: object, name: str) -> tuple | None:
    value = obj
    for part in name.split("."):
        value = vars(value).get(part) if hasattr(value, "__dict__") else None
    return _fingerprint(value, getattr(obj, "__name__", "").startswith("helpers"))


def _tracing() -> dict[str, object]:
    """The tracing and profiling functions set for this thread and for new threads."""
    import threading

    return {"sys.settrace": sys.gettrace(), "sys.setprofile": sys.getprofile(),
            "threading.settrace": threading.gettrace(), "threading.setprofile": threading.getprofile()}


# Dispatch keys an eager comparison never reaches: meta tensors, and the function transforms' keys, for which
# PyTorch itself registers Python batching rules the first time a notebook uses torch.func.vmap or grad.
_UNREACHED_KEYS = ("Meta", "Batched", "FuncTorch")


def _operator_overrides() -> set[str]:
    """PyTorch's own aten operators given an implementation from Python for a key that an eager comparison
    dispatches to (a device, autograd, a composite), as torch.library records them ("aten/allclose/CPU"). Meta,
    prims and the function transforms' implementations, which PyTorch adds itself as it loads (torch.compile) or
    on first use (torch.func), are not."""
    try:
        import torch.library

        return {entry for entry in torch.library._impls
                if entry.split("/")[0] == "aten" and not entry.split("/")[-1].startswith(_UNREACHED_KEYS)}
    except Exception:  # a PyTorch without this (private) record: nothing seen, rather than a failed probe
        return set()


def _active_modes() -> list[object]:
    """The torch function and dispatch modes active now (``with mode:``, or ``mode.__enter__()`` left on)."""
    try:
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        return [*_get_current_function_mode_stack(), *_get_current_dispatch_mode_stack()]
    except Exception:  # a PyTorch without these (private) functions: nothing seen, rather than a failed probe
        return []


def _subclasses(cls: type) -> list[type]:
    found, todo = [], list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        found.append(sub)
        todo += sub.__subclasses__()
    return found


# IPython's names for the history of inputs and outputs (In, Out, _, _i3, _7...): what a cell showed, not a binding
_HISTORY = re.compile(r"In|Out|_+|_i+|_i?\d+|_[oid]h|_sh|exit|quit|get_ipython")


class _NotebookCode:
    """Tells the notebook's own code (its cells, a file it wrote, ``exec``) from the course's and the libraries'."""

    def __init__(self) -> None:
        import importlib.util
        import sysconfig

        libraries = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        libraries |= {Path(p).resolve() for p in sysconfig.get_paths().values()}
        self._libraries = tuple(f"{p}{os.sep}" for p in libraries)
        course = importlib.util.find_spec("helpers")  # found, not imported: the notebook may not import it
        self._course = (f"{Path(course.origin).resolve().parent}{os.sep}",) if course and course.origin else ()
        self._imported = False
        self._known: dict[str, str] = {}

    def __call__(self, filename: str) -> bool:
        return self.origin(filename) == "notebook"

    def origin(self, filename: str) -> str:
        """ "notebook", "course" (``helpers/``) or "library" (Python's and the environment's own)."""
        imported = getattr(sys.modules.get("helpers"), "__file__", None)
        if isinstance(imported, str) and not self._imported:  # the course's helpers, as the notebook imported them
            self._imported = True
            self._course += (f"{Path(imported).resolve().parent}{os.sep}",)
            self._known.clear()
        known = self._known.get(filename)
        if known is None:
            if filename.startswith("<"):  # "<string>" (exec) is the notebook's; "<frozen ...>" is Python's own
                known = "library" if filename.startswith("<frozen") else "notebook"
            else:
                path = os.path.realpath(filename)
                known = "course" if path.startswith(self._course) else \
                    "library" if path.startswith(self._libraries) else "notebook"
            self._known[filename] = known
        return known

    def written_by(self, function: object, origin: str) -> bool:
        """Whether ``function`` (a function, a method, a classmethod) comes from ``origin``."""
        code = _code(function) or _code(getattr(function, "__func__", None))
        return code is not None and self.origin(code.co_filename) == origin

    def defines(self, function: object) -> bool:
        """Whether ``function`` was written by the notebook."""
        return self.written_by(function, "notebook")


class _AnswerKey:
    """The course's answer key (the loaded ``helpers.reference`` modules), watched from inside the kernel.

    Each function of those modules, and the ``__init__`` of each class, is replaced by a wrapper that notes
    when the notebook's own code calls it: ``return check.ref.flatten_batch(x)`` inside an answer, however the
    module was reached. The checks call the reference freely, and so may the notebook's code with what a check
    hands it (:func:`helpers.checks.handed`: the arguments of ``call``, the names ``substitute`` puts in the
    notebook). The probe also looks for names the notebook bound to the answer key (``f = check.ref.f``, a
    subclass of a reference model, a ``functools.partial`` of one).

    The caller that counts is the nearest one past libraries' code: a library wrapping the key (``vmap``,
    ``torch.no_grad()(f)``) does not hide the notebook behind it, and a check's own call is the course's.
    """

    def __init__(self, handed, from_notebook: _NotebookCode) -> None:
        self.handed = handed
        self.from_notebook = from_notebook
        self.called: list[str] = []  # what the notebook's code called since the last probe
        self.objects: dict[int, tuple[object, str]] = {}  # every wrapper, class and module, kept alive by id
        self.classes: list[type] = []

    def note(self, caller, obj: object, name: str) -> None:
        """Note a call of the answer key whose nearest caller, past libraries' code (``torch.no_grad()(f)``,
        ``vmap``, ``functools``), is the notebook's own code."""
        try:
            frame = caller
            while frame is not None and self.from_notebook.origin(frame.f_code.co_filename) == "library":
                frame = frame.f_back
            if frame is not None and self.from_notebook(frame.f_code.co_filename) and not self.handed(obj) \
                    and name not in self.called:
                self.called.append(name)
        except Exception:  # never let the watch break the reference call a check makes
            pass

    def wrap_function(self, original, name: str):
        key = self

        def answer_key(*args, **kwargs):
            key.note(sys._getframe(1), answer_key, name)
            return original(*args, **kwargs)

        _look_like(answer_key, original)
        self.objects[id(answer_key)] = (answer_key, name)
        return answer_key

    def wrap_class(self, cls: type, name: str) -> None:
        key, original = self, vars(cls).get("__init__")
        if original is not None:
            def __init__(instance, *args, **kwargs):
                key.note(sys._getframe(1), cls, name)
                original(instance, *args, **kwargs)

            _look_like(__init__, original)
            type.__setattr__(cls, "__init__", __init__)
        self.objects[id(cls)] = (cls, name)
        self.classes.append(cls)

    def install(self) -> None:
        """Wrap every function and class that a loaded reference module defines."""
        for module_name, module in sorted(sys.modules.items()):
            if not module_name.startswith("helpers.reference.") or module is None:
                continue
            self.objects[id(module)] = (module, module_name)
            for attribute, value in list(vars(module).items()):
                if getattr(value, "__module__", None) != module_name:
                    continue
                if isinstance(value, type):
                    self.wrap_class(value, f"{module_name}.{attribute}")
                elif isinstance(value, types.FunctionType):
                    setattr(module, attribute, self.wrap_function(value, f"{module_name}.{attribute}"))

    def bound(self, namespace: dict) -> list[str]:
        """The notebook's names bound to the answer key: "name (what)"."""
        found = []
        for name, value in list(namespace.items()):
            if _HISTORY.fullmatch(name):
                continue
            target = value
            for _ in range(8):  # through functools.partial, and wrappers that say what they wrap (functools.wraps)
                if id(target) in self.objects:
                    break
                inner = target.func if isinstance(target, functools.partial) else \
                    getattr(target, "__wrapped__", None) if isinstance(target, types.FunctionType) else None
                if inner is None:
                    break
                target = inner
            known = self.objects.get(id(target))
            if known is not None and known[0] is target:
                found.append(f"{name} ({known[1]})")
            elif isinstance(target, type) and not str(target.__module__).startswith("helpers") and \
                    any(issubclass(target, cls) for cls in self.classes):
                base = next(self.objects[id(c)][1] for c in target.__mro__ if id(c) in self.objects)
                found.append(f"{name} (a subclass of {base})")
        return found

    def problems(self, namespace: dict) -> list[str]:
        """What the probe reports, and forgets the calls it reported."""
        found = [f"the notebook's code called the course's answer key ({name})" for name in self.called[:3]]
        found += [f"the name {binding} is the course's answer key" for binding in self.bound(namespace)[:3]]
        self.called.clear()
        return found


def _look_like(wrapper, original) -> None:
    """Give ``wrapper`` the name, documentation and signature of ``original`` (not ``__wrapped__``: that would hand
    the original to whoever asks)."""
    import inspect

    for attribute in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__"):
        setattr(wrapper, attribute, getattr(original, attribute, None))
    try:
        wrapper.__signature__ = inspect.signature(original)
    except (TypeError, ValueError):
        pass


def sign(secret: str, payload: str) -> str:
    """The probe's signature of its answer (the grader computes the same to verify it)."""
    import hashlib
    import hmac

    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


# ------------------------------------------------------------------ the grader's calls of the learner's functions
# (coursetools.grading.verify runs a graded cell's checks in the grader's process; each call of a learner's
# function comes here, through IPython's user_expressions, and what it returns goes back as torch.save's bytes)


def pack(obj: object) -> str:
    """``obj`` as text: ``torch.save``'s bytes in base64."""
    import base64
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack_trusted(text: str) -> object:
    """What :func:`pack` made, from the grader (never from the kernel: the grader loads that with weights_only)."""
    import base64
    import io

    import torch

    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=False)


def _objects(values: object) -> list:
    """Every object of ``values`` whose changes a check may look at, each once, in an order both sides share: tensors,
    NumPy arrays, models (and their parameters and buffers), and the lists, dicts and tuples that hold them.
    ``torch.save`` keeps which objects are the same one, so the grader's arguments and the kernel's copies of them
    give the same list."""
    import torch

    found: list = []
    seen: set[int] = set()

    def visit(value: object, depth: int) -> None:
        if id(value) in seen or depth > 6:
            return
        if isinstance(value, torch.nn.Module):
            seen.add(id(value))
            found.append(value)
            for _, tensor in _held(value):
                visit(tensor, depth + 1)
        elif isinstance(value, torch.Tensor) or _is_array(value):
            seen.add(id(value))
            found.append(value)
        elif isinstance(value, (list, tuple, dict)):
            seen.add(id(value))
            found.append(value)
            for item in (value.values() if isinstance(value, dict) else value):
                visit(item, depth + 1)

    visit(values, 0)
    return found


def _held(model: object) -> list:
    """A model's parameters and buffers, each ``(name, tensor)``, shared ones under every name they have."""
    return [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]


def _modes(model: object) -> dict[str, bool]:
    """Whether each submodule of a model (under every name it has) is in training mode."""
    return {name: module.training for name, module in model.named_modules(remove_duplicate=False)}


def _is_array(value: object) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _tensors_in(values: object) -> list:
    """Every tensor in ``values`` (:func:`_objects`): through lists, tuples and dicts, and a model's parameters."""
    import torch

    return [value for value in _objects(values) if isinstance(value, torch.Tensor)]


def gradients(values: object) -> list:
    """The ``.grad`` of every tensor in ``values`` (:func:`_tensors_in`), which ``torch.save`` leaves out: a
    gradient left on an argument is part of what a check hands the function."""
    return [tensor.grad for tensor in _tensors_in(values)]


def give_gradients(values: object, grads: list) -> None:
    """Put back on the tensors of ``values`` the gradients :func:`gradients` found on the grader's side."""
    for tensor, grad in zip(_tensors_in(values), grads):
        if grad is not None and tensor.grad is None:
            tensor.grad = grad


def _looks(value: object) -> object:
    """What a call may change of one object of :func:`_objects` (compared before and after the call): a tensor's
    version counter, flags and gradient; an array's values; which objects a container holds; a model's modes."""
    import torch

    if isinstance(value, torch.Tensor):
        grad = value.grad if value.is_leaf else None
        # the version counter misses writes through .data = ..., set_ and a NumPy view: the values are kept too
        kept = value.detach().clone() if value.layout == torch.strided and value.device.type != "meta" else None
        return ("tensor", (value._version, value.data_ptr() if kept is not None else 0, value.shape, value.dtype),
                kept, value.requires_grad, (id(grad), None if grad is None else grad._version))
    if _is_array(value):
        return value.copy()
    if isinstance(value, torch.nn.Module):
        return _modes(value), [(name, id(tensor)) for name, tensor in _held(value)]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return [(key, id(item)) for key, item in items]


def _same_look(before: object, after: object) -> bool:
    """Whether an array or a container or model looks as it did (a tensor's look is compared in :func:`changes`)."""
    import numpy as np

    if isinstance(before, np.ndarray):
        return before.shape == after.shape and before.dtype == after.dtype and np.array_equal(before, after, equal_nan=True)
    return before == after


def _same_values(before: object, after: object) -> bool:
    """Whether two copies of a tensor hold the same values (NaN where NaN was)."""
    import torch

    if before is None or after is None:
        return before is after
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if torch.equal(before, after):
        return True
    return (before.is_floating_point() or before.is_complex()) and bool(
        ((before == after) | (before.isnan() & after.isnan())).all())


def _as_sent(value: object, index: dict[int, int]) -> tuple:
    """An object a changed container or model now holds: ``("ref", i)``, the i-th object of the call's arguments, or
    ``("new", value)``."""
    return ("ref", index[id(value)]) if id(value) in index else ("new", value)


def changes(objects: list, before: list) -> list:
    """What the call changed in the objects of its arguments (:func:`_objects`, :func:`_looks` before the call), as
    plain data the grader can load and replay on its own arguments (:func:`verify.replay`)."""
    import torch

    index = {id(value): i for i, value in enumerate(objects)}
    found = []
    for i, (value, was) in enumerate(zip(objects, before)):
        now = _looks(value)
        if isinstance(value, torch.Tensor):
            same_values = was[1] == now[1] and _same_values(was[2], now[2])
            if same_values and was[3:] == now[3:]:
                continue
            # the values only if they changed, the gradient only if it changed: "same" leaves the grader's own
            grad = (value.grad if value.is_leaf else None) if was[4] != now[4] else "same"
            found.append((i, "tensor", (None if same_values else value.detach(), value.requires_grad, grad)))
        elif _same_look(was, now):
            continue
        elif _is_array(value):
            found.append((i, "array", value))
        elif isinstance(value, torch.nn.Module):
            found.append((i, "module", (_modes(value), [(name, _as_sent(tensor, index)) for name, tensor in _held(value)])))
        elif isinstance(value, dict):
            found.append((i, "dict", [(key, _as_sent(item, index)) for key, item in value.items()]))
        elif isinstance(value, list):
            found.append((i, "list", [_as_sent(item, index) for item in value]))
    return found


def _models(value: object) -> list:
    """The models in a result: itself, or inside its lists, tuples and dicts (each once)."""
    import torch

    return [found for found in _objects(value) if isinstance(found, torch.nn.Module)]


def _own_classes(models: list) -> list[str]:
    """The classes, other than ``torch.nn``'s own, of the layers of ``models`` (:func:`_models`): a model of the
    notebook's own ``nn.Module`` class cannot come back to the grader."""
    import torch

    return list(dict.fromkeys(type(layer).__qualname__ for model in models for layer in model.modules()
                              if getattr(torch.nn, type(layer).__name__, None) is not type(layer)))[:10]


# The layers and tensors of the models returned so far in the grader's run of one cell ("run": its token), held
# so that their ids stay theirs: a model that comes back reuses none of them on the grader's side
_RETURNED: dict[str, object] = {"run": None, "held": [], "ids": set()}


def _shares_earlier(models: list, run: object) -> bool:
    """Whether one of ``models`` (:func:`_models`, from one result) holds a layer or tensor of a model an earlier call
    of the same run returned (a cached model, a shared stem): each result loads afresh in the grader, where they
    would not be shared."""
    if run is None or not isinstance(run, str):
        return False
    if _RETURNED["run"] != run:
        _RETURNED.update(run=run, held=[], ids=set())
    if not models:
        return False
    parts = [part for model in models for part in [*model.modules(), *(t for _, t in _held(model))]]
    shared = any(id(part) in _RETURNED["ids"] for part in parts)
    _RETURNED["held"].append(parts)
    _RETURNED["ids"].update(id(part) for part in parts)
    return shared


def _parameters(fn: object) -> list:
    """Each parameter of ``fn`` as (name, kind, has a default): the grader's messages then name an argument as the
    kernel's do (`x`, not "argument 1")."""
    import inspect

    try:
        return [(p.name, int(p.kind), p.default is not p.empty) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return []


def call_in_kernel(namespace: dict, request: str) -> str:
    """Make one call the grader asked for: the function named in ``request``, from the notebook's ``namespace``.

    The call sees the grader's random state, default dtype and grad mode, as the check had them when it made
    the call; the kernel's own are put back afterwards, and the random state the call left is sent back with
    the result, so that the check's next draws follow on as they would in one process.
    """
    import torch

    asked = unpack_trusted(request)
    if asked.get("parameters_only"):  # the grader's check names the arguments as the kernel's does
        return pack({"parameters": _parameters(namespace.get(asked["name"]))})
    give_gradients((asked["args"], asked["kwargs"]), asked.get("grads", []))
    objects = _objects((asked["args"], asked["kwargs"]))
    before = [_looks(value) for value in objects]
    saved = torch.get_rng_state(), torch.get_default_dtype(), torch.is_grad_enabled()
    reply: dict[str, object] = {}
    try:
        torch.default_generator.set_state(asked["rng"])
        torch.set_default_dtype(asked["dtype"])
        torch.set_grad_enabled(asked["grad"])
        try:
            reply["result"] = namespace[asked["name"]](*asked["args"], **asked["kwargs"])
        except BaseException as error:  # the learner's function raised: the check judges that, as in the kernel
            reply = {"error": type(error).__name__, "message": str(error)[:2000]}
        models = _models(reply.get("result"))
        own = _own_classes(models)
        if own:  # the grader would not load them (only torch.nn's layers): it leaves this cell to the kernel's run
            reply = {"own_classes": own}
        elif _shares_earlier(models, asked.get("run")):
            reply = {"shares_earlier": True}
        reply["rng"] = torch.get_rng_state()
        # what the call changed in its arguments goes back too: the check looks at its own copies afterwards
        reply["changed"] = changes(objects, before)
    finally:
        torch.default_generator.set_state(saved[0])
        torch.set_default_dtype(saved[1])
        torch.set_grad_enabled(saved[2])
    try:
        return pack(reply)
    except Exception as error:
        try:
            pack(reply.get("changed"))
        except Exception:
            return pack({"unsendable": f"what it left in its arguments ({type(error).__name__})", "rng": reply["rng"]})
        return pack({"unsendable": f"{type(reply.get('result')).__name__} ({type(error).__name__})",
                     "rng": reply["rng"]})


def _guard_kernel() -> None:
    """Record what the checks rely on and install the probe the grader calls after graded cells."""
    import importlib

    settings = json.loads(os.environ.pop(ENV_GUARD, "{}"))
    secret = ""
    if settings.get("secret_file"):
        path = Path(settings["secret_file"])
        secret = path.read_text()
        path.unlink()
    watched: dict[str, object] = {"builtins": builtins}
    # IPython puts these into builtins only while a cell runs, and ipykernel swaps input() for one that asks the
    # frontend (the guard also looks while a cell runs: helpers.checks.call)
    builtins_kept = [n for n in _attributes(builtins) if n not in ("get_ipython", "exit", "quit", "display", "input")]
    for name in ["torch", "torch.nn.functional", "numpy", *settings.get("modules", [])]:
        try:
            watched[name] = importlib.import_module(name)
        except Exception:  # the locked cell will report it in its own words
            continue
    from_notebook = _NotebookCode()
    handed_now = getattr(sys.modules.get("helpers.checks"), "_HANDED", {})
    answer_key = None
    if "helpers" in sys.modules:  # before what the guard records: the wrappers are what must stay in place
        answer_key = _AnswerKey(getattr(sys.modules.get("helpers.checks"), "handed", lambda obj: False),
                                from_notebook)
        answer_key.install()
    watched.update({name: module for name, module in sys.modules.items() if name.startswith("helpers")})
    import torch

    watched["torch.Tensor"] = torch.Tensor
    # every attribute of the course's modules and of builtins; the named ones of torch and numpy; none of
    # other modules (matplotlib rewires its own functions once a backend loads), whose identity is still kept
    chosen = {name: WATCHED_ATTRIBUTES.get(name, builtins_kept if obj is builtins else
                                           None if name.startswith("helpers") or name == "torch.Tensor" else [])
              for name, obj in watched.items()}
    recorded = {name: (obj, _attributes(obj, chosen[name])) for name, obj in watched.items()}
    codes = {name: _codes(obj, attributes) for name, (obj, attributes) in recorded.items()}
    shell = __import__("IPython").get_ipython()
    # whether the last cell raised, as IPython's run_cell found it (the kernel's reply can be rewritten)
    outcome: dict[str, object] = {"success": None, "error": None}

    def record_outcome(result) -> None:
        error = result.error_in_exec or result.error_before_exec
        outcome.update(success=bool(result.success), error=type(error).__name__ if error is not None else None)

    if shell is not None:
        shell.events.register("post_run_cell", record_outcome)
    hooks = _hooks(shell, from_notebook)
    tracing = _tracing()
    # names the locked cells bind: {name: (module, attribute or None)}
    bound = {name: (module, attribute) for name, (module, attribute) in settings.get("names", {}).items()}

    operators = _operator_overrides()

    def counts_while_checking(module: str, recorded_value: object, value: object) -> bool:
        """While a check runs, the course's own checks patch things (``mock.patch`` of ``torch.load``, of their
        own helpers, of tensor methods): what counts then is a change to the framework or the answer key, to a
        framework function a lesson's check module imported (``expect_tensor``), or a replacement the notebook's
        own code wrote."""
        if module == "helpers.checks" or module.startswith("helpers.reference"):
            return True
        if module.startswith("helpers.checks.") and getattr(recorded_value, "__module__", None) == "helpers.checks":
            return True
        return from_notebook.defines(value)

    def replaced(while_checking: bool = False) -> list[str]:
        """What was replaced, or changed in place, of what the checks rely on."""
        found = []
        for name, (obj, attributes) in recorded.items():
            if name in sys.modules and sys.modules[name] is not obj:
                found.append(f"module {name} was replaced in sys.modules")
            now = vars(obj)
            changed = sorted(a for a, value in attributes.items() if not _same(now.get(a), value) and (
                not while_checking or counts_while_checking(name, value, now.get(a))))
            if changed:
                found.append(f"{name}.{', '.join(changed[:3])} replaced")
            swapped = sorted(a for a, code in codes[name].items() if not _same_parts(_now_code(obj, a), code) and (
                not while_checking or ("." not in a and now.get(a) is attributes.get(a))))
            if swapped:
                found.append(f"{name}.{', '.join(swapped[:3])}: changed in place (its code, defaults or closure)")
        return found

    # What the checks' framework saw replaced right after the learner's code ran (helpers.checks.call), while the
    # check still ran: code that puts things back before the cell ends is seen there.
    seen_while_checking: list[str] = []

    def check_after_learner_code() -> None:
        try:
            seen_while_checking.extend(p for p in replaced(while_checking=True) if p not in seen_while_checking)
        except Exception:  # never let the look break a check
            pass

    after_learner_code = getattr(sys.modules.get("helpers.checks"), "_AFTER_LEARNER_CODE", None)
    if after_learner_code is not None:
        after_learner_code.append(check_after_learner_code)

    # the grader calls the probe through IPython's user_expressions, which evaluates the call as "<string>"
    asked_by_grader = getattr(getattr(type(shell), "user_expressions", None), "__code__", None)

    def probe(nonce: str = "") -> str:
        problems = []
        asker = sys._getframe(1)
        if asked_by_grader is not None and not (asker.f_code.co_filename == "<string>" and asker.f_back is not None
                                                and asker.f_back.f_code is asked_by_grader):
            # a name of the notebook's, or a replaced builtin, stood in front of the probe: it could have undone
            # its changes while the probe looked
            problems.append(f"the grader's probe was called by the notebook's code ({asker.f_code.co_name}), not "
                            f"by the grader: something named {PROBE} stands in front of it")
        if handed_now:  # nothing is handed over between cells: a check empties it when it ends
            problems.append("the course's list of what checks hand the learner's code was changed")
        problems += [p for p in [*seen_while_checking, *replaced()] if p not in problems]
        seen_while_checking.clear()
        if after_learner_code is not None and check_after_learner_code not in after_learner_code:
            problems.append("the grader's look after each call of the learner's code was removed")
        overridden = sorted(_operator_overrides() - operators)
        if overridden:  # torch.library.Library("aten", "IMPL").impl("allclose", ...): PyTorch's own operator replaced
            problems.append(f"PyTorch's operator {', '.join(overridden[:3])} was given another implementation")
        traced = sorted(k for k, v in _tracing().items() if v is not tracing[k])
        if traced:
            problems.append(f"{', '.join(traced)} installed a tracing or profiling function")
        overriding = sorted(cls.__qualname__ for cls in _subclasses(torch.Tensor)
                            if "__torch_function__" in vars(cls) and (
                                cls.__module__ == "__main__" or from_notebook.defines(vars(cls)["__torch_function__"])))
        if overriding:  # a notebook's tensor type that decides what comparisons with it return
            problems.append(f"tensor subclass {', '.join(overriding[:3])} overrides __torch_function__")
        modes = sorted(type(mode).__qualname__ for mode in _active_modes()
                       if from_notebook.defines(getattr(type(mode), "__torch_function__", None))
                       or from_notebook.defines(getattr(type(mode), "__torch_dispatch__", None)))
        if modes:  # entered in a cell and left on: it sees every torch call the checks make
            problems.append(f"the notebook's torch mode {', '.join(modes[:3])} is active after the cell")
        now = _hooks(shell, from_notebook)
        changed = sorted(k for k in hooks.keys() | now.keys() if hooks.get(k) != now.get(k))
        if changed:
            problems.append(f"IPython's {', '.join(changed[:3])} changed")
        namespace = shell.user_ns if shell is not None else {}
        for name, (module, attribute) in bound.items():
            if name in namespace and module in recorded:
                obj = recorded[module][0]
                expected = obj if attribute is None else vars(obj).get(attribute)
                if expected is not None and not _same(namespace[name], expected):
                    problems.append(f"the name {name} (set by a locked cell) was rebound")
        if answer_key is not None:
            problems += answer_key.problems(namespace)
        payload = json.dumps({"nonce": nonce, "success": outcome["success"], "error": outcome["error"],
                              "problems": problems}, sort_keys=True)
        return json.dumps({"payload": payload, "signature": sign(secret, payload)})

    setattr(builtins, PROBE, probe)
    # the grader's own run of a graded cell calls the learner's functions here (coursetools.grading.verify): what a
    # call returns is judged in the grader's process, so a replaced CALL only changes what the function answers
    setattr(builtins, CALL, lambda request: call_in_kernel(shell.user_ns if shell is not None else {}, request))


def _hooks(shell, origin: "_NotebookCode") -> dict[str, object]:
    """What IPython runs around a cell: transformers, the run methods, exception handlers, event callbacks."""
    if shell is None:
        return {}
    methods = ["run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback", "_showtraceback",
               "transform_cell", "transform_ast", "set_custom_exc", "CustomTB", "user_expressions", "ev", "ex"]
    found: dict[str, object] = {
        "input_transformers_cleanup": [id(f) for f in shell.input_transformers_cleanup],
        "input_transformers_post": [id(f) for f in shell.input_transformers_post],
        "ast_transformers": [id(f) for f in shell.ast_transformers],
        "custom_exceptions": shell.custom_exceptions, "displayhook": id(shell.displayhook),
        "display_pub": id(shell.display_pub)}
    found.update({f"shell.{m}": (id(vars(shell).get(m)), id(getattr(type(shell), m, None))) for m in methods})
    found.update({f"events.{event}": [id(f) for f in callbacks if not origin.written_by(f, "library")]
                  for event, callbacks in shell.events.callbacks.items()})
    # the kernel's message layer: what sends the error, the reply and the probe's answer to the grader
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    for label, obj, names in (("kernel", kernel, ["do_execute", "execute_request", "send_response", "_publish_status"]),
                              ("session", session, ["send", "serialize", "sign", "msg", "feed_identities"]),
                              ("iopub", getattr(kernel, "iopub_socket", None), ["send", "send_multipart"]),
                              ("shell_stream", getattr(kernel, "shell_stream", None), ["send", "send_multipart"])):
        if obj is not None:
            found.update({f"{label}.{m}": (id(vars(obj).get(m)) if hasattr(obj, "__dict__") else None,
                                           id(getattr(type(obj), m, None))) for m in names})
            found[f"{label}.class"] = id(type(obj))
    for label, obj in (("kernel", kernel), ("session", session)):
        if obj is not None:
            found[f"{label}.is"] = id(obj)
    return found


if __name__ == "__main__":
    if sys.argv[1:2] == [CAP_PROCESSES]:
        cap_processes(sys.argv[2:])
    else:
        launch(sys.argv[1:])
