"""nbgrader's autograde, made safe for this course: the execute step and the configuration.

:class:`GraderExecute` replaces nbgrader's ``Execute`` preprocessor in autograde (only
there: ``nbgrader validate`` and the learner's own kernels are unchanged). It

- runs the notebook in the grading kernelspec (:mod:`coursetools.grading.sandbox`: bubblewrap,
  limits, the guard), over jupyter_client's ``ipc`` transport (Unix sockets in a
  private folder, because the sandbox has no network);
- limits the whole notebook's time (``notebook_timeout``) beside nbgrader's per-cell
  ``timeout``, and the bytes of output the notebook may send (``output_limit``);
- probes the guard after every graded cell and records what it found;
- keeps text written to stderr in a graded cell (a warning, a log line) from costing
  points: nbgrader scores any stderr output as a failure, so the text is kept as an
  ordinary output that still shows in the feedback.

What it found about each notebook is in :data:`NOTES` (this process) for
:func:`coursetools.grading.autograde` to report.

:func:`configure` is what ``nbgrader_config.py`` calls.
"""

from __future__ import annotations

import ast
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
from traitlets import Integer

from coursetools.grading import sandbox

# What GraderExecute found, by the autograded notebook's path: {"problems": [...], "timed_out": bool, ...}
NOTES: dict[str, dict[str, Any]] = {}

# Files of a submission that Python or Jupyter would import or load from the kernel's folder:
# nbgrader must not copy them next to the notebook it runs (CourseDirectory.ignore).
IMPORTABLE = ["*.py", "*.pyc", "*.pyo", "*.pyd", "*.so", "*.pth", "*.pyz", "*.egg", "*.whl", "*.zip",
              "*_config.json", "*.ipy", "__init__*"]


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
    assert feedback == [GetGrades, CSSHTMLHeaderPreprocessor], "nbgrader's feedback steps changed: review coursetools/grading/autograder.py"
    c.GenerateFeedback.preprocessors = [GetGrades, FeedbackWithoutHiddenTests, CSSHTMLHeaderPreprocessor]


class GraderExecute(Execute):
    """nbgrader's Execute, in the grading sandbox, with whole-notebook and output limits and the guard's probe."""

    notebook_timeout = Integer(20 * 60, help="seconds the whole notebook may run when autograded").tag(config=True)
    output_limit = Integer(2 * 2**20, help="bytes of output a notebook may produce (the rest is dropped)").tag(config=True)
    memory_limit = Integer(sandbox.DEFAULT_MEMORY, help="bytes of memory the kernel may allocate").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None):
        self.kernel_name = sandbox.install_kernelspec()
        self._private = Path(tempfile.mkdtemp(prefix="grader-"))  # short: Unix socket paths are <= 107 bytes
        self._secret = secrets.token_hex(16)
        (self._private / "secret").write_text(self._secret)
        self._names = locked_names(nb)
        self._started = time.monotonic()
        self._output_bytes = 0
        self._notes = {"problems": [], "timed_out": False, "output_truncated": False,
                       "sandbox": "bwrap" if sandbox.sandboxed() else "none"}
        self._graded_now = False
        self._notebook_limit = False
        self.timeout_func = self._cell_timeout
        path = str(Path(resources.get("metadata", {}).get("path") or ".", f"{resources['unique_key']}.ipynb").resolve())
        try:
            return super().preprocess(nb, resources, km)
        finally:
            NOTES[path] = self._notes
            shutil.rmtree(self._private, ignore_errors=True)

    # ------------------------------------------------------------ the kernel

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.transport = "ipc"
        km.ip = str(self._private / "k")
        km.connection_file = str(self._private / "connection.json")
        return km

    async def async_start_new_kernel(self, **kwargs):
        env = dict(os.environ)
        modules = sorted({module for module, _ in self._names.values()}
                         | {f"{module}.{attribute}" for module, attribute in self._names.values() if attribute})
        env[sandbox.ENV_GUARD] = json.dumps({"secret_file": str(self._private / "secret"), "modules": modules,
                                             "names": self._names})
        env[sandbox.ENV_MEMORY] = str(self.memory_limit)
        kwargs["env"] = env
        return await super().async_start_new_kernel(**kwargs)

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        execute = kc.execute

        def execute_with_probe(code, *args, **kwargs):
            if self._graded_now:
                kwargs["user_expressions"] = {"integrity": f"{sandbox.PROBE}()"}
            return execute(code, *args, **kwargs)

        kc.execute = execute_with_probe
        return kc

    # nbclient binds its synchronous names to its own coroutines: point them at these
    start_new_kernel = run_sync(async_start_new_kernel)
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _cell_timeout(self, cell: NotebookNode) -> int:
        """nbgrader's per-cell limit, or what is left of the notebook's when that is less."""
        left = max(1, int(self.notebook_timeout - (time.monotonic() - self._started)))
        self._notebook_limit = not self.timeout or self.timeout < 0 or left < self.timeout
        return left if self._notebook_limit else self.timeout

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
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            self._graded_now = False
        if self._notebook_limit and any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
            self._notes["timed_out"] = True
        if nbgrader.get("grade") and cell.cell_type == "code":
            cell.outputs = [_kept_stderr(o) for o in cell.outputs]
        return cell, resources

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        cell, reply = kwargs["cell"], kwargs["execute_reply"]
        if not cell.metadata.get("nbgrader", {}).get("grade") or reply["content"].get("status") != "ok":
            return  # a failed graded cell scores 0 whatever was patched (and IPython evaluates no expressions)
        answer = reply["content"].get("user_expressions", {}).get("integrity", {})
        grade_id = cell.metadata["nbgrader"].get("grade_id", "?")
        try:
            found = json.loads(ast.literal_eval(answer["data"]["text/plain"]))
            if found.get("secret") != self._secret:
                raise ValueError("wrong secret")
        except Exception:
            self.log.warning("integrity probe answered %r", answer)
            self._notes["problems"].append(f"{grade_id}: the grader's integrity probe was replaced or removed")
            return
        self._notes["problems"] += [f"{grade_id}: {problem}" for problem in found["problems"]]

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
            where = self._present(nb)
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

    A traceback would quote the hidden test's line; ``ename: evalue`` is what failed and why.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = [f"\x1b[31m{output.ename}: {output.evalue}\x1b[0m"]
        return cell, resources


def _kept_stderr(output: NotebookNode) -> NotebookNode:
    """A stderr stream as an output that shows the same text but does not fail the cell in nbgrader's eyes."""
    if output.get("output_type") != "stream" or output.get("name") != "stderr":
        return output
    text = output.get("text", "")
    return NotebookNode(output_type="display_data", metadata={"course_stderr": True}, data={
        "text/plain": text,
        "text/html": f'<pre style="background:#fdd;padding:2px 4px;margin:0">{html.escape(text)}</pre>'})


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
