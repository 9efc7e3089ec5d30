"""nbgrader settings every account on the course hub shares (learners, instructors, the formgrader services).

hub/jupyterhub_config.py puts this folder on JUPYTER_CONFIG_PATH and COURSE_EXCHANGE_ROOT in the environment
of every server it starts. As nbgrader's "Using nbgrader with JupyterHub" documents for several courses on one
hub: the exchange keeps each course in its own folder, and JupyterHub's groups (nbgrader-<course> for learners,
formgrade-<course> for instructors) say who may fetch and submit which course's assignments.
"""

import os

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - provided by nbgrader

if os.environ.get("COURSE_EXCHANGE_ROOT"):
    c.Exchange.root = os.environ["COURSE_EXCHANGE_ROOT"]
c.Exchange.path_includes_course = True
c.Authenticator.plugin_class = JupyterHubAuthPlugin
