"""Cordon and uncordon a node, audited: the maintenance windows' (calendars/maintenance.py) and
the GPU health check's (usage/health.py, above this app) one way of doing it.

Who cordoned a node is its annotation kube.labels.CORDON_ANNOTATION ("gpu-health",
"maintenance-<id>"): each cordons only a node nobody cordoned and uncordons only its own. With
the node's resourceVersion given, the patch is conditional: a 409 (kube.client.Conflict) means
someone changed the node since it was read, and the caller reads it again rather than write
over it (a concurrent or retried maintenance task then finds the cordon made and audits
nothing twice)."""

from __future__ import annotations

from typing import Any

from audit.services import audit_record
from kube.client import Kube
from kube.labels import CORDON_ANNOTATION

Obj = dict[str, Any]


def cordoned_by(node: Obj) -> str:
    """Who cordoned it, by its annotation ("" for nobody the portal knows)."""
    annotations: dict[str, str] = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(CORDON_ANNOTATION, "")


def _precondition(node: Obj, conditional: bool) -> Obj:
    version = (node.get("metadata") or {}).get("resourceVersion")
    return {"resourceVersion": version} if conditional and version else {}


def node_cordon(*, kube: Kube, node: Obj, by: str, reason: str,
                conditional: bool = False) -> None:
    name = node["metadata"]["name"]
    kube.patch("Node", name, {"spec": {"unschedulable": True},
                              "metadata": {"annotations": {CORDON_ANNOTATION: by},
                                           **_precondition(node, conditional)}})
    audit_record(actor=None, action="node.cordon", target=name,
                 before={"unschedulable": bool((node.get("spec") or {}).get("unschedulable"))},
                 after={"unschedulable": True, "reason": reason})


def node_uncordon(*, kube: Kube, node: Obj, reason: str, conditional: bool = False) -> None:
    name = node["metadata"]["name"]
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    patch: Obj = {"metadata": {"annotations": {CORDON_ANNOTATION: None},
                               **_precondition(node, conditional)}}
    if unschedulable:
        patch["spec"] = {"unschedulable": None}
    kube.patch("Node", name, patch)
    audit_record(actor=None, action="node.uncordon", target=name,
                 before={"unschedulable": unschedulable},
                 after={"unschedulable": False, "reason": reason})
