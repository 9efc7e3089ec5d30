"""JupyterHub for teaching the course: learners' labs, the Formgrader as a hub service, nbgrader's exchange.

Run from the hub's state folder (it holds jupyterhub.sqlite and the cookie secret), as root, with the
course's Python (its environment has jupyterhub, nbgrader and the course installed):

    jupyterhub -f /path/to/course/hub/jupyterhub_config.py

The courses, their accounts and people come from a TOML file (default: courses.toml beside this file; the
environment variable COURSE_HUB_COURSES names another), in the shape of hub/courses.example.toml. For each
course this sets up what nbgrader documents in "Using nbgrader with JupyterHub" (multiple classes):

- a Formgrader service named after the course, a Jupyter server run as the course's own grader account in the
  course folder (a clone of this repository), with the course's instructor tools (jupyter-config/instructor);
- group ``formgrade-<course>`` (instructors: may open that service) and ``nbgrader-<course>`` (learners: may
  fetch and submit that course's assignments), with a role each;
- the exchange at one shared root with a folder per course (hub/jupyter-config/common/nbgrader_config.py).
- the idle culler, a service that stops servers idle for COURSE_HUB_CULL_TIMEOUT seconds (default 3600).

Learners get the learner lab (the course's jupyter-config/learner: Validate, no instructor tools) plus
nbgrader's Assignments panel; instructors' own servers add the Course List, which links to the Formgrader.
docs/hub-runbook.md is the instructor's guide.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from jupyterhub.spawner import Spawner

c = get_config()  # noqa: F821 - provided by JupyterHub

HUB = Path(__file__).resolve().parent
COURSE_REPO = HUB.parent
COURSES_FILE = Path(os.environ.get("COURSE_HUB_COURSES", HUB / "courses.toml"))
SETTINGS = tomllib.loads(COURSES_FILE.read_text())
EXCHANGE = SETTINGS["hub"]["exchange"]
COURSES: list[dict] = SETTINGS["course"]


def config_path(*folders: Path) -> str:
    """A JUPYTER_CONFIG_PATH: earlier folders win (Jupyter reads them as the most specific)."""
    return os.pathsep.join(str(f) for f in folders)


LEARNER_CONFIG = config_path(HUB / "jupyter-config" / "learner", HUB / "jupyter-config" / "common",
                             COURSE_REPO / "jupyter-config" / "learner")
INSTRUCTOR_CONFIG = config_path(HUB / "jupyter-config" / "instructor", HUB / "jupyter-config" / "common",
                                COURSE_REPO / "jupyter-config" / "learner")
FORMGRADER_CONFIG = config_path(HUB / "jupyter-config" / "common", COURSE_REPO / "jupyter-config" / "instructor")
# Servers and services run the Python the hub runs (the course's environment), not whatever is on PATH.
SINGLEUSER = [sys.executable, "-m", "jupyterhub.singleuser"]
INSTRUCTORS = {name for course in COURSES for name in course.get("instructors", [])}


def lab_config(spawner) -> str:
    """An instructor's own server gets the Course List (links to their Formgraders); everyone else the learner lab."""
    return INSTRUCTOR_CONFIG if spawner.user.name in INSTRUCTORS else LEARNER_CONFIG


# Who may log in: PAM (the machine's Unix accounts and passwords, JupyterHub's default), limited to the
# people the courses name; each server runs as its user (LocalProcessSpawner, the default).
c.Authenticator.allowed_users = INSTRUCTORS | {name for course in COURSES for name in course.get("learners", [])}
c.Authenticator.admin_users = set(SETTINGS["hub"].get("admins", []))
c.Spawner.cmd = SINGLEUSER
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "JUPYTER_CONFIG_PATH": lab_config,
    "COURSE_EXCHANGE_ROOT": EXCHANGE,
}
# the MNIST folder, where the hub's administrator provides one (helpers.data reads COURSE_DATA)
c.Spawner.env_keep = [*Spawner.class_traits()["env_keep"].default(), "COURSE_DATA"]
# JupyterHub's proxy, installed by `make hub-proxy` into hub/node_modules (pinned in hub/package-lock.json).
PROXY = HUB / "node_modules" / ".bin" / "configurable-http-proxy"
if PROXY.exists():
    c.ConfigurableHTTPProxy.command = [str(PROXY)]

