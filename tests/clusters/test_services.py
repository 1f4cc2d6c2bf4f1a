"""The clusters as data (clusters/): the home cluster made from the settings, an admin's
registrations checked and audited, the probe's states, each cluster's own read model. The
second cluster is a kubesim server of its own (`east`, conftest.py); an unreachable one is a
kubeconfig naming a port nobody listens on."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model

from audit.models import AuditRecord
from cluster.capacity import cluster_nodes, gpu_capacity
from clusters.models import Cluster
from clusters.selectors import (
    cluster_capacity,
    cluster_home,
    clusters_capacity_by_type,
    gpu_types_offered,
)
from clusters.services import (
    ClusterInUse,
    ClusterInvalid,
    cluster_delete,
    cluster_probe_one,
    cluster_register,
    cluster_update,
    clusters_probe,
)
from kube.client import Kube
from kube.status import cluster_outage

pytestmark = pytest.mark.django_db


@pytest.fixture
def root():
    return get_user_model().objects.create(username="id-root", name="root")


def unreachable_kubeconfig(tmp_path: Path, like: str) -> str:
    """A kubeconfig like `like` whose server is a port nobody listens on."""
    config = yaml.safe_load(Path(like).read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = "http://127.0.0.1:9"
    path = tmp_path / "gone.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_home_cluster_is_made_from_the_settings(settings):
    home = cluster_home()
    assert (home.name, home.home, home.enabled) == (settings.PORTAL_CLUSTER_NAME, True, True)
    assert (home.kubeconfig_path, home.kubeconfig_secret) == ("", "")


@pytest.mark.parametrize(("fields", "wrong"), [
    ({"name": "East", "kubeconfig_path": "/k"}, "name"),
    ({"name": "-east", "kubeconfig_path": "/k"}, "name"),
    ({"name": "e" * 41, "kubeconfig_path": "/k"}, "name"),
    ({"name": "main", "kubeconfig_path": "/k"}, "name"),  # the home cluster's
    ({"name": "east"}, "kubeconfig_path"),
    ({"name": "east", "kubeconfig_path": "/k", "kubeconfig_secret": "ns/s"}, "kubeconfig_path"),
    ({"name": "east", "kubeconfig_path": "relative/k"}, "kubeconfig_path"),
    ({"name": "east", "kubeconfig_secret": "Not A Name"}, "kubeconfig_secret"),
    ({"name": "east", "kubeconfig_path": "/k", "gpu_types": ["h200"]}, "gpu_types"),
    ({"name": "east", "kubeconfig_path": "/k", "state": "ready"}, "state"),
])
def test_a_registration_is_refused_field_by_field(root, gpu_types, fields, wrong):
    with pytest.raises(ClusterInvalid) as refused:
        cluster_register(user=root, fields=fields)
    assert wrong in refused.value.errors, refused.value.errors
    assert not Cluster.objects.filter(home=False).exists()
    assert not AuditRecord.objects.filter(action="cluster.register").exists()


def test_the_home_cluster_is_neither_disabled_nor_removed_nor_given_credentials(root):
    home = cluster_home()
    for changes in ({"enabled": False}, {"kubeconfig_path": "/etc/k"}):
        with pytest.raises(ClusterInvalid):
            cluster_update(user=root, cluster=home, changes=changes)
    with pytest.raises(ClusterInUse):
        cluster_delete(user=root, cluster=home)
    home.refresh_from_db()
    assert home.enabled and not home.kubeconfig_path


def test_changes_are_audited_with_where_the_credentials_are_never_what(root, gpu_types):
    east = cluster_register(user=root, fields={
        "name": "east", "display_name": "East", "kubeconfig_secret": "portal/east-kubeconfig",
        "gpu_types": ["a100"]})
    cluster_update(user=root, cluster=east, changes={"enabled": False})
    cluster_delete(user=root, cluster=Cluster.objects.get(name="east"))
    records = list(AuditRecord.objects.filter(target="east").order_by("pk"))
    assert [r.action for r in records] == ["cluster.register", "cluster.update",
                                           "cluster.delete"]
    assert records[0].after["credentials"] == "Secret portal/east-kubeconfig"
    assert (records[1].before["enabled"], records[1].after["enabled"]) == (True, False)
    assert records[0].actor == root


def test_each_cluster_is_read_through_its_own_connection(root, cluster, east, gpu_types, h100):
    registered = cluster_register(user=root, fields={"name": "east",
                                                     "kubeconfig_path": east.kubeconfig})
    probed = cluster_probe_one(cluster_id=registered.pk)
    assert probed is not None and probed.state == Cluster.State.READY, probed.reason
    assert probed.api_server == east.url and probed.last_seen is not None
    home = {node["metadata"]["name"] for node in cluster_nodes()}
    there = {node["metadata"]["name"] for node in cluster_nodes("east")}
    assert there == {"gpu-h100-1", "gpu-h100-2"} and not home & there
    # the capacity view per cluster: east has 16 H100 and no A100, the home cluster the reverse
    east_figures = gpu_capacity(cluster="east")
    assert (east_figures["h100"].capacity, east_figures["a100"].capacity) == (16, 0)
    assert (gpu_capacity()["h100"].capacity, gpu_capacity()["a100"].capacity) == (0, 16)
    assert gpu_types_offered(probed, cluster_capacity(probed)) == {"h100": 16}
    by_type = clusters_capacity_by_type(gpu_capacity())
    assert by_type["h100"] == {"east": {"capacity": 16, "free": 16}}
    assert by_type["a100"] == {"main": {"capacity": 16, "free": 16}}


def test_an_unreachable_cluster_has_its_state_and_reason_and_the_home_one_no_banner(
        root, cluster, tmp_path, gpu_types):
    gone = cluster_register(user=root, fields={
        "name": "gone", "kubeconfig_path": unreachable_kubeconfig(tmp_path, cluster.kubeconfig),
        "gpu_types": ["a100"]})
    states = {c.name: c for c in clusters_probe()}
    assert states["main"].state == Cluster.State.READY
    assert states["gone"].state == Cluster.State.UNREACHABLE
    assert states["gone"].reason and states["gone"].state_since is not None
    assert cluster_outage() is None  # the banner is the home cluster's alone
    assert cluster_outage("gone") is not None
    gone.refresh_from_db()
    # its figures are not waited for: the probe said it does not answer
    assert cluster_capacity(gone) is None
    assert gpu_types_offered(gone, None) == {"a100": 0}
    assert "gone" not in clusters_capacity_by_type(gpu_capacity()).get("a100", {})


def test_a_cluster_reached_through_a_secret_of_the_home_cluster(
        root, cluster, east, kube_namespace):
    """The kubeconfig kept in a Secret of the home cluster (key `kubeconfig`), read by the
    portal when it first needs the cluster; no answer and no record holds what it says."""
    content = Path(east.kubeconfig).read_bytes()
    Kube().create({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "east-kubeconfig", "namespace": kube_namespace},
                   "data": {"kubeconfig": base64.b64encode(content).decode()}})
    registered = cluster_register(user=root, fields={
        "name": "east", "kubeconfig_secret": f"{kube_namespace}/east-kubeconfig"})
    probed = cluster_probe_one(cluster_id=registered.pk)
    assert probed is not None and probed.state == Cluster.State.READY, probed.reason
    assert {n["metadata"]["name"] for n in cluster_nodes("east")} == {"gpu-h100-1",
                                                                      "gpu-h100-2"}
    record = AuditRecord.objects.get(action="cluster.register", target="east")
    assert content.decode() not in str(record.after)
