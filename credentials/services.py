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

import logging
from typing import Any

from django.db import transaction
from django.views.decorators.debug import sensitive_variables

from audit.services import audit_record
from identity.models import User
from kube.client import Conflict, Kube, KubeRefused
from kube.labels import (
    LABEL_OWNER_ID,
    LABEL_PROJECT_ID,
    LABEL_SECRET_ID,
    MANAGED_BY,
    label_value,
    secret_object_name,
)
from tenants.models import Tenant

from .manifests import make_secret
from .models import Secret
from .validation import SecretInvalid, keys_of, secret_clean

log = logging.getLogger(__name__)


class SecretNameTaken(SecretInvalid):
    """A project already has a project secret (or this user one of theirs) of that name."""


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
    portal wrote for a row whose transaction did not commit (same id): it is ours, replaced."""
    if not new:
        kube.replace(manifest)
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
    they manage it). SecretInvalid for a refused name or data; KubeError when the cluster did
    not take the value (nothing recorded then)."""
    values = secret_clean(name=name, kind=kind, data=data)
    if scope not in Secret.Scope.values:
        raise SecretInvalid({"scope": [f"scope is one of {', '.join(Secret.Scope.values)}."]})
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
    kube = kube or Kube()
    with transaction.atomic():
        secret = Secret.objects.select_for_update().select_related("tenant", "owner").get(
            pk=secret.pk)
        before = _audit(secret)
        secret.keys = keys_of(secret.kind, values)
        secret.save(update_fields=["keys", "updated_at"])
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
