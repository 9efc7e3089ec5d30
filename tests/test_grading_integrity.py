"""Grading that a learner cannot cheat, break or be wronged by (issue 10).

Every case builds its bad submission of lesson 00 (the fast one), grades the whole
catalogue in one nbgrader run on a temporary copy of the course, and asserts the
outcome: correct work scores full marks, cheats are flagged for a person, refused
notebooks say nbgrader's real reason, and, in the sandbox, a notebook can neither
reach the gradebook, other learners' files, the course or the network, nor leave a
process behind. The static scan flags none of the course's solutions.
"""

from __future__ import annotations

import hashlib
import html
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from coursetools import grading
from coursetools.grading import sandbox, scan
from helpers.data import REPO_ROOT
from tests.test_roundtrip import solution_cells, submit

LESSON = "00_start_here"
pytestmark = pytest.mark.slow
SLEEP = "987.654"  # a process the vandal leaves behind: `sleep 987.654`
GRADER_SECRET = ("GRADEBOOK_PASSWORD", "hunter2-not-for-learners")


def notebook_path(course: Path, student: str, name: str = LESSON) -> Path:
    return course / "grading" / "submitted" / student / LESSON / f"{name}.ipynb"


def edit(course: Path, student: str, change) -> None:
    """Apply ``change(notebook)`` to a submitted notebook."""
    path = notebook_path(course, student)
    nb = nbformat.read(path, as_version=4)
    change(nb)
    nbformat.write(nb, path)


