"""Every kustomization renders, every object is valid for a current Kubernetes, and the rendered
portal keeps its promises: non-root pods, the singletons stay single, secrets by name only."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    KUSTOMIZATIONS,
    OVERLAYS,
    PORTAL_PROCESSES,
    REPO,
    SINGLETONS,
    container_environment,
    deployment,
    dockerfile_user,
    find,
    pod_specs,
    render,
    settings_config_map,
)

# Kinds from CRDs, which the Kubernetes schema does not know; checked by their own tests.
CRD_KINDS = {("metallb.io/v1beta1", "IPAddressPool"), ("metallb.io/v1beta1", "L2Advertisement")}
K8S_VERSION = kubernetes_validate.utils.latest_version()
SETTINGS_DOC = (REPO / "docs" / "settings.md").read_text()
GUIDE = (REPO / "docs" / "operator-guide.md").read_text()


def test_validated_against_a_current_kubernetes():
    major, minor = (int(p) for p in K8S_VERSION.split(".")[:2])
    assert (major, minor) >= (1, 33), K8S_VERSION


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_renders_and_every_object_is_valid(path):
    objects = render(path)
    assert objects
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("path", [p for p in KUSTOMIZATIONS if p.startswith("deploy/")])
def test_no_secret_values_in_deploy(path):
    assert [o for o in render(path) if o["kind"] == "Secret"] == []


def _secret_names(objects) -> set[str]:
    names = set()
    for _, spec in pod_specs(objects):
        for container in spec.get("initContainers", []) + spec["containers"]:
            names |= {s["secretRef"]["name"] for s in container.get("envFrom", [])
                      if "secretRef" in s}
            names |= {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", [])
                      if "secretKeyRef" in e.get("valueFrom", {})}
        names |= {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for obj in objects:
        if obj["kind"] == "Ingress":
            names |= {t["secretName"] for t in obj["spec"].get("tls", [])}
    return names


@pytest.mark.parametrize("path", [*OVERLAYS, "deploy/keystone-auth"])
def test_the_guide_says_how_to_create_every_secret_the_manifests_reference(path):
    names = _secret_names(render(path))
    assert names
    for name in names:
        assert re.search(rf"create secret \w+ {re.escape(name)}\b", GUIDE), name


@pytest.mark.parametrize("path", OVERLAYS)
def test_every_setting_the_manifests_set_is_a_documented_setting(path):
    objects = render(path)
    names = set(settings_config_map(objects))
    for _, spec in pod_specs(objects):
        if spec["containers"][0]["image"].split(":")[0].endswith("gpu-portal/portal"):
            names |= {e["name"] for c in spec["containers"] for e in c.get("env", [])}
    names -= {"POD_NAME", "POD_IP", "WEB_CONCURRENCY"}  # the downward API's; gunicorn's
    for name in names:
        assert f"`{name}`" in SETTINGS_DOC, f"{name} is not in docs/settings.md"


@pytest.mark.parametrize("path", OVERLAYS)
def test_portal_pods_run_as_the_images_non_root_user_locked_down(path):
    uid, gid = dockerfile_user(REPO / "Dockerfile")
    assert uid != 0 and gid != 0
    objects = render(path)
    portal = [(n, s) for n, s in pod_specs(objects) if n.startswith("gpu-portal-")
              and n not in ("gpu-portal-postgres", "gpu-portal-redis")]
    assert sorted(n for n, _ in portal) == sorted(
        [f"gpu-portal-{p}" for p in PORTAL_PROCESSES] + ["gpu-portal-migrate"])
    for name, spec in portal:
        security = spec["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"]) == (uid, gid), name
        assert security["runAsNonRoot"] is True
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec.get("initContainers", []) + spec["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, name
            assert set(container["resources"]["limits"]) == {"cpu", "memory"}


@pytest.mark.parametrize("path", [*OVERLAYS, "tests/deploy/overlays/production-gpuagent"])
def test_namespace_pod_security_admits_what_runs_in_it(path):
    objects = render(path)
    namespace = find(objects, "Namespace", "gpu-portal")["metadata"]["labels"]
    privileged = any(o["kind"] == "DaemonSet" for o in objects)  # gpuagent: hostPath, root
    expected = "privileged" if privileged else "restricted"
    assert namespace["pod-security.kubernetes.io/enforce"] == expected


@pytest.mark.parametrize("path", OVERLAYS)
def test_web_probes_liveness_healthz_readiness_readyz(path):
    objects = render(path)
    (container,) = deployment(objects, "web")["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # readiness: only what a pod cannot serve without (Keystone or cluster outages leave
    # the pods in the Service, serving with a banner)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz?checks=database,redis"
    # the kubelet's probes (and Prometheus) ask with Host: <pod IP>:<port>; the pod's own IP
    # must be an allowed host, beside the site's name
    env = container_environment(objects, container, {"status.podIP": "10.42.0.7"})
    hosts = env["PORTAL_ALLOWED_HOSTS"].split(",")
    assert "10.42.0.7" in hosts
    assert find(objects, "Ingress", "gpu-portal")["spec"]["rules"][0]["host"] in hosts
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "httpHeaders" not in container[probe]["httpGet"]


@pytest.mark.parametrize("path", OVERLAYS)
def test_tracker_and_beat_stay_single(path):
    objects = render(path)
    for process in SINGLETONS:
        spec = deployment(objects, process)["spec"]
        assert spec["replicas"] == 1
        assert spec["strategy"] == {"type": "Recreate"}  # never two during a rollout
    scaled = {o["spec"]["scaleTargetRef"]["name"] for o in objects
              if o["kind"] == "HorizontalPodAutoscaler"}
    assert not scaled & {f"gpu-portal-{p}" for p in SINGLETONS}
    budgets = {tuple(sorted(o["spec"]["selector"]["matchLabels"].items())) for o in objects
               if o["kind"] == "PodDisruptionBudget"}
    for process in SINGLETONS:  # a budget on a single pod would block every drain
        labels = deployment(objects, process)["spec"]["selector"]["matchLabels"]
        assert tuple(sorted(labels.items())) not in budgets


def test_production_runs_several_web_and_worker_replicas_and_scales_workers():
    objects = render("deploy/overlays/production")
    assert deployment(objects, "web")["spec"]["replicas"] >= 2
    hpa = find(objects, "HorizontalPodAutoscaler", "gpu-portal-worker")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "gpu-portal-worker"}
    assert 2 <= hpa["minReplicas"] == deployment(objects, "worker")["spec"]["replicas"]
    assert hpa["maxReplicas"] > hpa["minReplicas"]
    assert not [o for o in objects if o["kind"] == "StatefulSet"]  # external database, Redis
    assert "DATABASE_URL" not in settings_config_map(objects)  # it holds a password


def test_all_in_one_brings_its_database_and_redis_and_points_the_portal_at_them():
    objects = render("deploy/overlays/all-in-one")
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    postgres = find(objects, "StatefulSet", "gpu-portal-postgres")
    redis = find(objects, "StatefulSet", "gpu-portal-redis")
    for statefulset in (postgres, redis):
        assert statefulset["spec"]["serviceName"] in services
        assert statefulset["spec"]["volumeClaimTemplates"]
    assert settings_config_map(objects)["REDIS_URL"] == "redis://gpu-portal-redis:6379/0"
    # the database password and the portal's DATABASE_URL come from the same Secret
    env = {e["name"]: e for e in postgres["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "gpu-portal-secrets"
    assert "gpu-portal-postgres:5432/portal" in GUIDE


@pytest.mark.parametrize("path", OVERLAYS)
def test_namespace_denies_ingress_except_the_web_port(path):
    objects = render(path)
    deny = find(objects, "NetworkPolicy", "gpu-portal-default-deny-ingress")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    web = find(objects, "NetworkPolicy", "gpu-portal-web")["spec"]
    (container,) = deployment(objects, "web")["spec"]["template"]["spec"]["containers"]
    assert web["ingress"] == [{"ports": [{"protocol": "TCP", "port": container["ports"][0]["name"]}]}]
    service = find(objects, "Service", "gpu-portal-web")["spec"]
    ingress = find(objects, "Ingress", "gpu-portal")["spec"]
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "gpu-portal-web", "port": {"name": service["ports"][0]["name"]}}
    assert ingress["rules"][0]["host"] in settings_config_map(objects)["PORTAL_ALLOWED_HOSTS"].split(",")


@pytest.mark.parametrize("path", OVERLAYS)
def test_the_portal_runs_with_its_least_privilege_service_account(path):
    objects = render(path)
    binding = find(objects, "ClusterRoleBinding", "gpu-portal")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-portal",
                                    "namespace": "gpu-portal"}]
    for process in PORTAL_PROCESSES:
        spec = deployment(objects, process)["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "gpu-portal"
    migrate = find(objects, "Job", "gpu-portal-migrate")["spec"]["template"]["spec"]
    assert migrate["automountServiceAccountToken"] is False  # the database only


def test_metallb_pool_is_the_one_the_portal_names():
    objects = render("deploy/metallb")
    pool = find(objects, "IPAddressPool", "gpu-portal-workloads")
    advert = find(objects, "L2Advertisement", "gpu-portal-workloads")
    assert pool["metadata"]["namespace"] == advert["metadata"]["namespace"] == "metallb-system"
    assert pool["spec"]["autoAssign"] is False and pool["spec"]["addresses"]
    assert advert["spec"]["ipAddressPools"] == [pool["metadata"]["name"]]
    for path in OVERLAYS:
        assert settings_config_map(render(path))["PORTAL_LB_ADDRESS_POOL"] == "gpu-portal-workloads"


def test_dockerignore_keeps_what_the_dockerfiles_copy():
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    for dockerfile in (REPO / "Dockerfile", REPO / "gpuagent" / "Dockerfile"):
        for source in re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", dockerfile.read_text(),
                                 flags=re.MULTILINE):
            for item in source.split():
                path = item.rstrip("/")
                assert (REPO / path).exists(), f"{dockerfile.name}: {path} missing"
                top = Path(path).parts[0]
                kept = any(path.startswith(rule[1:]) for rule in ignored if rule.startswith("!"))
                assert top not in ignored or kept, f"{path} is dockerignored"


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "IngressClass",
                  "PriorityClass", "RuntimeClass", "StorageClass"}


@pytest.mark.parametrize("path", [*OVERLAYS, "tests/deploy/overlays/production-gpuagent"])
def test_every_namespaced_object_lands_in_the_portals_namespace(path):
    """kubectl puts an object without a namespace in the kubeconfig's (`default`): the
    all-in-one's PostgreSQL and Redis did so until the real control plane showed it."""
    stray = [f"{o['kind']}/{o['metadata']['name']}" for o in render(path)
             if o["kind"] not in CLUSTER_SCOPED and o["metadata"].get("namespace") != "gpu-portal"]
    assert not stray
