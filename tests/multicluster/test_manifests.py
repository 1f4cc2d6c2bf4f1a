"""MultiKueue's objects (kube/multikueue.py): pure, no cluster. The real control planes apply
them in tests/multicluster/test_multikueue.py (and their API server validates them there)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from kube import multikueue
from tenants.kueue import FlavorSpec, QueueSpec, make_cluster_queue


def test_a_workers_kubeconfig_is_self_contained_as_kueue_requires():
    text = multikueue.make_kubeconfig(cluster="east", server="https://127.0.0.1:6443",
                                      ca_pem=b"-----BEGIN CERTIFICATE-----\n", token="t0k3n")
    config = yaml.safe_load(text)
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority-data": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()}
    (user,) = config["users"]
    assert user["user"] == {"token": "t0k3n"}  # no token file, exec plugin or client cert file
    assert config["current-context"] == "east"
    assert "insecure-skip-tls-verify" not in text


def test_the_manager_gets_a_secret_and_a_cluster_per_worker_then_the_config_and_check():
    objects = multikueue.make_manager_objects([("east", "KUBECONFIG-E"), ("west", "KUBECONFIG-W")])
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "multikueue-east"), ("Secret", "multikueue-west"),
        ("MultiKueueCluster", "east"), ("MultiKueueCluster", "west"),
        ("MultiKueueConfig", multikueue.CONFIG), ("AdmissionCheck", multikueue.ADMISSION_CHECK),
        # one per worker, listing it alone: what a launch naming the worker is queued through
        ("MultiKueueConfig", "gpu-portal-multikueue-east"),
        ("AdmissionCheck", "gpu-portal-multikueue-east"),
        ("MultiKueueConfig", "gpu-portal-multikueue-west"),
        ("AdmissionCheck", "gpu-portal-multikueue-west")]
    assert objects[6]["spec"] == {"clusters": ["east"]}
    assert objects[7]["spec"]["parameters"]["name"] == "gpu-portal-multikueue-east"
    secret = objects[0]
    assert secret["metadata"]["namespace"] == "kueue-system"
    assert base64.b64decode(secret["data"]["kubeconfig"]) == b"KUBECONFIG-E"
    assert objects[2]["spec"] == {"clusterSource": {"kubeConfig": {
        "locationType": "Secret", "location": "multikueue-east"}}}
    assert objects[4]["spec"] == {"clusters": ["east", "west"]}
    assert objects[5]["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": multikueue.CONFIG}}
    assert all(o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-portal"}
               for o in objects)


def test_a_config_without_workers_is_refused():
    with pytest.raises(ValueError):
        multikueue.make_config([])


def test_a_cluster_queue_dispatches_through_the_check_for_all_its_flavors():
    spec = QueueSpec(name="gp-lab", namespace="gp-lab", gpus=(("h100", 8),), cpu=8,
                     memory_gb=32, borrowing_limit=None, lending_limit=None)
    queue = make_cluster_queue(spec, [FlavorSpec("h100", "nvidia.com/gpu", (("gputype", "h100"),))])
    dispatching = multikueue.with_admission_check(queue)
    assert dispatching["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": multikueue.ADMISSION_CHECK}]}  # no onFlavors: refused
    assert "admissionChecksStrategy" not in queue["spec"]  # a copy
    assert {k: v for k, v in dispatching["spec"].items()
            if k != "admissionChecksStrategy"} == queue["spec"]


def test_a_tenant_has_a_queue_pinned_to_each_worker_on_the_manager():
    from tenants.kueue import make_dispatching_queues, make_worker_local_queue, queue_labels

    spec = QueueSpec(name="gp-lab", namespace="gp-lab", gpus=(("h100", 8),), cpu=8,
                     memory_gb=32, borrowing_limit=2, lending_limit=4)
    flavors = [FlavorSpec("h100", "nvidia.com/gpu", (("gputype", "h100"),))]
    cluster_queue, local_queue = make_dispatching_queues(spec, flavors, "east")
    assert cluster_queue["metadata"]["name"] == "gp-lab-east"
    assert "cohortName" not in cluster_queue["spec"]  # lends and borrows nothing at home
    assert cluster_queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "gpu-portal-multikueue-east"}]}
    (gpus,) = cluster_queue["spec"]["resourceGroups"][1]["flavors"]
    assert gpus["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]
    assert local_queue["metadata"] == {"name": "gpu-portal-east", "namespace": "gp-lab",
                                       "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}
    assert local_queue["spec"] == {"clusterQueue": "gp-lab-east"}
    # on the worker, the queue of the same name in front of the tenant's own ClusterQueue
    assert make_worker_local_queue(spec, "east")["spec"] == {"clusterQueue": "gp-lab"}
    assert queue_labels("batch", "east")["kueue.x-k8s.io/queue-name"] == "gpu-portal-east"
    assert queue_labels("batch")["kueue.x-k8s.io/queue-name"] == "gpu-portal"


def test_the_managers_identity_on_a_worker_is_least_privilege():
    account, role, binding, token_role, token_binding = multikueue.make_worker_identity()
    assert (account["kind"], account["metadata"]["namespace"]) == ("ServiceAccount",
                                                                     "kueue-system")
    granted = {(group, resource): set(rule["verbs"]) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted[("kueue.x-k8s.io", "workloads/status")] == {"get", "patch", "update"}
    assert granted[("kueue.x-k8s.io", "clusterqueues")] == {"get", "list", "watch"}
    assert granted[("batch", "jobs/status")] == {"get"}
    assert ("jobset.x-k8s.io", "jobsets") in granted and ("kubeflow.org", "mpijobs") in granted
    # nothing cluster-wide beyond that: no secrets, no RBAC, no wildcard
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"]
               for rule in role["rules"])
    assert not {resource for _, resource in granted} & {"secrets", "clusterroles", "nodes"}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": "kueue-system",
                                    "name": account["metadata"]["name"]}]
    # the portal's own identity there asks for that account's tokens, and for nothing else
    assert token_role["rules"] == [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                                    "resourceNames": [account["metadata"]["name"]],
                                    "verbs": ["create"]}]
    assert token_role["metadata"]["namespace"] == "kueue-system"
    assert token_binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-portal",
                                          "namespace": "gpu-portal"}]
    assert multikueue.worker_rules(["batch/job"])[3:] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": [
            "create", "update", "patch", "delete", "get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]}]


def test_the_operators_file_for_a_worker_is_the_identity_the_stack_applies():
    path = Path(__file__).resolve().parents[2] / "deploy" / "multikueue" / "worker-identity.yaml"
    assert list(yaml.safe_load_all(path.read_text())) == multikueue.make_worker_identity()


def test_what_the_portal_dispatches_is_managed_by_multikueue_from_its_manifest():
    """A job queued for a worker names MultiKueue's controller itself (Kueue's webhook would
    set the same): the manager's own Job, JobSet and MPI controllers leave it alone."""
    import dataclasses

    from tests.support.manifests import CUSTOM_BATCH, DDP, MPIJOB
    from workloads.manifests import make_job, make_jobset, make_mpijob

    labels = (("kueue.x-k8s.io/queue-name", "gpu-portal-east"),)
    for spec, make, path in ((CUSTOM_BATCH, make_job, ("spec",)),
                             (DDP, make_jobset, ("spec",)),
                             (MPIJOB, make_mpijob, ("spec", "runPolicy"))):
        dispatched = make(dataclasses.replace(spec, queue_labels=labels,
                                              managed_by=multikueue.CONTROLLER))
        home = make(dataclasses.replace(spec, queue_labels=labels))
        where, at_home = dispatched, home
        for key in path:
            where, at_home = where[key], at_home[key]
        assert where["managedBy"] == "kueue.x-k8s.io/multikueue"
        assert where["suspend"] is True  # Kueue admits it on the manager first
        assert "managedBy" not in at_home
        assert dispatched["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal-east"
