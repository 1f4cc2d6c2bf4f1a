"""Writes of secrets: create, replace, delete; atomic, audited, and the value written to the
cluster inside the request.

Where a value lives, and why there: the Kubernetes Secret in the project's namespace is the
only store. The service writes it through kube/ while the row's transaction is open, so that
either both are there or neither: a cluster that does not answer (or refuses) rolls the row
back and the caller hears 503 with nothing recorded. The value never reaches the database (the
row keeps the names of its keys), the Celery broker (no task carries it: nothing is queued),
an audit record (name, kind, scope and key names only), a log line or an event. Encrypting
values into the database with a key from the settings was the other way: it would put a
second copy of every value, and the key beside it, wherever the database and its backups go,
and the value would still have to be written into the namespace for a pod to read it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from audit.services import audit_record
from identity.models import User
from kube.client import Conflict, Kube, KubeRefused, NotFound
from kube.labels import (
    LABEL_OWNER_ID,
    LABEL_PROJECT_ID,
    LABEL_SECRET_ID,
    MANAGED_BY,
    label_value,
    secret_object_name,
)
from notifications.models import Kind
from notifications.services import notify
from tenants.models import Tenant

from .manifests import REGISTRY, make_secret
from .models import Secret
from .pulls import UNREACHABLE, login_check
from .validation import SecretInvalid, keys_of, secret_clean

log = logging.getLogger(__name__)


class SecretNameTaken(SecretInvalid):
    """A project already has a project secret (or this user one of theirs) of that name."""


class RegistryLoginRefused(SecretInvalid):
    """The registry refused a registry secret's user and password (as `docker login` would):
    nothing recorded. The message names the registry, never the password."""

    code = "registry_login_failed"


@sensitive_variables()
def _registry_login(kind: str, values: dict[str, str]) -> None:
    """A registry secret's login tried at its registry before it is kept, within
    PORTAL_REGISTRY_CHECK_SECONDS (0: not tried): a refusal is RegistryLoginRefused; a
    registry the portal cannot reach keeps the secret (the nodes may reach it where the portal
    does not), and each launch tries it again."""
    seconds = settings.PORTAL_REGISTRY_CHECK_SECONDS
    if kind != REGISTRY or not seconds:
        return
    check = login_check(values["server"], values["username"], values["password"],
                        timeout=seconds)
    if check.refused:
        raise RegistryLoginRefused({"data": [check.message]})
    if check.outcome == UNREACHABLE:
        log.info("registry secret kept untried: %s", check.message)


def _audit(secret: Secret) -> dict[str, Any]:
    """What the audit trail keeps of a secret: never its value."""
    return {"id": secret.pk, "name": secret.name, "kind": secret.kind, "scope": secret.scope,
            "keys": list(secret.keys)}


def _manifest(secret: Secret, data: dict[str, str]) -> dict[str, Any]:
    labels = {**MANAGED_BY, LABEL_SECRET_ID: str(secret.pk),
              LABEL_PROJECT_ID: label_value(secret.tenant.keystone_project_id),
              LABEL_OWNER_ID: label_value(secret.owner.keystone_user_id or str(secret.owner.pk))}
    return make_secret(namespace=secret.tenant.namespace, object_name=secret.object_name,
                       kind=secret.kind, name=secret.name, data=data, labels=labels)


def _write(kube: Kube, manifest: dict[str, Any], *, new: bool) -> None:
    """Create (or replace) the Secret. A new secret's object found there already is one the
    portal wrote for a row whose transaction did not commit (same id): it is ours, replaced.
    A replaced one that is gone (a lost secret: its namespace was made again) is made anew."""
    if not new:
        try:
            kube.replace(manifest)
        except NotFound:
            kube.create(manifest)
        return
    try:
        kube.create(manifest)
    except Conflict as exc:
        meta = manifest["metadata"]
        live = kube.get("Secret", meta["name"], meta["namespace"]) or {}
        if (live.get("metadata", {}).get("labels") or {}).get(LABEL_SECRET_ID) != \
                meta["labels"][LABEL_SECRET_ID]:
            raise KubeRefused(f"Secret {meta['name']} exists and is not the portal's",
                              code=409) from exc
        kube.replace(manifest)


def _name_taken(tenant: Tenant, owner: User, name: str, scope: str) -> bool:
    rows = Secret.objects.filter(tenant=tenant, name=name, scope=scope)
    if scope == Secret.Scope.USER:
        rows = rows.filter(owner=owner)
    return rows.exists()


# an error report (the DEBUG page, the admins' e-mail) shows every local of every frame: these
# frames, and those they call, show none (portal/error_reports.py honours the mark)
@sensitive_variables()
def secret_create(*, tenant: Tenant, acting_user: User, name: str, kind: str, scope: str,
                  data: Any, kube: Kube | None = None) -> Secret:
    """A secret of `acting_user`'s own (scope user) or of the project (the caller checked that
    they manage it). SecretInvalid for a refused name or data (RegistryLoginRefused: a
    registry that refused the login); KubeError when the cluster did not take the value
    (nothing recorded then)."""
    values = secret_clean(name=name, kind=kind, data=data)
    if scope not in Secret.Scope.values:
        raise SecretInvalid({"scope": [f"scope is one of {', '.join(Secret.Scope.values)}."]})
    _registry_login(kind, values)  # before the transaction: it may wait on the registry
    kube = kube or Kube()
    with transaction.atomic():
        if _name_taken(tenant, acting_user, name, scope):
            raise SecretNameTaken({"name": [f"A secret named {name} exists already."]})
        secret = Secret.objects.create(tenant=tenant, owner=acting_user, name=name, kind=kind,
                                       scope=scope, keys=keys_of(kind, values))
        secret.object_name = secret_object_name(secret.pk)
        secret.save(update_fields=["object_name"])
        audit_record(actor=acting_user, action="secret.create", tenant=tenant,
                     target=secret.object_name, after=_audit(secret))
        _write(kube, _manifest(secret, values), new=True)  # last: a refusal rolls back the rest
    log.info("secret %s (%s, %s) created in %s", secret.pk, kind, scope, tenant.namespace)
    return secret


@sensitive_variables()
def secret_replace(*, secret: Secret, acting_user: User, data: Any,
                   kube: Kube | None = None) -> Secret:
    """Replace a secret's value whole (its name, kind and scope stay). The same refusals."""
    values = secret_clean(name=None, kind=secret.kind, data=data)
    _registry_login(secret.kind, values)
    kube = kube or Kube()
    with transaction.atomic():
        secret = Secret.objects.select_for_update().select_related("tenant", "owner").get(
            pk=secret.pk)
        before = _audit(secret)
        secret.keys = keys_of(secret.kind, values)
        secret.lost_at = None  # a lost secret's value is given again
        secret.save(update_fields=["keys", "lost_at", "updated_at"])
        audit_record(actor=acting_user, action="secret.replace", tenant=secret.tenant,
                     target=secret.object_name, before=before, after=_audit(secret))
        _write(kube, _manifest(secret, values), new=False)
    log.info("secret %s replaced in %s", secret.pk, secret.tenant.namespace)
    return secret


