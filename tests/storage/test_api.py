"""The volumes' API (`volumes/`, `storage-classes/`): who makes, sees, grows and deletes which
volume (a member their own, a manager the project's, a reader none; another project's is a
404); the storage quota (403 quota_exceeded, naming the limit); growing only larger and only
where the class can; deleting a mounted volume (409 volume_in_use); and a launch's mounts."""

from __future__ import annotations

import pytest
from django.test import Client, TestCase
from django.utils import timezone

from audit.models import AuditRecord
from storage.models import StorageClass, Volume
from tenants.models import Tenant
from tenants.services import quota_update
from workloads.models import Workload

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def vision(login, gpu_types, cluster) -> Tenant:
    for user in ("researcher", "lead", "viewer", "student"):
        login(user)
    StorageClass.objects.create(name="standard", description="fast SSD", expandable=True,
                                is_default=True)
    StorageClass.objects.create(name="archive", description="tape-backed, fixed size")
    for name in ("vision-lab", "nlp-lab"):
        quota_update(tenant=Tenant.objects.get(name=name), acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4}, "max_workloads": 20,
                              "storage_gib": 100, "volumes": 5})
    return Tenant.objects.get(name="vision-lab")


@pytest.fixture
def tokens(project_token) -> dict[str, str]:
    return {"researcher": project_token("researcher", "vision-lab"),
            "lead": project_token("lead", "vision-lab"),
            "viewer": project_token("viewer", "vision-lab"),
            "student": project_token("student", "nlp-lab"),
            "researcher@nlp": project_token("researcher", "nlp-lab")}


def call(token: str, method: str, url: str, body=None):
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method in ("get", "delete"):
            return getattr(client, method)(url)
        return getattr(client, method)(url, body, content_type="application/json")


def make(token: str, **body):
    response = call(token, "post", "/api/v1/volumes/",
                    {"name": "data", "size_gib": 10, "scope": "user", **body})
    assert response.status_code == 201, response.content
    return response.json()


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert body["code"] == code, body
    return body


