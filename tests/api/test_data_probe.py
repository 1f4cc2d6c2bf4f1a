"""The data surfaces probed as an attacker would: volumes, their files, secrets, datasets and a
launch's mounts, secrets and checkpoint, by every role and from another project.

Three tables, each a rule per row, so that a rule taken out of the code fails its rows:
- ACCESS: who may see, change, read the files of, write the files of and mount each volume; see,
  replace, delete and use each secret; see and change each dataset. Another project's object,
  and another user's own one, is a 404 (never a 403) and a refused write changes nothing.
- SHAPES: malformed and hostile bodies, paths and ids (wrong types, NUL and control characters,
  digits that are not ASCII, huge and negative figures, scope escalations, classes not offered,
  unknown keys) answered 4xx in the API's error shape, never 5xx, nothing changed.
- A secret's value written through every kind, refused in every way, then looked for in every
  answer, page and the audit trail: it is in none.

The world is made once for the module (tests/support/database.py): two projects, a user volume
of researcher, lead and student each, a project volume of vision-lab, a user secret of each and a
project secret, a dataset open to each project alone. Volumes stay pending (no provisioner runs
here), so whoever may reach a volume's files is told 409 volume_not_bound before any file server
is asked; the file server's own paths are probed in tests/files/test_end_to_end.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, TestCase, override_settings

from audit.models import AuditRecord
from credentials.models import Secret
from credentials.services import secret_create
from identity.identity import Identity
from storage.models import Dataset, StorageClass, Volume
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.database import demo_gpu_types, rows_of_the_module
from tests.support.sessions import keystone_identities, signed_in
from tests.support.tokens import project_tokens

pytestmark = pytest.mark.django_db

VALUE = "probe-VALUE-9f3b7c1e"  # every secret value written here holds it
ROLES = ("researcher@vision", "lead@vision", "viewer@vision", "student@nlp", "researcher@nlp",
         "admin@admin")
LAUNCH = {"name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
BATCH = {"name": "probe", "template": "custom", "kind": "batch", "image": "busybox:1.36",
         "command": ["sh", "-c", "true"], "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture(scope="module")
def tokens(keystone) -> dict[str, str]:
    projects = {"vision": "vision-lab", "nlp": "nlp-lab", "admin": "admin"}
    return project_tokens(keystone.url, {key: (key.split("@")[0], projects[key.split("@")[1]])
                                         for key in ROLES})


@dataclasses.dataclass
class World:
    tokens: dict[str, str]
    volumes: dict[str, Volume]  # "researcher", "lead", "student": their user volumes; "project"
    secrets: dict[str, Secret]  # the same keys: user secrets, and vision-lab's project secret
    datasets: dict[str, Dataset]  # "vision", "nlp": open to that project alone

    def call(self, who: str, method: str, url: str, body: Any = None, *, raw: bytes | None = None,
             content_type: str = "application/json"):
        client = Client(HTTP_X_AUTH_TOKEN=self.tokens[who])
        with TestCase.captureOnCommitCallbacks(execute=False):  # queued side effects: none run
            if raw is not None:
                return client.generic(method, url, raw, content_type=content_type)
            if body is None:
                return client.generic(method, url)
            return client.generic(method, url, json.dumps(body), content_type=content_type)


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker, tokens, kubesim) -> Iterator[World]:
    with rows_of_the_module(django_db_blocker):
        with django_db_blocker.unblock(), override_settings(KUBECONFIG=str(kubesim.kubeconfig)):
            yield make_world(tokens)


@pytest.fixture
def world(shared_world, cluster) -> World:
    return shared_world


def make_world(tokens: dict[str, str]) -> World:
    for token in tokens.values():  # first contact records the users and the tenants
        assert Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    demo_gpu_types()
    people = get_user_model().objects
    tenants = {key: Tenant.objects.get(name=name)
               for key, name in (("vision", "vision-lab"), ("nlp", "nlp-lab"))}
    for tenant in tenants.values():
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 8, "gpus_by_type": {"a100": 4}, "max_workloads": 20,
                              "storage_gib": 1000, "volumes": 50})
        tenant_reconcile(tenant_id=tenant.pk)  # its namespace: a secret's value goes there
    StorageClass.objects.create(name="standard", description="fast SSD", expandable=True,
                                is_default=True)
    StorageClass.objects.create(name="archive", description="fixed size")
    StorageClass.objects.create(name="withdrawn", description="no longer offered",
                                enabled=False)
    volumes, secrets = {}, {}
    for key, tenant, owner, scope in (("researcher", "vision", "researcher", "user"),
                                      ("lead", "vision", "lead", "user"),
                                      ("project", "vision", "lead", "project"),
                                      ("student", "nlp", "student", "user")):
        volumes[key] = Volume.objects.create(
            tenant=tenants[tenant], owner=people.get(name=owner), scope=scope,
            name=f"probe-{key}", size_gib=1, storage_class="standard",
            claim_name=f"vol-probe-{key}")
        secrets[key] = secret_create(tenant=tenants[tenant], acting_user=people.get(name=owner),
                                     name=f"probe-{key}", kind="env", scope=scope,
                                     data={"PROBE": VALUE})
    datasets = {}
    for key in ("vision", "nlp"):
        datasets[key] = Dataset.objects.create(
            name=f"probe-{key}", kind=Dataset.Kind.NFS, size_gib=1,
            source={"server": "nfs.example.org", "path": f"/{key}"})
        datasets[key].tenants.set([tenants[key]])
    return World(tokens=tokens, volumes=volumes, secrets=secrets, datasets=datasets)


def snapshot() -> tuple:
    """What a refused request must leave as it was."""
    return (
        sorted(Volume.objects.values_list("pk", "tenant_id", "owner_id", "scope", "name",
                                          "size_gib", "storage_class", "deleted_at")),
        sorted(Secret.objects.values_list("pk", "tenant_id", "owner_id", "scope", "name", "kind",
                                          "keys", "updated_at")),
        sorted(Dataset.objects.values_list("pk", "name", "description", "size_gib",
                                           "open_to_all")),
        sorted(Dataset.tenants.through.objects.values_list("dataset_id", "tenant_id")),
    )


def assert_error_shape(response) -> dict:
    body = response.json()
    assert set(body) == {"code", "category", "detail", "fields"}, body
    return body


# ---------------------------------------------------------------------------------------------
# ACCESS: each object, each role, each verb

# (who sees it, who changes it) per volume; everyone else: 404
VOLUME_RULES = {
    "researcher": ({"researcher@vision", "lead@vision", "admin@admin"},
                   {"researcher@vision", "lead@vision", "admin@admin"}),
    "lead": ({"lead@vision", "admin@admin"}, {"lead@vision", "admin@admin"}),
    "project": ({"researcher@vision", "lead@vision", "viewer@vision", "admin@admin"},
                {"lead@vision", "admin@admin"}),
    "student": ({"student@nlp", "admin@admin"}, {"student@nlp", "admin@admin"}),
}
# who may mount each volume in a launch in the project of their token (a reader launches
# nothing: 403 before the mounts are read; an admin's token is for the project `admin`)
VOLUME_MOUNTERS = {
    "researcher": {"researcher@vision", "lead@vision"},
    "lead": {"lead@vision"},
    "project": {"researcher@vision", "lead@vision"},
    "student": {"student@nlp"},
}
# secrets: (who sees it, who replaces and deletes it, who uses it in a launch)
SECRET_RULES = {
    "researcher": ({"researcher@vision"}, {"researcher@vision"}, {"researcher@vision"}),
    "lead": ({"lead@vision"}, {"lead@vision"}, {"lead@vision"}),
    "project": ({"researcher@vision", "lead@vision", "viewer@vision", "admin@admin"},
                {"lead@vision", "admin@admin"}, {"researcher@vision", "lead@vision"}),
    "student": ({"student@nlp"}, {"student@nlp"}, {"student@nlp"}),
}
# datasets: who sees (and mounts, where they may launch) each; only admins change one
DATASET_VIEWERS = {
    "vision": {"researcher@vision", "lead@vision", "viewer@vision", "admin@admin"},
    "nlp": {"student@nlp", "researcher@nlp", "admin@admin"},
}
LAUNCHERS = {"researcher@vision", "lead@vision", "student@nlp", "researcher@nlp", "admin@admin"}


@dataclasses.dataclass(frozen=True)
class Case:
    who: str
    method: str
    path: str  # with {volume}, {secret} or {dataset}: the target's id
    target: str
    expected: int
    body: Any = None

    @property
    def id(self) -> str:
        path = self.path.split("{")[0] + "{id}" + self.path.split("}")[-1] \
            if "{" in self.path else self.path
        use = next((key for key in ("mounts", "checkpoint", "secrets")
                    if isinstance(self.body, dict) and key in self.body), "")
        return f"{self.who} {self.method} {path} {use} of {self.target}'s -> {self.expected}"


def _change(may_see: bool, may_change: bool, ok: int) -> int:
    return ok if may_change else 403 if may_see else 404


def access_cases() -> list[Case]:
    cases = []
    for target, (seers, changers) in VOLUME_RULES.items():
        for who in ROLES:
            sees, changes = who in seers, who in changers
            writes_files = who in VOLUME_MOUNTERS[target] or changes and who == "admin@admin"
            cases += [
                Case(who, "GET", "/api/v1/volumes/{volume}/", target, 200 if sees else 404),
                Case(who, "PATCH", "/api/v1/volumes/{volume}/", target,
                     _change(sees, changes, 200), {"size_gib": 2}),
                Case(who, "DELETE", "/api/v1/volumes/{volume}/", target,
                     _change(sees, changes, 204)),
                # the files: 409 (not bound yet) where the caller reaches them
                Case(who, "GET", "/api/v1/volumes/{volume}/files/", target,
                     409 if sees else 404),
                Case(who, "PUT", "/api/v1/volumes/{volume}/files/content?path=x", target,
                     _change(sees, writes_files, 409), b"x"),
                Case(who, "DELETE", "/api/v1/volumes/{volume}/files/content?path=x", target,
                     _change(sees, writes_files, 409)),
                Case(who, "POST", "/api/v1/workloads/check/", target,
                     403 if who == "viewer@vision" else
                     200 if who in VOLUME_MOUNTERS[target] else 400,
                     {**LAUNCH, "mounts": [{"volume": "{volume}", "path": "/data"}]}),
                Case(who, "POST", "/api/v1/workloads/check/", target,
                     403 if who == "viewer@vision" else
                     200 if who in VOLUME_MOUNTERS[target] else 400,
                     {**BATCH, "checkpoint": {"volume": "{volume}"}}),
            ]
    for target, (seers, changers, users) in SECRET_RULES.items():
        for who in ROLES:
            sees, changes = who in seers, who in changers
            cases += [
                Case(who, "GET", "/api/v1/secrets/{secret}/", target, 200 if sees else 404),
                Case(who, "PUT", "/api/v1/secrets/{secret}/", target,
                     _change(sees, changes, 200), {"data": {"PROBE": VALUE + "-new"}}),
                Case(who, "DELETE", "/api/v1/secrets/{secret}/", target,
                     _change(sees, changes, 204)),
                Case(who, "POST", "/api/v1/workloads/check/", target,
                     403 if who == "viewer@vision" else 200 if who in users else 400,
                     {**LAUNCH, "secrets": [{"secret": "{secret}"}]}),
            ]
    for target, seers in DATASET_VIEWERS.items():
        for who in ROLES:
            sees = who in seers
            admin = who == "admin@admin"
            cases += [
                Case(who, "GET", "/api/v1/datasets/{dataset}/", target, 200 if sees else 404),
                Case(who, "PATCH", "/api/v1/datasets/{dataset}/", target,
                     _change(sees, admin, 200), {"description": "changed"}),
                Case(who, "DELETE", "/api/v1/datasets/{dataset}/", target,
                     _change(sees, admin, 204)),
                Case(who, "POST", "/api/v1/workloads/check/", target,
                     403 if who == "viewer@vision" else
                     200 if sees and who in LAUNCHERS and not admin else 400,
                     {**LAUNCH, "mounts": [{"dataset": "{dataset}"}]}),
            ]
    return cases


ACCESS = access_cases()


def _filled(value: Any, ids: dict[str, int]) -> Any:
    """`value` with "{volume}" (and the others) as the target's id, as a number in a body."""
    if isinstance(value, str):
        for name, number in ids.items():
            if value == "{" + name + "}":
                return number
            value = value.replace("{" + name + "}", str(number))
        return value
    if isinstance(value, dict):
        return {key: _filled(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, ids) for item in value]
    return value


