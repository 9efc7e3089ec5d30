"""The grader's own run of a graded cell: the check in the grader's process, the learner's functions in the kernel.

A graded cell is a call of a check on the learner's functions (``check.check_share_numpy(share_numpy,
inputs=[...])``). The kernel runs it first, as the learner's self-check does; whatever the notebook did to
the kernel (patched the check, swapped a comparison's code, rewrote the kernel's messages) can bend that
run. So the grader runs the same cell again in its own process, where the notebook's code cannot reach:
the check module, the answer key and every comparison are the grader's, and each name the learner defined
is a :class:`LearnerFunction`, whose calls are made in the learner's kernel (:func:`call_in_kernel`, the
kernel side, in :mod:`sandbox`). Arguments go there with ``torch.save``; what the function returns comes back through
``torch.load(weights_only=True)``, so only tensors (exact ``torch.Tensor`` or PyTorch's own types), numbers,
strings, NumPy arrays and containers of them can come back, never an object with code of its own. What the call
changed in its arguments comes back the same way (:func:`sandbox.changes`) and is made to the check's own
arguments (:func:`replay`), which are put back when the cell is done.

A cell counts only where both runs pass.

Not every check can run this way: some look at what only the kernel has (a view sharing the caller's
memory, calls recorded by stand-ins the check hands over, processes started with the learner's function, a
file the check wrote), or hand the learner's function something that cannot be sent. Which cells can is decided by
the course, never by the learner: the grader first runs the cell with the answer key's function of the
same name in the learner's place, called in a Python process of its own through the same round trip
(:func:`runs_in_grader`). Where that run passes, the cell is verified for every learner; elsewhere only the
kernel's run counts, as before, with the kernel's guard watching it. An exercise that is a class, or whose
answer returns nothing or a model made from what it is given, is not tried at all (:func:`_returns_no_plain_data`).

A model comes back when it is built of ``torch.nn``'s own layers (:data:`TORCH_LAYERS`); the check then runs it in the
grader's process. A learner's model built with a class of the notebook's own cannot: for an exercise whose answer
returns a model, that cell is left to the kernel's run, as a cell never tried is (:attr:`GraderRun.kernel_only`),
and it is no sign of tampering.
"""

from __future__ import annotations

import ast
import atexit
import base64
import builtins
import contextlib
import importlib
import inspect
import io
import json
import os
import pickle
import secrets
import subprocess
import sys
import tempfile
import typing
from typing import Any, Callable

import torch

from coursetools.grading import sandbox

# The largest reply (base64 bytes) the grader accepts from one call; more is "cannot be brought back".
REPLY_LIMIT = 256 * 2**20


class NotVerifiable(Exception):
    """A call the grader cannot make or whose result it cannot bring back: the cell is not verified."""


def _safe_globals() -> list:
    """What ``torch.load(weights_only=True)`` may rebuild beyond its defaults: NumPy arrays and scalars (of any
    plain dtype), slices, torch's named-tuple results (``torch.max(x, dim)``) and PyTorch's own layers
    (``torch.nn``'s classes, so a model built of them comes back: :func:`_check_model`). None of them runs code
    of the notebook's."""
    import numpy as np

    multiarray = getattr(np, "_core", None) or np.core
    dtypes = {type(np.dtype(t)) for t in set(np.sctypeDict.values()) if t is not np.object_}
    returns = [v for v in vars(torch.return_types).values() if isinstance(v, type) and issubclass(v, tuple)]
    return [multiarray.multiarray._reconstruct, multiarray.multiarray.scalar, np.ndarray, np.dtype, *dtypes,
            slice, *returns, *_LAYER_STAND_INS]


# PyTorch's own layers, containers and losses: a model built only of these can come back from the kernel
TORCH_LAYERS = frozenset(v for v in vars(torch.nn).values() if isinstance(v, type) and issubclass(v, torch.nn.Module))


