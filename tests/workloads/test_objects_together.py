"""A launch's objects are created in two steps, the objects of each step at once
(workloads/objects.py): what the pods need first — the Secret, the tenant's home volume —,
answered before anything that makes pods is sent; then the Deployment, its Service and its
Ingress together. And at most once still: two create tasks of one launch running at the same
time (a redelivered message beside the first) make one set of objects. In kubesim over HTTP,
through the portal's own Kube with its creates noted."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from catalogue.models import Template
from kube.client import Kube, KubeRefused
from kube.labels import LABEL_WORKLOAD_ID
from tests.support.admission import admitted
from workloads.models import Workload
from workloads.objects import at_once, workload_objects_create
from workloads.tasks import workload_create_task

pytestmark = pytest.mark.timeout(120)

FIRST = {"Secret", "PersistentVolumeClaim"}
TOGETHER = {"Deployment", "Service", "Ingress"}
DOMAIN = "apps.gpu-portal.test"


class NotedKube(Kube):
    """The portal's Kube, noting when each create is sent and answered. The creates of the
    kinds in `meet` wait for each other before they are sent: only requests in flight at the
    same time pass (sent one after the other, the first waits in vain and the barrier breaks)."""

    def __init__(self, meet: set[str] = frozenset()) -> None:
        super().__init__()
        self.noted: list[tuple[str, str]] = []
        self.meet = meet
        self.barrier = threading.Barrier(len(meet) or 1, timeout=5)

    def create(self, obj: dict) -> dict:
        self.noted.append(("sent", obj["kind"]))
        if obj["kind"] in self.meet:
            self.barrier.wait()
        answer = super().create(obj)
        self.noted.append(("answered", obj["kind"]))
        return answer


@pytest.fixture
def shared_exposure(settings):
    """Services behind the shared gateway: a notebook has a Deployment, Service and Ingress."""
    settings.PORTAL_SERVICE_EXPOSURE = "shared"
    settings.PORTAL_SERVICE_DOMAIN = DOMAIN
    settings.PORTAL_INGRESS_CLASS = "gpu-portal"


def notebook(tenant, user, gpu_types, **request) -> Workload:
    return admitted(tenant, user, Template.objects.get(slug="jupyter"), gpu_types["a100"],
                    **request)


@pytest.mark.django_db
def test_a_notebooks_objects_are_sent_together_after_what_its_pods_need(
        tenants, owner, gpu_types, shared_exposure):  # noqa: F811
    workload = notebook(tenants(), owner, gpu_types, use_home=True)
    kube = NotedKube(meet=TOGETHER)

    created = workload_objects_create(workload, kube, queued=False)

    name = workload.object_name
    assert created == ["PersistentVolumeClaim gpu-portal-home", f"Secret {name}",
                       f"Deployment {name}", f"Service {name}", f"Ingress {name}"]
    # the three met at the barrier: all in flight at once, none sent after another's answer
    assert not kube.barrier.broken
    first_sent = min(i for i, (what, kind) in enumerate(kube.noted)
                     if what == "sent" and kind in TOGETHER)
    assert {kind for what, kind in kube.noted[:first_sent] if what == "answered"} == FIRST
    for kind in TOGETHER:
        live = Kube().get(kind, name, workload.tenant.namespace)
        assert live["metadata"]["labels"][LABEL_WORKLOAD_ID] == str(workload.pk)


@pytest.mark.django_db
def test_a_refused_first_step_sends_nothing_that_makes_pods(
        tenants, owner, gpu_types, shared_exposure):  # noqa: F811
    """The Secret exists and is someone else's: the launch is refused before its Deployment
    is sent, so no pod ever starts without what it needs."""
    tenant = tenants()
    workload = notebook(tenant, owner, gpu_types)
    Kube().create({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": workload.object_name, "namespace": tenant.namespace}, "stringData": {"x": "y"}})
    kube = NotedKube()

    with pytest.raises(KubeRefused, match="belongs to something else"):
        workload_objects_create(workload, kube, queued=False)

    assert [kind for what, kind in kube.noted if what == "sent"] == ["Secret"]
    for kind in TOGETHER:
        assert Kube().get(kind, workload.object_name, tenant.namespace) is None


@pytest.mark.django_db
def test_a_refusal_in_a_step_is_raised_once_the_step_is_answered(
        tenants, owner, gpu_types, shared_exposure):  # noqa: F811
    """The Service's name is taken by someone else's: the Deployment and Ingress sent with it
    are answered (created; the next try adopts them) before the refusal is raised."""
    tenant = tenants()
    workload = notebook(tenant, owner, gpu_types)
    Kube().create({"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": workload.object_name, "namespace": tenant.namespace},
        "spec": {"ports": [{"port": 80}]}})
    kube = NotedKube()

    with pytest.raises(KubeRefused, match="Service .* belongs to something else"):
        workload_objects_create(workload, kube, queued=False)

    assert sorted(kind for what, kind in kube.noted if what == "answered") == [
        "Deployment", "Ingress", "Secret"]


def test_at_once_returns_in_order_and_raises_the_first_failure_after_all_ended():
    ended = []

    def slow_failure() -> int:
        raise ValueError("first")

    def later(n: int):
        def call() -> int:
            ended.append(n)
            if n == 3:
                raise KeyError("third")
            return n
        return call

    assert at_once([later(1), later(2)]) == [1, 2]
    assert at_once([]) == [] and at_once([later(5)]) == [5]
    ended.clear()
    with pytest.raises(ValueError, match="first"):
        at_once([slow_failure, later(3), later(4)])
    assert sorted(ended) == [3, 4]  # every call ran to its end before the raise


# serialized_rollback: the templates seeded by a migration are back for the tests after
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_create_tasks_of_one_launch_at_once_make_one_set_of_objects(
        tenants, owner, gpu_types, shared_exposure):  # noqa: F811
    """A redelivered message beside the first, on a launch worker's threads: both claim the
    launch (creating → creating counts the try), both create under the same names; the
    loser of each race adopts the winner's object (409). One set of objects, one state."""
    tenant = tenants()
    workload = notebook(tenant, owner, gpu_types)
    start = threading.Barrier(2, timeout=30)
    errors: list[str] = []

    def task() -> None:
        try:
            start.wait()
            workload_create_task(workload.pk)
        except Exception as exc:  # noqa: BLE001 - any failure fails the test below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=task) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors

    workload.refresh_from_db()
    assert workload.state == Workload.State.PENDING, workload.reason
    assert workload.launch_attempts == 2
    selector = f"{LABEL_WORKLOAD_ID}={workload.pk}"
    for kind in ("Secret", *TOGETHER):
        items = Kube().list(kind, tenant.namespace, label_selector=selector)["items"]
        assert [o["metadata"]["name"] for o in items] == [workload.object_name], kind
    created = workload.events.filter(reason="Created").values_list("message", flat=True)
    # each object was made by one of the two; the other adopted it
    made = [part for message in created for part in message.split(", ")
            if message != "objects already present (adopted)"]
    assert sorted(made) == sorted(f"{kind} {workload.object_name}"
                                  for kind in ("Secret", *TOGETHER))


WRITES = ("INSERT", "UPDATE", "DELETE")


@pytest.mark.django_db
def test_a_create_task_takes_the_write_lock_twice(tenants, owner, gpu_types, shared_exposure):
    """Its claim, then its move with its "Created" event in one transaction: each turn of the
    write lock waits for every other writer of a burst on the demo's SQLite. A turn is a
    transaction of its own: here (inside the test's) a savepoint, or a write outside any."""
    workload = notebook(tenants(), owner, gpu_types)
    outside = len(connection.atomic_blocks)
    turns: list[str] = []

    def note(execute, sql, params, many, context):
        if len(connection.atomic_blocks) == outside and (
                sql.startswith("SAVEPOINT") or sql.lstrip().upper().startswith(WRITES)):
            turns.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note):
        workload_create_task(workload.pk)

    assert len(turns) == 2, turns
    workload.refresh_from_db()
    assert workload.state == Workload.State.PENDING
    created, = workload.events.filter(reason="Created").values_list("message", flat=True)
    assert created.startswith(f"Secret {workload.object_name}")
