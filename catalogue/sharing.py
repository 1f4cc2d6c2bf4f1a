"""How a GPU type shares its physical GPUs, as the nodes' labels tell it (pure: no I/O).

A unit of a GPU type is what one pod asks for of the type's resource. A unit of an exclusive
type is a whole GPU; a unit of a shared type is a part of one, its `gpu_fraction`:

- time-sliced: NVIDIA's device plugin advertises each GPU `replicas` times (time-slicing, or
  MPS, which the plugin configures the same way). GPU feature discovery labels such a node
  `nvidia.com/gpu.replicas=<replicas>` and `nvidia.com/gpu.sharing-strategy=time-slicing`
  (or `mps`); a unit is 1/replicas of a GPU. When the plugin's config renames the shared
  resource (renameByDefault) it is `nvidia.com/gpu.shared`; when it does not, the resource
  stays `nvidia.com/gpu` and the product label gains a `-SHARED` suffix so that pods can tell
  the nodes apart by it. Replicas share the GPU's memory with no isolation.
- mig: the MIG "mixed" strategy advertises each MIG profile as its own resource,
  `nvidia.com/mig-<profile>` (e.g. `nvidia.com/mig-1g.10gb`), the product label naming the
  physical GPU; the "single" strategy advertises the slices as `nvidia.com/gpu` and rewrites
  the product to `<product>-MIG-<profile>`. The GPU operator's MIG manager lays the GPUs out
  as the node label `nvidia.com/mig.config` names (e.g. `all-1g.10gb`). A profile `<n>g.<m>gb`
  takes n of the GPU's compute slices: 7 on A100/H100/H200/B200-class GPUs, 4 on an A30; a
  unit is n/7 (or n/4) of a GPU.
- exclusive: anything else; a unit is a GPU.
- dra: a unit is a device a ResourceClaim asks for through Kubernetes' dynamic resource
  allocation (resource.k8s.io/v1), not an extended resource: NVIDIA's DRA driver for GPUs
  (driver name `gpu.nvidia.com`) publishes each node's GPUs in ResourceSlices, and the
  scheduler picks a device matching the claim's device class and CEL selectors. A whole GPU
  is in the class `gpu.nvidia.com` (fraction 1), a MIG instance in `mig.nvidia.com` (its
  profile's part of a GPU, as above). See dra_selector for what the selectors read. Each
  DRA type has a DeviceClass of the portal's own (dra_type_class), the driver's class narrowed
  to the type's product and memory, which its claims name.

The fraction is kept exact (fractions.Fraction; the database holds numerator and
denominator), so that 7 units of 1/7 are one GPU-equivalent, not 0.999999.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from core.validation import excerpt

# dynamic resource allocation, as NVIDIA's DRA driver for GPUs names things, is kube/dra.py's
# (the capacity view, below the catalogue, reads the devices the driver publishes)
from kube.dra import DRA_DEVICE_TYPES as DRA_DEVICE_TYPES
from kube.dra import DRA_DRIVER as DRA_DRIVER
from kube.dra import DRA_GPU_CLASS as DRA_GPU_CLASS
from kube.dra import DRA_MIG_CLASS as DRA_MIG_CLASS

EXCLUSIVE = "exclusive"
TIME_SLICED = "time-sliced"
MIG = "mig"
DRA = "dra"
SHARINGS = (EXCLUSIVE, TIME_SLICED, MIG, DRA)
# a DRA type's own DeviceClass is named <slug> and this (dra_type_class); its slug must then be
# a DNS label, as a DeviceClass's name is a DNS subdomain
DRA_TYPE_CLASS_SUFFIX = ".gpu-portal.io"
# the API server's quota of ResourceClaims counts a class's devices under <class> and this
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# a product name a CEL string literal may hold as it is (no quote, no backslash)
DRA_PRODUCT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()/+-]{0,79}$")

# node labels GPU feature discovery publishes (and kubesim's nodes carry)
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
# the values of LABEL_SHARING_STRATEGY that hand out replicas of a GPU
REPLICA_STRATEGIES = ("time-slicing", "mps")

SHARED_SUFFIX = "-SHARED"
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<profile>\d+g\.\d+gb)$")
SINGLE_MIG_PRODUCT = re.compile(r"^(?P<product>.+)-MIG-(?P<profile>\d+g\.\d+gb)$")
# GPUs whose MIG geometry has 4 compute slices, not 7 (matched in the product label)
FOUR_SLICE_PRODUCTS = ("A30",)


def compute_slices(product: str) -> int:
    """The compute slices one physical GPU of `product` has under MIG."""
    return 4 if any(name in product for name in FOUR_SLICE_PRODUCTS) else 7


def mig_fraction(profile: str, product: str) -> Fraction:
    """The part of a GPU one MIG instance of `profile` ("3g.40gb") is on `product`."""
    return Fraction(int(profile.split("g", 1)[0]), compute_slices(product))


def physical_product(product: str) -> str:
    """The physical GPU's product label: without the time-slicing suffix or a MIG profile."""
    single = SINGLE_MIG_PRODUCT.match(product)
    if single:
        product = single["product"]
    return product.removesuffix(SHARED_SUFFIX)