class _EmptyLayer:
    """Stands in for one of :data:`TORCH_LAYERS` while the kernel's answer loads. Pickle stores a model as empty
    layers whose state follows (NEWOBJ, then BUILD): that is all this allows. Calling the class itself (REDUCE)
    would run its constructor with whatever sizes the kernel wrote (``nn.Linear(10**5, 10**5)``: 40 GB in the
    grader's process), so a call is refused."""

    def __init__(self, layer: type) -> None:
        self.layer = layer

    def __new__(cls, *args: Any) -> Any:  # the loader's NEWOBJ calls stand_in.__new__(stand_in)
        if isinstance(cls, _EmptyLayer):
            return object.__new__(cls.layer)
        return object.__new__(cls)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise pickle.UnpicklingError(f"the answer calls {self.layer.__name__}(...) while loading, not only rebuilds it")

    # the loader fills an object's state (BUILD) only if its type is among the allowed: the layer is, through this
    def __eq__(self, other: object) -> bool:
        return other is self or other is self.layer

    __hash__ = object.__hash__


_LAYER_STAND_INS = [(_EmptyLayer(layer), f"{layer.__module__}.{layer.__qualname__}") for layer in TORCH_LAYERS]


def _check_model(value: Any) -> None:
    """Refuse a model that came back with more than layers and tensors: a hook, or an attribute standing in for a
    method (``forward``), would make it behave otherwise than its classes say. Raises ValueError."""
    for model in sandbox._models(value):
        for name, module in model.named_modules(remove_duplicate=False):
            for key, held in vars(module).items():
                if key.endswith("hooks") and held:
                    raise ValueError(f"a layer ({name or 'the model'}) came back with {key}")
                if callable(held) and not isinstance(held, (torch.nn.Module, torch.Tensor)):
                    raise ValueError(f"a layer ({name or 'the model'}) came back with a callable {key}")


def unpack(text: str) -> Any:
    """What the kernel sent (:func:`sandbox.pack`), loaded with ``weights_only=True``: plain data only."""
    buffer = io.BytesIO(base64.b64decode(text))
    with torch.serialization.safe_globals(_safe_globals()):
        loaded = torch.load(buffer, weights_only=True)
    _check_model(loaded)
    return loaded


# ------------------------------------------------------------------ the grader's side


def _raised(kind: str, message: str) -> BaseException:
    """The learner's exception, rebuilt as a builtin of the same name where there is one (a check may ask for a
    ValueError), else as an Exception of that name."""
    found = getattr(builtins, kind, None)
    if isinstance(found, type) and issubclass(found, Exception):
        with contextlib.suppress(Exception):
            return found(message)
    return type(kind, (Exception,), {})(message)


_DEFAULT = object()  # stands for a default value of the learner's, which stays in the kernel


