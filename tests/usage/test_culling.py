"""Idle culling: a workload on kubesim's idle GPU trace is warned and then stopped per its
tenant's settings; "I still need it" and an admin's exemption prevent the stop.

A kubesim of its own (the demo inventory). Samples come from scraping kubesim's real
/metrics, stamped with back-dated scrape times (usage_scrape(now=…)), so a two-minute idle
window passes in a second; the culling cycle is called directly with the matching `now`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from kube.client import Kube
from tenants.models import Quota, Tenant
from tests.fixtures.factories import make_workload
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.culling import IDLE_TRACE, actions, check
from tests.support.waiting import eventually
from tests.workloads.api_calls import vision_lab_ready
from usage.culling import idle_workloads
from usage.models import GpuSample, WorkloadIdle
from usage.services import samples_insert, usage_scrape
from workloads.manifests import workload_objects
from workloads.models import Workload, WorkloadEvent
from workloads.objects import workload_spec

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def sim(kubesim_factory):
    return kubesim_factory(inventory=DEMO_INVENTORY)


@pytest.fixture
def vision(login, gpu_types, sim, kube, settings, eager_celery) -> Tenant:
    settings.KUBECONFIG = str(sim.kubeconfig)
    tenant = vision_lab_ready(login)
    Quota.objects.filter(tenant=tenant).update(idle_threshold_percent=5, idle_minutes=2,
                                               idle_action=Quota.IdleAction.STOP,
                                               idle_grace_minutes=1)
    return Tenant.objects.select_related("quota").get(pk=tenant.pk)


@pytest.fixture
def kube(sim):
    """This module's kubesim; what a test made there is gone before the next."""
    with cluster_objects_of_the_test(sim.api_client, timeout=30):
        yield Kube(sim.api_client())


@pytest.fixture
def researcher_page(as_user):
    return as_user("researcher")


def idle_workload(tenant: Tenant, kube: Kube, *, name: str, now: dt.datetime) -> Workload:
    """A running workload whose pod kubesim runs on the idle GPU trace (the annotation goes on
    the pod template through the workload's spec: the API does not offer annotations)."""
    owner = get_user_model().objects.get(name="researcher")
    owner.email = "researcher@example.org"
    owner.save(update_fields=["email"])
    workload = make_workload(tenant, owner, name=name, started_at=now - dt.timedelta(minutes=10))
    spec = dataclasses.replace(workload_spec(workload), pod_annotations=IDLE_TRACE)
    for obj in workload_objects(spec):
        kube.create(obj)
    eventually(lambda: f'pod="{workload.object_name}-' in kube.server_get("/metrics").decode(),
               timeout=20, message="the idle pod never got its GPU")
    return workload


def scrape_at(kube: Kube, *moments: dt.datetime) -> None:
    for moment in moments:
        usage_scrape(kube=kube, now=moment)


def idle_minutes_of_samples(kube: Kube, now: dt.datetime) -> None:
    """Scrapes every 30 s over the last 150 s: a whole two-minute idle window."""
    scrape_at(kube, *(now - dt.timedelta(seconds=s) for s in (150, 120, 90, 60, 30, 0)))


def test_an_idle_workload_is_warned_then_stopped(vision, kube, settings, researcher_page):
    settings.EMAIL_HOST = "smtp.example.org"
    now = timezone.now().replace(microsecond=0)
    workload = idle_workload(vision, kube, name="idle-nb", now=now)
    idle_minutes_of_samples(kube, now)
    samples = GpuSample.objects.filter(workload=workload)
    assert samples.count() == 6 and all(s.util < 2 for s in samples)  # kubesim's idle trace

    report = check(now)

    assert report.warned == 1 and report.stopped == 0
    state = WorkloadIdle.objects.get(workload=workload)
    assert state.warned_at == now and state.stop_at == now + dt.timedelta(minutes=1)
    assert WorkloadEvent.objects.filter(workload=workload, reason="IdleWarning",
                                        type="Warning").exists()
    assert actions(workload) == ["workload.idle_warn"]
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["researcher@example.org"]
    assert "idle-nb" in mail.outbox[0].subject
    # the page shows the banner with the button; the dashboard lists it as idle
    page = researcher_page.get(f"/workloads/{workload.pk}/").content.decode()
    assert 'id="idle-banner"' in page and "I still need it" in page
    assert [row.workload.pk for row in idle_workloads(now=now)] == [workload.pk]

    # within the grace: nothing more (and a second warning is not sent)
    scrape_at(kube, now + dt.timedelta(seconds=30))
    report = check(now + dt.timedelta(seconds=30))
    assert (report.warned, report.stopped) == (0, 0)

    # the grace passed and it is still idle: stopped, its record and history kept
    scrape_at(kube, now + dt.timedelta(seconds=60), now + dt.timedelta(seconds=75))
    report = check(now + dt.timedelta(seconds=75))

    assert report.stopped == 1
    workload.refresh_from_db()
    assert workload.state in (Workload.State.STOPPING, Workload.State.STOPPED)
    assert workload.reason.startswith("stopped as idle")
    assert actions(workload)[:3] == ["workload.idle_warn", "workload.idle_stop",
                                     "workload.stop"]
    assert GpuSample.objects.filter(workload=workload).count() == 9
    assert WorkloadEvent.objects.filter(workload=workload, reason="IdleWarning").exists()
    # the stop task removed its objects from the cluster
    assert not kube.list("Deployment", vision.namespace,
                         label_selector=f"gpu-portal.io/workload-id={workload.pk}")["items"]
    # one warning, then the stop's own notice (the portal stopped it, not its owner)
    assert [m.subject for m in mail.outbox] == [
        f"[GPU portal] idle-nb (#{workload.pk}) is idle",
        f"[GPU portal] idle-nb (#{workload.pk}) was stopped"]
    assert "stopped as idle" in mail.outbox[1].body


