"""nbgrader configuration for the course (run nbgrader from the repository root).

solutions/  instructor source (solutions + hidden tests)    nbgrader "source"
notebooks/  learner version, generated and committed         nbgrader "release"
grading/    submissions, autograded copies, feedback, gradebook (git-ignored)
"""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pytorch-course"
c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "grading/submitted"
c.CourseDirectory.autograded_directory = "grading/autograded"
c.CourseDirectory.feedback_directory = "grading/feedback"
c.CourseDirectory.db_url = "sqlite:///grading/gradebook.db"
# Lesson sources (.pct.py) build solutions/*.ipynb; learners never need them.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.pct.py", "runs", "checkpoints"]

# A learner's cell may run at most this long when autograded (infinite loops end here).
c.Execute.timeout = 120
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
