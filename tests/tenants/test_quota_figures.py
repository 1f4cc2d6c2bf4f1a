"""One owner for quota figures: the adjustments as rows (tenants.services.quota_adjustments_set),
the figures worked out once (tenants.figures, tenants.selectors.quota_figures), and every reader
agreeing on them — the portal's admission (with and without Kueue), the Kueue ClusterQueue, the
namespace's ResourceQuota, the quota API and the pages — for a tenant with a running reservation,
GPUs withheld for maintenance and a budget's hold at once."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client, TestCase
from django.utils import timezone

from audit.models import AuditRecord
from catalogue.models import GpuType, Template
from identity.models import User
from tenants.figures import AdjustmentLine, QuotaAmounts, figures_of
from tenants.manifests import make_resource_quota
from tenants.models import Quota, QuotaAdjustment, Tenant
from tenants.provisioning import namespace_spec
from tenants.queueing import queue_spec
from tenants.selectors import quota_figures, tenants_with_quota_figures
from tenants.services import quota_adjustments_set, quota_update
from workloads.services import AdmissionRefused, workload_launch

pytestmark = pytest.mark.django_db

Source = QuotaAdjustment.Source
NOW = dt.datetime(2030, 3, 4, 9, 0, tzinfo=dt.UTC)


# --- the figures, worked out -------------------------------------------------------------------

def figures(*lines: AdjustmentLine, gpus_total: int = 8, cpu: int = 32, memory_gb: int = 128,
            **by_type: int):
    nominal = QuotaAmounts(gpus_by_type=by_type or {"a100": 4, "v100": 4},
                           gpus_total=gpus_total, cpu=cpu, memory_gb=memory_gb)
    return figures_of(tenant_name="vision-lab", nominal=nominal, lines=lines, now=NOW,
                      default_share=(16.0, 128.0), max_workloads=10, max_runtime_minutes=0,
                      borrowing_limit=1)


def line(source: str, gpus: int = 0, gpu_type: str | None = "a100", **fields: Any):
    return AdjustmentLine(source=source, gpu_type=gpu_type, gpus=gpus, **fields)


@pytest.mark.parametrize(("lines", "in_force", "held"), [
    # nominal: a100 4, v100 4, 8 in all, 32 cores, 128 GiB (4 cores, 16 GiB per GPU)
    ((), ({"a100": 4, "v100": 4}, 8, 32, 128), False),
    # a reservation adds GPUs of its type, to the total, with their CPU and memory share
    ((line(Source.RESERVATION, 4),), ({"a100": 8, "v100": 4}, 12, 48, 192), False),
    # maintenance withholds GPUs of its type only, never below none
    ((line(Source.MAINTENANCE, -3),), ({"a100": 1, "v100": 4}, 8, 32, 128), False),
    ((line(Source.MAINTENANCE, -9),), ({"a100": 0, "v100": 4}, 8, 32, 128), False),
    # all at once; a hold changes no figure but holds the queue
    ((line(Source.RESERVATION, 4), line(Source.MAINTENANCE, -6),
      line(Source.BUDGET_HOLD, kind="hold", gpu_type=None, reason="used up")),
     ({"a100": 2, "v100": 4}, 12, 48, 192), True),
    # a grant of no type raises the total (and CPU, memory); a cut of the total lowers it
    ((line(Source.ADMIN, 2, gpu_type=None),), ({"a100": 4, "v100": 4}, 10, 40, 160), False),
    ((line(Source.ADMIN, -10, gpu_type=None),), ({"a100": 4, "v100": 4}, 0, 32, 128), False),
    # a row past its end counts for nothing: a writer gone quiet lifts nothing for good
    ((line(Source.RESERVATION, 4, starts_at=NOW - dt.timedelta(hours=1), ends_at=NOW),
      line(Source.RESERVATION, 2, ends_at=NOW + dt.timedelta(seconds=1))),
     ({"a100": 6, "v100": 4}, 10, 40, 160), False),
])
def test_what_is_in_force(lines, in_force, held):
    result = figures(*lines)
    assert (result.in_force.gpus_by_type, result.in_force.gpus_total, result.in_force.cpu,
            result.in_force.memory_gb) == in_force
    assert result.held is held
    assert result.nominal.gpus("a100") == 4  # the admin's quota stays what it is


def test_a_quota_of_no_gpus_adds_the_default_share_and_the_words_say_why():
    result = figures(line(Source.RESERVATION, 1), gpus_total=0, cpu=16, memory_gb=64)
    assert (result.in_force.cpu, result.in_force.memory_gb) == (16 + 16, 64 + 128)
    until = NOW + dt.timedelta(hours=2)
    both = figures(line(Source.RESERVATION, 4), line(Source.MAINTENANCE, -6, ends_at=until))
    assert both.adjusted_text("a100") == \
        " (4 of them reserved; 6 withheld for maintenance until 2030-03-04 11:00 UTC)"
    assert both.adjusted_text("v100") == ""
    assert both.in_force_text("a100") == ("4 a100 nominal, +4 reserved, -6 withheld for "
                                          "maintenance until 2030-03-04 11:00 UTC → 2 in force")
    assert both.in_force_text("v100") == "" and both.total_text() == \
        "8 GPUs in all nominal, +4 → 12 in force"
    assert [a.text for a in both.adjustments] == [
        "+4 a100 reserved", "-6 a100 withheld for maintenance until 2030-03-04 11:00 UTC"]
    assert (both.before_withheld("a100"), both.reach("a100")) == (8, 3)


# --- the one writer -----------------------------------------------------------------------------

@pytest.fixture
def tenant(gpu_types) -> Tenant:
    from tests.fixtures import factories

    return factories.make_tenant(f"figures-{timezone.now():%H%M%S%f}",
                                 gpus_by_type={"a100": 4, "v100": 4}, gpus_total=8, cpu=32,
                                 memory_gb=128, max_workloads=10)


def test_each_source_replaces_only_its_own_rows_and_once(tenant):
    # ends at a reset in the portal's time zone: the database gives it back in UTC
    reset = dt.datetime(2030, 4, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    held = line(Source.BUDGET_HOLD, kind="hold", gpu_type=None, reason="used up",
                ref="budget:1", ends_at=reset)
    with TestCase.captureOnCommitCallbacks(execute=False) as reconciles:
        assert quota_adjustments_set(tenant=tenant, source=Source.RESERVATION, reason="#1 runs",
                                     adjustments=[line(Source.RESERVATION, 4, ref="o:1")])
        assert quota_adjustments_set(tenant=tenant, source=Source.BUDGET_HOLD, reason="held",
                                     adjustments=[held])
        # the same rows again: nothing written, nothing audited, nothing reconciled
        assert not quota_adjustments_set(tenant=tenant, source=Source.RESERVATION,
                                         reason="#1 runs",
                                         adjustments=[line(Source.RESERVATION, 4, ref="o:1")])
        assert not quota_adjustments_set(tenant=tenant, source=Source.BUDGET_HOLD,
                                         reason="held", adjustments=[held])
        assert quota_adjustments_set(tenant=tenant, source=Source.RESERVATION, reason="none",
                                     adjustments=[])
    assert len(reconciles) == 3
    assert [(a.source, a.kind) for a in quota_figures(tenant).adjustments] == \
        [("budget_hold", "hold")]  # the hold is budgets', untouched by the reservations
    records = AuditRecord.objects.filter(action="quota.adjust", tenant=tenant).order_by("pk")
    assert [(r.after["source"], r.after["reason"]) for r in records] == \
        [("reservation", "#1 runs"), ("budget_hold", "held"), ("reservation", "none")]


@pytest.mark.parametrize(("source", "adjustment", "error"), [
    (Source.RESERVATION, line(Source.MAINTENANCE, -1), "given as one of reservation"),
    (Source.BUDGET_HOLD, line(Source.BUDGET_HOLD, 2, kind="hold"), "a hold names no"),
    (Source.RESERVATION, line(Source.RESERVATION, 0), "adds or withholds some GPUs"),
    (Source.RESERVATION, line(Source.RESERVATION, 1, gpu_type="h900"), "unknown GPU type"),
])
def test_a_wrong_adjustment_is_refused_and_nothing_is_written(tenant, source, adjustment, error):
    with pytest.raises(ValueError, match=error):
        quota_adjustments_set(tenant=tenant, source=source, adjustments=[adjustment],
                              reason="x")
    assert not QuotaAdjustment.objects.filter(quota__tenant=tenant).exists()


def test_the_figures_cost_one_query_and_none_prefetched(tenant, django_assert_num_queries):
    """The GPU limits and the adjustments are read together, in the adjustments' order, and
    give the figures that the prefetched rows give."""
    hour = dt.timedelta(hours=1)
    with TestCase.captureOnCommitCallbacks(execute=False):
        quota_adjustments_set(tenant=tenant, source=Source.RESERVATION, reason="x", adjustments=[
            line(Source.RESERVATION, 4, ref="occurrence:12", reason="#12"),
            line(Source.RESERVATION, 2, ref="occurrence:3", reason="#3", ends_at=NOW + hour),
            line(Source.RESERVATION, 1, ref="occurrence:9", ends_at=NOW - hour)])  # ended
        quota_adjustments_set(tenant=tenant, source=Source.MAINTENANCE, reason="y",
                              adjustments=[line(Source.MAINTENANCE, -1, gpu_type="v100")])
        quota_adjustments_set(tenant=tenant, source=Source.BUDGET_HOLD, reason="z", adjustments=[
            line(Source.BUDGET_HOLD, kind="hold", gpu_type=None, reason="used up")])
    tenant = Tenant.objects.select_related("quota").get(pk=tenant.pk)
    with django_assert_num_queries(1):  # its GPU limits and its adjustments, together
        read = quota_figures(tenant, now=NOW)
    tenant = tenants_with_quota_figures(Tenant.objects.filter(pk=tenant.pk)).get()
    with django_assert_num_queries(0):
        prefetched = quota_figures(tenant, now=NOW)
    assert read == prefetched
    assert (read.gpus("a100"), read.gpus("v100"), read.held) == (10, 3, True)
    assert [a.ref for a in read.adjustments] == ["", "", "occurrence:12", "occurrence:3"]


# --- every reader agrees ------------------------------------------------------------------------

# nominal a100 4, v100 4, 8 in all, 32 cores, 128 GiB; a reservation adds 4 a100 (and 16
# cores, 64 GiB), maintenance withholds 6 a100, the budget holds the queue
IN_FORCE = {"a100": 2, "v100": 4, "gpus_total": 12, "cpu": 48, "memory": 192, "held": True}


@pytest.fixture
def adjusted(login, gpu_types, cluster) -> Tenant:
    login("researcher")  # records vision-lab
    tenant = Tenant.objects.get(name="vision-lab")
    until = timezone.now() + dt.timedelta(hours=2)
    with TestCase.captureOnCommitCallbacks(execute=False):
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": 8, "cpu": 32, "memory_gb": 128, "max_workloads": 10,
            "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0}, "gpu_borrowing_limit": 1})
        quota_adjustments_set(tenant=tenant, source=Source.RESERVATION, reason="#7 runs",
                              adjustments=[line(Source.RESERVATION, 4, ends_at=until,
                                                reason="reservation #7 (4 a100)")])
        quota_adjustments_set(tenant=tenant, source=Source.MAINTENANCE, reason="#3",
                              adjustments=[line(Source.MAINTENANCE, -6, ends_at=until,
                                                reason="8 a100 GPUs in maintenance")])
        quota_adjustments_set(tenant=tenant, source=Source.BUDGET_HOLD, reason="used up",
                              adjustments=[line(Source.BUDGET_HOLD, kind="hold", gpu_type=None,
                                                reason="GPU-hour budget: used up")])
    return tenant


def _refusal(tenant: Tenant, **request: Any) -> str:
    request = {"template": Template.objects.get(slug="custom"), "name": "probe",
               "kind": "batch", "image": "busybox:1.36", "gpu_type": GpuType.objects.get(
                   slug=request.pop("gpu_type", "a100")), "gpu_count": 1, "cpu": 1,
               "memory": 1, **request}
    user = User.objects.get(name="researcher")
    with pytest.raises(AdmissionRefused) as refused, \
            TestCase.captureOnCommitCallbacks(execute=False):
        workload_launch(tenant=tenant, user=user, request=request)
    return str(refused.value)


def admission(tenant: Tenant, **_: Any) -> dict[str, Any]:
    """The portal's own admission (no Kueue): what its refusals name as the quota."""
    a100 = _refusal(tenant, gpu_count=3)
    assert "(4 of them reserved; 6 withheld for maintenance until" in a100
    cpu = _refusal(tenant, gpu_type="v100", cpu=49)
    memory = _refusal(tenant, gpu_type="v100", memory=193)
    return {"a100": int(re.search(r"uses 0 of (\d+) a100 GPUs", a100).group(1)),
            "cpu": int(re.search(r"uses 0 of (\d+) CPU cores", cpu).group(1)),
            "memory": int(re.search(r"uses 0 of (\d+) GiB", memory).group(1))}


