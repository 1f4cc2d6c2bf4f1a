"""gpuctl's commands, a module per noun (as gh's pkg/cmd/<noun>/). Each module's `register`
puts its commands on the parser: the verbs of its noun (`gpuctl webhook add`), or commands of
their own where gpuctl spells them flat (`gpuctl launch`, `gpuctl logs`). NOUNS is their order
in `gpuctl --help`."""

from __future__ import annotations

from types import ModuleType

from . import (
    budget,
    calendar,
    catalogue,
    cluster,
    dataset,
    department,
    files,
    identity,
    logs,
    maintenance,
    notification,
    price,
    quota,
    record,
    report,
    request,
    reservation,
    secret,
    ssh,
    usage,
    volume,
    webhook,
    workload,
)

NOUNS: tuple[ModuleType, ...] = (identity, catalogue, cluster, workload, logs, ssh, files, secret, volume, dataset, quota, usage,
                                 budget, notification, webhook, reservation, maintenance,
                                 calendar, department, record, request, price, report)
