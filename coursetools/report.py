"""The class report: what the class scored, which exercises it failed, and with which mistakes.

Reads the gradebook (scores of every graded cell, through nbgrader's Gradebook API),
the autograded notebooks (the checks' failure messages, from the graded cells'
error outputs) and grading/results/ (which submissions need a person, and why),
and writes into grading/report/:

- ``report.html``: one self-contained page (figures embedded as base64 PNG);
- ``scores_<lesson>.png``: the score distribution of each lesson;
- ``pass_rate.png``: the pass rate of each exercise, worst first;
- ``gradebook_import.csv``: one row per learner, one column per lesson, for a learning
  platform's CSV grade import (a lesson that needs a person is left empty);
- ``scores.csv``: one row per learner and lesson; a submission that needs a
  person says so in the score column instead of a 0.

A failure message is counted once per submission and exercise, with its numbers
taken out (``to_fahrenheit([0.0, 100.0])`` and ``to_fahrenheit([36.6])`` are the
same mistake), so the counts say how many learners made each mistake.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from coursetools import grading
from coursetools.results import course_id, gradebook_url, load_results

NEEDS_A_PERSON = "needs a person"
NOT_SUBMITTED = "not submitted"
TOP_MISTAKES = 5

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_NUMBER_LIST = re.compile(r"[\[(][,\s\[\]()…]*#[#,\s\[\]()…]*[\])]")


def normalize(message: str) -> str:
    """A failure message with its numbers taken out, so that the same mistake groups together.

    Steps:
        1. Each number becomes ``#`` (names with digits such as ``float32`` stay).
        2. Each bracketed list of numbers (a tensor's values, a shape) becomes ``[…]``.
    """
    text = _NUMBER.sub("#", " ".join(message.split()))
    return _NUMBER_LIST.sub(lambda m: "[…]" if m.group(0)[0] == "[" else "(…)", text)[:300]


def failure_message(output: dict) -> str:
    """What a graded cell's error output says: a check's own message, else the error and its text."""
    if output.get("ename") == "CheckError":
        return output.get("evalue", "")
    return f"{output.get('ename')}: {output.get('evalue', '')}"


def exercises(course_root: Path, lesson: str) -> dict[str, str]:
    """{graded cell: its exercise}: the solution cell it follows in the lesson's source notebook."""
    owner: dict[str, str] = {}
    for path in sorted((course_root / "solutions" / lesson).glob("*.ipynb")):
        current = None
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution"):
                current = meta["grade_id"]
            if meta.get("grade"):
                owner[meta["grade_id"]] = current or meta["grade_id"]
    return owner


@dataclass
class Submission:
    student: str
    lesson: str
    status: str
    score: float | None
    max_score: float
    detail: str = ""
    sandboxed: bool | None = None  # False: this learner's code ran with the grader's rights
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # graded cell: (score, max)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # exercise: {normalized: as the learner saw it}

    @property
    def needs_a_person(self) -> bool:
        return self.status not in ("graded", NOT_SUBMITTED)


@dataclass
class ExerciseSummary:
    lesson: str
    exercise: str
    attempts: int
    passed: int
    mistakes: list[tuple[str, int, str]]  # (normalized message, learners, an example as shown), most frequent first

    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempts if self.attempts else 0.0

    @property
    def label(self) -> str:
        return f"{self.lesson} / {self.exercise}"


@dataclass
class ClassReport:
    lessons: list[str]
    max_scores: dict[str, float]
    submissions: list[Submission]
    exercises: list[ExerciseSummary]

    def graded_scores(self, lesson: str) -> list[float]:
        return [s.score for s in self.submissions if s.lesson == lesson and s.status == "graded" and s.score is not None]

    def needing_a_person(self) -> list[Submission]:
        return [s for s in self.submissions if s.needs_a_person]


def collect(course_root: Path, lessons: list[str] | None = None, db_url: str | None = None,
            progress: bool = True) -> ClassReport:
    """Read the gradebook, the saved results and the autograded notebooks into a ClassReport."""
    from nbgrader.api import Gradebook, MissingEntry

    course_root = Path(course_root).resolve()
    lessons = lessons or grading.lessons(course_root)
    saved = load_results(course_root)
    found: dict[tuple[str, str], Submission] = {}
    max_scores: dict[str, float] = {}
    with Gradebook(gradebook_url(course_root, db_url), course_id(course_root)) as gradebook:
        students = {s.id for s in gradebook.students}
        for lesson in tqdm(lessons, desc="gradebook", unit="lesson", disable=not progress):
            try:
                assignment = gradebook.find_assignment(lesson)
            except MissingEntry:
                continue
            max_scores[lesson] = assignment.max_score
            for sub in assignment.submissions:
                cells = {g.name: (g.score, g.max_score) for nb in sub.notebooks for g in nb.grades}
                found[sub.student_id, lesson] = Submission(sub.student_id, lesson, "graded", sub.score, sub.max_score,
                                                           cells=cells)
    for (student, lesson), result in saved.items():
        if lesson not in lessons:
            continue
        students.add(student)
        sub = found.setdefault((student, lesson), Submission(student, lesson, "graded", None, result["max_score"]))
        # Every reason the grader gave where it gives several, else its one detail.
        sub.status, sub.detail = result["status"], "; ".join(result.get("reasons") or []) or result.get("detail", "")
        sub.sandboxed = result.get("sandboxed")
        if sub.needs_a_person:
            sub.score = None  # nbgrader may hold a 0 here; it is not a genuine zero
    for student in students:
        for lesson in max_scores:
            found.setdefault((student, lesson), Submission(student, lesson, NOT_SUBMITTED, None, max_scores[lesson]))
    submissions = sorted(found.values(), key=lambda s: (lessons.index(s.lesson), s.student))
    owners = {lesson: exercises(course_root, lesson) for lesson in lessons}
    bar = tqdm(submissions, desc="report", unit="submission", disable=not progress)
    for sub in bar:
        bar.set_postfix_str(f"learner {sub.student}, lesson {sub.lesson}", refresh=False)
        if sub.status == "graded":
            sub.failures = read_failures(course_root, sub.student, sub.lesson, owners[sub.lesson])
    return ClassReport(lessons, max_scores, submissions, summarize(lessons, submissions, owners))


def read_failures(course_root: Path, student: str, lesson: str, owner: dict[str, str]) -> dict[str, dict[str, str]]:
    """{exercise: {normalized failure message: the message itself}} from the autograded notebooks' graded cells."""
    failures: dict[str, dict[str, str]] = {}
    # only the lesson's own notebooks, and only the graded cells it defines: a learner's kernel can write
    # files into its autograded folder (a notebook that is not JSON, or one with made-up failures)
    folder = course_root / "grading" / "autograded" / student / lesson
    for name in sorted(p.name for p in (course_root / "solutions" / lesson).glob("*.ipynb")):
        try:
            cells = nbformat.read(folder / name, as_version=4).cells
        except Exception:  # noqa: BLE001 - missing or unreadable: this submission has no messages to count
            continue
        for cell in cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("grade_id") not in owner:
                continue
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    exercise = owner.get(meta["grade_id"], meta["grade_id"])
                    message = failure_message(output)
                    failures.setdefault(exercise, {}).setdefault(normalize(message), message)
    return failures


def summarize(lessons: list[str], submissions: list[Submission], owners: dict[str, dict[str, str]]) -> list[ExerciseSummary]:
    """Pass rate and most frequent mistakes of each exercise, over the graded submissions; worst first."""
    summaries = []
    for lesson in lessons:
        graded = [s for s in submissions if s.lesson == lesson and s.status == "graded" and s.cells]
        for exercise in dict.fromkeys(owners[lesson].values()):
            cells = [cell for cell, owner in owners[lesson].items() if owner == exercise]
            passed = sum(all(cell in s.cells and s.cells[cell][0] == s.cells[cell][1] for cell in cells) for s in graded)
            counts = Counter(m for s in graded for m in s.failures.get(exercise, {}))
            examples = {m: raw for s in reversed(graded) for m, raw in s.failures.get(exercise, {}).items()}
            mistakes = [(m, n, examples[m]) for m, n in counts.most_common()]
            summaries.append(ExerciseSummary(lesson, exercise, len(graded), passed, mistakes))
    return sorted(summaries, key=lambda e: (e.pass_rate, lessons.index(e.lesson)))


def score_figure(report: ClassReport, lesson: str) -> Figure:
    scores, top = report.graded_scores(lesson), report.max_scores.get(lesson, 0.0)
    figure = Figure(figsize=(5, 3), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    width = max(1.0, top / 20)  # one bar per point, at most 20 bars
    edges = [i * width - width / 2 for i in range(int(top / width) + 2)]
    axes.hist(scores, bins=edges, color="#3b75af", edgecolor="white")
    axes.set(title=f"{lesson}: {len(scores)} graded", xlabel=f"score (out of {top:g})", ylabel="learners")
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.yaxis.get_major_locator().set_params(integer=True)
    return figure


def pass_rate_figure(report: ClassReport) -> Figure:
    exercises = report.exercises
    figure = Figure(figsize=(7, 0.3 * len(exercises) + 1.2), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.barh([e.label for e in exercises], [100 * e.pass_rate for e in exercises], color="#c05030")
    axes.invert_yaxis()  # worst first, at the top
    axes.set(xlim=(0, 100), xlabel="learners who passed every graded cell (%)", title="Pass rate per exercise")
    axes.tick_params(axis="y", labelsize=8)
    return figure


def png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_csv(report: ClassReport, path: Path) -> None:
    """One row per learner and lesson; "needs a person" instead of a 0 where grading did not finish."""
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["assignment", "student_id", "score", "max_score", "status", "reason", "sandboxed"])
        for s in report.submissions:
            score = NEEDS_A_PERSON if s.needs_a_person else ("" if s.score is None else f"{s.score:g}")
            sandboxed = {True: "yes", False: "NO"}.get(s.sandboxed, "")
            writer.writerow([s.lesson, s.student, score, f"{s.max_score:g}", s.status, s.detail, sandboxed])


def write_gradebook_csv(report: ClassReport, path: Path) -> None:
    """One row per learner, one column of points per lesson: what a learning platform's CSV grade import takes
    (Moodle's "Import grades: CSV file", Canvas's gradebook import after matching the learner column).

    A lesson that needs a person is left empty (a platform reads an empty cell as "not graded", never as 0)
    and named in the last column; one not submitted is 0.
    """
    lessons = [lesson for lesson in report.lessons if lesson in report.max_scores]
    by_learner: dict[str, dict[str, Submission]] = {}
    for s in report.submissions:
        by_learner.setdefault(s.student, {})[s.lesson] = s
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student_id", *(f"{lesson} (of {report.max_scores[lesson]:g})" for lesson in lessons),
                         "needs a person"])
        for student in sorted(by_learner):
            row, waiting = [student], []
            for lesson in lessons:
                s = by_learner[student].get(lesson)
                if s is None or s.status == NOT_SUBMITTED:
                    row.append("0")
                elif s.needs_a_person or s.score is None:
                    row.append("")
                    waiting.append(f"{lesson} ({s.status})")
                else:
                    row.append(f"{s.score:g}")
            writer.writerow([*row, "; ".join(waiting)])


