"""The datasets' API (`datasets/`) and their way into a launch: admins publish, change and
withdraw them (others 403, nothing changed); a project's people see those open to it, another
project gets a 404; bad input is a 400 that changes nothing; a launch mounts one read-only (its
default path /datasets/<name>), its project's volume and claim made from the frozen launch
spec and bound in kubesim as the PV controller binds a pre-bound pair; withdrawing or closing
one that a live workload mounts is 409 dataset_in_use."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client, TestCase

from audit.models import AuditRecord
from kube.client import Kube
from stack.procs import free_port
from storage.models import Dataset
from storage.services import dataset_claims_delete
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.waiting import eventually
from workloads.launch_spec import VERSION
from workloads.models import Workload
from workloads.objects import ClaimGoing, workload_objects_create

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
NFS = {"name": "imagenet", "description": "ILSVRC 2012", "kind": "nfs", "size_gib": 150,
       "server": "nfs.example.org", "path": "/exports/imagenet"}


@pytest.fixture
def labs(login, gpu_types, cluster) -> dict[str, Tenant]:
    for user in ("researcher", "lead", "viewer", "student", "admin"):
        login(user)
    found = {}
    for name in ("vision-lab", "nlp-lab"):
        tenant = found[name] = Tenant.objects.get(name=name)
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4},
                              "max_workloads": 20, "storage_gib": 10, "volumes": 2})
    return found


@pytest.fixture
def tokens(project_token) -> dict[str, str]:
    return {"admin": project_token("admin", "admin"),
            "researcher": project_token("researcher", "vision-lab"),
            "lead": project_token("lead", "vision-lab"),
            "viewer": project_token("viewer", "vision-lab"),
            "student": project_token("student", "nlp-lab"),
            "researcher@nlp": project_token("researcher", "nlp-lab")}


def call(token: str, method: str, url: str, body=None, sent: list | None = None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        if method in ("get", "delete"):
            response = getattr(client, method)(url)
        else:
            response = getattr(client, method)(url, body, content_type="application/json")
    if sent is not None:
        sent += callbacks
    return response


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert body["code"] == code and set(body) == {"code", "category", "detail", "fields"}, body
    return body


def publish(tokens, **body) -> dict:
    payload = {k: v for k, v in {**NFS, **body}.items() if v is not None}
    response = call(tokens["admin"], "post", "/api/v1/datasets/", payload)
    assert response.status_code == 201, response.content
    return response.json()


def listed(token: str) -> set[str]:
    response = call(token, "get", "/api/v1/datasets/")
    assert response.status_code == 200, response.content
    return {row["name"] for row in response.json()["results"]}


def state() -> list:
    return sorted(Dataset.objects.values_list("pk", "name", "description", "size_gib",
                                              "open_to_all", "updated_at"))


def test_an_admin_publishes_a_dataset_to_one_project_and_only_it_sees_it(labs, tokens):
    vision = labs["vision-lab"]
    sent: list = []
    response = call(tokens["admin"], "post", "/api/v1/datasets/",
                    {**NFS, "projects": [vision.pk]}, sent)
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("name", "description", "kind", "size_gib", "read_only",
                                 "default_path", "source", "open_to_all", "projects")} == {
        "name": "imagenet", "description": "ILSVRC 2012", "kind": "nfs", "size_gib": 150,
        "read_only": True, "default_path": "/datasets/imagenet",
        "source": {"server": "nfs.example.org", "path": "/exports/imagenet"},
        "open_to_all": False, "projects": [{"id": vision.pk, "name": "vision-lab"}]}
    assert AuditRecord.objects.filter(action="dataset.create", target="imagenet").exists()
    assert len(sent) == 1  # the project's namespace reconciled: room for its claim
    for who in ("researcher", "lead", "viewer"):
        assert listed(tokens[who]) == {"imagenet"}
    seen = call(tokens["viewer"], "get", f"/api/v1/datasets/{body['id']}/").json()
    assert seen["read_only"] is True and "source" not in seen and "projects" not in seen
    for who in ("student", "researcher@nlp"):  # another project: not listed, a 404
        assert listed(tokens[who]) == set()
        for method, payload in (("get", None), ("patch", {"description": "x"}),
                                ("delete", None)):
            error(call(tokens[who], method, f"/api/v1/datasets/{body['id']}/", payload),
                  404, "not_found")
    assert listed(tokens["admin"]) == {"imagenet"}


def test_only_admins_write_datasets(labs, tokens):
    opened = publish(tokens, open_to_all=True)
    before = state()
    for who in ("researcher", "lead", "viewer", "student"):
        error(call(tokens[who], "post", "/api/v1/datasets/", {**NFS, "name": "other"}),
              403, "permission_denied")
        error(call(tokens[who], "patch", f"/api/v1/datasets/{opened['id']}/",
                   {"description": "mine now"}), 403, "permission_denied")
        error(call(tokens[who], "delete", f"/api/v1/datasets/{opened['id']}/"), 403,
              "permission_denied")
    assert state() == before
    assert listed(tokens["student"]) == {"imagenet"}  # open to all: every project sees it


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "Image Net"}, "name"),
    ({"name": "-x"}, "name"),
    ({"size_gib": 0}, "size_gib"),
    ({"kind": "hostpath"}, "kind"),
    ({"server": ""}, "server"),
    ({"server": "nfs example"}, "server"),
    ({"path": "exports/imagenet"}, "path"),
    ({"path": "/exports/../etc"}, "path"),
    ({"bucket": "corpora"}, "bucket"),
    ({"kind": "s3", "server": None, "path": None, "endpoint": "ftp://x", "bucket": "b-1"},
     "endpoint"),
    ({"kind": "s3", "server": None, "path": None, "endpoint": "https://u:p@s3.example.org",
      "bucket": "b-1"}, "endpoint"),
    ({"kind": "s3", "server": None, "path": None, "endpoint": "https://s3.example.org",
      "bucket": "UPPER"}, "bucket"),
    ({"kind": "csi", "server": None, "path": None, "driver": "Not A Driver",
      "volume_handle": "x"}, "driver"),
    ({"kind": "pv", "server": None, "path": None, "persistent_volume": "no-such-volume"},
     "persistent_volume"),
    ({"projects": [999999]}, "projects"),
], ids=["name-space", "name-dash", "size", "kind", "server-empty", "server-space", "relative",
        "dotdot", "stray-field", "s3-scheme", "s3-userinfo", "s3-bucket", "csi-driver",
        "pv-missing", "project"])
def test_bad_input_is_a_400_that_changes_nothing(labs, tokens, body, field):
    publish(tokens, name="kept")
    before = state()
    payload = {k: v for k, v in {**NFS, **body}.items() if v is not None}
    response = error(call(tokens["admin"], "post", "/api/v1/datasets/", payload), 400, "invalid")
    assert field in response["fields"], response
    assert state() == before


def test_a_patch_with_bad_input_changes_nothing(labs, tokens):
    dataset = publish(tokens)
    publish(tokens, name="other")
    before = state()
    url = f"/api/v1/datasets/{dataset['id']}/"
    for body, field in (({"name": "other"}, "name"), ({"size_gib": -1}, "size_gib"),
                        ({"projects": [0]}, "projects"), ({"name": "A"}, "name")):
        response = error(call(tokens["admin"], "patch", url, body), 400, "invalid")
        assert field in response["fields"], response
    assert state() == before


def test_a_named_persistent_volumes_source_is_copied(labs, tokens):
    name = f"probe-{uuid.uuid4().hex[:8]}"
    Kube().create({"apiVersion": "v1", "kind": "PersistentVolume",
                   "metadata": {"name": name},
                   "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
                            "persistentVolumeReclaimPolicy": "Retain",
                            "storageClassName": "lustre",
                            "nfs": {"server": "10.0.0.9", "path": "/lustre"}}})
    body = publish(tokens, name="scratch", kind="pv", server=None, path=None,
                   persistent_volume=name)
    assert body["source"] == {"persistent_volume": name,
                              "spec": {"nfs": {"server": "10.0.0.9", "path": "/lustre"}}}


def test_closing_a_dataset_to_a_project_takes_its_claim_away(labs, tokens):
    dataset = publish(tokens, open_to_all=True)
    assert listed(tokens["student"]) == {"imagenet"}
    sent: list = []
    response = call(tokens["admin"], "patch", f"/api/v1/datasets/{dataset['id']}/",
                    {"open_to_all": False, "projects": [labs["vision-lab"].pk]}, sent)
    assert response.status_code == 200, response.content
    assert response.json()["projects"] == [{"id": labs["vision-lab"].pk, "name": "vision-lab"}]
    assert sent  # the claims' removal and the namespaces' quota, on commit
    assert listed(tokens["student"]) == set()
    assert listed(tokens["researcher"]) == {"imagenet"}
    error(call(tokens["student"], "get", f"/api/v1/datasets/{dataset['id']}/"), 404,
          "not_found")


def launch(token: str, mounts: list, **body):
    return call(token, "post", "/api/v1/workloads/", {**LAUNCH, **body, "mounts": mounts})


def test_a_launch_mounts_a_dataset_read_only_and_its_volume_is_bound(labs, tokens):
    vision = labs["vision-lab"]
    tenant_reconcile(tenant_id=vision.pk)
    dataset = publish(tokens, projects=[vision.pk])
    tenant_reconcile(tenant_id=vision.pk)  # what the create sent: room for its claim
    launched = launch(tokens["researcher"], [{"dataset": dataset["id"]}])
    assert launched.status_code == 201, launched.content
    assert launched.json()["mounts"] == [{
        "volume": None, "dataset": dataset["id"], "name": "imagenet",
        "claim_name": f"gpu-portal-dataset-{dataset['id']}", "path": "/datasets/imagenet",
        "read_only": True}]
    workload = Workload.objects.get(pk=launched.json()["id"])
    frozen = workload.launch_spec["mounts"][0]
    assert (workload.launch_spec["version"], frozen["dataset"], frozen["read_only"],
            frozen["volume_source"]) == (VERSION, dataset["id"], True, {"nfs": {
                "server": "nfs.example.org", "path": "/exports/imagenet", "readOnly": True}})

    made = workload_objects_create(workload, Kube(), queued=False)
    volume_name = f"gpu-portal-dataset-{dataset['id']}-{vision.namespace}"
    assert made[0] == (f"PersistentVolume {volume_name}, "
                       f"PersistentVolumeClaim gpu-portal-dataset-{dataset['id']}")
    claim = eventually(lambda: (c := Kube().get(
        "PersistentVolumeClaim", f"gpu-portal-dataset-{dataset['id']}", vision.namespace))
        and c["status"].get("phase") == "Bound" and c, message="the claim is not bound")
    assert claim["status"]["accessModes"] == ["ReadOnlyMany"]
    assert claim["status"]["capacity"] == {"storage": "150Gi"}
    pv = Kube().get("PersistentVolume", volume_name)
    assert pv["status"]["phase"] == "Bound" and pv["spec"]["claimRef"]["uid"] == \
        claim["metadata"]["uid"]
    deployment = Kube().get("Deployment", workload.object_name, vision.namespace)
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "mount-0", "persistentVolumeClaim": {
        "claimName": f"gpu-portal-dataset-{dataset['id']}", "readOnly": True}} in pod["volumes"]
    assert {"name": "mount-0", "mountPath": "/datasets/imagenet", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]

    # a second workload of the project finds them there; nothing new
    again = Workload.objects.get(pk=launch(tokens["lead"], [{"dataset": dataset["id"]}],
                                           name="again").json()["id"])
    assert not any("PersistentVolume" in made for made in
                   workload_objects_create(again, Kube(), queued=False))

    # while they live, the dataset is neither withdrawn nor closed to the project
    url = f"/api/v1/datasets/{dataset['id']}/"
    body = error(call(tokens["admin"], "delete", url), 409, "dataset_in_use")
    assert f"#{workload.pk}" in body["detail"]
    error(call(tokens["admin"], "patch", url, {"projects": []}), 409, "dataset_in_use")
    assert call(tokens["admin"], "patch", url, {"description": "new words"}).status_code == 200
    Workload.objects.filter(pk__in=[workload.pk, again.pk]).update(
        state=Workload.State.STOPPED)
    Kube().delete("Deployment", workload.object_name, vision.namespace)
    Kube().delete("Deployment", again.object_name, vision.namespace)
    assert call(tokens["admin"], "delete", url).status_code == 204
    assert dataset_claims_delete(dataset_id=dataset["id"], namespaces=None) == 1
    eventually(lambda: Kube().get("PersistentVolume", volume_name) is None,
               message="the dataset's volume is still there")


def test_a_dataset_opened_again_before_its_old_volume_is_gone_is_waited_for(labs, tokens):
    """Closed to a project and opened again at once: the project's old volume may still be
    going (a finalizer holds it here, as a real cluster's protection does while a claim or a
    pod lets go). A launch then waits for it (ClaimGoing, retried by the create task) and
    makes a new one once it is gone, rather than adopting one about to vanish under its pods."""
    vision = labs["vision-lab"]
    tenant_reconcile(tenant_id=vision.pk)
    dataset = publish(tokens, projects=[vision.pk])
    tenant_reconcile(tenant_id=vision.pk)
    first = Workload.objects.get(pk=launch(tokens["researcher"], [{"dataset": dataset["id"]}])
                                 .json()["id"])
    workload_objects_create(first, Kube(), queued=False)
    volume_name = f"gpu-portal-dataset-{dataset['id']}-{vision.namespace}"
    old = Kube().get("PersistentVolume", volume_name)
    hold = "tests.gpu-portal.io/hold"
    Kube().patch("PersistentVolume", volume_name, {"metadata": {"finalizers": [
        *(old["metadata"].get("finalizers") or []), hold]}})
    Workload.objects.filter(pk=first.pk).update(state=Workload.State.STOPPED)
    Kube().delete("Deployment", first.object_name, vision.namespace)

    url = f"/api/v1/datasets/{dataset['id']}/"
    assert call(tokens["admin"], "patch", url, {"projects": []}).status_code == 200
    dataset_claims_delete(dataset_id=dataset["id"], namespaces=[vision.namespace])
    assert Kube().get("PersistentVolume", volume_name)["metadata"].get("deletionTimestamp")
    assert call(tokens["admin"], "patch", url, {"projects": [vision.pk]}).status_code == 200
    tenant_reconcile(tenant_id=vision.pk)
    again = Workload.objects.get(pk=launch(tokens["researcher"], [{"dataset": dataset["id"]}],
                                           name="again").json()["id"])
    with pytest.raises(ClaimGoing, match=f"PersistentVolume {volume_name} is being deleted"):
        workload_objects_create(again, Kube(), queued=False)

    going = Kube().get("PersistentVolume", volume_name)
    going["metadata"]["finalizers"].remove(hold)
    Kube().replace(going)
    eventually(lambda: (pv := Kube().get("PersistentVolume", volume_name)) is None
               or pv["metadata"]["uid"] != old["metadata"]["uid"],
               message="the old volume is still there")
    made = workload_objects_create(again, Kube(), queued=False)
    assert made[0] == (f"PersistentVolume {volume_name}, "
                       f"PersistentVolumeClaim gpu-portal-dataset-{dataset['id']}")
    assert Kube().get("PersistentVolume", volume_name)["metadata"]["uid"] != \
        old["metadata"]["uid"]
    Workload.objects.filter(pk=again.pk).update(state=Workload.State.STOPPED)
    Kube().delete("Deployment", again.object_name, vision.namespace)
    assert call(tokens["admin"], "delete", url).status_code == 204
    dataset_claims_delete(dataset_id=dataset["id"], namespaces=None)


def test_an_s3_dataset_tells_the_pod_where_its_bucket_is(labs, tokens, s3_server, s3_bucket):
    vision = labs["vision-lab"]
    dataset = publish(tokens, name="corpora", kind="s3", server=None, path=None,
                      endpoint=s3_server.endpoint, bucket=s3_bucket.name, prefix="text",
                      projects=[vision.pk])
    launched = launch(tokens["researcher"], [{"dataset": dataset["id"], "path": "/corpora"}])
    assert launched.status_code == 201, launched.content
    frozen = Workload.objects.get(pk=launched.json()["id"]).launch_spec["mounts"][0]
    assert frozen["env"] == [["PORTAL_DATASET_CORPORA", f"s3://{s3_bucket.name}/text/"],
                             ["PORTAL_DATASET_CORPORA_ENDPOINT", s3_server.endpoint]]
    assert frozen["volume_source"]["csi"]["driver"] == "s3.csi.aws.com"
    body = error(launch(tokens["researcher"], [{"dataset": dataset["id"]}],
                        env={"PORTAL_DATASET_CORPORA": "mine"}), 400, "invalid")
    assert "PORTAL_DATASET_CORPORA" in body["fields"]["mounts"][0]


def test_an_s3_dataset_is_published_only_where_its_bucket_answers(labs, tokens, s3_server,
                                                                  s3_bucket):
    """Asked unsigned, as the portal holds no key: the versitygw server of the tests answers 403
    for a bucket that is there, 404 for one that is not; a port where nothing listens does not
    answer at all. A refusal names the field and makes no row."""
    s3 = {**{k: v for k, v in NFS.items() if k not in ("server", "path")}, "kind": "s3",
          "endpoint": s3_server.endpoint, "projects": [labs["vision-lab"].pk]}
    body = error(call(tokens["admin"], "post", "/api/v1/datasets/",
                      {**s3, "bucket": "no-such-bucket"}), 400, "invalid")
    assert body["fields"] == {"bucket": [f"{s3_server.endpoint} has no bucket 'no-such-bucket'."]}
    nobody = f"http://127.0.0.1:{free_port()}"
    body = error(call(tokens["admin"], "post", "/api/v1/datasets/",
                      {**s3, "endpoint": nobody, "bucket": s3_bucket.name}), 400, "invalid")
    assert body["fields"] == {"endpoint": [f"{nobody} could not be reached (ConnectError)."]}
    assert not Dataset.objects.exists()
    made = publish(tokens, **s3, server=None, path=None, bucket=s3_bucket.name)
    assert made["source"]["bucket"] == s3_bucket.name


@pytest.mark.parametrize(("mount", "words"), [
    ({"dataset": "OPEN", "read_only": False}, "always mounted read-only"),
    ({"dataset": "CLOSED"}, "No dataset"),
    ({"dataset": 999999}, "No dataset"),
    ({"dataset": "OPEN", "path": "/etc/data"}, "system path"),
    ({"dataset": "OPEN", "volume": 1, "path": "/x"}, "Name one source"),
], ids=["writable", "not-open", "unknown", "system-path", "two-sources"])
def test_a_launch_mounts_only_open_datasets_read_only(labs, tokens, mount, words):
    ids = {"OPEN": publish(tokens, projects=[labs["vision-lab"].pk])["id"],
           "CLOSED": publish(tokens, name="theirs", projects=[labs["nlp-lab"].pk])["id"]}
    entry = {k: ids.get(v, v) if k == "dataset" else v for k, v in mount.items()}
    body = error(launch(tokens["researcher"], [entry]), 400, "invalid")
    assert words in body["fields"]["mounts"][0], body
    assert not Workload.objects.exists()


def test_a_reader_sees_datasets_and_mounts_none(labs, tokens):
    dataset = publish(tokens, projects=[labs["vision-lab"].pk])
    assert listed(tokens["viewer"]) == {"imagenet"}
    error(launch(tokens["viewer"], [{"dataset": dataset["id"]}]), 403, "permission_denied")


@pytest.fixture
def own_tenant(gpu_types, cluster):
    """A project of the test's own, in a namespace of its own."""
    from tenants.services import tenant_ensure

    return tenant_ensure(keystone_project_id=uuid.uuid4().hex,
                         name=f"Datasets {uuid.uuid4().hex[:6]}")


