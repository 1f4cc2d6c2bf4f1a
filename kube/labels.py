"""The labels, annotations and names of every object the portal writes to the cluster.

One module, so that what the writers (tenants/manifests.py, workloads/manifests.py,
tenants/kueue.py) put on objects and what the readers (the tracker, the cluster cache, usage
scraping, orphan cleanup) select by can never drift apart. Pure: no client, no settings.

Namespace names: a DNS-1123 label (at most 63 of [a-z0-9-], alphanumeric at both ends). Project
names are free text, and two projects can normalise to the same text ("ML Lab" and "ml-lab"), so
every namespace name carries a short digest of the Keystone project id. A workload's objects are
all named `wl-<id>-<slug of its name>`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

# --- labels and annotations -------------------------------------------------------------------
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-portal"}
# a label selector for everything the portal manages
MANAGED_BY_SELECTOR = ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())
LABEL_PROJECT_ID = "gpu-portal.io/project-id"
LABEL_PROJECT_NAME = "gpu-portal.io/project-name"
ANNOTATION_PROJECT_NAME = "gpu-portal.io/project-display-name"
LABEL_EXPOSED = "gpu-portal.io/exposed"
# on the pods of a group reached only by its own pods (an MPIJob's launcher and workers: the
# workers' SSH servers): the tenant's namespace-wide NetworkPolicy leaves them out, its
# isolated-groups policy admits nothing to them, and the group's own policy admits its pods
LABEL_ISOLATED = "gpu-portal.io/isolated"
# on a tenant's namespace: "true" while the portal queues on Kueue (deploy/base/tenant-admission.yaml)
LABEL_QUEUED = "gpu-portal.io/queued"
LABEL_WORKLOAD_ID = "gpu-portal.io/workload-id"
# on a volume's PersistentVolumeClaim: the portal's Volume it is (storage/)
LABEL_VOLUME_ID = "gpu-portal.io/volume-id"
LABEL_OWNER = "gpu-portal.io/owner"
LABEL_OWNER_ID = "gpu-portal.io/owner-id"
LABEL_SECRET_ID = "gpu-portal.io/secret-id"  # a user's or project's secret (credentials/)
# on a dataset's PersistentVolume and PersistentVolumeClaim: the portal's Dataset (storage/)
LABEL_DATASET_ID = "gpu-portal.io/dataset-id"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
ANNOTATION_ADDRESS_POOL = "metallb.io/address-pool"
# on a node the portal cordoned because of an unhealthy GPU (usage/health.py)
CORDON_ANNOTATION = "gpu-portal.io/cordoned-by"

# Kueue's API group, the version the portal writes, and the labels and gate of a queued object
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
QUEUE_LABEL = f"{KUEUE_GROUP}/queue-name"
PRIORITY_LABEL = f"{KUEUE_GROUP}/priority-class"
ADMISSION_GATE = f"{KUEUE_GROUP}/admission"  # the scheduling gate on pods Kueue has not admitted

# what the MPI operator (kubeflow.org MPIJob, v2beta1) labels its pods with: their role,
# "launcher" or "worker", and a worker's index (its rank)
MPI_ROLE_LABEL = "training.kubeflow.org/job-role"
MPI_INDEX_LABEL = "training.kubeflow.org/replica-index"
MPI_WORKER, MPI_LAUNCHER = "worker", "launcher"


def label_value(text: str) -> str:
    """A Kubernetes label value: ≤ 63 of [A-Za-z0-9-_.], alphanumeric at both ends."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