def cell_index(nb: nbformat.NotebookNode, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def insert_after(grade_id: str, source: str):
    def change(nb):
        nb.cells.insert(cell_index(nb, grade_id) + 1, nbformat.v4.new_code_cell(source))
    return change


WRONG = "def to_fahrenheit(celsius):\n    return celsius * 9 / 5\n"  # forgets + 32
NOISY = ("import logging, sys, warnings\n\n"
         "def to_fahrenheit(celsius):\n"
         "    warnings.warn('a learner warning', UserWarning)\n"
         "    print('debugging to stderr', file=sys.stderr)\n"
         "    logging.warning('a log line')\n"
         "    return celsius * 9 / 5 + 32\n")
TRANSFORMER = ("def wrap(lines):\n"
               "    return ['try:\\n'] + ['    ' + line for line in lines] + ['\\nexcept BaseException:\\n    pass\\n']\n"
               "get_ipython().input_transformers_post.append(wrap)\n")
# Rewrites the kernel's messages: drops the `error` message, turns a failed execute_reply into "ok" and
# answers the grader's probe by evaluating exactly what the grader asked for.
SESSION_PATCH = (
    "ip = get_ipython()\n"
    "session = ip.kernel.session\n"
    "original_send = session.send\n"
    "def send(stream, msg_or_type, content=None, *args, **kwargs):\n"
    "    kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type.get('msg_type')\n"
    "    if kind == 'error':\n"
    "        return None\n"
    "    if kind == 'execute_reply' and content is not None and content.get('status') == 'error':\n"
    "        asked = ip.kernel.get_parent()['content'].get('user_expressions', {})\n"
    "        content = {'status': 'ok', 'execution_count': content.get('execution_count'), 'payload': [],\n"
    "                   'user_expressions': ip.user_expressions(asked)}\n"
    "    return original_send(stream, msg_or_type, content, *args, **kwargs)\n"
    "session.send = send\n")
# Tricks that need no knowledge of the checks, spelled so that a scan by names misses them.
CODE_SWAP = ("ok = lambda *args, **kwargs: None\n"
             "f = check.check_to_fahrenheit\n"
             "type(f).__dict__['__' + 'code__'].__set__(f, ok.__code__)\n")
TRACER = ("import sys\n"
          "getattr(sys, 'set' + 'trace')(lambda frame, event, arg: None)\n")
SHADOW_PROBE = "globals()['__course_' + 'integrity__'] = lambda *args: '{}'\n"
# A last cell that prints what IPython kept of the graded cells and writes it next to the notebook.
LEAKER = ("import linecache\n"
          "print(In)\n"
          "kept = '\\n'.join(''.join(entry[2]) for entry in list(linecache.cache.values()) if len(entry) > 2)\n"
          "print(kept)\n"
          "open('leak.txt', 'w').write(kept + str(In))\n")
# An AST wrapper that swallows every exception of a cell, installed without naming ast_transformers.
AST_WRAPPER = ("import ast\n"
               "ip = get_ipython()\n"
               "original = ip.transform_ast\n"
               "def swallow(node):\n"
               "    node = original(node)\n"
               "    handler = ast.ExceptHandler(type=None, name=None, body=[ast.Pass()])\n"
               "    node.body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])]\n"
               "    return ast.fix_missing_locations(node)\n"
               "setattr(ip, 'transform_' + 'ast', swallow)\n")
# The answer key, run from its file.
RUNPY_KEY = ("import runpy, helpers\n"
             "key = runpy.run_path(helpers.__path__[0] + '/reference/start.py')\n"
             "to_fahrenheit = key['to_fahrenheit']\n")
# A result type that says every comparison with it is equal.
ALWAYS_EQUAL = ("class Agreeable(torch.Tensor):\n"
                "    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                "        if getattr(func, '__name__', '') in ('allclose', 'equal'):\n"
                "            return True\n"
                "        return super().__torch_function__(func, types, args, kwargs or {})\n"
                "def to_fahrenheit(celsius):\n"
                "    return (celsius * 9 / 5).as_subclass(Agreeable)\n")
# The answer key called from the learner's own function, reached through the check module they import.
KEY_CALL = ("def to_fahrenheit(celsius):\n"
            "    return getattr(check, 'r' + 'ef').to_fahrenheit(celsius)\n")
# The answer key bound to the exercise's name, dug out of the helpers package without naming it.
KEY_ALIAS = ("import helpers\n"
             "to_fahrenheit = vars(vars(helpers)['refer' + 'ence'])['start'].to_fahrenheit\n")
# A name in front of the grader's probe that undoes a patch while the probe looks, then puts it back.
PROBE_FORWARDER = ("real_allclose = torch.allclose\n"
                   "def __course_integrity__(nonce=''):\n"
                   "    vars(torch)['allclose'] = real_allclose\n"
                   "    try:\n"
                   "        return vars(print.__self__)['__course_integrity__'](nonce)\n"
                   "    finally:\n"
                   "        vars(torch)['allclose'] = lambda *a, **k: True\n"
                   "vars(torch)['allclose'] = lambda *a, **k: True\n" + WRONG)
# The check's comparison replaced while the learner's function runs, and put back before the check ends.
PUT_BACK = ("def to_fahrenheit(celsius):\n"
            "    ns = vars(check)\n"
            "    if ns['passed'].__name__ == 'passed':\n"
            "        saved = dict(ns)\n"
            "        def done(*a):\n"
            "            ns.update(saved)\n"
            "            return saved['passed'](*a)\n"
            "        done.__name__ = 'done'\n"
            "        ns.update(expect_tensor=lambda *a, **k: None, passed=done)\n"
            "    return celsius * 9 / 5\n")
# The answer key behind a library's wrapper, which is what calls it.
KEY_WRAPPED = "to_fahrenheit = torch.no_grad()(check.ref.to_fahrenheit)\n"
# PyTorch's own allclose given another implementation for the CPU.
OPERATOR_OVERRIDE = ("lib = torch.library.Library('aten', 'IMPL')\n"
                     "lib.impl('allclose', lambda *a, **k: True, 'CPU')\n" + WRONG)
# Every comparison's tolerance loosened by changing the defaults of the check's comparison in place.
LOOSE_DEFAULTS = "getattr(check.expect_tensor, '__kw' + 'defaults__').update(atol=1e9, rtol=1e9)\n" + WRONG
# A torch function mode, entered and left on, that says every comparison is equal: no tensor of the answer is odd.
MODE_EQUAL = ("from torch.overrides import TorchFunctionMode\n"
              "class Agreeable(TorchFunctionMode):\n"
              "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
              "        if getattr(func, '__name__', '') in ('allclose', 'equal'):\n"
              "            return True\n"
              "        return func(*args, **(kwargs or {}))\n"
              "Agreeable().__enter__()\n" + WRONG)
# ALWAYS_EQUAL's tensor type, passing itself off as one of numpy's.
DISGUISED_EQUAL = ALWAYS_EQUAL.replace("    @classmethod\n", "    __module__ = 'numpy'\n    @classmethod\n", 1)
# The same tricks with a right answer: the cells pass, and the guard sees the notebook's own type and mode.
RIGHT = "def to_fahrenheit(celsius):\n    return celsius * 9 / 5 + 32\n"
DISGUISED_RIGHT = DISGUISED_EQUAL.replace("(celsius * 9 / 5)", "(celsius * 9 / 5 + 32)")
MODE_LEFT_ON = MODE_EQUAL.replace(WRONG, RIGHT)
HONEST_EXTRAS = ("import gc, inspect\n"
                 "gc.collect()\n"
                 "assert 'celsius' in str(inspect.signature(lambda celsius: 0))\n"
                 "names = sorted(globals())\n"
                 "get_ipython().ast_node_interactivity = 'all'\n")

VANDAL = '''import os, signal, socket, subprocess
def attempt(what, action):
    try:
        action()
        print(f"{{what}}: DONE")
    except BaseException as error:
        print(f"{{what}}: blocked ({{type(error).__name__}})")
attempt("signal the grader", lambda: os.kill({grader}, signal.SIGTERM))
attempt("remove the gradebook", lambda: os.remove({gradebook!r}))
attempt("overwrite another learner", lambda: open({other!r}, "w").write("{{}}"))
attempt("write the course", lambda: open({course_file!r}, "w").write("x"))
attempt("read the solutions", lambda: open({solution!r}).read())
attempt("read the repository", lambda: os.listdir({git!r}))
attempt("read the machine's secrets", lambda: open("/etc/shadow").read())
attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
attempt("allocate 3 GB", lambda: bytearray(3 * 2**30))
subprocess.Popen(["sleep", "{sleep}"])
print("x" * 3_000_000)
'''


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = grading.copy_course(tmp_path_factory.mktemp("integrity"), lessons=[LESSON])
    grading.release(root, [LESSON])
    return root


def quick() -> Config:
    config = Config()
    config.Execute.timeout = 30  # importing torch on a busy machine
    config.GraderExecute.notebook_timeout = 45
    return config


@pytest.fixture(scope="module")
def listener():
    """A TCP server on the grading machine's loopback that a sandboxed kernel must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []
    server.settimeout(0.5)

    def serve():
        while True:
            try:
                accepted.append(server.accept())
            except socket.timeout:
                continue
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture(scope="module")
def graded(course: Path, listener) -> dict[str, grading.SubmissionResult]:
    """Build every submission of the catalogue, grade them in one run, return the results by learner."""
    port, _ = listener
    full = lambda name: submit(course, name, LESSON)  # noqa: E731
    for name in ("full", "extra", "restored", "stripped", "points", "dupids"):
        full(name)
    submit(course, "noisy", LESSON, {"ex_to_fahrenheit": NOISY})
    submit(course, "wrong", LESSON, {"ex_to_fahrenheit": WRONG})
    # correct work with a stray helpers.py and a fake helpers/ package next to the notebook, and a typo
    # in one of the learner's own imports
    folder = notebook_path(course, "full").parent
    (folder / "helpers.py").write_text("raise ImportError('the stray helpers.py was imported')\n")
    (folder / "helpers").mkdir()
    (folder / "helpers" / "__init__.py").write_text("raise ImportError('the fake helpers/ was imported')\n")
    edit(course, "full", insert_after("ex_to_fahrenheit", "from helpers.chekcs import start\n"))
    nbformat.write(nbformat.read(notebook_path(course, "full"), as_version=4), notebook_path(course, "extra", f"{LESSON} (1)"))

    def drop_metadata(nb):
        del nb.cells[cell_index(nb, "ex_to_fahrenheit_tests")].metadata["nbgrader"]
    edit(course, "restored", drop_metadata)  # one graded cell lost its metadata, the other is deleted
    edit(course, "restored", lambda nb: nb.cells.pop(cell_index(nb, "ex_to_fahrenheit_more_tests")))

    def strip_all_metadata(nb):  # e.g. the notebook went through an editor that drops nbgrader's metadata
        for cell in nb.cells:
            cell.metadata.pop("nbgrader", None)
    edit(course, "stripped", strip_all_metadata)

    def more_points(nb):
        nb.cells[cell_index(nb, "ex_to_fahrenheit_tests")].metadata["nbgrader"]["points"] = 50
    edit(course, "points", more_points)
    edit(course, "dupids", lambda nb: nb.cells.insert(2, nbformat.from_dict(
        dict(nb.cells[cell_index(nb, "ex_to_fahrenheit")], id="duplicate"))))
    submit(course, "renamed", LESSON)
    notebook_path(course, "renamed").rename(notebook_path(course, "renamed", "my_work"))
    submit(course, "overclaim", LESSON, {"ex_to_fahrenheit": WRONG + "check.check_to_fahrenheit = lambda *a, **k: 5\n"})
    submit(course, "stubborn", LESSON, {"ex_to_fahrenheit": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                                          "while True:\n    time.sleep(0.1)\n"})
    submit(course, "breaker", LESSON, blank=True)
    edit(course, "breaker", lambda nb: nb.cells.insert(0, nbformat.v4.new_code_cell(
        "import sys\nsys.modules['helpers'] = None\n")))

    # cheats: wrong or blank answers made to pass
    submit(course, "patch_check", LESSON, {"ex_to_fahrenheit": WRONG + "check.check_to_fahrenheit = lambda *a, **k: None\n"})
    submit(course, "patch_torch", LESSON, {"ex_to_fahrenheit": WRONG + "torch.allclose = lambda *a, **k: True\n"
                                                               "torch.equal = lambda *a, **k: True\n"})
    submit(course, "transformer", LESSON, {"ex_to_fahrenheit": WRONG + TRANSFORMER})
    submit(course, "session_wrong", LESSON, {"ex_to_fahrenheit": WRONG + SESSION_PATCH})
    submit(course, "session_blank", LESSON, blank=True)
    edit(course, "session_blank", insert_after("ex_to_fahrenheit", SESSION_PATCH))
    submit(course, "code_swap", LESSON, {"ex_to_fahrenheit": WRONG + CODE_SWAP})
    right = solution_cells(nbformat.read(course / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4))
    # with a correct answer, so that the graded cells pass and the grader asks the guard
    submit(course, "tracer", LESSON, {"ex_to_fahrenheit": right["ex_to_fahrenheit"].source + "\n" + TRACER})
    submit(course, "always_equal", LESSON, {"ex_to_fahrenheit": ALWAYS_EQUAL})
    submit(course, "ast_wrapper", LESSON, {"ex_to_fahrenheit": WRONG + AST_WRAPPER})
    submit(course, "runpy_key", LESSON, {"ex_to_fahrenheit": RUNPY_KEY})
    submit(course, "key_call", LESSON, {"ex_to_fahrenheit": KEY_CALL})
    submit(course, "mode_equal", LESSON, {"ex_to_fahrenheit": MODE_EQUAL})
    submit(course, "loose_defaults", LESSON, {"ex_to_fahrenheit": LOOSE_DEFAULTS})
    for name, cell in (("probe_forwarder", PROBE_FORWARDER), ("put_back", PUT_BACK), ("key_wrapped", KEY_WRAPPED),
                       ("operator_override", OPERATOR_OVERRIDE)):
        submit(course, name, LESSON, {"ex_to_fahrenheit": cell})
    submit(course, "disguised_right", LESSON, {"ex_to_fahrenheit": DISGUISED_RIGHT})
    submit(course, "mode_left_on", LESSON, {"ex_to_fahrenheit": MODE_LEFT_ON})
    submit(course, "disguised_equal", LESSON, {"ex_to_fahrenheit": DISGUISED_EQUAL})
    submit(course, "key_alias", LESSON, {"ex_to_fahrenheit": KEY_ALIAS})
    submit(course, "shadow_probe", LESSON, {"ex_to_fahrenheit": right["ex_to_fahrenheit"].source + "\n" + SHADOW_PROBE})
    submit(course, "honest_extras", LESSON, {"ex_to_fahrenheit": solution_cells(nbformat.read(
        course / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4))["ex_to_fahrenheit"].source + "\n" + HONEST_EXTRAS})
    submit(course, "env_reader", LESSON, {"ex_to_fahrenheit": WRONG + "import os\nprint(dict(os.environ))\n"})
    submit(course, "leaker", LESSON, {"ex_to_fahrenheit": WRONG})
    edit(course, "leaker", lambda nb: nb.cells.append(nbformat.v4.new_code_cell(LEAKER)))
    submit(course, "rebind", LESSON, {"ex_to_fahrenheit": "from helpers.reference.start import to_fahrenheit\n"
                                                          "import types\n"
                                                          "check = types.SimpleNamespace(check_to_fahrenheit=print)\n"})
    if sandbox.sandboxed():
        submit(course, "vandal", LESSON, {"ex_to_fahrenheit": VANDAL.format(
            grader=__import__("os").getpid(), gradebook=str(course / "grading" / "gradebook.db"),
            other=str(notebook_path(course, "full")), course_file=str(REPO_ROOT / "helpers" / "checks" / "_vandal.txt"),
            solution=str(course / "solutions" / LESSON / f"{LESSON}.ipynb"), git=str(REPO_ROOT / ".git"),
            port=port, sleep=SLEEP) + WRONG})
    before = {p: digest(p) for p in (notebook_path(course, "full"), REPO_ROOT / "helpers" / "checks" / "__init__.py")}
    os.environ[GRADER_SECRET[0]] = GRADER_SECRET[1]  # the grader's own secret: no kernel may see it
    try:
        results = {r.student: r for r in grading.autograde(LESSON, course, overrides=quick())}
    finally:
        os.environ.pop(GRADER_SECRET[0], None)
        vandalised = REPO_ROOT / "helpers" / "checks" / "_vandal.txt"
        written = vandalised.exists()
        vandalised.unlink(missing_ok=True)
    assert not written, "a graded notebook wrote into the course's helpers/"
    assert {p: digest(p) for p in before} == before, "grading changed a learner's submission or the course"
    print(grading.format_table(list(results.values())))
    return results


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def autograded(course: Path, student: str) -> nbformat.NotebookNode:
    return nbformat.read(course / "grading" / "autograded" / student / LESSON / f"{LESSON}.ipynb", as_version=4)


def table(results) -> str:
    return grading.format_table(list(results.values()))


# ---------------------------------------------------------------- correct work keeps its points

@pytest.mark.parametrize("student", ["full", "noisy", "restored", "stripped", "honest_extras"])
def test_correct_work_scores_full_marks(graded, student):
    result = graded[student]
    assert result.status == "graded" and result.score == result.max_score == 2, table(graded)


def test_stderr_still_shows_in_the_autograded_notebook(graded, course):
    nb = autograded(course, "noisy")
    cell = nb.cells[cell_index(nb, "ex_to_fahrenheit_tests")]
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
    assert "a learner warning" in shown and "debugging to stderr" in shown and "a log line" in shown


def test_restored_graded_cells_are_noted(graded):
    notes = graded["restored"].reasons
    assert any("ex_to_fahrenheit_tests" in r and "put it back" in r for r in notes), notes
    assert any("ex_to_fahrenheit_more_tests" in r and "put it back" in r for r in notes), notes


def test_wrong_work_scores_what_it_earns(graded):
    assert graded["wrong"].status == "graded" and graded["wrong"].score == 0, table(graded)


def test_extra_notebook_is_reported(graded):
    result = graded["extra"]
    assert result.status == "extra notebook" and result.score == 2 and f"{LESSON} (1).ipynb" in result.detail


def test_one_learner_breaking_the_setup_cell_does_not_stop_the_class(graded):
    result = graded["breaker"]
    assert result.status == "setup failed" and "earlier cell broke it" in result.detail, table(graded)


# ---------------------------------------------------------------- refused notebooks: the real reason

def test_renamed_notebook(graded):
    result = graded["renamed"]
    assert result.status == "refused" and "renamed?" in result.detail and "my_work.ipynb" in result.detail
    assert result.score is None


def test_edited_points_are_restored_and_flagged(graded):
    result = graded["points"]
    assert result.status == "suspicious" and "metadata was edited" in result.detail and result.max_score == 2
    assert result.score == 2


def test_duplicated_cell_ids(graded):
    result = graded["dupids"]
    assert result.status in ("suspicious", "refused") and "more than once" in result.detail, table(graded)


def test_check_claiming_more_points_than_the_cell(graded):
    result = graded["overclaim"]
    assert result.status == "refused" and "more points than the cell" in result.detail
    assert any("check.check_to_fahrenheit" in r for r in result.reasons)


def test_loop_ignoring_interrupts(graded):
    result = graded["stubborn"]
    assert result.status == "timed out", table(graded)
    assert result.detail


# ---------------------------------------------------------------- cheats are flagged for a person

@pytest.mark.parametrize("student, scanned, guarded", [
    ("patch_check", "sets check.check_to_fahrenheit", "check_to_fahrenheit replaced"),
    ("patch_torch", "sets torch.allclose", "torch.allclose"),
    ("transformer", "input_transformers_post", "input_transformers_post"),
    ("rebind", "imports helpers.reference.start", None),
    ("rebind", "rebinds check", "the name check"),
])
def test_cheats_are_flagged(graded, student, scanned, guarded):
    result = graded[student]
    assert result.status == "suspicious", table(graded)
    assert any(scanned in r for r in result.reasons), result.reasons
    if guarded:  # the kernel's guard saw it too (the scan alone cannot see what runs)
        assert any(guarded in r and "_tests: " in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("student", ["session_wrong", "session_blank"])
def test_rewriting_the_kernels_messages_cannot_win(graded, student):
    """The grader decides from the guard's signed answer: a failed cell the kernel reports as "ok" still fails."""
    result = graded[student]
    assert result.score == 0 and result.status == "suspicious", table(graded)
    assert any("kernel reported success" in r or "session" in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("student, seen", [
    ("code_swap", "changed in place (its code, defaults or closure)"),
    ("tracer", "sys.settrace installed a tracing"),
    ("shadow_probe", "integrity probe was replaced"),
    ("ast_wrapper", "shell.transform_ast"),
    ("runpy_key", None),
    ("loose_defaults", "expect_tensor: changed in place (its code, defaults or closure)"),
    ("probe_forwarder", "the grader's probe was called by the notebook's code"),
    ("put_back", "helpers.checks.start.expect_tensor, passed replaced"),
    ("key_wrapped", "the name to_fahrenheit (helpers.reference.start.to_fahrenheit) is the course's answer key"),
    ("operator_override", "PyTorch's operator aten/allclose/CPU was given another implementation"),
    ("key_call", "the notebook's code called the course's answer key (helpers.reference.start.to_fahrenheit)"),
    ("key_alias", "the name to_fahrenheit (helpers.reference.start.to_fahrenheit) is the course's answer key"),
])
def test_tricks_the_scan_cannot_spell_are_flagged_by_the_guard(graded, student, seen):
    result = graded[student]
    assert result.status == "suspicious", table(graded)
    if seen is None:  # what the guard cannot see, the scan names
        assert any("imports runpy" in r for r in result.reasons), result.reasons
    else:
        assert any(seen in r and "_tests: " in r for r in result.reasons), result.reasons
    if student == "shadow_probe":  # an answer the grader cannot verify is no pass
        assert result.score == 0, table(graded)


@pytest.mark.parametrize("student", ["patch_check", "patch_torch", "transformer", "code_swap", "ast_wrapper",
                                     "loose_defaults", "probe_forwarder", "put_back", "operator_override"])
def test_a_wrong_answer_that_bends_the_kernels_check_scores_nothing(graded, student):
    """The grader runs each graded cell again in its own process, where the notebook cannot reach the check: what the
    notebook did to the kernel's copy (patched, swapped, transformed, put back) does not change that verdict."""
    result = graded[student]
    assert result.score == 0 and result.status == "suspicious", table(graded)
    assert any("failed when the grader ran its checks again in its own process" in r for r in result.reasons), \
        result.reasons
    assert not result.verified


@pytest.mark.parametrize("student", ["full", "noisy", "restored", "stripped", "honest_extras", "tracer"])
def test_correct_work_passes_the_graders_own_run(graded, student):
    """Correct work passes the grader's run of both graded cells, so its points do not rest on the kernel's word."""
    assert sorted(graded[student].verified) == ["ex_to_fahrenheit_more_tests", "ex_to_fahrenheit_tests"], table(graded)


@pytest.mark.parametrize("student", ["always_equal", "disguised_equal", "mode_equal"])
def test_an_answer_that_decides_its_own_comparison_cannot_win(graded, student):
    """The checks compare tensors as PyTorch does, whatever tensor type or mode the notebook brings."""
    assert graded[student].score == 0, table(graded)


@pytest.mark.parametrize("student, seen", [
    ("disguised_right", "tensor subclass Agreeable overrides __torch_function__"),
    ("mode_left_on", "the notebook's torch mode Agreeable is active after the cell"),
])
def test_the_notebooks_own_tensor_types_and_modes_are_flagged(graded, student, seen):
    """What decides how tensors behave, written by the notebook, is looked at by a person (however it is named)."""
    result = graded[student]
    assert result.status == "suspicious", table(graded)
    assert any(seen in r and "_tests: " in r for r in result.reasons), result.reasons


HONEST_CELLS = [
    "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        for i in range(2):\n            setattr(self, f'layer{i}', nn.Linear(2, 2))\n",
    "import sys\nin_colab = 'google.colab' in sys.modules\nsys.stdout.flush()\n",
    "from helpers.checks import start as check\n",  # the setup cell's import, run again
    "import pandas as pd\npd.options.display.max_rows = 20\n",
    "import logging\nlogging.root.level = 10\n",
    "from torch import compile\nfast = compile(lambda x: x + 1)\n",
    "import importlib\nimport json\njson = importlib.reload(json)\n",  # a module of one's own, edited and reloaded
    "from importlib import reload\nimport json as settings\nreload(settings)\n",
    "from importlib.metadata import version\nprint(version('torch'))\n",
    "import importlib.metadata\ntorch_version = importlib.metadata.version('torch')\n",
    "import importlib\npd = importlib.import_module('pandas')\n",
]
# importlib's ways to load what the scan cannot read, however the notebook names them
LOADING_CELLS = {
    "import importlib.util as iu\nspec = iu.spec_from_file_location('key', path)\n": "imports importlib.util",
    "import importlib\nspec = importlib.util.spec_from_file_location('key', path)\n": "uses importlib.util",
    "import importlib as il\nkey = il.import_module(name)\n": "calls il.import_module() with a computed name",
    "from importlib import import_module as im\nkey = im('helpers.' + part)\n": "calls im() with a computed name",
    "from importlib import reload as rl\nrl(check)\n": "reloads check",
    "import importlib\nimport torch.nn as nn\nimportlib.reload(nn)\n": "reloads nn",
    "import gc as g\nfound = g.get_objects()\n": "uses g.get_objects",
}
SPELLED_CELLS = {
    "f = getattr(check.ref.to_fahrenheit, '__clo' + 'sure__')\n": "spells '__closure__' in pieces",
    "import gc\nobjects = getattr(gc, 'get_' + 'objects')()\n": "spells 'get_objects' in pieces",
    "run = vars(torch)['__builtins__']['ex' + 'ec']\n": "names '__builtins__' in a string",
    "b = print.__self__\n": "uses print.__self__",
    "getattr(check.expect_tensor, '__kw' + 'defaults__')['atol'] = 1e9\n": "spells '__kwdefaults__' in pieces",
    "key = vars(helpers)['refer' + 'ence']\n": "spells 'reference' in pieces",
}


def _lesson_with(cell: str) -> nbformat.NotebookNode:
    nb = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(cell))
    return nb


@pytest.mark.parametrize("cell", HONEST_CELLS)
def test_scan_spares_honest_code(cell):
    source = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert scan.scan_notebook(_lesson_with(cell), source) == []


@pytest.mark.parametrize("cell, finding", LOADING_CELLS.items())
def test_scan_flags_importlibs_loaders_and_aliased_digging(cell, finding):
    source = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert any(finding in f for f in scan.scan_notebook(_lesson_with(cell), source)), \
        scan.scan_notebook(_lesson_with(cell), source)


@pytest.mark.parametrize("cell, finding", SPELLED_CELLS.items())
def test_scan_reads_names_spelled_in_pieces(cell, finding):
    source = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert any(finding in f for f in scan.scan_notebook(_lesson_with(cell), source))


# torch.func registers PyTorch's own Python batching rules on first use; a notebook's aten override is new
OPERATORS_SEEN = """
import torch
from coursetools.grading.sandbox import _operator_overrides
before = _operator_overrides()
x = torch.randn(3, 4)
torch.func.vmap(lambda row: torch.nn.functional.mse_loss(row, row * 0))(x)
torch.func.vmap(torch.func.grad(lambda row: (row ** 2).sum()))(x)
print(sorted(_operator_overrides() - before))
library = torch.library.Library("aten", "IMPL")  # kept: a Library that is collected takes its implementations away
library.impl("allclose", lambda *args, **kwargs: True, "CPU")
print(sorted(_operator_overrides() - before))
"""


def test_torch_func_is_not_an_operator_override():
    """In a fresh interpreter, as in a kernel: honest vmap and grad add nothing; an override of allclose is seen."""
    run = subprocess.run([sys.executable, "-c", OPERATORS_SEEN], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True)
    assert run.stdout.splitlines() == ["[]", "['aten/allclose/CPU']"]


def test_scan_flags_no_solution():
    for path in sorted(REPO_ROOT.glob("solutions/*/*.ipynb")):
        assert scan.scan_file(path, path) == [], path


def test_submitted_python_files_are_not_copied(course, graded):
    folder = course / "grading" / "autograded" / "full" / LESSON
    assert not (folder / "helpers.py").exists() and not (folder / "helpers" / "__init__.py").exists()


# ---------------------------------------------------------------- feedback

def test_feedback_shows_the_message_not_the_hidden_tests(course, graded):
    api = grading._api(course)
    assert api.generate_feedback(LESSON, "wrong", force=True)["success"]
    page = (course / "grading" / "feedback" / "wrong" / LESSON / f"{LESSON}.html").read_text()
    assert "BEGIN HIDDEN TESTS" not in page and "-273.15" not in page
    nb = autograded(course, "wrong")
    error = next(o for o in nb.cells[cell_index(nb, "ex_to_fahrenheit_tests")].outputs if o.output_type == "error")
    assert html.escape(error.evalue.split("\n")[0])[:40] in page


def test_hidden_tests_do_not_leak_through_outputs_or_files(course, graded):
    """print(In), IPython's cached cell sources and a file beside the notebook: none shows a hidden test."""
    api = grading._api(course)
    assert api.generate_feedback(LESSON, "leaker", force=True)["success"]
    folder = course / "grading" / "feedback" / "leaker" / LESSON
    page = (folder / f"{LESSON}.html").read_text()
    assert "-273.15" not in page and "BEGIN HIDDEN TESTS" not in page
    assert sorted(p.name for p in folder.iterdir()) == [f"{LESSON}.html"]
    assert not (course / "grading" / "autograded" / "leaker" / LESSON / "leak.txt").exists()


def test_feedback_redacts_hidden_test_lines_wherever_they_appear():
    """Whatever way a hidden test's text reached an output, feedback shows a note in its place."""
    from coursetools.grading.autograder import FeedbackWithoutHiddenTests

    hidden = "check.check_to_fahrenheit(to_fahrenheit, inputs=[torch.tensor([-273.15])])"
    graded = nbformat.v4.new_code_cell(f"check.check_to_fahrenheit(to_fahrenheit)\n### BEGIN HIDDEN TESTS\n{hidden}\n"
                                       "### END HIDDEN TESTS\n", metadata={"nbgrader": {
                                           "grade": True, "grade_id": "t", "points": 1, "solution": False,
                                           "locked": True}})
    leak = nbformat.v4.new_code_cell("print(In)", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text=f"before\n['{hidden}']\nafter\n"), nbformat.v4.new_output(
        "display_data", data={"text/plain": hidden, "text/html": f"<pre>{hidden}</pre>"})])
    nb = nbformat.v4.new_notebook(cells=[graded, leak])
    nb, _ = FeedbackWithoutHiddenTests().preprocess(nb, {})
    shown = nbformat.writes(nb)
    assert "-273.15" not in shown and "hidden tests, not shown" in shown and "before" in shown and "after" in shown