def test_i_still_need_it_prevents_the_stop(vision, kube, researcher_page):
    now = timezone.now().replace(microsecond=0)
    workload = idle_workload(vision, kube, name="keep-me", now=now)
    idle_minutes_of_samples(kube, now)
    assert check(now).warned == 1

    response = researcher_page.post(f"/workloads/{workload.pk}/still-needed/")

    assert response.status_code == 302
    state = WorkloadIdle.objects.get(workload=workload)
    assert state.warned_at is None and state.stop_at is None and state.extended_at is not None
    assert 'id="idle-banner"' not in researcher_page.get(f"/workloads/{workload.pk}/")\
        .content.decode()
    # past the grace, still idle: neither stopped nor warned again (a new idle period began)
    scrape_at(kube, now + dt.timedelta(seconds=60), now + dt.timedelta(seconds=75))
    report = check(now + dt.timedelta(seconds=75))
    assert (report.warned, report.stopped) == (0, 0)
    workload.refresh_from_db()
    assert workload.state == Workload.State.RUNNING
    assert actions(workload) == ["workload.idle_warn", "workload.idle_extend"]
    # once per idle period: a second press without a new warning changes nothing
    researcher_page.post(f"/workloads/{workload.pk}/still-needed/")
    assert actions(workload) == ["workload.idle_warn", "workload.idle_extend"]


def test_an_exempt_workload_is_never_warned(vision, kube, login, as_user):
    now = timezone.now().replace(microsecond=0)
    workload = idle_workload(vision, kube, name="exempt", now=now)
    idle_minutes_of_samples(kube, now)
    admin = login("admin")

    response = admin.post(f"/workloads/{workload.pk}/cull-exempt/", {"exempt": "1",
                                                                     "note": "demo"})

    assert response.status_code == 302
    assert WorkloadIdle.objects.get(workload=workload).cull_exempt
    assert idle_workloads(now=now)[0].exempt  # idle, listed, marked exempt
    report = check(now)
    assert (report.warned, report.stopped) == (0, 0)
    assert actions(workload) == ["workload.cull_exempt"]
    # a member cannot exempt
    member = as_user("researcher")
    assert member.post(f"/workloads/{workload.pk}/cull-exempt/",
                       {"exempt": "0"}).status_code == 403


def _rows(workload: Workload, start: dt.datetime, utils: list[float]) -> list[tuple]:
    return [(start + dt.timedelta(seconds=30 * i), "gpu-a100-1", 0, "GPU-test", "",
             workload.pk, workload.tenant_id, workload.tenant.namespace,
             f"{workload.object_name}-x", util, 100, 81920, 30.0, 60.0, 0, 0, "")
            for i, util in enumerate(utils)]