class LearnerFunction:
    """A function of the learner's notebook, as the grader's copy of a check sees it: each call runs in the kernel
    (or, for :func:`runs_in_grader`, through the same round trip to the answer key's function)."""

    def __init__(self, name: str, send: Callable[[str], str], run: "GraderRun", returns_model: bool = False) -> None:
        self.__name__ = self.__qualname__ = name
        self._send, self._run = send, run
        self._returns_model = returns_model  # the answer key's returns a model: one of the notebook's own may come back
        self._signature: inspect.Signature | bool | None = None  # not asked yet; False: asked, none to be had
        self._pid = os.getpid()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() != self._pid:  # a process the check forked (lesson 08's groups): it must not use the
            # grader's connection to the kernel, and what the function does there is the kernel's to see
            raise self._run.cannot(f"the check calls {self.__name__} in processes of its own")
        elsewhere = self._run.kernel_would_differ([*args, *kwargs.values()])
        if elsewhere:
            raise self._run.cannot(f"{elsewhere}, which {self.__name__} would not see in the kernel")
        try:
            request = sandbox.pack({"name": self.__name__, "args": args, "kwargs": kwargs, "run": self._run.token,
                                    "rng": torch.get_rng_state(),
                                    "dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
                                    "grads": sandbox.gradients((args, kwargs))})
        except Exception as error:
            raise self._run.cannot(f"the check hands {self.__name__} something that cannot be sent "
                                   f"({type(error).__name__})")
        try:
            answer = self._send(request)
        except NotVerifiable as error:
            raise self._run.cannot(str(error))
        if len(answer) > REPLY_LIMIT:
            raise self._run.cannot(f"what {self.__name__} returned is over {REPLY_LIMIT // 2**20} MB")
        try:
            reply = unpack(answer)
        except Exception as error:
            raise self._run.cannot(f"what {self.__name__} returned cannot be brought back as plain data "
                                   f"({str(error).splitlines()[-3] if str(error).count(chr(10)) > 2 else error})")
        if not isinstance(reply, dict) or not isinstance(reply.get("rng"), torch.Tensor):
            raise self._run.cannot(f"the kernel's answer for {self.__name__} is not one the grader asked for")
        if "unsendable" in reply:
            raise self._run.cannot(f"what {self.__name__} returned cannot be sent: {reply['unsendable']}")
        own = reply.get("own_classes")
        if own is not None and not (isinstance(own, list) and own and all(isinstance(c, str) for c in own)):
            raise self._run.cannot(f"the kernel's answer for {self.__name__} is not one the grader asked for")
        if own and not self._returns_model:
            raise self._run.cannot(f"what {self.__name__} returned holds a class of the notebook's own ({own[0][:60]})")
        # through the generator, not torch.set_rng_state: the check's watch on reseeds would blame that on the learner
        torch.default_generator.set_state(reply["rng"])
        try:  # what the call changed in its arguments in the kernel, made to the check's own: it looks at them next
            replay(reply.get("changed", []), sandbox._objects((args, kwargs)), self._run.undo)
        except Exception as error:
            raise self._run.cannot(f"what {self.__name__} changed in its arguments cannot be made to the grader's "
                                   f"copies ({type(error).__name__}: {error})")
        if reply.get("shares_earlier") and self._returns_model:  # honest (sequential_version may hand back one model
            # every time) or not, the grader's copies could not share what the kernel's do
            raise self._run.leave_to_kernel(f"{self.__name__} returned a model that shares layers with one it "
                                            "returned before")
        if reply.get("shares_earlier"):
            raise self._run.cannot(f"the kernel's answer for {self.__name__} is not one the grader asked for")
        if own:  # a model of the learner's own classes runs only where they are: the kernel's run judges it
            raise self._run.leave_to_kernel(f"{self.__name__} returned a model built with the notebook's own "
                                            f"class{'es' if len(own) > 1 else ''} ({', '.join(c[:60] for c in own[:3])})")
        if "error" in reply:
            raise _raised(str(reply["error"]), str(reply.get("message", "")))
        return reply["result"]

    @property
    def __signature__(self) -> inspect.Signature | None:
        """The learner's function's parameters, asked of the kernel once (``inspect.signature`` reads this), so that
        the check names an argument as it does in the kernel (`x`, not "argument 1") and knows one named ``seed``.
        None (no names, as before) where the kernel's answer is not a list of parameters."""
        if os.getpid() != self._pid:  # a process the check forked must not use the grader's connection
            return None
        if self._signature is None:
            self._signature = False
            try:
                parameters = unpack(self._send(sandbox.pack({"name": self.__name__, "parameters_only": True})))
                parameters = parameters["parameters"]
                if isinstance(parameters, list) and len(parameters) <= 64:
                    self._signature = inspect.Signature([
                        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD.__class__(kind),
                                          default=_DEFAULT if has_default is True else inspect.Parameter.empty)
                        for name, kind, has_default in parameters])
            except Exception:  # noqa: BLE001 - names are for messages: without them the check says "argument 1"
                self._signature = False
        return self._signature or None

    def __reduce__(self):
        # a check that starts processes with the learner's function (lesson 08) cannot run in the grader
        raise self._run.cannot(f"the check sends {self.__name__} to another process")

    def __repr__(self) -> str:
        return f"<function {self.__name__}>"


class GraderRun:
    """One run of a graded cell in the grader's process: why it could not be verified, if it could not."""

    def __init__(self) -> None:
        self.unverifiable: str | None = None
        # why the kernel's run alone judges this cell for this learner, with nothing amiss (a model of their own class)
        self.kernel_only: str | None = None
        self.folder = os.getcwd()
        self.undo: list[Callable[[], None]] = []  # puts back what :func:`replay` changed, last first
        self.token = secrets.token_hex(8)  # the kernel tells this run's calls apart from another cell's

    def cannot(self, why: str) -> NotVerifiable:
        self.unverifiable = self.unverifiable or why
        return NotVerifiable(why)

    def leave_to_kernel(self, why: str) -> NotVerifiable:
        self.kernel_only = self.kernel_only or why
        return NotVerifiable(why)

    def kernel_would_differ(self, arguments: list) -> str | None:
        """What the check set up for a call that the kernel, with a file system of its own, would not have: another
        working folder, a file's path. (What it patches in its own process, the answer key's process of
        :func:`runs_in_grader` does not see either.)"""
        if os.getcwd() != self.folder:
            return "the check changes the working folder for the call"
        items = [*arguments, *(v for a in arguments if isinstance(a, (list, tuple)) for v in a),
                 *(v for a in arguments if isinstance(a, dict) for v in a.values())]
        if any(isinstance(a, os.PathLike) or (isinstance(a, (str, bytes)) and 0 < len(a) < 4096 and _exists(a))
               for a in items):
            return "the check hands it a file's path"
        return None


