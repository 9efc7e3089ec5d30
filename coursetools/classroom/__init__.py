"""Grading a whole class: in parallel, across machines, and a report of what the class got wrong.

Maintainer and instructor tooling on top of :mod:`coursetools.grading` (learners never import it):

- :mod:`coursetools.classroom.grade`: autograde every submission with several worker
  processes (``--jobs``), one shard of the learners per machine (``--shard i/n``),
  into nbgrader's SQLite gradebook or a shared PostgreSQL one (``--db-url``).
- :mod:`coursetools.report`: one HTML page, PNG figures and a CSV of the class.
- :mod:`coursetools.classroom.synthetic`: a synthetic class built from the solutions, the
  blank release and the tests' wrong answers, for the benchmark and the tests.

Command line (from the course root)::

    python -m coursetools.classroom grade [LESSON ...] [--jobs N] [--shard i/n] [--db-url URL]
    python -m coursetools.classroom setup [LESSON ...] [--db-url URL]
    python -m coursetools.classroom report [--db-url URL] [--out DIR]
"""