def write_report(course_root: Path, lessons: list[str] | None = None, db_url: str | None = None,
                 out: Path | None = None, progress: bool = True) -> Path:
    """Write report.html, the PNG figures and scores.csv into ``out`` (default grading/report/)."""
    course_root = Path(course_root).resolve()
    out = out or course_root / "grading" / "report"
    out.mkdir(parents=True, exist_ok=True)
    report = collect(course_root, lessons, db_url, progress)
    figures = {f"scores_{lesson}.png": score_figure(report, lesson) for lesson in report.lessons if lesson in report.max_scores}
    figures["pass_rate.png"] = pass_rate_figure(report)
    images = {}
    for name, figure in figures.items():
        images[name] = png(figure)
        (out / name).write_bytes(images[name])
    write_csv(report, out / "scores.csv")
    write_gradebook_csv(report, out / "gradebook_import.csv")
    page = out / "report.html"
    page.write_text(render_html(report, images))
    return page


def _img(data: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: ClassReport, images: dict[str, bytes]) -> str:
    lessons = [lesson for lesson in report.lessons if lesson in report.max_scores]
    summary = []
    for lesson in lessons:
        scores = report.graded_scores(lesson)
        subs = [s for s in report.submissions if s.lesson == lesson]
        summary.append([lesson, f"{report.max_scores[lesson]:g}", len(scores), sum(s.needs_a_person for s in subs),
                        sum(s.status == NOT_SUBMITTED for s in subs),
                        f"{statistics.mean(scores):.1f}" if scores else "-",
                        f"{statistics.median(scores):g}" if scores else "-"])
    mistakes = []
    for e in report.exercises:
        top = e.mistakes[:TOP_MISTAKES]
        rows = [[count, example[:400]] for _, count, example in top]
        more = f"<p>and {len(e.mistakes) - TOP_MISTAKES} other message(s)</p>" if len(e.mistakes) > TOP_MISTAKES else ""
        header = ["learners", "message (one learner's; the numbers vary)"]
        listing = _table(header, rows) + more if rows else "<p>no failure messages</p>"
        mistakes.append(f"<h3>{html.escape(e.label)}: {e.passed} of {e.attempts} passed ({100 * e.pass_rate:.0f}%)</h3>"
                        + listing)
    attention = [[s.student, s.lesson, s.status, s.detail] for s in report.needing_a_person()]
    unsandboxed = [s for s in report.submissions if s.sandboxed is False]
    warning = (f'<p style="background:#fdd;padding:0.5em"><b>{len(unsandboxed)} submission(s) were graded '
               "UNSANDBOXED</b>: their code ran with the grader's rights (install bubblewrap and grade again).</p>"
               if unsandboxed else "")
    figures = "".join(_img(images[f"scores_{lesson}.png"], f"score distribution of {lesson}") for lesson in lessons)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Class report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
img {{ margin: 0.3em; border: 1px solid #eee; }}
</style></head><body>
<h1>Class report</h1>
{warning}
<h2>Lessons</h2>
{_table(["lesson", "points", "graded", "needs a person", "not submitted", "mean", "median"], summary)}
<h2>Score distribution per lesson</h2>
<p>Graded submissions only: those that need a person are not counted as 0.</p>
<div>{figures}</div>
<h2>Pass rate per exercise, worst first</h2>
{_img(images["pass_rate.png"], "pass rate per exercise")}
<h2>What the class got wrong</h2>
<p>For each exercise, worst first: the most frequent failure messages of its graded cells and how many
learners got each (numbers taken out, so the same mistake on different inputs counts once).</p>
{"".join(mistakes)}
<h2>Submissions that need a person ({len(attention)})</h2>
{_table(["learner", "lesson", "status", "reason"], attention) if attention else "<p>none</p>"}
<p>Scores as CSV: scores.csv (a submission that needs a person says so instead of 0); gradebook_import.csv
has one row per learner and one column per lesson, for a learning platform's grade import.</p>
</body></html>
"""
