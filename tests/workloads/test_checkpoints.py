"""A batch job's checkpoint directory (`checkpoint: {volume, path?}`): the launch freezes a
folder of the volume in its spec, its pods mount that folder read-write at
PORTAL_CHECKPOINT_DIR, and a copy put back in line (a maintenance drain, a reservation's end)
runs from the same spec, so its Job on the cluster mounts the same folder of the same claim.
What may not hold one is refused with 400 and nothing made."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase

from kube.client import Kube
from storage.models import StorageClass, Volume
from tenants.models import Tenant
from tenants.services import quota_update
from tests.support.pages import field_error, launch_form, researcher, vision_lab  # noqa: F401
from workloads.models import Workload, WorkloadMount
from workloads.services import workload_requeue

pytestmark = pytest.mark.django_db

BATCH = {"name": "train", "template": "custom", "kind": "batch", "gpu_type": "a100",
         "gpu_count": 1, "image": "busybox:1.36", "command": ["sh", "-c", "true"]}


@pytest.fixture
def lab(login, gpu_types, cluster) -> Tenant:
    for user in ("researcher", "student"):
        login(user)
    StorageClass.objects.create(name="standard", description="fast SSD", is_default=True)
    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes={"gpus_total": 4,
                                                           "gpus_by_type": {"a100": 4}})
    return vision


@pytest.fixture
def tokens(project_token) -> dict[str, str]:
    return {"researcher": project_token("researcher", "vision-lab"),
            "student": project_token("student", "nlp-lab")}


def call(token: str, method: str, url: str, body=None, *, run: bool = False):
    """An API call; `run`: the tasks it sends on commit run here (eager_celery)."""
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=run):
        if method == "get":
            return client.get(url)
        return getattr(client, method)(url, body, content_type="application/json")


def volume_of(token: str, name: str = "runs", *, run: bool = False) -> dict:
    response = call(token, "post", "/api/v1/volumes/",
                    {"name": name, "size_gib": 10, "scope": "user"}, run=run)
    assert response.status_code == 201, response.content
    return response.json()


def pod_of_job(kube: Kube, workload: Workload) -> dict:
    workload.refresh_from_db()
    job = kube.get("Job", workload.object_name, workload.tenant.namespace)
    assert job is not None, workload.reason
    return job["spec"]["template"]["spec"]


def checkpoint_of(pod: dict) -> tuple:
    """What a pod's program sees of its checkpoint: the variable, the mount, the claim."""
    app = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in app.get("env", [])}
    mount, = [m for m in app["volumeMounts"] if m["name"] == "checkpoint"]
    volume, = [v for v in pod["volumes"] if v["name"] == "checkpoint"]
    return (env["PORTAL_CHECKPOINT_DIR"], mount["mountPath"], mount["subPath"],
            mount.get("readOnly", False), volume["persistentVolumeClaim"]["claimName"])


def test_a_requeued_copy_mounts_the_same_checkpoint_folder(lab, tokens, cluster, eager_celery):
    volume = volume_of(tokens["researcher"], run=True)
    launched = call(tokens["researcher"], "post", "/api/v1/workloads/",
                    {**BATCH, "checkpoint": {"volume": volume["id"]}}, run=True)
    assert launched.status_code == 201, launched.content
    body = launched.json()
    run = Workload.objects.get(pk=body["id"])
    folder = f"checkpoints/{run.object_name}"
    assert body["checkpoint"] == {"volume": volume["id"], "name": "runs",
                                  "claim_name": volume["claim_name"], "folder": folder,
                                  "directory": "/portal/checkpoint"}
    assert run.launch_spec["checkpoint"] == {"volume": volume["id"], "name": "runs",
                                             "claim": volume["claim_name"], "folder": folder}
    # its volume is one of its mounts: listed, and not deleted while it lives
    assert [(m.volume_id, m.path, m.read_only) for m in run.mounts.all()] == \
        [(volume["id"], "/portal/checkpoint", False)]
    kube = Kube()
    wanted = ("/portal/checkpoint", "/portal/checkpoint", folder, False, volume["claim_name"])
    assert checkpoint_of(pod_of_job(kube, run)) == wanted

    with TestCase.captureOnCommitCallbacks(execute=True):
        copy = workload_requeue(workload=run, reason="Maintenance on its node.")
    assert copy is not None and copy.pk != run.pk
    assert copy.launch_spec["checkpoint"] == run.launch_spec["checkpoint"]
    assert checkpoint_of(pod_of_job(kube, copy)) == wanted  # the same folder, not the copy's
    assert [(m.volume_id, m.path) for m in copy.mounts.all()] == \
        [(volume["id"], "/portal/checkpoint")]
    shown = call(tokens["researcher"], "get", f"/api/v1/workloads/{copy.pk}/").json()
    assert shown["checkpoint"]["folder"] == folder
    response = call(tokens["researcher"], "delete", f"/api/v1/volumes/{volume['id']}/")
    assert response.status_code == 409, response.content