def _ids(world: World, target: str) -> dict[str, int]:
    return {"volume": world.volumes[target].pk if target in world.volumes else 0,
            "secret": world.secrets[target].pk if target in world.secrets else 0,
            "dataset": world.datasets[target].pk if target in world.datasets else 0}


@pytest.mark.parametrize("case", ACCESS, ids=[case.id for case in ACCESS])
def test_each_role_reaches_each_object_by_its_rule(world, case):
    ids = _ids(world, case.target)
    before = snapshot()
    url = _filled(case.path, ids)
    if isinstance(case.body, bytes):
        response = world.call(case.who, case.method, url, raw=case.body,
                              content_type="application/octet-stream")
    else:
        response = world.call(case.who, case.method, url, _filled(case.body, ids))
    content = b"" if getattr(response, "streaming", False) else response.content
    assert response.status_code == case.expected, content[:400]
    assert VALUE.encode() not in content
    if response.status_code >= 400:
        assert_error_shape(response)
        assert snapshot() == before


# ---------------------------------------------------------------------------------------------
# SHAPES: hostile bodies, ids and paths, each refused with a 4xx in the error shape

ARABIC_ONE, SUPERSCRIPT_TWO = "\u0661", "\u00b2"  # int() reads the first as 1


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    method: str
    path: str
    body: Any = None
    expected: int = 400
    field: str | None = None  # the field the refusal names
    who: str = "researcher@vision"
    raw: bytes | None = None
    content_type: str = "application/json"