def replay(changed: list, objects: list, undo: list[Callable[[], None]]) -> None:
    """Make to the grader's arguments of a call (``objects``, :func:`sandbox._objects`) what the call made to the
    kernel's copies (:func:`sandbox.changes`): the check then sees, in its own process, a tensor written in place, a
    gradient filled, a dict's value replaced, a model left in another mode, as it would in the kernel.

    For each change, ``undo`` gets a step that puts the object back: an argument may be the check module's own
    (a default input), which the grading process keeps for the next learner's run.
    """
    def held(sent: Any) -> Any:
        kind, value = sent
        if kind == "ref":
            return objects[value]
        if kind != "new":
            raise ValueError(f"an object sent as {kind!r}")
        return value

    for i, kind, state in changed:
        target = objects[i]
        if kind == "tensor" and isinstance(target, torch.Tensor):
            values, requires_grad, grad = state
            saved = (target.data, target.detach().clone(), target.requires_grad, target.grad)

            def put_back(target=target, saved=saved) -> None:
                data, copy, requires_grad, grad = saved
                with torch.no_grad():
                    target.data = data
                    data.copy_(copy)
                if target.is_leaf:
                    target.requires_grad_(requires_grad)
                    target.grad = grad
            undo.append(put_back)
            if values is not None:
                with torch.no_grad():
                    if values.shape == target.shape and values.dtype == target.dtype:
                        target.copy_(values)
                    else:  # resize_, set_ or .data = ... in the kernel
                        target.data = values
            if target.is_leaf:
                if target.requires_grad != requires_grad:
                    target.requires_grad_(requires_grad)
                if not isinstance(grad, str):  # "same": the gradient was left as it came
                    target.grad = grad
        elif kind == "array" and sandbox._is_array(target):
            copy = target.copy()
            undo.append(lambda target=target, copy=copy: target.__setitem__(Ellipsis, copy))
            target[...] = state
        elif kind == "dict" and isinstance(target, dict):
            undo.append(lambda target=target, copy=dict(target): (target.clear(), target.update(copy)))
            items = [(key, held(sent)) for key, sent in state]
            target.clear()
            target.update(items)
        elif kind == "list" and isinstance(target, list):
            undo.append(lambda target=target, copy=list(target): target.__setitem__(slice(None), copy))
            target[:] = [held(sent) for sent in state]
        elif kind == "module" and isinstance(target, torch.nn.Module):
            modes, tensors = state
            modules = dict(target.named_modules(remove_duplicate=False))
            undo.append(lambda modules=modules, was={n: m.training for n, m in modules.items()}:
                        [setattr(modules[n], "training", t) for n, t in was.items()])
            for name, training in modes.items():
                modules[name].training = bool(training)
            for name, sent in tensors:
                owner, _, leaf = name.rpartition(".")
                place = modules[owner]._parameters if leaf in modules[owner]._parameters else modules[owner]._buffers
                now = held(sent)
                if place[leaf] is not now:  # a parameter or buffer replaced in the kernel
                    undo.append(lambda place=place, leaf=leaf, was=place[leaf]: place.__setitem__(leaf, was))
                    place[leaf] = now
        else:
            raise ValueError(f"a change of a {kind} sent for a {type(target).__name__}")


def _exists(path: str | bytes) -> bool:
    try:
        return os.path.exists(path)
    except (ValueError, OSError):
        return False


