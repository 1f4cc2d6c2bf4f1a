"""A project's file server as pure functions: exact dicts, and valid against the Kubernetes
schema."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from files.manifests import (
    ANNOTATION_SPEC,
    ClaimMount,
    FileServerSpec,
    file_server_objects,
    make_deployment,
    make_secret,
    make_service,
)
from kube.labels import LABEL_EXPOSED

SPEC = FileServerSpec(namespace="gpu-vision-lab-abc123", project_id="d964ebf8619749c3",
                      claims=(ClaimMount("gpu-portal-home"), ClaimMount("imagenet", read_only=True)),
                      image="ghcr.io/gpu-portal/gpu-portal-files:0.36.0", token="t0ken",
                      run_as_user=1000, max_upload_bytes=2**30)
LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "app.kubernetes.io/name": "gpu-portal-files",
          "gpu-portal.io/project-id": "d964ebf8619749c3"}
SELECTOR = {"app.kubernetes.io/managed-by": "gpu-portal",
            "app.kubernetes.io/name": "gpu-portal-files"}


def test_the_objects_in_creation_order():
    assert [obj["kind"] for obj in file_server_objects(SPEC)] == ["Secret", "Deployment", "Service"]
    for obj in file_server_objects(SPEC):
        assert obj["metadata"]["name"] == "gpu-portal-files"
        assert obj["metadata"]["namespace"] == SPEC.namespace
        assert obj["metadata"]["labels"] == LABELS


def test_the_secret_holds_the_token():
    assert make_secret(SPEC) == {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "gpu-portal-files", "namespace": SPEC.namespace, "labels": LABELS},
        "stringData": {"token": "t0ken"}}


def test_the_pod_mounts_each_claim_under_volumes_read_only_where_asked():
    pod = make_deployment(SPEC)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["volumeMounts"] == [
        {"name": "token", "mountPath": "/etc/gpu-portal-files", "readOnly": True},
        {"name": "claim-0", "mountPath": "/volumes/gpu-portal-home", "readOnly": False},
        {"name": "claim-1", "mountPath": "/volumes/imagenet", "readOnly": True}]
    assert pod["volumes"][1:] == [
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "gpu-portal-home",
                                                      "readOnly": False}},
        {"name": "claim-1", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}}]
    assert pod["volumes"][0]["secret"]["secretName"] == "gpu-portal-files"
    assert container["args"] == ["--listen", ":8080", "--root", "/volumes", "--token-file",
                                 "/etc/gpu-portal-files/token", "--max-upload-bytes", "1073741824"]
    # the token reaches the server as a file, never in its environment or its arguments
    assert "env" not in container and "t0ken" not in str(make_deployment(SPEC))


def test_the_pod_runs_as_the_workloads_user_restricted():
    deployment = make_deployment(SPEC)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                      "fsGroup": 1000,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True}
    assert pod["automountServiceAccountToken"] is False
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert deployment["spec"]["selector"] == {"matchLabels": SELECTOR}


def test_only_its_port_http_is_open_to_the_portal():
    """Labelled exposed: the tenant's policy admits anyone to port "http" of such a pod only
    (tenants/manifests.py), as it admits the gateway to a workload's proxy."""
    template = make_deployment(SPEC)["spec"]["template"]
    assert template["metadata"]["labels"] == {**LABELS, LABEL_EXPOSED: "true"}
    assert template["spec"]["containers"][0]["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert make_service(SPEC)["spec"] == {
        "type": "ClusterIP", "selector": SELECTOR,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "targetPort": "http"}]}


def test_the_digest_changes_with_what_the_pod_is_made_from_not_with_the_token():
    digest = make_deployment(SPEC)["metadata"]["annotations"][ANNOTATION_SPEC]
    assert make_deployment(SPEC)["spec"]["template"]["metadata"]["annotations"] == {
        ANNOTATION_SPEC: digest}
    assert dataclasses.replace(SPEC, token="other").digest() == digest
    for change in ({"claims": SPEC.claims[:1]}, {"image": "files:2"},
                   {"claims": (ClaimMount("gpu-portal-home", read_only=True), SPEC.claims[1])}):
        assert dataclasses.replace(SPEC, **change).digest() != digest, change


def test_a_claim_mounted_twice_is_refused():
    with pytest.raises(ValueError, match="mounted twice"):
        dataclasses.replace(SPEC, claims=(ClaimMount("a"), ClaimMount("a", read_only=True)))


@pytest.mark.parametrize("claims", [(), SPEC.claims])
def test_every_object_is_valid_against_the_kubernetes_schema(claims):
    version = kubernetes_validate.utils.latest_version()
    for obj in file_server_objects(dataclasses.replace(SPEC, claims=claims)):
        kubernetes_validate.validate(obj, version, strict=True)