NEW = {"name": "new", "size_gib": 1}
NFS = {"name": "new-set", "kind": "nfs", "size_gib": 1, "server": "nfs.example.org",
       "path": "/data"}
SHAPES = [
    # volumes: making one
    Shape("size as text of Arabic-Indic digits", "POST", "/api/v1/volumes/",
          {**NEW, "size_gib": ARABIC_ONE}, field="size_gib"),
    Shape("size as superscript digits", "POST", "/api/v1/volumes/",
          {**NEW, "size_gib": SUPERSCRIPT_TWO}, field="size_gib"),
    Shape("size a fraction", "POST", "/api/v1/volumes/", {**NEW, "size_gib": 1.5},
          field="size_gib"),
    Shape("size a boolean", "POST", "/api/v1/volumes/", {**NEW, "size_gib": True},
          field="size_gib"),
    Shape("size zero", "POST", "/api/v1/volumes/", {**NEW, "size_gib": 0}, field="size_gib"),
    Shape("size negative", "POST", "/api/v1/volumes/", {**NEW, "size_gib": -1},
          field="size_gib"),
    Shape("size huge", "POST", "/api/v1/volumes/", {**NEW, "size_gib": 10**40},
          field="size_gib"),
    Shape("size null", "POST", "/api/v1/volumes/", {**NEW, "size_gib": None}, field="size_gib"),
    Shape("name with NUL", "POST", "/api/v1/volumes/", {**NEW, "name": "a\x00b"},
          field="name"),
    Shape("name with a right-to-left override", "POST", "/api/v1/volumes/",
          {**NEW, "name": "a\u202eb"}, field="name"),
    Shape("name very long", "POST", "/api/v1/volumes/", {**NEW, "name": "n" * 10000},
          field="name"),
    Shape("name a list", "POST", "/api/v1/volumes/", {**NEW, "name": ["a"]}, field="name"),
    Shape("scope unknown", "POST", "/api/v1/volumes/", {**NEW, "scope": "tenant"},
          field="scope"),
    Shape("storage class withdrawn", "POST", "/api/v1/volumes/",
          {**NEW, "storage_class": "withdrawn"}, field="storage_class"),
    Shape("storage class with NUL", "POST", "/api/v1/volumes/",
          {**NEW, "storage_class": "standard\x00"}, field="storage_class"),
    Shape("a member's project volume", "POST", "/api/v1/volumes/",
          {**NEW, "scope": "project"}, expected=403),
    Shape("a reader's volume", "POST", "/api/v1/volumes/", NEW, expected=403,
          who="viewer@vision"),
    Shape("a body that is a list", "POST", "/api/v1/volumes/", [NEW]),
    Shape("malformed JSON", "POST", "/api/v1/volumes/", raw=b'{"name": "x", "size_gib": 1'),
    Shape("a body not UTF-8", "POST", "/api/v1/volumes/", raw=b'{"name": "\xff"}'),
    Shape("a form body", "POST", "/api/v1/volumes/", raw=b"name=x&size_gib=1",
          content_type="text/plain", expected=415),
    # volumes: growing one
    Shape("grow by Arabic-Indic digits", "PATCH", "/api/v1/volumes/{researcher}/",
          {"size_gib": "\u0663"}, field="size_gib"),
    Shape("grow smaller", "PATCH", "/api/v1/volumes/{researcher}/", {"size_gib": 0},
          field="size_gib"),
    Shape("grow without a size", "PATCH", "/api/v1/volumes/{researcher}/",
          {"scope": "project"}, field="size_gib"),
    Shape("replace by PUT", "PUT", "/api/v1/volumes/{researcher}/", NEW, expected=405),
    # ids that are no id
    Shape("an id of Arabic-Indic digits", "GET", "/api/v1/volumes/\u0661/", expected=404),
    Shape("an id past 64 bits", "GET", "/api/v1/volumes/99999999999999999999999/",
          expected=404),
    Shape("files of an id past 64 bits", "GET",
          "/api/v1/volumes/99999999999999999999999/files/", expected=404),
    Shape("a negative id", "GET", "/api/v1/volumes/-1/", expected=404),
    Shape("an id with a NUL", "GET", "/api/v1/volumes/%00/", expected=404),
    Shape("a secret id of Arabic-Indic digits", "GET", "/api/v1/secrets/\u0661/", expected=404),
    Shape("a dataset id past 64 bits", "GET", "/api/v1/datasets/99999999999999999999999/",
          expected=404),
    # a file path with a NUL is refused before the volume's storage is looked at
    Shape("a file path with NUL", "GET", "/api/v1/volumes/{researcher}/files/content?path=a%00b",
          field="path"),
    Shape("a file path very long", "GET",
          "/api/v1/volumes/{researcher}/files/content?path=" + "a/" * 3000, field="path"),
    Shape("a folder path with NUL", "POST", "/api/v1/volumes/{researcher}/files/folders/",
          {"path": "a\x00"}, field="path"),
    Shape("a move without from", "POST", "/api/v1/volumes/{researcher}/files/moves/",
          {"to": "b"}, field="from"),
    Shape("an upload without a length", "PUT",
          "/api/v1/volumes/{researcher}/files/content?path=x", raw=b"",
          content_type="application/octet-stream", expected=411),
    # datasets (admins)
    Shape("a dataset of Arabic-Indic size", "POST", "/api/v1/datasets/",
          {**NFS, "size_gib": ARABIC_ONE}, field="size_gib", who="admin@admin"),
    Shape("a dataset open to a project of Arabic-Indic id", "POST", "/api/v1/datasets/",
          {**NFS, "projects": [ARABIC_ONE]}, field="projects", who="admin@admin"),
    Shape("a dataset open to no such project", "POST", "/api/v1/datasets/",
          {**NFS, "projects": [2**62]}, field="projects", who="admin@admin"),
    Shape("a dataset path with '..'", "POST", "/api/v1/datasets/",
          {**NFS, "path": "/data/../etc"}, field="path", who="admin@admin"),
    Shape("a dataset server with a line break", "POST", "/api/v1/datasets/",
          {**NFS, "server": "nfs\nexample"}, field="server", who="admin@admin"),
    Shape("a dataset field of another kind", "POST", "/api/v1/datasets/",
          {**NFS, "bucket": "imagenet"}, field="bucket", who="admin@admin"),
    Shape("an S3 prefix with '..'", "POST", "/api/v1/datasets/",
          {"name": "s3-set", "kind": "s3", "size_gib": 1, "endpoint": "https://s3.example.org",
           "bucket": "imagenet", "prefix": "a/../../b"}, field="prefix", who="admin@admin"),
    Shape("a member's dataset", "POST", "/api/v1/datasets/", NFS, expected=403),
    # a launch's mounts, secrets and checkpoint
    Shape("a mount of a volume id in Arabic-Indic digits", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": ARABIC_ONE, "path": "/data"}]}, field="mounts"),
    Shape("a mount of a dataset id in Arabic-Indic digits", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"dataset": ARABIC_ONE}]}, field="mounts"),
    Shape("a secret id in Arabic-Indic digits", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "secrets": [{"secret": ARABIC_ONE}]}, field="secrets"),
    Shape("a checkpoint volume id in Arabic-Indic digits", "POST", "/api/v1/workloads/check/",
          {**BATCH, "checkpoint": {"volume": ARABIC_ONE}}, field="checkpoint"),
    Shape("a mount with '..'", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "path": "/data/../etc"}]},
          field="mounts"),
    Shape("a mount over a system path", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "path": "/usr"}]}, field="mounts"),
    Shape("a mount with a backslash", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "path": "/data\\x"}]},
          field="mounts"),
    Shape("a mount naming two sources", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "dataset": "{vision}",
                                 "path": "/data"}]}, field="mounts"),
    Shape("a dataset mounted writable", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"dataset": "{vision}", "read_only": False}]}, field="mounts"),
    Shape("a mount of unknown keys", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "path": "/data",
                                 "sub_path": "../"}]}, field="mounts"),
    Shape("more mounts than allowed", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": [{"volume": "{researcher}", "path": f"/d{i}"}
                                for i in range(500)]}, field="mounts"),
    Shape("a mount that is no object", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "mounts": ["x"]}, field="mounts"),
    Shape("a file secret mounted over /etc", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "secrets": [{"secret": "{project-secret}", "path": "/etc"}]},
          field="secrets"),
    Shape("a checkpoint on a dataset", "POST", "/api/v1/workloads/check/",
          {**BATCH, "checkpoint": {"dataset": "{vision}"}}, field="checkpoint"),
    Shape("a checkpoint folder with '..'", "POST", "/api/v1/workloads/check/",
          {**BATCH, "checkpoint": {"volume": "{researcher}", "path": "a/../../b"}},
          field="checkpoint"),
    Shape("a checkpoint on a service", "POST", "/api/v1/workloads/check/",
          {**LAUNCH, "checkpoint": {"volume": "{researcher}"}}, field="checkpoint"),
]


