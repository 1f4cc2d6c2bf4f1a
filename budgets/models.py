"""GPU-hour budgets: what a tenant (project) may burn per month, quarter or year.

A budget counts weighted GPU-hours: each workload's run in the period × its GPUs × the weight of
its GPU type (selectors.budget_status). No budget row: no budget (unlimited)."""

from __future__ import annotations

from django.db import models

from .querysets import BudgetQuerySet, BudgetThresholdCrossedQuerySet

DEFAULT_WARN_AT = [50, 80, 100]


def default_warn_at() -> list[int]:
    return list(DEFAULT_WARN_AT)


class Budget(models.Model):
    class Period(models.TextChoices):
        MONTH = "month", "month"
        QUARTER = "quarter", "quarter"
        YEAR = "year", "year"

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE,
                                  related_name="budget")
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.MONTH)
    gpu_hours = models.DecimalField(max_digits=12, decimal_places=2,
                                    help_text="weighted GPU-hours per period")
    # {GPU type slug: weight}; a type not named weighs 1
    weights = models.JSONField(default=dict, blank=True)
    # at 100 %: new launches refused (and the Kueue queue held); soft: warnings only
    hard = models.BooleanField(default=False)
    warn_at = models.JSONField(default=default_warn_at, blank=True)  # percentages, sorted
    # at 100 %: the running workloads are warned, then stopped after the grace
    stop_at_exhaustion = models.BooleanField(default=False)
    # {Keystone user id: GPU-hours}: a user's own cap inside the project's budget
    user_caps = models.JSONField(default=dict, blank=True)
    # what the periodic check settled (derived, never audited): the weighted GPU-hours of the
    # period that starts at `settled_start` until `settled_until` (a few minutes before the
    # check, past the tracker's late writes), in all and by Keystone user id. A launch's check adds
    # only what ran since, so it reads the workloads running or finished since then, not the
    # period's every one (selectors.budget_status). Cleared when the budget changes.
    settled_start = models.DateTimeField(null=True, blank=True)
    settled_until = models.DateTimeField(null=True, blank=True)
    settled_used = models.FloatField(default=0.0)
    settled_by_user = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BudgetQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__name"]

    def __str__(self) -> str:
        return f"budget of {self.tenant}"

    def weight(self, gpu_slug: str) -> float:
        return float((self.weights or {}).get(gpu_slug, 1.0))


class BudgetThresholdCrossed(models.Model):
    """A threshold (percent) a budget crossed in the period that starts at `period_start`: one
    row each, so each notifies exactly once per period (retried or concurrent checks alike).
    The 100 % row's `crossed_at` is also when "stop at exhaustion" warned the running ones."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="crossed")
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField()
    crossed_at = models.DateTimeField()

    objects = BudgetThresholdCrossedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["budget", "period_start", "threshold"],
                                               name="one_crossing_per_threshold_and_period")]

    def __str__(self) -> str:
        return f"{self.budget}: {self.threshold} % from {self.period_start:%Y-%m-%d}"
