"""Provisioning a tenant's namespace in kubesim, over HTTP with the official client."""

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from audit.models import AuditRecord
from kube.client import Kube, KubeUnavailable
from tenants.manifests import tenant_objects
from tenants.models import Tenant
from tenants.provisioning import namespace_spec, tenant_namespace_delete, tenant_reconcile
from tenants.services import quota_update, tenant_mark_deleting
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db


def core(cluster):
    return k8s.CoreV1Api(cluster.api_client())


def test_a_new_tenant_gets_the_full_set_of_objects(tenant, cluster):
    result = tenant_reconcile(tenant_id=tenant.pk)
    assert len(result.created) == 12 and not result.repaired
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED
    api = cluster.api_client()
    ns = tenant.namespace
    namespace = k8s.CoreV1Api(api).read_namespace(ns)
    assert namespace.metadata.labels["gpu-portal.io/project-id"] == tenant.keystone_project_id
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    quota = k8s.CoreV1Api(api).read_namespaced_resource_quota("gpu-portal-quota", ns)
    assert quota.spec.hard == {
        # the quota's 32 cores and 256 GiB, plus room for 10 workloads' proxies (100m, 64Mi)
        "requests.nvidia.com/gpu": "2", "requests.cpu": "33", "limits.cpu": "33",
        "requests.memory": "262784Mi", "limits.memory": "262784Mi", "pods": "20",
        "services.loadbalancers": "10", "requests.storage": "500Gi",
        "persistentvolumeclaims": "10",
    }
    limits = k8s.CoreV1Api(api).read_namespaced_limit_range("gpu-portal-defaults", ns)
    assert limits.spec.limits[0].default == {"cpu": "1", "memory": "4Gi"}
    policies = k8s.NetworkingV1Api(api).list_namespaced_network_policy(ns)
    assert sorted(p.metadata.name for p in policies.items) == [
        "gpu-portal-egress", "gpu-portal-exposed-services", "gpu-portal-isolated-groups",
        "gpu-portal-same-namespace"]
    sa = k8s.CoreV1Api(api).read_namespaced_service_account("workload", ns)
    assert sa.automount_service_account_token is False
    bindings = k8s.RbacAuthorizationV1Api(api).list_namespaced_role_binding(ns)
    by_name = {b.metadata.name: (b.role_ref.name, b.subjects[0].name) for b in bindings.items}
    assert by_name["gpu-portal-keystone-member"] == ("gpu-portal-tenant-member", "gpu-portal:member")
    assert by_name["gpu-portal-project-members"] == ("gpu-portal-tenant-reader",
                                                     tenant.keystone_project_id)
    record = AuditRecord.objects.get(tenant=tenant, action="namespace.reconcile")
    assert len(record.after["created"]) == 12 and record.actor_name == "system"


def test_the_second_reconcile_writes_nothing(tenant, cluster):
    tenant_reconcile(tenant_id=tenant.pk)
    before = {o.metadata.name: o.metadata.resource_version for o in
              k8s.CoreV1Api(cluster.api_client()).list_namespaced_resource_quota(tenant.namespace).items}
    kube = Kube()
    result = tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert kube.writes == 0
    assert len(result.unchanged) == 12 and not result.changed
    after = {o.metadata.name: o.metadata.resource_version for o in
             k8s.CoreV1Api(cluster.api_client()).list_namespaced_resource_quota(tenant.namespace).items}
    assert before == after
    assert AuditRecord.objects.filter(tenant=tenant, action="namespace.reconcile").count() == 1