def test_the_kernel_gets_an_allow_list_of_the_graders_environment(course, graded):
    nb = autograded(course, "env_reader")
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "PATH" in text and GRADER_SECRET[1] not in text and GRADER_SECRET[0] not in text


def test_a_folder_holding_the_answers_is_never_mounted(monkeypatch, tmp_path):
    """PYTHONPATH or COURSE_DATA at the course root (or above it) must not show the kernel solutions/ or grading/."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), "/", str(tmp_path)]))
    monkeypatch.setenv("COURSE_DATA", str(REPO_ROOT.parent))
    mounted = sandbox._readable_paths()
    assert tmp_path.resolve() in mounted
    for path in mounted:
        assert not REPO_ROOT.is_relative_to(path) or path == Path("/"), path
        assert not (path / "solutions").exists() and not (path / "grading").exists(), path
    assert sandbox.checkout() / "helpers" in mounted


@pytest.mark.skipif(not sandbox.sandboxed(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_the_notebooks_folder_is_bounded_scratch(tmp_path):
    """Writes beside the notebook stop at the size limit and vanish; the submission's files are read-only."""
    work, private = tmp_path / "work", tmp_path / "private"
    work.mkdir(), private.mkdir()
    (work / "submitted.txt").write_text("mine")
    script = ("cat submitted.txt; echo; (echo x > submitted.txt) 2>/dev/null || echo read-only; "
              "dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; du -m big | cut -f1; touch /made-at-root || true")
    out = subprocess.run(sandbox.bwrap_command(work, private, 16 * 2**20) + ["--", "sh", "-c", script],
                         capture_output=True, text=True)
    lines = out.stdout.split()
    assert lines[:2] == ["mine", "read-only"] and int(lines[2]) <= 16, out
    assert "Read-only file system" in out.stderr
    assert sorted(p.name for p in work.iterdir()) == ["submitted.txt"] and (work / "submitted.txt").read_text() == "mine"