def test_a_member_makes_a_volume_of_their_own(vision, tokens):
    client = Client(HTTP_X_AUTH_TOKEN=tokens["researcher"])
    with TestCase.captureOnCommitCallbacks(execute=False) as sent:
        response = client.post("/api/v1/volumes/", {"name": " my  data ", "size_gib": 20},
                               content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    volume = Volume.objects.get(pk=body["id"])
    assert {k: body[k] for k in ("name", "scope", "owner", "size_gib", "storage_class",
                                 "claim_name", "state", "reason")} == {
        "name": "my data", "scope": "user", "owner": "researcher", "size_gib": 20,
        "storage_class": "standard", "claim_name": f"vol-{volume.pk}-my-data",
        "state": "pending", "reason": ""}
    assert len(sent) == 1  # the claim's task, on commit
    assert AuditRecord.objects.filter(action="volume.create", tenant_id=vision.pk).exists()


def test_project_volumes_are_the_managers_to_make_and_readers_make_none(vision, tokens):
    error(call(tokens["researcher"], "post", "/api/v1/volumes/",
               {"name": "shared", "size_gib": 1, "scope": "project"}), 403, "permission_denied")
    error(call(tokens["viewer"], "post", "/api/v1/volumes/",
               {"name": "mine", "size_gib": 1}), 403, "permission_denied")
    shared = make(tokens["lead"], name="shared", scope="project")
    assert shared["scope"] == "project" and shared["owner"] == "lead"
    assert not Volume.objects.filter(owner__name__in=["researcher", "viewer"]).exists()


def test_who_sees_which_volume(vision, tokens):
    own = make(tokens["researcher"], name="own")
    leads = make(tokens["lead"], name="leads")
    shared = make(tokens["lead"], name="shared", scope="project")

    def listed(who: str) -> set[int]:
        body = call(tokens[who], "get", "/api/v1/volumes/").json()
        return {row["id"] for row in body["results"]}

    assert listed("researcher") == {own["id"], shared["id"]}
    assert listed("lead") == {own["id"], leads["id"], shared["id"]}
    assert listed("viewer") == {shared["id"]}
    assert listed("student") == set() and listed("researcher@nlp") == set()
    error(call(tokens["researcher"], "get", f"/api/v1/volumes/{leads['id']}/"), 404, "not_found")
    for who in ("student", "researcher@nlp"):  # another project: 404, whatever the method
        for method, body in (("get", None), ("patch", {"size_gib": 50}), ("delete", None)):
            error(call(tokens[who], method, f"/api/v1/volumes/{shared['id']}/", body),
                  404, "not_found")
    assert Volume.objects.filter(pk=shared["id"], deleted_at__isnull=True, size_gib=10).exists()
    filtered = call(tokens["lead"], "get", "/api/v1/volumes/?scope=project").json()
    assert [row["id"] for row in filtered["results"]] == [shared["id"]]


def test_the_storage_quota_refuses_with_403_naming_the_limit(vision, tokens):
    make(tokens["researcher"], name="big", size_gib=90)
    body = error(call(tokens["researcher"], "post", "/api/v1/volumes/",
                      {"name": "more", "size_gib": 11}), 403, "quota_exceeded")
    assert "90 of 100 GiB" in body["detail"] and body["category"] == "admission"
    for index in range(4):
        make(tokens["lead"], name=f"small-{index}", size_gib=1)
    body = error(call(tokens["researcher"], "post", "/api/v1/volumes/",
                      {"name": "sixth", "size_gib": 1}), 403, "quota_exceeded")
    assert "5 of 5 volumes" in body["detail"]
    quota = call(tokens["researcher"], "get", f"/api/v1/tenants/{vision.pk}/quota/").json()
    assert (quota["storage_gib"], quota["volumes"]) == (100, 5)
    assert (quota["in_force"]["storage_gib"], quota["in_force"]["volumes"]) == (100, 5)


def test_patch_only_grows_only_where_the_class_can_and_within_the_quota(vision, tokens):
    volume = make(tokens["researcher"])
    url = f"/api/v1/volumes/{volume['id']}/"
    grown = call(tokens["researcher"], "patch", url, {"size_gib": 30})
    assert grown.status_code == 200 and grown.json()["size_gib"] == 30
    body = error(call(tokens["researcher"], "patch", url, {"size_gib": 5}), 400, "invalid")
    assert "only grows" in body["fields"]["size_gib"][0]
    error(call(tokens["researcher"], "patch", url, {"size_gib": 101}), 403, "quota_exceeded")
    fixed = make(tokens["researcher"], name="tape", storage_class="archive")
    body = error(call(tokens["researcher"], "patch", f"/api/v1/volumes/{fixed['id']}/",
                      {"size_gib": 20}), 400, "invalid")
    assert "cannot grow" in body["fields"]["size_gib"][0]
    error(call(tokens["researcher"], "post", "/api/v1/volumes/",
               {"name": "x", "size_gib": 1, "storage_class": "nope"}), 400, "invalid")
    # a project volume: its managers change it, members do not; a reader changes nothing
    shared = make(tokens["lead"], name="shared", scope="project")
    for who in ("researcher", "viewer"):
        error(call(tokens[who], "patch", f"/api/v1/volumes/{shared['id']}/", {"size_gib": 20}),
              403, "permission_denied")
    assert call(tokens["lead"], "patch", f"/api/v1/volumes/{volume['id']}/",
                {"size_gib": 40}).status_code == 200  # a member's, by a manager


def test_a_mounted_volume_is_not_deleted_while_its_workload_lives(vision, tokens):
    volume = make(tokens["researcher"])
    launched = call(tokens["researcher"], "post", "/api/v1/workloads/",
                    {**LAUNCH, "mounts": [{"volume": volume["id"], "path": "/data"},
                                          {"volume": volume["id"], "path": "/again",
                                           "read_only": True}]})
    body = error(launched, 400, "invalid")
    assert "mounted twice" in body["fields"]["mounts"][0]
    launched = call(tokens["researcher"], "post", "/api/v1/workloads/",
                    {**LAUNCH, "mounts": [{"volume": volume["id"], "path": "/data/",
                                           "read_only": True}]})
    assert launched.status_code == 201, launched.content
    assert launched.json()["mounts"] == [{"volume": volume["id"], "dataset": None,
                                          "name": "data", "claim_name": volume["claim_name"],
                                          "path": "/data", "read_only": True}]
    workload = Workload.objects.get(pk=launched.json()["id"])
    assert workload.launch_spec["mounts"] == [{"volume": volume["id"], "name": "data",
                                               "claim": volume["claim_name"], "path": "/data",
                                               "read_only": True}]
    url = f"/api/v1/volumes/{volume['id']}/"
    body = error(call(tokens["researcher"], "delete", url), 409, "volume_in_use")
    assert f"#{workload.pk}" in body["detail"]
    Workload.objects.filter(pk=workload.pk).update(state=Workload.State.STOPPED)
    assert call(tokens["researcher"], "delete", url).status_code == 204
    error(call(tokens["researcher"], "get", url), 404, "not_found")
    assert Volume.objects.get(pk=volume["id"]).deleted_at is not None  # its task deletes it


@pytest.mark.parametrize(("mount", "words"), [
    ({"path": "/data"}, "Name one source"),
    ({"volume": 999999, "path": "/data"}, "No volume 999999"),
    ({"volume": "OTHER", "path": "/data"}, "No volume"),
    ({"volume": "LEADS", "path": "/data"}, "No volume"),
    ({"volume": "OWN", "path": "data"}, "not an absolute path"),
    ({"volume": "OWN", "path": "/etc/ssl"}, "system path"),
    ({"volume": "OWN", "path": "/"}, "system path"),
    ({"volume": "OWN", "path": "/a/../etc"}, "'..'"),
    ({"volume": "OWN", "path": "/home/portal"}, "the portal mounts"),
    ({"volume": "OWN", "path": "/data", "bucket": 1}, "unknown key"),
], ids=["no-source", "unknown", "other-project", "other-members", "relative", "system", "root",
        "dotdot", "portal-path", "unknown-key"])
def test_a_launch_mounts_only_what_its_caller_may_where_it_may(vision, tokens, mount, words):
    ids = {"OWN": make(tokens["researcher"], name="own")["id"],
           "LEADS": make(tokens["lead"], name="leads")["id"],
           "OTHER": make(tokens["student"], name="theirs")["id"]}
    entry = {k: ids.get(v, v) if k == "volume" else v for k, v in mount.items()}
    body = error(call(tokens["researcher"], "post", "/api/v1/workloads/",
                      {**LAUNCH, "mounts": [entry]}), 400, "invalid")
    assert words in body["fields"]["mounts"][0], body
    assert not Workload.objects.exists()


def test_a_project_volume_is_every_members_to_mount(vision, tokens):
    shared = make(tokens["lead"], name="shared", scope="project")
    launched = call(tokens["researcher"], "post", "/api/v1/workloads/",
                    {**LAUNCH, "mounts": [{"volume": shared["id"], "path": "/shared"}]})
    assert launched.status_code == 201, launched.content


def test_use_home_makes_the_home_volume_once_and_counts_it(vision, tokens):
    for name in ("one", "two"):
        response = call(tokens["researcher"], "post", "/api/v1/workloads/",
                        {**LAUNCH, "name": name, "use_home": True})
        assert response.status_code == 201, response.content
        assert [m["path"] for m in response.json()["mounts"]] == ["/home/portal"]
    home = Volume.objects.get(tenant=vision)
    assert (home.name, home.scope, home.claim_name, home.size_gib) == \
        ("home", "project", "gpu-portal-home", 100)
    listed = call(tokens["viewer"], "get", "/api/v1/volumes/").json()["results"]
    assert [row["name"] for row in listed] == ["home"]
    # the home volume holds the whole quota of 100 GiB here: nothing more fits
    error(call(tokens["researcher"], "post", "/api/v1/volumes/", {"name": "x", "size_gib": 1}),
          403, "quota_exceeded")


def test_the_storage_classes_offered(vision, tokens):
    body = call(tokens["viewer"], "get", "/api/v1/storage-classes/").json()
    assert body == [{"name": "archive", "description": "tape-backed, fixed size",
                     "expandable": False, "is_default": False},
                    {"name": "standard", "description": "fast SSD", "expandable": True,
                     "is_default": True}]


def files_put(token: str, volume_id: int):
    return call(token, "put", f"/api/v1/volumes/{volume_id}/files/content?path=a.txt", {})


def files_list(token: str, volume_id: int):
    return call(token, "get", f"/api/v1/volumes/{volume_id}/files/")


def test_a_volumes_files_follow_the_volumes_rule(vision, tokens):
    """The file API asks the volumes which claim a volume is and who may change its files
    (files/volumes.py): whoever sees the volume reads them, whoever may mount it changes them.
    These volumes are still pending, so a caller who passes is told so (409), before any file
    server is started."""
    mine = make(tokens["researcher"], name="mine")
    shared = make(tokens["lead"], name="shared", scope="project")
    leads = make(tokens["lead"], name="leads")
    # a member: their own volume and the project's, not another member's
    error(files_put(tokens["researcher"], mine["id"]), 409, "volume_not_bound")
    error(files_put(tokens["researcher"], shared["id"]), 409, "volume_not_bound")
    error(files_put(tokens["researcher"], leads["id"]), 404, "not_found")
    # a manager: every volume of the project
    error(files_put(tokens["lead"], mine["id"]), 409, "volume_not_bound")
    # a reader reads the project's files and changes none; sees no one's own volume
    error(files_list(tokens["viewer"], shared["id"]), 409, "volume_not_bound")
    error(files_put(tokens["viewer"], shared["id"]), 403, "permission_denied")
    error(files_list(tokens["viewer"], mine["id"]), 404, "not_found")
    # another project, or the same member with another project's token
    for token in (tokens["student"], tokens["researcher@nlp"]):
        error(files_list(token, shared["id"]), 404, "not_found")


def test_a_projects_file_server_mounts_its_bound_volumes_only(vision, tokens):
    from files.manifests import ClaimMount
    from files.volumes import project_claims

    pending = make(tokens["researcher"], name="pending")
    bound = make(tokens["lead"], name="bound", scope="project")
    gone = make(tokens["lead"], name="gone", scope="project")
    Volume.objects.filter(pk__in=[bound["id"], gone["id"]]).update(state=Volume.State.BOUND)
    Volume.objects.filter(pk=gone["id"]).update(deleted_at=timezone.now())

    assert project_claims(vision) == [ClaimMount(bound["claim_name"])]
    assert pending["claim_name"] not in {m.claim for m in project_claims(vision)}
