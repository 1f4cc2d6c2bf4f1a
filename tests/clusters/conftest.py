"""A second cluster for the clusters' tests: another kubesim server (`east`, 2 × 8 H100), as
cheap as the session's own, started once for the session."""

from pathlib import Path

import pytest

from tests.support.pages import admin, researcher, vision_lab  # noqa: F401 - fixtures

EAST_INVENTORY = Path(__file__).with_name("east-inventory.yaml")


@pytest.fixture(scope="session")
def east(kubesim_factory):
    return kubesim_factory(inventory=EAST_INVENTORY)


@pytest.fixture
def h100(db):
    from catalogue.models import GpuType

    return GpuType.objects.create(slug="h100", name="NVIDIA H100 80GB", memory_gb=80,
                                  node_selector={"gputype": "h100"})
