"""A maintenance window lays a KWOK MIG node out anew on the real control plane, the portal as
its least-privilege ServiceAccount (deploy/base/portal-rbac.yaml): cordoned at the start, the
relabel held back while a pod holds one of the node's GPUs, then the node relabelled
(`nvidia.com/mig.config`), the GPU operator's stand-in (the control plane's addon
`gpu-operator`, stack/gpu_operator.py) applies it, the capacity read from the cluster shows the
new units, and the end uncordons the node."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import TestCase
from django.utils import timezone

from audit.models import AuditRecord
from calendars.maintenance import windows_advance
from calendars.services import window_create
from calendars.validation import window_clean
from catalogue.models import GpuType
from cluster.capacity import gpu_capacity
from kube.client import Kube
from tests.support.cluster import cluster_cache_caught_up
from tests.support.database import demo_shared_gpu_types
from tests.support.gpu_operator import node_restored
from tests.support.waiting import eventually

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]
NODE = "gpu-a100-mig-1"
NAMESPACE = "relayout-holder"


def gpu_units(admin: Kube) -> dict[str, str]:
    allocatable = admin.get("Node", NODE)["status"]["allocatable"]
    return {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/")}


def test_a_window_lays_a_mig_node_out_anew_end_to_end(cluster, gpu_types):
    demo_shared_gpu_types(gpu_types)
    GpuType.objects.create(slug="a100-3g-40gb", name="NVIDIA A100, MIG 3g.40gb slice",
                           memory_gb=40, resource_name="nvidia.com/mig-3g.40gb",
                           node_selector={"gputype": "a100-mig"}, sharing="mig",
                           fraction_numerator=3, fraction_denominator=7,
                           physical=gpu_types["a100"])
    author = get_user_model().objects.create(username="root", keystone_user_id="id-root")
    cluster_cache_caught_up()
    now = timezone.now()
    with cluster.api_client() as api, node_restored(api, NODE):
        admin = Kube(api)
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "holder", "namespace": NAMESPACE},
                      "spec": {"nodeName": NODE, "tolerations": [
                          {"key": "nvidia.com/gpu", "operator": "Exists"}],
                          "containers": [{"name": "c", "image": "busybox:1.36", "resources": {
                              "limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}})
        with TestCase.captureOnCommitCallbacks(execute=True):
            window = window_create(acting_user=author, fields=window_clean({
                "nodes": [NODE], "start": now.isoformat(),
                "end": (now + dt.timedelta(hours=1)).isoformat(), "reason": "re-carve",
                "drain": True, "relayout": {NODE: {"mig_config": "all-3g.40gb"}}}))
        assert window.relayout_plan["gpu_types"] == [
            {"gpu_type": "a100-1g-10gb", "before": 14, "after": 0},
            {"gpu_type": "a100-3g-40gb", "before": 0, "after": 4}]
        windows_advance(now=now + dt.timedelta(seconds=30))
        window.refresh_from_db()
        assert window.cordoned == [NODE]
        assert admin.get("Node", NODE)["spec"]["unschedulable"] is True
        assert window.relayout_state[NODE]["state"] == "waiting"
        assert f"{NAMESPACE}/holder" in window.relayout_state[NODE]["reason"]
        admin.delete("Pod", "holder", NAMESPACE)
        eventually(lambda: not admin.list("Pod", NAMESPACE)["items"], timeout=60,
                   message="the holder pod is still there")
        windows_advance(now=now + dt.timedelta(seconds=60))
        window.refresh_from_db()
        assert window.relayout_state[NODE]["state"] in ("relabelled", "applied")
        # the stand-in, as the MIG manager and GPU feature discovery would: the node's units
        # first, then its labels (the state `success` last), each a write of its own
        eventually(lambda: gpu_units(admin) == {"nvidia.com/mig-3g.40gb": "4"} and admin.get(
            "Node", NODE)["metadata"]["labels"]["nvidia.com/mig.config.state"] != "pending",
            timeout=60, message="the stand-in did not lay the node out")
        labels = admin.get("Node", NODE)["metadata"]["labels"]
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert labels["nvidia.com/mig-3g.40gb.count"] == "4"
        windows_advance(now=now + dt.timedelta(seconds=90))
        window.refresh_from_db()
        assert window.relayout_state[NODE]["state"] == "applied"
        with time_machine.travel(now + dt.timedelta(hours=1, minutes=1), tick=True):
            windows_advance()
        window.refresh_from_db()
        assert window.state == "ended"
        assert not admin.get("Node", NODE)["spec"].get("unschedulable")
        # back in service: the portal's capacity read (its read model of the nodes) counts
        # the new units and none of the old
        eventually(lambda: gpu_capacity()["a100-3g-40gb"].capacity == 4, timeout=30,
                   message="the portal's capacity read does not show the new units")
        assert gpu_capacity()["a100-1g-10gb"].capacity == 0
        assert AuditRecord.objects.filter(action="node.relabel", target=NODE).count() == 1
    # put back as it was (the stand-in lays it out again as all-1g.10gb)
    with cluster.api_client() as api:
        eventually(lambda: gpu_units(Kube(api)) == {"nvidia.com/mig-1g.10gb": "14"},
                   timeout=60, message="the node is not back in 1g.10gb slices")
