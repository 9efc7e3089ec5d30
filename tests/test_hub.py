"""A class on the course's JupyterHub (hub/jupyterhub_config.py), end to end on one machine, without Docker.

JupyterHub runs on loopback with its proxy from npm (``make hub-proxy``), PAM logins and the local process
spawner, for two courses (each with its Formgrader service, grader account, instructor and groups) and real
Unix users created here (so it needs root; CI runs as root). Learners fetch lesson 00 through the Assignments
panel's API of their hub-spawned servers, paste their answers and submit through nbgrader's exchange; the
instructor collects, autogrades in the course's sandbox (``python -m coursetools.grading``), generates and
releases feedback; learners fetch it. Headless Chromium logs in through the hub. A second test times a class
of 20 learners who submit at once (issue 22, part 5: numbers printed, nothing asserted on time).

Everything it makes (users, their homes, processes, the exchange, a hard-linked copy of the Python environment
when the course's own one is not reachable by other users) is removed at the end.
"""

from __future__ import annotations

import concurrent.futures
import html
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import pytest

from coursetools import grading
from coursetools.grading.autograder import hidden_test_lines
from coursetools.classroom import synthetic  # (its tests_module, imported by name, would be collected as a test)
from helpers.data import REPO_ROOT

pytestmark = pytest.mark.slow
LESSON = "00_start_here"
COURSE = "pytorch-course"  # the course whose three learners go through their hub servers
CLASS = "pytorch-course-b"  # the second course on the hub: the class of 20 (part 5)
CLASS_SIZE = 20
PREFIX = f"ch{secrets.token_hex(2)}"  # no real account starts like this: every name this test makes does
TOKEN = secrets.token_hex(16)  # the test's own hub service (admin of users and servers)
NOLOGIN = "/usr/sbin/nologin"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]  # as tests/test_jupyterlab.py launches it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_not_here() -> str | None:
    """The reason this machine cannot run the hub test, or None."""
    if sys.platform != "linux":
        return "the hub test creates Linux users"
    if os.geteuid() != 0:
        return "the hub test creates Unix users and runs JupyterHub's spawner as root: run it as root (CI does)"
    for tool in ("useradd", "userdel", "chpasswd", "runuser", "node", "npm"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (node and npm: apt-get install nodejs npm)"
    return None


def checkout_unreachable() -> str | None:
    """Why the learners' accounts could not read this checkout (their servers import helpers from it), or None."""
    for parent in [REPO_ROOT, *REPO_ROOT.parents]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return f"other users cannot reach the checkout ({parent} is not world-searchable): clone it elsewhere"
    return None


# ----------------------------------------------------------------------------------------------- the machine

def run_as(user: str | None, command: list[str], env: dict[str, str], cwd: Path | str = "/",
           timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``command`` as Unix ``user`` (None: as root) with exactly ``env``."""
    prefix = ["runuser", "-u", user, "--"] if user else []
    return subprocess.run([*prefix, "env", "-i", *[f"{k}={v}" for k, v in env.items()], *command],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


HUB_MODULES = ("helpers", "jupyterhub", "nbgrader", "coursetools")


def usable_by_others(python: Path, modules: tuple[str, ...] = HUB_MODULES) -> bool:
    """Whether an unprivileged user can run ``python`` with ``modules`` (the course's packages)."""
    probe = ["runuser", "-u", "nobody", "--", str(python), "-c", f"import {', '.join(modules)}"]
    return subprocess.run(probe, cwd="/", capture_output=True).returncode == 0


def _retarget(path: Path, old: str, new: str) -> None:
    """Replace ``old`` with ``new`` in a text file through a new file, never writing into a hard-linked inode."""
    text = path.read_text()
    if old in text:
        fresh = path.with_name(path.name + ".course-hub")
        fresh.write_text(text.replace(old, new))
        fresh.chmod(path.stat().st_mode & 0o7777)
        os.replace(fresh, path)


def shared_python(dest: Path, modules: tuple[str, ...] = HUB_MODULES) -> Path:
    """A Python with the course installed (``modules`` import) that every user may run: this one, or a
    hard-linked copy of it.

    Where the interpreter lives under a private folder (pyenv under /root), the users' servers could not start.
    Hard links copy no data and keep each file's owner and mode; only the copy's folders and the few files that
    name the environment's path (pyvenv.cfg, the console scripts, the interpreter links) are new.
    """
    if usable_by_others(Path(sys.executable), modules):
        return Path(sys.executable)
    base, venv = Path(sys.base_prefix).resolve(), Path(sys.prefix)
    shadow_base, shadow_venv = dest / "python", dest / "venv"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # the base interpreter's own site-packages stay out: the virtual environment has everything the course needs
    skip_base = base / "lib" / version / "site-packages"
    shutil.copytree(base, shadow_base, symlinks=True, copy_function=os.link,
                    ignore=lambda folder, names: names if Path(folder) == skip_base else [])
    grader_kernel = Path("share") / "jupyter" / "kernels" / "pytorch-course-grader"  # rewritten below, not shared
    shutil.copytree(venv, shadow_venv, symlinks=True, copy_function=os.link,
                    ignore=lambda folder, names: names if Path(folder) == venv / grader_kernel else [])
    interpreter = shadow_base / "bin" / version
    _relink_runpath(interpreter, base / "lib")
    for link in (shadow_venv / "bin").iterdir():
        if link.is_symlink() and link.name.startswith("python"):
            link.unlink()
            link.symlink_to(interpreter)
        elif link.is_file() and link.read_bytes()[:2] == b"#!":
            _retarget(link, str(venv), str(shadow_venv))
    _retarget(shadow_venv / "pyvenv.cfg", str(Path(sys.executable).resolve().parent), str(interpreter.parent))
    _retarget(shadow_venv / "pyvenv.cfg", str(base), str(shadow_base))
    python = shadow_venv / "bin" / "python"
    assert usable_by_others(python, modules), "the hard-linked copy of the Python environment does not run as another user"
    return python


def _relink_runpath(binary: Path, old: Path) -> None:
    """Point an interpreter's library search path (an absolute RUNPATH, as pyenv builds it) at its own copy.

    Else the loader, unable to enter the original folder as another user, would pick the system's libpython of
    another patch release. The copy becomes a file of its own (not a link): "$ORIGIN/../lib" is written over
    the old path inside the ELF string table, padded with NUL bytes (it is shorter).
    """
    data, target = binary.read_bytes(), str(old).encode() + b"\0"
    relative = b"$ORIGIN/../lib"
    if target not in data or len(relative) >= len(target):
        return
    binary.unlink()
    binary.write_bytes(data.replace(target, relative.ljust(len(target), b"\0")))
    binary.chmod(0o755)


@dataclass
class Accounts:
    """The Unix users this test created (name -> password)."""

    passwords: dict[str, str] = field(default_factory=dict)

    def add(self, name: str) -> str:
        subprocess.run(["useradd", "--create-home", "-K", "HOME_MODE=0700", "--shell", NOLOGIN, name],
                       check=True, capture_output=True)
        self.passwords[name] = secrets.token_urlsafe(12)
        subprocess.run(["chpasswd"], input=f"{name}:{self.passwords[name]}\n", text=True, check=True, capture_output=True)
        return name

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def uid(self, name: str) -> int:
        return pwd.getpwnam(name).pw_uid

    def remove_all(self) -> None:
        uids = {pwd.getpwnam(n).pw_uid for n in self.passwords if _exists(n)}
        kill_processes(lambda p: p.uids().real in uids)
        for name in self.passwords:
            if _exists(name):
                home = self.home(name)
                subprocess.run(["userdel", "--remove", name], capture_output=True)
                shutil.rmtree(home, ignore_errors=True)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def kill_processes(selected) -> None:
    """Stop the processes ``selected(process)`` picks, by their ids: TERM, then KILL what is left after 10 s."""
    chosen = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and selected(process):
                chosen.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for process in chosen:
        with _gone():
            process.terminate()
    _, alive = psutil.wait_procs(chosen, timeout=10)
    for process in alive:
        with _gone():
            process.kill()


class _gone:
    """Ignore a process that ended meanwhile."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        return kind is not None and issubclass(kind, psutil.NoSuchProcess)


# --------------------------------------------------------------------------------------------------- the hub

@dataclass
class Course:
    id: str
    grader: str
    root: Path
    port: int
    instructors: list[str]
    learners: list[str]


@dataclass
class Hub:
    url: str
    api_url: str
    python: Path
    exchange: Path
    accounts: Accounts
    courses: dict[str, Course]
    log: Path
    startup_s: float = 0.0  # from creating the users to the lesson released in both courses

    def request(self, method: str, path: str, token: str = TOKEN, body: dict | None = None, form: dict | None = None,
                timeout: float = 120) -> dict | list | str:
        """``path`` on the hub's public URL (through the proxy), authenticated with ``token``."""
        data = json.dumps(body).encode() if body is not None else (urllib.parse.urlencode(form).encode() if form else None)
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            if error.code >= 500:  # a server broke: its log (the hub's, its services' and servers') says why
                raise AssertionError(f"{method} {path}: {error}\n{self.log.read_text()[-6000:]}") from error
            raise
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def user_token(self, user: str) -> str:
        """A hub API token of ``user`` with the user's own rights (what their server or terminal holds)."""
        made = self.request("POST", f"/hub/api/users/{user}/tokens", body={"note": "course hub test", "expires_in": 3600})
        return made["token"]

    def start_servers(self, users: list[str]) -> None:
        """Have the hub spawn each user's server (LocalProcessSpawner, as that Unix user); wait until all are ready."""
        for user in users:
            self.request("POST", f"/hub/api/users/{user}/server")
        deadline = time.monotonic() + 240
        waiting = list(users)
        while waiting and time.monotonic() < deadline:
            waiting = [u for u in waiting if not self.request("GET", f"/hub/api/users/{u}")["servers"].get("", {}).get("ready")]
            time.sleep(1)
        if waiting:
            pytest.fail(f"the servers of {waiting} did not start:\n{self.log.read_text()[-3000:]}")

    def instructor_env(self, course: Course) -> dict[str, str]:
        """The grader account's shell in its course folder (what the runbook tells an instructor to use)."""
        return {"HOME": str(self.accounts.home(course.grader)), "USER": course.grader, "PATH": path_with(self.python),
                "LANG": "C.UTF-8", "COURSE_ID": course.id, "COURSE_EXCHANGE_ROOT": str(self.exchange),
                "COURSE_DATA": os.environ.get("COURSE_DATA", str(REPO_ROOT / ".cache" / "course-data"))}

    def instructor(self, course: Course, *command: str, ok_codes: tuple[int, ...] = (0,)) -> str:
        """Run one instructor command (``python -m ...``) as the course's grader account; its output."""
        done = run_as(course.grader, [str(self.python), "-m", *command], self.instructor_env(course), cwd=course.root)
        assert done.returncode in ok_codes, \
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
        return done.stdout + done.stderr

    def learner_env(self, user: str, token: str) -> dict[str, str]:
        """A learner's terminal in their hub server: their hub token and the hub's nbgrader settings."""
        return {"HOME": str(self.accounts.home(user)), "USER": user, "PATH": path_with(self.python), "LANG": "C.UTF-8",
                "JUPYTERHUB_USER": user, "JUPYTERHUB_API_TOKEN": token, "JUPYTERHUB_API_URL": self.api_url,
                "COURSE_EXCHANGE_ROOT": str(self.exchange),
                "JUPYTER_CONFIG_PATH": os.pathsep.join([str(REPO_ROOT / "hub" / "jupyter-config" / "learner"),
                                                        str(REPO_ROOT / "hub" / "jupyter-config" / "common")])}


def path_with(python: Path) -> str:
    return os.pathsep.join([str(python.parent), "/usr/local/bin", "/usr/bin", "/bin"])


def make_course(accounts: Accounts, course_id: str, instructors: list[str], learners: list[str]) -> Course:
    """A grader account owning a clone of the course (lesson 00 only) in its home, as the runbook sets one up."""
    grader = accounts.add(f"{PREFIX}-grader-{course_id[-1]}")
    root = accounts.home(grader) / "course"
    root.mkdir()
    grading.copy_course(root, ("solutions", "notebooks"), lessons=[LESSON])
    subprocess.run(["chown", "-R", f"{grader}:{grader}", str(root)], check=True)
    return Course(course_id, grader, root, free_port(), instructors, learners)


def courses_toml(exchange: Path, courses: list[Course]) -> str:
    lines = ["[hub]", f"exchange = {json.dumps(str(exchange))}", ""]
    for course in courses:
        lines += ["[[course]]", f"id = {json.dumps(course.id)}", f"grader = {json.dumps(course.grader)}",
                  f"root = {json.dumps(str(course.root))}", f"port = {course.port}",
                  f"instructors = {json.dumps(course.instructors)}", f"learners = {json.dumps(course.learners)}", ""]
    return "\n".join(lines)


def hub_config_for_test(ports: dict[str, int]) -> str:
    """The course's hub config, plus loopback ports and this test's own service (its token manages users)."""
    return "\n".join([
        "c = get_config()  # noqa",
        f"load_subconfig({str(REPO_ROOT / 'hub' / 'jupyterhub_config.py')!r})",
        f"c.JupyterHub.bind_url = 'http://127.0.0.1:{ports['public']}'",
        f"c.JupyterHub.hub_bind_url = 'http://127.0.0.1:{ports['hub']}'",
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{ports['proxy_api']}'",
        f"c.JupyterHub.services = [*c.JupyterHub.services, {{'name': 'course-hub-test', 'api_token': {TOKEN!r}}}]",
        "c.JupyterHub.load_roles = [*c.JupyterHub.load_roles, {'name': 'course-hub-test', 'services': ['course-hub-test'],"
        " 'scopes': ['admin:users', 'admin:servers', 'tokens', 'read:groups', 'list:services', 'read:services']}]",
        "",
    ])


@pytest.fixture(scope="module")
def hub():
    reason = why_not_here()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the hub test cannot run in CI: {reason}")
        pytest.skip(reason)
    if checkout_unreachable():  # where the machine puts the checkout is not a fault of the course
        pytest.skip(checkout_unreachable())
    proxy = subprocess.run(["make", "-s", "hub-proxy"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proxy.returncode == 0, f"make hub-proxy (npm ci) failed:\n{proxy.stdout}\n{proxy.stderr[-3000:]}"

    setup_started = time.monotonic()
    top = Path(tempfile.mkdtemp(prefix="course-hub-"))
    top.chmod(0o755)  # the users reach the exchange and the environment's copy through it
    accounts = Accounts()
    process = None
    try:
        python = shared_python(top)
        # the grading kernelspec, written once by root: grader accounts cannot write into the environment
        subprocess.run([str(python), "-c", "from coursetools.grading import sandbox; sandbox.install_kernelspec()"],
                       check=True, capture_output=True)
        exchange = top / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)  # the runbook's mode: anyone may create a course folder, nobody may remove another's
        teacher, teacher_b = accounts.add(f"{PREFIX}-teach"), accounts.add(f"{PREFIX}-teachb")
        trio = [accounts.add(f"{PREFIX}-{who}") for who in ("full", "blank", "part")]
        klass = [accounts.add(f"{PREFIX}-l{i:02d}") for i in range(CLASS_SIZE)]
        courses = {COURSE: make_course(accounts, COURSE, [teacher], trio),
                   CLASS: make_course(accounts, CLASS, [teacher_b], klass)}
        state = top / "state"
        state.mkdir(mode=0o700)
        (state / "courses.toml").write_text(courses_toml(exchange, list(courses.values())))
        ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
        (state / "jupyterhub_config.py").write_text(hub_config_for_test(ports))
        log = state / "jupyterhub.log"
        env = {"PATH": path_with(python), "LANG": "C.UTF-8", "COURSE_HUB_COURSES": str(state / "courses.toml"),
               "COURSE_DATA": os.environ.get("COURSE_DATA", str(REPO_ROOT / ".cache" / "course-data"))}
        with log.open("w") as out:
            process = subprocess.Popen([str(python), "-m", "jupyterhub", "-f", str(state / "jupyterhub_config.py")],
                                       cwd=state, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        hub = Hub(f"http://127.0.0.1:{ports['public']}", f"http://127.0.0.1:{ports['hub']}/hub/api", python, exchange,
                  accounts, courses, log)
        deadline = time.monotonic() + 120
        while True:
            try:
                services = hub.request("GET", "/hub/api/services", timeout=10)
                if all(name in services for name in courses):
                    break
            except (OSError, urllib.error.HTTPError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterHub did not start:\n{log.read_text()[-5000:]}")
            time.sleep(1)
        for course in courses.values():
            _wait_for_formgrader(hub, course)
            # the instructor generates the lesson (into the course's gradebook) and releases it to the hub's exchange
            hub.instructor(course, "coursetools.grading", "release", LESSON)
            hub.instructor(course, "nbgrader", "release_assignment", LESSON)
        hub.startup_s = time.monotonic() - setup_started
        yield hub
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)  # the hub stops its proxy, services and servers
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its proxy, if the hub could not stop it
            except ProcessLookupError:
                pass
        try:
            accounts.remove_all()
        finally:
            shutil.rmtree(top, ignore_errors=True)


def _wait_for_formgrader(hub: Hub, course: Course) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{course.port}/services/{course.id}/api/status", timeout=5):
                return
        except urllib.error.HTTPError:
            return  # it answers (403 without a token): it runs
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the Formgrader service of {course.id} did not start:\n{hub.log.read_text()[-5000:]}")
            time.sleep(1)


# ------------------------------------------------------------------------------------------ learners' answers

def answered(notebook: nbformat.NotebookNode, profile: str, marker: str) -> nbformat.NotebookNode:
    """The fetched notebook with a learner's answers pasted in: "full", "blank" or "partial" (lesson 00's
    tests/partial_submissions answer), each solution cell signed with ``marker`` so feedback can be traced."""
    solutions = synthetic.solution_cells(nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4))
    wrong = synthetic.tests_module(f"partial_submissions.lesson_{LESSON}").WRONG_CELLS
    for grade_id, cell in synthetic.solution_cells(notebook).items():
        if profile == "full" or (profile == "partial" and grade_id not in wrong):
            cell.source = solutions[grade_id].source
        elif profile == "partial":
            cell.source = wrong[grade_id]
        cell.source = f"# {marker}\n{cell.source}"
    return notebook


def expected_score(profile: str) -> float:
    partial = synthetic.tests_module(f"partial_submissions.lesson_{LESSON}").EXPECTED_SCORE
    return {"full": 2.0, "blank": 0.0, "partial": partial}[profile]


def hidden_tests() -> set[str]:
    """Lines of lesson 00's hidden tests (between nbgrader's BEGIN/END HIDDEN TESTS)."""
    source = nbformat.read(REPO_ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", as_version=4)
    return hidden_test_lines(source)


def gradebook_scores(course: Course) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'grading' / 'gradebook.db'}", course.id) as gradebook:
        return {s.student.id: s.score for s in gradebook.assignment_submissions(LESSON)}


def fetched_feedback(hub: Hub, course: Course, user: str) -> str:
    """The feedback HTML ``user`` fetched (read by root from the learner's home), unescaped."""
    files = sorted((hub.accounts.home(user) / course.id / LESSON / "feedback").glob(f"*/{LESSON}.html"))
    assert files, f"{user} holds no feedback for {LESSON}"
    return html.unescape(files[-1].read_text())


def shown_score(feedback: str) -> float:
    """The total nbgrader's feedback page shows ("Score: 1.0 / 2.0" at its top)."""
    match = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", re.sub(r"<[^>]+>", " ", feedback))
    assert match, "the feedback shows no score"
    return float(match.group(1))


# ------------------------------------------------------------------------------------------------- the tests

PROFILES = {"full": "full", "blank": "blank", "part": "partial"}


def test_a_class_fetches_submits_and_gets_its_feedback_through_the_hub(hub: Hub, tmp_path: Path):
    started = time.monotonic()
    course = hub.courses[COURSE]
    trio = course.learners
    tokens = {user: hub.user_token(user) for user in trio}
    hub.start_servers(trio)
    phases = {"servers started": time.monotonic() - started}
    for user in trio:
        serve = f"/user/{user}"
        courses = hub.request("GET", f"{serve}/courses", token=tokens[user])
        assert courses["success"] and courses["value"] == [COURSE], f"{user}'s courses: {courses}"
        listed = hub.request("POST", f"{serve}/assignments/fetch", token=tokens[user],
                             form={"course_id": COURSE, "assignment_id": LESSON})
        assert [a["status"] for a in listed["value"] if a["assignment_id"] == LESSON] == ["fetched"], listed
        path = f"{COURSE}/{LESSON}/{LESSON}.ipynb"
        model = hub.request("GET", f"{serve}/api/contents/{path}", token=tokens[user])
        notebook = answered(nbformat.from_dict(model["content"]), PROFILES[user.rsplit("-", 1)[1]], f"answer of {user}")
        hub.request("PUT", f"{serve}/api/contents/{path}", token=tokens[user],
                    body={"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(notebook))})
        submitted = hub.request("POST", f"{serve}/assignments/submit", token=tokens[user],
                                form={"course_id": COURSE, "assignment_id": LESSON})
        assert submitted["success"], f"{user} could not submit: {submitted}"
        # the other course's assignments are not this learner's to fetch
        other = hub.request("POST", f"{serve}/assignments/fetch", token=tokens[user],
                            form={"course_id": CLASS, "assignment_id": LESSON})
        assert not (hub.accounts.home(user) / CLASS).exists(), f"{user} fetched a course they are not in: {other}"

    phases["fetched, answered, submitted"] = time.monotonic() - started
    # the instructor's side, as the grader account in the course folder
    hub.instructor(course, "nbgrader", "collect", LESSON)
    graded = hub.instructor(course, "coursetools.grading", "autograde", LESSON)
    assert "UNSANDBOXED" not in graded, graded
    hub.instructor(course, "nbgrader", "generate_feedback", LESSON)
    hub.instructor(course, "nbgrader", "release_feedback", LESSON)
    phases["collected, graded, feedback released"] = time.monotonic() - started
    scores = gradebook_scores(course)
    assert scores == {user: expected_score(PROFILES[user.rsplit("-", 1)[1]]) for user in trio}, scores

    hidden = hidden_tests()
    assert hidden, "lesson 00 has hidden tests to look for"
    for user in trio:
        done = hub.request("POST", f"/user/{user}/assignments/fetch_feedback", token=tokens[user],
                           form={"course_id": COURSE, "assignment_id": LESSON})
        assert done["success"], done
        feedback = fetched_feedback(hub, course, user)
        assert shown_score(feedback) == scores[user]
        assert f"answer of {user}" in feedback and not [u for u in trio if u != user and f"answer of {u}" in feedback]
        shown = [line for line in hidden if line.strip() and line.strip() in feedback]
        assert not shown, f"{user}'s feedback shows hidden tests: {shown}"

    # what one learner can reach of the others' work and of the instructor's
    full, blank = trio[0], trio[1]
    probe = (
        "import os, sys\n"
        "reached = []\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        os.listdir(path) if os.path.isdir(path) else open(path).read(1)\n"
        "        reached.append(path)\n"
        "    except PermissionError:\n"
        "        pass\n"
        "print('\\n'.join(reached))\n"
    )
    private = [
        str(hub.exchange / COURSE / "inbound"),  # every learner's submission (nbgrader: write-only for learners)
        str(hub.exchange / COURSE / "feedback"),  # every learner's feedback (named by a hash only its owner knows)
        str(hub.accounts.home(full)),  # another learner's working copy
        str(hub.accounts.home(full) / COURSE / LESSON / f"{LESSON}.ipynb"),
        str(course.root / "solutions" / LESSON / f"{LESSON}.ipynb"),  # the instructor's source and hidden tests
        str(course.root / "grading" / "gradebook.db"),
        str(course.root / "grading" / "submitted"),
    ]
    reached = run_as(blank, [str(hub.python), "-c", probe, *private], {"PATH": path_with(hub.python)})
    assert reached.returncode == 0, reached.stderr
    assert reached.stdout.split() == [], f"{blank} can read: {reached.stdout}"
    # a submission's folder in the exchange carries nbgrader's random part, so its path cannot be guessed either
    submissions = [p.name for p in (hub.exchange / COURSE / "inbound").iterdir()]
    assert len(submissions) == 3 and all(len(name.split("+")) == 4 for name in submissions), submissions

    # the Formgrader service: its course's instructors only
    teacher = course.instructors[0]
    teacher_token = hub.user_token(teacher)
    listed = hub.request("GET", f"/services/{COURSE}/formgrader/api/assignments", token=teacher_token)
    assert [a["name"] for a in listed] == [LESSON], listed
    for user, service in ((teacher, CLASS), (blank, COURSE)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            hub.request("GET", f"/services/{service}/formgrader/api/assignments",
                        token=teacher_token if user == teacher else tokens[user])
        assert refused.value.code == 403, f"{user} reached {service}'s Formgrader"

    phases["feedback fetched, access checked"] = time.monotonic() - started
    browser_checks(hub, course, blank, teacher, trio[2], tmp_path)
    phases["browser"] = time.monotonic() - started
    print(f"\nhub test, seconds since the hub was up (hub start-up: {hub.startup_s:.0f} s): "
          + ", ".join(f"{name} {at:.0f}" for name, at in phases.items()))


def browser_checks(hub: Hub, course: Course, learner: str, teacher: str, regrade: str, shots: Path) -> None:
    """Headless Chromium logs in through the hub's login page: the learner's lab lists the assignment in the
    Assignments panel; the instructor's Formgrader lists the lesson and its submissions, and its Autograde
    button grades ``regrade``'s submission again (in the course's sandbox) to the same score."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs the Debian package `chromium`")
        pytest.skip("Chromium is not installed (apt-get install chromium) - CI runs this test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = login(browser, hub, learner)
            page.goto(f"{hub.url}/user/{learner}/lab?reset")
            page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click(timeout=90_000)
            page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
            panel = page.locator("#nbgrader-assignment-list")
            panel.get_by_text(LESSON).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shots / "learner-assignments.png"))
            listed = panel.inner_text()
            menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
            page.close()

            page = login(browser, hub, teacher)
            page.goto(f"{hub.url}/services/{course.id}/formgrader")
            page.get_by_text(LESSON, exact=True).first.wait_for(timeout=90_000)
            page.screenshot(path=str(shots / "formgrader.png"))
            formgrader = page.locator("body").inner_text()

            # the instructor clicks Autograde (the flash icon) in the lesson's submissions for one learner
            graded = course.root / "grading" / "autograded" / regrade / LESSON / f"{LESSON}.ipynb"
            before = graded.stat().st_mtime_ns
            page.goto(f"{hub.url}/services/{course.id}/formgrader/manage_submissions/{LESSON}")
            row = page.locator("tr", has=page.locator("td.student-id", has_text=regrade))
            row.locator("td.autograde a").click(timeout=90_000)
            page.locator("#success-modal, #error-modal").wait_for(timeout=300_000)
            page.screenshot(path=str(shots / "formgrader-autograde.png"))
            outcome = page.locator("#success-modal, #error-modal").inner_text()
            page.goto(f"{hub.url}/services/{course.id}/formgrader/manage_submissions/{LESSON}")
            row = page.locator("tr", has=page.locator("td.student-id", has_text=regrade))
            shown = row.locator("td.score").inner_text(timeout=90_000)
        finally:
            browser.close()
    assert LESSON in listed and COURSE in listed, listed
    assert "Nbgrader" in menus, menus
    assert LESSON in formgrader and "Manage Assignments" in formgrader, formgrader[:1000]
    assert f"Successfully autograded '{LESSON}' for student '{regrade}'" in outcome, outcome[:3000]
    assert graded.stat().st_mtime_ns > before, "the Autograde button did not grade the submission again"
    expected = expected_score(PROFILES[regrade.rsplit("-", 1)[1]])
    assert gradebook_scores(course)[regrade] == expected
    # the Formgrader shows the score rounded to two places, "<score> / <max>"
    assert float(shown.split("/")[0]) == round(expected, 2), f"the Formgrader shows {shown!r}, the gradebook {expected}"


def login(browser, hub: Hub, user: str):
    """A new page logged in as ``user`` through the hub's login form (PAM: the Unix password)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.accounts.passwords[user])
    page.click("#login_submit")
    page.wait_for_url(re.compile(r".*/(user/|hub/home|hub/spawn).*"), timeout=60_000)
    return page


def test_a_class_of_20_submits_at_once_and_each_gets_their_own_feedback(hub: Hub):
    """Issue 22, part 5: 20 learners of the second course submit at the same moment (``nbgrader submit`` in their
    own accounts, with their hub tokens, as from a terminal in their hub server); the instructor grades the
    class with ``make grade``'s command. Prints the time from the last submission to every learner holding
    feedback; asserts only that nothing is lost or mixed up."""
    course = hub.courses[CLASS]
    learners = course.learners
    profiles = {user: ("full", "partial", "blank")[i % 3] for i, user in enumerate(learners)}
    tokens = {user: hub.user_token(user) for user in learners}

    def nbgrader(user: str, *command: str) -> float:
        done = run_as(user, [str(hub.python), "-m", "nbgrader", *command, LESSON, "--course", CLASS],
                      hub.learner_env(user, tokens[user]), cwd=hub.accounts.home(user))
        assert done.returncode == 0, f"{user}: nbgrader {command[0]} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
        return time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda user: nbgrader(user, "fetch_assignment"), learners))
    for user in learners:  # each pastes their own, signed answer into the copy they fetched
        path = hub.accounts.home(user) / CLASS / LESSON / f"{LESSON}.ipynb"
        nbformat.write(answered(nbformat.read(path, as_version=4), profiles[user], f"answer of {user}"), path)
        os.chown(path, hub.accounts.uid(user), hub.accounts.uid(user))

    first = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CLASS_SIZE) as pool:
        submitted_at = list(pool.map(lambda user: nbgrader(user, "submit"), learners))
    last_submission = max(submitted_at)
    hub.instructor(course, "nbgrader", "collect", LESSON)
    collected = time.monotonic()
    hub.instructor(course, "coursetools.classroom", "grade", LESSON)
    graded = time.monotonic()
    hub.instructor(course, "nbgrader", "generate_feedback", LESSON)
    hub.instructor(course, "nbgrader", "release_feedback", LESSON)
    released = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CLASS_SIZE) as pool:
        list(pool.map(lambda user: nbgrader(user, "fetch_feedback"), learners))
    everyone = time.monotonic()

    scores = gradebook_scores(course)
    assert scores == {user: expected_score(profiles[user]) for user in learners}, scores
    for user in learners:
        feedback = fetched_feedback(hub, course, user)
        others = [u for u in learners if u != user and f"answer of {u}" in feedback]  # names of equal length
        assert f"answer of {user}" in feedback and not others, f"{user}'s feedback is not (only) theirs: {others}"
        assert shown_score(feedback) == expected_score(profiles[user]), user
    print(f"\n{CLASS_SIZE} learners submitting at once: {last_submission - first:.1f} s from the first submit to the last "
          f"one done; from the last submission to every learner holding feedback: {everyone - last_submission:.1f} s "
          f"(collect {collected - last_submission:.1f}, grade {graded - collected:.1f}, generate and release "
          f"feedback {released - graded:.1f}, {CLASS_SIZE} learners fetch it {everyone - released:.1f}); "
          f"{len(scores)} submissions graded, none lost, each feedback its own learner's")
