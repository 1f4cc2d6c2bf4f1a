"""The writes of the clusters: admins register, change, disable and remove them (audited);
the probe records each one's state (clusters_probe, on the Celery beat)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.services import Actor, audit_record
from cluster.cache import cluster_cache_drop
from cluster.capacity import gpu_types
from core.tasks import send_on_commit
from core.validation import FieldsInvalid, excerpt
from kube.client import Kube, KubeError, cluster_clients_forget, cluster_probe

from .models import Cluster

NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", re.ASCII)
DNS_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
SECRET = re.compile(rf"(?:[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?/)?{DNS_NAME}", re.ASCII)
PATH = re.compile(r"/[^\x00-\x1f\x7f]{0,498}")
# what an admin may write (the state and the home flag are the portal's own)
EDITABLE = ("display_name", "kubeconfig_path", "kubeconfig_secret", "gpu_types", "enabled")


class ClusterInvalid(FieldsInvalid):
    """A cluster's fields refused, field by field (the API's 400, the form's errors)."""


class ClusterInUse(ValueError):
    """The home cluster cannot be disabled or removed: the portal runs there."""

    code = "cluster_in_use"


def _text(value: Any, limit: int) -> str:
    return value.strip() if isinstance(value, str) and len(value) <= limit else ""


def cluster_fields_clean(fields: Mapping[str, Any], *, cluster: Cluster | None) -> dict[str, Any]:
    """The fields of a new cluster (cluster None) or of changes to one, checked together;
    raises ClusterInvalid naming each field refused."""
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    if cluster is None:
        name = fields.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            errors["name"] = ["A name of lower-case letters, digits and '-', at most 40 "
                              f"characters, starting and ending with a letter or digit; got "
                              f"{excerpt(name)}."]
        elif Cluster.objects.filter(name=name).exists():
            errors["name"] = [f"A cluster named {name} exists already."]
        else:
            clean["name"] = name
    unknown = sorted(set(fields) - set(EDITABLE) - {"name"})
    for field in unknown:
        errors[field] = ["Not a field of a cluster an admin may write."]
    if "name" in fields and cluster is not None:
        errors["name"] = ["A cluster's name cannot change (workloads record it)."]
    if "display_name" in fields:
        value = fields["display_name"]
        if value is not None and not isinstance(value, str) or len(value or "") > 100:
            errors["display_name"] = ["At most 100 characters."]
        else:
            clean["display_name"] = (value or "").strip()
    for field, pattern, words in (
            ("kubeconfig_path", PATH, "An absolute path of the kubeconfig file on the portal's "
                                      "processes, at most 500 characters"),
            ("kubeconfig_secret", SECRET, "A Secret of the home cluster as namespace/name "
                                          "(key `kubeconfig`)")):
        if field in fields:
            value = _text(fields[field] or "", 500)
            if value and not pattern.fullmatch(value):
                errors[field] = [f"{words}."]
            else:
                clean[field] = value
    if "gpu_types" in fields:
        slugs = fields["gpu_types"]
        known = {t.slug for t in gpu_types()}
        if not isinstance(slugs, list) or len(slugs) > 64 or not all(
                isinstance(slug, str) for slug in slugs):
            errors["gpu_types"] = ["A list of GPU type slugs."]
        elif missing := sorted(set(slugs) - known):
            errors["gpu_types"] = [f"No GPU type {', '.join(excerpt(s) for s in missing[:5])}."]
        else:
            clean["gpu_types"] = sorted(set(slugs))
    if "enabled" in fields:
        if not isinstance(fields["enabled"], bool):
            errors["enabled"] = ["true or false."]
        else:
            clean["enabled"] = fields["enabled"]
    home = cluster is not None and cluster.home
    path = clean.get("kubeconfig_path", cluster.kubeconfig_path if cluster else "")
    secret = clean.get("kubeconfig_secret", cluster.kubeconfig_secret if cluster else "")
    where = "kubeconfig_path" if "kubeconfig_path" not in errors else "kubeconfig_secret"
    if home and (path or secret):
        errors.setdefault(where, []).append(
            "The home cluster is reached with the portal's own settings (KUBECONFIG).")
    elif not home and bool(path) == bool(secret) and not (
            "kubeconfig_path" in errors or "kubeconfig_secret" in errors):
        errors.setdefault(where, []).append(
            "Give either a kubeconfig file's path or a Secret holding one, not both.")
    if home and clean.get("enabled") is False:
        errors["enabled"] = ["The home cluster cannot be disabled: the portal runs there."]
    if errors:
        raise ClusterInvalid(errors)
    return clean


