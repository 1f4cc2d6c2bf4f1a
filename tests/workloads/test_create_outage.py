"""A launch's create task waits out a cluster that does not answer however long that lasts: an
accepted launch is never failed for an outage (its owner may stop it meanwhile). What the cluster
answers but holds up — the portal's identity refused — is given up after MAX_RETRIES tries,
saying why. The task runs eagerly here (Celery's `apply`: each retry runs at once)."""

from __future__ import annotations

import pytest

from catalogue.models import Template
from kube.client import KubeUnavailable, NotAuthorized
from tests.support.admission import admitted
from workloads import tasks
from workloads.models import Workload
from workloads.tasks import MAX_RETRIES, workload_create_task

pytestmark = pytest.mark.django_db


def failing_first(monkeypatch, error: Exception, times: int) -> dict[str, int]:
    """The cluster's client fails with `error` for the task's first `times` tries."""
    calls = {"tries": 0}
    real = tasks.workload_kube

    def kube_of(workload):
        calls["tries"] += 1
        if calls["tries"] <= times:
            raise error
        return real(workload)

    monkeypatch.setattr(tasks, "workload_kube", kube_of)
    return calls


def test_a_cluster_that_does_not_answer_past_every_try_fails_no_launch(
        tenants, owner, gpu_types, monkeypatch):
    workload = admitted(tenants(), owner, Template.objects.get(slug="jupyter"), gpu_types["a100"])
    calls = failing_first(monkeypatch, KubeUnavailable("connection refused"), MAX_RETRIES + 3)
    workload_create_task.apply(args=[workload.pk])
    workload.refresh_from_db()
    assert calls["tries"] == MAX_RETRIES + 4
    assert workload.state == Workload.State.PENDING, workload.reason
    assert not workload.events.filter(reason="CreateFailed").exists()


def test_a_refused_identity_is_given_up_after_the_tries(tenants, owner, gpu_types, monkeypatch):
    workload = admitted(tenants(), owner, Template.objects.get(slug="jupyter"), gpu_types["a100"])
    calls = failing_first(monkeypatch, NotAuthorized("Unauthorized"), MAX_RETRIES + 3)
    workload_create_task.apply(args=[workload.pk])
    workload.refresh_from_db()
    assert calls["tries"] == MAX_RETRIES + 1
    assert workload.state == Workload.State.FAILED
    assert workload.reason == "The cluster refused the portal's identity: Unauthorized"
