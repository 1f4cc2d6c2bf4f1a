"""The workloads' own Prometheus counters: launches admitted and refused at admission.

They live in the process's default registry, which /metrics (portal/metrics.py) exposes, per
process or summed over gunicorn's processes in multiprocess mode.
"""

from __future__ import annotations

from prometheus_client import Counter

WORKLOAD_LAUNCHES = Counter("portal_workload_launches_total", "Workloads admitted",
                            ["template", "gpu_type"])
ADMISSION_REFUSALS = Counter("portal_admission_refusals_total",
                             "Launches refused at admission (quota)", ["gpu_type"])


def launch_admitted(*, template: str, gpu_type: str) -> None:
    WORKLOAD_LAUNCHES.labels(template, gpu_type).inc()


def admission_refused(*, gpu_type: str) -> None:
    ADMISSION_REFUSALS.labels(gpu_type).inc()