def secret_delete(*, secret: Secret, acting_user: User, kube: Kube | None = None) -> None:
    """Delete a secret and its value. A workload that uses it keeps what its pods read when
    they started; a pod started after this one waits for a Secret that is gone, and says so."""
    kube = kube or Kube()
    with transaction.atomic():
        audit_record(actor=acting_user, action="secret.delete", tenant=secret.tenant,
                     target=secret.object_name, before=_audit(secret))
        Secret.objects.filter(pk=secret.pk).delete()
        kube.delete("Secret", secret.object_name, secret.tenant.namespace)  # gone: fine
    log.info("secret %s deleted from %s", secret.pk, secret.tenant.namespace)


# --- the sweep: the rows and the cluster's Secrets held to each other -------------------------

# what the sweep leaves alone: a row written, or an object made, this recently may belong to a
# write whose other half it has not seen yet (the row commits after its object is made)
SWEEP_MARGIN = dt.timedelta(minutes=2)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    lost: list[int]  # the rows whose Secret was gone: marked lost, their owners told
    deleted: list[tuple[str, str]]  # (namespace, name) of Secrets no row holds: deleted


def secrets_sweep(*, kube: Kube | None = None, now: dt.datetime | None = None) -> SweepResult:
    """One list of the portal's Secrets in every namespace, held against the rows: a row whose
    Secret is gone lost its value (a namespace deleted and made again by the tenant's
    reconcile takes every Secret with it, and the value was nowhere else), so it is marked lost
    and its owner told to give it again (secret_replace); a Secret that no row holds (its row
    deleted while the cluster did not answer, or its project gone from the portal) is deleted.
    The beat runs it (credentials/tasks.py); idempotent."""
    kube = kube or Kube()
    now = now or timezone.now()
    settled = now - SWEEP_MARGIN
    listed = kube.list("Secret", label_selector=LABEL_SECRET_ID)["items"]
    present: set[tuple[str, str]] = set()
    by_id: dict[int, list[dict[str, Any]]] = {}
    for obj in listed:
        meta = obj["metadata"]
        present.add((meta["namespace"], meta["name"]))
        secret_id = (meta.get("labels") or {}).get(LABEL_SECRET_ID, "")
        by_id.setdefault(int(secret_id) if secret_id.isdigit() else 0, []).append(meta)
    rows = {row.pk: row for row in Secret.objects.filter(pk__in=list(by_id))
            .select_related("tenant")}
    deleted: list[tuple[str, str]] = []
    for secret_id, metas in by_id.items():
        row = rows.get(secret_id)
        for meta in metas:
            ours = row is not None and (row.tenant.namespace, row.object_name) == \
                (meta["namespace"], meta["name"])
            if ours or _made_at(meta) > settled:
                continue
            kube.delete("Secret", meta["name"], meta["namespace"])  # gone already: fine
            deleted.append((meta["namespace"], meta["name"]))
    lost: list[int] = []
    candidates = Secret.objects.filter(lost_at__isnull=True, updated_at__lt=settled) \
        .exclude(tenant__state__in=[Tenant.State.DELETING, Tenant.State.DELETED]) \
        .select_related("tenant", "owner")
    for row in candidates:
        if (row.tenant.namespace, row.object_name) not in present:
            if secret_mark_lost(secret=row, now=now):
                lost.append(row.pk)
    if deleted or lost:
        log.info("secrets sweep: %d lost, %d orphaned Secrets deleted", len(lost), len(deleted))
    return SweepResult(lost=lost, deleted=deleted)


