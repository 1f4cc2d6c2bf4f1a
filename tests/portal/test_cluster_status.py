"""The cluster-unreachable banner: recorded by whoever fails to reach the API, cleared by the
probe, shown on every signed-in page (kube/status.py)."""

from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from kube import status
from kube.client import Kube, KubeUnavailable, cluster_probe
from portal.tasks import cluster_probe_task


@pytest.fixture
def unreachable(cluster, settings, tmp_path):
    """Point the portal at the same cluster entry, on a port nothing serves."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(cluster.kubeconfig).read_text()
                          .replace(cluster.url, "http://127.0.0.1:9"))
    cache.delete(status.KEY)
    settings.KUBECONFIG = str(kubeconfig)
    yield
    settings.KUBECONFIG = str(cluster.kubeconfig)
    cluster_probe()  # leave no recorded outage behind for the next test


@pytest.mark.django_db
def test_a_failed_call_is_recorded_and_an_ongoing_outage_keeps_its_start(unreachable):
    assert status.cluster_outage() is None
    with pytest.raises(KubeUnavailable):
        Kube().list("Namespace")
    first = status.cluster_outage()
    assert first is not None and "127.0.0.1" in first.error
    assert cluster_probe_task.apply().get() is False  # the beat task: still down
    again = status.cluster_outage()
    assert again is not None and again.since == first.since


@pytest.mark.django_db
def test_pages_show_the_banner_while_the_cluster_is_down_and_drop_it_after(
        unreachable, login, settings, cluster):
    # before: the cluster reachable (with it unreachable, the page's own read of the cluster
    # may be the call that fails and records the outage, as it should)
    unreachable_kubeconfig, settings.KUBECONFIG = settings.KUBECONFIG, str(cluster.kubeconfig)
    # a read model's thread of this process (started by an earlier test) that reconnected while
    # the fixture's unreachable address was set failed there and recorded an outage, as it
    # should: the probe, which ends outages, runs first, as the beat would
    cluster_probe()
    client = login("researcher")
    assert 'role="alert"' not in client.get("/workloads/").content.decode()
    settings.KUBECONFIG = unreachable_kubeconfig
    cluster_probe()
    page = client.get("/workloads/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "The cluster is unreachable" in body and 'role="alert"' in body

    settings.KUBECONFIG = str(cluster.kubeconfig)
    assert cluster_probe_task.apply().get() is True  # the probe clears it for every process
    assert status.cluster_outage() is None
    assert "The cluster is unreachable" not in client.get("/workloads/").content.decode()


@pytest.mark.django_db
def test_readyz_records_what_it_finds(unreachable, keystone, client):
    assert client.get("/readyz").status_code == 503
    assert status.cluster_outage() is not None


def test_a_record_expires_by_itself():
    """Nobody seeing the cluster fail for a while means nobody should be told it is down."""
    status.record_unreachable("connection refused")
    ttl = redis.Redis.from_url(settings.REDIS_URL).ttl(cache.make_and_validate_key(status.KEY))
    assert 0 < ttl <= status.RECORD_SECONDS
    cache.delete(status.KEY)
