"""Idle culling: the GPU trace of an idle workload, one run of the check, and what it did."""

from __future__ import annotations

import datetime as dt

from django.test import TestCase

from audit.models import AuditRecord
from usage.culling import idle_check
from workloads.models import Workload

IDLE_TRACE = (("kubesim.io/gpu-trace", "idle"),)


def check(now: dt.datetime):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return idle_check(now=now)


def actions(workload: Workload) -> list[str]:
    return list(AuditRecord.objects.filter(target=workload.object_name)
                .order_by("id").values_list("action", flat=True))
