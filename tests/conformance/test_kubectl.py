"""kubectl against the cluster: Table output, describe, logs, apply (client- and server-side),
api-resources and version."""

from __future__ import annotations

import json
import re

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually
from tests.conformance.score import SSA_DIFFERENCE, known_difference

NODES = ["cpu-1", "cpu-2", "gpu-a100-1", "gpu-a100-2", "gpu-a100-mig-1", "gpu-t4-1",
         "gpu-t4-shared-1", "gpu-v100-1", "gpu-v100-2"]

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
  size: "{size}"
"""


def rows(text: str) -> list[list[str]]:
    """A kubectl table: rows of columns split on runs of 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def running(cluster: Cluster, ns: str, name: str) -> None:
    eventually(lambda: any(c.type == "Ready" and c.status == "True" for c in (
        cluster.core.read_namespaced_pod(name, ns).status.conditions or [])),
        what=f"pod {name} Ready")


def test_get_pods_table(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("web"))
    cluster.core.create_namespaced_pod(ns, m.pod("stuck", m.pod_spec(
        node_selector={"no": "such"})))
    running(cluster, ns, "web")
    table = rows(cluster.kubectl("-n", ns, "get", "pods").stdout)
    assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [r[:4] for r in table[1:]] == [["stuck", "0/1", "Pending", "0"],
                                         ["web", "1/1", "Running", "0"]]


def test_get_pods_wide(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("web", m.pod_spec(nodeName="cpu-2")))
    running(cluster, ns, "web")
    table = rows(cluster.kubectl("-n", ns, "get", "pods", "-o", "wide").stdout)
    assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                        "NOMINATED NODE", "READINESS GATES"]
    pod = cluster.core.read_namespaced_pod("web", ns)
    assert table[1][0] == "web" and table[1][5:] == [pod.status.pod_ip, "cpu-2", "<none>",
                                                      "<none>"]


def test_get_nodes_with_a_label_column(cluster: Cluster):
    table = rows(cluster.kubectl("get", "nodes", "-L", "gputype").stdout)
    assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPUTYPE"]
    by_name = {r[0]: r for r in table[1:]}
    assert sorted(by_name) == NODES
    assert by_name["gpu-a100-1"][1] == "Ready"
    assert by_name["gpu-a100-1"][5] == "a100" and by_name["gpu-t4-1"][5] == "t4"
    assert len(by_name["cpu-1"]) == 5  # no gputype label: the column is empty
    assert re.fullmatch(r"v1\.\d+\.\d+.*", by_name["cpu-1"][4])


def test_get_deployment_table(cluster: Cluster, ns: str):
    cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=2))
    eventually(lambda: cluster.apps.read_namespaced_deployment("web", ns).status
               .available_replicas == 2, what="deployment available")
    table = rows(cluster.kubectl("-n", ns, "get", "deployments").stdout)
    assert table[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1][:4] == ["web", "2/2", "2", "2"]