groups: dict[str, dict] = {}
roles: list[dict] = [
    # A server's own token acts with its owner's rights: nbgrader's Assignments panel asks the hub which
    # nbgrader-/formgrade- groups its user is in (JupyterHubAuthPlugin), as nbgrader's multiple-classes demo does.
    {"name": "server", "scopes": ["inherit"]},
]
services: list[dict] = []
for course in COURSES:
    name = course["id"]
    # the grader account too: its Formgrader asks the hub which courses its own user grades (JupyterHubAuthPlugin)
    groups[f"formgrade-{name}"] = {"users": [*course.get("instructors", []), course["grader"]]}
    groups[f"nbgrader-{name}"] = {"users": list(course.get("learners", []))}
    roles += [
        # instructors open the course's Formgrader, and their Course List finds it
        {"name": f"formgrade-{name}", "groups": [f"formgrade-{name}"],
         "scopes": [f"access:services!service={name}", "list:services", f"read:services!service={name}"]},
        # learners' Assignments panel finds the course
        {"name": f"nbgrader-{name}", "groups": [f"nbgrader-{name}"],
         "scopes": ["list:services", f"read:services!service={name}"]},
        # the Formgrader reads its own account's groups and its learners, and adds the learners an instructor
        # enrols to nbgrader-<course> (JupyterHubAuthPlugin.add_student_to_course); no other course's groups
        {"name": f"service-{name}", "services": [name],
         "scopes": ["list:groups", f"read:groups!group=nbgrader-{name}", f"groups!group=nbgrader-{name}",
                    f"read:users!group=nbgrader-{name}", f"read:users!group=formgrade-{name}"]},
    ]
    services.append({
        "name": name,
        "url": f"http://127.0.0.1:{course['port']}",
        "command": [*SINGLEUSER, f"--ServerApp.root_dir={course['root']}"],
        "user": course["grader"],
        "cwd": course["root"],
        "environment": {
            "JUPYTER_CONFIG_PATH": FORMGRADER_CONFIG,
            "JUPYTERHUB_DEFAULT_URL": "/formgrader",
            "COURSE_EXCHANGE_ROOT": EXCHANGE,
            # nbgrader_config.py of the course folder reads its course id from here (one clone per course)
            "COURSE_ID": name,
            **({"COURSE_DATA": os.environ["COURSE_DATA"]} if os.environ.get("COURSE_DATA") else {}),
        },
        # the instructor sees the Formgrader in the hub's Services menu, and is not asked to authorize it:
        # the hub's administrator configured it for the course
        "display": True,
        "oauth_no_confirm": True,
    })
# The idle culler (jupyterhub-idle-culler, a hub service): stops a server nobody has used for
# COURSE_HUB_CULL_TIMEOUT seconds (default an hour: longer than a learner reads between two cells, short enough
# that a class that left gives its memory back the same hour). The learner's files stay; the next login restarts
# the server. The culler's own role has only the scopes its README lists for stopping servers.
CULLER = "idle-culler"
CULL_TIMEOUT = int(os.environ.get("COURSE_HUB_CULL_TIMEOUT", "3600"))
if CULLER in {course["id"] for course in COURSES}:
    raise ValueError(f"a course may not be named {CULLER!r}: the idle culler's service has that name")
services.append({
    "name": CULLER,
    # looks every half timeout (the culler's default), so an idle server stops between 1 and 1.5 timeouts
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}"],
})
roles.append({"name": CULLER, "services": [CULLER],
              "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]})

c.JupyterHub.load_groups = groups
c.JupyterHub.load_roles = roles
c.JupyterHub.services = services
