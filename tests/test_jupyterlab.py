"""Real JupyterLab servers on loopback serve the course the way learners and instructors get it.

The learner's lab (``make lab``, Binder) serves the learner notebooks through its
REST API, has nbgrader's Validate extension (installed and answering) and none of
the instructor tools, and its kernels import ``helpers`` from the same place as
nbval and nbgrader's autograde folder do. The instructor's lab (``make instructor``)
runs nbgrader's Formgrader on the course. Headless Chromium checks what each shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyter_client import BlockingKernelClient

import helpers
from coursetools.authoring import execute
from helpers.data import REPO_ROOT
from coursetools.grading import copy_course
from tests.test_roundtrip import submit

pytestmark = pytest.mark.slow
TOKEN = "course-test-token"
EXPECTED_HELPERS = str(Path(helpers.__file__).resolve())
LESSONS = sorted(p.parent.name for p in (REPO_ROOT / "notebooks").glob("*/*.ipynb"))
MODES = ("learner", "instructor")  # jupyter-config/<mode>, as the Makefile's lab and instructor targets use them


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self, url: str, runtime_dir: Path):
        self.url, self.runtime_dir = url, runtime_dir

    def request(self, method: str, path: str, body: dict | None = None, form: dict | None = None) -> dict | str:
        data = json.dumps(body).encode() if body is not None else (urllib.parse.urlencode(form).encode() if form else None)
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=120) as response:
            text = response.read().decode()
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text


def lab_environment(mode: str | None) -> dict[str, str]:
    """The environment `make lab` (learner) or `make instructor` gives JupyterLab; None: JupyterLab as installed."""
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    if mode is not None:
        env["JUPYTER_CONFIG_PATH"] = str(REPO_ROOT / "jupyter-config" / mode)
    return env


def start_lab(root: Path, runtime: Path, mode: str | None):
    """Start JupyterLab on 127.0.0.1 with ``root`` as its root and working directory; yield it, then stop it."""
    port = free_port()
    env = {**lab_environment(mode), "JUPYTER_RUNTIME_DIR": str(runtime)}
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False", "--allow-root"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lab = Lab(f"http://127.0.0.1:{port}", runtime)
    deadline = time.monotonic() + 90
    while True:
        try:
            lab.request("GET", "/api/status")
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"JupyterLab did not start:\n{process.stderr.read()[-3000:]}")
            time.sleep(0.5)
    yield lab
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    """The learner's JupyterLab (as `make lab` starts it) with a copy of the learner notebooks as its root."""
    root = copy_course(tmp_path_factory.mktemp("lab-course"), ("notebooks",))
    yield from start_lab(root, tmp_path_factory.mktemp("runtime"), "learner")


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory) -> tuple[Lab, Path]:
    """The instructor's JupyterLab (as `make instructor` starts it) on a copy of the whole course."""
    root = copy_course(tmp_path_factory.mktemp("instructor-course"), ("solutions", "notebooks"))
    for lab in start_lab(root, tmp_path_factory.mktemp("runtime"), "instructor"):
        yield lab, root


@pytest.fixture(scope="module")
def stock_lab(tmp_path_factory) -> Lab:
    """JupyterLab as installed, without the course's config: the control that shows what the modes remove."""
    root = copy_course(tmp_path_factory.mktemp("stock-course"), ("notebooks",))
    yield from start_lab(root, tmp_path_factory.mktemp("runtime"), None)


@pytest.mark.parametrize("lesson", LESSONS)
def test_lab_serves_learner_notebook(lab: Lab, lesson: str):
    model = lab.request("GET", f"/api/contents/notebooks/{lesson}/{lesson}.ipynb")
    assert model["type"] == "notebook"
    cells = model["content"]["cells"]
    assert any("raise NotImplementedError()" in c["source"] or c["metadata"].get("starter") for c in cells), \
        "the learner version has exercises"


def test_lab_page_loads_nbgrader_extension(lab: Lab):
    page = lab.request("GET", "/lab")
    assert "@jupyter/nbgrader" in page, "nbgrader's lab extension (Validate button) is not installed"


def test_validate_button_backend(lab: Lab):
    """What the Validate button calls: the blank notebook fails, a finished one passes."""
    blank = lab.request("POST", "/assignments/validate", form={"path": "notebooks/00_start_here/00_start_here.ipynb"})
    assert blank["success"], blank
    assert blank["value"].get("failed"), f"a blank notebook must fail validation: {blank['value']}"
    lab.request("PUT", "/api/contents/done.ipynb", body={
        "type": "notebook", "format": "json",
        "content": json.loads(nbformat.writes(nbformat.read(REPO_ROOT / "solutions/00_start_here/00_start_here.ipynb", 4)))})
    done = lab.request("POST", "/assignments/validate", form={"path": "done.ipynb"})
    assert done["success"] and not done["value"].get("failed"), done


