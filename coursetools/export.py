"""``nbgrader export`` for this course: "needs a person" where grading did not finish, not nbgrader's 0.0.

nbgrader stores a submission it could not grade (a crash, a timeout, a refusal, a suspicious
notebook) with whatever score its cells got, often 0.0, and its CSV export cannot tell that
from a genuine zero. ``nbgrader_config.py`` makes this the export plugin
(``c.ExportApp.plugin_class``): the same columns as nbgrader's CSV, with the score columns of
such a submission saying ``needs a person: <status>`` (from ``grading/results/``).
"""

from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.plugins import CsvExportPlugin
from traitlets import Unicode

from coursetools.results import load_results

NEEDS_A_PERSON = "needs a person"


class CourseCsvExport(CsvExportPlugin):
    """nbgrader's CSV export, honest about submissions that need a person."""

    course_root = Unicode("", help="the course folder (default: the nbgrader app's course directory)").tag(config=True)

    def _root(self) -> Path:
        if self.course_root:
            return Path(self.course_root)
        coursedir = getattr(self.parent, "coursedir", None)
        return Path(coursedir.root) if coursedir is not None else Path.cwd()

    def export(self, gradebook) -> None:
        super().export(gradebook)
        dest = Path(self.to or "grades.csv")
        attention = {key: saved["status"] for key, saved in load_results(self._root()).items()
                     if saved["status"] != "graded"}
        with dest.open(newline="") as file:
            rows = list(csv.DictReader(file))
        if not rows:
            return
        for row in rows:
            status = attention.get((row["student_id"], row["assignment"]))
            if status is not None:
                row["raw_score"] = row["score"] = f"{NEEDS_A_PERSON}: {status}"
        with dest.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
