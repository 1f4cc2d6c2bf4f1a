"""A DRA GPU type's launch: a ResourceClaimTemplate and the pod's claim instead of an extended
resource, as exact dicts and against the Kubernetes 1.37 schema."""

import dataclasses

import kubernetes_validate
import pytest

from catalogue.sharing import dra_class_selector, dra_selector
from tests.support.manifests import CUSTOM_BATCH, JUPYTER, MPIJOB
from workloads.manifests import (
    GpuClaim,
    make_job,
    make_mpijob,
    make_pod_template,
    make_resource_claim_template,
    workload_objects,
)

A100 = dra_selector(product="NVIDIA A100-SXM4-80GB", memory_gb=80)
CLAIMED = GpuClaim(device_class="gpu.nvidia.com", selector=A100)
DRA_NOTEBOOK = dataclasses.replace(JUPYTER, gpu_claim=CLAIMED, gpu_count=2,
                                   node_selector=(("gputype", "a100-dra"),))
DRA_BATCH = dataclasses.replace(CUSTOM_BATCH, gpu_claim=CLAIMED)


def test_the_selector_reads_the_drivers_product_and_memory():
    assert A100 == ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
                    " && device.capacity['gpu.nvidia.com'].memory.compareTo("
                    "quantity('80G')) >= 0")
    assert dra_selector(product="", memory_gb=0) == ""
    assert dra_selector(product="Tesla T4", memory_gb=0) == (
        "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'")
    with pytest.raises(ValueError):  # a quote would end the CEL string early
        dra_selector(product="x' || true || '", memory_gb=0)
    assert dra_class_selector("mig.nvidia.com") == (
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig'")


def test_the_claim_template_asks_the_types_devices():
    template = make_resource_claim_template(DRA_NOTEBOOK)
    assert template is not None
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"]["name"] == DRA_NOTEBOOK.name
    assert template["metadata"]["labels"]["gpu-portal.io/workload-id"] == "42"
    assert template["spec"]["metadata"]["labels"]["gpu-portal.io/workload-id"] == "42"
    assert template["spec"]["spec"] == {"devices": {"requests": [{
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                    "count": 2, "selectors": [{"cel": {"expression": A100}}]}}]}}
    bare = make_resource_claim_template(dataclasses.replace(
        DRA_NOTEBOOK, gpu_claim=GpuClaim(device_class="gpu.nvidia.com")))
    assert bare is not None
    assert "selectors" not in bare["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert make_resource_claim_template(JUPYTER) is None
    assert make_resource_claim_template(dataclasses.replace(DRA_NOTEBOOK, gpu_count=0)) is None


def test_the_pod_claims_its_devices_instead_of_an_extended_resource():
    pod = make_pod_template(DRA_NOTEBOOK)["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu",
                                      "resourceClaimTemplateName": DRA_NOTEBOOK.name}]
    app = pod["containers"][0]
    assert app["resources"]["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in app["resources"]["limits"]
    assert "nvidia.com/gpu" not in app["resources"]["requests"]
    # the claim places it: no node selector, but the GPU nodes' taint is tolerated
    assert "nodeSelector" not in pod
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    # the proxy beside it claims nothing
    assert all("claims" not in c["resources"] for c in pod["containers"][1:])


def test_the_claim_template_is_made_first():
    assert [o["kind"] for o in workload_objects(DRA_NOTEBOOK)] == [
        "Secret", "ResourceClaimTemplate", "Deployment", "Service"]
    assert [o["kind"] for o in workload_objects(DRA_BATCH)] == ["ResourceClaimTemplate", "Job"]
    assert make_job(DRA_BATCH)["spec"]["template"]["spec"]["resourceClaims"][0][
        "resourceClaimTemplateName"] == DRA_BATCH.name


def test_an_mpi_launcher_claims_no_gpu():
    mpijob = make_mpijob(dataclasses.replace(MPIJOB, gpu_claim=CLAIMED))
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    worker = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert "resourceClaims" not in launcher
    assert worker["resourceClaims"][0]["name"] == "gpu"


@pytest.mark.parametrize("spec", [DRA_NOTEBOOK, DRA_BATCH], ids=["service", "batch"])
def test_valid_against_the_kubernetes_schema(spec):
    version = kubernetes_validate.utils.latest_version()
    assert version.startswith("1.37")
    for obj in workload_objects(spec):
        kubernetes_validate.validate(obj, version, strict=True)
