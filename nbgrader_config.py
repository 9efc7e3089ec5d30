"""nbgrader configuration for the course (run nbgrader from the repository root).

solutions/  instructor source (solutions + hidden tests)    nbgrader "source"
notebooks/  learner version, generated and committed         published from nbgrader's "release"
grading/    release, submissions, autograded copies, feedback, gradebook, exchange (git-ignored)
"""

import filecmp
import os
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by nbgrader

COURSE = Path(__file__).resolve().parent
GRADING = COURSE / "grading"
# nbgrader does not create its gradebook's folder, and a fresh clone has no grading/: every
# command (and the Formgrader) would fail with "There was an error accessing the nbgrader database".
GRADING.mkdir(exist_ok=True)
# nbgrader sets up the gradebook by running the `alembic` command: find the one installed
# next to nbgrader's Python even when its virtual environment is not activated.
if str(Path(sys.executable).parent) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

# On the course hub (hub/jupyterhub_config.py), each course's Formgrader runs in its own clone and the hub names the
# course and the shared exchange through these variables; everywhere else the defaults below hold.
c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "pytorch-course")
c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
# nbgrader generates each lesson into grading/release/, and only a generation that succeeded
# replaces notebooks/<lesson>/: nbgrader deletes its output folder before converting (with
# --force, or when the source is newer) and again when converting fails, which must never
# cost the committed learner notebooks.
c.CourseDirectory.release_directory = "grading/release"
c.CourseDirectory.submitted_directory = "grading/submitted"
c.CourseDirectory.autograded_directory = "grading/autograded"
c.CourseDirectory.feedback_directory = "grading/feedback"
# `nbgrader zip_collect` (python -m coursetools.classroom collect): a learning platform's download goes here
c.ZipCollectApp.downloaded_directory = "grading/downloaded"
c.CourseDirectory.db_url = f"sqlite:///{GRADING / 'gradebook.db'}"
# Formgrader's "release" and `nbgrader release_assignment` copy to an exchange; this course's
# lives in grading/ (on a shared JupyterHub, point it at the hub's exchange instead).
# It exists from the start, with the permissions nbgrader gives an exchange it creates, so that
# the Formgrader offers "release" on a fresh clone.
if os.environ.get("COURSE_EXCHANGE_ROOT"):
    c.Exchange.root = os.environ["COURSE_EXCHANGE_ROOT"]
    c.Exchange.path_includes_course = True
else:
    c.Exchange.root = str(GRADING / "exchange")
    if not (GRADING / "exchange").exists():
        (GRADING / "exchange").mkdir()
        (GRADING / "exchange").chmod(0o777)
# Lesson sources (.pct.py) build solutions/*.ipynb; learners never need them.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.pct.py", "runs", "checkpoints"]
# Autograde (coursetools/grading/autograder.py): each kernel in the bubblewrap sandbox, stderr costs no points, deleted
# graded cells restored; nothing a learner submits that Python or Jupyter would import is copied next to
# the notebook it runs (so a lesson cannot hand out .py files: put shared code in helpers/).
try:
    from coursetools.grading.autograder import IMPORTABLE, configure, timeout_func
except ImportError:  # the course is not installed here: `python -m coursetools.grading` says so
    timeout_func = None
else:
    configure(c)
    c.CourseDirectory.ignore += [p for p in IMPORTABLE if p not in c.CourseDirectory.ignore]
    # `nbgrader export` writes "needs a person" where grading did not finish, not a 0.0 (coursetools/export.py)
    c.ExportApp.plugin_class = "coursetools.export.CourseCsvExport"

# A learner's cell may run at most this long when autograded (infinite loops end here), except a cell
# tagged "cpu-timed" (the capstone's training, which its check stops by CPU time) or "compiles" (lesson 07's
# torch.compile, whose time is the compiler's): 600 s of clock time,
# in autograde, Validate and `make progress` alike (coursetools/grading/autograder.py, cell_timeout).
c.Execute.timeout = 120
if timeout_func is not None:
    c.Execute.timeout_func = timeout_func(c.Execute.timeout)
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# Fix-the-bug exercises hand out a broken program instead of the stub (helpers/starters.py).
from nbgrader.converters import GenerateAssignment  # noqa: E402

try:
    from helpers.starters import with_starters
except ImportError:  # helpers not installed: the course's own copy, next to this file
    sys.path.insert(0, str(COURSE))
    from helpers.starters import with_starters

c.GenerateAssignment.preprocessors = with_starters(GenerateAssignment.class_traits()["preprocessors"].default())


def publish_release(assignment: str, student: str, notebooks: list[str]) -> None:
    """After nbgrader generated a lesson into grading/release/, copy what changed over notebooks/<lesson>/."""
    for lesson in sorted({Path(nb).parent.name for nb in notebooks}):
        staged = GRADING / "release" / lesson
        for file in sorted(f for f in staged.rglob("*") if f.is_file()):
            published = COURSE / "notebooks" / lesson / file.relative_to(staged)
            if not (published.exists() and filecmp.cmp(file, published, shallow=False)):
                published.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, published)


def stage_committed_release() -> None:
    """Give nbgrader the committed notebooks/ as its release where grading/release/ lacks or predates them.

    So that `nbgrader release_assignment` (and the Formgrader's release) works on a fresh clone.
    """
    for notebook in (COURSE / "notebooks").glob("*/*.ipynb"):
        staged = GRADING / "release" / notebook.parent.name / notebook.name
        if not staged.exists() or staged.stat().st_mtime < notebook.stat().st_mtime:
            staged.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, staged)


c.GenerateAssignment.post_convert_hook = publish_release
stage_committed_release()
