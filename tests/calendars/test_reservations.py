"""Reservations in effect on kubesim (no Kueue: the portal's own admission): the quota raised
while an occurrence runs (admission and the namespace's ResourceQuota), back down at its end or
when it is cancelled, the beat idempotent, and the figures a reservation adds (CPU and memory
with the GPUs; the ClusterQueue's nominal quota). The time is moved with time-machine."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.test import TestCase

from audit.models import AuditRecord
from calendars.models import Reservation, ReservationOccurrence
from calendars.reservations import reservations_tick
from calendars.services import reservation_cancel
from kube.client import Kube
from tenants.figures import AdjustmentLine
from tenants.models import Quota, QuotaAdjustment
from tenants.queueing import tenant_queue_objects
from tenants.selectors import quota_adjustment_lines, quota_figures
from tenants.services import quota_adjustments_set, quota_update
from tests.support.calendars import END, START, book, launch, make_tenant
from tests.support.tracking import state_of
from workloads.models import Workload
from workloads.services import AdmissionRefused
from workloads.tasks import workload_create_task

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


@pytest.fixture
def owner(db):
    from identity.models import User

    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


def tick(at: dt.datetime, *, reconcile: bool = False):
    """One beat at `at`; with `reconcile`, the reconciles it enqueues are run (eager_celery),
    else dropped (no cluster)."""
    with time_machine.travel(at, tick=True), \
            TestCase.captureOnCommitCallbacks(execute=reconcile):
        return reservations_tick()


def reserved(tenant) -> dict[str, int]:
    """GPUs per type the tenant's reservations add (its quota adjustments of the source, as
    the beat left them)."""
    lines = quota_adjustment_lines(Quota.objects.get(tenant=tenant))
    return {line.gpu_type or "": line.gpus for line in lines
            if line.source == QuotaAdjustment.Source.RESERVATION}


def hard_gpus(tenant) -> str:
    quota = Kube().get("ResourceQuota", "gpu-portal-quota", tenant.namespace)
    return quota["spec"]["hard"]["requests.nvidia.com/gpu"]


def test_the_quota_is_raised_while_the_reservation_runs_and_back_after(
        cluster, gpu_types, owner, eager_celery):
    tenant = make_tenant("vision-lab")
    with time_machine.travel(START - dt.timedelta(hours=2), tick=True):
        reservation = book(tenant, gpu_types)
    # before its start: the quota of 2 refuses 3
    with pytest.raises(AdmissionRefused, match="uses 0 of 2 a100 GPUs; 3 more would exceed"):
        launch(tenant, owner, gpu_types, name="early", gpus=3)
    assert tick(START - dt.timedelta(minutes=1), reconcile=True).applied == []
    assert hard_gpus(tenant) == "2"

    # at its start: 2 + 4, in the portal's admission and in the namespace's ResourceQuota
    result = tick(START + dt.timedelta(seconds=30), reconcile=True)
    assert result.applied == [(reservation.pk, START)]
    assert result.quotas == {"vision-lab": {"a100": 4}}
    quota = Quota.objects.get(tenant=tenant)
    assert reserved(tenant) == {"a100": 4}
    assert quota.gpus_by_type()["a100"] == 2  # the admin's quota, as the form shows it
    assert quota_figures(tenant).gpus("a100") == 6
    assert hard_gpus(tenant) == "6"
    workload = launch(tenant, owner, gpu_types, name="during", gpus=3)
    workload_create_task(workload.pk)  # kubesim's ResourceQuota admits its pod now
    assert state_of(workload).state in (Workload.State.PENDING, Workload.State.RUNNING), \
        workload.reason
    with pytest.raises(AdmissionRefused, match=r"uses 3 of 6 a100 GPUs \(4 of them reserved\)"):
        launch(tenant, owner, gpu_types, name="too many", gpus=4)

    # after its end: back to 2 (what runs runs on; nothing more is admitted)
    result = tick(END + dt.timedelta(seconds=30), reconcile=True)
    assert result.ended == [(reservation.pk, START)] and result.quotas == {"vision-lab": {}}
    assert reserved(tenant) == {}
    assert hard_gpus(tenant) == "2"
    with pytest.raises(AdmissionRefused, match="uses 3 of 2 a100 GPUs; 1 more would exceed"):
        launch(tenant, owner, gpu_types, name="late", gpus=1)
    row = ReservationOccurrence.objects.get(reservation=reservation)
    assert (row.applied_at is not None, row.ended_at is not None, row.released_at) == \
        (True, True, None)
    # audited each way, by the portal, with why
    records = AuditRecord.objects.filter(action="quota.adjust", tenant_id=tenant.pk) \
        .order_by("pk")
    line = {"source": "reservation", "kind": "delta", "gpu_type": "a100", "gpus": 4,
            "reason": f"reservation #{reservation.pk} (4 a100)", "ref": f"occurrence:{row.pk}",
            "starts_at": START.isoformat(), "ends_at": END.isoformat()}
    assert [(r.actor_name, r.before, r.after) for r in records] == [
        ("system", {"source": "reservation", "adjustments": []},
         {"source": "reservation", "adjustments": [line],
          "reason": f"reservations running: #{reservation.pk} (4 a100)"}),
        ("system", {"source": "reservation", "adjustments": [line]},
         {"source": "reservation", "adjustments": [], "reason": "no reservation running"})]


def test_the_beat_run_twice_does_each_step_once(gpu_types):
    tenant = make_tenant("vision-lab", reconcile=False)
    reservation = Reservation.objects.create(tenant=tenant, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    at = START + dt.timedelta(minutes=1)
    first, second = tick(at), tick(at + dt.timedelta(seconds=20))
    assert first.applied == [(reservation.pk, START)] and first.quotas
    assert not second.acted
    assert ReservationOccurrence.objects.filter(reservation=reservation).count() == 1
    assert AuditRecord.objects.filter(action="quota.adjust").count() == 1
    # two occurrences of one tenant and type at once add up
    Reservation.objects.create(tenant=tenant, gpu_type=gpu_types["a100"], count=2,
                               start=START + dt.timedelta(minutes=10), end=END)
    assert tick(START + dt.timedelta(minutes=11)).quotas == {"vision-lab": {"a100": 6}}


def test_a_weekly_reservation_raises_the_quota_each_week(gpu_types):
    tenant = make_tenant("vision-lab", reconcile=False)
    reservation = Reservation.objects.create(
        tenant=tenant, gpu_type=gpu_types["a100"], count=4, start=START, end=END,
        recurrence=Reservation.Recurrence.WEEKLY, until=START + dt.timedelta(days=15))
    week = dt.timedelta(days=7)
    assert tick(START + dt.timedelta(minutes=1)).quotas == {"vision-lab": {"a100": 4}}
    assert tick(END + dt.timedelta(minutes=1)).quotas == {"vision-lab": {}}
    second = tick(START + week + dt.timedelta(minutes=1))
    assert second.applied == [(reservation.pk, START + week)]
    assert second.quotas == {"vision-lab": {"a100": 4}}
    assert ReservationOccurrence.objects.filter(reservation=reservation).count() == 2


def test_a_cancelled_reservation_comes_off_at_the_next_tick(gpu_types):
    tenant = make_tenant("vision-lab", reconcile=False)
    reservation = Reservation.objects.create(tenant=tenant, gpu_type=gpu_types["a100"],
                                             count=4, start=START, end=END)
    tick(START + dt.timedelta(minutes=1))
    assert reserved(tenant) == {"a100": 4}
    with time_machine.travel(START + dt.timedelta(minutes=5), tick=True):
        assert reservation_cancel(reservation=reservation, acting_user=None)
    result = tick(START + dt.timedelta(minutes=6))
    assert result.ended == [(reservation.pk, START)]
    assert result.quotas == {"vision-lab": {}}
    assert reserved(tenant) == {}


def test_reserved_gpus_come_with_cpu_and_memory_and_raise_the_cluster_queue(gpu_types):
    tenant = make_tenant("vision-lab", a100=2, gpus_total=4, reconcile=False)
    quota_update(tenant=tenant, acting_user=None, changes={"gpu_borrowing_limit": 1})
    quota = Quota.objects.get(tenant=tenant)
    with TestCase.captureOnCommitCallbacks(execute=False):
        reserve(tenant, 3)
    figures = quota_figures(tenant, quota=quota).in_force
    # the quota's share per GPU: 16 cores and 64 GiB over 4 GPUs, 3 reserved
    assert (figures.gpus_total, figures.cpu, figures.memory_gb) == (7, 16 + 12, 64 + 48)
    queue = tenant_queue_objects(tenant, quota)[0]
    cpu_group, gpu_group = queue["spec"]["resourceGroups"]
    assert cpu_group["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "28"},
                                                    {"name": "memory", "nominalQuota": "112Gi"}]
    a100 = next(f for f in gpu_group["flavors"] if f["name"] == "gpu-a100")["resources"][0]
    assert (a100["nominalQuota"], a100["borrowingLimit"]) == ("5", "1")
    assert quota_figures(tenant).reach("a100") == 6
    # a quota of no GPUs gets the default quota's share per GPU (32 cores, 256 GiB over 2)
    quota_update(tenant=tenant, acting_user=None, changes={"gpus_total": 0})
    with TestCase.captureOnCommitCallbacks(execute=False):
        reserve(tenant, 1)
    figures = quota_figures(tenant, quota=Quota.objects.get(tenant=tenant)).in_force
    assert (figures.cpu, figures.memory_gb) == (16 + 16, 64 + 128)


def reserve(tenant, gpus: int) -> bool:
    """What a running reservation of `gpus` a100 adds, written as the beat writes it."""
    return quota_adjustments_set(
        tenant=tenant, source=QuotaAdjustment.Source.RESERVATION, reason="a test's",
        adjustments=[AdjustmentLine(source=QuotaAdjustment.Source.RESERVATION,
                                    gpu_type="a100", gpus=gpus, ref="test")])