def test_warn_only_busy_again_and_gaps(vision, settings):
    """No cluster needed: samples written directly. Warn-only never stops; use after the
    warning withdraws it; a gap in the samples is no idleness."""
    Quota.objects.filter(tenant=vision).update(idle_action=Quota.IdleAction.WARN)
    owner = get_user_model().objects.get(name="researcher")
    now = timezone.now().replace(microsecond=0)
    workload = make_workload(vision, owner, name="b", kind="batch", image="x:1", port=None,
                             cpu=1, memory_gb=1, started_at=now - dt.timedelta(minutes=30),
                             object_name="wl-b")
    # a gap: samples only in the last minute of a two-minute window
    samples_insert(rows=_rows(workload, now - dt.timedelta(seconds=60), [1, 1, 1]))
    assert check(now).warned == 0
    samples_insert(rows=_rows(workload, now - dt.timedelta(seconds=150), [1, 1, 1]))
    assert check(now).warned == 1
    assert WorkloadIdle.objects.get(workload=workload).stop_at is None  # warn only
    assert check(now + dt.timedelta(hours=1)).stopped == 0
    samples_insert(rows=_rows(workload, now + dt.timedelta(seconds=30), [80]))
    assert check(now + dt.timedelta(seconds=40)).withdrawn == 1
    assert WorkloadIdle.objects.get(workload=workload).warned_at is None


def test_two_pods_on_a_time_sliced_gpu_are_judged_by_their_own_figures(vision, settings):
    """With per-process figures (scope "process") the idle one of two pods sharing a GPU is
    warned and the busy one is not; with device-level figures only (scope "device"), the whole
    GPU's load is an upper bound of each pod's own: a busy shared GPU idles neither."""
    owner = get_user_model().objects.get(name="researcher")
    now = timezone.now().replace(microsecond=0)

    def shared(name: str) -> Workload:
        return make_workload(vision, owner, name=name, kind="batch", image="x:1", port=None,
                             cpu=1, memory_gb=1, started_at=now - dt.timedelta(minutes=30),
                             object_name=f"wl-{name}")

    def rows(workload: Workload, utils: list[float], scope: str) -> list[tuple]:
        return [(now - dt.timedelta(seconds=150 - 30 * i), "gpu-t4-shared-1", 0, "GPU-shared",
                 "", workload.pk, workload.tenant_id, workload.tenant.namespace,
                 f"{workload.object_name}-x", util, 100, 15360, 30.0, 60.0, 0, 0, scope)
                for i, util in enumerate(utils)]

    idle, busy = shared("idle"), shared("busy")
    samples_insert(rows=rows(idle, [81.0] * 6, "device") + rows(busy, [81.0] * 6, "device"))
    assert check(now).warned == 0  # the GPU was busy: which pod was is not known

    GpuSample.objects.all().delete()
    samples_insert(rows=rows(idle, [0.5] * 6, "process") + rows(busy, [80.0] * 6, "process"))
    assert check(now).warned == 1
    assert WorkloadIdle.objects.get(workload=idle).warned_at is not None
    assert not WorkloadIdle.objects.filter(workload=busy, warned_at__isnull=False).exists()