def _shape_ids(world: World) -> dict[str, int]:
    return {"researcher": world.volumes["researcher"].pk, "vision": world.datasets["vision"].pk,
            "project-secret": world.secrets["project"].pk}


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_hostile_shapes_are_refused_in_the_error_shape(world, shape):
    ids = _shape_ids(world)
    before = snapshot()
    url = _filled(shape.path, ids)
    if shape.raw is not None:
        response = world.call(shape.who, shape.method, url, raw=shape.raw,
                              content_type=shape.content_type)
    else:
        response = world.call(shape.who, shape.method, url, _filled(shape.body, ids))
    assert response.status_code == shape.expected, response.content[:400]
    body = assert_error_shape(response)
    if shape.field is not None:
        assert shape.field in body["fields"], body
        assert "['" not in json.dumps(body["fields"]), body  # messages, not a list's repr
    assert snapshot() == before


# ---------------------------------------------------------------------------------------------
# A secret's value: in no answer, page or audit record, whatever was sent

REFUSED_DATA = [
    ("a line pasted whole as a variable", "env", {f"HF_TOKEN={VALUE}": ""}),
    ("a line pasted with a colon", "env", {f"HF_TOKEN: {VALUE}": "x"}),
    ("a name too long, holding the value", "env", {"A" * 130 + VALUE: "x"}),
    ("a value with a NUL", "env", {"HF_TOKEN": VALUE + "\x00"}),
    ("a value too long", "env", {"HF_TOKEN": VALUE * 5000}),
    ("a value that is a list", "env", {"HF_TOKEN": [VALUE]}),
    ("data that is the value", "env", VALUE),
    ("a file named by its content", "file", {f"token={VALUE}": VALUE}),
    ("a registry field unknown", "registry", {"server": "registry.example.org", "username": "u",
                                              "password": "p", f"token={VALUE}": VALUE}),
    ("a registry password with a line break", "registry",
     {"server": "registry.example.org", "username": "u", "password": VALUE + "\n"}),
    ("a registry server that is the value", "registry",
     {"server": VALUE + " x", "username": "u", "password": VALUE}),
    ("an S3 endpoint holding a password", "s3",
     {"endpoint": f"https://key:{VALUE}@s3.example.org", "bucket": "data", "access_key": "a",
      "secret_key": VALUE}),
    ("S3 keys with spaces", "s3", {"endpoint": "https://s3.example.org", "bucket": "data",
                                   "access_key": VALUE + " x", "secret_key": VALUE + " y"}),
    ("an S3 field unknown", "s3", {"endpoint": "https://s3.example.org", "bucket": "data",
                                   "access_key": "a", "secret_key": "s", VALUE: VALUE}),
]


