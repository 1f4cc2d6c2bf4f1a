"""Rows that a module's tests share: made once, in a transaction that stays open around the
module's tests and is rolled back after the last one.

Each test still runs in a transaction of its own (pytest-django's `db`, Django's TestCase), which
inside this one is a savepoint, rolled back when the test ends: every test starts from the rows
the module made, as if it had made them itself, and none sees what another test changed. Django's
TestCase does the same for `setUpTestData`. The isolation matrices need it: hundreds of tests
over the same two tenants, and making those rows again was most of each test's time.

Not for a module with transactional tests (`transaction=True`, `live_server`): they commit and
flush the database. Only the database is rolled back: rows made here must not have sent anything
elsewhere (their tasks are queued on commit, which never comes).

    @pytest.fixture(scope="module")
    def shared(django_db_setup, django_db_blocker):
        with rows_of_the_module(django_db_blocker):
            with django_db_blocker.unblock():
                rows = make_rows()
            yield rows
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def rows_of_the_module(django_db_blocker: Any) -> Iterator[None]:
    """A transaction on every database, open until the block ends, then rolled back. The
    database stays blocked meanwhile, except where the caller (or a test's `db`) unblocks it."""
    from django.db import connections, transaction

    atomics = []
    with django_db_blocker.unblock():
        for alias in connections:
            atomic = transaction.atomic(using=alias)
            atomic.__enter__()
            atomics.append((alias, atomic))
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            for alias, atomic in reversed(atomics):
                transaction.set_rollback(True, using=alias)
                atomic.__exit__(None, None, None)


@contextlib.contextmanager
def world_of_the_module(django_db_blocker: Any, kubeconfig: Path | str,
                        make: Callable[[], T]) -> Iterator[T]:
    """What `make` builds, once for the module's tests, as rows of the module (above), against
    the cluster at `kubeconfig`: the isolation matrices' world of two tenants and their people.
    The address pools are read afresh from that cluster."""
    from django.test import override_settings

    from cluster.addresses import address_pools_forget

    with rows_of_the_module(django_db_blocker):
        with django_db_blocker.unblock(), override_settings(KUBECONFIG=str(kubeconfig)):
            address_pools_forget()
            world = make()
        yield world


def demo_gpu_types() -> dict[str, Any]:
    """The demo catalogue: three GPU types placed by the `gputype` node label (the `gpu_types`
    fixture's rows, for rows made outside a test)."""
    from catalogue.models import GpuType

    return {
        slug: GpuType.objects.create(slug=slug, name=name, memory_gb=mem,
                                     node_selector={"gputype": slug})
        for slug, name, mem in (("a100", "NVIDIA A100 80GB", 80), ("v100", "NVIDIA V100 32GB", 32),
                                ("t4", "NVIDIA T4", 16))
    }


def dra_gpu_type(board: str = "a100") -> Any:
    """A whole GPU claimed through DRA, of one of the real control plane's DRA node pools
    (stack/k8s/dra.py: gpu-a100-dra-1, two NVIDIA A100-SXM4-80GB devices of 80Gi; `board`
    "h100": gpu-h100-dra-1, two NVIDIA H100 80GB HBM3). Both are of the driver's class
    gpu.nvidia.com; each type has its own DeviceClass and quota."""
    from catalogue.models import GpuType

    product = {"a100": "NVIDIA A100-SXM4-80GB", "h100": "NVIDIA H100 80GB HBM3"}[board]
    return GpuType.objects.create(
        slug=f"{board}-dra", name=f"NVIDIA {board.upper()} 80GB (DRA)", memory_gb=80,
        resource_name="nvidia.com/gpu", node_selector={"gputype": f"{board}-dra"},
        sharing="dra", device_class="gpu.nvidia.com", product=product)


def dra_mig_gpu_type(profile: str = "1g.10gb") -> Any:
    """A MIG profile of the real control plane's partitionable H100s claimed through DRA
    (stack/k8s/dra.py: gpu-h100-dra-1 publishes each GPU whole and as its profiles' devices,
    sharing its counters): `profile` "3g.40gb" is 3/7 of a GPU and 40 GB."""
    from catalogue.models import GpuType

    slices, memory = profile.removesuffix("gb").split("g.")
    return GpuType.objects.create(
        slug=f"h100-{profile.replace('.', '-')}-dra", name=f"NVIDIA H100, MIG {profile} (DRA)",
        memory_gb=int(memory), resource_name="nvidia.com/gpu",
        node_selector={"gputype": "h100-dra"}, sharing="dra", device_class="mig.nvidia.com",
        product="NVIDIA H100 80GB HBM3", fraction_numerator=int(slices),
        fraction_denominator=7)


def demo_shared_gpu_types(physical: dict[str, Any]) -> dict[str, Any]:
    """The demo's shared GPU types (seed_demo's): a quarter of a time-sliced T4 and a MIG
    1g.10gb slice of an A100, carved from `physical`'s `t4` and `a100`."""
    from catalogue.models import GpuType

    return {
        "t4-shared": GpuType.objects.create(
            slug="t4-shared", name="NVIDIA T4, a quarter (time-sliced)", memory_gb=16,
            resource_name="nvidia.com/gpu.shared", node_selector={"gputype": "t4-shared"},
            sharing="time-sliced", fraction_numerator=1, fraction_denominator=4,
            physical=physical["t4"]),
        "a100-1g-10gb": GpuType.objects.create(
            slug="a100-1g-10gb", name="NVIDIA A100, MIG 1g.10gb slice", memory_gb=10,
            resource_name="nvidia.com/mig-1g.10gb", node_selector={"gputype": "a100-mig"},
            sharing="mig", fraction_numerator=1, fraction_denominator=7,
            physical=physical["a100"]),
    }
