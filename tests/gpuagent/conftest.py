"""Fixtures of the agent's tests: a kubelet pod-resources gRPC server on a unix socket."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuagent.podresources import (
    SERVICE,
    ContainerDevices,
    ContainerResources,
    ListPodResourcesRequest,
    ListPodResourcesResponse,
    PodResources,
)


def pod_resources(
    namespace: str, pod: str, containers: dict[str, list[tuple[str, list[str]]]]
) -> Any:
    """PodResources: container name → [(resource name, device ids)]."""
    return PodResources(
        name=pod,
        namespace=namespace,
        containers=[
            ContainerResources(
                name=name,
                devices=[
                    ContainerDevices(resource_name=resource, device_ids=ids)
                    for resource, ids in devices
                ],
            )
            for name, devices in containers.items()
        ],
    )


class FakeKubelet:
    """A real gRPC server speaking v1.PodResourcesLister on a unix socket; `pods` is its answer."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.pods: list[Any] = []
        self.calls = 0
        self.status: grpc.StatusCode | None = None  # answer this error instead
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=ListPodResourcesRequest.FromString,
                    response_serializer=ListPodResourcesResponse.SerializeToString,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        self._server.add_insecure_port(f"unix://{socket_path}")

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls += 1
        if self.status is not None:
            context.abort(self.status, "kubelet says no")
        return ListPodResourcesResponse(pod_resources=self.pods)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        # until gRPC has shut the listener down, which unlinks the socket's path: a kubelet
        # started again at the same path before that would lose its new socket to the old
        # server's unlink (the client then finds no file to connect to)
        self._server.stop(grace=None).wait(timeout=10)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short: a unix socket path must fit in 108 bytes, pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="gpuagent-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(socket_dir: Path) -> Iterator[FakeKubelet]:
    server = FakeKubelet(str(socket_dir / "kubelet.sock"))
    server.start()
    yield server
    server.stop()
