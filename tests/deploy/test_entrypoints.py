"""The commands the Dockerfile and the manifests run exist in the installed package and start:
gunicorn serves /healthz and /metrics with the image's configuration, celery finds the app,
manage.py passes Django's deployment checks, gpuagent answers --help."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.deploy.manifests import (
    OVERLAYS,
    PORTAL_PROCESSES,
    REPO,
    VENV_BIN,
    deployment,
    find,
    pod_specs,
    render,
)
from tests.support.waiting import eventually
from tests.support.web_server import production_env, web_server


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=REPO, env=env or production_env(), capture_output=True,
                          text=True, timeout=60)


def _commands() -> set[str]:
    commands = set()
    for path in OVERLAYS:
        for _, spec in pod_specs(render(path)):
            for container in spec.get("initContainers", []) + spec["containers"]:
                if container["image"].split(":")[0].endswith("gpu-portal/portal"):
                    commands.add(container["command"][0])
    return commands


def test_every_program_the_manifests_run_is_installed():
    commands = _commands()
    assert commands == {"gunicorn", "celery", "python"}
    for command in commands:
        assert (VENV_BIN / command).exists(), command
    assert (REPO / "manage.py").exists()
    dockerfile = (REPO / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD\s+(\[.*\])\s*$", dockerfile, flags=re.MULTILINE)
    assert yaml.safe_load(cmd) == ["gunicorn", "portal.wsgi"]
    assert re.search(r"^COPY .*\bmanage\.py\b", dockerfile, flags=re.MULTILINE)
    # gunicorn reads ./gunicorn.conf.py from its working directory: the image's WORKDIR
    (workdir,) = re.findall(r"^WORKDIR\s+(\S+)$", dockerfile.split("FROM python")[1],
                            flags=re.MULTILINE)
    assert workdir == "/app"
    assert re.search(r"^COPY deploy/image/gunicorn\.conf\.py gunicorn\.conf\.py$", dockerfile,
                     flags=re.MULTILINE)


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory):
    """The web pod's command with the image's gunicorn.conf.py (tests/support/web_server.py),
    started once for the module's tests: each only sends requests, none changes the server
    (a start and a stop are 30 s and more on a busy machine)."""
    with web_server(tmp_path_factory.mktemp("gunicorn")) as server:
        yield server.url, server.metrics_dir, server.log


def get(url: str, path: str, host: str | None = None) -> tuple[int, str]:
    """GET as the kubelet and Prometheus do: Host is the pod's address unless given."""
    request = urllib.request.Request(url + path, headers={"Host": host} if host else {})

    def answer() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    # the workers boot after the master listens: until one has loaded the application, a
    # connection waits in the listen queue and its read times out (a worker's boot imports
    # Django and the portal: seconds, more on a loaded machine)
    return eventually(answer, timeout=60, interval=0.2, message=f"no answer to GET {path}",
                      ignoring=(ConnectionError, urllib.error.URLError, TimeoutError))


def test_gunicorn_serves_healthz_and_metrics_with_the_image_configuration(gunicorn):
    url, metrics_dir, log = gunicorn
    assert not (metrics_dir / "counter_99999.db").exists()  # emptied at start
    assert get(url, "/healthz") == (200, '{"status": "ok"}')
    assert get(url, "/healthz", host="gpu.example.org")[0] == 200  # through the Ingress
    assert get(url, "/healthz", host="10.0.0.7:8000")[0] == 400  # another pod's address
    status, body = get(url, "/metrics")
    assert status == 200
    assert re.search(r'^\w+_requests?_\w*total\{[^}]*\} \d', body, flags=re.MULTILINE), body[:2000]
    assert list(metrics_dir.glob("*.db"))  # several processes: multiprocess mode
    def logged() -> bool:  # WEB_CONCURRENCY=2: both workers boot; the access log is written
        text = log.read_text()  # once the response has gone out
        return text.count("Booting worker with pid") == 2 and "GET /healthz" in text

    eventually(logged, timeout=20, message="the workers' boot and the request are not logged")
    text = log.read_text()
    assert text.count("Booting worker with pid") == 2
    assert '"GET /healthz HTTP/1.1" 200' in text  # access log on stdout


def test_an_idle_connection_outlives_the_clients_own_expiry(gunicorn):
    """The client, not the server, closes an idle keep-alive connection: httpx drops one after
    5 s, so one idle for 6 s must still carry the next request (with gunicorn's default
    keepalive of 5 s the server had closed it, and that request failed)."""
    url, _, _ = gunicorn
    assert get(url, "/healthz")[0] == 200  # the workers are up
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=10)
    try:
        statuses = []
        for pause in (0, 6):
            time.sleep(pause)
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
            assert not response.will_close
        assert statuses == [200, 200]
    finally:
        connection.close()


