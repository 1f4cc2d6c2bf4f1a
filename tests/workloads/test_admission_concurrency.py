"""No over-admission under concurrency: the tenant row lock serialises admission (PostgreSQL)."""

import threading
import uuid
from collections.abc import Callable

import pytest
from django.db import IntegrityError, connection

from catalogue.models import GpuType, Template
from identity.models import User
from tenants.models import Tenant
from tenants.services import (
    department_create,
    department_delete,
    quota_update,
    tenant_department_set,
    tenant_ensure,
)
from tests.support.admission import admitted, all_at_once
from workloads.models import Workload
from workloads.services import AdmissionRefused, DepartmentCapExceeded, workload_launch

LAUNCHES = 50
QUOTA = 4


# serialized_rollback: the templates seeded by a migration are back even after another
# transactional test (tests/gpuctl) flushed the database
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_fifty_parallel_launches_against_a_quota_of_four_admit_exactly_four():
    assert connection.vendor == "postgresql"
    a100 = GpuType.objects.create(slug="a100", name="A100", node_selector={"gputype": "a100"})
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"race-lab {uuid.uuid4().hex[:6]}")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 100, "gpus_by_type": {"a100": QUOTA},
                          "max_workloads": 100, "cpu": 1000, "memory_gb": 10000})
    user = User.objects.create(username="racer", keystone_user_id=uuid.uuid4().hex)
    template = Template.objects.get(slug="custom")
    request = {"name": "race", "template": template, "kind": "batch", "gpu_type": a100,
               "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1}

    barrier = threading.Barrier(LAUNCHES)
    admitted, refused, errors = [], [], []

    def attempt(i: int) -> None:
        try:
            barrier.wait(timeout=30)  # all at once
            workload, _ = workload_launch(tenant=tenant, user=user,
                                          request={**request, "name": f"race {i}"})
            admitted.append(workload.pk)
        except AdmissionRefused as exc:
            refused.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - any other failure fails the test below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(LAUNCHES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    assert len(admitted) == QUOTA
    assert len(refused) == LAUNCHES - QUOTA
    assert all("uses 4 of 4 a100 GPUs" in message for message in refused)
    assert Workload.objects.filter(tenant=tenant).count() == QUOTA


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_fifty_parallel_launches_of_two_projects_against_their_departments_cap_of_four():
    """Each project's quota has room for all of them: the department's row, locked after the
    project's, serialises the launches of both, and the cap admits exactly four. The
    department's removal meanwhile (which locks its projects' rows, then its own) neither
    deadlocks with them nor lets one past the cap while it is there."""
    assert connection.vendor == "postgresql"
    a100 = GpuType.objects.create(slug="a100", name="A100", node_selector={"gputype": "a100"})
    physics = department_create(acting_user=None, fields={
        "name": f"Physics {uuid.uuid4().hex[:6]}", "gpu_caps_by_type": {"a100": QUOTA}})
    projects = []
    for name in ("optics", "plasma"):
        tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex,
                               name=f"{name} {uuid.uuid4().hex[:6]}")
        quota_update(tenant=tenant, acting_user=None,
                     changes={"gpus_total": 100, "gpus_by_type": {"a100": LAUNCHES},
                              "max_workloads": 100, "cpu": 1000, "memory_gb": 10000})
        projects.append(tenant_department_set(tenant=tenant, acting_user=None,
                                              department=physics))
    user = User.objects.create(username="racer", keystone_user_id=uuid.uuid4().hex)
    request = {"name": "race", "template": Template.objects.get(slug="custom"),
               "kind": "batch", "gpu_type": a100, "gpu_count": 1, "image": "busybox:1.36",
               "cpu": 1, "memory": 1}

    def launch(i: int) -> Callable[[], int]:
        return lambda: workload_launch(tenant=projects[i % 2], user=user,
                                       request={**request, "name": f"race {i}"})[0].tenant_id

    admitted_in, refused, errors = all_at_once([launch(i) for i in range(LAUNCHES)],
                                               refused=DepartmentCapExceeded)
    assert not errors, errors[:3]
    assert len(admitted_in) == QUOTA and len(refused) == LAUNCHES - QUOTA
    assert all("holds 4 of its cap of 4 a100 GPUs" in message for message in refused)
    assert Workload.objects.filter(tenant__in=projects).count() == QUOTA

    # the department removed while launches of its projects go on: no deadlock, no error
    def remove() -> None:
        department_delete(department=physics, acting_user=None)

    _, _, errors = all_at_once([launch(i) for i in range(10)] + [remove],
                               refused=DepartmentCapExceeded)
    assert not errors, errors[:3]
    assert not Tenant.objects.filter(pk__in=[p.pk for p in projects],
                                     department__isnull=False).exists()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_ten_launches_with_one_idempotency_key_make_one_workload_and_answer_it_nine_times():
    """The key is claimed again under the tenant lock: a request that waited for the lock while
    the first one committed answers with the first one's workload. Claimed only before the lock,
    the waiters met the first workload in the quota and were refused (`quota_exceeded`) although
    their launch had succeeded."""
    assert connection.vendor == "postgresql"
    a100 = GpuType.objects.create(slug="a100", name="A100", node_selector={"gputype": "a100"})
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"retry-lab {uuid.uuid4().hex[:6]}")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 1, "gpus_by_type": {"a100": 1},
                          "max_workloads": 100, "cpu": 1000, "memory_gb": 10000})
    user = User.objects.create(username="retrier", keystone_user_id=uuid.uuid4().hex)
    request = {"name": "once", "template": Template.objects.get(slug="custom"), "kind": "batch",
               "gpu_type": a100, "gpu_count": 1, "image": "busybox:1.36", "cpu": 1, "memory": 1}
    copies = 10
    barrier = threading.Barrier(copies)
    answers, errors = [], []

    def attempt() -> None:
        try:
            barrier.wait(timeout=30)
            workload, created = workload_launch(tenant=tenant, user=user, request=request,
                                                idempotency_key="train-once",
                                                request_fingerprint="same-body")
            answers.append((workload.pk, created))
        except Exception as exc:  # noqa: BLE001 - a refusal or any failure fails the test below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    assert sorted(created for _, created in answers) == [False] * (copies - 1) + [True]
    assert len({pk for pk, _ in answers}) == 1
    assert Workload.objects.filter(tenant=tenant).count() == 1


@pytest.mark.django_db
def test_an_integrity_error_of_a_launch_without_a_key_is_not_answered_by_an_earlier_launch(
        tenants, owner, gpu_types, monkeypatch):
    """Only a launch with an idempotency key may be answered by an earlier one when its row
    cannot be written: without a key, the lookup of "the launch with this key" would match
    every keyless launch of the user (`idempotency_key IS NULL`)."""
    tenant = tenants()
    custom = Template.objects.get(slug="custom")
    earlier = admitted(tenant, owner, custom, gpu_types["a100"], image="busybox:1.36")
    assert earlier.idempotency_key is None

    def refused(**_: object) -> Workload:
        raise IntegrityError("a constraint of the row")

    monkeypatch.setattr(Workload.objects, "create", refused)
    with pytest.raises(IntegrityError):
        admitted(tenant, owner, custom, gpu_types["a100"], image="busybox:1.36", name="later")