def test_drift_made_by_hand_is_put_back(tenant, cluster):
    tenant_reconcile(tenant_id=tenant.pk)
    api = cluster.api_client()
    ns = tenant.namespace
    core_api = k8s.CoreV1Api(api)
    core_api.patch_namespaced_resource_quota("gpu-portal-quota", ns,
                                             {"spec": {"hard": {"requests.nvidia.com/gpu": "99",
                                                                "count/secrets": "5"}}})
    k8s.NetworkingV1Api(api).delete_namespaced_network_policy("gpu-portal-egress", ns)
    core_api.patch_namespaced_service_account("workload", ns,
                                              {"automountServiceAccountToken": True})
    core_api.patch_namespace(ns, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})

    kube = Kube()
    result = tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert sorted(result.created) == [f"NetworkPolicy {ns}/gpu-portal-egress"]
    assert sorted(result.repaired) == sorted([
        f"Namespace {ns}", f"ResourceQuota {ns}/gpu-portal-quota", f"ServiceAccount {ns}/workload"])
    assert kube.writes == 4
    hard = core_api.read_namespaced_resource_quota("gpu-portal-quota", ns).spec.hard
    assert hard["requests.nvidia.com/gpu"] == "2" and "count/secrets" not in hard
    assert core_api.read_namespaced_service_account("workload", ns).automount_service_account_token is False
    assert core_api.read_namespace(ns).metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DRIFTED and "ResourceQuota" in tenant.state_reason
    # and the run after that is clean again
    assert not tenant_reconcile(tenant_id=tenant.pk).changed
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED


def test_a_namespace_provisioned_before_the_proxies_gets_the_new_isolation(tenant, cluster):
    """A namespace made while the namespace-wide policy still selected every pod (before
    the proxies came) has it rewritten: from then on its exposed pods are reached only on the proxy's
    port, by its own pods too."""
    tenant_reconcile(tenant_id=tenant.pk)
    ns = tenant.namespace
    networking = k8s.NetworkingV1Api(cluster.api_client())
    old = networking.read_namespaced_network_policy("gpu-portal-same-namespace", ns)
    old.spec.pod_selector = k8s.V1LabelSelector()  # every pod, as the old policy said
    networking.replace_namespaced_network_policy("gpu-portal-same-namespace", ns, old)

    kube = Kube()
    result = tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert result.repaired == [f"NetworkPolicy {ns}/gpu-portal-same-namespace"]
    assert kube.writes == 1
    live = kube.get("NetworkPolicy", "gpu-portal-same-namespace", ns)
    desired = next(o for o in tenant_objects(namespace_spec(tenant, tenant.quota))
                   if o["metadata"]["name"] == "gpu-portal-same-namespace")
    assert live["spec"] == desired["spec"]
    assert live["spec"]["podSelector"] == {"matchExpressions": [
        {"key": "gpu-portal.io/exposed", "operator": "NotIn", "values": ["true"]},
        {"key": "gpu-portal.io/isolated", "operator": "NotIn", "values": ["true"]}]}
    assert not tenant_reconcile(tenant_id=tenant.pk).changed