@pytest.mark.skipif(not sandbox.sandboxed(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_a_link_handed_in_beside_the_notebook_shows_the_kernel_nothing(tmp_path):
    """bwrap runs as root for a root grader: a link in the notebook's folder must stay a link, not mount its target."""
    work, private, secret = tmp_path / "work", tmp_path / "private", tmp_path / "answers.txt"
    work.mkdir(), private.mkdir()
    secret.write_text("the answers")
    (work / "answers").symlink_to(secret)
    (work / "course").symlink_to(REPO_ROOT)
    script = "cat answers; ls course/solutions; readlink answers"
    out = subprocess.run(sandbox.bwrap_command(work, private, 16 * 2**20) + ["--", "sh", "-c", script],
                         capture_output=True, text=True)
    assert "the answers" not in out.stdout and "00_start_here" not in out.stdout, out
    assert out.stdout.strip() == str(secret), out  # the link is still there, pointing where it did


def test_the_grader_reads_the_kernels_log_only_as_a_plain_file(tmp_path):
    """The kernel may own its connection folder: a link or a pipe in place of its log is not read through."""
    from coursetools.grading.autograder import _kernel_log_end

    secret = tmp_path / "secret.txt"
    secret.write_text("root's own")
    log = tmp_path / "kernel.log"
    log.write_text("x" * 10_000 + "\nModuleNotFoundError: No module named 'ipykernel'")
    assert _kernel_log_end(log).endswith("No module named 'ipykernel'") and len(_kernel_log_end(log)) <= 8192
    log.unlink()
    log.symlink_to(secret)
    assert _kernel_log_end(log) == ""
    log.unlink()
    os.mkfifo(log)
    assert _kernel_log_end(log) == ""  # and it did not wait for a writer
    assert _kernel_log_end(tmp_path / "missing.log") == ""


@pytest.mark.skipif(not sandbox._cgroup_roots().get("pids"), reason="no writable cgroup here (needs root)")
def test_processes_are_capped_for_the_notebook_as_a_whole():
    """RLIMIT_NPROC does not bind root: the kernel's control group caps how many processes it runs at once."""
    name = f"test-{os.getpid()}"
    child = ("import subprocess, sys\n"
             "sys.path.insert(0, sys.argv[1])\n"
             "from coursetools.grading import sandbox\n"
             f"made = sandbox.cgroup_limits({name!r}, 20, 2**30)\n"
             "started = 0\n"
             "try:\n"
             "    for _ in range(60):\n"
             "        subprocess.Popen(['sleep', '30'])\n"
             "        started += 1\n"
             "except OSError:\n"
             "    pass\n"
             "print(len(made), started)\n"
             "subprocess.run(['pkill', '-f', 'sleep 30'])\n")
    out = subprocess.run([sys.executable, "-c", child, str(REPO_ROOT)], capture_output=True, text=True, timeout=120)
    sandbox.remove_cgroups(name)
    made, started = map(int, out.stdout.split()[:2])
    assert made >= 1 and started < 20, out
    assert not any((root / sandbox.CGROUP_PARENT / name).exists() for root in sandbox._cgroup_roots().values())


def test_a_kernel_that_cannot_start_stops_grading_once(course, graded):
    config = quick()
    config.GraderExecute.memory_limit = 2**20  # 1 MB: Python cannot even start
    with pytest.raises(grading.GradingError, match="could not start") as error:
        grading.autograde(LESSON, course, ["full", "wrong"], overrides=config)
    assert "The kernel said" in str(error.value)


# ---------------------------------------------------------------- the sandbox

@pytest.mark.skipif(not sandbox.sandboxed(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_sandbox_blocks_the_vandal(graded, course, listener):
    result = graded["vandal"]
    assert result.sandboxed is True
    nb = autograded(course, "vandal")
    text = "".join(o.get("text", "") for o in nb.cells[cell_index(nb, "ex_to_fahrenheit")].outputs)
    attempts = [line for line in text.splitlines() if ": " in line and line.split(": ")[1][:7] in ("DONE", "blocked")]
    assert len(attempts) == 9, text[:2000]
    # a root grader's kernel reads root's files only where it had to stay root, which grading warned of
    stays_root = os.getuid() == 0 and sandbox.kernel_user_warning() is not None
    assert all("blocked" in line for line in attempts if not (stays_root and "secrets" in line)), attempts
    assert "dropped by the grader" in text and len(text) < 2_500_000
    assert not listener[1], "the sandboxed kernel reached the grading machine's network"
    assert (course / "grading" / "gradebook.db").exists() and graded["full"].score == 2
    leftovers = subprocess.run(["pgrep", "-f", f"sleep {SLEEP}"], capture_output=True, text=True).stdout
    assert not leftovers.strip(), "a process started by a graded notebook outlived grading"


def test_grading_works_unsandboxed_with_one_warning(course, graded, monkeypatch, capsys):
    monkeypatch.setenv(sandbox.ENV_SANDBOX, "none")
    monkeypatch.setattr(grading, "_warned_before_grading", False)
    first = grading.autograde(LESSON, course, ["full"], overrides=quick())
    grading.autograde(LESSON, course, ["renamed"], overrides=quick())  # refused before any kernel starts
    err = capsys.readouterr().err
    assert err.count("UNSANDBOXED") == 1 and "COURSE_SANDBOX=none is set" in err and "not installed" not in err
    assert first[0].status == "graded" and first[0].score == 2 and first[0].sandboxed is False
    assert "UNSANDBOXED graded" in grading.format_table(first)  # every row says so, not only one warning


def test_answers_to_the_solution_cells_are_what_the_scan_reads():
    nb = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    cells = {text for _, text in scan.learner_cells(nb, nb)}
    assert {c.source for c in solution_cells(nb).values()} <= cells


@pytest.mark.skipif(not sandbox._cgroup_roots().get("memory"), reason="no writable memory cgroup here (needs root)")
def test_the_connection_folder_is_bounded_by_the_kernels_memory():
    """The kernel must write its sockets into the connection folder; anything else it writes there is bounded.

    The folder lives in shared memory, whose pages count against the kernel's memory cgroup: a kernel capped
    at 64 MiB that writes 200 MiB there is stopped well before the end.
    """
    root = sandbox.private_root()
    assert root == "/dev/shm"
    private = Path(tempfile.mkdtemp(prefix="grader-test-", dir=root))
    name = private.name
    child = ("import sys\n"
             "sys.path.insert(0, sys.argv[1])\n"
             "from coursetools.grading import sandbox\n"
             f"sandbox.cgroup_limits({name!r}, 64, 64 * 2**20)\n"
             "written = 0\n"
             "try:\n"
             "    for i in range(50):\n"
             f"        with open({str(private)!r} + f'/junk{{i}}', 'wb') as out:\n"
             "            out.write(b'x' * 4 * 2**20)\n"
             "        written += 4\n"
             "finally:\n"
             "    print(written, flush=True)\n")
    try:
        out = subprocess.run([sys.executable, "-c", child, str(REPO_ROOT)], capture_output=True, text=True, timeout=120)
        written = int(out.stdout.split()[0]) if out.stdout.split() else 0
        kept = sum(p.stat().st_size for p in private.iterdir()) // 2**20
        assert written < 200 and kept <= 64, (written, kept, out)
    finally:
        shutil.rmtree(private, ignore_errors=True)
        sandbox.remove_cgroups(name)


def test_data_reached_through_a_link_is_given_to_the_kernel_where_it_is_mounted(tmp_path):
    """The sandbox mounts COURSE_DATA's real folder; the kernel must be told that folder, not the link to it."""
    real = tmp_path / "disk" / "course-data"
    real.mkdir(parents=True)
    link = tmp_path / "course-data"
    link.symlink_to(real)
    env = sandbox.kernel_environment({"COURSE_DATA": str(link), "GRADEBOOK_PASSWORD": "x"})
    assert env == {"COURSE_DATA": str(real.resolve())}
