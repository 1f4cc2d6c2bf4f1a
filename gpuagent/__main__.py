"""`python -m gpuagent --port 9400 --interval 5 [--fake]`: the NVML exporter of a GPU node."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading

from gpuagent.exporter import Exporter
from gpuagent.nvml import FakeReader, GpuReader, NvmlReader
from gpuagent.podresources import (
    DEFAULT_SOCKET,
    Holder,
    KubeletPodResources,
    NoPodMapping,
    PodMapper,
    StaticPodMapping,
)
from gpuagent.processes import (
    DEFAULT_POD_LOGS,
    DEFAULT_PROC,
    CgroupPods,
    NoProcessMapping,
    ProcessMapper,
    StaticProcessMapping,
)
from gpuagent.sampler import Sampler


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpuagent", description="NVML exporter in dcgm-exporter's format, with pod labels."
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument(
        "--port", type=int, default=9400, help="port (default 9400, dcgm-exporter's)"
    )
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--hostname",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="the Hostname label (default $NODE_NAME, else the host name)",
    )
    parser.add_argument(
        "--pod-resources-socket",
        default=None,
        help=f"kubelet pod-resources socket (default {DEFAULT_SOCKET})",
    )
    parser.add_argument(
        "--no-pod-mapping", action="store_true", help="no kubelet: export GPUs without pod labels"
    )
    parser.add_argument(
        "--fake",
        action="store_true",
        help="scripted GPUs instead of NVML (a demo node of four A100s, two held by demo pods)",
    )
    parser.add_argument(
        "--fake-node",
        metavar="FILE",
        help="scripted GPUs of one simulated node, described by FILE (JSON: the GPUs and the "
        "workload each runs, re-read when it changes; README.md, 'The node file')",
    )
    parser.add_argument(
        "--proc-root",
        default=DEFAULT_PROC,
        help=f"the host's /proc, for the cgroup of each GPU process (default {DEFAULT_PROC}; "
        "the DaemonSet runs with hostPID)",
    )
    parser.add_argument(
        "--pod-logs",
        default=DEFAULT_POD_LOGS,
        help=f"the kubelet's pod log directory, for pod UID → namespace/name (default "
        f"{DEFAULT_POD_LOGS}; only its directory names are read)",
    )
    parser.add_argument(
        "--no-process-mapping",
        action="store_true",
        help="do not attribute GPU processes to pods: a shared GPU's figures are the device's",
    )
    parser.add_argument("--log-level", default=os.environ.get("GPUAGENT_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    if args.fake and args.fake_node:
        parser.error("--fake and --fake-node are two different fakes: give one")
    return args


def build(args: argparse.Namespace) -> Exporter:
    reader: GpuReader
    mapper: PodMapper
    processes: ProcessMapper
    if args.fake:
        fake = FakeReader.demo(4)
        fake.seconds_per_read = args.interval
        reader = fake
        processes = StaticProcessMapping(fake.process_pods)
    elif args.fake_node:
        try:
            node = FakeReader.from_node_file(args.fake_node)
        except ValueError as exc:
            raise SystemExit(f"gpuagent: --fake-node: {exc}") from None
        node.seconds_per_read = args.interval
        reader = node
        processes = StaticProcessMapping(node.process_pods)  # the node file plays /proc
    else:
        reader = NvmlReader()
        processes = CgroupPods(args.proc_root, args.pod_logs)
    if args.no_process_mapping:
        processes = NoProcessMapping()
    if args.no_pod_mapping:
        mapper = NoPodMapping()
    elif args.fake and args.pod_resources_socket is None:
        mapper = StaticPodMapping(
            {
                fake.gpus[0].uuid: Holder("vision-lab", "train-resnet-0", "trainer"),
                fake.gpus[1].uuid: Holder("vision-lab", "jupyter-alice", "notebook"),
            }
        )
    else:
        mapper = KubeletPodResources(args.pod_resources_socket or DEFAULT_SOCKET)
    sampler = Sampler(
        reader=reader,
        mapper=mapper,
        hostname=args.hostname,
        interval=args.interval,
        processes=processes,
    )
    return Exporter(sampler, host=args.host, port=args.port)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    exporter = build(args)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    exporter.start()
    print(f"gpuagent listening on {exporter.url}", flush=True)
    stopping.wait()
    exporter.stop()


if __name__ == "__main__":
    main()
