"""The portal's own identity on the real API server: the ServiceAccount gpu-portal/gpu-portal
bound to deploy/base/portal-rbac.yaml's ClusterRole (never cluster-admin), as the API server
itself reports it."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.deploy.manifests import KUBECTL

pytestmark = [pytest.mark.realcluster]


def kubectl(kubeconfig, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)


def test_the_portal_is_its_service_account(real_cluster):
    whoami = json.loads(kubectl(real_cluster.portal_kubeconfig, "auth", "whoami",
                                "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == \
        "system:serviceaccount:gpu-portal:gpu-portal"
    assert "system:masters" not in whoami["status"]["userInfo"]["groups"]


def test_can_i_list_has_no_wildcards(real_cluster):
    """`kubectl auth can-i --list` as the portal: no `*` verb or resource anywhere (the
    non-resource URLs of system:discovery, such as /api/*, are paths, not grants)."""
    for namespace in ("default", "kube-system", "gpu-portal"):
        result = kubectl(real_cluster.portal_kubeconfig, "auth", "can-i", "--list",
                         "-n", namespace)
        assert result.returncode == 0, result.stderr
        rows = [line.split() for line in result.stdout.splitlines()[1:] if line.strip()]
        resources = [row[0] for row in rows if not row[0].startswith(("/", "[/"))]
        verbs = " ".join(line.split("[", 1)[-1] for line in result.stdout.splitlines()[1:])
        assert resources and "*" not in " ".join(resources), result.stdout
        assert "*" not in verbs.replace("/*", ""), result.stdout
        assert "pods" in " ".join(resources)


@pytest.mark.parametrize(("verb", "resource", "allowed"), [
    ("create", "jobs.batch", "yes"), ("create", "deployments.apps", "yes"),
    ("delete", "namespaces", "yes"), ("patch", "nodes", "yes"),
    ("create", "pods", "no"), ("delete", "pods", "no"), ("get", "secrets", "yes"),
    ("create", "clusterroles", "no"), ("create", "clusterrolebindings", "no"),
    ("escalate", "clusterroles", "no"), ("impersonate", "users", "no"),
    ("bind", "clusterroles/cluster-admin", "no"), ("bind", "clusterroles/edit", "no"),
    ("bind", "clusterroles/gpu-portal-tenant-member", "yes"),
])
def test_what_the_real_authorizer_allows(real_cluster, verb, resource, allowed):
    result = kubectl(real_cluster.portal_kubeconfig, "auth", "can-i", verb, resource,
                     "-n", "some-tenant")
    assert result.stdout.strip() == allowed, (verb, resource, result.stdout, result.stderr)