@dataclasses.dataclass(frozen=True)
class Sharing:
    """How one unit of a resource on a node shares its GPU."""

    sharing: str = EXCLUSIVE
    fraction: Fraction = Fraction(1)
    product: str = ""  # the physical GPU's product label ("" when the node says none)

    @property
    def text(self) -> str:
        """"time-sliced, 1/4 of Tesla-T4", "exclusive": what the admin pages say."""
        if self.sharing == EXCLUSIVE:
            return EXCLUSIVE
        return f"{self.sharing}, {fraction_text(self.fraction)} of {self.product or 'a GPU'}"


def node_sharing(labels: Mapping[str, str], resource: str) -> Sharing:
    """How a unit of `resource` on a node with `labels` shares its GPU."""
    product = labels.get(LABEL_PRODUCT, "")
    mig = MIG_RESOURCE.match(resource)
    if mig:
        return Sharing(MIG, mig_fraction(mig["profile"], product), physical_product(product))
    single = SINGLE_MIG_PRODUCT.match(product)
    if single:
        return Sharing(MIG, mig_fraction(single["profile"], single["product"]),
                       physical_product(product))
    replicas = labels.get(LABEL_REPLICAS, "1")
    replicas_n = int(replicas) if replicas.isdigit() else 1
    if labels.get(LABEL_SHARING_STRATEGY) in REPLICA_STRATEGIES and replicas_n > 1:
        return Sharing(TIME_SLICED, Fraction(1, replicas_n), physical_product(product))
    return Sharing(EXCLUSIVE, Fraction(1), physical_product(product))


def node_layout(name: str, labels: Mapping[str, str]) -> str:
    """How a node's GPUs are carved, from its labels: "gpu-t4-shared-1: 4 × Tesla-T4,
    time-slicing 4 ways", "gpu-a100-mig-1: 2 × NVIDIA-A100-SXM4-80GB, MIG all-1g.10gb"."""
    product = physical_product(labels.get(LABEL_PRODUCT, ""))
    text = f"{name}: {labels.get('nvidia.com/gpu.count', '?')} × {product or 'GPU'}"
    replicas = labels.get(LABEL_REPLICAS, "1")
    if labels.get(LABEL_SHARING_STRATEGY) in REPLICA_STRATEGIES and replicas not in ("", "1"):
        return f"{text}, {labels[LABEL_SHARING_STRATEGY]} {replicas} ways"
    if labels.get(LABEL_MIG_CONFIG):
        return f"{text}, MIG {labels[LABEL_MIG_CONFIG]}"
    if labels.get(LABEL_MIG_STRATEGY):
        return f"{text}, MIG ({labels[LABEL_MIG_STRATEGY]} strategy)"
    return text


def nodes_sharing(labels_of_nodes: Iterable[Mapping[str, str]], resource: str) -> set[Sharing]:
    """What every node offering a type reports: one value when they agree."""
    return {node_sharing(labels, resource) for labels in labels_of_nodes}


def dra_class_selector(device_class: str) -> str:
    """The CEL selector of a device class of NVIDIA's driver (what its chart installs)."""
    return (f"device.driver == '{DRA_DRIVER}' && "
            f"device.attributes['{DRA_DRIVER}'].type == '{DRA_DEVICE_TYPES[device_class]}'")


def dra_type_class(slug: str) -> str:
    """The DeviceClass of the portal's own that a DRA GPU type's claims name
    ("a100-dra.gpu-portal.io"): the driver's class narrowed to the type's product and memory.
    One class per type, because Kueue counts a claim's devices per device class (its
    Configuration maps each class to one resource): two types sharing the driver's class would
    share one quota there. The slug is a DNS label (catalogue/services.py checks it)."""
    return f"{slug}{DRA_TYPE_CLASS_SUFFIX}"


