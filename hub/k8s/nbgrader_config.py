"""nbgrader settings for every pod of the course's hub on Kubernetes: the exchange is ngshare.

The learner image (hub/k8s/Dockerfile) installs this as /etc/jupyter/nbgrader_config.py. nbgrader's default
exchange is a folder every user may write to, shared by all their servers; on Kubernetes each learner's server
is its own pod, so the exchange is ngshare instead, a hub service that keeps assignments, submissions and
feedback behind JupyterHub's login, and ngshare_exchange is nbgrader's client for it (ngshare's Z2JH guide).
NGSHARE_URL is set by hub/k8s/values.yaml (singleuser.extraEnv); the default is ngshare's chart installed
under the release name ``ngshare`` in the hub's namespace.
"""

import os

from ngshare_exchange import configureExchange

c = get_config()  # noqa: F821 - provided by nbgrader

configureExchange(c, os.environ.get("NGSHARE_URL", "http://ngshare:8080/services/ngshare"))
# Learners see every course ngshare lists them in ("*"); an instructor's Formgrader works on one course, named
# by COURSE_ID (the instructor profile in values.yaml sets it; the course folder's nbgrader_config.py reads it too).
c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "*")
