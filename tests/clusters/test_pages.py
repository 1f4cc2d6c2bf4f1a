"""The admin's cluster pages (list, registration, one cluster's nodes, GPUs and health) and
the researcher's: the launch form's cluster choice where there are several, a workload's
cluster on its page. The second cluster is east (conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.test import TestCase

from clusters.models import Cluster
from clusters.services import cluster_probe_one, cluster_register
from tests.support.pages import field_error, launch_form, make_workload

pytestmark = pytest.mark.django_db


def east_registered(east) -> Cluster:
    root = get_user_model().objects.create(username="id-root", name="root")
    cluster = cluster_register(user=root, fields={"name": "east",
                                                  "kubeconfig_path": east.kubeconfig})
    probed = cluster_probe_one(cluster_id=cluster.pk)
    assert probed is not None and probed.state == "ready", probed and probed.reason
    return probed


def test_the_admin_registers_a_cluster_and_reads_its_nodes_and_gpus(admin, east, h100):
    with TestCase.captureOnCommitCallbacks(execute=False):
        refused = admin.post("/admin/clusters/new/", {"name": "East", "kubeconfig_path": "k"})
        assert refused.status_code == 400
        assert "lower-case" in field_error(refused.content.decode(), "name")
        made = admin.post("/admin/clusters/new/", {"name": "east",
                                                   "kubeconfig_path": east.kubeconfig,
                                                   "enabled": "on"})
    assert made.status_code == 302
    east_row = cluster_probe_one(cluster_id=Cluster.objects.get(name="east").pk)
    listing = admin.get("/admin/clusters/").content.decode()
    assert 'id="cluster-main"' in listing and 'id="cluster-east"' in listing
    assert "<code>h100</code> 16" in listing
    page = admin.get(f"/admin/clusters/{east_row.pk}/").content.decode()
    assert "gpu-h100-1" in page and "8× nvidia.com/gpu" in page and "ready" in page
    assert f"kubeconfig file {east.kubeconfig}" in page
    with TestCase.captureOnCommitCallbacks(execute=False):
        saved = admin.post(f"/admin/clusters/{east_row.pk}/", {
            "display_name": "East wing", "kubeconfig_path": east.kubeconfig})
    assert saved.status_code == 302
    east_row.refresh_from_db()
    assert (east_row.display_name, east_row.enabled) == ("East wing", False)


def test_an_unreachable_clusters_page_says_why(admin, cluster, tmp_path):
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = "http://127.0.0.1:9"
    path = tmp_path / "gone.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    root = get_user_model().objects.create(username="id-root", name="root")
    gone = cluster_register(user=root, fields={"name": "gone", "kubeconfig_path": str(path)})
    cluster_probe_one(cluster_id=gone.pk)
    gone.refresh_from_db()
    page = admin.get(f"/admin/clusters/{gone.pk}/").content.decode()
    assert gone.state == "unreachable" and "cannot be read now" in page
    assert 'id="cluster-nodes"' not in page


def test_the_launch_form_offers_a_cluster_only_where_there_are_several(researcher, east,
                                                                       vision_lab):
    assert 'name="cluster"' not in researcher.get("/workloads/new/").content.decode()
    east_registered(east)
    page = researcher.get("/workloads/new/").content.decode()
    assert '<option value="main"' in page and '<option value="east"' in page
    with TestCase.captureOnCommitCallbacks(execute=False):
        refused = researcher.post("/workloads/new/", launch_form(cluster="east"))
    assert refused.status_code == 400
    assert "offers no a100" in field_error(refused.content.decode(), "cluster")


def test_a_workloads_page_names_its_cluster(researcher, vision_lab):
    workload = make_workload(vision_lab, "researcher")
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<dd id="workload-cluster"><code>main</code></dd>' in page