@pytest.mark.parametrize(("what", "kind", "data"), REFUSED_DATA,
                         ids=[what for what, _, _ in REFUSED_DATA])
def test_a_refused_secret_never_quotes_its_value(world, what, kind, data):
    answers = [world.call("researcher@vision", "POST", "/api/v1/secrets/",
                          {"name": "refused", "kind": kind, "data": data})]
    if kind == "env":  # the secret replaced is an env secret
        answers.append(world.call("researcher@vision", "PUT",
                                  f"/api/v1/secrets/{world.secrets['researcher'].pk}/",
                                  {"data": data}))
    for response in answers:
        assert response.status_code == 400, response.content[:300]
        assert_error_shape(response)
        assert VALUE not in response.content.decode()
    assert VALUE not in json.dumps(list(AuditRecord.objects.values()), default=str)


def test_a_refused_secret_page_never_shows_its_value(world, as_user):
    browser = as_user("researcher")
    for form in ({"name": "refused", "kind": "env", "scope": "user",
                  "env": f"HF_TOKEN: {VALUE}=x"},
                 {"name": "Bad Name", "kind": "env", "scope": "user",
                  "env": f"HF_TOKEN={VALUE}"},
                 {"name": "refused", "kind": "registry", "scope": "user",
                  "server": "not a host", "username": VALUE, "password": VALUE},
                 {"name": "refused", "kind": "s3", "scope": "user", "endpoint": "ftp://x",
                  "bucket": "data", "access_key": VALUE, "secret_key": VALUE}):
        page = browser.post("/secrets/", form)
        assert page.status_code == 400
        assert VALUE not in page.content.decode(), form