def test_a_folder_of_ones_choosing(lab, tokens, cluster):
    volume = volume_of(tokens["researcher"])
    launched = call(tokens["researcher"], "post", "/api/v1/workloads/",
                    {**BATCH, "checkpoint": {"volume": volume["id"], "path": "/runs/llama/"}})
    assert launched.status_code == 201, launched.content
    assert launched.json()["checkpoint"]["folder"] == "runs/llama"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"checkpoint": {"volume": "OTHER"}}, "checkpoint", "No volume"),
    ({"checkpoint": {"volume": 999999}}, "checkpoint", "No volume 999999"),
    ({"checkpoint": {"dataset": 1}}, "checkpoint", "a dataset is read-only"),
    ({"checkpoint": {"volume": "OWN", "dataset": 1}}, "checkpoint", "unknown key"),
    ({"checkpoint": {"volume": "OWN", "path": "a/../../b"}}, "checkpoint", "no '..'"),
    ({"checkpoint": {"volume": "OWN", "path": "a b"}}, "checkpoint", "a folder of the volume"),
    ({"checkpoint": {"volume": "OWN"}, "template": "jupyter", "kind": "", "image": "",
      "command": []}, "checkpoint", "a batch job's"),
    ({"checkpoint": {"volume": "OWN"}, "kind": "service", "port": 8080}, "checkpoint",
     "a batch job's"),
    ({"checkpoint": {"volume": "OWN"}, "env": {"PORTAL_CHECKPOINT_DIR": "/x"}}, "env",
     "set by the portal"),
    ({"mounts": [{"volume": "OWN", "path": "/portal/checkpoint"}]}, "mounts", "the portal mounts"),
], ids=["other-project", "unknown", "dataset", "unknown-key", "dotdot", "space", "jupyter",
        "service", "env", "mount-over-it"])
def test_what_may_not_hold_a_checkpoint_is_refused_and_nothing_made(lab, tokens, change, field,
                                                                    words):
    ids = {"OWN": volume_of(tokens["researcher"])["id"],
           "OTHER": volume_of(tokens["student"], name="theirs")["id"]}

    def resolved(value):
        if isinstance(value, dict):
            return {k: ids.get(v, v) if k == "volume" else v for k, v in value.items()}
        if isinstance(value, list):
            return [resolved(item) for item in value]
        return value

    request = {**BATCH, **{k: resolved(v) for k, v in change.items()}}
    request = {k: v for k, v in request.items() if v not in ("", [])}
    response = call(tokens["researcher"], "post", "/api/v1/workloads/", request)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid", body
    assert any(words in message for message in body["fields"][field]), body
    assert not Workload.objects.exists() and not WorkloadMount.objects.exists()
    assert Volume.objects.count() == 2


def test_the_launch_form_takes_a_checkpoint_and_the_workload_page_shows_it(
        researcher, vision_lab, django_capture_on_commit_callbacks):  # noqa: F811
    StorageClass.objects.create(name="standard", description="fast SSD", is_default=True)
    with django_capture_on_commit_callbacks(execute=True):
        researcher.post("/volumes/new/", {"name": "runs", "size_gib": "5", "scope": "user"})
        form = launch_form(name="train", template="custom", shown_template="custom",
                           kind="batch", image="busybox:1.36", command="sh\n-c\ntrue",
                           checkpoint="runs:llama")
        response = researcher.post("/workloads/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    workload = Workload.objects.get(name="train")
    assert workload.launch_spec["checkpoint"]["folder"] == "llama"
    pod = pod_of_job(Kube(), workload)
    assert checkpoint_of(pod)[2] == "llama"
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert 'id="workload-checkpoint"' in page and "llama" in page and "runs" in page
    assert 'name="checkpoint"' in researcher.get("/workloads/new/?template=custom").content.decode()
    bad = researcher.post("/workloads/new/", launch_form(name="bad", checkpoint="runs"))
    assert bad.status_code == 400
    assert "a batch job&#x27;s" in field_error(bad.content.decode(), "checkpoint")
