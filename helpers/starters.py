"""Starter code: a solution cell handed out with a program to fix instead of ``raise NotImplementedError()``.

In a fix-the-bug exercise the learner's cell holds the broken program. The
lesson source writes it as its own cell right above the solution cell::

    # %% starter="ex_name"
    def broken(...):          # what the learner gets
        ...

    # %% solution="ex_name"
    def broken(...):          # the fixed program, between ### BEGIN/END SOLUTION
        ...

``coursetools.authoring`` removes the starter cell from the notebook and keeps its
source in the solution cell's metadata (``metadata["starter"]``). When nbgrader
generates the release, :class:`InsertStarters` (registered in
``nbgrader_config.py`` right after nbgrader's ``ClearSolutions``) puts that
source where ``ClearSolutions`` left its stub. The metadata stays in the
release, so tools can tell an untouched starter from a learner's edit.
"""

from __future__ import annotations

from typing import Any

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

KEY = "starter"


def starter_of(cell: Any) -> str | None:
    """The starter code stored in a cell's metadata, or None."""
    return cell.get("metadata", {}).get(KEY)


def is_untouched_starter(cell: Any) -> bool:
    """True when a solution cell still holds exactly the starter code it was handed out with."""
    starter = starter_of(cell)
    return starter is not None and cell.get("source", "").strip() == starter.strip()


class InsertStarters(NbGraderPreprocessor):
    """Replace the stub of each solution cell that has a starter with that starter (run after ClearSolutions)."""

    def preprocess_cell(self, cell: NotebookNode, resources: ResourcesDict,
                        cell_index: int) -> tuple[NotebookNode, ResourcesDict]:
        starter = starter_of(cell)
        if starter is not None and utils.is_solution(cell) and cell.cell_type == "code":
            cell.source = starter
        return cell, resources


def with_starters(preprocessors: list) -> list:
    """nbgrader's GenerateAssignment preprocessors with :class:`InsertStarters` right after ClearSolutions."""
    from nbgrader.preprocessors import ClearSolutions

    index = preprocessors.index(ClearSolutions)
    return [*preprocessors[:index + 1], InsertStarters, *preprocessors[index + 1:]]