# --- names --------------------------------------------------------------------------------------
MAX_LABEL = 63
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def slug(text: str) -> str:
    """Lower-case ASCII letters, digits and single dashes; accents folded, other scripts dropped."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")


def project_digest(project_id: str, length: int) -> str:
    return hashlib.sha256(project_id.encode("utf-8")).hexdigest()[:length]


def namespace_name(*, project_name: str, project_id: str, prefix: str = "gpu-",
                   digest_length: int = 6) -> str:
    """`<prefix><slug of the project name>-<digest of the project id>`, a valid DNS-1123 label.

    A name with nothing left after folding (e.g. all CJK) becomes `<prefix>project-<digest>`.
    """
    digest = project_digest(project_id, digest_length)
    base = slug(project_name) or "project"
    room = MAX_LABEL - len(prefix) - len(digest) - 1
    base = base[:room].rstrip("-") or "project"
    return f"{prefix}{base}-{digest}"


NAMESPACE_PREFIX = re.compile(r"^([a-z0-9][-a-z0-9]{0,19})?$")


def is_valid_prefix(prefix: str) -> bool:
    """A prefix keeps every name a DNS-1123 label: empty, or ≤ 20 of [a-z0-9-] not starting with -."""
    return bool(NAMESPACE_PREFIX.match(prefix))


def is_valid_namespace(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(DNS1123_LABEL.match(name))


# a workload's objects: `wl-<id>-<slug>`, at most 52 characters (room for the suffixes the
# controllers add to pod names)
MAX_OBJECT_NAME = 52
PREFIX = "wl"
# A JobSet's pods are `<jobset>-<replicated job>-<job index>-<pod index>-<5 chars>`, and JobSet's
# webhook refuses a JobSet whose longest such name is over 63 characters: with the replicated
# job "r" (workloads/manifests.py), job index 0 and pod indexes up to 9999, the JobSet's name
# has 63 - len("-r-0-") - 4 - len("-abcde") = 48 characters. An MPIJob's workers are
# `<name>-worker-<index>`, 52 + 8 + 3: up to 1000 workers under the common limit.
JOBSET_REPLICATED_JOB = "r"
MAX_GROUP_OBJECT_NAME = MAX_LABEL - len(f"-{JOBSET_REPLICATED_JOB}-0-") - 4 - len("-abcde")


def workload_object_name(workload_id: int, display_name: str, *,
                         max_length: int = MAX_OBJECT_NAME) -> str:
    """`wl-42-my-notebook`: the base name of every Kubernetes object of workload 42.

    Deterministic (a retried launch finds what an earlier try created) and always valid, whatever
    the display name holds: one with nothing ASCII left after folding gives `wl-42`. A
    distributed workload's name is shorter: `max_length=MAX_GROUP_OBJECT_NAME`.
    """
    if isinstance(workload_id, bool) or not isinstance(workload_id, int) or workload_id < 0:
        raise ValueError(f"a workload id is a non-negative integer, not {workload_id!r}")
    head = f"{PREFIX}-{workload_id}"
    if len(head) > max_length:
        raise ValueError(f"workload id {workload_id} is too large for a Kubernetes name")
    room = max_length - len(head) - 1
    tail = slug(display_name)[:room].strip("-") if room > 0 else ""
    return f"{head}-{tail}" if tail else head


# `wl-<digits>` followed by `-` or the end reads back to exactly one id: the name's own shape
OBJECT_NAME = re.compile(rf"^{PREFIX}-(\d+)(?:-|$)")


def workload_id_of_name(name: str) -> int | None:
    """The workload whose objects are named `name` (`wl-42-my-notebook` → 42), or whose
    controllers named their own objects after it (`wl-42-…-r-0-1-x7k2p`); None for another
    name."""
    match = OBJECT_NAME.match(name)
    return int(match.group(1)) if match else None


SECRET_PREFIX = "portal-secret"


def secret_object_name(secret_id: int) -> str:
    """`portal-secret-7`: the Kubernetes Secret that holds the value of the portal's secret 7
    (credentials/), never a name a workload's objects take (`wl-…`)."""
    if isinstance(secret_id, bool) or not isinstance(secret_id, int) or secret_id < 0:
        raise ValueError(f"a secret id is a non-negative integer, not {secret_id!r}")
    return f"{SECRET_PREFIX}-{secret_id}"


