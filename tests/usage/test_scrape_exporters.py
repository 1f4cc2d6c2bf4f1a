"""Exporters found through their Service's endpoints, and ones that answer garbage, fail, or
take too long; Prometheus as the source; the parser on its own."""

from __future__ import annotations

import json
import math
import time

import pytest

from gpuagent.exporter import DcgmCollector, render
from gpuagent.nvml import FakeGpu, FakeProcess, FakeReader, MigDevice
from gpuagent.podresources import Holder, StaticPodMapping
from gpuagent.processes import NoProcessMapping, ProcessMapper, StaticProcessMapping
from gpuagent.sampler import Sampler
from kube.client import Kube
from usage.models import GpuDevice, GpuSample, ScrapeTarget
from usage.scrape import ScrapeFailed, discover_targets, parse_exposition
from usage.services import usage_scrape

from .conftest import dcgm_text, make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def exporter_service(cluster, kube_namespace, settings):
    """Point discovery at an Endpoints object in kubesim; returns a function that sets its
    addresses to loopback exporters."""
    settings.PORTAL_GPU_EXPORTER_SERVICE = f"{kube_namespace}/gpuagent"
    settings.PORTAL_PROMETHEUS_URL = ""
    kube = Kube(cluster.api_client())

    def _set(*ports: int) -> Kube:
        body = {"apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "gpuagent", "namespace": kube_namespace},
                "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                             "ports": [{"name": "metrics", "port": port, "protocol": "TCP"}]}
                            for port in ports]}
        if kube.get("Endpoints", "gpuagent", kube_namespace) is None:
            kube.create(body)
        else:
            kube.replace(body)
        return kube

    return _set


def test_a_failing_exporter_never_holds_up_the_others(exporter_service, exporter, tenants,
                                                      users, gpu_types, settings):
    settings.PORTAL_USAGE_SCRAPE_TIMEOUT = 0.7
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=1)
    good = exporter(lambda path: (200, dcgm_text([
        {"node": "n1", "index": 0, "uuid": "GPU-held", "util": 87.5, "used": 30000,
         "free": 51920, "namespace": "gpu-alpha", "pod": f"{workload.object_name}-7d9f-x2x9k"},
        {"node": "n1", "index": 1, "uuid": "GPU-free", "util": 0, "used": 0, "free": 81920},
    ]).encode(), 0))
    garbage = exporter(lambda path: (200, b"<html><body>It works!</body></html>\n\x00\xff", 0))
    slow = exporter(lambda path: (200, dcgm_text([]).encode(), 5.0))
    broken = exporter(lambda path: (500, b"internal error", 0))
    kube = exporter_service(good.port, garbage.port, slow.port, broken.port)

    started = time.monotonic()
    report = usage_scrape(kube=kube)
    elapsed = time.monotonic() - started

    assert elapsed < 3.0  # the slow one cost its timeout, once, alongside the others
    assert report.targets == 4 and report.failed == 3
    held = GpuSample.objects.get(uuid="GPU-held")
    assert held.workload == workload and held.tenant == tenants["alpha"]
    assert held.util == 87.5 and held.memory_used_mib == 30000 and held.memory_total_mib == 81920
    free = GpuSample.objects.get(uuid="GPU-free")
    assert free.workload is None and free.tenant is None
    targets = {t.url: t for t in ScrapeTarget.objects.all()}
    assert targets[f"{good.url}/metrics"].last_error == ""
    assert targets[f"{good.url}/metrics"].last_samples == 2
    assert "not Prometheus text" in targets[f"{garbage.url}/metrics"].last_error \
        or "no DCGM" in targets[f"{garbage.url}/metrics"].last_error
    assert "no answer within" in targets[f"{slow.url}/metrics"].last_error
    assert targets[f"{broken.url}/metrics"].last_error == "HTTP 500"
    assert all(t.consecutive_failures == 1 for url, t in targets.items() if url != f"{good.url}/metrics")

    # the next cycle: the failures are counted again, the good exporter goes on
    usage_scrape(kube=kube)
    assert ScrapeTarget.objects.get(url=f"{broken.url}/metrics").consecutive_failures == 2
    assert GpuSample.objects.filter(uuid="GPU-held").count() >= 1


