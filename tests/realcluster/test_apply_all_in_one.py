"""`kubectl apply -k` of the all-in-one overlay on the real control plane, as an operator would
(default client-side validation against the real /openapi, an admin kubeconfig): every object is
admitted — the gpu-portal namespace enforces Pod Security "restricted", so the real PodSecurity
admission checks every pod template — the portal's Deployments become available, the migrate
Job completes, and applying again changes nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.deploy.manifests import KUBECTL, PORTAL_PROCESSES, rendered_yaml
from tests.support.deploy import OVERLAY, STATIC_KINDS
from tests.support.waiting import eventually

pytestmark = [pytest.mark.realcluster, pytest.mark.kubectl, pytest.mark.timeout(240)]


def kubectl(cp, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(KUBECTL), "--kubeconfig", str(cp.admin_kubeconfig), *args],
                            capture_output=True, text=True, timeout=120, input=input)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result


def get_json(cp, *args: str) -> dict:
    return json.loads(kubectl(cp, "-n", "gpu-portal", "get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def site(real_cluster):
    return real_cluster, kubectl(real_cluster, "apply", "-f", "-", input=rendered_yaml(OVERLAY))


def test_every_object_is_admitted_without_warnings(site):
    cp, applied = site
    lines = applied.stdout.splitlines()
    # the control plane already made the portal's ServiceAccount and ClusterRole from the same
    # deploy/base/portal-rbac.yaml: those are "configured" (kubectl's annotation added)
    assert lines and all(line.endswith((" created", " configured", " unchanged"))
                         for line in lines), applied.stdout
    # no "Warning: would violate PodSecurity …" nor deprecated APIs from the real API server
    assert "warning" not in applied.stderr.lower(), applied.stderr
    kinds = {line.split("/")[0] for line in lines}
    # every namespaced object went to gpu-portal, none to the kubeconfig's `default`
    strays = json.loads(kubectl(cp, "get", "all,networkpolicies,pdb", "-n", "default", "-o",
                                "json").stdout)["items"]
    assert [o for o in strays if o["metadata"]["name"].startswith("gpu-portal")] == []
    assert kinds >= {"deployment.apps", "statefulset.apps", "job.batch", "networkpolicy.networking.k8s.io",
                     "poddisruptionbudget.policy", "ingress.networking.k8s.io", "service"}


def test_the_namespace_enforces_restricted_and_the_pods_pass(site):
    cp, _ = site
    namespace = json.loads(kubectl(cp, "get", "namespace", "gpu-portal", "-o", "json").stdout)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # a pod that breaks "restricted" is refused by the real admission in that namespace
    refused = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(cp.admin_kubeconfig), "-n", "gpu-portal", "run",
         "root-shell", "--image=busybox:1.36", "--restart=Never", "--", "sh"],
        capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr


def test_the_portal_deployments_become_available_and_migrate_completes(site):
    cp, _ = site

    def available() -> dict | None:
        items = get_json(cp, "deployments")["items"]
        state = {d["metadata"]["name"]: (d["spec"]["replicas"],
                                         d.get("status", {}).get("availableReplicas", 0))
                 for d in items}
        done = all(want == have for want, have in state.values())
        return state if done and len(state) == len(PORTAL_PROCESSES) else None

    state = eventually(available, timeout=120, interval=0.2,
                       message="the portal's Deployments did not become available")
    assert state == {"gpu-portal-web": (1, 1), "gpu-portal-worker": (1, 1),
                     "gpu-portal-launch-worker": (1, 1),
                     "gpu-portal-notifications-worker": (1, 1),
                     "gpu-portal-tracker": (1, 1), "gpu-portal-beat": (1, 1)}
    pods = get_json(cp, "pods", "-l", "app.kubernetes.io/name=gpu-portal")["items"]
    web = [p for p in pods if p["metadata"]["labels"]["app.kubernetes.io/component"] == "web"]
    # the real scheduler kept the portal off the tainted GPU nodes
    assert web and all(p["spec"]["nodeName"].startswith("cpu-") for p in web)

    def complete() -> bool:
        conditions = get_json(cp, "job", "gpu-portal-migrate").get("status", {}).get(
            "conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    eventually(complete, timeout=120, interval=0.2, message="the migrate Job did not complete")


def test_applying_again_changes_nothing(site):
    cp, _ = site
    before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
              for o in get_json(cp, STATIC_KINDS)["items"]}
    again = kubectl(cp, "apply", "-f", "-", input=rendered_yaml(OVERLAY))
    lines = again.stdout.splitlines()
    changed = [line for line in lines if not line.endswith(" unchanged")]
    # kubectl sends a patch, and says "configured", where the live object differs from its copy
    # in form only: a PodDisruptionBudget's selector (patch strategy "replace"), the Secret (its
    # long base64 values folded in the annotation), a StatefulSet's volumeClaimTemplates (a list
    # without a merge key, which the server fills with kind and status); the real server changes
    # nothing (below)
    assert {line.split()[0] for line in changed} <= {
        "poddisruptionbudget.policy/gpu-portal-web", "poddisruptionbudget.policy/gpu-portal-worker",
        "poddisruptionbudget.policy/gpu-portal-notifications-worker",
        "poddisruptionbudget.policy/gpu-portal-launch-worker",
        "secret/gpu-portal-secrets", "statefulset.apps/gpu-portal-postgres",
        "statefulset.apps/gpu-portal-redis"}, again.stdout
    after = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
             for o in get_json(cp, STATIC_KINDS)["items"]}
    assert after == before
