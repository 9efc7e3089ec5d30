"""The course's own tooling: building lessons, grading, class reports, benchmarks. Learners never import it.

- ``coursetools.authoring``: build a lesson: ``solutions/NN/NN.pct.py`` -> the executed instructor notebook
  (``python -m coursetools.authoring build|check``, ``make solutions``).
- ``coursetools.grading``: grade a submission: nbgrader's release and autograde with loud failures
  (``python -m coursetools.grading release|autograde``, ``make release``), its execute step
  (``grading.autograder``), the bubblewrap sandbox and guard (``grading.sandbox``), the static scan
  (``grading.scan``).
- ``coursetools.classroom``: grade a class: many submissions in parallel, by shard, into one gradebook
  (``python -m coursetools.classroom grade|setup|report``, ``make grade``), and a synthetic class for tests.
- ``coursetools.results``: where grading's results live and how to read them (grading writes, the report reads).
- ``coursetools.report``: the class report (``make report``).
- ``coursetools.bench``: measure: notebook time and memory, autograde time, class-grading throughput
  (``make bench``, ``make bench-class``).

It builds on the learner package ``helpers`` (never the other way round).
"""
