"""What a budget says at launch: registered with workloads' hooks in apps.py (workloads cannot
import this app).

- `budget_admission_check` runs inside the launch's transaction, after the quota check, with
  the tenant row locked: a hard budget used up (or the user's cap inside it) refuses with 403
  `budget_exhausted`. A soft budget never refuses.
- `budget_launch_advice` tells before submit (the launch page's live check, `POST
  workloads/check/`): a launch whose maximum runtime would cross what is left, a budget used up.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from tenants.models import Tenant
from workloads.hooks import LaunchContext, Note
from workloads.services import AdmissionRefused

from .models import Budget
from .selectors import BudgetStatus, budget_of, budget_status, gpu_hours_text


class BudgetExhausted(AdmissionRefused):
    """A launch refused by a hard GPU-hour budget that is used up (the project's, or the
    user's cap inside it)."""

    code = "budget_exhausted"


def _kind(status: BudgetStatus) -> str:
    return "hard budget" if status.budget is not None and status.budget.hard else "soft budget"


def exhausted_text(status: BudgetStatus) -> str:
    """"vision-lab has used 120.5 of its 120 GPU-hours for November 2026 (hard budget);
    launches are refused until 2026-12-01." (a soft one: launches go on)."""
    text = (f"{status.tenant.name} has used {status.used:.1f} of its "
            f"{gpu_hours_text(status.gpu_hours)} GPU-hours for {status.label} ({_kind(status)})")
    reset = f"{timezone.localtime(status.resets_at):%Y-%m-%d}"
    if status.budget is not None and status.budget.hard:
        return f"{text}; launches are refused until {reset}."
    return f"{text}; launches go on, and it starts again on {reset}."


def cap_text(status: BudgetStatus, who: str, cap: float) -> str:
    used = status.user_used or 0.0
    reset = f"{timezone.localtime(status.resets_at):%Y-%m-%d}"
    refusal = (f"your launches in {status.tenant.name} are refused until {reset}"
               if status.budget is not None and status.budget.hard
               else f"it starts again on {reset}")
    return (f"{who} has used {used:.1f} of their cap of {gpu_hours_text(cap)} GPU-hours "
            f"in {status.tenant.name} for {status.label} ({_kind(status)}); {refusal}.")


def _capped(budget: Budget, user: Any) -> tuple[str, bool]:
    """The user's key in the caps (their Keystone user id: identity/models.py) and whether
    the budget caps them."""
    user_id = getattr(user, "username", None) or ""
    return user_id, bool(user_id) and user_id in (budget.user_caps or {})


def budget_admission_check(*, tenant: Tenant, user: Any, request: dict[str, Any]) -> None:
    budget = budget_of(tenant)
    if budget is None or not budget.hard:
        return
    user_id, capped = _capped(budget, user)
    status = budget_status(tenant, budget=budget, user=user if capped else None)
    if status.exhausted:
        raise BudgetExhausted(exhausted_text(status))
    cap = status.user_cap(user_id) if capped else None
    if cap is not None and (status.user_used or 0.0) >= cap:
        raise BudgetExhausted(cap_text(status, str(user), cap))


def budget_launch_advice(launch: LaunchContext) -> list[Note]:
    """A budget used up (or the user's cap in it), or one the launch's maximum runtime would
    cross (or, with no maximum runtime, might)."""
    tenant, user, gpu_type, gpus = launch.tenant, launch.user, launch.gpu_type, launch.gpus
    max_runtime_minutes = launch.max_runtime_minutes
    budget = budget_of(tenant)
    if budget is None:
        return []
    user_id, capped = _capped(budget, user)
    status = budget_status(tenant, budget=budget, user=user if capped else None)
    if status.exhausted:
        return [("warning", exhausted_text(status))]
    cap = status.user_cap(user_id) if capped else None
    if cap is not None and (status.user_used or 0.0) >= cap:
        return [("warning", cap_text(status, str(user), cap))]
    weight = budget.weight(gpu_type.slug)
    left = status.remaining or 0.0
    if cap is not None:
        left = min(left, cap - (status.user_used or 0.0))
    what = "its hard budget refuses launches once it is used up" if budget.hard else \
        "its budget is soft: the launch goes on, and the project is warned"
    if budget.stop_at_exhaustion:
        what += "; running workloads are stopped when it is used up"
    if not max_runtime_minutes:
        if gpus * weight > 0:
            return [("info", f"No maximum runtime: running on, it may use more than the "
                             f"{left:.1f} GPU-hours left of {tenant.name}'s budget for "
                             f"{status.label} ({what}).")]
        return []
    cost = max_runtime_minutes / 60 * gpus * weight
    if cost <= left:
        return []
    weighted = f" × weight {weight:g}" if weight != 1 else ""
    return [("warning", f"Its maximum runtime ({max_runtime_minutes / 60:g} h × {gpus} "
                        f"{gpu_type.slug} GPUs{weighted} = {cost:.1f} GPU-hours) would cross "
                        f"what is left of {tenant.name}'s budget: {left:.1f} of "
                        f"{gpu_hours_text(status.gpu_hours)} GPU-hours for {status.label} "
                        f"({what}).")]
