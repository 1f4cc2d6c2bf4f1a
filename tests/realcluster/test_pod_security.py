"""Pod Security of workloads on the real control plane: tenant namespaces
enforce "restricted", and the real PodSecurity admission decides.

The seeded templates that may not run as root (Jupyter, TensorBoard, custom services and jobs)
are launched through the API into a "restricted" namespace: the real ReplicaSet and Job
controllers make their pods (no FailedCreate) and KWOK runs them. DIGITS may run as root: the
portal refuses it there, and the real admission refuses its pod too; once an admin lets the
project run such templates the namespace enforces "baseline" and DIGITS runs."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import TestCase
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from catalogue.models import GpuType, Template
from tenants.services import tenant_root_templates_update
from tests.support.journeys import (  # noqa: F401 - fixtures
    launched,
    researcher,
    track_until,
    vision,
)
from tests.workloads.api_calls import launch
from workloads.manifests import make_pod_template
from workloads.models import Workload
from workloads.objects import workload_spec

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(240),
              pytest.mark.usefixtures("eager_celery")]
S = Workload.State


def enforced(cluster, namespace: str) -> str:
    labels = k8s.CoreV1Api(cluster.api_client()).read_namespace(namespace).metadata.labels
    return labels["pod-security.kubernetes.io/enforce"]


def refused_pods(cluster, namespace: str) -> list[str]:
    """Pods the Pod Security admission refused in the namespace (the namespace outlives a test:
    other tests' refusals, e.g. over quota, are not this test's business)."""
    return [e.message for e in k8s.CoreV1Api(cluster.api_client()).list_namespaced_event(
        namespace).items if e.reason == "FailedCreate" and "PodSecurity" in (e.message or "")]


def test_the_default_templates_run_under_restricted(vision, researcher, cluster):  # noqa: F811
    assert enforced(cluster, vision.namespace) == "restricted"
    services = [launched(researcher, body) for body in (
        {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1},
        {"name": "tb", "template": "tensorboard", "gpu_type": "a100", "gpu_count": 1},
        {"name": "web", "template": "custom", "kind": "service", "image": "nginx:1.27",
         "port": 8080, "gpu_type": "v100", "gpu_count": 1})]
    job = launched(researcher, {"name": "train", "template": "custom", "kind": "batch",
                                "image": "python:3.12-slim", "command": ["python", "train.py"],
                                "gpu_type": "v100", "gpu_count": 1,
                                "env": {"KUBESIM_RUN_SECONDS": "1"}})
    for workload_id in services:
        track_until(workload_id, lambda w: w.state == S.RUNNING)
    assert track_until(job, lambda w: w.state in Workload.FINAL_STATES).state == S.SUCCEEDED
    pods = k8s.CoreV1Api(cluster.api_client()).list_namespaced_pod(vision.namespace).items
    assert pods and all(p.spec.security_context.run_as_non_root for p in pods)
    assert refused_pods(cluster, vision.namespace) == []


def test_a_template_that_may_run_as_root_runs_only_where_the_project_allows_it(
        vision, researcher, cluster):  # noqa: F811
    digits = {"name": "digits", "template": "digits", "gpu_type": "v100", "gpu_count": 1}
    refused = launch(researcher, digits)
    assert refused.status_code == 400
    assert "may run as root" in refused.json()["fields"]["template"][0]
    # what the portal spares the researcher: the real admission refuses DIGITS's pod here
    template = Template.objects.get(slug="digits")
    row = Workload(pk=999_999, tenant=vision, name="digits", object_name="wl-999999-digits",
                   owner=get_user_model().objects.get(name="researcher"),
                   template=template, kind=template.kind, image=template.image,
                   gpu_type=GpuType.objects.get(slug="v100"), gpu_count=1, port=template.port,
                   cpu=1, memory_gb=2)
    pod = make_pod_template(workload_spec(row))
    with pytest.raises(ApiException) as denied:
        k8s.CoreV1Api(cluster.api_client()).create_namespaced_pod(vision.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "digits-check", **pod["metadata"]}, "spec": pod["spec"]},
            dry_run="All")
    assert denied.value.status == 403
    message = json.loads(denied.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert "runAsNonRoot != true" in message
    # an admin lets the project run such templates: "baseline", and DIGITS runs
    with TestCase.captureOnCommitCallbacks(execute=True):  # the reconcile it enqueues
        tenant_root_templates_update(tenant=vision, acting_user=None, allow=True)
    assert enforced(cluster, vision.namespace) == "baseline"
    workload_id = launched(researcher, digits)
    workload = track_until(workload_id, lambda w: w.state == S.RUNNING and w.address)
    assert workload.address.startswith("192.168.1.")
    assert refused_pods(cluster, vision.namespace) == []


def _dry_run_pod(cluster, namespace: str, name: str, pod: dict) -> dict:
    """The real API server's answer to creating the pod, admission included, storing nothing."""
    api = k8s.CoreV1Api(cluster.api_client())
    return api.api_client.sanitize_for_serialization(
        api.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, **pod["metadata"]}, "spec": pod["spec"]},
            dry_run="All"))


@pytest.mark.parametrize("body", [
    {"name": "nb", "template": "jupyter"},
    {"name": "code", "template": "code-server"},
    {"name": "web", "template": "custom", "kind": "service", "image": "nginx:1.27",
     "port": 8080, "command": ["nginx", "-g", "daemon off;"]},
], ids=["jupyter", "code-server", "custom-service"])
def test_every_template_with_ssh_passes_restricted(vision, researcher, cluster, body):  # noqa: F811
    """The pod with the SSH server — its init container, the wrapped application,
    the proxy — is admitted by the real PodSecurity admission in a "restricted" namespace
    (a server-side dry run: the pod the portal's Deployment would make)."""
    assert enforced(cluster, vision.namespace) == "restricted"
    response = launch(researcher, {**body, "gpu_type": "a100", "gpu_count": 1})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    assert workload.ssh
    pod = make_pod_template(workload_spec(workload))
    created = _dry_run_pod(cluster, vision.namespace, f"ssh-check-{workload.pk}", pod)
    assert [c["name"] for c in created["spec"]["initContainers"]] == ["ssh-install"]
    assert [c["name"] for c in created["spec"]["containers"]] == ["app", "auth-proxy"]
    assert created["spec"]["containers"][0]["command"][1] == "run"
    # and what "restricted" refuses is refused here: the check is real
    pod["spec"]["initContainers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    with pytest.raises(ApiException) as denied:
        _dry_run_pod(cluster, vision.namespace, f"ssh-bad-{workload.pk}", pod)
    assert "allowPrivilegeEscalation != false" in json.loads(denied.value.body)["message"]
