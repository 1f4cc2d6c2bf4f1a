"""GPU → pod mapping through the kubelet's pod-resources gRPC API (v1).

The kubelet serves `v1.PodResourcesLister` on a unix socket,
`/var/lib/kubelet/pod-resources/kubelet.sock`. `List` answers, for every pod on the node, the
devices each container was allocated by a device plugin; with the NVIDIA device plugin's default
settings the device ids of `nvidia.com/gpu` are GPU UUIDs (`GPU-…`).

The messages are declared here with the protobuf runtime instead of generated code: only the
fields the agent reads, under their numbers in the published API. Unknown fields (cpu_ids,
memory, topology, dynamic_resources) are skipped by the parser. As a .proto:

    syntax = "proto3";
    package v1;
    service PodResourcesLister {
      rpc List(ListPodResourcesRequest) returns (ListPodResourcesResponse) {}
    }
    message ListPodResourcesRequest {}
    message ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    message PodResources {
      string name = 1; string namespace = 2; repeated ContainerResources containers = 3;
    }
    message ContainerResources { string name = 1; repeated ContainerDevices devices = 2; }
    message ContainerDevices { string resource_name = 1; repeated string device_ids = 2; }
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "v1.PodResourcesLister"
LIST_METHOD = f"/{SERVICE}/List"
# Resources whose device ids are GPUs: whole (`GPU-…`), time-sliced replicas (`GPU-…::n`, under
# the plain name or renamed), or MIG instances (`MIG-…`: nvidia.com/mig-<profile> under the mixed
# strategy, nvidia.com/gpu under the single one).
GPU_RESOURCES = frozenset({"nvidia.com/gpu", "nvidia.com/gpu.shared"})
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _MESSAGE = _F.TYPE_STRING, _F.TYPE_MESSAGE
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# message → [(field, number, type, label, message type)]
_API: dict[str, list[tuple[str, int, int, int, str]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MESSAGE, _MANY, "PodResources")],
    "PodResources": [
        ("name", 1, _STRING, _ONE, ""),
        ("namespace", 2, _STRING, _ONE, ""),
        ("containers", 3, _MESSAGE, _MANY, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _STRING, _ONE, ""),
        ("devices", 2, _MESSAGE, _MANY, "ContainerDevices"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _STRING, _ONE, ""),
        ("device_ids", 2, _STRING, _MANY, ""),
    ],
}


def _build_messages() -> dict[str, type[Any]]:
    file = descriptor_pb2.FileDescriptorProto(
        name="gpuagent/podresources_v1.proto", package="v1", syntax="proto3"
    )
    for message_name, fields in _API.items():
        message = file.message_type.add(name=message_name)
        for name, number, kind, label, type_name in fields:
            entry = message.field.add(
                name=name, json_name=name, number=number, type=kind, label=label
            )
            if type_name:
                entry.type_name = f".v1.{type_name}"
    # A pool of our own, so these names cannot clash with another copy of the kubelet API.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}"))
        for name in _API
    }


_MESSAGES = _build_messages()
ListPodResourcesRequest = _MESSAGES["ListPodResourcesRequest"]
ListPodResourcesResponse = _MESSAGES["ListPodResourcesResponse"]
PodResources = _MESSAGES["PodResources"]
ContainerResources = _MESSAGES["ContainerResources"]
ContainerDevices = _MESSAGES["ContainerDevices"]


@dataclass(frozen=True)
class Holder:
    """The container a GPU (or a replica of it, or a MIG instance) is allocated to."""

    namespace: str
    pod: str
    container: str
    # a time-sliced replica: other pods may hold replicas of the same GPU, and what NVML says of
    # the device is theirs too
    shared: bool = False


# device (a GPU UUID, or a MIG device UUID) → every container holding it or a replica of it
Holders = dict[str, tuple[Holder, ...]]


class PodMappingError(Exception):
    """The kubelet could not be asked (no socket, timeout, an error status)."""


class PodMapper(Protocol):
    def holders(self) -> Holders:
        """GPU UUID (`GPU-…`) or MIG device UUID (`MIG-…`) → the containers holding it, in the
        kubelet's order. Raises PodMappingError."""
        ...

    def close(self) -> None: ...


def gpu_uuid(device_id: str) -> str | None:
    """The GPU (`GPU-…`) or MIG device (`MIG-…`) UUID in a device plugin's device id, or None
    for what is neither.

    With time-slicing the plugin advertises replicas as `GPU-…::0`, `GPU-…::1`.
    """
    uuid = device_id.split("::", 1)[0]
    return uuid if uuid.startswith(("GPU-", "MIG-")) else None


def _is_gpu_resource(name: str) -> bool:
    return name in GPU_RESOURCES or name.startswith(MIG_RESOURCE_PREFIX)


def holders_from_response(response: Any) -> Holders:
    """Device UUID → every container holding it. A time-sliced GPU lists each pod holding a
    replica (marked `shared`), once per container even if it holds several replicas."""
    holders: dict[str, list[Holder]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if not _is_gpu_resource(devices.resource_name):
                    continue
                for device_id in devices.device_ids:
                    uuid = gpu_uuid(device_id)
                    if uuid is None:
                        continue
                    shared = "::" in device_id or devices.resource_name.endswith(".shared")
                    holder = Holder(pod.namespace, pod.name, container.name, shared)
                    listed = holders.setdefault(uuid, [])
                    if holder not in listed:
                        listed.append(holder)
    return {uuid: tuple(listed) for uuid, listed in holders.items()}


class KubeletPodResources:
    """`PodMapper` over the kubelet's socket. The channel is made on first use and reused."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, *, timeout: float = 2.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel: Any = None
        self._list: Any = None

    def _stub(self) -> Any:
        if self._list is None:
            import grpc

            self._channel = grpc.insecure_channel(f"unix://{self.socket_path}")
            self._list = self._channel.unary_unary(
                LIST_METHOD,
                request_serializer=ListPodResourcesRequest.SerializeToString,
                response_deserializer=ListPodResourcesResponse.FromString,
            )
        return self._list

    def holders(self) -> Holders:
        import grpc

        try:
            response = self._stub()(ListPodResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            # A new channel next time: after a kubelet restart (a new socket) it connects at
            # once instead of waiting out the old channel's reconnect backoff.
            self.close()
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            name = code.name if code is not None else "ERROR"
            raise PodMappingError(f"{self.socket_path}: List: {name}: {details}") from exc
        return holders_from_response(response)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._list = None


class NoPodMapping:
    """`PodMapper` for a node outside Kubernetes (or `--no-pod-mapping`): no GPU is held."""

    def holders(self) -> Holders:
        return {}

    def close(self) -> None:
        pass


class StaticPodMapping:
    """`PodMapper` with a fixed answer (the `--fake` demo)."""

    def __init__(self, holders: Mapping[str, Holder | Sequence[Holder]]) -> None:
        self._holders: Holders = {
            uuid: (held,) if isinstance(held, Holder) else tuple(held)
            for uuid, held in holders.items()
        }

    def holders(self) -> Holders:
        return dict(self._holders)

    def close(self) -> None:
        pass
