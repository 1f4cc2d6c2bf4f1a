import pytest

from portal.workloads.models import GpuType


@pytest.fixture
def gpu_types(db):
    """The demo catalogue: three GPU types placed by the `gputype` node label."""
    return {
        slug: GpuType.objects.create(slug=slug, name=name, memory_gb=mem,
                                     node_selector={"gputype": slug})
        for slug, name, mem in (("a100", "NVIDIA A100 80GB", 80), ("v100", "NVIDIA V100 32GB", 32),
                                ("t4", "NVIDIA T4", 16))
    }


@pytest.fixture
def cluster(kubesim, settings):
    """Point the portal at the session's kubesim (over HTTP, through its kubeconfig)."""
    settings.KUBECONFIG = str(kubesim.kubeconfig)
    return kubesim


@pytest.fixture
def eager_celery():
    from portal.celery import app

    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = False