def _audited(cluster: Cluster) -> dict[str, Any]:
    """What the audit trail keeps of a cluster: where its credentials are, never what."""
    return {"name": cluster.name, "display_name": cluster.display_name,
            "credentials": cluster.credentials, "gpu_types": cluster.gpu_types,
            "enabled": cluster.enabled}


def _forget(name: str) -> None:
    """This process's client and read model of the cluster start anew (other processes' when
    their reads fail or the connection's key changes)."""
    cluster_clients_forget()
    cluster_cache_drop(name)


@transaction.atomic
def cluster_register(*, user: Actor, fields: Mapping[str, Any]) -> Cluster:
    """A new cluster (its state is the probe's: it is checked at once)."""
    clean = cluster_fields_clean(fields, cluster=None)
    cluster = Cluster.objects.create(**clean, state=Cluster.State.READY,
                                     state_since=timezone.now())
    audit_record(actor=user, action="cluster.register", target=cluster.name,
                 after=_audited(cluster))
    send_on_commit("clusters.tasks.cluster_probe_task", cluster.pk)
    # a worker of the home cluster's Kueue at once (clusters/dispatch.py)
    send_on_commit("clusters.tasks.cluster_dispatch_task")
    return cluster


@transaction.atomic
def cluster_update(*, user: Actor, cluster: Cluster, changes: Mapping[str, Any]) -> Cluster:
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    clean = cluster_fields_clean(changes, cluster=cluster)
    before = _audited(cluster)
    for field, value in clean.items():
        setattr(cluster, field, value)
    cluster.save()
    after = _audited(cluster)
    if after != before:
        audit_record(actor=user, action="cluster.update", target=cluster.name, before=before,
                     after=after)
        name = cluster.name
        transaction.on_commit(lambda: _forget(name))
        # enabled or disabled, its credentials changed: its MultiKueue objects follow
        send_on_commit("clusters.tasks.cluster_dispatch_task")
    return cluster


@transaction.atomic
def cluster_delete(*, user: Actor, cluster: Cluster) -> None:
    """Remove a cluster from the portal (its objects stay in it; workloads that ran there keep
    its name)."""
    if cluster.home:
        raise ClusterInUse("The home cluster cannot be removed: the portal runs there.")
    before = _audited(cluster)
    name = cluster.name
    cluster.delete()
    audit_record(actor=user, action="cluster.delete", target=name, before=before)
    transaction.on_commit(lambda: _forget(name))
    send_on_commit("clusters.tasks.cluster_dispatch_task")  # its MultiKueue objects go


def cluster_probe_one(*, cluster_id: int) -> Cluster | None:
    """Ask one cluster whether it answers and record its state (ready, or unreachable with
    the reason and since when), when it was last seen and its API server's address."""
    cluster = Cluster.objects.filter(pk=cluster_id, enabled=True).first()
    if cluster is None:
        return None
    name = None if cluster.home else cluster.name
    outage = cluster_probe(name)
    now = timezone.now()
    changes: dict[str, Any] = {}
    if outage is None:
        changes.update(state=Cluster.State.READY, reason="", last_seen=now)
        try:
            changes["api_server"] = Kube(cluster=name).server[:255]
        except KubeError:
            pass
    else:
        changes.update(state=Cluster.State.UNREACHABLE, reason=outage.error[:300])
    if changes["state"] != cluster.state:
        changes["state_since"] = now if outage is None else outage.since
    Cluster.objects.filter(pk=cluster.pk).update(**changes)
    if outage is None and cluster.state != Cluster.State.READY and not cluster.home:
        # back: what changed meanwhile (a project's quota, a namespace deleted there) is put
        # right at once, not at the next periodic sweep
        send_on_commit("clusters.tasks.cluster_dispatch_task")
        send_on_commit("tenants.tasks.tenants_reconcile_all")
    cluster.refresh_from_db()
    return cluster


def clusters_probe(clusters: Iterable[Cluster] | None = None) -> list[Cluster]:
    """Probe every enabled cluster (the beat's task, every 15 s); the home cluster first,
    whose answer is also the pages' banner."""
    found = Cluster.objects.filter(enabled=True) if clusters is None else clusters
    probed = [cluster_probe_one(cluster_id=cluster.pk) for cluster in found]
    return [cluster for cluster in probed if cluster is not None]
