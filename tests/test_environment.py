"""pyproject.toml, environment.yml and binder/ pin the same packages; the README's Binder link opens lesson 00."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from helpers.data import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")


def pins(requirements: list[str]) -> dict[str, str]:
    found = {}
    for line in requirements:
        match = PIN.match(line.strip())
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    unpinned = [r for r in requirements if not PIN.match(r)]
    assert not unpinned, f"unpinned requirements in pyproject.toml: {unpinned}"
    return pins(requirements)


def conda_env(path: Path) -> tuple[list[str], list[str]]:
    env = yaml.safe_load(path.read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return conda, pip


def test_environment_yml_matches_pyproject():
    conda, pip = conda_env(REPO_ROOT / "environment.yml")
    assert "python=3.11" in conda
    assert pins(pip) == pyproject_pins()
    assert "-e ." in pip, "environment.yml must install the helpers package"


def test_binder_matches_pyproject_with_cpu_torch():
    """Binder installs what learners need: pyproject's dependencies, none of its test or grading extras."""
    conda, pip = conda_env(REPO_ROOT / "binder" / "environment.yml")
    assert "python=3.11" in conda
    learner_pins = pins(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert pins(pip) == learner_pins
    assert any("download.pytorch.org/whl/cpu" in line for line in pip), "Binder must use the CPU-only torch wheels"


def test_binder_postbuild_installs_helpers():
    post_build = (REPO_ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post_build
    assert (REPO_ROOT / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


def test_readme_binder_link_opens_lesson_00():
    readme = (REPO_ROOT / "README.md").read_text()
    match = re.search(r"https://mybinder\.org/v2/gh/[^)\s]+\?urlpath=([^)\s]+)", readme)
    assert match, "README has no Binder link"
    urlpath = match.group(1).replace("%2F", "/")
    assert urlpath.startswith("lab/tree/")
    assert (REPO_ROOT / urlpath.removeprefix("lab/tree/")).is_file(), f"Binder urlpath points nowhere: {urlpath}"


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO_ROOT / "README.md").read_text()
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make test" in ci


def test_readme_course_map_lists_each_lesson_with_its_points():
    import nbformat

    readme = (REPO_ROOT / "README.md").read_text()
    listed = dict(re.findall(r"\| `notebooks/(\w+)` \| (\d+) \|", readme))
    for source in sorted((REPO_ROOT / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(source, as_version=4)
        points = sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in nb.cells)
        lesson = source.parent.name
        assert lesson in listed, f"README's course map does not list {lesson}"
        assert int(listed[lesson]) == points, f"README says {lesson} has {listed[lesson]} points; it has {points}"


def test_binder_start_caps_threads_and_runs_the_command(tmp_path):
    import subprocess

    start = REPO_ROOT / "binder" / "start"
    assert start.stat().st_mode & 0o111, "binder/start must be executable"
    out = subprocess.run(["bash", str(start), "bash", "-c", "echo ran:$OMP_NUM_THREADS"], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "3"})
    assert out.stdout.strip() == "ran:3", "an explicit OMP_NUM_THREADS is kept and the command runs"