def test_bad_series_are_skipped_one_by_one(exporter_service, exporter, gpu_types):
    text = dcgm_text([{"node": "n1", "index": 0, "uuid": "GPU-ok", "util": 12}],
                     hostname_label="hostname")  # the newest dcgm-exporter's spelling
    text += 'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n1"} 50\n'  # no UUID
    text += 'DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-nan",Hostname="n1"} NaN\n'
    text += 'DCGM_FI_DEV_GPU_UTIL{gpu="x",UUID="GPU-bad",Hostname="n1"} 5\n'
    good = exporter(lambda path: (200, text.encode(), 0))
    report = usage_scrape(kube=exporter_service(good.port))
    assert report.failed == 0 and report.garbage == 3
    assert list(GpuSample.objects.values_list("uuid", flat=True)) == ["GPU-ok"]
    assert GpuDevice.objects.get(uuid="GPU-ok").node == "n1"
    assert ScrapeTarget.objects.get().garbage_total == 3


def test_a_service_without_ready_endpoints_means_nothing_to_scrape(exporter_service, cluster,
                                                                    kube_namespace):
    kube = exporter_service()
    assert discover_targets(kube) == []  # not kubesim's /metrics: the exporter is just down


def test_static_exporter_urls_come_before_the_service_and_after_prometheus(
        exporter_service, settings):
    kube = exporter_service(9400)  # a Service with a ready endpoint: not asked for
    settings.PORTAL_GPU_EXPORTER_URLS = ["http://127.0.0.1:9402/metrics", " ",
                                         "http://127.0.0.1:9401/metrics"]
    assert [(t.url, t.source) for t in discover_targets(kube)] == [
        ("http://127.0.0.1:9401/metrics", "exporter"), ("http://127.0.0.1:9402/metrics", "exporter")]
    settings.PORTAL_PROMETHEUS_URL = "http://prometheus:9090"
    assert [t.source for t in discover_targets(kube)] == ["prometheus"]
    settings.PORTAL_PROMETHEUS_URL = ""
    settings.PORTAL_GPU_EXPORTER_URLS = []
    assert [t.url for t in discover_targets(kube)] == ["http://127.0.0.1:9400/metrics"]


def test_a_pod_cannot_claim_another_tenants_workload(exporter_service, exporter, tenants, users,
                                                     gpu_types):
    theirs = make_workload(tenants["beta"], users["bob"])
    # a pod in alpha's namespace named like beta's workload
    fake = exporter(lambda path: (200, dcgm_text([
        {"node": "n1", "index": 0, "uuid": "GPU-x", "util": 99, "namespace": "gpu-alpha",
         "pod": f"{theirs.object_name}-abc-def"}]).encode(), 0))
    report = usage_scrape(kube=exporter_service(fake.port))
    assert report.unknown_pods == 1
    assert not GpuSample.objects.exists()


def test_prometheus_is_asked_with_one_promql_query(exporter, tenants, users, gpu_types, settings,
                                                   cluster):
    workload = make_workload(tenants["alpha"], users["ann"])
    pod = f"{workload.object_name}-5d4f8c7b9-x2x9k"
    evaluated = 1_741_000_000.0
    asked = []

    def answer(path: str):
        asked.append(path)
        series = []
        for name, value in (("DCGM_FI_DEV_GPU_UTIL", "61"), ("DCGM_FI_DEV_FB_USED", "2048"),
                            ("DCGM_FI_DEV_FB_FREE", "14336")):
            series.append({"metric": {
                "__name__": name, "gpu": "0", "UUID": "GPU-prom", "Hostname": "gpu-t4-1",
                "modelName": "Tesla T4", "namespace": "gpu-portal", "pod": "dcgm-exporter-abc",
                "exported_namespace": "gpu-alpha", "exported_pod": pod,
                "instance": "10.0.0.5:9400"}, "value": [evaluated, value]})
        body = {"status": "success", "data": {"resultType": "vector", "result": series}}
        return 200, json.dumps(body).encode(), 0

    prometheus = exporter(answer)
    settings.PORTAL_PROMETHEUS_URL = prometheus.url + "/"
    report = usage_scrape(kube=Kube(cluster.api_client()))
    assert report.failed == 0 and len(asked) == 1
    assert asked[0].startswith("/api/v1/query?query=")
    sample = GpuSample.objects.get()
    assert sample.workload == workload and sample.pod == pod and sample.util == 61
    assert sample.memory_total_mib == 16384
    assert sample.at.timestamp() == evaluated
    assert ScrapeTarget.objects.get().source == "prometheus"