def device_class_quota(device_class: str) -> str:
    """The ResourceQuota key that counts the devices of `device_class` a namespace's
    ResourceClaims ask for ("a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"); the
    portal names Kueue's resource for the class the same (tenants/manifests.py)."""
    return device_class + DEVICE_CLASS_QUOTA_SUFFIX


def kueue_device_class_mappings(device_classes: Iterable[str]) -> list[dict[str, Any]]:
    """Kueue's Configuration `resources.deviceClassMappings` for these device classes (the
    DRA types' own, dra_type_class): each counted under its own resource, device_class_quota,
    so that each DRA type's devices are a quota of their own (operators put the same in
    theirs: docs/operator-guide.md; the admin's GPU types page shows them)."""
    return [{"name": device_class_quota(name), "deviceClassNames": [name]}
            for name in sorted(device_classes)]


def dra_mig_profile(*, device_class: str, fraction: Fraction, memory_gb: int,
                    product: str) -> str:
    """The MIG profile a DRA type of the driver's MIG class asks for, by NVIDIA's names:
    `<compute slices>g.<memory GB>gb`, its fraction of the GPU's compute slices and its memory
    (1/7 and 10 GB: "1g.10gb"; 3/7 and 40 GB: "3g.40gb"; 1/4 of an A30 and 6 GB: "1g.6gb").
    The driver publishes it as each MIG device's `profile` attribute. "" for a whole GPU, or
    where the fraction is no whole number of the GPU's slices."""
    slices = fraction * compute_slices(product)
    if device_class != DRA_MIG_CLASS or slices.denominator != 1 or not memory_gb:
        return ""
    return f"{slices.numerator}g.{memory_gb}gb"


def dra_type_class_selector(*, device_class: str, product: str, memory_gb: int,
                            profile: str = "") -> str:
    """The CEL selector of a DRA type's own DeviceClass: the driver's class's terms (driver,
    device type), a MIG type's profile (dra_mig_profile: of a partitionable GPU, its
    profiles of one product differ in it, not in their product) and the type's own
    (dra_selector)."""
    own = dra_selector(product=product, memory_gb=memory_gb)
    mig = f"device.attributes['{DRA_DRIVER}'].profile == '{profile}'" if profile else ""
    return " && ".join(term for term in (dra_class_selector(device_class), mig, own) if term)


def dra_selector(*, product: str, memory_gb: int) -> str:
    """The CEL selector a GPU type's claims carry beside their device class: the board's
    product name, when the type names one, and at least its memory. The memory is compared in
    decimal gigabytes, as the catalogue (and the boards' names) count it: a "16 GB" T4 has
    15360Mi, under 16Gi but over 16G. Empty when the type asks neither."""
    terms = []
    if product:
        if not DRA_PRODUCT.match(product):
            raise ValueError(f"{excerpt(product)} is not a product name the selector can hold.")
        terms.append(f"device.attributes['{DRA_DRIVER}'].productName == '{product}'")
    if memory_gb:
        terms.append(f"device.capacity['{DRA_DRIVER}'].memory.compareTo("
                     f"quantity('{memory_gb}G')) >= 0")
    return " && ".join(terms)


def fraction_text(fraction: Fraction) -> str:
    """"1", "1/4", "1/7", "3/7": the fraction as it is written down."""
    return str(fraction)


def parse_fraction(text: str) -> Fraction:
    """A fraction as an admin or the API writes it: "1/7", "0.25", "1". ValueError when it is
    not a part of a GPU (0 < fraction ≤ 1) or is too fine to be one (denominator > 64), or is
    written in digits other than ASCII's (which Fraction would read)."""
    if not text.isascii():
        raise ValueError(f"{excerpt(text)} is not a fraction such as 1/7 or 0.25.")
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"{excerpt(text)} is not a fraction such as 1/7 or 0.25.") from exc
    if not 0 < value <= 1:
        raise ValueError("A unit is a part of one GPU: more than 0, at most 1.")
    if value.denominator > 64:
        raise ValueError("Give the fraction as n/d with d at most 64 (e.g. 1/7).")
    return value


def equivalents(units: int, fraction: Fraction) -> Fraction:
    """GPU-equivalents of `units` of a type: a quarter T4 is 1/4 of a GPU."""
    return units * fraction


def equivalents_text(value: Fraction | int) -> str:
    """GPU-equivalents as the pages and refusals write them: "3", "2.25", "1.43" (two places
    at most, trailing zeros dropped)."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")
