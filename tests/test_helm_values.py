"""The course's Zero to JupyterHub values (hub/k8s/) hold what a large class needs, and the chart accepts them.

Always, without the chart: the files parse; the memory guarantee and limit fit lesson 08's measured peak;
the idle culler is on; the learner image's tag is pinned and its Dockerfile pins what binder/environment.yml
pins; ngshare is the exchange (a hub service, the learners' client and its network path); the profiles'
settings folders exist and the image copies them; the instructor profile is offered to instructors only.

With the chart (CI has no access to its Helm repository, and nothing of the chart is committed here): set
Z2JH_VALUES_SCHEMA to the chart's values.schema.json, as `helm` itself validates values, and the values are
merged over the chart's defaults (values.yaml beside the schema) and validated against it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import types
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from helpers.data import REPO_ROOT
from tests.test_environment import conda_env, pins

K8S = REPO_ROOT / "hub" / "k8s"
CHART_VERSION = "4.4.0"  # the Zero to JupyterHub chart these values target
CHART_JUPYTERHUB = "5.5.0"  # the JupyterHub its hub image runs; the learner image's single-user server matches it
IMAGE_HOME = "/opt/pytorch-course"  # where the Dockerfile puts the course in the image
# Lesson 08's measured peaks (README, "Course map"): CPU-only PyTorch, the image's build, and PyPI's CUDA build.
LESSON_08_PEAK_CPU = 0.98e9
LESSON_08_PEAK_CUDA = 2027 * 2**20
# Packages the image adds to binder's learner environment: the hub's single-user server and the exchange client.
IMAGE_ONLY = {"jupyterhub": CHART_JUPYTERHUB, "ngshare_exchange": "0.5.3"}
SCHEMA_ENV = "Z2JH_VALUES_SCHEMA"
HOW_TO_VALIDATE = (f"set {SCHEMA_ENV} to the chart's schema to validate against it: "
                   "helm repo add jupyterhub https://hub.jupyter.org/helm-chart/ && "
                   f"helm pull jupyterhub/jupyterhub --version {CHART_VERSION} --untar && "
                   f"{SCHEMA_ENV}=$PWD/jupyterhub/values.schema.json pytest tests/test_helm_values.py")


def load(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text())


@pytest.fixture(scope="module")
def values() -> dict:
    return load("values.yaml")


def quantity(value: str | int | float) -> float:
    """A Kubernetes quantity ("1.25G", "2Gi", "512Mi", 2) in bytes (or cores)."""
    match = re.fullmatch(r"([0-9.]+)([KMGT]i?)?", str(value))
    assert match, f"not a Kubernetes quantity: {value!r}"
    number, unit = float(match.group(1)), match.group(2) or ""
    powers = {"K": 1, "M": 2, "G": 3, "T": 4}
    return number * ((1024 if unit.endswith("i") else 1000) ** powers[unit[0]] if unit else 1)


def dockerfile_pins() -> dict[str, str]:
    text = (K8S / "Dockerfile").read_text()
    return {name.lower().replace("-", "_"): version
            for name, version in re.findall(r"\b([A-Za-z0-9_.\-]+)==([^\s\\]+)", text)}


# ------------------------------------------------------------------------------------- always: the values alone

def test_memory_fits_lesson_08(values):
    memory = values["singleuser"]["memory"]
    guarantee, limit = quantity(memory["guarantee"]), quantity(memory["limit"])
    assert limit >= guarantee, "the memory limit is below the guarantee"
    # the guarantee is reserved per learner: a class running lesson 08 together must fit what it reserved
    assert guarantee >= LESSON_08_PEAK_CPU, f"guarantee {memory['guarantee']} is below lesson 08's peak (~1 GB)"
    # the limit kills the kernel: it stays above even the CUDA build's peak
    assert limit >= LESSON_08_PEAK_CUDA, f"limit {memory['limit']} would kill lesson 08 (2027 MB with CUDA torch)"


def test_cpu_and_threads(values):
    cpu = values["singleuser"]["cpu"]
    assert 0 < cpu["guarantee"] <= cpu["limit"]
    # PyTorch would otherwise start a thread per core of the node and spend its time waiting for the quota
    assert int(values["singleuser"]["extraEnv"]["OMP_NUM_THREADS"]) == cpu["limit"]


def test_idle_culler_is_on(values):
    cull = values["cull"]
    assert cull["enabled"] is True
    assert 0 < cull["every"] < cull["timeout"], "the culler must look more often than its timeout"
    assert cull["maxAge"] >= cull["timeout"]
    assert cull["users"] is False, "culling must stop servers, not delete learners"


def test_image_tag_is_pinned(values):
    image = values["singleuser"]["image"]
    assert isinstance(image["tag"], str) and image["tag"], "the image tag must be a string"
    assert image["tag"] not in ("latest", "set-by-chartpress"), "pin the learner image's tag"
    assert ":" not in image["name"], "the tag goes in image.tag, not in the name"


def test_dockerfile_installs_binder_pins_with_cpu_torch():
    _, pip = conda_env(REPO_ROOT / "binder" / "environment.yml")
    binder = {name.replace("-", "_"): version for name, version in pins(pip).items()}
    image = dockerfile_pins()
    assert {k: v for k, v in image.items() if k not in IMAGE_ONLY} == binder
    assert {k: image.get(k) for k in IMAGE_ONLY} == IMAGE_ONLY
    dockerfile = (K8S / "Dockerfile").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in dockerfile, "the image must use CPU-only torch"
    # ngshare_exchange caps jupyter_core below what JupyterLab 4 needs: with its dependencies pip finds no solution
    assert re.search(r"pip install --no-deps ngshare_exchange==", dockerfile)
    assert re.search(r"^FROM \S+:\d[\w.\-]*$", dockerfile, re.M), "pin the base image's tag"
    assert f"--version {CHART_VERSION}" in (K8S / "values.yaml").read_text()


def test_mnist_is_inside_the_image():
    dockerfile = (K8S / "Dockerfile").read_text()
    data = re.search(r"COURSE_DATA=(\S+)", dockerfile)
    assert data, "the image must set COURSE_DATA"
    assert "data.mnist_dataset(True)" in dockerfile and "data.mnist_dataset(False)" in dockerfile
    # downloaded while building, never copied from a checkout (the data is not in the repository)
    assert not re.search(r"^COPY .*(\.cache|data/)", dockerfile, re.M)


def test_ngshare_is_the_exchange(values):
    service = values["hub"]["services"]["ngshare"]
    assert "api_token" not in service and "apiToken" not in service, "the token is a secret: hub-secrets.yaml"
    ngshare = load("ngshare-values.yaml")
    url = urlsplit(service["url"])
    assert (url.hostname, url.port) == ("ngshare", ngshare["deployment"]["port"])
    # learners' servers reach it through the hub's service prefix on the same host and port
    client = urlsplit(values["singleuser"]["extraEnv"]["NGSHARE_URL"])
    assert (client.hostname, client.port, client.path) == (url.hostname, url.port, "/services/ngshare")
    egress = values["singleuser"]["networkPolicy"]["egress"]
    assert any(rule["to"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "ngshare"}
               and {"port": url.port, "protocol": "TCP"} in rule["ports"] for rule in egress)
    config = (K8S / "nbgrader_config.py").read_text()
    assert "configureExchange(c, os.environ.get(\"NGSHARE_URL\"" in config
    assert "COPY hub/k8s/nbgrader_config.py /etc/jupyter/nbgrader_config.py" in (K8S / "Dockerfile").read_text()
    assert "ReadWriteOnce" in ngshare["pvc"]["accessModes"]


def test_profiles_point_at_settings_the_image_holds(values):
    profiles = {p["slug"]: p for p in values["singleuser"]["profileList"]}
    assert set(profiles) == {"learner", "instructor"} and profiles["learner"].get("default") is True
    # the Dockerfile's COPY lines that put a repository folder at the same place under IMAGE_HOME
    copied = [Path(src) for src, dest in re.findall(r"^COPY (\S+) (\S+)$", (K8S / "Dockerfile").read_text(), re.M)
              if dest.rstrip("/") == f"{IMAGE_HOME}/{src}"]
    for slug, profile in profiles.items():
        folders = profile["kubespawner_override"]["environment"]["JUPYTER_CONFIG_PATH"].split(":")
        for folder in folders:
            relative = Path(folder).relative_to(IMAGE_HOME)
            assert (REPO_ROOT / relative).is_dir(), f"{slug}: {relative} is not in the repository"
            assert any(relative.is_relative_to(src) for src in copied), f"{slug}: the image does not hold {relative}"
    assert "jupyter-config/learner" in profiles["learner"]["kubespawner_override"]["environment"]["JUPYTER_CONFIG_PATH"]
    assert profiles["instructor"]["kubespawner_override"]["environment"]["COURSE_ID"]
    # the course folder (nbgrader's course root ".") lies in the instructor's own storage
    home = values["singleuser"]["storage"].get("homeMountPath", "/home/jovyan")
    assert Path(profiles["instructor"]["kubespawner_override"]["working_dir"]).is_relative_to(home)


def test_only_instructors_see_the_instructor_profile(values):
    """Run hub.extraConfig as the chart's hub would, with the profiles it set from singleuser.profileList."""
    c = types.SimpleNamespace(KubeSpawner=types.SimpleNamespace(profile_list=values["singleuser"]["profileList"]))
    for name, code in sorted(values["hub"]["extraConfig"].items()):
        exec(compile(code, name, "exec"), {"c": c})
    pick = c.KubeSpawner.profile_list

    def spawner(*groups: str):
        return types.SimpleNamespace(user=types.SimpleNamespace(groups=[types.SimpleNamespace(name=g) for g in groups]))

    assert [p["slug"] for p in pick(spawner())] == ["learner"]
    assert [p["slug"] for p in pick(spawner("nbgrader-x"))] == ["learner"]
    assert [p["slug"] for p in pick(spawner("instructors"))] == ["learner", "instructor"]
    groups = values["hub"]["config"]["JupyterHub"]["load_groups"]
    assert "instructors" in groups
    assert values["hub"]["loadRoles"]["course-instructors"]["groups"] == ["instructors"]


