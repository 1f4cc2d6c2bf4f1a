"""kubesim's settings: one dataclass shared by the API server and the simulated cluster."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 8001
    kubeconfig: str | None = None  # where to write a kubeconfig
    token: str | None = None  # optional bearer token required on every request
    inventory: str | None = None  # YAML inventory file; None = no nodes
    state_file: str | None = None  # load at start, save on shutdown
    seed: int = 0  # GPU utilisation traces are deterministic per seed
    # kubelet timing (seconds); tests use small values, the demo realistic ones
    schedule_delay: float = 0.05
    container_create_delay: float = 1.0  # Pending(ContainerCreating) -> Running
    ready_delay: float = 0.5  # Running -> Ready
    bad_image_pattern: str = r"(:nope$|^nonexistent/|does-not-exist)"  # -> ErrImagePull
    default_run_seconds: float = 5.0  # batch pods without an annotation
    # name -> addresses/CIDRs/ranges; the inventory may also give them
    lb_pools: dict[str, list[str]] | None = None
    history_size: int = 10000  # watch events kept; older resourceVersions -> 410
    max_body_bytes: int = 3 * 1024 * 1024
    metrics_interval: float = 5.0  # how often GPU samples advance
    # API-half extras (not part of the seam; defaults keep the seam's behaviour)
    save_interval: float = 5.0  # with state_file: seconds between periodic saves
    bookmark_interval: float = 60.0  # seconds between BOOKMARK events on watches that ask