def test_a_tenant_being_deleted_lets_its_datasets_volumes_go(own_tenant, tokens,
                                                            eager_celery):
    """A dataset's volume is cluster-scoped: it would outlive the namespace. (A project of the
    test's own: a shared namespace may hold other tests' claims, beyond its storage quota.)"""
    from storage.manifests import make_dataset_claim, make_dataset_volume
    from tenants.services import tenant_mark_deleting
    from workloads.mounts import ResolvedMount, dataset_claim_spec

    vision = own_tenant
    tenant_reconcile(tenant_id=vision.pk)
    dataset = Dataset.objects.get(pk=publish(tokens, projects=[vision.pk])["id"])
    tenant_reconcile(tenant_id=vision.pk)
    spec = dataset_claim_spec(ResolvedMount(dataset=dataset, path="/d", read_only=True)
                              .as_spec(vision), vision)
    Kube().create(make_dataset_volume(spec))
    Kube().create(make_dataset_claim(spec))
    with TestCase.captureOnCommitCallbacks(execute=True):
        tenant_mark_deleting(tenant=vision, acting_user=None, reason="probe")
    eventually(lambda: Kube().get("PersistentVolume", spec.volume_name) is None,
               message="the dataset's volume outlived its tenant")
    assert Kube().get("PersistentVolumeClaim", spec.claim_name, vision.namespace) is None