def jobset_pod_host(object_name: str, rank: int) -> str:
    """The host name of a JobSet's pod `rank`: `<jobset>-<replicated job>-<job>-<pod index>`
    (one replicated job, one Job of it, one pod per node)."""
    return f"{object_name}-{JOBSET_REPLICATED_JOB}-0-{rank}"


def pod_name_rank(object_name: str, pod_name: str) -> int | str | None:
    """Which rank a group's pod runs, from its name alone (what a GPU sample keeps of it):
    JobSet's `<name>-r-0-<rank>-<5 chars>`, the MPI operator's `<name>-worker-<rank>` and
    `<name>-launcher-<5 chars>` ("launcher"); None for another name."""
    rest = pod_name.removeprefix(f"{object_name}-")
    if rest == pod_name:
        return None
    parts = rest.split("-")
    if parts[0] == MPI_LAUNCHER:
        return MPI_LAUNCHER
    if parts[0] == MPI_WORKER and len(parts) == 2 and parts[1].isdigit():
        return int(parts[1])
    if len(parts) == 4 and parts[:2] == [JOBSET_REPLICATED_JOB, "0"] and parts[2].isdigit():
        return int(parts[2])  # <replicated job>-<job index>-<completion index>-<suffix>
    return None


# --- volumes: a PersistentVolumeClaim per Volume (storage/) -------------------------------------
# the tenant's home volume, as workloads made it before volumes were the portal's own: its
# Volume (named "home") keeps this claim name, so its data stays where it is
HOME_CLAIM_NAME = "gpu-portal-home"
VOLUME_PREFIX = "vol"


def volume_claim_name(volume_id: int, display_name: str) -> str:
    """`vol-7-datasets`: the PersistentVolumeClaim of volume 7, deterministic (a retried create
    finds what an earlier try made) and a valid DNS-1123 label whatever the display name."""
    if isinstance(volume_id, bool) or not isinstance(volume_id, int) or volume_id < 0:
        raise ValueError(f"a volume id is a non-negative integer, not {volume_id!r}")
    head = f"{VOLUME_PREFIX}-{volume_id}"
    room = MAX_LABEL - len(head) - 1
    tail = slug(display_name)[:room].strip("-") if room > 0 else ""
    return f"{head}-{tail}" if tail else head


# --- datasets: per project, a PersistentVolume and its claim (storage/) ------------------------
DATASET_PREFIX = "gpu-portal-dataset"


def dataset_claim_name(dataset_id: int) -> str:
    """`gpu-portal-dataset-7`: dataset 7's claim in any project's namespace."""
    if isinstance(dataset_id, bool) or not isinstance(dataset_id, int) or dataset_id < 0:
        raise ValueError(f"a dataset id is a non-negative integer, not {dataset_id!r}")
    return f"{DATASET_PREFIX}-{dataset_id}"


def dataset_volume_name(dataset_id: int, namespace: str) -> str:
    """`gpu-portal-dataset-7-tenant-vision-lab`: the cluster-scoped PersistentVolume of dataset
    7 for one namespace's claim (a name of at most 253 characters: a namespace has 63)."""
    return f"{dataset_claim_name(dataset_id)}-{namespace}"


# --- the shared-address mode (PORTAL_SERVICE_EXPOSURE=shared) ---------------------------------
EXPOSURES = ("loadbalancer", "shared")
HOST_PREFIX = "w"
# room for "w-<id>." before the domain in a host name the portal records (Workload.address
# holds 64 characters; ids up to ten digits)
MAX_SERVICE_DOMAIN = 64 - len(f"{HOST_PREFIX}-9999999999.")


def workload_host(workload_id: int, domain: str) -> str:
    """`w-42.apps.example.org`: the host name of workload 42 behind the shared gateway. By id
    alone (not the display name): a name the user picked never reaches DNS or a certificate."""
    if isinstance(workload_id, bool) or not isinstance(workload_id, int) or workload_id < 0:
        raise ValueError(f"a workload id is a non-negative integer, not {workload_id!r}")
    return f"{HOST_PREFIX}-{workload_id}.{domain.strip('.').lower()}"
