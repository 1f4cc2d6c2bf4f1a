"""What a launch mounts: `mounts: [{volume: id} | {dataset: id}, path, read_only?]`, resolved
to claims, and a batch job's checkpoint directory: `checkpoint: {volume: id, path?}`, a folder
of a volume.

A mount names its source by one key (a mount source is one entry of MOUNT_SOURCES: a volume of
the project, or a dataset open to it); the resolver checks the source for the caller and the
tenant, the path for the pod, and answers a ResolvedMount with the claim to mount. A dataset
is always read-only (`read_only: false` on one is refused); its path defaults to
/datasets/<name>. Refusals are field errors of `mounts` (LaunchInvalid), each naming the entry
by its place in the list.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from access.ssh_server import BIN_DIR, CONFIG_DIR
from core.validation import CONTAINER_SYSTEM_PATHS, excerpt, path_overlaps
from identity.identity import Identity
from kube.labels import dataset_claim_name, dataset_volume_name
from storage.manifests import DatasetClaimSpec, dataset_volume_source
from storage.models import Dataset, Volume
from storage.selectors import datasets_mountable, volumes_mountable
from tenants.models import Tenant

from .manifests import CHECKPOINT_MOUNT_PATH, HOME_MOUNT_PATH, MPI_SSH_PATH

MAX_MOUNTS = 16
MAX_PATH = 1024
PORTAL_PATHS = (HOME_MOUNT_PATH, MPI_SSH_PATH, BIN_DIR, CONFIG_DIR, CHECKPOINT_MOUNT_PATH)


class MountRefused(ValueError):
    """One mount entry refused: the message says why."""


@dataclasses.dataclass(frozen=True)
class ResolvedMount:
    """One mount: a volume's claim, or a dataset's (the project's copy of its volume)."""

    path: str
    read_only: bool
    volume: Volume | None = None
    dataset: Dataset | None = None

    def __post_init__(self) -> None:
        if (self.volume is None) == (self.dataset is None):
            raise ValueError("a mount has one source: a volume or a dataset")
        if self.dataset is not None and not self.read_only:
            raise ValueError("a dataset is mounted read-only")

    @property
    def name(self) -> str:
        return self.volume.name if self.volume is not None else self._dataset.name

    @property
    def claim_name(self) -> str:
        if self.volume is not None:
            return self.volume.claim_name
        return dataset_claim_name(self._dataset.pk)

    @property
    def _dataset(self) -> Dataset:
        assert self.dataset is not None
        return self.dataset

    def as_spec(self, tenant: Tenant) -> dict[str, Any]:
        """As the launch spec freezes it (launch_spec.py): a dataset's with where its data is
        (its volume is made from this alone when the workload's objects are) and, for an S3
        bucket, the variables that name it in the pod."""
        if self.volume is not None:
            return {"volume": self.volume.pk, "name": self.volume.name,
                    "claim": self.volume.claim_name, "path": self.path,
                    "read_only": self.read_only}
        dataset = self._dataset
        spec = {"dataset": dataset.pk, "name": dataset.name, "claim": self.claim_name,
                "path": self.path, "read_only": True, "kind": dataset.kind,
                "size_gib": dataset.size_gib,
                "volume_source": dataset_volume_source(
                    dataset.kind, dataset.source,
                    volume_name=dataset_volume_name(dataset.pk, tenant.namespace),
                    s3_driver=settings.PORTAL_S3_CSI_DRIVER)}
        env = dataset_env(dataset)
        return {**spec, "env": [[name, value] for name, value in env.items()]} if env else spec


def dataset_env(dataset: Dataset) -> dict[str, str]:
    """What a pod that mounts an S3 dataset is told of it, whatever driver mounts it:
    PORTAL_DATASET_<NAME> = s3://bucket/prefix and PORTAL_DATASET_<NAME>_ENDPOINT (never a
    credential). Other kinds: nothing."""
    if dataset.kind != Dataset.Kind.S3:
        return {}
    stem = "PORTAL_DATASET_" + dataset.name.upper().replace("-", "_")
    return {stem: f"s3://{dataset.source['bucket']}/{dataset.source.get('prefix') or ''}",
            f"{stem}_ENDPOINT": dataset.source["endpoint"]}


def mounts_env(mounts: list[ResolvedMount]) -> dict[str, str]:
    """The variables the resolved mounts' datasets set in the pod."""
    return {name: value for mount in mounts if mount.dataset is not None
            for name, value in dataset_env(mount.dataset).items()}


def dataset_claim_spec(mount: Mapping[str, Any], tenant: Tenant) -> DatasetClaimSpec:
    """The volume and claim of a dataset mount as the launch spec froze it."""
    return DatasetClaimSpec(dataset_id=int(mount["dataset"]), namespace=tenant.namespace,
                            project_id=tenant.keystone_project_id,
                            size_gib=int(mount["size_gib"]),
                            volume_source=dict(mount["volume_source"]))


def mount_path_clean(path: Any) -> str:
    """An absolute, normalised path outside the system's trees and the portal's own mounts."""
    if not isinstance(path, str) or not path:
        raise MountRefused("Give the path to mount it at.")
    if len(path) > MAX_PATH or not path.isprintable() or "\\" in path:
        raise MountRefused(f"A path of at most {MAX_PATH} printable characters, please.")
    if not path.startswith("/"):
        raise MountRefused(f"{path!r} is not an absolute path.")
    if ".." in path.split("/"):
        raise MountRefused(f"{path!r} holds '..'.")
    clean = posixpath.normpath(path)
    system = next((tree for tree in CONTAINER_SYSTEM_PATHS if path_overlaps(clean, tree)), None)
    if clean == "/" or system:
        covered = f"overlaps {system}, which" if system else "would hide all"
        raise MountRefused(f"{clean} is a system path: it {covered} the container needs; mount "
                           "it elsewhere (e.g. /data).")
    if any(path_overlaps(clean, own) for own in PORTAL_PATHS):
        raise MountRefused(f"{clean} is where the portal mounts its own volumes.")
    return clean


def _volume_source(value: Any, *, identity: Identity, tenant: Tenant) -> Volume:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MountRefused("`volume` is a volume's id.")
    volume = volumes_mountable(identity, tenant).filter(pk=value).first()
    if volume is None:
        raise MountRefused(f"No volume {value} that you may mount in {tenant.name} "
                           "(or it failed).")
    return volume


def _dataset_source(value: Any, *, identity: Identity, tenant: Tenant) -> Dataset:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MountRefused("`dataset` is a dataset's id.")
    dataset = datasets_mountable(identity, tenant).filter(pk=value).first()
    if dataset is None:
        raise MountRefused(f"No dataset {value} open to {tenant.name} that you may mount.")
    return dataset


# the keys that name a mount's source (one per mount); _entry resolves each
MOUNT_SOURCES = ("volume", "dataset")


def mounts_resolve(entries: Any, *, identity: Identity, tenant: Tenant,
                   use_home: bool = False) -> list[ResolvedMount]:
    """Every mount entry resolved, or MountsInvalid with what is wrong with each."""
    if entries in (None, ""):
        return []
    if not isinstance(entries, list):
        raise MountsInvalid(["A list of mounts, please."])
    if len(entries) > MAX_MOUNTS:
        raise MountsInvalid([f"At most {MAX_MOUNTS} mounts."])
    errors: list[str] = []
    resolved: list[ResolvedMount] = []
    paths: set[str] = {HOME_MOUNT_PATH} if use_home else set()
    sources: set[tuple[str, int]] = set()
    for index, entry in enumerate(entries):
        try:
            mount = _entry(entry, identity=identity, tenant=tenant)
            if mount.path in paths:
                raise MountRefused(f"{mount.path} is mounted twice.")
            source = _source_key(mount)
            if source in sources:
                raise MountRefused(f"{source[0]} {source[1]} is mounted twice.")
        except MountRefused as exc:
            errors.append(f"mount {index + 1}: {exc}")
            continue
        paths.add(mount.path)
        sources.add(source)
        resolved.append(mount)
    if errors:
        raise MountsInvalid(errors)
    return resolved


def _source_key(mount: ResolvedMount) -> tuple[str, int]:
    if mount.volume is not None:
        return "volume", mount.volume.pk
    assert mount.dataset is not None
    return "dataset", mount.dataset.pk


def _entry(entry: Any, *, identity: Identity, tenant: Tenant) -> ResolvedMount:
    if not isinstance(entry, Mapping):
        raise MountRefused("Each mount is an object: {volume or dataset, path, read_only?}.")
    sources = [key for key in MOUNT_SOURCES if key in entry]
    unknown = set(entry) - set(MOUNT_SOURCES) - {"path", "read_only"}
    if unknown:
        raise MountRefused(f"unknown key(s): {', '.join(sorted(map(str, unknown)))[:100]}.")
    if len(sources) != 1:
        raise MountRefused(f"Name one source: {' or '.join(MOUNT_SOURCES)}.")
    read_only = entry.get("read_only")
    if read_only is not None and not isinstance(read_only, bool):
        raise MountRefused("read_only is true or false.")
    if sources[0] == "dataset":
        if read_only is False:
            raise MountRefused("A dataset is always mounted read-only.")
        # the source first: its default path is its name's
        dataset = _dataset_source(entry["dataset"], identity=identity, tenant=tenant)
        path = mount_path_clean(entry.get("path") or dataset.default_path)
        return ResolvedMount(dataset=dataset, path=path, read_only=True)
    path = mount_path_clean(entry.get("path"))
    volume = _volume_source(entry["volume"], identity=identity, tenant=tenant)
    return ResolvedMount(volume=volume, path=path, read_only=bool(read_only))


# a checkpoint's folder on its volume: relative, made of plain names
CHECKPOINT_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
MAX_CHECKPOINT_FOLDER = 255
CHECKPOINTS_FOLDER = "checkpoints"  # where a launch's own folder goes when it names none


@dataclasses.dataclass(frozen=True)
class ResolvedCheckpoint:
    """A batch job's checkpoint directory: a folder of a volume it may mount. `folder` empty:
    the launch's own, `checkpoints/<its object name>`, named at admission (checkpoint_folder)."""

    volume: Volume
    folder: str = ""

    def as_spec(self, object_name: str) -> dict[str, Any]:
        """As the launch spec freezes it (launch_spec.py): a requeued copy keeps the folder."""
        return {"volume": self.volume.pk, "name": self.volume.name,
                "claim": self.volume.claim_name,
                "folder": self.folder or f"{CHECKPOINTS_FOLDER}/{object_name}"}


def checkpoint_resolve(entry: Any, *, identity: Identity, tenant: Tenant,
                       kind: str) -> ResolvedCheckpoint | None:
    """`checkpoint: {volume, path?}` resolved: a volume the caller may mount (never a dataset:
    it is read-only), a folder of it, on a batch job only (a service is not requeued); or
    MountsInvalid with what is wrong."""
    if entry in (None, "", {}):
        return None
    if not isinstance(entry, Mapping):
        raise MountsInvalid(["A checkpoint is an object: {volume, path?}."])
    unknown = set(entry) - {"volume", "path"}
    if unknown:
        named = ", ".join(sorted(map(str, unknown)))[:100]
        raise MountsInvalid([f"unknown key(s): {named}; a checkpoint goes on a volume "
                             "(a dataset is read-only)."])
    if kind != "batch":
        raise MountsInvalid(["A checkpoint directory is a batch job's: a service is never "
                             "requeued, so it has nothing to resume."])
    if "volume" not in entry:
        raise MountsInvalid(["Name the volume the checkpoints go on: {volume: id}."])
    folder = entry.get("path") or ""
    if not isinstance(folder, str):
        raise MountsInvalid(["`path` is a folder of the volume, e.g. runs/llama."])
    folder = folder.strip("/")
    if folder and (len(folder) > MAX_CHECKPOINT_FOLDER or not CHECKPOINT_FOLDER.fullmatch(folder)
                   or ".." in folder.split("/")):
        raise MountsInvalid([f"`path` is a folder of the volume (at most "
                             f"{MAX_CHECKPOINT_FOLDER} characters: letters, digits, ._- and /, "
                             f"no '..'), not {excerpt(folder)}."])
    try:
        volume = _volume_source(entry["volume"], identity=identity, tenant=tenant)
    except MountRefused as exc:
        raise MountsInvalid([str(exc)]) from exc
    return ResolvedCheckpoint(volume=volume, folder=folder)


class MountsInvalid(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