def admission_on_kueue(tenant: Tenant, settings, **_: Any) -> dict[str, Any]:
    """On Kueue: what the queue can hold (in force plus the borrowing limit of 1)."""
    settings.PORTAL_QUEUEING = "kueue"
    text = _refusal(tenant, gpu_count=4)
    assert "cannot be admitted while they are withheld: launch after" in text
    return {"a100": int(re.search(r"its quota of (\d+) ", text).group(1))}


def kueue_cluster_queue(tenant: Tenant, **_: Any) -> dict[str, Any]:
    spec = queue_spec(tenant, Quota.objects.get(tenant=tenant))
    gpus = dict(spec.gpus)
    return {"a100": gpus["a100"], "v100": gpus["v100"], "cpu": spec.cpu,
            "memory": spec.memory_gb, "held": spec.held}


def resource_quota(tenant: Tenant, **_: Any) -> dict[str, Any]:
    spec = namespace_spec(tenant, Quota.objects.get(tenant=tenant))
    hard = make_resource_quota(spec)["spec"]["hard"]
    return {"gpus_total": int(hard["requests.nvidia.com/gpu"]), "cpu": spec.cpu,
            "memory": spec.memory_gb}


def quota_api(tenant: Tenant, project_token, **_: Any) -> dict[str, Any]:
    client = Client(HTTP_X_AUTH_TOKEN=project_token("researcher", "vision-lab"))
    answer = client.get(f"/api/v1/tenants/{tenant.pk}/quota/").json()
    assert answer["gpus_by_type"]["a100"] == 4 and answer["gpus_total"] == 8  # as set
    assert [a["source"] for a in answer["adjustments"]] == \
        ["budget_hold", "maintenance", "reservation"]
    in_force = answer["in_force"]
    return {"a100": in_force["gpus_by_type"]["a100"], "v100": in_force["gpus_by_type"]["v100"],
            "gpus_total": in_force["gpus_total"], "cpu": in_force["cpu"],
            "memory": in_force["memory"], "held": in_force["held"]}


