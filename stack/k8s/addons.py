"""The addons a real control plane of the portal runs (tests and `make demo CLUSTER=kube` alike):

- MetalLB's controller: LoadBalancer addresses from the inventory's address pools;
- the GPU metrics: one gpuagent (fake NVML) and one pod-resources socket per GPU node;
- the dynamic provisioner of volumes (provisioner.py): the default StorageClass `standard`,
  a folder per claim under the cluster's folder;
- the GPU operator's stand-in (stack/gpu_operator.py): the MIG manager and the device plugin's
  config switch, laying a node out anew when its labels ask (a maintenance window's re-layout);
- dynamic resource allocation (dra.py), when asked (`dra=True`: the demo, `dra_cluster` and
  `kueue_cluster` in the tests): NVIDIA's DRA driver's device classes, a node pool of its own
  and the ResourceSlices
  its kubelet plugin would publish for it. Off by default: its node is one kubesim does not
  have, and the cluster the conformance suite compares with kubesim must have the same nodes;
- k8s-keystone-auth, when there is a Keystone: `kubectl --token <Keystone token>`;
- Kueue, when asked (`kueue=True`): queueing of the portal's launches (tenants/kueue.py, workloads/queue.py),
  and with it the engines of distributed training it admits whole: JobSet and the MPI operator,
  started before Kueue (Kueue enables its JobSet and MPIJob integrations only for CRDs it finds
  served when it starts). Without Kueue neither runs: their CRDs are not served, and the
  portal offers no distributed training. With `multikueue` its Kueue is a MultiKueue manager
  (stack/k8s/multikueue.py starts and registers the workers).
"""

from __future__ import annotations

from pathlib import Path

from ..gpu_operator import GpuOperatorAddon
from .cluster import DEMO_INVENTORY, Addon, ControlPlane
from .dra import DynamicResources
from .gpumetrics import GpuMetrics
from .jobset import JobSet
from .keystone_auth import KeystoneAuthWebhook
from .kueue import DEFAULT_PODS_READY_TIMEOUT, Kueue, MultiKueueSettings
from .metallb import MetalLB
from .mpi_operator import MPIOperator
from .provisioner import SharedFolderProvisioner


def default_addons(*, keystone_url: str | None = None, inventory: Path = DEMO_INVENTORY,
                   kueue: bool = False, dra: bool = False,
                   pods_ready_timeout: float = DEFAULT_PODS_READY_TIMEOUT,
                   multikueue: MultiKueueSettings | None = None) -> list[Addon]:
    addons: list[Addon] = [MetalLB(inventory), GpuMetrics(inventory), SharedFolderProvisioner(),
                           GpuOperatorAddon()]
    if dra:
        addons.append(DynamicResources())
    if keystone_url:
        addons.append(KeystoneAuthWebhook(keystone_url))
    if kueue:
        addons += [JobSet(), MPIOperator(),
                   Kueue(pods_ready_timeout=pods_ready_timeout, multikueue=multikueue)]
    return addons


def addon(cp: ControlPlane, name: str) -> Addon | None:
    """The control plane's addon called `name` (e.g. "gpumetrics"), or None."""
    return next((a for a in cp.addons if a.name == name), None)
