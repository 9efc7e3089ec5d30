"""The course's JupyterHub (hub/jupyterhub_config.py) runs jupyterhub-idle-culler as a hub service.

Fast: the configuration, loaded as JupyterHub loads it, declares the service with exactly the scopes the
culler's README lists for stopping servers, and its timeout follows COURSE_HUB_CULL_TIMEOUT.
Slow: a real hub on loopback (its proxy from npm, ``make hub-proxy``) with a 6-second timeout stops a
server nobody uses. It runs the servers as the hub's own user (JupyterHub's SimpleLocalProcessSpawner), so it
creates no Unix users and needs no root; tests/test_hub.py covers the real class's spawner.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from helpers.data import REPO_ROOT

HUB = REPO_ROOT / "hub"
CULLER_SCOPES = {"list:users", "read:users:activity", "read:servers", "delete:servers"}  # its README, "Permissions"


def hub_config(monkeypatch, **env: str):
    monkeypatch.setenv("COURSE_HUB_COURSES", str(HUB / "courses.example.toml"))
    monkeypatch.delenv("COURSE_HUB_CULL_TIMEOUT", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return PyFileConfigLoader("jupyterhub_config.py", path=str(HUB)).load_config()


def culler(config) -> tuple[dict, dict]:
    services = [s for s in config.JupyterHub.services if s["name"] == "idle-culler"]
    roles = [r for r in config.JupyterHub.load_roles if r["name"] == "idle-culler"]
    assert len(services) == 1 and len(roles) == 1, "the hub declares one idle-culler service and its role"
    return services[0], roles[0]


def test_culler_is_a_service_with_only_the_scopes_it_needs(monkeypatch):
    from jupyterhub.scopes import scope_definitions

    service, role = culler(hub_config(monkeypatch))
    assert service["command"] == [sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600"]
    assert not service.get("admin"), "the culler needs scopes, not admin"
    assert role["services"] == ["idle-culler"] and set(role["scopes"]) == CULLER_SCOPES
    assert CULLER_SCOPES <= set(scope_definitions), "a scope JupyterHub does not know"
    # the course's own roles still hold, and no course's Formgrader got the culler's rights
    config = hub_config(monkeypatch)
    assert all("delete:servers" not in r["scopes"] for r in config.JupyterHub.load_roles if r["name"] != "idle-culler")
    import jupyterhub_idle_culler  # noqa: F401 - the pinned package the command runs


def test_culler_timeout_comes_from_the_environment(monkeypatch):
    service, _ = culler(hub_config(monkeypatch, COURSE_HUB_CULL_TIMEOUT="900"))
    assert service["command"][-1] == "--timeout=900"


# ------------------------------------------------------------------------------- slow: a hub culls a server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_hub_stops_an_idle_server(tmp_path: Path):
    if sys.platform != "linux":
        pytest.skip("the hub's local spawner is tested on Linux")
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (apt-get install nodejs npm): the hub's proxy comes from npm")
    proxy = subprocess.run(["make", "-s", "hub-proxy"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proxy.returncode == 0, f"make hub-proxy (npm ci) failed:\n{proxy.stdout}\n{proxy.stderr[-3000:]}"

    token, user, timeout = secrets.token_hex(16), "idle-learner", 6
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    (tmp_path / "courses.toml").write_text('course = []\n[hub]\nexchange = "/nonexistent"\n')
    (tmp_path / "jupyterhub_config.py").write_text("\n".join([
        "c = get_config()  # noqa",
        f"load_subconfig({str(HUB / 'jupyterhub_config.py')!r})",
        f"c.JupyterHub.bind_url = 'http://127.0.0.1:{ports['public']}'",
        f"c.JupyterHub.hub_bind_url = 'http://127.0.0.1:{ports['hub']}'",
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{ports['proxy_api']}'",
        # users only of the hub, whose servers run as this test's own user in folders of their own (no Unix users)
        "c.JupyterHub.authenticator_class = 'dummy'",
        "c.JupyterHub.spawner_class = 'simple'",
        f"c.SimpleLocalProcessSpawner.home_dir_template = {str(tmp_path / 'homes' / '{username}')!r}",
        "c.Spawner.args = ['--ServerApp.allow_root=True']",
        f"c.JupyterHub.services = [*c.JupyterHub.services, {{'name': 'culler-test', 'api_token': {token!r}}}]",
        "c.JupyterHub.load_roles = [*c.JupyterHub.load_roles, {'name': 'culler-test', 'services': ['culler-test'],"
        " 'scopes': ['admin:users', 'admin:servers', 'list:services', 'read:services']}]",
        "",
    ]))
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
           "LANG": "C.UTF-8", "COURSE_HUB_COURSES": str(tmp_path / "courses.toml"),
           "COURSE_HUB_CULL_TIMEOUT": str(timeout)}
    api = f"http://127.0.0.1:{ports['hub']}/hub/api"

    def request(method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(api + path, data=data, method=method, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=60) as response:  # a busy machine's hub can be slow to answer
            text = response.read()
            return json.loads(text) if text else None

    log = tmp_path / "jupyterhub.log"
    with log.open("w") as out:
        hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(tmp_path / "jupyterhub_config.py")],
                               cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def answered(ready) -> bool:
            try:
                return ready()
            except (OSError, urllib.error.HTTPError):  # not up yet, or too busy to answer: ask again
                return False

        def wait(what: str, ready, seconds: float) -> float:
            started = time.monotonic()
            while not answered(ready):
                if hub.poll() is not None or time.monotonic() - started > seconds:
                    pytest.fail(f"{what} within {seconds} s:\n{log.read_text()[-5000:]}")
                time.sleep(0.5)
            return time.monotonic() - started

        wait("the hub did not start", lambda: "idle-culler" in request("GET", "/services"), 120)
        request("POST", f"/users/{user}")
        request("POST", f"/users/{user}/server")
        # nobody uses it: once it is up, the culler (looking every timeout/2) stops it after 1 to 1.5 timeouts. Waited
        # for in one go: on a busy machine the culler may stop it before this test sees it ready.
        gone = wait("the idle culler did not stop the idle server", lambda: "" not in request(
            "GET", f"/users/{user}")["servers"], 120 + 2 * timeout)
        print(f"\nserver started and stopped by the idle culler {gone:.1f} s after it was asked for (timeout {timeout} s)")
        hub_log = log.read_text()
        # it did start, and the culler stopped it (its own log line, through the hub's output): no failed spawn
        assert f"User {user} took" in hub_log and f"Culling server {user}" in hub_log, hub_log[-3000:]
        assert request("GET", f"/users/{user}")["name"] == user, "the culler stops servers; it keeps the learner"
    finally:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(timeout=60)
        except subprocess.TimeoutExpired:
            hub.kill()
        try:
            os.killpg(hub.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