def test_lab_kernel_imports_helpers_from_the_course(lab: Lab):
    kernel = lab.request("POST", "/api/kernels", body={"name": "python3"})
    outputs: list[dict] = []
    try:
        client = BlockingKernelClient(connection_file=str(lab.runtime_dir / f"kernel-{kernel['id']}.json"))
        client.load_connection_file()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive("import helpers, pathlib; print(pathlib.Path(helpers.__file__).resolve())", timeout=60,
                                           output_hook=lambda msg: outputs.append(msg))
        assert reply["content"]["status"] == "ok"
        printed = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
        assert printed.strip() == EXPECTED_HELPERS
        client.stop_channels()
    finally:
        lab.request("DELETE", f"/api/kernels/{kernel['id']}")


def test_autograde_folder_imports_helpers_from_the_course(tmp_path: Path):
    """nbgrader runs notebooks with their own folder as the working directory; helpers must not depend on it."""
    folder = tmp_path / "autograded" / "student" / "00_start_here"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import helpers, pathlib; print(pathlib.Path(helpers.__file__).resolve())")])
    execute(nb, folder)
    assert nb.cells[0].outputs[0]["text"].strip() == EXPECTED_HELPERS


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEWS_QUESTION = "notified about official Jupyter news"
# JupyterLab asks about the news a moment after it starts; the stock lab shows how long that takes.
NEWS_WAIT_S = 15


@contextlib.contextmanager
def browser_page(lab: Lab, path: str):
    """Headless Chromium with ``path`` (a notebook, relative to the lab's root) open in JupyterLab."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs the Debian package `chromium`")
        pytest.skip("Chromium is not installed (apt-get install chromium) - CI runs this test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{lab.url}/lab/tree/{path}?reset&token={TOKEN}")  # reset: only this notebook open
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            yield page
        finally:
            browser.close()


def lab_chrome(page) -> dict[str, list[str]]:
    """What a user sees around the notebook: the main menus, the side-panel tabs, the notification toasts."""
    return {
        "menus": page.locator(".lm-MenuBar-itemLabel").all_inner_texts(),
        "panels": page.eval_on_selector_all(".lm-TabBar-tab", "tabs => tabs.map(t => t.getAttribute('data-id') || '')"),
        "toasts": page.locator(".Toastify__toast").all_inner_texts(),
        "validate": [str(page.get_by_role("button", name="Validate").count())],
    }


def test_learner_notebook_in_a_real_browser_has_a_working_validate_button(lab: Lab, tmp_path: Path):
    """Headless Chromium opens lesson 00 in JupyterLab, clicks Validate, and sees the failing graded cell."""
    with browser_page(lab, "notebooks/00_start_here/00_start_here.ipynb") as page:
        page.get_by_text("check.check_to_fahrenheit(to_fahrenheit)").first.wait_for(timeout=30_000)
        validate = page.get_by_role("button", name="Validate")
        validate.wait_for(timeout=30_000)
        validate.click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=120_000)
        text = dialog.inner_text()
        page.screenshot(path=str(tmp_path / "validate.png"))
    assert "Validation Results" in text and "failed" in text and "to_fahrenheit" in text, text[:500]


def test_stock_jupyterlab_shows_what_the_course_modes_remove(stock_lab: Lab):
    """The control: without jupyter-config/, nbgrader's instructor tools and the news question are there,
    so the checks on the learner's lab below can see them when they are."""
    with browser_page(stock_lab, "notebooks/00_start_here/00_start_here.ipynb") as page:
        page.get_by_text(NEWS_QUESTION).wait_for(timeout=NEWS_WAIT_S * 1000)
        chrome = lab_chrome(page)
    assert "Nbgrader" in chrome["menus"] and "nbgrader-create_assignemnt" in chrome["panels"], chrome


def test_learner_lab_has_validate_and_no_instructor_tools(lab: Lab):
    with browser_page(lab, "notebooks/00_start_here/00_start_here.ipynb") as page:
        page.get_by_role("button", name="Validate").wait_for(timeout=30_000)
        page.wait_for_timeout(NEWS_WAIT_S * 1000)
        chrome = lab_chrome(page)
    assert chrome["validate"] == ["1"], chrome
    assert "Nbgrader" not in chrome["menus"], f"the Nbgrader menu (Formgrader, course list) is shown: {chrome}"
    assert not [p for p in chrome["panels"] if "nbgrader" in p], f"nbgrader's Create Assignment panel is shown: {chrome}"
    assert not [t for t in chrome["toasts"] if "news" in t], f"JupyterLab asks about Jupyter news: {chrome}"
    for path in ("/formgrader/api/assignments", "/formgraders", "/courses"):
        with pytest.raises(urllib.error.HTTPError) as missing:
            lab.request("GET", path)
        assert missing.value.code == 404, f"{path} answers in the learner's lab"


