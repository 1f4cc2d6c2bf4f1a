"""GPU telemetry (/metrics in dcgm-exporter's format), traces, fault injection, and pod logs."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.kubesim.cluster_helpers import (
    container,
    pod,
    pod_spec,
    status_body,
    write_inventory,
)
from tests.support.waiting import eventually

DCGM = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def http(server, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scrape(server) -> dict[str, list]:
    """metric name -> samples, parsed with Prometheus' own parser."""
    status, text = http(server, "GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    return {name: families[name].samples for name in families}


def samples_for(metrics: dict[str, list], name: str, **labels: str) -> list:
    return [s for s in metrics[name] if all(s.labels.get(k) == v for k, v in labels.items())]


@pytest.fixture(scope="module")
def small(kubesim_factory, tmp_path_factory):
    """One node with two T4s: faults here cannot disturb other tests."""
    inventory = write_inventory(tmp_path_factory.mktemp("gpu") / "inv.yaml", {"nodePools": [{
        "name": "t4", "count": 1, "namePrefix": "t4-", "labels": {"gputype": "t4"},
        "gpu": {"model": "T4", "count": 2}}]})
    return kubesim_factory(inventory=inventory, extra_args=["--metrics-interval", "0.05"])


@pytest.fixture(scope="module")
def core(small):
    with small.api_client() as api:
        yield client.CoreV1Api(api)


def run_pod(core, name: str, *, annotations: dict | None = None, gpus: int = 1,
            image: str = "busybox:1.36", env: dict | None = None, ns: str = "default") -> None:
    core.create_namespaced_pod(ns, pod(name, pod_spec(container(gpus=gpus, image=image, env=env)),
                                       annotations=annotations))
    eventually(lambda: (p := core.read_namespaced_pod(name, ns)).status.phase == "Running"
               and p.status.container_statuses[0].ready,
               message=f"waiting for {name} running and ready", ignoring=(ApiException,))


def test_metrics_format_and_labels(small, core):
    metrics = scrape(small)
    for name in DCGM:
        assert name in metrics and len(metrics[name]) == 2, name
    _, text = http(small, "GET", "/metrics")
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text.decode()
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text.decode()
    free = metrics["DCGM_FI_DEV_GPU_UTIL"]
    assert {s.labels["gpu"] for s in free} == {"0", "1"}
    for s in free:
        assert s.value == 0 and "pod" not in s.labels
        assert UUID.match(s.labels["UUID"])
        assert s.labels["device"] == f"nvidia{s.labels['gpu']}"
        assert s.labels["modelName"] == "Tesla T4" and s.labels["Hostname"] == "t4-1"
        assert re.match(r"^00000000:[0-9A-F]{2}:00\.0$", s.labels["pci_bus_id"])
        assert s.labels["DCGM_FI_DRIVER_VERSION"] == "535.154.05"

    run_pod(core, "busy")
    metrics = scrape(small)
    held = samples_for(metrics, "DCGM_FI_DEV_GPU_UTIL", pod="busy")
    assert len(held) == 1
    assert held[0].labels["namespace"] == "default" and held[0].labels["container"] == "app"
    assert held[0].labels["gpu"] == "0"  # lowest free index first
    gpu = held[0].labels["gpu"]
    used = samples_for(metrics, "DCGM_FI_DEV_FB_USED", gpu=gpu)[0].value
    free_mib = samples_for(metrics, "DCGM_FI_DEV_FB_FREE", gpu=gpu)[0].value
    reserved = samples_for(metrics, "DCGM_FI_DEV_FB_RESERVED", gpu=gpu)[0].value
    assert used > 0 and reserved > 0 and used + free_mib + reserved == 15360
    utils = []
    for _ in range(4):
        utils.append(samples_for(scrape(small), "DCGM_FI_DEV_GPU_UTIL", pod="busy")[0].value)
        time.sleep(0.06)
    assert max(utils) > 25  # a busy trace works the GPU
    energy = [samples_for(scrape(small), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=gpu)[0].value
              for _ in range(2) if time.sleep(0.05) is None]
    assert energy[1] > energy[0]  # a counter
    core.delete_namespaced_pod("busy", "default", grace_period_seconds=0)
    eventually(lambda: not samples_for(scrape(small), "DCGM_FI_DEV_GPU_UTIL", pod="busy"),
               message="waiting for GPU released", ignoring=(ApiException,))


def test_idle_trace_stays_below_two_percent(small, core):
    run_pod(core, "idle", annotations={"kubesim.io/gpu-trace": "idle"})
    values = []
    for _ in range(6):
        values += [s.value for s in samples_for(scrape(small), "DCGM_FI_DEV_GPU_UTIL", pod="idle")]
        time.sleep(0.06)
    assert len(values) == 6 and all(0 <= v < 2 for v in values)
    core.delete_namespaced_pod("idle", "default", grace_period_seconds=0)


def test_the_trace_can_be_asked_for_with_an_env_var(small, core):
    run_pod(core, "idle-env", env={"KUBESIM_GPU_TRACE": "idle"})
    values = []
    for _ in range(6):
        values += [s.value for s in samples_for(scrape(small), "DCGM_FI_DEV_GPU_UTIL",
                                                pod="idle-env")]
        time.sleep(0.06)
    assert len(values) == 6 and all(0 <= v < 2 for v in values)
    core.delete_namespaced_pod("idle-env", "default", grace_period_seconds=0)


def test_xid_ecc_and_lost_gpu_faults(small, core):
    status, body = http(small, "POST", "/kubesim/v1/gpus/t4-1/1/xid", {"xid": 79})
    assert status == 200 and json.loads(body)["items"][0]["faults"]["xid"] == 79
    try:
        metrics = scrape(small)
        assert samples_for(metrics, "DCGM_FI_DEV_XID_ERRORS", gpu="1")[0].value == 79
        assert samples_for(metrics, "DCGM_FI_DEV_XID_ERRORS", gpu="0")[0].value == 0
        # The device plugin stops advertising an unhealthy GPU.
        eventually(lambda: core.read_node("t4-1").status.allocatable["nvidia.com/gpu"] == "1",
                   message="waiting for allocatable drops", ignoring=(ApiException,))
        assert core.read_node("t4-1").status.capacity["nvidia.com/gpu"] == "2"

        http(small, "POST", "/kubesim/v1/gpus/t4-1/0/ecc", {"dbe": 2})
        assert samples_for(scrape(small), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu="0")[0].value == 2

        status, _ = http(small, "POST", "/kubesim/v1/gpus/t4-1/0/lost")
        assert status == 200
        metrics = scrape(small)
        assert [s.labels["gpu"] for s in metrics["DCGM_FI_DEV_GPU_UTIL"]] == ["1"]
        listing = json.loads(http(small, "GET", "/kubesim/v1/gpus")[1])["items"]
        assert [(g["index"], g["healthy"]) for g in listing] == [(0, False), (1, False)]
        # No healthy GPU left: a GPU pod cannot be scheduled.
        core.create_namespaced_pod("default", pod("blocked", pod_spec(container(gpus=1))))
        eventually(lambda: (c := core.read_namespaced_pod("blocked", "default").status.conditions)
                   and c[0].reason == "Unschedulable", message="waiting for unschedulable",
                   ignoring=(ApiException,))
    finally:
        for index in (0, 1):
            status, _ = http(small, "DELETE", f"/kubesim/v1/gpus/t4-1/{index}/fault")
            assert status == 200
    eventually(lambda: core.read_node("t4-1").status.allocatable["nvidia.com/gpu"] == "2",
               message="waiting for allocatable restored", ignoring=(ApiException,))
    eventually(lambda: core.read_namespaced_pod("blocked", "default").spec.node_name,
               message="waiting for scheduled once the GPUs are healthy", ignoring=(ApiException,))
    assert len(scrape(small)["DCGM_FI_DEV_GPU_UTIL"]) == 2
    core.delete_namespaced_pod("blocked", "default", grace_period_seconds=0)
    assert http(small, "POST", "/kubesim/v1/gpus/t4-1/9/xid", {"xid": 1})[0] == 404
    assert http(small, "POST", "/kubesim/v1/gpus/nope/0/xid", {"xid": 1})[0] == 404


def test_jupyter_logs_show_the_token(core, small):
    run_pod(core, "nb", image="quay.io/jupyter/scipy-notebook:2024-05-27", gpus=0,
            env={"JUPYTER_TOKEN": "s3cr3t-token"})
    text = core.read_namespaced_pod_log("nb", "default")
    assert "Jupyter Server" in text
    assert "http://127.0.0.1:8888/lab?token=s3cr3t-token" in text
    tail = core.read_namespaced_pod_log("nb", "default", tail_lines=2)
    assert tail.splitlines() == text.splitlines()[-2:]
    stamped = core.read_namespaced_pod_log("nb", "default", timestamps=True, tail_lines=1)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", stamped)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("nb", "default", container="nope")
    assert status_body(err.value)["message"] == "container nope is not valid for pod nb"
    core.delete_namespaced_pod("nb", "default", grace_period_seconds=0)


def test_follow_streams_a_batch_pods_log_until_it_exits(core):
    core.create_namespaced_pod("default", pod("count", pod_spec(
        container(env={"KUBESIM_RUN_SECONDS": "3"}), restart="Never")))
    eventually(lambda: core.read_namespaced_pod("count", "default").status.phase == "Running",
               message="waiting for running", ignoring=(ApiException,))
    start = time.monotonic()
    resp = core.read_namespaced_pod_log("count", "default", follow=True, _preload_content=False)
    lines = [line.decode() for line in resp.stream() if line]
    text = "".join(lines)
    assert time.monotonic() - start > 1  # it waited for the lines as they were printed
    assert "step 3/3" in text and text.rstrip().endswith("Done.")
    assert core.read_namespaced_pod("count", "default").status.phase == "Succeeded"
    core.delete_namespaced_pod("count", "default")
