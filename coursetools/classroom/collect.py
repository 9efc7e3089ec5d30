"""Submissions downloaded from a learning platform, into ``grading/submitted/`` with nbgrader's zip_collect.

Classes that hand in through Canvas or Moodle download every learner's notebook in one
archive whose file names carry the learner. ``collect`` copies the archive into
``grading/downloaded/<lesson>/archive/`` and runs ``nbgrader zip_collect`` with the
platform's file-name pattern (:data:`PLATFORMS`), which extracts it and files each
notebook as ``grading/submitted/<learner>/<lesson>/<lesson>.ipynb``; then ``make grade``.

    python -m coursetools.classroom collect 01_tensors submissions.zip --platform canvas

The learner's id is what the platform puts in the name: Canvas's name slug (``doejane``),
Moodle's participant number. A resubmission's suffix (Canvas's ``-1``) is dropped.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

# nbgrader matches these against each extracted file's whole path; they must name student_id and file_id.
PLATFORMS = {
    # doejane_12345_67890_01_tensors.ipynb, doejane_LATE_12345_67890_01_tensors-1.ipynb
    "canvas": r"(?i).*/(?P<student_id>[a-z0-9]+)_(?:late_)?\d+_\d+_(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$",
    # Jane Doe_123456_assignsubmission_file_/01_tensors.ipynb (or the same without the folder)
    "moodle": r".*/[^/]*?_(?P<student_id>\d+)_assignsubmission_file_/?(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$",
}


def collect(course_root: Path, lesson: str, archives: list[Path], platform: str) -> list[str]:
    """File the notebooks of ``archives`` (zips or single files) under grading/submitted/; return the learners.

    Raises:
        ValueError: an unknown platform.
        RuntimeError: nbgrader's zip_collect failed (its own output is in the message).
    """
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}: one of {', '.join(PLATFORMS)}")
    folder = course_root / "grading" / "downloaded" / lesson / "archive"
    folder.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        shutil.copy(archive, folder / archive.name)
    command = [sys.executable, "-m", "nbgrader", "zip_collect", lesson, "--force", "--strict",
               f"--FileNameCollectorPlugin.named_regexp={PLATFORMS[platform]}"]
    done = subprocess.run(command, cwd=course_root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader zip_collect failed:\n{done.stdout}{done.stderr}")
    submitted = course_root / "grading" / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{lesson}") if any(p.glob("*.ipynb")))