def test_two_notebooks_on_a_time_sliced_t4_and_one_on_a_mig_slice_end_to_end(
        vision, gpu_types, api_headers):
    """Launched through the API on the time-sliced T4 node and the MIG A100 node (kubesim's
    here; the KWOK nodes and their agents where tests/realcluster collects it): they run; the
    quota's total, the budget's burn rate and GPU-hours weigh a quarter and a seventh; each
    one's chart has its own utilisation (the exporter's figures per pod, scope "process"); the
    culling cycle stops the idle one of the two on the T4 and not the busy one (the GPU trace,
    set at launch by KUBESIM_GPU_TRACE). Scrapes are stamped ahead of the clock so that the
    idle window passes at once."""
    from fractions import Fraction

    from django.test import Client, TestCase

    from budgets.selectors import consumption
    from tenants.provisioning import tenant_reconcile
    from tenants.selectors import quota_figures
    from tenants.services import quota_update
    from tests.support.database import demo_shared_gpu_types
    from tests.support.tracking import state_of, track_until
    from tests.workloads.api_calls import launch
    from usage.charts import workload_gpu_series
    from usage.models import GpuUsageRollup
    from usage.scrape import discover_targets, scrape_targets
    from usage.services import usage_rollup
    from workloads.selectors import quota_use
    from workloads.tracking.tracker import Tracker

    demo_shared_gpu_types(gpu_types)
    quota_update(tenant=vision, acting_user=None,
                 changes={"gpus_by_type": {"t4-shared": 4, "a100-1g-10gb": 7}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    shared = {"template": "jupyter", "gpu_type": "t4-shared", "gpu_count": 1}
    answers = {name: launch(headers, {**body, "name": name}) for name, body in (
        ("busy", {**shared, "env": {"KUBESIM_GPU_TRACE": "busy"}}),
        ("idle", {**shared, "env": {"KUBESIM_GPU_TRACE": "idle"}}),
        ("slice", {"template": "jupyter", "gpu_type": "a100-1g-10gb", "gpu_count": 1}))}
    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 201), \
        {name: a.json() for name, a in answers.items()}
    busy, idle, sliced = (Workload.objects.get(pk=answers[name].json()["id"])
                          for name in ("busy", "idle", "slice"))
    every = (busy, idle, sliced)
    kube = Kube()
    try:
        track_until(Tracker(), lambda: all(state_of(w).state == Workload.State.RUNNING
                                           for w in every), timeout=60,
                    describe=lambda: ", ".join(f"{w.name}: {w.state} {w.reason}" for w in every))
        nodes = {w.name: kube.list("Pod", vision.namespace,
                                   label_selector=f"gpu-portal.io/workload-id={w.pk}")["items"][0]
                 ["spec"]["nodeName"] for w in every}
        assert nodes == {"busy": "gpu-t4-shared-1", "idle": "gpu-t4-shared-1",
                         "slice": "gpu-a100-mig-1"}

        # the total and the budget's burn rate weigh a quarter T4 and a seventh of an A100
        figures = quota_figures(vision, used=quota_use(vision))
        assert figures.used is not None
        assert figures.used.gpus_total == Fraction(1, 4) * 2 + Fraction(1, 7)
        assert (figures.used.gpus("t4-shared"), figures.used.gpus("a100-1g-10gb")) == (2, 1)
        # now to the microsecond: cut to the second, it can fall before the runs' starts,
        # recorded within the second the tracker saw them running
        now = timezone.now()
        assert consumption(vision, weights={}, start=now - dt.timedelta(days=1),
                           now=now).rate == pytest.approx(0.25 * 2 + 1 / 7)

        pods: set[str] = set()

        def reported() -> bool:
            pods.clear()
            pods.update(r.pod for result, _ in scrape_targets(discover_targets(kube), kube=kube)
                        for r in result.readings)
            return all(any(pod.startswith(f"{w.object_name}-") for pod in pods) for w in every)

        eventually(reported, timeout=30, interval=0.3,
                   message=lambda: f"the exporters never reported the three pods' GPUs: {pods}")
        # two minutes and a half of scrapes from their start
        started = max(state_of(w).started_at for w in every)
        later = [started + dt.timedelta(seconds=s) for s in range(30, 181, 30)]
        for moment in later:
            usage_scrape(now=moment)
        at = later[-1]
        for workload in (busy, idle):
            scopes = set(GpuSample.objects.filter(workload=workload)
                         .values_list("scope", flat=True))
            assert scopes == {"process"}, (workload.name, scopes)  # its own, not the GPU's
        series = {w.name: workload_gpu_series(w, minutes=15, now=at) for w in every}
        assert all(len(s["t"]) == len(later) for s in series.values()), series
        assert min(series["busy"]["util_avg"]) > 20 and max(series["idle"]["util_avg"]) < 5
        assert not any(s["device_level"] for s in series.values())
        # a MIG slice: its own device; the NVML agent has memory only for it, kubesim both
        assert series["slice"]["memory_only"] or None not in series["slice"]["util_avg"]

        # GPU-hours: each one's allocated seconds are its run × its type's part of a GPU
        usage_rollup(since=started - dt.timedelta(minutes=2), until=at + dt.timedelta(minutes=1),
                     now=at)
        for workload, part in ((busy, 0.25), (idle, 0.25), (sliced, 1 / 7)):
            allocated = sum(GpuUsageRollup.objects.filter(
                workload=workload, granularity="minute").values_list("gpu_seconds_allocated",
                                                                     flat=True))
            ran = (at - workload.started_at).total_seconds()
            assert allocated == pytest.approx(ran * part, rel=0.01), workload.name

        # culling: the idle one is warned, then stopped after the grace; the busy one and
        # the slice run on
        assert check(at).warned == 1
        assert WorkloadIdle.objects.get(workload=idle).warned_at == at
        assert not WorkloadIdle.objects.filter(workload__in=[busy, sliced],
                                               warned_at__isnull=False).exists()
        for seconds in (30, 60, 75):
            usage_scrape(now=at + dt.timedelta(seconds=seconds))
        assert check(at + dt.timedelta(seconds=75)).stopped == 1
        assert state_of(idle).state in (Workload.State.STOPPING, Workload.State.STOPPED)
        assert (state_of(busy).state, state_of(sliced).state) == (Workload.State.RUNNING,) * 2
    finally:
        for workload in every:
            with TestCase.captureOnCommitCallbacks(execute=True):
                Client().delete(f"/api/v1/workloads/{workload.pk}/", **headers)
        eventually(lambda: not any(kube.list("Pod", vision.namespace, label_selector=(
            f"gpu-portal.io/workload-id={w.pk}"))["items"] for w in every),
            timeout=60, message="the three notebooks' pods are not gone")
