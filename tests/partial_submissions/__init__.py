"""A partially wrong submission for every lesson, for the nbgrader round trip.

Each module is named after its lesson folder with a ``lesson_`` prefix
(``lesson_01_tensors.py``) and defines:

- ``WRONG_CELLS``: ``{grade_id of a solution cell: replacement source}``.
  The replacement is plausible but wrong (or, for one cell, crashes).
- ``EXPECTED_SCORE``: the exact total the autograder must give that submission.
"""