def admin_page(tenant: Tenant, login, **_: Any) -> dict[str, Any]:
    page = login("admin").get(f"/admin/tenants/{tenant.pk}/").content.decode()
    shown = {key: int(re.search(rf'data-in-force="{key}">(\d+)<', page).group(1))
             for key in ("a100", "v100", "gpus_total", "cpu", "memory")}
    return {**shown, "held": 'id="queue-held"' in page}


def researcher_page(tenant: Tenant, as_user, **_: Any) -> dict[str, Any]:
    page = as_user("researcher").get("/").content.decode()
    return {slug: int(re.search(rf'data-gpu-type="{slug}">0 / (\d+)', page).group(1))
            for slug in ("a100", "v100")} | {
        "gpus_total": int(re.search(r"data-total>0 / (\d+)<", page).group(1))}


@pytest.mark.parametrize("reader", [admission, admission_on_kueue, kueue_cluster_queue,
                                    resource_quota, quota_api, admin_page, researcher_page])
def test_every_reader_shows_the_same_figures_in_force(adjusted, reader, settings, login, as_user,
                                                     project_token):
    shown = reader(adjusted, settings=settings, login=login, as_user=as_user,
                   project_token=project_token)
    assert shown == {key: IN_FORCE[key] for key in shown}


def test_the_api_and_the_pages_say_the_figures_in_force_in_the_same_words(adjusted, login,
                                                                        project_token):
    """The portal writes each adjustment and each figure in force once (tenants.figures): the
    quota API answers those texts and the admin's pages show the same."""
    client = Client(HTTP_X_AUTH_TOKEN=project_token("researcher", "vision-lab"))
    answer = client.get(f"/api/v1/tenants/{adjusted.pk}/quota/").json()

    def timeless(text: str) -> str:
        return re.sub(r"until \d{4}-\d\d-\d\d \d\d:\d\d UTC", "until T", text)

    a100 = ("4 a100 nominal, -6 withheld for maintenance until T, +4 reserved until T "
            "→ 2 in force")
    in_force = answer["in_force"]
    assert {slug: timeless(text) for slug, text in in_force["gpus_by_type_text"].items()} == \
        {"a100": a100}
    assert timeless(in_force["text"]) == (f"{a100}; 8 GPUs in all nominal, +4 → 12 in force; "
                                          "queue held: GPU-hour budget: used up")
    assert [timeless(a["text"]) for a in answer["adjustments"]] == [
        "queue held: GPU-hour budget: used up",
        "-6 a100 withheld for maintenance until T: 8 a100 GPUs in maintenance",
        "+4 a100 reserved until T: reservation #7 (4 a100)"]
    admin = login("admin")
    detail = admin.get(f"/admin/tenants/{adjusted.pk}/").content.decode()
    assert in_force["text"] in detail
    listed = admin.get("/admin/tenants/").content.decode()
    assert f'title="{in_force["gpus_by_type_text"]["a100"]}"' in listed
