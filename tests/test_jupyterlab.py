"""A real JupyterLab server on loopback serves the course the way learners get it.

It serves the learner notebooks through its REST API, has nbgrader's Validate
extension (installed and answering), and its kernels import ``helpers`` from the
same place as nbval and nbgrader's autograde folder do.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyter_client import BlockingKernelClient

import helpers
from helpers.authoring import execute
from helpers.data import REPO_ROOT
from helpers.grading import copy_course

pytestmark = pytest.mark.slow
TOKEN = "course-test-token"
EXPECTED_HELPERS = str(Path(helpers.__file__).resolve())


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


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    """JupyterLab on 127.0.0.1 with a copy of the course as its root, as `make lab` starts it."""
    root = copy_course(tmp_path_factory.mktemp("lab-course"), ("notebooks",))
    runtime = tmp_path_factory.mktemp("runtime")
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
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


@pytest.mark.parametrize("lesson", sorted(p.parent.name for p in (REPO_ROOT / "notebooks").glob("*/*.ipynb")))
def test_lab_serves_learner_notebook(lab: Lab, lesson: str):
    model = lab.request("GET", f"/api/contents/notebooks/{lesson}/{lesson}.ipynb")
    assert model["type"] == "notebook"
    cells = model["content"]["cells"]
    assert any("raise NotImplementedError()" in c["source"] for c in cells), "the learner version has exercises"


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


def test_learner_notebook_in_a_real_browser_has_a_working_validate_button(lab: Lab, tmp_path: Path):
    """Headless Chromium opens lesson 00 in JupyterLab, clicks Validate, and sees the failing graded cell."""
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
            page.goto(f"{lab.url}/lab/tree/notebooks/00_start_here/00_start_here.ipynb?token={TOKEN}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            page.get_by_text("check.check_to_fahrenheit(to_fahrenheit)").first.wait_for(timeout=30_000)
            validate = page.get_by_role("button", name="Validate")
            validate.wait_for(timeout=30_000)
            validate.click()
            dialog = page.locator(".jp-Dialog")
            dialog.wait_for(timeout=120_000)
            text = dialog.inner_text()
            page.screenshot(path=str(tmp_path / "validate.png"))
        finally:
            browser.close()
    assert "Validation Results" in text and "failed" in text and "to_fahrenheit" in text, text[:500]


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