# -------------------------------------------------------------------- with the chart: its own values schema

def merged(defaults: dict, overrides: dict) -> dict:
    """Helm's merge of -f values over a chart's defaults: maps merge, anything else replaces, null deletes."""
    result = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def leaf_paths(tree, prefix: str = "") -> list[str]:
    if isinstance(tree, dict) and tree:
        return [p for key, value in tree.items() for p in leaf_paths(value, f"{prefix}.{key}" if prefix else key)]
    return [prefix]


@pytest.fixture(scope="module")
def chart():
    """(the chart's schema validator, its default values), or skip saying how to get them."""
    jsonschema = pytest.importorskip("jsonschema")
    location = os.environ.get(SCHEMA_ENV)
    if not location:
        pytest.skip(HOW_TO_VALIDATE)
    schema_file = Path(location)
    schema = json.loads(schema_file.read_text()) if schema_file.suffix == ".json" else yaml.safe_load(schema_file.read_text())
    defaults_file = schema_file.with_name("values.yaml")
    assert defaults_file.is_file(), f"the chart's values.yaml must sit beside its schema ({defaults_file})"
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema), yaml.safe_load(defaults_file.read_text())


def schema_errors(chart, overrides: dict) -> list[str]:
    validator, defaults = chart
    return sorted(f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                  for e in validator.iter_errors(merged(defaults, overrides)))


def test_values_pass_the_charts_schema(chart, values):
    errors = schema_errors(chart, values)
    assert not errors, "the chart's schema rejects hub/k8s/values.yaml:\n" + "\n".join(errors)
    print(f"{len(leaf_paths(values))} values of hub/k8s/values.yaml validated against the chart's schema")


def _misspelt(v):
    v["singleuser"]["memroy"] = v["singleuser"].pop("memory")


def _wrong_type(v):
    v["cull"]["timeout"] = "3600"


def _nested_misspelt(v):
    v["singleuser"]["image"]["tags"] = v["singleuser"]["image"]["tag"]


def _cpu_as_string(v):
    v["singleuser"]["cpu"]["limit"] = "two"


@pytest.mark.parametrize("mistake", [_misspelt, _wrong_type, _nested_misspelt, _cpu_as_string])
def test_the_schema_catches_planted_mistakes(chart, values, mistake):
    """The check is worth something: a misspelt key or a wrong type in these values is rejected."""
    broken = copy.deepcopy(values)
    mistake(broken)
    errors = schema_errors(chart, broken)
    assert errors, f"the chart's schema accepted {mistake.__name__}"
    print(f"{mistake.__name__}: {errors}")