def _made_at(meta: dict[str, Any]) -> dt.datetime:
    made = meta.get("creationTimestamp")
    if not made:
        return timezone.now()
    return dt.datetime.fromisoformat(str(made).replace("Z", "+00:00"))


def secret_mark_lost(*, secret: Secret, now: dt.datetime) -> bool:
    """Mark a secret whose Kubernetes Secret is gone as lost and tell its owner (and, for a
    project's, the managers see it on the secrets page): once. False when it was marked
    already or given a new value meanwhile."""
    with transaction.atomic():
        marked = Secret.objects.filter(pk=secret.pk, lost_at__isnull=True,
                                       updated_at=secret.updated_at).update(lost_at=now)
        if not marked:
            return False
        audit_record(actor=None, action="secret.lost", tenant=secret.tenant,
                     target=secret.object_name, after=_audit(secret))
        owner = secret.owner  # a secret's, not a workload's (workloads.journal tells those)
        notify(kind=Kind.SECRET, users=[owner], tenant=secret.tenant,
               key=f"secret-lost:{secret.pk}:{now.isoformat()}",
               title=f"The value of the secret {secret.name} was lost",
               text=f"The Kubernetes Secret that held the value of {secret.name} in "
                    f"{secret.tenant.name} is gone (the project's namespace was made again, "
                    "or the object was deleted). Workloads cannot use it until you give it a "
                    "new value (replace it on the secrets page or PUT secrets/{id}/).",
               link=reverse("credentials:detail", args=[secret.pk]))
    return True
