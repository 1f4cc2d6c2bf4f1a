"""JupyterHub's KubeSpawner starting N notebooks at once, for bench/notebook_burst_bench.py.

It runs in a virtualenv of its own (jupyterhub-kubespawner and its kubernetes_asyncio client,
cached outside the clone by the benchmark), never in the portal's: nothing of the project is
imported. The spawners are KubeSpawner's own class with the stand-in Hub and user its test
mode provides (`_mock=True`): what is timed is KubeSpawner's code path, `start()` — create the
pod, then wait on its pod reflector until the pod runs — as a hub runs it for each user.

    python bench/kubespawner_side.py --namespace NS --count 8 --image IMAGE --gpu-type a100

KUBECONFIG names the cluster. Prints one JSON object: each start's seconds and the address it
returned, and the wall time from the first start to the last one done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from kubespawner import KubeSpawner


async def burst(args: argparse.Namespace) -> dict:
    spawners = []
    for i in range(args.count):
        spawner = KubeSpawner(_mock=True, namespace=args.namespace, image=args.image,
                              cmd=["start-notebook.sh"], port=8888,
                              node_selector={"gputype": args.gpu_type},
                              tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                            "effect": "NoSchedule"}],
                              extra_resource_guarantees={"nvidia.com/gpu": "1"},
                              extra_resource_limits={"nvidia.com/gpu": "1"},
                              cpu_guarantee=1, mem_guarantee="4G", start_timeout=120,
                              api_token="bench", oauth_client_id="bench")
        spawner.user.name = f"bench-{args.round}-{i}"
        spawner.user.id = i + 1
        spawner.pod_name = f"jupyter-bench-{args.round}-{i}"
        spawners.append(spawner)

    async def one(spawner: KubeSpawner) -> dict:
        began = time.monotonic()
        address = await spawner.start()
        return {"pod": spawner.pod_name, "seconds": time.monotonic() - began,
                "address": list(address) if isinstance(address, tuple) else address}

    started, started_at = time.monotonic(), time.time()
    results = await asyncio.gather(*(one(s) for s in spawners))
    wall = time.monotonic() - started
    for spawner in spawners:
        await spawner.stop(now=True)
    return {"count": args.count, "seconds_to_all_running": wall, "started_at": started_at,
            "starts": results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--image", required=True)
    parser.add_argument("--gpu-type", default="a100")
    parser.add_argument("--round", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(burst(args))), flush=True)


if __name__ == "__main__":
    main()