def learner_names(source: str, imported: dict[str, tuple[str, str | None]]) -> list[str] | None:
    """The names a graded cell takes from the learner's notebook: those it reads but neither binds itself nor gets
    from the notebook's locked imports (``imported``) or from Python's builtins. None where the cell is not plain
    Python (a magic, a syntax error)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
              for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg] if a is not None}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(read - bound - set(imported) - set(vars(builtins)))


def _locked_namespace(imported: dict[str, tuple[str, str | None]]) -> dict[str, Any]:
    """The notebook's locked imports, made in the grader's process (those that fail are left out)."""
    namespace: dict[str, Any] = {"__name__": "__graded_cell__"}
    for name, (module, attribute) in imported.items():
        try:
            if attribute is None:
                namespace[name] = importlib.import_module(module)
            else:
                try:
                    namespace[name] = importlib.import_module(f"{module}.{attribute}")
                except ImportError:
                    namespace[name] = getattr(importlib.import_module(module), attribute)
        except Exception:
            continue
    return namespace


@contextlib.contextmanager
def _grader_state():
    """The grader's torch state, put back after a check ran in its process."""
    saved = (torch.get_rng_state(), torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads())
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        torch.set_default_dtype(saved[1])
        torch.set_grad_enabled(saved[2])
        torch.set_num_threads(saved[3])