def test_get_jobs_table(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("train", run_seconds=1))
    eventually(lambda: cluster.batch.read_namespaced_job("train", ns).status.succeeded,
               what="job succeeded", timeout=40)
    table = rows(cluster.kubectl("-n", ns, "get", "jobs").stdout)
    assert table[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table[1][:3] == ["train", "Complete", "1/1"]


def test_get_as_json_is_the_object(cluster: Cluster, ns: str):
    cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps", m.configmap("a", {"k": "v"}))
    obj = json.loads(cluster.kubectl("-n", ns, "get", "configmap", "a", "-o", "json").stdout)
    assert (obj["kind"], obj["apiVersion"], obj["data"]) == ("ConfigMap", "v1", {"k": "v"})
    listed = json.loads(cluster.kubectl("-n", ns, "get", "configmaps", "-l", "nothing",
                                        "-o", "json").stdout)
    assert (listed["kind"], listed["items"]) == ("List", [])


def test_get_missing_object(cluster: Cluster, ns: str):
    out = cluster.kubectl("-n", ns, "get", "pod", "nope", check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'


def test_describe_pending_pod(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("big", m.pod_spec(m.container(gpus=9),
                                                                   tolerate_gpu=True)))
    eventually(lambda: any(c.reason == "Unschedulable" for c in (
        cluster.core.read_namespaced_pod("big", ns).status.conditions or [])),
        what="pod unschedulable")
    out = eventually(lambda: (o := cluster.kubectl("-n", ns, "describe", "pod", "big").stdout)
                     and "FailedScheduling" in o and o, what="event in describe")
    fields = dict(re.findall(r"^(Name|Namespace|Status|Node|QoS Class):\s+(.*)$", out, re.M))
    assert fields == {"Name": "big", "Namespace": ns, "Status": "Pending", "Node": "<none>",
                      "QoS Class": "BestEffort"}
    event = next(line for line in out.splitlines() if "FailedScheduling" in line)
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/9 nodes are "
                     r"available: 9 Insufficient nvidia.com/gpu\.", event), event


def test_logs_of_a_pod_not_yet_scheduled(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("stuck", m.pod_spec(
        node_selector={"no": "such"})))
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/stuck/log")
    assert resp.status == 204 and resp.body == b""
    out = cluster.kubectl("-n", ns, "logs", "stuck")
    assert out.stdout == ""


def test_logs_of_an_unknown_container(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p"))
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/p/log",
                           query={"container": "nope"})
    assert resp.status == 400
    body = resp.json()
    assert (body["reason"], body["message"]) == ("BadRequest", "container nope is not valid "
                                                               "for pod p")


def test_logs_of_a_missing_pod(cluster: Cluster, ns: str):
    out = cluster.kubectl("-n", ns, "logs", "nope", check=False)
    assert out.returncode == 1
    assert '(NotFound): pods "nope" not found' in out.stderr


def test_apply_creates_then_patches(cluster: Cluster, ns: str, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(CONFIGMAP.format(size=1))
    out = cluster.kubectl("-n", ns, "apply", "-f", str(manifest))
    assert out.stdout.strip() == "configmap/settings created"
    assert "warning" not in out.stderr.lower()
    out = cluster.kubectl("-n", ns, "apply", "-f", str(manifest))
    assert out.stdout.strip() == "configmap/settings unchanged"
    manifest.write_text(CONFIGMAP.format(size=2))
    out = cluster.kubectl("-n", ns, "apply", "-f", str(manifest))
    assert out.stdout.strip() == "configmap/settings configured"
    cm = cluster.core.read_namespaced_config_map("settings", ns)
    assert cm.data == {"mode": "fast", "size": "2"}
    last = json.loads(cm.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"mode": "fast", "size": "2"}


@SSA_DIFFERENCE
def test_server_side_apply_with_kubectl(cluster: Cluster, ns: str, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(CONFIGMAP.format(size=1))
    out = cluster.kubectl("-n", ns, "apply", "--server-side", "-f", str(manifest))
    assert out.stdout.strip() == "configmap/settings serverside-applied"
    cm = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/settings").json()
    managers = {(f["manager"], f["operation"]) for f in cm["metadata"]["managedFields"]}
    assert managers == {("kubectl", "Apply")}
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (
        cm["metadata"].get("annotations") or {})


def test_api_resources(cluster: Cluster):
    out = cluster.kubectl("api-resources", "-o", "wide").stdout
    table = rows(out)
    assert table[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS",
                        "CATEGORIES"]
    # a row without short names has an empty column: find rows by name and version
    by_name = {(r[0], next(c for c in r if re.fullmatch(r"(\w+\.)*\w*/?v\d\w*", c))): r
               for r in table[1:]}
    assert by_name[("pods", "v1")][:5] == ["pods", "po", "v1", "true", "Pod"]
    assert by_name[("deployments", "apps/v1")][:5] == ["deployments", "deploy", "apps/v1",
                                                       "true", "Deployment"]
    assert by_name[("nodes", "v1")][:5] == ["nodes", "no", "v1", "false", "Node"]
    assert by_name[("jobs", "batch/v1")][:4] == ["jobs", "batch/v1", "true", "Job"]
    assert by_name[("pods", "v1")][5] == "create,delete,deletecollection,get,list,patch,update,watch"
    assert by_name[("pods", "v1")][6] == "all"


@known_difference("kubesim names itself in /version's gitVersion (v1.37.0-kubesim), so "
                  "that `kubectl version` tells the simulator from a real API server")
def test_version(cluster: Cluster):
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    server = out["serverVersion"]
    assert (server["major"], server["minor"]) == ("1", "37")
    assert re.fullmatch(r"v1\.37\.\d+", server["gitVersion"]), server["gitVersion"]
