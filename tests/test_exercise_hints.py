"""No exercise gives its solution away: at most half of a solution's code lines appear verbatim in the learner notebook.

For every exercise (a solution cell of ``solutions/NN_*/NN_*.ipynb``), the
*counted lines* are the lines between ``### BEGIN SOLUTION`` and ``### END
SOLUTION`` (the whole cell when it has no markers), each stripped, without:

- blank lines, comment lines, and a line's trailing comment;
- docstrings and other lines inside a triple-quoted string;
- trivial lines: fewer than two *content tokens*, where a content token is a
  name that is not a Python keyword, a number or a string literal: ``)``,
  ``else:``, ``pass`` and ``return x`` do not count, ``x.item()`` and
  ``model.train()`` (two each) do. A line that says little on its own must not
  decide whether a solution is given away;
- for a fix-the-bug exercise (a ``starter`` in the cell's metadata, lesson 09):
  lines that are also in the starter program, so only the lines the fix
  changes count.

A counted line is *shown* when it occurs verbatim (as a substring, after
stripping) anywhere in the learner notebook ``notebooks/NN_*/NN_*.ipynb``
(code and text cells) outside that exercise's own cell (its stub, or the
starter program). The test fails for an exercise whose shown share is above
one half, naming the lines. The table of every exercise::

    .venv/bin/python -m tests.test_exercise_hints [lesson ...]
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from helpers.starters import starter_of

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MAX_SHARE = 0.5
MIN_CONTENT_TOKENS = 2
_TOKEN = re.compile(r"""[A-Za-z_]\w*|\d+(?:\.\d+)?|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""")
_TRIPLE = ('"""', "'''")


@dataclass
class Exercise:
    """One exercise's counted solution lines and which of them the learner notebook shows."""

    lesson: str
    name: str
    counted: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return len(self.shown) / len(self.counted) if self.counted else 0.0


def content_tokens(line: str) -> int:
    """Names (not keywords), numbers and string literals in a line of code."""
    return sum(1 for token in _TOKEN.findall(line) if not keyword.iskeyword(token))


def _without_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` inside a string literal is kept)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote and line[i - 1] != "\\":
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i].rstrip()
    return line


def solution_lines(source: str) -> list[str]:
    """The counted lines of a solution cell's source (see the module docstring), stripped, in order."""
    lines = source.splitlines()
    if BEGIN in source:
        inside, kept = False, []
        for line in lines:
            if line.strip().startswith(BEGIN):
                inside = True
            elif line.strip().startswith(END):
                inside = False
            elif inside:
                kept.append(line)
        lines = kept
    counted, in_string = [], None
    for raw in lines:
        line = raw.strip()
        if in_string:
            if in_string in line:
                in_string = None
            continue
        opener = next((q for q in _TRIPLE if line.startswith(q) or line.startswith(("r" + q, "f" + q))), None)
        if opener:
            rest = line[line.index(opener) + 3:]
            in_string = None if opener in rest else opener
            continue
        if not line or line.startswith("#"):
            continue
        line = _without_comment(line)
        if content_tokens(line) >= MIN_CONTENT_TOKENS:
            counted.append(line)
    return counted


def _cells(path: Path) -> list:
    return nbformat.read(path, as_version=4).cells


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if meta.get("solution") else None


def exercises(lesson: str) -> list[Exercise]:
    """Every exercise of a lesson (``01_tensors``) with its counted and shown lines."""
    solution = ROOT / "solutions" / lesson / f"{lesson}.ipynb"
    learner = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    learner_cells = _cells(learner)
    found = []
    for cell in _cells(solution):
        name = _grade_id(cell)
        if name is None or cell.cell_type != "code":
            continue
        counted = solution_lines(cell.source)
        starter = starter_of(cell)
        if starter:
            given = {line.strip() for line in starter.splitlines()}
            counted = [line for line in counted if line not in given]
        elsewhere = "\n".join(c.source for c in learner_cells if _grade_id(c) != name)
        found.append(Exercise(lesson, name, counted, [line for line in counted if line in elsewhere]))
    return found


LESSONS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists()
                 and (ROOT / "notebooks" / p.name / f"{p.name}.ipynb").exists())
EXERCISES = [exercise for lesson in LESSONS for exercise in exercises(lesson)]


@pytest.mark.parametrize("exercise", EXERCISES, ids=[f"{e.lesson}:{e.name}" for e in EXERCISES])
def test_the_notebook_does_not_show_most_of_the_solution(exercise: Exercise):
    assert exercise.share <= MAX_SHARE, (
        f"{exercise.lesson} {exercise.name}: {len(exercise.shown)} of {len(exercise.counted)} solution lines "
        f"({exercise.share:.0%}) appear verbatim in the learner notebook outside the exercise's cell:\n  "
        + "\n  ".join(exercise.shown))


def test_the_line_rule():
    assert solution_lines(f'def f(x):\n    {BEGIN}\n    """Doc.\n\n    more."""\n    # a comment\n    y = x + 1  # why\n'
                          f"    else:\n    return y\n    )\n    total += loss.item()\n    {END}\n") == [
        "y = x + 1", "total += loss.item()"]
    assert content_tokens("return x") == 1 and content_tokens("x.item()") == 2
    assert _without_comment("s = '#'  # c") == "s = '#'"


def main(argv: list[str]) -> int:
    chosen = [e for e in EXERCISES if not argv or any(a in e.lesson for a in argv)]
    print(f"{'lesson':<22} {'exercise':<28} {'lines':>5} {'shown':>5} {'share':>6}")
    for e in chosen:
        flag = "  FAIL" if e.share > MAX_SHARE else ""
        print(f"{e.lesson:<22} {e.name:<28} {len(e.counted):>5} {len(e.shown):>5} {e.share:>6.0%}{flag}")
    failing = sum(e.share > MAX_SHARE for e in chosen)
    print(f"{failing} of {len(chosen)} exercises show more than {MAX_SHARE:.0%} of their solution's lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