@pytest.mark.parametrize("kind", ["env", "file", "registry", "s3"])
def test_a_secrets_value_is_in_no_answer_page_or_record(world, as_user, kind):
    data = {"env": {"HF_TOKEN": VALUE},
            "file": {"token.txt": VALUE},
            "registry": {"server": "registry.example.org", "username": "robot",
                         "password": VALUE},
            "s3": {"endpoint": "https://s3.example.org", "bucket": "data",
                   "access_key": "AKIAPROBE", "secret_key": VALUE}}[kind]
    made = world.call("lead@vision", "POST", "/api/v1/secrets/",
                      {"name": f"shown-{kind}", "kind": kind, "scope": "project", "data": data})
    assert made.status_code == 201, made.content[:300]
    secret_id = made.json()["id"]
    replaced = world.call("lead@vision", "PUT", f"/api/v1/secrets/{secret_id}/", {"data": data})
    assert replaced.status_code == 200, replaced.content[:300]
    answers = [made, replaced]
    for who in ROLES:
        answers += [world.call(who, "GET", "/api/v1/secrets/"),
                    world.call(who, "GET", f"/api/v1/secrets/{secret_id}/")]
    answers.append(world.call("researcher@vision", "POST", "/api/v1/workloads/check/",
                              {**LAUNCH, "secrets": [{"secret": secret_id}]}))
    for who in ("researcher", "lead", "viewer"):
        browser = as_user(who)
        answers += [browser.get("/secrets/"), browser.get(f"/secrets/{secret_id}/")]
    for response in answers:
        assert response.status_code < 500
        assert VALUE not in response.content.decode(), response.content[:300]
    assert VALUE not in json.dumps(list(AuditRecord.objects.values()), default=str)


