"""How a GPU type shares its GPUs: what the nodes' labels say (catalogue/sharing.py), what the
catalogue keeps (exactly), and what admins see where the two differ."""

from fractions import Fraction

import pytest

from catalogue.admin_views import sharing_problem
from catalogue.models import GpuType
from catalogue.services import CatalogueRefused, gpu_type_create, gpu_type_update
from catalogue.sharing import (
    EXCLUSIVE,
    MIG,
    TIME_SLICED,
    Sharing,
    equivalents_text,
    node_layout,
    node_sharing,
    parse_fraction,
)
from kubesim.inventory import load_inventory, node_object
from tests.fixtures.kubesim import DEMO_INVENTORY

T4_SHARED = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.replicas": "4",
             "nvidia.com/gpu.sharing-strategy": "time-slicing"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.replicas": "1"}


@pytest.mark.parametrize(("labels", "resource", "expected"), [
    (T4_SHARED, "nvidia.com/gpu.shared", Sharing(TIME_SLICED, Fraction(1, 4), "Tesla-T4")),
    # not renamed: the resource stays nvidia.com/gpu, the product gains -SHARED
    ({**T4_SHARED, "nvidia.com/gpu.product": "Tesla-T4-SHARED"}, "nvidia.com/gpu",
     Sharing(TIME_SLICED, Fraction(1, 4), "Tesla-T4")),
    ({**T4_SHARED, "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2"},
     "nvidia.com/gpu.shared", Sharing(TIME_SLICED, Fraction(1, 2), "Tesla-T4")),
    (A100, "nvidia.com/mig-1g.10gb", Sharing(MIG, Fraction(1, 7), "NVIDIA-A100-SXM4-80GB")),
    (A100, "nvidia.com/mig-3g.40gb", Sharing(MIG, Fraction(3, 7), "NVIDIA-A100-SXM4-80GB")),
    ({"nvidia.com/gpu.product": "NVIDIA-A30"}, "nvidia.com/mig-1g.6gb",
     Sharing(MIG, Fraction(1, 4), "NVIDIA-A30")),
    # the single strategy: slices as nvidia.com/gpu, the profile in the product
    ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb"}, "nvidia.com/gpu",
     Sharing(MIG, Fraction(2, 7), "NVIDIA-A100-SXM4-80GB")),
    (A100, "nvidia.com/gpu", Sharing(EXCLUSIVE, Fraction(1), "NVIDIA-A100-SXM4-80GB")),
])
def test_what_the_labels_say(labels, resource, expected):
    assert node_sharing(labels, resource) == expected


def test_fractions_are_exact_and_bounded():
    assert parse_fraction("1/7") * 7 == 1
    assert parse_fraction("0.25") == Fraction(1, 4)
    # other scripts' digits are not figures here, as nowhere in the portal
    for bad in ("0", "5/4", "x", "1/0", "1/65", "١/٤", "1/٧", "０.２５"):
        with pytest.raises(ValueError):
            parse_fraction(bad)
    assert equivalents_text(Fraction(9, 4)) == "2.25"
    assert equivalents_text(Fraction(14, 7)) == "2"
    assert equivalents_text(Fraction(1, 7)) == "0.14"


@pytest.mark.django_db
def test_a_shared_type_is_kept_exactly_and_checked():
    admin_user = None
    t4 = gpu_type_create(acting_user=admin_user, slug="t4x", name="T4", node_selector={"g": "t4"},
                         resource_name="nvidia.com/gpu", memory_gb=16)
    shared = gpu_type_create(acting_user=admin_user, slug="t4x-shared", name="quarter T4",
                             resource_name="nvidia.com/gpu.shared",
                             node_selector={"g": "t4-shared"}, memory_gb=16,
                             sharing=TIME_SLICED, gpu_fraction=Fraction(1, 4), physical=t4)
    shared.refresh_from_db()
    assert (shared.sharing, shared.gpu_fraction, shared.physical_slug) == (
        TIME_SLICED, Fraction(1, 4), "t4x")
    gpu_type_update(gpu_type=shared, acting_user=admin_user,
                    changes={"gpu_fraction": Fraction(1, 7), "sharing": MIG})
    shared.refresh_from_db()
    assert shared.gpu_fraction * 7 == 1
    with pytest.raises(CatalogueRefused):
        gpu_type_update(gpu_type=shared, acting_user=admin_user,
                        changes={"gpu_fraction": Fraction(1)})
    with pytest.raises(CatalogueRefused):  # carved from a shared type
        gpu_type_create(acting_user=admin_user, slug="bad", name="bad", node_selector={"g": "x"},
                        resource_name="nvidia.com/gpu.shared", memory_gb=0, sharing=TIME_SLICED,
                        gpu_fraction=Fraction(1, 2), physical=shared)
    with pytest.raises(CatalogueRefused):  # an exclusive part of a GPU
        gpu_type_create(acting_user=admin_user, slug="bad", name="bad", node_selector={"g": "x"},
                        resource_name="nvidia.com/gpu", memory_gb=0,
                        gpu_fraction=Fraction(1, 2))


def _demo_nodes():
    inventory = load_inventory(str(DEMO_INVENTORY))
    return [node_object(spec, inventory, "now") for spec in inventory.nodes]


@pytest.mark.django_db
def test_admins_see_where_the_nodes_say_otherwise():
    nodes = _demo_nodes()
    t4 = GpuType.objects.create(slug="t4z", name="T4", node_selector={"gputype": "t4"})
    said = GpuType.objects.create(slug="t4z-shared", name="quarter T4",
                                  resource_name="nvidia.com/gpu.shared",
                                  node_selector={"gputype": "t4-shared"}, sharing=TIME_SLICED,
                                  fraction_numerator=1, fraction_denominator=4, physical=t4)
    assert sharing_problem(said, nodes) == ""
    assert sharing_problem(t4, nodes) == ""
    said.fraction_denominator = 2
    assert sharing_problem(said, nodes) == (
        "The nodes report time-sliced, 1/4 of Tesla-T4; the catalogue says time-sliced, 1/2 "
        "of Tesla-T4.")
    mig = GpuType(slug="m", name="m", resource_name="nvidia.com/mig-1g.10gb",
                  node_selector={"gputype": "a100-mig"}, physical=t4, sharing=MIG,
                  fraction_numerator=1, fraction_denominator=7)
    assert sharing_problem(mig, nodes) == (
        "Carved from t4z, whose nodes have Tesla-T4, but its nodes' GPUs are "
        "NVIDIA-A100-SXM4-80GB.")
    exclusive = GpuType(slug="e", name="e", resource_name="nvidia.com/mig-1g.10gb",
                        node_selector={"gputype": "a100-mig"})
    assert sharing_problem(exclusive, nodes).startswith("The nodes report mig, 1/7 of NVIDIA-A100")


def test_a_nodes_layout_in_words():
    labels = {node["metadata"]["name"]: node["metadata"]["labels"] for node in _demo_nodes()}
    assert node_layout("gpu-t4-shared-1", labels["gpu-t4-shared-1"]) == \
        "gpu-t4-shared-1: 4 × Tesla-T4, time-slicing 4 ways"
    assert node_layout("gpu-a100-mig-1", labels["gpu-a100-mig-1"]) == \
        "gpu-a100-mig-1: 2 × NVIDIA-A100-SXM4-80GB, MIG all-1g.10gb"
    assert node_layout("gpu-t4-1", labels["gpu-t4-1"]) == "gpu-t4-1: 4 × Tesla-T4"
