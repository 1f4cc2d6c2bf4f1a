"""The clusters' API: GET /api/v1/clusters/ for every signed-in caller (names, states, the GPU
types each offers), admins' writes with their refusals as JSON, the GPU types' figures per
cluster, a workload's cluster and a launch that names one, a project limited to some
clusters. Real Keystone tokens, PostgreSQL, the session's kubesim and a second one (east)."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase

from clusters.models import Cluster
from clusters.services import cluster_probe_one
from tenants.models import Tenant
from tenants.services import quota_update
from tests.workloads.api_calls import vision_lab_ready
from workloads import services as workload_services

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def admin(api_headers, login, gpu_types, cluster):
    login("researcher")  # vision-lab and nlp-lab become tenants
    return api_headers("admin", "admin")


def post(headers, path, body):
    with TestCase.captureOnCommitCallbacks(execute=False):
        return Client().post(path, body, content_type="application/json", **headers)


def patch(headers, path, body):
    with TestCase.captureOnCommitCallbacks(execute=False):
        return Client().patch(path, body, content_type="application/json", **headers)


def register_east(admin, east, **fields):
    response = post(admin, "/api/v1/clusters/", {"name": "east",
                                                 "kubeconfig_path": east.kubeconfig, **fields})
    assert response.status_code == 201, response.json()
    cluster = cluster_probe_one(cluster_id=Cluster.objects.get(name="east").pk)
    assert cluster is not None and cluster.state == "ready", cluster and cluster.reason
    return cluster


def test_every_signed_in_caller_reads_names_states_and_gpu_types(admin, api_headers, east,
                                                                 h100):
    register_east(admin, east)
    rows = Client().get("/api/v1/clusters/", **api_headers("viewer")).json()
    assert rows == [
        {"name": "main", "display_name": "main", "state": "ready",
         "gpu_types": {"a100": 16, "v100": 8, "t4": 4}},
        {"name": "east", "display_name": "east", "state": "ready", "gpu_types": {"h100": 16}},
    ]
    # an admin reads where the credentials are (never what they hold)
    east_row = Client().get("/api/v1/clusters/east/", **admin).json()
    assert east_row["kubeconfig_path"] == east.kubeconfig and east_row["api_server"] == east.url
    assert "token" not in str(east_row).lower()


def test_admins_write_and_refusals_come_as_json(admin, api_headers, east, h100):
    refused = post(admin, "/api/v1/clusters/", {"name": "East", "kubeconfig_path": "k"})
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "invalid" and set(body["fields"]) == {"name", "kubeconfig_path"}
    member = post(api_headers("researcher"), "/api/v1/clusters/",
                  {"name": "west", "kubeconfig_path": "/k"})
    assert member.status_code == 403 and member.json()["code"] == "permission_denied"
    register_east(admin, east)
    changed = patch(admin, "/api/v1/clusters/east/", {"enabled": False, "display_name": "East"})
    assert changed.status_code == 200 and changed.json()["enabled"] is False
    # a disabled cluster is an admin's to see
    seen = [row["name"] for row in Client().get("/api/v1/clusters/",
                                                **api_headers("researcher")).json()]
    assert seen == ["main"]
    assert Client().get("/api/v1/clusters/east/", **api_headers("researcher")).status_code == 404
    home = patch(admin, "/api/v1/clusters/main/", {"enabled": False})
    assert home.status_code == 400 and "enabled" in home.json()["fields"]
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert Client().delete("/api/v1/clusters/main/", **admin).json()["code"] == \
            "cluster_in_use"
        assert Client().delete("/api/v1/clusters/east/", **admin).status_code == 204
    assert not Cluster.objects.filter(name="east").exists()


def test_gpu_types_have_their_figures_per_cluster(admin, api_headers, east, h100):
    register_east(admin, east)
    rows = {row["slug"]: row for row in
            Client().get("/api/v1/gpu-types/", **api_headers("researcher")).json()}
    assert rows["h100"]["clusters"] == {"east": {"capacity": 16, "free": 16}}
    assert rows["a100"]["clusters"] == {"main": {"capacity": 16, "free": 16}}


def test_a_workload_shows_its_cluster_and_a_launch_names_one(admin, api_headers, east, h100,
                                                             login):
    vision_lab_ready(login)
    headers = api_headers("researcher")
    launched = post(headers, "/api/v1/workloads/", JUPYTER)
    assert launched.status_code == 201 and launched.json()["cluster"] == "main"
    named = post(headers, "/api/v1/workloads/", {**JUPYTER, "name": "nb2", "cluster": "main"})
    assert named.status_code == 201 and named.json()["cluster"] == "main"
    unknown = post(headers, "/api/v1/workloads/", {**JUPYTER, "cluster": "west"})
    assert unknown.status_code == 400 and "cluster" in unknown.json()["fields"]
    register_east(admin, east)
    lacking = post(headers, "/api/v1/workloads/", {**JUPYTER, "cluster": "east"})
    assert lacking.status_code == 400
    assert "offers no a100" in lacking.json()["fields"]["cluster"][0]
    Cluster.objects.filter(name="east").update(state="unreachable", reason="no route to host")
    # a cluster that does not answer is the answer first, whatever else the launch asks
    down = post(headers, "/api/v1/workloads/", {**JUPYTER, "cluster": "east"})
    assert down.status_code == 409 and down.json()["code"] == "cluster_unavailable"
    assert "no route to host" in down.json()["detail"]
    # the home cluster's outage is absorbed: accepted, its objects made once it answers
    Cluster.objects.filter(home=True).update(state="unreachable", reason="connection refused")
    accepted = post(headers, "/api/v1/workloads/", {**JUPYTER, "name": "nb3"})
    assert accepted.status_code == 201, accepted.json()


def test_a_project_limited_to_some_clusters(admin, api_headers, east, h100, login):
    vision_lab_ready(login)
    register_east(admin, east)
    vision = Tenant.objects.get(name="vision-lab")
    path = f"/api/v1/tenants/{vision.pk}/clusters/"
    with TestCase.captureOnCommitCallbacks(execute=False):
        unknown = Client().put(path, {"clusters": ["west"]}, content_type="application/json",
                               **admin)
        assert unknown.status_code == 400 and "clusters" in unknown.json()["fields"]
        limited = Client().put(path, {"clusters": ["east"]}, content_type="application/json",
                               **admin)
    assert limited.status_code == 200 and limited.json() == {"clusters": ["east"]}
    headers = api_headers("researcher")
    assert Client().get(f"/api/v1/tenants/{vision.pk}/", **headers).json()["clusters"] == \
        ["east"]
    refused = post(headers, "/api/v1/workloads/", JUPYTER)
    assert refused.status_code == 400
    assert refused.json()["fields"]["cluster"] == ["vision-lab may use the clusters east only."]


def test_batch_work_is_dispatched_to_a_worker_and_services_run_there(admin, api_headers, east,
                                                                    h100, login, settings,
                                                                    monkeypatch):
    """Batch work of a type only a worker has goes there (through the home cluster's Kueue),
    and a service named there runs there; either with what stays on the home cluster is
    refused; a worker that does not answer takes nothing new."""
    tenant = vision_lab_ready(login)
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": 16, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0, "h100": 8}})
    # the home cluster's Kueue dispatches (MultiKueue): the launches' objects are not made
    # here (kubesim serves no Kueue), only their admission is
    settings.PORTAL_QUEUEING = "kueue"
    headers = api_headers("researcher")
    register_east(admin, east, gpu_types=["h100"])
    job = {"name": "train", "template": "custom", "kind": "batch", "image": "busybox:1.36",
           "command": ["true"], "gpu_type": "h100", "gpu_count": 1}
    asked = []  # the clusters whose queueing the admission asks about
    queueing_on = workload_services.queueing_on
    monkeypatch.setattr(workload_services, "queueing_on",
                        lambda kube: asked.append(kube.cluster) or queueing_on(kube))
    placed = post(headers, "/api/v1/workloads/", job)
    assert placed.status_code == 201, placed.json()
    assert placed.json()["cluster"] == "east"  # the home cluster has no H100
    assert asked == [None]  # queued by the home cluster's Kueue, which dispatches it
    named = post(headers, "/api/v1/workloads/", {**job, "name": "t2", "cluster": "east"})
    assert named.status_code == 201 and named.json()["cluster"] == "east"
    # a service runs on the worker itself (placed by the portal), but not with what stays home
    service = post(headers, "/api/v1/workloads/", {**JUPYTER, "gpu_type": "h100",
                                                   "cluster": "east"})
    assert service.status_code == 201 and service.json()["cluster"] == "east"
    assert asked[-1] == "east"  # a service is queued where it runs
    with_folder = post(headers, "/api/v1/workloads/", {
        **JUPYTER, "name": "nb2", "gpu_type": "h100", "cluster": "east", "use_home": True})
    assert with_folder.status_code == 400
    assert "home folder" in with_folder.json()["fields"]["cluster"][0]
    with_home = post(headers, "/api/v1/workloads/", {**job, "cluster": "east", "use_home": True})
    assert with_home.status_code == 400
    assert "the home volume" in with_home.json()["fields"]["cluster"][0]
    settings.PORTAL_QUEUEING = "off"
    unqueued = post(headers, "/api/v1/workloads/", {**job, "cluster": "east"})
    assert unqueued.status_code == 400 and "Kueue" in unqueued.json()["fields"]["cluster"][0]
    settings.PORTAL_QUEUEING = "kueue"
    Cluster.objects.filter(name="east").update(state="unreachable", reason="no route to host")
    down = post(headers, "/api/v1/workloads/", {**job, "cluster": "east"})
    assert down.status_code == 409 and down.json()["code"] == "cluster_unavailable"
    # nothing new is placed on it: a launch that names no cluster stays home
    elsewhere = post(headers, "/api/v1/workloads/", {**job, "name": "t3"})
    assert elsewhere.json().get("cluster") != "east", elsewhere.json()