def test_prometheus_errors_are_recorded(exporter, settings, cluster, db):
    prometheus = exporter(lambda path: (200, b'{"status":"error","error":"bad query"}', 0))
    settings.PORTAL_PROMETHEUS_URL = prometheus.url
    report = usage_scrape(kube=Kube(cluster.api_client()))
    assert report.failed == 1
    assert "bad query" in ScrapeTarget.objects.get().last_error


@pytest.mark.parametrize("text", ["", "garbage{{{\n", "# just a comment\n",
                                  "some_other_metric 1\n"])
def test_the_parser_refuses_what_is_no_dcgm_text(text):
    with pytest.raises(ScrapeFailed):
        parse_exposition(text)


def test_the_parser_reads_kubesims_format(kubesim):
    text = Kube(kubesim.api_client()).server_get("/metrics").decode()
    readings, garbage = parse_exposition(text)
    assert garbage == 0 and len(readings) >= 28
    assert all(r.uuid.startswith("GPU-") and r.node and math.isfinite(r.util) for r in readings)
    assert all(r.memory_total_mib > 0 and r.temperature and r.power_w for r in readings)


def _agent_text(*, process_figures: bool, pods: tuple[str, str]) -> str:
    """The agent's /metrics for one T4 time-sliced between two pods, one busy, one idle."""
    reader = FakeReader([FakeGpu(uuid="GPU-t4", name="Tesla T4", memory_total_bytes=15 * 2**30,
                                 processes=[FakeProcess(10, (90.0,), 4 * 2**30),
                                            FakeProcess(20, (0.0,), 2**30)])])
    holders = tuple(Holder("gpu-alpha", pod, "c", shared=True) for pod in pods)
    processes: ProcessMapper = (
        StaticProcessMapping({10: ("gpu-alpha", pods[0]), 20: ("gpu-alpha", pods[1])})
        if process_figures else NoProcessMapping())
    sampler = Sampler(reader, StaticPodMapping({"GPU-t4": holders}), "gpu-t4-shared-1",
                      processes=processes)
    sampler.sample_once()
    sampler.sample_once()
    return render(DcgmCollector(sampler).collect())


def test_the_parser_keeps_each_pod_on_a_shared_gpu_with_whose_figures_they_are():
    readings, garbage = parse_exposition(_agent_text(process_figures=True, pods=("a", "b")))
    assert garbage == 0
    own = {r.pod: (r.scope, r.own_util, r.own_memory_used_mib) for r in readings}
    assert own == {"a": ("process", 90.0, 4096.0), "b": ("process", 0.0, 1024.0)}
    assert {r.util for r in readings} == {90.0}  # the device's figure, kept for the device

    readings, _ = parse_exposition(_agent_text(process_figures=False, pods=("a", "b")))
    assert {r.pod: (r.scope, r.own_util) for r in readings} == {
        "a": ("device", 90.0), "b": ("device", 90.0)}

    # dcgm-exporter's shared GPU: each pod on it, the device's figures, no per-pod family
    text = dcgm_text([{"node": "n1", "index": 0, "uuid": "GPU-t4", "util": 60, "used": 9,
                       "free": 6000, "namespace": "ns", "pod": pod} for pod in ("a", "b")])
    readings, _ = parse_exposition(text)
    assert {r.pod: r.scope for r in readings} == {"a": "device", "b": "device"}


def test_two_workloads_on_a_time_sliced_gpu_each_store_their_own_samples(
        exporter_service, exporter, tenants, users, gpu_types):
    busy = make_workload(tenants["alpha"], users["ann"], gpu_count=1)
    idle = make_workload(tenants["alpha"], users["ann"], gpu_count=1)
    pods = (f"{busy.object_name}-0", f"{idle.object_name}-0")
    agent = exporter(lambda path: (200, _agent_text(process_figures=True, pods=pods).encode(), 0))

    report = usage_scrape(kube=exporter_service(agent.port))

    assert report.failed == 0 and report.devices == 1
    mine = {s.workload_id: (s.util, s.memory_used_mib, s.scope)
            for s in GpuSample.objects.filter(uuid="GPU-t4")}
    assert mine == {busy.pk: (90.0, 4096, "process"), idle.pk: (0.0, 1024, "process")}
    device = GpuDevice.objects.get(uuid="GPU-t4")
    assert device.last_util == 90.0


