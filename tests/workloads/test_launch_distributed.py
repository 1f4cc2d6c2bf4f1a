"""Distributed launches on kubesim, which serves neither JobSet nor the MPI
operator: the API refuses them with 400 distributed_unavailable and changes nothing; the rules
that need no engine (nodes on a one-pod template, the program a group runs, the quota counting
every node's GPUs, a group no set of nodes can hold) are checked here against kubesim's
inventory. The same launches running on the real control plane: tests/distributed/."""

import pytest
from django.contrib.auth import get_user_model

from catalogue.models import GpuType, Template
from kube.engines import engine_refusal
from tenants.models import Tenant
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import Workload
from workloads.services import AdmissionRefused, workload_launch
from workloads.validation import _never_fits

pytestmark = pytest.mark.django_db

DDP = {"name": "ddp", "template": "pytorch-ddp", "gpu_type": "a100", "gpu_count": 4,
       "nodes": 2, "command": ["python", "train.py"]}


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


@pytest.mark.parametrize("template", ["pytorch-ddp", "mpi"])
def test_a_distributed_launch_where_the_engine_is_absent_is_400_and_changes_nothing(
        vision, api_headers, template):
    before = Workload.objects.count()
    refused = launch(api_headers("researcher"), {**DDP, "template": template})
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "distributed_unavailable"
    api = "jobset.x-k8s.io/v1alpha2" if template == "pytorch-ddp" else "kubeflow.org/v2beta1"
    assert f"its API {api} is not served" in body["detail"]
    assert Workload.objects.count() == before


def test_the_engines_reason_names_what_is_missing(cluster):
    assert "does not run JobSet" in engine_refusal("jobset")
    assert "does not run the MPI operator" in engine_refusal("mpi")
    assert engine_refusal("") is None


def test_a_one_pod_template_does_not_span_nodes(vision, api_headers):
    refused = launch(api_headers("researcher"),
                     {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1,
                      "nodes": 2})
    assert refused.status_code == 400
    assert refused.json()["fields"]["nodes"] == [
        "The Jupyter template runs on one node; launch pytorch-ddp or mpi to span several."]
    assert launch(api_headers("researcher"),
                  {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1,
                   "nodes": 1}).status_code == 201


def test_nodes_are_bounded(vision, api_headers):
    for nodes in (0, 65):
        refused = launch(api_headers("researcher"), {**DDP, "nodes": nodes})
        assert refused.status_code == 400 and "nodes" in refused.json()["fields"]


def test_the_quota_counts_every_nodes_gpus(vision):
    """vision-lab may hold 4 a100s: 2 nodes × 4 is 8, refused before anything exists; 2 × 2
    is admitted and counts 4, so one more GPU is over."""
    user = get_user_model().objects.get(name="researcher")
    ddp = Template.objects.get(slug="pytorch-ddp")
    a100 = GpuType.objects.get(slug="a100")
    request = {"name": "ddp", "template": ddp, "kind": "batch", "gpu_type": a100,
               "gpu_count": 4, "nodes": 2, "image": ddp.image, "command": ["python", "t.py"],
               "cpu": 8, "memory": 64}
    tenant = Tenant.objects.get(pk=vision.pk)
    with pytest.raises(AdmissionRefused, match="uses 0 of 4 a100 GPUs; 8 more would exceed"):
        workload_launch(tenant=tenant, user=user, request=request)
    workload, created = workload_launch(tenant=tenant, user=user,
                                        request={**request, "gpu_count": 2, "cpu": 2,
                                                 "memory": 4})
    assert created and (workload.nodes, workload.gpu_count, workload.gpu_total) == (2, 2, 4)
    assert workload.launch_spec["nodes"] == 2 and workload.launch_spec["engine"] == "jobset"
    assert workload.events.get(reason="Submitted").message == \
        "researcher launched pytorch-ddp on 2 nodes × 2× a100 (4 GPUs)"
    with pytest.raises(AdmissionRefused, match="uses 4 of 4 a100 GPUs; 1 more would exceed"):
        workload_launch(tenant=tenant, user=user,
                        request={**request, "name": "one", "gpu_count": 1, "nodes": 1,
                                 "cpu": 1, "memory": 1})


def test_a_group_no_set_of_nodes_can_hold_is_refused_naming_the_nodes(cluster, gpu_types):
    """kubesim's inventory: two nodes of 8 a100s."""
    a100 = GpuType.objects.get(slug="a100")
    errors: dict[str, list[str]] = {}
    _never_fits({"gpu_type": a100, "gpu_count": 8, "nodes": 3}, errors)
    assert errors == {"nodes": ["Needs 3 nodes with 8 a100 GPUs each; the cluster has 2 such "
                                "nodes, so this request can never run."]}
    errors = {}
    _never_fits({"gpu_type": a100, "gpu_count": 8, "nodes": 2}, errors)
    assert errors == {}


def test_a_groups_kubernetes_name_leaves_room_for_its_ranks(vision):
    """JobSet names a rank's pod `<name>-r-<job>-<rank>-<5 chars>`, at most 63 characters: a
    group's name is shorter than a one-pod workload's, and its objects can be built."""
    from kube.labels import MAX_GROUP_OBJECT_NAME
    from workloads.manifests import workload_objects
    from workloads.objects import workload_spec

    user = get_user_model().objects.get(name="researcher")
    ddp = Template.objects.get(slug="pytorch-ddp")
    workload, _ = workload_launch(
        tenant=Tenant.objects.get(pk=vision.pk), user=user,
        request={"name": "a very long name " * 5, "template": ddp, "kind": "batch",
                 "gpu_type": GpuType.objects.get(slug="a100"), "gpu_count": 1, "nodes": 2,
                 "image": ddp.image, "command": ["python", "t.py"], "cpu": 1, "memory": 1})
    assert len(workload.object_name) <= MAX_GROUP_OBJECT_NAME < 52
    kinds = [o["kind"] for o in workload_objects(workload_spec(workload, queued=True))]
    assert kinds == ["JobSet"]
