"""Volumes: what a dynamic provisioner and the PV controller do for a claim, and the API
server's PersistentVolumeClaimResize admission. No more (no attach, no mount, no real bytes).

- Admission: a claim created without `storageClassName` gets the default class's (the class
  annotated `storageclass.kubernetes.io/is-default-class: "true"`), as the DefaultStorageClass
  plugin does.
- Provisioning: a PersistentVolumeClaim of a StorageClass (its `storageClassName`, else the
  default class) gets a PersistentVolume `pvc-<claim uid>` of the size it asks, bound both ways (the PV's claimRef,
  the claim's volumeName), the claim's status Bound with its capacity and access modes, and a
  Normal `ProvisioningSucceeded` event. A claim naming a class the cluster lacks stays Pending
  with a Warning `ProvisioningFailed` event `storageclass.storage.k8s.io "x" not found`; a
  claim with no class and no default stays Pending, as it does without a provisioner.
- Expansion: a bound claim that asks for more than it holds grows (PV capacity, then the
  claim's status) when its class has `allowVolumeExpansion: true`; the admission refuses the
  larger request otherwise (403, the real plugin's words).
- Static binding: a claim that names its volume (`volumeName`) is bound to it when that
  PersistentVolume exists, is not another claim's (its claimRef, if any, names this claim) and
  holds at least what the claim asks, as the PV controller binds a pre-bound pair (the
  portal's datasets): the PV's claimRef completed with the claim's uid and its phase Bound, the
  claim's `pv.kubernetes.io/bind-completed` and status Bound with the volume's capacity and
  access modes. A volume made after its claim binds it then. Until then the claim stays
  Pending. Nothing else of the PV controller (no matching of claims to unnamed volumes).
- Reclaim: deleting the claim deletes its PV (policy Delete, as provisioned volumes have); a
  volume kept (Retain) is Released, as the PV controller leaves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.errors import ApiError, forbidden
from kubesim.quantity import parse as parse_quantity
from kubesim.resources import Obj, ResourceType, by_kind
from kubesim.store import AdmissionHook, clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

CLAIM = by_kind("PersistentVolumeClaim")
VOLUME = by_kind("PersistentVolume")
STORAGE_CLASS = by_kind("StorageClass")
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PROVISIONER = "kubesim.io/provisioner"
COMPONENT = "persistentvolume-controller"
# the class a cluster's provisioner comes with (kubesim's own: the one a site's default would be)
STANDARD_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
    "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
    "allowVolumeExpansion": True}
RESIZE_REFUSED = ("only dynamically provisioned pvc can be resized and the storageclass that "
                  "provisions the pvc must support resize")


def _requested(claim: Obj) -> str:
    return str((((claim.get("spec") or {}).get("resources") or {}).get("requests") or {})
               .get("storage") or "0")


class VolumeProvisioner:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("volumes", self.reconcile)

    # ------------------------------------------------------------------ admission

    def create_standard_class(self) -> None:
        """The provisioner's default class, unless the store holds classes already."""
        if not self.cluster.store.select(STORAGE_CLASS, None).items:
            self.cluster.store.create(STORAGE_CLASS, clone(STANDARD_CLASS))

    def admission_hooks(self) -> list[AdmissionHook]:
        return [self.admit_default_class, self.admit_resize]

    def admit_default_class(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        """The DefaultStorageClass plugin: a claim created without storageClassName gets the
        default class's name (an explicit "" keeps asking for none)."""
        if op != "CREATE" or rt is not CLAIM:
            return
        spec = new.get("spec")
        if not isinstance(spec, dict) or "storageClassName" in spec:
            return
        default = self._class_name({"spec": {}})
        if default is not None:
            spec["storageClassName"] = default

    def admit_resize(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        if op != "UPDATE" or rt is not CLAIM or old is None:
            return
        try:
            grows = parse_quantity(_requested(new)) > parse_quantity(_requested(old))
        except ValueError:
            return  # validation answers for a malformed size
        if not grows:
            return
        sc = self._class_of(old)
        if sc is None or not sc.get("allowVolumeExpansion"):
            raise forbidden(CLAIM, new["metadata"].get("name", ""), RESIZE_REFUSED)

    # ------------------------------------------------------------------ controller

    def on_claim(self, event: str, claim: Obj) -> None:
        meta = claim["metadata"]
        if event == "DELETED":
            self._reclaim(claim)
            return
        self.queue.add(f"{meta['namespace']}/{meta['name']}")

    def on_volume(self, event: str, pv: Obj) -> None:
        """A volume made (or changed): the claim its claimRef names tries to bind again."""
        if event == "DELETED":
            return
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("namespace") and ref.get("name"):
            self.queue.add(f"{ref['namespace']}/{ref['name']}")

    def on_storage_class(self, event: str, sc: Obj) -> None:
        """A class made (or changed): the claims still waiting try again."""
        if event == "DELETED":
            return
        for claim in self.cluster.store.select(CLAIM, None).items:
            if ((claim.get("status") or {}).get("phase")) != "Bound":
                meta = claim["metadata"]
                self.queue.add(f"{meta['namespace']}/{meta['name']}")

    def _class_name(self, claim: Obj) -> str | None:
        named = (claim.get("spec") or {}).get("storageClassName")
        if named is not None:
            return str(named) or None  # "" asks for no class at all
        for sc in self.cluster.store.select(STORAGE_CLASS, None).items:
            annotations = sc["metadata"].get("annotations") or {}
            if annotations.get(DEFAULT_CLASS_ANNOTATION) == "true":
                return str(sc["metadata"]["name"])
        return None

    def _class_of(self, claim: Obj) -> Obj | None:
        name = self._class_name(claim)
        return self.cluster.peek(STORAGE_CLASS, None, name) if name else None

    def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        claim = self.cluster.peek(CLAIM, namespace, name)
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            return
        spec = claim.get("spec") or {}
        status = claim.get("status") or {}
        if status.get("phase") == "Bound":
            self._expand(claim)
            return
        if spec.get("volumeName"):
            self._bind_named(claim, str(spec["volumeName"]))
            return
        class_name = self._class_name(claim)
        if class_name is None:
            return
        sc = self.cluster.peek(STORAGE_CLASS, None, class_name)
        if sc is None:
            self.cluster.record_event(claim, "Warning", "ProvisioningFailed",
                                      f'storageclass.storage.k8s.io "{class_name}" not found',
                                      COMPONENT)
            return
        self._provision(claim, class_name)

    def _provision(self, claim: Obj, class_name: str) -> None:
        meta = claim["metadata"]
        volume_name = f"pvc-{meta['uid']}"
        size = _requested(claim)
        modes = list((claim.get("spec") or {}).get("accessModes") or ["ReadWriteOnce"])
        if self.cluster.peek(VOLUME, None, volume_name) is None:
            try:
                self.cluster.store.create(VOLUME, {
                    "apiVersion": "v1", "kind": "PersistentVolume",
                    "metadata": {"name": volume_name,
                                 "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
                    "spec": {"capacity": {"storage": size}, "accessModes": modes,
                             "persistentVolumeReclaimPolicy": "Delete",
                             "storageClassName": class_name, "volumeMode": "Filesystem",
                             "csi": {"driver": PROVISIONER, "volumeHandle": volume_name},
                             "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                          "namespace": meta["namespace"],
                                          "name": meta["name"], "uid": meta["uid"]}}})
            except ApiError as exc:
                if exc.code != 409:
                    raise
        pv = self.cluster.peek(VOLUME, None, volume_name)
        if pv is not None:
            self.cluster.write_status(VOLUME, pv, {"phase": "Bound"})
        bound = self._claim_bound(claim, volume_name, modes=modes, capacity=size)
        if bound is not None:
            self.cluster.record_event(bound, "Normal", "ProvisioningSucceeded",
                                      f"Successfully provisioned volume {volume_name}", COMPONENT)

    def _claim_bound(self, claim: Obj, volume_name: str, *, modes: list[str],
                     capacity: str) -> Obj | None:
        """The claim bound to `volume_name`, as the PV controller completes a binding (its
        annotation, then its status); None when the claim is gone meanwhile."""
        bound = clone(claim)
        bound["spec"]["volumeName"] = volume_name
        bound.setdefault("metadata", {}).setdefault("annotations", {})[
            "pv.kubernetes.io/bind-completed"] = "yes"
        try:
            bound = self.cluster.store.update(CLAIM, bound, check_rv=False)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        self.cluster.write_status(CLAIM, bound, {"phase": "Bound", "accessModes": modes,
                                                 "capacity": {"storage": capacity}})
        return bound

    def _bind_named(self, claim: Obj, volume_name: str) -> None:
        """The PV controller's binding of a claim to the volume it names (the module's
        docstring)."""
        meta = claim["metadata"]
        pv = self.cluster.peek(VOLUME, None, volume_name)
        if pv is None or pv["metadata"].get("deletionTimestamp"):
            return
        pv_spec = pv.get("spec") or {}
        ref = pv_spec.get("claimRef") or {}
        if ref and (ref.get("namespace") != meta["namespace"] or ref.get("name") != meta["name"]
                    or ref.get("uid", meta["uid"]) != meta["uid"]):
            return  # another claim's
        capacity = str((pv_spec.get("capacity") or {}).get("storage") or "0")
        try:
            if parse_quantity(capacity) < parse_quantity(_requested(claim)):
                return
        except ValueError:
            return
        if ref.get("uid") != meta["uid"] or (pv.get("status") or {}).get("phase") != "Bound":
            bound_pv = clone(pv)
            bound_pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                            "namespace": meta["namespace"],
                                            "name": meta["name"], "uid": meta["uid"]}
            try:
                bound_pv = self.cluster.store.update(VOLUME, bound_pv, check_rv=False)
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
            self.cluster.write_status(VOLUME, bound_pv, {"phase": "Bound"})
        self._claim_bound(claim, volume_name, modes=list(pv_spec.get("accessModes") or []),
                          capacity=capacity)

    def _expand(self, claim: Obj) -> None:
        status = claim.get("status") or {}
        held = str((status.get("capacity") or {}).get("storage") or "0")
        wanted = _requested(claim)
        if parse_quantity(wanted) <= parse_quantity(held):
            return
        sc = self._class_of(claim)
        if sc is None or not sc.get("allowVolumeExpansion"):
            return
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        pv = self.cluster.peek(VOLUME, None, volume_name)
        if pv is not None:
            grown = clone(pv)
            grown["spec"]["capacity"] = {"storage": wanted}
            self.cluster.store.update(VOLUME, grown, check_rv=False)
        self.cluster.write_status(CLAIM, claim, {**status, "capacity": {"storage": wanted}})
        self.cluster.record_event(claim, "Normal", "VolumeResizeSuccessful",
                                  "MountVolume.NodeExpandVolume succeeded for volume "
                                  f'"{volume_name}"', "kubelet")

    def _reclaim(self, claim: Obj) -> None:
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        pv = self.cluster.peek(VOLUME, None, volume_name) if volume_name else None
        if pv is None:
            return
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Delete":
            if (pv.get("status") or {}).get("phase") == "Bound":
                self.cluster.write_status(VOLUME, pv, {"phase": "Released"})
            return
        try:
            self.cluster.store.delete(VOLUME, None, volume_name)
        except ApiError as exc:
            if exc.code != 404:
                raise