def test_instructor_lab_has_the_formgrader_and_lists_the_lessons(instructor_lab: tuple[Lab, Path]):
    lab, _ = instructor_lab
    with browser_page(lab, "notebooks/00_start_here/00_start_here.ipynb") as page:
        page.get_by_role("button", name="Validate").wait_for(timeout=30_000)
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
        page.keyboard.press("Escape")
        page.wait_for_timeout(NEWS_WAIT_S * 1000)
        chrome = lab_chrome(page)
        page.goto(f"{lab.url}/formgrader?token={TOKEN}")
        for lesson in LESSONS:
            page.get_by_text(lesson, exact=True).first.wait_for(timeout=60_000)
    assert {"Formgrader", "Course List"} <= set(items), items
    assert "nbgrader-create_assignemnt" in chrome["panels"], chrome
    assert not [t for t in chrome["toasts"] if "news" in t], f"JupyterLab asks about Jupyter news: {chrome}"


def test_formgrader_generates_releases_and_autogrades(instructor_lab: tuple[Lab, Path]):
    """The Formgrader's own REST handlers, as its buttons call them, on the course's fresh grading/ area."""
    lab, root = instructor_lab
    listed = lab.request("GET", "/formgrader/api/assignments")
    assert sorted(a["name"] for a in listed) == LESSONS, listed
    lesson = "00_start_here"
    generated = lab.request("POST", f"/formgrader/api/assignment/{lesson}/assign", body={})
    assert generated["success"], generated.get("error") or generated.get("log")
    assert (root / "notebooks" / lesson / f"{lesson}.ipynb").exists()
    released = lab.request("POST", f"/formgrader/api/assignment/{lesson}/release", body={})
    assert released["success"], released.get("error") or released.get("log")
    assert (root / "grading" / "exchange" / "pytorch-course" / "outbound" / lesson / f"{lesson}.ipynb").exists()
    submit(root, "alice", lesson)
    graded = lab.request("POST", f"/formgrader/api/submission/{lesson}/alice/autograde", body={})
    assert graded["success"], graded.get("error") or graded.get("log")
    submission = lab.request("GET", f"/formgrader/api/submission/{lesson}/alice")
    assert submission["score"] == submission["max_score"] == 2, submission


CRASHING_ANSWER = "def to_fahrenheit(celsius):\n    offset = '32'\n    return celsius * 9 / 5 + offset\n"


def test_failing_self_check_shows_one_red_message_in_the_browser(lab: Lab):
    """A self-check whose exercise raised: the message and the learner's own line, nothing from helpers/."""
    nb = nbformat.read(REPO_ROOT / "notebooks/00_start_here/00_start_here.ipynb", as_version=4)
    [exercise] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex_to_fahrenheit"]
    exercise.source = CRASHING_ANSWER
    lab.request("PUT", "/api/contents/notebooks/00_start_here/crashing.ipynb", body={
        "type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
    with browser_page(lab, "notebooks/00_start_here/crashing.ipynb") as page:
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        self_check = page.locator(".jp-CodeCell", has_text="check.check_to_fahrenheit(to_fahrenheit)").first
        output = self_check.locator(".jp-OutputArea-output")
        output.get_by_text("✘").wait_for(timeout=120_000)
        shown = output.inner_text()
        red = output.locator(".ansi-red-fg, .ansi-red-intense-fg").count()
    lines = [line for line in shown.splitlines() if line.strip()]
    assert lines[0].startswith("✘ to_fahrenheit(") and "raised TypeError" in lines[0], shown
    assert any("Cell In[" in line and "in to_fahrenheit" in line for line in lines), shown
    assert any("return celsius * 9 / 5 + offset" in line for line in lines), shown
    assert len(lines) <= 5, f"more than the message and the learner's frame:\n{shown}"
    for helper_sign in ("helpers/", "helpers.checks", "Traceback", "File ", "expect_tensor", "def call("):
        assert helper_sign not in shown, f"the output shows the helpers' traceback ({helper_sign}):\n{shown}"
    assert red >= 1, "the message is shown in red"


def nbval_run(folder: Path, stored_output: str) -> subprocess.CompletedProcess:
    """Run nbval on a one-cell notebook whose stored output claims where helpers lives."""
    cell = nbformat.v4.new_code_cell("import helpers, pathlib; print(pathlib.Path(helpers.__file__).resolve())")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored_output + "\n")]
    cell.execution_count = 1  # nbval refuses stored outputs of a cell that was never run
    path = folder / "where_is_helpers.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                           "-q", str(path)], cwd=folder, capture_output=True, text=True, timeout=300)


def test_nbval_kernel_imports_helpers_from_the_course(tmp_path: Path):
    assert nbval_run(tmp_path, EXPECTED_HELPERS).returncode == 0
    assert nbval_run(tmp_path, "/somewhere/else/helpers/__init__.py").returncode != 0, "nbval must compare the output"
