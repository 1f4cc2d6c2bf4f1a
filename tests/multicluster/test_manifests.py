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
        ("MultiKueueConfig", multikueue.CONFIG), ("AdmissionCheck", multikueue.ADMISSION_CHECK)]
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


def test_the_managers_identity_on_a_worker_is_least_privilege():
    account, role, binding = multikueue.make_worker_identity()
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
    assert multikueue.worker_rules(["batch/job"])[3:] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": [
            "create", "update", "patch", "delete", "get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]}]


def test_the_operators_file_for_a_worker_is_the_identity_the_stack_applies():
    path = Path(__file__).resolve().parents[2] / "deploy" / "multikueue" / "worker-identity.yaml"
    assert list(yaml.safe_load_all(path.read_text())) == multikueue.make_worker_identity()
