"""Two grading machines share one PostgreSQL gradebook through nbgrader's db_url, one shard each.

A real PostgreSQL server (Debian's package) is started on loopback for the test:
initdb into a temporary folder as a user other than root (PostgreSQL refuses
root), a random free port, stopped at the end. Two copies of the course stand
for two machines; each grades its shard at the same time as the other, then
one machine collects the other's results and writes the class report from the
shared gradebook.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from coursetools import grading
from coursetools import report
from coursetools.classroom import synthetic
from coursetools.results import course_id, load_results

pytestmark = pytest.mark.slow
LESSON = "00_start_here"
SIZE = 6  # full, blank, partial, unreadable, crash, full


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (Debian keeps them out of PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    initdb = found[-1] if found else shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    """A fresh PostgreSQL server on 127.0.0.1 with an empty `gradebook` database; its URL."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is missing: .ci/run installs the Debian package `postgresql`")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql) - CI runs this test")
    pytest.importorskip("psycopg", reason="the PostgreSQL driver: pip install -e '.[grading]'")
    folder = Path(tempfile.mkdtemp(prefix="course-postgres-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: run it as Debian's postgres user
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, text=True, cwd=folder)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "course", "--auth=trust", "--no-sync")
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "start",
            "-o", f"-p {port} -c listen_addresses=127.0.0.1 -k {folder} -c fsync=off")
    except subprocess.CalledProcessError as error:
        log = (folder / "server.log").read_text() if (folder / "server.log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {error.stderr}\n{log[-2000:]}")
    try:
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "course", "gradebook")
        yield f"postgresql://course@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, cwd=folder)
        shutil.rmtree(folder, ignore_errors=True)


def machine(root: Path) -> Path:
    """One grading machine's copy of the course, with every learner's submission."""
    root.mkdir()
    grading.copy_course(root, ("solutions", "notebooks"), lessons=[LESSON])
    synthetic.build_class(root, [LESSON], SIZE)
    return root


def test_two_machines_grade_their_shards_into_one_postgres_gradebook(postgres_url, tmp_path):
    from nbgrader.api import Gradebook

    machines = [machine(tmp_path / "machine1"), machine(tmp_path / "machine2")]
    command = [sys.executable, "-m", "coursetools.classroom"]
    # Once, before the shards start: the lesson goes into the new gradebook.
    setup = subprocess.run([*command, "setup", LESSON, "--db-url", postgres_url], cwd=machines[0], capture_output=True,
                           text=True)
    assert setup.returncode == 0, setup.stderr[-3000:]
    shards = [subprocess.Popen([*command, "grade", LESSON, "--shard", f"{i}/2", "--jobs", "1", "--db-url", postgres_url],
                               cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for i, root in enumerate(machines, start=1)]
    outputs = [shard.communicate(timeout=600) for shard in shards]
    for shard, (out, err) in zip(shards, outputs):
        assert shard.returncode in (0, 1), f"{out}\n{err[-3000:]}"  # 1: a submission needs a person

    graded_by = [load_results(root) for root in machines]
    everyone = {synthetic.learner_name(i) for i in range(SIZE)}
    assert {s for s, _ in graded_by[0]} | {s for s, _ in graded_by[1]} == everyone
    assert not {s for s, _ in graded_by[0]} & {s for s, _ in graded_by[1]}, "a learner was graded twice"
    results = {student: r for results in graded_by for (student, _), r in results.items()}

    profiles = {synthetic.learner_name(i): p for i, p in enumerate(synthetic.profiles(LESSON, _solution(machines[0]), SIZE))}
    with Gradebook(postgres_url, course_id(machines[0])) as gradebook:
        max_score = gradebook.find_assignment(LESSON).max_score
        for student, profile in profiles.items():
            expected = synthetic.expected_score(LESSON, profile, max_score)
            if expected is None:
                assert results[student]["status"] != "graded" and results[student]["score"] is None, results[student]
            else:
                assert results[student]["status"] == "graded", results[student]
                assert gradebook.find_submission(LESSON, student).score == expected == results[student]["score"]

    # The report runs on one machine, from the shared gradebook, once the other's results are copied over.
    for folder in ("results", "autograded"):
        shutil.copytree(machines[1] / "grading" / folder, machines[0] / "grading" / folder, dirs_exist_ok=True)
    data = report.collect(machines[0], [LESSON], db_url=postgres_url, progress=False)
    graded = sorted(synthetic.expected_score(LESSON, p, max_score) for p in profiles.values()
                    if p not in ("crash", "unreadable"))
    assert sorted(data.graded_scores(LESSON)) == graded
    assert {s.student for s in data.needing_a_person()} == {s for s, p in profiles.items() if p in ("crash", "unreadable")}


def _solution(root: Path):
    import nbformat

    return nbformat.read(root / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