def _mig_agent_text(pod: str) -> str:
    """The agent's /metrics for an A100 in MIG mode: one 1g.10gb instance held by `pod`, which
    NVML gives memory and no utilisation."""
    reader = FakeReader([FakeGpu(uuid="GPU-a100", unsupported=frozenset({"utilization"}),
                                 mig=[MigDevice("MIG-1", 7, "1g.10gb", 900 * 2**20,
                                                9000 * 2**20)])])
    sampler = Sampler(reader, StaticPodMapping({"MIG-1": Holder("gpu-alpha", pod, "c")}),
                      "gpu-a100-mig-1")
    sampler.sample_once()
    return render(DcgmCollector(sampler).collect())


def test_the_agents_mig_instance_is_read_with_memory_and_no_utilisation():
    readings, garbage = parse_exposition(_mig_agent_text("p"))
    assert garbage == 0  # the GPU above the instance has nothing to store, and is no garbage
    assert [(r.uuid, r.mig_instance, r.mig_profile, r.pod, r.util, r.own_util,
             r.memory_used_mib) for r in readings] == [
        ("GPU-a100", "7", "1g.10gb", "p", None, None, 900.0)]


def test_a_workload_on_the_agents_mig_instance_stores_its_memory_without_utilisation(
        exporter_service, exporter, tenants, users, gpu_types):
    workload = make_workload(tenants["alpha"], users["ann"], gpu_count=1)
    agent = exporter(lambda path: (200, _mig_agent_text(f"{workload.object_name}-0").encode(),
                                   0))

    report = usage_scrape(kube=exporter_service(agent.port))

    assert report.failed == 0 and report.garbage == 0 and report.samples == 1
    sample = GpuSample.objects.get(workload=workload)
    assert (sample.uuid, sample.mig_instance, sample.util, sample.memory_used_mib) == (
        "GPU-a100", "7", None, 900)
    device = GpuDevice.objects.get(uuid="GPU-a100", mig_instance="7")
    assert device.last_util is None and device.last_workload_id == workload.pk


def test_the_admins_gpu_page_lists_every_pod_on_a_shared_gpu_and_each_mig_instances(
        exporter_service, exporter, tenants, users, gpu_types, login):
    busy = make_workload(tenants["alpha"], users["ann"], name="busy", gpu_count=1)
    idle = make_workload(tenants["alpha"], users["ann"], name="idle", gpu_count=1)
    sliced = make_workload(tenants["alpha"], users["ann"], name="sliced", gpu_count=1)
    pods = (f"{busy.object_name}-0", f"{idle.object_name}-0")
    t4 = exporter(lambda path: (200, _agent_text(process_figures=True, pods=pods).encode(), 0))
    mig = exporter(lambda path: (200, _mig_agent_text(f"{sliced.object_name}-0").encode(), 0))

    usage_scrape(kube=exporter_service(t4.port, mig.port))

    # the device row keeps every pod on it, each with its own figures: last_pod names one
    holders = GpuDevice.objects.get(uuid="GPU-t4").last_holders
    assert [(h["pod"], h["workload"], h["util"], h["memory_used_mib"], h["scope"])
            for h in holders] == [(pods[0], busy.pk, 90.0, 4096, "process"),
                                  (pods[1], idle.pk, 0.0, 1024, "process")]
    page = login("admin").get("/admin/gpus/").content.decode()
    section = page[page.index('id="shared-gpus"'):page.index('id="unhealthy-gpus"')]
    t4_row = section[section.index('data-gpu="gpu-t4-shared-1/0"'):]
    t4_row = t4_row[:t4_row.index("</tr>")]
    assert 'data-holders="2"' in t4_row and "time-sliced, 2 pods" in t4_row
    assert f'data-pod="{pods[0]}"' in t4_row and f'data-pod="{pods[1]}"' in t4_row
    assert "90% (its own)" in t4_row and "0% (its own)" in t4_row
    mig_row = section[section.index('data-gpu="gpu-a100-mig-1/0/mig7"'):]
    mig_row = mig_row[:mig_row.index("</tr>")]
    assert "MIG 1g.10gb" in mig_row and f'data-pod="{sliced.object_name}-0"' in mig_row
    assert "no utilisation (memory only), 900 MiB" in mig_row