def run_cell(source: str, imported: dict[str, tuple[str, str | None]],
             send: Callable[[str], str]) -> tuple[GraderRun, str | None]:
    """Run a graded cell in the grader's process, the learner's names reached through ``send`` (a request's text in,
    the kernel's reply text out). Returns the run (``unverifiable`` says why it could not be judged) and the
    failure's message, or None when the cell passed."""
    run = GraderRun()
    names = learner_names(source, imported)
    if names is None:
        run.cannot("the cell is not plain Python")
        return run, None
    namespace = _locked_namespace(imported)
    namespace.update({name: LearnerFunction(name, send, run, _returns_model(_answer_key(imported, name)))
                      for name in names})
    failure = None
    with _grader_state(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            exec(compile(source, "<graded cell, run by the grader>", "exec"), namespace)
        except BaseException as error:  # noqa: BLE001 - the check's verdict, whatever it raised
            if isinstance(error, KeyboardInterrupt):
                raise
            failure = str(error) if type(error).__name__ == "CheckError" else f"{type(error).__name__}: {error}"
        finally:
            for put_back in reversed(run.undo):  # the check's own objects as they were, for the next learner
                with contextlib.suppress(Exception):
                    put_back()
    return run, failure


class _AnswerKeyProcess:
    """A Python process of the grader's that makes calls with the answer key's functions, as a kernel makes them with
    the learner's: what a check patches or sets up in the grader's process, it does not see, as a kernel would not.
    Started on first use, one per grading process."""

    process: subprocess.Popen | None = None
    owner = 0  # the grading process that started it: a worker forked from that one starts its own

    @classmethod
    def send(cls, module: str, request: str) -> str:
        if cls.process is None or cls.process.poll() is not None or cls.owner != os.getpid():
            cls.owner = os.getpid()
            env = {**os.environ, "PYTHONPATH": str(sandbox.checkout())}
            cls.process = subprocess.Popen([sys.executable, "-c", "from coursetools.grading.verify import serve; serve()"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                           stderr=subprocess.DEVNULL,  # its warnings are not the grader's output
                                           cwd=tempfile.mkdtemp(prefix="answer-key-"))
            atexit.register(cls.process.kill)
        cls.process.stdin.write(json.dumps({"module": module, "request": request}) + "\n")
        cls.process.stdin.flush()
        reply = cls.process.stdout.readline().strip()
        if not reply or reply.startswith("!"):
            raise NotVerifiable(reply[1:] or "the answer key's process ended")
        return reply


def serve() -> None:
    """The answer key's process (:class:`_AnswerKeyProcess`): one call per line of stdin, its reply on stdout."""
    replies = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # what the answer key prints goes nowhere, not into the replies
    sys.stdout = open(os.devnull, "w")
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            module = importlib.import_module(asked["module"])
            name = sandbox.unpack_trusted(asked["request"])["name"]
            reply = sandbox.call_in_kernel({name: getattr(module, name)}, asked["request"])
        except Exception as error:
            reply = f"!{type(error).__name__}: {error}".replace("\n", " ")
        replies.write(reply + "\n")
        replies.flush()


def _answer_key(imported: dict[str, tuple[str, str | None]], name: str) -> Any:
    """The answer key's object named ``name``: from the ``ref`` module of a check module the notebook imports."""
    for module in _locked_namespace(imported).values():
        key = getattr(module, "ref", None) if getattr(module, "__name__", "").startswith("helpers.checks") else None
        if key is not None and callable(getattr(key, name, None)):
            return getattr(key, name)
    return None


def _plain(kind: object) -> bool:
    """Whether a return annotation promises plain data (what can come back from a kernel), as far as it says."""
    import numpy as np

    origin = typing.get_origin(kind)
    if origin is not None:  # tuple[Tensor, Tensor], list[float], Union[...]
        return all(_plain(arg) for arg in typing.get_args(kind) if arg is not Ellipsis)
    if not isinstance(kind, type):
        return True  # Any, a TypeVar: it does not say
    return issubclass(kind, (torch.Tensor, int, float, complex, bool, str, bytes, tuple, list, dict, set, type(None),
                             np.ndarray, np.generic, torch.dtype, torch.device))


def _returns_model(key: Any) -> bool:
    """Whether the answer key's function says it returns a model (``-> nn.Module``)."""
    try:
        returned = typing.get_type_hints(key).get("return")
    except Exception:
        return False
    return isinstance(returned, type) and issubclass(returned, torch.nn.Module)


def _returns_no_plain_data(name: str, key: Any) -> str | None:
    """Why the cell of the answer key's ``key`` is not tried, when its signature says so: a class builds an object
    with code of its own, which cannot come back from a kernel; ``-> None`` trains or changes its arguments in place,
    and so does ``-> nn.Module`` from anything but numbers (a dataset to train on, a checkpoint to load). Not trying
    spares the training such a function may do. A model built from numbers alone (``build_classifier(1, 10)``) is
    tried: built of ``torch.nn``'s layers, it comes back."""
    if isinstance(key, type):
        return f"{name} is a class: what it builds cannot come back as plain data"
    try:
        hints = typing.get_type_hints(key)
        returned = hints.get("return", typing.Any)
    except Exception:
        return None
    if _returns_model(key):
        given = [hints.get(p, typing.Any) for p in inspect.signature(key).parameters]
        if all(kind in (int, float, bool, str) for kind in given):
            return None
        return f"{name} makes its model from what it is given (it trains or loads it): work a second run would repeat"
    if returned is type(None) or returned is None:
        # its changes would come back (replay), but such a function trains or sets up a model: the answer key's run
        # and the grader's would each repeat that work (lesson 05's train_spirals: a minute)
        return f"{name} returns nothing: it trains or changes its arguments, work a second run would repeat"
    if not _plain(returned):
        shown = getattr(returned, "__name__", returned) if typing.get_origin(returned) is None else returned
        return f"{name} returns {shown}, which cannot come back as plain data"
    return None


def _answer_key_sender(imported: dict[str, tuple[str, str | None]]) -> Callable[[str], str]:
    """A ``send`` for :func:`run_cell` that makes each call with the answer key's function of the same name (the
    ``ref`` module of the check module the cell uses), in the answer key's own process."""
    def send(request: str) -> str:
        name = sandbox.unpack_trusted(request)["name"]
        found = _answer_key(imported, name)
        if found is None:
            raise NotVerifiable(f"the answer key has no {name}")
        return _AnswerKeyProcess.send(found.__module__, request)

    return send


_RUNS_IN_GRADER: dict[tuple, str | None] = {}


def runs_in_grader(source: str, imported: dict[str, tuple[str, str | None]]) -> str | None:
    """None when this graded cell can be judged in the grader's process (the answer key, put in the learner's place
    through the same round trip, passes it); else why not. Remembered for the grading process."""
    key = (source, tuple(sorted(imported.items())))
    if key not in _RUNS_IN_GRADER:
        try:
            keys = {name: _answer_key(imported, name) for name in learner_names(source, imported) or []}
            skipped = next(filter(None, (_returns_no_plain_data(name, found) for name, found in keys.items()
                                         if found is not None)), None)
            if skipped is None:
                run, failure = run_cell(source, imported, _answer_key_sender(imported))
                skipped = run.unverifiable or run.kernel_only or (f"the answer key fails it there: {failure}"
                                                                  if failure else None)
            _RUNS_IN_GRADER[key] = skipped
        except Exception as error:  # never let the grader's own look stop grading
            _RUNS_IN_GRADER[key] = f"{type(error).__name__}: {error}"
    return _RUNS_IN_GRADER[key]
