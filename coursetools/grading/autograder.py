"""nbgrader's autograde, made safe for this course: the execute step and the configuration.

:class:`GraderExecute` replaces nbgrader's ``Execute`` preprocessor in autograde (only
there: ``nbgrader validate`` and the learner's own kernels are unchanged). It

- runs the notebook in the grading kernelspec (:mod:`coursetools.grading.sandbox`: bubblewrap,
  limits, the guard), over jupyter_client's ``ipc`` transport (Unix sockets in a
  private folder, because the sandbox has no network);
- limits the whole notebook's time (``notebook_timeout``) beside nbgrader's per-cell
  ``timeout``, and the bytes of output the notebook may send (``output_limit``);
- probes the guard after every graded cell and decides, from the guard's signed answer and
  not from the kernel's reply, whether the cell passed: a graded cell the guard saw raise, or
  whose answer is missing or forged, fails (and is flagged) whatever the kernel reported;
- runs every graded cell that passed in the kernel again in its own process, where the notebook's
  code cannot reach the check, the answer key or the comparisons, with the learner's functions
  called in the kernel (:mod:`coursetools.grading.verify`): where the course's answer key passes
  that run, the cell counts only if the learner's work passes it too;
- keeps text written to stderr in a graded cell (a warning, a log line) from costing
  points: nbgrader scores any stderr output as a failure, so the text is kept as an
  ordinary output that still shows in the feedback.

What it found about each notebook is in :data:`NOTES` (this process) for
:func:`coursetools.grading.autograde` to report.

:func:`configure` is what ``nbgrader_config.py`` calls.
"""

from __future__ import annotations

import ast
import hmac
import html
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from nbclient.util import run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, Execute, OverwriteCells
from traitlets import Bool, Integer

from coursetools.grading import sandbox, verify

# What GraderExecute found, by the autograded notebook's path: {"problems": [...], "timed_out": bool, ...}
NOTES: dict[str, dict[str, Any]] = {}
# Set when the grading kernel could not even start (before any of the learner's code ran): the kernel's own
# error, so that grading stops once with it instead of calling every learner's notebook a crash.
KERNEL_START_ERROR: list[str] = []

# Files of a submission that Python or Jupyter would import or load from the kernel's folder:
# nbgrader must not copy them next to the notebook it runs (CourseDirectory.ignore).
IMPORTABLE = ["*.py", "*.pyc", "*.pyo", "*.pyd", "*.so", "*.pth", "*.pyz", "*.egg", "*.whl", "*.zip",
              "*_config.json", "*.ipy", "__init__*"]


# Cells whose clock limit is LONG_CELL_TIMEOUT_S instead of the per-cell one (which is there to end a learner's
# infinite loop), because a busy grading machine, where clock time can be twice the CPU time or more, would
# cut them while they do what the lesson asks:
# - CPU_TIMED: a training that its check stops by CPU time (lesson 10's capstone), so the clock need not;
# - COMPILES: a cell that runs torch.compile (lesson 07), whose time is the compiler's, not the learner's code.
CPU_TIMED = "cpu-timed"
COMPILES = "compiles"
LONG_CELL_TIMEOUT_S = 600


def cell_timeout(cell: NotebookNode, default: int | None) -> int | None:
    """The clock limit of one cell: ``default`` (nbgrader's per-cell timeout), longer for a CPU-timed or
    compiling cell."""
    tags = cell.get("metadata", {}).get("tags", [])
    if (CPU_TIMED in tags or COMPILES in tags) and default and default > 0:
        return max(default, LONG_CELL_TIMEOUT_S)
    return default


def timeout_func(default: int | None):
    """nbclient's ``timeout_func`` for nbgrader's Execute (Validate, ``make progress``): see :func:`cell_timeout`."""
    return lambda cell: cell_timeout(cell, default)