def test_a_namespace_provisioned_before_the_egress_rules_loses_its_open_egress(tenant, cluster,
                                                                              settings):
    """Before egress was limited a namespace's pods reached everything but the metadata address (the
    policy gpu-portal-deny-metadata). Policies add up, so that one is deleted, and the pods
    reach only what gpu-portal-egress names: the site's settings, rewritten when they change."""
    tenant_reconcile(tenant_id=tenant.pk)
    ns = tenant.namespace
    networking = k8s.NetworkingV1Api(cluster.api_client())
    networking.create_namespaced_network_policy(ns, {
        "metadata": {"name": "gpu-portal-deny-metadata", "labels": {
            "app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {
            "cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}]}]}})
    result = tenant_reconcile(tenant_id=tenant.pk)
    assert result.removed == [f"NetworkPolicy {ns}/gpu-portal-deny-metadata"]
    assert not result.created and not result.repaired
    names = [p.metadata.name for p in networking.list_namespaced_network_policy(ns).items]
    assert "gpu-portal-deny-metadata" not in names and "gpu-portal-egress" in names
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED  # an upgrade, not drift
    record = AuditRecord.objects.filter(tenant=tenant, action="namespace.reconcile"
                                        ).order_by("pk").last()
    assert record.after["removed"] == [f"NetworkPolicy {ns}/gpu-portal-deny-metadata"]
    # the site names a registry mirror and closes the internet: the policy follows
    settings.PORTAL_WORKLOAD_EGRESS_CIDRS = ["10.30.0.5/32:5000"]
    settings.PORTAL_WORKLOAD_EGRESS_INTERNET = False
    kube = Kube()
    result = tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert result.repaired == [f"NetworkPolicy {ns}/gpu-portal-egress"] and kube.writes == 1
    live = kube.get("NetworkPolicy", "gpu-portal-egress", ns)
    blocks = [peer["ipBlock"]["cidr"] for rule in live["spec"]["egress"]
              for peer in rule["to"] if "ipBlock" in peer]
    assert blocks == ["10.30.0.5/32"]
    assert not tenant_reconcile(tenant_id=tenant.pk).changed


def test_a_tenant_allowed_root_templates_gets_a_baseline_namespace(tenant, cluster,
                                                                  eager_celery):
    """Namespaces enforce "restricted"; an admin who lets a tenant run
    templates that may run as root lowers its namespace to "baseline" (audited), and back."""
    from django.test import TestCase

    from tenants.services import tenant_root_templates_update

    tenant_reconcile(tenant_id=tenant.pk)
    core_api = core(cluster)

    def enforced() -> str:
        return core_api.read_namespace(tenant.namespace).metadata.labels[
            "pod-security.kubernetes.io/enforce"]

    assert enforced() == "restricted"
    with TestCase.captureOnCommitCallbacks(execute=True):  # the reconcile it enqueues
        tenant_root_templates_update(tenant=tenant, acting_user=None, allow=True)
    assert enforced() == "baseline"
    labels = core_api.read_namespace(tenant.namespace).metadata.labels
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"  # still said
    record = AuditRecord.objects.get(tenant=tenant, action="tenant.allow_root_templates")
    assert (record.before, record.after) == ({"allow_root_templates": False},
                                             {"allow_root_templates": True})
    with TestCase.captureOnCommitCallbacks(execute=True):
        tenant_root_templates_update(tenant=tenant, acting_user=None, allow=False)
    assert enforced() == "restricted"


class RacedKube(Kube):
    """The portal's client, beaten to its first replace by a second reconcile of the same
    tenant (a quota save and the periodic sweep running at once): that one repairs the
    object first, so our replace carries a stale resourceVersion and kubesim answers 409."""

    def __init__(self, other: Kube):
        super().__init__()
        self.other, self.raced = other, False

    def replace(self, obj):
        if not self.raced:
            self.raced = True
            meta = obj["metadata"]
            live = self.other.get(obj["kind"], meta["name"], meta["namespace"])
            self.other.replace({**obj, "metadata": {
                **meta, "resourceVersion": live["metadata"]["resourceVersion"]}})
        return super().replace(obj)


def test_a_concurrent_reconcile_that_got_there_first_does_not_fail_the_tenant(tenant, cluster):
    tenant_reconcile(tenant_id=tenant.pk)
    ns = tenant.namespace
    core(cluster).patch_namespaced_resource_quota(
        "gpu-portal-quota", ns, {"spec": {"hard": {"requests.nvidia.com/gpu": "99"}}})
    kube = RacedKube(Kube())
    result = tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert kube.raced
    # the 409 was read again: the other reconcile had already put the quota back
    assert f"ResourceQuota {ns}/gpu-portal-quota" in result.unchanged
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED
    hard = core(cluster).read_namespaced_resource_quota("gpu-portal-quota", ns).spec.hard
    assert hard["requests.nvidia.com/gpu"] == "2"


def test_a_quota_change_reaches_the_resource_quota(tenant, cluster, gpu_types, eager_celery,
                                                  django_capture_on_commit_callbacks):
    tenant_reconcile(tenant_id=tenant.pk)
    with django_capture_on_commit_callbacks(execute=True):
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 6, "cpu": 48, "gpus_by_type": {"a100": 4}})
    hard = core(cluster).read_namespaced_resource_quota("gpu-portal-quota",
                                                        tenant.namespace).spec.hard
    assert hard["requests.nvidia.com/gpu"] == "6"
    assert hard["requests.cpu"] == "49"  # 48 cores and 10 proxies' 100m
    record = AuditRecord.objects.get(tenant=tenant, action="quota.update")
    assert record.before["gpus_total"] == 2 and record.after["gpus_total"] == 6
    assert record.after["gpus_by_type"]["a100"] == 4


def test_an_unreachable_cluster_fails_the_tenant_then_the_next_run_completes(
        tenant, cluster, settings, tmp_path):
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(
        cluster.url, "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)
    with pytest.raises(KubeUnavailable):
        tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.FAILED
    assert tenant.state_reason.startswith("KubeUnavailable")
    settings.KUBECONFIG = str(cluster.kubeconfig)
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED and tenant.state_reason == ""


def test_the_cluster_refusing_fails_the_tenant_with_its_reason(tenant, cluster):
    from kube.client import KubeRefused
    from tenants.models import Quota

    # a namespace name the API server must refuse (not a DNS-1123 label)
    Tenant.objects.filter(pk=tenant.pk).update(namespace="Not_A_Label")
    with pytest.raises(KubeRefused):
        tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.FAILED and "Invalid" in tenant.state_reason or "invalid" in tenant.state_reason
    assert Quota.objects.filter(tenant=tenant).exists()


def namespace_gone(cluster, namespace: str) -> bool:
    try:
        core(cluster).read_namespace(namespace)
    except k8s.ApiException as exc:
        if exc.status != 404:
            pytest.fail(f"reading the namespace failed: {exc}")  # no use waiting
        return True
    return False


def test_deleting_a_tenant_removes_its_namespace_after_the_grace(tenant, cluster, settings):
    tenant_reconcile(tenant_id=tenant.pk)
    tenant_mark_deleting(tenant=tenant, acting_user=None, reason="project gone")
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETING
    assert not tenant_namespace_delete(tenant_id=tenant.pk)  # still within the grace
    assert core(cluster).read_namespace(tenant.namespace)
    assert not tenant_reconcile(tenant_id=tenant.pk).changed  # a deleting tenant is left alone
    Tenant.objects.filter(pk=tenant.pk).update(delete_after=timezone.now() - dt.timedelta(seconds=1))
    assert tenant_namespace_delete(tenant_id=tenant.pk)
    eventually(lambda: namespace_gone(cluster, tenant.namespace), timeout=10,
               message="namespace still there")
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETED
    actions = list(AuditRecord.objects.filter(tenant=tenant).values_list("action", flat=True))
    assert {"tenant.delete", "namespace.delete"} <= set(actions)


class DeletedMidway(Kube):
    """The client of a reconcile that read its tenant as provisioned: after its first read of
    the cluster, the tenant is marked deleting (its Keystone project vanished, an admin deleted
    it); with `then_fail`, the cluster then stops answering, so the reconcile ends failed."""

    def __init__(self, tenant: Tenant, *, then_fail: bool):
        super().__init__()
        self.tenant, self.then_fail, self.marked = tenant, then_fail, False

    def get(self, kind, name, namespace=None):
        if self.marked and self.then_fail:
            raise KubeUnavailable("the API server went away")
        live = super().get(kind, name, namespace)
        if not self.marked:
            self.marked = True
            tenant_mark_deleting(tenant=self.tenant, acting_user=None, reason="project gone")
        return live


@pytest.mark.parametrize("then_fail", [False, True], ids=["reconcile-finishes", "reconcile-fails"])
def test_a_reconcile_running_when_the_tenant_is_marked_deleting_leaves_it_deleting(
        tenant, cluster, then_fail):
    """A race once seen: the reconcile's end wrote provisioned (or failed) over deleting,
    and the namespace was never deleted (that needs a deleting tenant)."""
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONED
    kube = DeletedMidway(tenant, then_fail=then_fail)
    if then_fail:
        with pytest.raises(KubeUnavailable):
            tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    else:
        tenant_reconcile(tenant_id=tenant.pk, kube=kube)
    assert kube.marked
    tenant.refresh_from_db()
    assert (tenant.state, tenant.state_reason) == (Tenant.State.DELETING, "project gone")
    Tenant.objects.filter(pk=tenant.pk).update(delete_after=timezone.now() - dt.timedelta(seconds=1))
    assert tenant_namespace_delete(tenant_id=tenant.pk)
    eventually(lambda: namespace_gone(cluster, tenant.namespace), timeout=10,
               message="namespace still there")
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETED


def test_desired_objects_follow_the_quota(tenant, gpu_types):
    from tenants.models import Quota

    quota = Quota.objects.get(tenant=tenant)
    objects = tenant_objects(namespace_spec(tenant, quota))
    hard = next(o for o in objects if o["kind"] == "ResourceQuota")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == str(quota.gpus_total)
