"""How the pages write a workload's GPUs: `{{ workload|gpus }}` → Workload.gpus_text ("1× a100",
"2 nodes × 4× a100 (8 GPUs)"); `{{ workload|gpus_short }}` → "1 × a100" or "2 × 4 × a100" where
a table column has little room."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def gpus(workload: Any) -> str:
    return str(workload.gpus_text)


@register.filter
def gpus_short(workload: Any) -> str:
    nodes = f"{workload.nodes} × " if workload.nodes > 1 else ""
    return f"{nodes}{workload.gpu_count} × {workload.gpu_type.slug}"
