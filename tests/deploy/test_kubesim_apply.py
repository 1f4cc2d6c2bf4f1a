"""The all-in-one overlay, applied with kubectl as an operator would (default validation), comes
up in kubesim: the portal's Deployments become available and the migrate Job completes."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.deploy.manifests import KUBECTL, PORTAL_PROCESSES, rendered_yaml
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.deploy import OVERLAY, STATIC_KINDS
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kubectl]


def kubectl(server, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(KUBECTL), "--kubeconfig", server.kubeconfig, *args],
                            capture_output=True, text=True, timeout=60, input=input)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result


def get_json(server, *args: str) -> dict:
    return json.loads(kubectl(server, "-n", "gpu-portal", "get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def site(kubesim_factory):
    server = kubesim_factory(inventory=DEMO_INVENTORY)
    applied = kubectl(server, "apply", "-f", "-", input=rendered_yaml(OVERLAY))
    return server, applied


def test_every_object_applies_cleanly(site):
    _, applied = site
    lines = applied.stdout.splitlines()
    assert lines and all(line.endswith(" created") for line in lines), applied.stdout
    assert "warning" not in applied.stderr.lower(), applied.stderr
    kinds = {line.split("/")[0] for line in lines}
    assert kinds >= {
        "namespace", "serviceaccount", "clusterrole.rbac.authorization.k8s.io",
        "clusterrolebinding.rbac.authorization.k8s.io", "configmap", "secret", "service",
        "deployment.apps", "statefulset.apps", "job.batch", "poddisruptionbudget.policy",
        "networkpolicy.networking.k8s.io", "ingress.networking.k8s.io",
    }


def test_the_portal_deployments_become_available(site):
    server, _ = site

    def available() -> dict | None:
        items = get_json(server, "deployments")["items"]
        state = {d["metadata"]["name"]: (d["spec"]["replicas"],
                                         d.get("status", {}).get("availableReplicas", 0))
                 for d in items}
        done = all(want == have for want, have in state.values())
        return state if done and len(state) == len(PORTAL_PROCESSES) else None

    state = eventually(available, timeout=60, interval=0.2,
                       message="the portal's Deployments did not become available")
    assert state == {"gpu-portal-web": (1, 1), "gpu-portal-worker": (1, 1),
                     "gpu-portal-launch-worker": (1, 1),
                     "gpu-portal-notifications-worker": (1, 1),
                     "gpu-portal-tracker": (1, 1), "gpu-portal-beat": (1, 1)}
    pods = get_json(server, "pods", "-l", "app.kubernetes.io/name=gpu-portal")["items"]
    web = [p for p in pods if p["metadata"]["labels"]["app.kubernetes.io/component"] == "web"]
    assert web and all(p["spec"]["nodeName"].startswith("cpu-") for p in web)  # not on GPUs


def test_the_migrate_job_completes(site):
    server, _ = site

    def complete() -> bool:
        conditions = get_json(server, "job", "gpu-portal-migrate").get("status", {}).get(
            "conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    assert eventually(complete, timeout=60, interval=0.2,
                      message="the migrate Job did not complete") is True


def test_applying_again_changes_nothing(site):
    server, _ = site
    before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
              for o in get_json(server, STATIC_KINDS)["items"]}
    again = kubectl(server, "apply", "-f", "-", input=rendered_yaml(OVERLAY))
    lines = again.stdout.splitlines()
    # A PodDisruptionBudget's selector has patch strategy "replace": kubectl always sends it
    # and says "configured", on a real cluster too; the server changes nothing.
    budgets = [line for line in lines if line.startswith("poddisruptionbudget.policy/")]
    assert budgets and all(line.endswith(" configured") for line in budgets)
    others = [line for line in lines if line not in budgets]
    assert others and all(line.endswith(" unchanged") for line in others), again.stdout
    after = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
             for o in get_json(server, STATIC_KINDS)["items"]}
    assert after == before
