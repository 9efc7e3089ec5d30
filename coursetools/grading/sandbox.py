"""The kernel an autograded notebook runs in: bubblewrap's sandbox, limits, and a guard on the checks.

nbgrader's autograde starts this course's grading kernelspec (:data:`KERNEL_NAME`,
installed by :func:`install_kernelspec`), whose command runs this file (``python -I sandbox.py``).
That launcher, still outside the sandbox:

1. sets the kernel's resource limits (memory: the data segment, so that PyTorch's
   large read-only library mappings do not count; the size of any one file it writes);
2. starts ``bwrap`` (Debian's ``bubblewrap``) around an ordinary IPython kernel, with
   - a new process namespace (``--unshare-pid``, ``--die-with-parent``): nothing the
     notebook starts outlives the kernel, and the grader's processes are not visible,
     so they cannot be signalled;
   - no network (``--unshare-net``: only a loopback of its own, which the kernel reaches
     the grader through jupyter_client's ``ipc`` transport, Unix sockets in a folder
     both sides see);
   - a file system that holds only what a kernel needs, read-only (the system, Python,
     the virtual environment, ``helpers/``, the course data), a private ``/tmp`` of
     bounded size, and the submission's autograded folder, the only writable place
     that outlives the kernel. The course's ``solutions/``, ``grading/`` (gradebook,
     other learners' work) and ``.git`` are not there at all;
   - no capabilities (``--cap-drop ALL``), even when grading runs as root.
   Without ``bwrap`` the same kernel runs unsandboxed, with the same limits and guard.
3. runs :func:`_guard_kernel` in the kernel before any of the notebook's cells.

The guard records what the checks rely on (the functions of the modules the locked
cells import, torch's comparison functions, builtins, IPython's input and AST
transformers and hooks) and answers the grader's probe after every graded cell,
through a ``user_expressions`` request that IPython evaluates without passing it
through the learner's input transformers. Its answer carries a secret it read (and
deleted) before the notebook ran, so a replaced probe cannot answer for it. Code that
digs the secret out of the kernel (frames, closures, the garbage collector) is what
:mod:`coursetools.grading.scan` flags: the guard raises the bar; the scan and a person close it.
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import shutil
import subprocess
import sys
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
DEFAULT_MEMORY = 2 * 2**30
DEFAULT_FILE_SIZE = 256 * 2**20
DEFAULT_TMP_SIZE = 512 * 2**20


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


def _readable_paths() -> list[Path]:
    """What the kernel needs to see, read-only: the system, Python, the environment, helpers, the guard, the data."""
    # Of the course's code, only the learner package (helpers/, beside this package in the same checkout or
    # site-packages) and this one file, which the kernel runs as its guard: none of the grading tooling.
    this_file = Path(__file__).resolve()
    paths = [Path("/usr"), Path("/etc"), Path("/sys"), Path(sys.prefix), Path(sys.base_prefix),
             Path(sys.executable).resolve().parent.parent, this_file.parents[2] / "helpers", this_file]
    for variable in ("COURSE_DATA", "PYTHONPATH"):
        paths += [Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]
    found = []
    for path in paths:
        if path.is_absolute() and path.exists() and path.resolve() not in found:
            found.append(path.resolve())
    # a folder inside another one already listed needs no mount of its own
    return sorted(p for p in found if not any(q != p and p.is_relative_to(q) for q in found))


def bwrap_command(workdir: Path, private: Path, tmp_size: int) -> list[str]:
    """bwrap's arguments: ``workdir`` and ``private`` (the connection folder) writable, nothing else kept."""
    # the machine's own hostname is kept: /etc/hosts resolves it to loopback, which torchrun's rendezvous needs
    command = [bwrap(), "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL",
               "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_size), "--tmpfs", "/tmp"]
    for name in ("bin", "lib", "lib64", "sbin"):
        link = Path("/") / name
        if link.is_symlink():
            command += ["--symlink", os.readlink(link), str(link)]
        elif link.exists():
            command += ["--ro-bind", str(link), str(link)]
    for path in _readable_paths():
        command += ["--ro-bind", str(path), str(path)]
    for path in (workdir, private):
        command += ["--bind", str(path), str(path)]
    # ipykernel watches JPY_PARENT_PID, which a new process namespace hides: --die-with-parent does that job
    command += ["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--unsetenv", "JPY_PARENT_PID",
                "--chdir", str(workdir)]
    return command


def launch(argv: list[str]) -> None:
    """The kernelspec's command: limits, then the kernel, inside bwrap when it is available. Does not return."""
    connection_file = Path(argv[argv.index("-f") + 1]).resolve()
    memory = int(os.environ.get(ENV_MEMORY, DEFAULT_MEMORY))
    file_size = int(os.environ.get(ENV_FILE_SIZE, DEFAULT_FILE_SIZE))
    tmp_size = int(os.environ.get(ENV_TMP_SIZE, DEFAULT_TMP_SIZE))
    # RLIMIT_DATA counts what the kernel allocates (heap, tensors), not the libraries it maps
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    # the guard is loaded by path, under a name of its own, so it does not depend on `helpers` importing
    guard = (f"__import__('runpy').run_path({str(Path(__file__).resolve())!r}, run_name='_course_guard')"
             "['_guard_kernel']()")
    kernel = [sys.executable, "-m", "ipykernel_launcher", *argv, f"--IPKernelApp.exec_lines={guard}"]
    # the kernel's own terminal output (its banner, a learner's os.write(2, ...)) stays off the grader's
    log = os.open(connection_file.parent / "kernel.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if sandboxed():
        kernel = bwrap_command(Path.cwd().resolve(), connection_file.parent, tmp_size) + ["--", *kernel]
    os.execv(kernel[0], kernel)


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
    """The attributes of ``obj`` (a module or class) that the checks may call: all of them, or ``names``."""
    namespace = vars(obj)
    if names is not None:
        return {name: namespace[name] for name in names if name in namespace}
    return {name: value for name, value in list(namespace.items())
            if callable(value) or isinstance(value, (staticmethod, classmethod, property, type(sys)))}


def _same(a: object, b: object) -> bool:
    # a bound method (builtins.get_ipython) is a new object each time it is looked up
    return a is b or (hasattr(a, "__self__") and hasattr(a, "__func__") and a == b)


def _library_code(function: object) -> bool:
    """Whether ``function`` was defined in an installed library (not in a notebook cell)."""
    code = getattr(function, "__code__", None) or getattr(getattr(function, "__func__", None), "__code__", None)
    if code is None:
        return False
    prefixes = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}
    return any(str(Path(code.co_filename).resolve()).startswith(p) for p in prefixes)


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
    # IPython puts these into builtins only while a cell runs
    builtins_kept = [n for n in _attributes(builtins) if n not in ("get_ipython", "exit", "quit", "display")]
    for name in ["torch", "torch.nn.functional", "numpy", *settings.get("modules", [])]:
        try:
            watched[name] = importlib.import_module(name)
        except Exception:  # the locked cell will report it in its own words
            continue
    watched.update({name: module for name, module in sys.modules.items() if name.startswith("helpers")})
    import torch

    watched["torch.Tensor"] = torch.Tensor
    # every attribute of the course's modules and of builtins; the named ones of torch and numpy; none of
    # other modules (matplotlib rewires its own functions once a backend loads), whose identity is still kept
    chosen = {name: WATCHED_ATTRIBUTES.get(name, builtins_kept if obj is builtins else
                                           None if name.startswith("helpers") or name == "torch.Tensor" else [])
              for name, obj in watched.items()}
    recorded = {name: (obj, _attributes(obj, chosen[name])) for name, obj in watched.items()}
    shell = __import__("IPython").get_ipython()
    hooks = _hooks(shell)
    # names the locked cells bind: {name: (module, attribute or None)}
    bound = {name: (module, attribute) for name, (module, attribute) in settings.get("names", {}).items()}

    def probe() -> str:
        problems = []
        for name, (obj, attributes) in recorded.items():
            if name in sys.modules and sys.modules[name] is not obj:
                problems.append(f"module {name} was replaced in sys.modules")
            now = vars(obj)
            changed = sorted(a for a, value in attributes.items() if not _same(now.get(a), value))
            if changed:
                problems.append(f"{name}.{', '.join(changed[:3])} replaced")
        now = _hooks(shell)
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
        return json.dumps({"secret": secret, "problems": problems})

    setattr(builtins, PROBE, probe)


def _hooks(shell) -> dict[str, object]:
    """What IPython runs around a cell: transformers, the run methods, exception handlers, event callbacks."""
    if shell is None:
        return {}
    methods = ["run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback", "_showtraceback",
               "transform_cell", "set_custom_exc", "CustomTB"]
    found: dict[str, object] = {
        "input_transformers_cleanup": [id(f) for f in shell.input_transformers_cleanup],
        "input_transformers_post": [id(f) for f in shell.input_transformers_post],
        "ast_transformers": [id(f) for f in shell.ast_transformers],
        "custom_exceptions": shell.custom_exceptions, "displayhook": id(shell.displayhook),
        "display_pub": id(shell.display_pub)}
    found.update({f"shell.{m}": (id(vars(shell).get(m)), id(getattr(type(shell), m, None))) for m in methods})
    found.update({f"events.{event}": [id(f) for f in callbacks if not _library_code(f)]
                  for event, callbacks in shell.events.callbacks.items()})
    return found


if __name__ == "__main__":
    launch(sys.argv[1:])
