"""Which launches get the portal's SSH server: what the launch asked, else the
template's default where it can hold; a launch that asks for SSH where it cannot is refused with
the field `ssh` and changes nothing. Real Keystone logins, PostgreSQL and kubesim over HTTP: the
Deployment kubesim stores has the server's init container and the wrapped program."""

import pytest
from django.test import Client, TestCase
from kubernetes import client as k8s

from access.proxy import PROXY_PORT
from access.services import service_access_update
from access.ssh_server import BIN_DIR, INIT_CONTAINER, SSH_PORT
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.access import workload_access
from workloads.lifecycle import Outcome
from workloads.models import Workload
from workloads.tracking.states import mark, workload_rows

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
CUSTOM_SERVICE = {"name": "srv", "template": "custom", "kind": "service", "port": 8080,
                  "image": "docker.io/library/python:3.12", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


def launched(response) -> Workload:
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


def refused(response) -> dict:
    assert response.status_code == 400, response.json()
    assert set(response.json()["fields"]) == {"ssh"}, response.json()
    assert not Workload.objects.exists()
    return response.json()["fields"]


def test_jupyter_has_ssh_by_default_and_its_pod_runs_the_server(vision, api_headers,
                                                                 eager_celery, cluster):
    workload = launched(launch(api_headers("researcher"), JUPYTER))
    assert workload.ssh and workload.launch_spec["ssh"] is True
    assert workload.launch_spec["entrypoint"] == ["start.sh"]
    pod = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        workload.object_name, vision.namespace).spec.template.spec
    assert [c.name for c in pod.init_containers] == [INIT_CONTAINER]
    app = pod.containers[0]
    assert app.command[:2] == [f"{BIN_DIR}/gpu-portal-sshd", "run"]
    assert f"--workload={workload.pk}" in app.command
    assert app.command[-2:] == ["--", "start.sh"]
    assert app.args[0] == "start-notebook.py"
    shown = Client().get(f"/api/v1/workloads/{workload.pk}/", **api_headers("researcher"))
    assert shown.json()["ssh"] is True


def test_a_launch_may_leave_ssh_out(vision, api_headers, eager_celery, cluster):
    workload = launched(launch(api_headers("researcher"), {**JUPYTER, "ssh": False}))
    assert not workload.ssh
    pod = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        workload.object_name, vision.namespace).spec.template.spec
    assert pod.init_containers is None
    assert pod.containers[0].command is None  # the image's entrypoint, as before SSH


def test_code_server_is_a_service_with_ssh(vision, api_headers):
    workload = launched(launch(api_headers("researcher"), {**JUPYTER, "template": "code-server"}))
    assert workload.kind == "service" and workload.port == 8080 and workload.ssh
    assert workload.launch_spec["command"] == ["/usr/bin/code-server"]


@pytest.mark.parametrize(("body", "reason"), [
    ({**JUPYTER, "template": "tensorboard", "ssh": True}, "does not offer SSH"),
    ({**CUSTOM_SERVICE, "ssh": True}, "give the command"),
    ({**CUSTOM_SERVICE, "kind": "batch", "port": None, "ssh": True}, "give the command"),
], ids=["tensorboard", "custom-without-command", "batch-without-command"])
def test_ssh_where_it_cannot_hold_is_refused(vision, api_headers, body, reason):
    fields = refused(launch(api_headers("researcher"), body))
    assert reason in fields["ssh"][0]


def test_a_default_that_cannot_hold_is_off_not_an_error(vision, api_headers):
    # the custom template offers SSH, but without a command the program is unknown
    workload = launched(launch(api_headers("researcher"), CUSTOM_SERVICE))
    assert not workload.ssh
    with_command = launched(launch(api_headers("researcher"), {
        **CUSTOM_SERVICE, "name": "srv2", "command": ["python", "-m", "http.server", "8080"]}))
    assert with_command.ssh
    assert with_command.launch_spec["entrypoint"] == []


def test_a_tenant_with_ssh_off_launches_without_it(vision, api_headers):
    service_access_update(tenant=vision, actor=None, ssh_enabled=False)
    fields = refused(launch(api_headers("researcher"), {**JUPYTER, "ssh": True}))
    assert "turned off" in fields["ssh"][0]
    workload = launched(launch(api_headers("researcher"), JUPYTER))
    assert not workload.ssh


def test_the_server_moves_aside_for_an_application_on_its_port(vision, api_headers,
                                                               eager_celery, cluster):
    workload = launched(launch(api_headers("researcher"), {
        **CUSTOM_SERVICE, "port": SSH_PORT, "command": ["python", "-m", "http.server"]}))
    pod = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        workload.object_name, vision.namespace).spec.template.spec
    assert f"--listen=127.0.0.1:{SSH_PORT + 1}" in pod.containers[0].command


def test_a_batch_job_with_ssh_has_an_address_while_it_runs_and_gives_it_back(
        vision, api_headers, eager_celery, cluster):
    workload = launched(launch(api_headers("researcher"), {
        **CUSTOM_SERVICE, "kind": "batch", "port": None, "command": ["python", "train.py"],
        "ssh": True}))
    assert workload.ssh and workload.kind == "batch" and workload_access(workload) is not None
    core = k8s.CoreV1Api(cluster.api_client())
    service = core.read_namespaced_service(workload.object_name, vision.namespace)
    assert service.spec.ports[0].port == PROXY_PORT
    job = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(
        workload.object_name, vision.namespace)
    assert [c.name for c in job.spec.template.spec.init_containers] == [INIT_CONTAINER,
                                                                        "auth-proxy"]
    Workload.objects.filter(pk=workload.pk).update(state="running", address="192.168.1.20")
    workload.refresh_from_db()
    assert workload.url == ""  # nothing to open in a browser
    assert workload.base_url == f"http://192.168.1.20:{PROXY_PORT}"  # where SSH goes
    # it ends: the tracker's verdict gives its address back
    row = workload_rows([workload.pk])[workload.pk]
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert mark(row, Outcome("succeeded", "Completed.")) is True
    with pytest.raises(k8s.ApiException) as gone:
        core.read_namespaced_service(workload.object_name, vision.namespace)
    assert gone.value.status == 404
    assert workload.events.filter(reason="AddressReleased").exists()
