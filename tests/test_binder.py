"""Binder is ready to publish: repo2docker's own parser reads binder/, and the README names the repository once.

``repo2docker --no-build --debug`` prints the Dockerfile it would build, without
Docker; the checks read that, not a guess of what repo2docker does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.data import REPO_ROOT

BINDER_URL = re.compile(r"https://mybinder\.org/v2/gh/([^/\s]+/[^/\s]+)/")


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory) -> tuple[str, str]:
    """(the Dockerfile repo2docker writes for the course's binder/ folder, its log)."""
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO_ROOT / "binder", repo / "binder")
    shutil.copy(REPO_ROOT / "pyproject.toml", repo)
    run = subprocess.run([str(Path(sys.executable).parent / "repo2docker"), "--no-build", "--debug", str(repo)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "FROM " in run.stdout, run.stdout[:2000]
    return run.stdout, run.stderr


def test_repo2docker_installs_binder_environment_with_python_3_11(dockerfile):
    text, log = dockerfile
    assert "Building conda environment for python=3.11" in log
    assert re.search(r'env update -p \$\{NB_PYTHON_PREFIX\} --file "binder/environment.yml"', text), \
        "repo2docker does not install binder/environment.yml"


def test_the_environment_it_installs_has_the_cpu_torch_and_no_test_packages():
    env = yaml.safe_load((REPO_ROOT / "binder" / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip, "Binder must install PyTorch's CPU build"
    names = {re.split(r"[=<>]", line)[0].lower() for line in pip if not line.startswith("-")}
    assert {"torch", "torchvision", "jupyterlab", "nbgrader"} <= names
    assert not names & {"pytest", "nbval", "playwright", "ruff", "jupyter-repo2docker", "psycopg2-binary"}, names


def test_repo2docker_runs_post_build_and_starts_through_start(dockerfile):
    text, _ = dockerfile
    assert "RUN ./binder/postBuild" in text
    assert 'R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in text


def test_binder_start_gives_jupyterlab_the_learner_set_up():
    """binder/start puts jupyter-config/learner on JUPYTER_CONFIG_PATH, as `make lab` does."""
    run = subprocess.run(["bash", str(REPO_ROOT / "binder" / "start"), "bash", "-c", "echo $JUPYTER_CONFIG_PATH"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert Path(run.stdout.strip().split(":")[0]) == REPO_ROOT / "jupyter-config" / "learner"
    make = subprocess.run(["make", "-n", "lab"], cwd=REPO_ROOT, capture_output=True, text=True)
    if make.returncode == 0:
        assert f"JUPYTER_CONFIG_PATH={REPO_ROOT / 'jupyter-config' / 'learner'}" in make.stdout


def test_readme_names_the_binder_repository_in_one_documented_place():
    readme = (REPO_ROOT / "README.md").read_text()
    repositories = BINDER_URL.findall(readme)
    assert len(repositories) == 1, f"the Binder URL appears {len(repositories)} times; keep one [binder]: link definition"
    [definition] = [line for line in readme.splitlines() if BINDER_URL.search(line)]
    assert definition.startswith("[binder]: "), "the Binder URL lives in one reference-style link definition"
    assert "][binder]" in readme, "the badge uses the [binder] link"
    assert "`[binder]:`" in readme, "the README says where to change the repository"
