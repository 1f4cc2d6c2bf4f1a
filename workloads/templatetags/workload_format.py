"""How the pages write a workload's GPUs: `{{ workload|gpus }}` → "1× a100", and for a
distributed workload (a group of nodes) "2 nodes × 4× a100 (8 GPUs)"; `{{ workload|gpus_short }}`
→ "1 × a100" or "2 × 4 × a100" where a table column has little room."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def gpus(workload: Any) -> str:
    each = f"{workload.gpu_count}× {workload.gpu_type.slug}"
    if workload.nodes <= 1:
        return each
    return f"{workload.nodes} nodes × {each} ({workload.gpu_total} GPUs)"


@register.filter
def gpus_short(workload: Any) -> str:
    nodes = f"{workload.nodes} × " if workload.nodes > 1 else ""
    return f"{nodes}{workload.gpu_count} × {workload.gpu_type.slug}"
