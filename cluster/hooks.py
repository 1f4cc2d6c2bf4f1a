"""What the apps above tell the capacity view (capacity.py), which may not import them (they
import it): three hooks of core.registry, each with its Protocol. Every entry's answer is used:
the GPU types and admitted workloads of all entries together; per node, the most unhealthy
GPUs any entry reports (two reports of one node's broken GPUs are not twice as many)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from core.registry import Hook


class CatalogueType(Protocol):
    """A GPU type as the capacity view reads it (catalogue.models.GpuType)."""

    @property
    def slug(self) -> str: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def node_selector(self) -> Any: ...

    # a type claimed through DRA (devices.py) names the device class its claims ask in ("" for
    # a type placed by its extended resource), and what its devices must be
    @property
    def device_class(self) -> str: ...

    @property
    def product(self) -> str: ...

    @property
    def memory_gb(self) -> int: ...

    # a MIG instance claimed through DRA: the profile its devices carry ("1g.10gb"; "" any)
    @property
    def dra_profile(self) -> str: ...


class GpuTypesSource(Protocol):
    """Every GPU type of the catalogue."""

    def __call__(self) -> Iterable[CatalogueType]: ...


class AdmittedSource(Protocol):
    """(workload id, GPU type slug, GPUs) of every admitted, active workload."""

    def __call__(self) -> Iterable[tuple[int, str, int]]: ...


class UnhealthySource(Protocol):
    """Whole GPUs per node name taken out of service."""

    def __call__(self) -> Mapping[str, int]: ...


GPU_TYPES = Hook[GpuTypesSource]("cluster.gpu_types", order=("catalogue",))
ADMITTED = Hook[AdmittedSource]("cluster.admitted", order=("workloads",))
UNHEALTHY = Hook[UnhealthySource]("cluster.unhealthy", order=("usage",))
