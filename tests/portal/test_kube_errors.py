"""How the API server's refusals become the portal's exceptions (kube/client.py): an
authorizer's 403 and a 401 are NotAuthorized (retried by the tasks: an API server that has just
started refuses so until its RBAC caches are in — seen on the real control plane), while
admission's 403s (quota, Pod Security) stay plain refusals."""

import json

import pytest
from kubernetes.client.rest import ApiException

from kube.client import KubeRefused, KubeUnavailable, NotAuthorized, _translate


def api_error(code: int, message: str, reason: str = "Forbidden") -> ApiException:
    exc = ApiException(status=code, reason=reason)
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": message, "reason": reason, "code": code})
    return exc


@pytest.mark.parametrize(("code", "message", "expected"), [
    (403, 'jobs.batch is forbidden: User "system:serviceaccount:gpu-portal:gpu-portal" cannot '
          'create resource "jobs" in API group "batch" in the namespace "gpu-a"', NotAuthorized),
    # discovery on an API server whose RBAC caches are not in yet (seen after a restart)
    (403, 'forbidden: User "system:serviceaccount:gpu-portal:gpu-portal" cannot get path '
          '"/apis/kueue.x-k8s.io/v1beta2"', NotAuthorized),
    (401, "Unauthorized", NotAuthorized),
    (403, 'pods "w-1" is forbidden: exceeded quota: gpu-portal-quota, requested: '
          'requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: '
          'requests.nvidia.com/gpu=1', KubeRefused),
    (403, 'pods "w-1" is forbidden: violates PodSecurity "baseline:latest": privileged',
     KubeRefused),
    (422, 'Job.batch "x" is invalid: spec.template: Required value', KubeRefused),
    (503, "the server is currently unable to handle the request", KubeUnavailable),
])
def test_refusals_by_who_refused(code, message, expected):
    error = _translate(api_error(code, message))
    assert type(error) is expected
    assert str(error) == message