def configure(c) -> None:
    """Set up autograde in an nbgrader configuration ``c`` (called from nbgrader_config.py)."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput,
                                        SaveAutoGrades)

    defaults = Autograde.class_traits()["autograde_preprocessors"].default()
    expected = [Execute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties,
                CheckCellMetadata]
    assert defaults == expected, "nbgrader's autograde steps changed: review coursetools/grading/autograder.py"
    c.Autograde.autograde_preprocessors = [GraderExecute, *defaults[1:]]
    sanitize = Autograde.class_traits()["sanitize_preprocessors"].default()
    assert OverwriteCells in sanitize, "nbgrader's autograde steps changed: review coursetools/grading/autograder.py"
    c.Autograde.sanitize_preprocessors = [RestoringOverwriteCells if p is OverwriteCells else p for p in sanitize]
    # a graded cell the learner deleted, or whose nbgrader metadata was lost, is put back from the source
    c.OverwriteCells.add_missing_cells = True
    # feedback shows each graded cell's outcome and the check's message, not the hidden tests
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.converters import GenerateFeedback
    from nbgrader.preprocessors import GetGrades

    feedback = GenerateFeedback.class_traits()["preprocessors"].default()
    assert feedback == [GetGrades, CSSHTMLHeaderPreprocessor], \
        "nbgrader's feedback steps changed: review coursetools/grading/autograder.py"
    c.GenerateFeedback.preprocessors = [GetGrades, FeedbackWithoutHiddenTests, CSSHTMLHeaderPreprocessor]


def _kernel_log_end(log: Path, size: int = 8192) -> str:
    """The last ``size`` bytes the kernel wrote to its terminal, as text; "" if there is no such plain file.

    The kernel may own its connection folder (a root grader's kernel runs as a user of its own), so it could
    leave a link or a pipe in the log's place: the grader reads neither.
    """
    import stat

    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        file.seek(max(0, info.st_size - size))
        return file.read(size).decode(errors="replace").strip()


class GraderExecute(Execute):
    """nbgrader's Execute, in the grading sandbox, with whole-notebook and output limits and the guard's probe."""

    notebook_timeout = Integer(20 * 60, help="seconds the whole notebook may run when autograded").tag(config=True)
    output_limit = Integer(2 * 2**20, help="bytes of output a notebook may produce (the rest is dropped)").tag(config=True)
    memory_limit = Integer(sandbox.DEFAULT_MEMORY, help="bytes of memory the kernel may allocate").tag(config=True)
    process_limit = Integer(sandbox.DEFAULT_PROCESSES,
                            help="processes and threads the notebook may run at once (a cgroup as root, RLIMIT_NPROC "
                                 "in the sandbox otherwise)").tag(config=True)

    run_in_grader = Bool(True, help="run each graded cell that passed in the kernel again in the grader's own process, "
                                    "where the answer key can run it (coursetools.grading.verify)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None):
        self.kernel_name = sandbox.install_kernelspec()
        # short: Unix socket paths are <= 107 bytes. The kernel must write there (its sockets); in shared memory,
        # whatever else it writes there counts against its control group's memory limit, so it is bounded.
        self._private = Path(tempfile.mkdtemp(prefix="grader-", dir=sandbox.private_root()))
        self._secret = secrets.token_hex(16)
        (self._private / "secret").write_text(self._secret)
        self._names = _course_locked_names(resources) or locked_names(nb)
        self._started = time.monotonic()
        self._output_bytes = 0
        self._notes = {"problems": [], "timed_out": False, "output_truncated": False,
                       "sandbox": "bwrap" if sandbox.sandboxed() else "none"}
        self._graded_now = False
        self._nonce = ""
        self._verdict: str | None = None  # why the graded cell just run failed, in the grader's judgement
        self._notebook_limit = False
        self.timeout_func = self._cell_timeout
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        path = str(folder / f"{resources['unique_key']}.ipynb")
        before = set(folder.iterdir()) if folder.is_dir() else set()
        try:
            return super().preprocess(nb, resources, km)
        finally:
            NOTES[path] = self._notes
            sandbox.remove_cgroups(self._private.name)
            shutil.rmtree(self._private, ignore_errors=True)
            # what the kernel wrote next to its notebook (checkpoints, or a copy of the hidden tests) must not
            # reach the feedback folder, which nbgrader fills with every file of the autograded folder
            for made in (set(folder.iterdir()) if folder.is_dir() else set()) - before:
                if made.is_dir() and not made.is_symlink():
                    shutil.rmtree(made, ignore_errors=True)
                else:
                    made.unlink(missing_ok=True)

    # ------------------------------------------------------------ the kernel

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.transport = "ipc"
        km.ip = str(self._private / "k")
        km.connection_file = str(self._private / "connection.json")
        return km

    async def async_start_new_kernel(self, **kwargs):
        env = sandbox.kernel_environment(dict(os.environ))  # an allow-list: the grader's secrets stay with it
        modules = sorted({module for module, _ in self._names.values()}
                         | {f"{module}.{attribute}" for module, attribute in self._names.values() if attribute})
        env[sandbox.ENV_GUARD] = json.dumps({"secret_file": str(self._private / "secret"), "modules": modules,
                                             "names": self._names})
        env[sandbox.ENV_MEMORY] = str(self.memory_limit)
        env[sandbox.ENV_PROCESSES] = str(self.process_limit)
        kwargs["env"] = env
        return await super().async_start_new_kernel(**kwargs)

    async def async_start_new_kernel_client(self):
        try:
            kc = await super().async_start_new_kernel_client()
        except Exception as error:
            said = _kernel_log_end(self._private / "kernel.log")
            KERNEL_START_ERROR.append(said[-2000:] or f"{type(error).__name__}: {error}")
            raise
        execute = kc.execute

        def execute_with_probe(code, *args, **kwargs):
            if self._graded_now:
                self._nonce = secrets.token_hex(8)  # one answer per cell: an old answer cannot be replayed
                kwargs["user_expressions"] = {"integrity": f"{sandbox.PROBE}({self._nonce!r})"}
                kwargs["store_history"] = False  # not in In/_ih, where a later cell could print the hidden tests
            return execute(code, *args, **kwargs)

        kc.execute = execute_with_probe
        return kc

    # nbclient binds its synchronous names to its own coroutines: point them at these
    start_new_kernel = run_sync(async_start_new_kernel)
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _cell_timeout(self, cell: NotebookNode) -> int:
        """nbgrader's per-cell limit (longer for a CPU-timed cell), or what is left of the notebook's when that is less."""
        left = max(1, int(self.notebook_timeout - (time.monotonic() - self._started)))
        timeout = cell_timeout(cell, self.timeout)
        self._notebook_limit = not timeout or timeout < 0 or left < timeout
        return left if self._notebook_limit else timeout

    # ------------------------------------------------------------ each cell

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        nbgrader = cell.metadata.get("nbgrader", {})
        self._graded_now = bool(nbgrader.get("grade")) and cell.cell_type == "code"
        if cell.cell_type == "code" and time.monotonic() - self._started > self.notebook_timeout:
            self._notes["timed_out"] = True
            cell.outputs = [NotebookNode(output_type="error", ename="NotebookTimeoutError", evalue="",
                                         traceback=[f"NotebookTimeoutError: the notebook ran past its "
                                                    f"{self.notebook_timeout} s limit; this cell was not run"])]
            return cell, resources
        self._verdict = None
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            self._graded_now = False
        if self._notebook_limit and any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
            self._notes["timed_out"] = True
        if nbgrader.get("grade") and cell.cell_type == "code":
            cell.outputs = [_kept_stderr(o) for o in cell.outputs]
            if self.run_in_grader and not self._verdict and not any(o.get("output_type") == "error"
                                                                    for o in cell.outputs):
                self._run_in_grader(cell)
            if self._verdict and not any(o.get("output_type") == "error" for o in cell.outputs):
                # nbgrader scores a cell by its outputs: the grader's verdict becomes one it cannot miss
                cell.outputs.append(NotebookNode(output_type="error", ename="GraderVerdict", evalue=self._verdict,
                                                 traceback=[f"GraderVerdict: {self._verdict}"]))
        return cell, resources

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        cell, reply = kwargs["cell"], kwargs["execute_reply"]
        if not cell.metadata.get("nbgrader", {}).get("grade") or cell.cell_type != "code":
            return
        grade_id = cell.metadata["nbgrader"].get("grade_id", "?")
        if reply is None or reply["content"].get("status") != "ok":
            # failed (IPython evaluates no expressions then): it must show as failed even if its error was dropped
            self._verdict = "the cell failed (the kernel's reply says so)"
            return
        answer = reply["content"].get("user_expressions", {}).get("integrity", {})
        try:
            sealed = json.loads(ast.literal_eval(answer["data"]["text/plain"]))
            payload = sealed["payload"]
            if not hmac.compare_digest(sealed["signature"], sandbox.sign(self._secret, payload)):
                raise ValueError("bad signature")
            found = json.loads(payload)
            if found["nonce"] != self._nonce:
                raise ValueError("an answer to another probe")
        except Exception:
            self.log.warning("integrity probe answered %r", answer)
            self._notes["problems"].append(f"{grade_id}: the grader's integrity probe was replaced or removed, or "
                                           "its answer was rewritten")
            self._verdict = "the grader could not confirm this cell's result (its integrity probe was tampered with)"
            return
        self._notes["problems"] += [f"{grade_id}: {problem}" for problem in found["problems"]]
        if found["success"] is not True:
            error = found["error"] or "an error"
            self._notes["problems"].append(f"{grade_id}: the cell raised {error}, but the kernel reported success "
                                           "(its messages were rewritten)")
            self._verdict = f"the cell raised {error} (the kernel's messages said otherwise)"

    def _run_in_grader(self, cell: NotebookNode) -> None:
        """Run a graded cell that passed in the kernel again in the grader's process (see :mod:`verify`)."""
        grade_id = cell.metadata["nbgrader"].get("grade_id", "?")
        if verify.runs_in_grader(cell.source, self._names) is not None:
            return  # this check needs what only the kernel has: the kernel's run, watched by the guard, counts
        self._call_timeout = self._cell_timeout(cell)
        run, failure = verify.run_cell(cell.source, self._names, self._send_to_kernel)
        if run.unverifiable:
            self._notes["problems"].append(f"{grade_id}: the grader could not run this cell's checks again outside "
                                           f"the kernel: {run.unverifiable}")
        elif run.kernel_only:  # honest work the grader cannot rerun (a model of the learner's own class): not a problem
            self._notes.setdefault("kernel_only", []).append(f"{grade_id}: {run.kernel_only}")
        elif failure:
            self._notes["problems"].append(f"{grade_id}: the cell passed in the kernel but failed when the grader ran "
                                           f"its checks again in its own process")
            # preprocess_cell turns the verdict into the cell's GraderVerdict error, as for the probe's verdicts
            self._verdict = f"the grader ran this cell's checks again, outside your kernel, and they failed: {failure}"
        else:
            self._notes.setdefault("verified", []).append(grade_id)

    def _send_to_kernel(self, request: str) -> str:
        """One call of a learner's function for :mod:`verify`: the kernel's answer (text), or NotVerifiable."""
        return run_sync(self._async_send_to_kernel)(request)

    async def _async_send_to_kernel(self, request: str) -> str:
        from jupyter_core.utils import ensure_async

        msg_id = self.kc.execute("", silent=True, store_history=False,
                                 user_expressions={"reply": f"{sandbox.CALL}({request!r})"})
        deadline = time.monotonic() + self._call_timeout
        while True:
            try:
                msg = await ensure_async(self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic())))
            except Exception:  # queue.Empty: the call ran past the cell's limit
                await ensure_async(self.km.interrupt_kernel())
                raise verify.NotVerifiable(f"a call did not finish within {self._call_timeout} s")
            if msg["parent_header"].get("msg_id") == msg_id:
                break
        answer = msg["content"].get("user_expressions", {}).get("reply", {})
        if answer.get("status") != "ok":
            raise verify.NotVerifiable(f"the kernel did not answer the grader's call ({answer.get('ename', 'no answer')})")
        try:
            return ast.literal_eval(answer["data"]["text/plain"])
        except Exception:
            raise verify.NotVerifiable("the kernel's answer to the grader's call is not text")

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(json.dumps(content))
        left = self.output_limit - self._output_bytes
        self._output_bytes += size
        if size <= left:
            return super().output(outs, msg, display_id, cell_index)
        if self._notes["output_truncated"]:
            return None
        self._notes["output_truncated"] = True
        if msg["msg_type"] == "stream" and left > 0:  # keep what fits of the text (earlier prints share a message)
            msg = {**msg, "content": {**content, "text": content.get("text", "")[:left]}}
            super().output(outs, msg, display_id, cell_index)
        outs.append(NotebookNode(output_type="stream", name="stdout",
                                 text=f"\n... output beyond {self.output_limit} bytes dropped by the grader ...\n"))
        return None


    def _update_display_id(self, display_id: str, msg: dict) -> None:
        # update_display replaces what earlier outputs show without passing through output(): count it too
        if msg["header"]["msg_type"] == "update_display_data":
            targets = sum(len(v) for v in self._display_id_map.get(display_id, {}).values())
            self._output_bytes += len(json.dumps(msg.get("content", {}))) * max(targets, 1)
            if self._output_bytes > self.output_limit:
                self._notes["output_truncated"] = True
                return None  # the display keeps what it showed before
        return super()._update_display_id(display_id, msg)


class RestoringOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells, whose restoring of missing graded cells does not crash.

    nbgrader 0.9.6 puts a missing graded cell after the source cell before it, but
    looks that cell up among the submission's graded and solution cells only (a
    KeyError when it is a locked cell, as the self-check cells are), and reads
    ``grade_id`` from cells whose metadata DeduplicateIds emptied (another KeyError).
    Here: after the nearest earlier source cell the submission still has, any kind.
    """

    def _present(self, nb: NotebookNode) -> dict[str, int]:
        return {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id")}

    def _located(self, nb: NotebookNode, source_cells: list) -> dict[str, int]:
        """Where each source cell is in the submission: by its id, else (a locked cell whose metadata was
        lost, as when a notebook passes through a tool that drops it) by its unchanged text."""
        where = self._present(nb)
        texts: dict[str, int] = {}
        for i, cell in enumerate(nb.cells):
            texts.setdefault(cell.source.strip(), i)
        for cell in source_cells:
            if cell.name not in where and cell.locked and cell.source.strip() in texts:
                where[cell.name] = texts[cell.source.strip()]
        return where

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_cells = source_nb.source_cells
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        for position, source_cell in enumerate(source_cells):
            if source_cell.name not in grade_cells or source_cell.name in self._present(nb):
                continue
            self.log.warning(f"Missing grade cell {source_cell.name} encountered, adding to notebook")
            cell = self.missing_cell_transform(source_cell, grade_cells[source_cell.name].max_score,
                                               is_solution=source_cell.name in solutions)
            where = self._located(nb, source_cells)
            before = [where[c.name] for c in source_cells[:position] if c.name in where]
            nb.cells.insert(max(before) + 1 if before else 0, cell)
        return nb, resources

    def add_missing_task_cells(self, nb: NotebookNode, resources: dict):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        by_name = {cell.name: cell for cell in source_nb.source_cells}
        for task_cell in source_nb.task_cells:
            if task_cell.name not in self._present(nb):
                nb.cells.append(self.missing_cell_transform(by_name[task_cell.name], task_cell.max_score, is_task=True))
        return nb, resources


class FeedbackWithoutHiddenTests(ClearHiddenTests):
    """Feedback: graded cells without their hidden tests, and their errors as one line (the check's message).

    A traceback would quote the hidden test's line; ``ename: evalue`` is what failed and why. Whatever
    else reached an output (a learner's cell printing ``In``, the cell sources IPython keeps, a file's
    contents) has every line of a hidden test taken out, in every cell.
    """

    def preprocess(self, nb: NotebookNode, resources: dict):
        self._hidden = hidden_test_lines(nb, self.begin_test_delimeter, self.end_test_delimeter)
        nb, resources = super().preprocess(nb, resources)
        for cell in nb.cells:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                _redact(output, self._hidden)
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = [f"\x1b[31m{output.ename}: {output.evalue}\x1b[0m"]
        return cell, resources


def hidden_test_lines(nb: NotebookNode, begin: str = "BEGIN HIDDEN TESTS", end: str = "END HIDDEN TESTS") -> set[str]:
    """The stripped lines of every hidden-test region of the notebook's graded cells (short ones too common to hide)."""
    lines: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        inside = False
        for line in cell.source.splitlines():
            if begin in line or end in line:
                inside = begin in line
                lines.add(line.strip())
            elif inside and len(line.strip()) >= 12:
                lines.add(line.strip())
    return lines


_REDACTED = "[a line of the hidden tests, not shown]"


def _redact(output: NotebookNode, hidden: set[str]) -> None:
    """Replace, in place, every line of ``output``'s text that holds a hidden-test line."""
    def clean(text: str) -> str:
        return "\n".join(_REDACTED if any(h in line for h in hidden) else line for line in text.split("\n"))

    if not hidden:
        return
    if "text" in output:
        output.text = clean(output.text)
    for key, value in output.get("data", {}).items():
        if isinstance(value, str) and (key.startswith("text/") or key in ("application/javascript",)):
            output.data[key] = clean(value)
    if "traceback" in output:
        output.traceback = [clean(line) for line in output.traceback]
    if "evalue" in output:
        output.evalue = clean(output.evalue)


def _kept_stderr(output: NotebookNode) -> NotebookNode:
    """A stderr stream as an output that shows the same text but does not fail the cell in nbgrader's eyes."""
    if output.get("output_type") != "stream" or output.get("name") != "stderr":
        return output
    text = output.get("text", "")
    return NotebookNode(output_type="display_data", metadata={"course_stderr": True}, data={
        "text/plain": text,
        "text/html": f'<pre style="background:#fdd;padding:2px 4px;margin:0">{html.escape(text)}</pre>'})


def _course_locked_names(resources: dict) -> dict[str, tuple[str, str | None]]:
    """:func:`locked_names` of the course's own notebook, as nbgrader's gradebook holds it (a submission may have
    lost the metadata that marks its locked cells); {} where there is no gradebook to ask."""
    from nbgrader.api import Gradebook

    found = resources.get("nbgrader", {})
    try:
        with Gradebook(found["db_url"]) as gradebook:
            source = gradebook.find_notebook(found["notebook"], found["assignment"])
            graded = {cell.name for cell in source.grade_cells}
            cells = [NotebookNode(cell_type=cell.cell_type, source=cell.source, metadata={"nbgrader": {
                "locked": bool(cell.locked), "grade": cell.name in graded}}) for cell in source.source_cells]
    except Exception:
        return {}
    return locked_names(NotebookNode(cells=cells))


def locked_names(nb: NotebookNode) -> dict[str, tuple[str, str | None]]:
    """{name: (module, attribute or None)} of every import in the notebook's locked, ungraded cells."""
    names: dict[str, tuple[str, str | None]] = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("locked") or meta.get("grade"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        names[top] = (top, None)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        names[alias.asname or alias.name] = (node.module, alias.name)
    return names