def test_the_volumes_page_takes_sizes_in_ascii_digits_only(world, as_user):
    browser = as_user("researcher")
    before = snapshot()
    made = browser.post("/volumes/new/", {"name": "paged", "size_gib": ARABIC_ONE,
                                          "scope": "user"})
    assert made.status_code == 400
    volume = world.volumes["researcher"]
    grown = browser.post(f"/volumes/{volume.pk}/grow/", {"size_gib": "\u0663"})
    assert grown.status_code == 302
    assert snapshot() == before


# ---------------------------------------------------------------------------------------------
# The pages: the same rules in the browser, and hostile queries answered without a 5xx

PAGE_ROLES = {"researcher@vision": ("researcher", "vision-lab"),
              "lead@vision": ("lead", "vision-lab"),
              "viewer@vision": ("viewer", "vision-lab"),
              "student@nlp": ("student", "nlp-lab"),
              "researcher@nlp": ("researcher", "nlp-lab")}


def page_cases() -> list[Case]:
    cases = []
    for who in PAGE_ROLES:
        cases += [Case(who, "GET", url, "", 200) for url in (
            "/volumes/", "/volumes/?scope=x&state=y&name=%00&page=99999999999999999999",
            "/datasets/", "/secrets/")]
        cases += [Case(who, "GET", url, "", 403) for url in (
            "/admin/datasets/", "/admin/storage-classes/", "/admin/datasets/{dataset}/")]
        for target, (seers, changers) in VOLUME_RULES.items():
            sees, changes = who in seers, who in changers
            cases += [
                # the browser of a pending volume: the page, saying why its files wait
                Case(who, "GET", "/volumes/{volume}/files/?path=%00", target,
                     200 if sees else 404),
                Case(who, "POST", "/volumes/{volume}/grow/", target,
                     _change(sees, changes, 302), {"size_gib": "2"}),
                Case(who, "POST", "/volumes/{volume}/delete/", target,
                     _change(sees, changes, 302), {}),
            ]
        for target, (seers, changers, _) in SECRET_RULES.items():
            sees, changes = who in seers, who in changers
            cases += [
                Case(who, "GET", "/secrets/{secret}/", target, 200 if sees else 404),
                Case(who, "POST", "/secrets/{secret}/", target, _change(sees, changes, 302),
                     {"env": f"PROBE={VALUE}"}),
                Case(who, "POST", "/secrets/{secret}/delete/", target,
                     _change(sees, changes, 302), {}),
            ]
    return cases


PAGE_CASES = page_cases()


@pytest.fixture(scope="module")
def page_identities(keystone) -> dict[str, Identity]:
    """The page roles' Keystone identities, from the real Keystone once for the module: each
    test signs its role in with it (tests/support/sessions.py) rather than through the login
    form, which 155 tests went through again (tests/identity/test_login.py proves the form)."""
    return keystone_identities(PAGE_ROLES)


@pytest.mark.parametrize("case", PAGE_CASES, ids=[case.id for case in PAGE_CASES])
def test_each_role_reaches_each_page_by_its_rule(world, page_identities, case):
    browser = signed_in(page_identities[case.who])
    target = case.target or "researcher"
    ids = {**_ids(world, target), "dataset": world.datasets["vision"].pk}
    before = snapshot()
    url = _filled(case.path, ids)
    response = browser.get(url) if case.method == "GET" else browser.post(url, case.body)
    assert response.status_code == case.expected, response.content[:300]
    assert VALUE not in response.content.decode()
    if response.status_code >= 400:
        assert snapshot() == before