def test_celery_finds_the_app_and_its_settings():
    result = run(str(VENV_BIN / "celery"), "-A", "portal", "report")
    assert result.returncode == 0, result.stderr
    assert "transport:redis" in result.stdout  # CELERY_BROKER_URL from the Django settings
    missing = run(str(VENV_BIN / "celery"), "-A", "portal_nope", "report")
    assert missing.returncode != 0


def test_the_worker_deployments_serve_exactly_the_queues_the_app_routes_to():
    from portal.celery import LAUNCHES_QUEUE, NOTIFICATIONS_QUEUE, app

    routed = {route["queue"] for route in app.conf.task_routes.values()}
    default = app.conf.task_default_queue
    objects = render("deploy/overlays/production")
    queues, pools = {}, {}
    for process in PORTAL_PROCESSES:
        command = deployment(objects, process)["spec"]["template"]["spec"]["containers"][0][
            "command"]
        if "worker" in command:
            queues[process] = set(command[command.index("--queues") + 1].split(","))
            pools[process] = (command[command.index("--pool") + 1] if "--pool" in command
                              else "prefork")
    # the notifications' outside channels on workers of their own: a receiver that hangs holds
    # those, never a launch; a workload's cluster I/O on threads (it waits on the API server),
    # the CPU-bound periodic work on processes
    assert queues == {"worker": {default}, "launch-worker": {LAUNCHES_QUEUE},
                      "notifications-worker": {NOTIFICATIONS_QUEUE}}
    assert pools == {"worker": "prefork", "launch-worker": "threads",
                     "notifications-worker": "threads"}
    assert routed == {LAUNCHES_QUEUE, NOTIFICATIONS_QUEUE} and default not in routed
    notifier = deployment(objects, "notifications-worker")["spec"]["template"]["spec"]
    assert notifier["automountServiceAccountToken"] is False  # no cluster credential to leak
    launcher = deployment(objects, "launch-worker")["spec"]["template"]["spec"]
    assert launcher.get("automountServiceAccountToken", True)  # it creates the workloads
    # the tracker is no worker: the long-lived command, leader-elected by its lease
    tracker = deployment(objects, "tracker")["spec"]["template"]["spec"]["containers"][0]
    assert tracker["command"] == ["python", "manage.py", "track_workloads"]


def test_a_workloads_cluster_io_is_routed_to_the_launch_workers():
    from portal.celery import LAUNCHES_QUEUE, app
    from workloads import tasks

    for task in (tasks.workload_create_task, tasks.workload_stop_task,
                 tasks.workload_remove_objects_task, tasks.workload_address_release_task):
        assert app.amqp.router.route({}, task.name)["queue"].name == LAUNCHES_QUEUE, task.name
    # the sweeps stay on the default queue, beside the periodic work
    for task in (tasks.workloads_requeue_stale, tasks.workloads_enforce_runtime):
        assert app.amqp.router.route({}, task.name)["queue"].name == \
            app.conf.task_default_queue, task.name


def test_manage_py_passes_djangos_deployment_checks():
    # as the operator guide sets up production: the login's signing key from the Secret, a
    # certificate for the workloads' proxies in every tenant namespace
    env = production_env(PORTAL_OIDC_PRIVATE_KEY=os.environ["PORTAL_OIDC_PRIVATE_KEY"],
                         PORTAL_AUTH_PROXY_TLS_SECRET="gpu-portal-workloads-tls")
    result = run(sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING",
                 env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    job = find(render("deploy/overlays/production"), "Job", "gpu-portal-migrate")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python", "manage.py", "migrate", "--noinput"]


def test_gpuagent_runs_as_the_daemonset_starts_it():
    (container,) = find(render("tests/deploy/overlays/production-gpuagent"), "DaemonSet",
                        "gpuagent")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "gpuagent"]
    for argv in ([sys.executable, "-m", "gpuagent", "--help"], [str(VENV_BIN / "gpuagent"),
                                                                 "--help"]):
        result = run(*argv)
        assert result.returncode == 0, result.stderr
        for arg in container["args"]:
            assert arg.split("=")[0] in result.stdout


def test_gpuagent_image_installs_what_the_package_declares():
    dockerfile = (REPO / "gpuagent" / "Dockerfile").read_text()
    declared = (REPO / "pyproject.toml").read_text()
    requirements = re.findall(r'"([A-Za-z0-9_.-]+[<>=!~][^"]*)"', dockerfile)
    assert requirements
    for requirement in requirements:
        assert f'"{requirement}"' in declared, requirement
