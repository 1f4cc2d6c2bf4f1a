"""What the site charges and what it charged.

- PriceSheet: the prices in force from `effective_from` (a day, from midnight in the portal's
  time zone) until the next sheet's day: per GPU type and hour (GpuPrice; a shared type is
  charged per GPU-equivalent: a quarter of a T4 for an hour costs a quarter of the T4's
  price), optionally per CPU-hour and per GiB-month of storage. A change is a new sheet; the
  old ones stay (the history). A type without a price on a sheet is not charged while it is
  in force.
- MonthClose: a month whose statement is frozen. Its StatementLine rows (per tenant,
  resource and price in force: the quantity, the price used, the cost) are what its reports
  read from then on; a later price change does not move them. The tenant's department,
  principal investigator and grants are copied as they were when the month closed.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

# amounts: a price to the hundredth of a cent, a cost to the cent, quantities to the millionth
PRICE_DIGITS, PRICE_PLACES = 12, 4


def price_field(**options: Any) -> models.DecimalField:  # type: ignore[type-arg]
    return models.DecimalField(max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES, **options)


class PriceSheet(models.Model):
    effective_from = models.DateField(unique=True)
    cpu_hour = price_field(null=True, blank=True,
                                   help_text="per CPU core and hour; null: not charged")
    storage_gib_month = price_field(null=True, blank=True,
                                            help_text="per GiB held a whole month; null: "
                                                      "not charged")
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    set_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-effective_from"]

    def __str__(self) -> str:
        return f"prices from {self.effective_from}"


class GpuPrice(models.Model):
    sheet = models.ForeignKey(PriceSheet, on_delete=models.CASCADE, related_name="gpu_prices")
    gpu_type = models.ForeignKey("catalogue.GpuType", on_delete=models.PROTECT, related_name="+")
    per_hour = price_field(help_text="per GPU-equivalent and hour")

    class Meta:
        ordering = ["gpu_type__slug"]
        constraints = [models.UniqueConstraint(fields=["sheet", "gpu_type"],
                                               name="billing_gpuprice_one_per_type")]

    def __str__(self) -> str:
        return f"{self.gpu_type_id} at {self.per_hour}"


class MonthClose(models.Model):
    month = models.DateField(unique=True, help_text="its first day")
    currency = models.CharField(max_length=3)
    closed_at = models.DateTimeField(auto_now_add=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} closed"


class MonthReopen(models.Model):
    """A closed month an admin opened again, and why: its frozen statement was dropped (the
    audit record month.reopen keeps what it held). The beat closes no month that has one (an
    admin closes it again when it is right); each reopening is a row of its own."""

    month = models.DateField(help_text="its first day")
    reason = models.TextField()
    reopened_at = models.DateTimeField(auto_now_add=True)
    reopened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-reopened_at", "-pk"]
        indexes = [models.Index(fields=["month"], name="billing_reopen_month")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} reopened"


class StatementLine(models.Model):
    class Resource(models.TextChoices):
        GPU = "gpu", "GPU-hours"
        CPU = "cpu", "CPU-hours"
        STORAGE = "storage", "storage GiB-months"

    month = models.ForeignKey(MonthClose, on_delete=models.CASCADE, related_name="lines")
    # the tenant's row may go; its name and groupings stay on the statement
    tenant = models.ForeignKey("tenants.Tenant", null=True, on_delete=models.SET_NULL,
                               related_name="+")
    tenant_name = models.CharField(max_length=255)
    department = models.CharField(max_length=255, blank=True, default="")
    pi = models.CharField(max_length=255, blank=True, default="",
                          help_text="the principal investigator's Keystone user id")
    pi_name = models.CharField(max_length=255, blank=True, default="")
    grants = models.JSONField(default=list, blank=True)
    resource = models.CharField(max_length=8, choices=Resource.choices)
    gpu_type = models.CharField(max_length=40, blank=True, default="")
    quantity = models.DecimalField(max_digits=18, decimal_places=6)
    unit_price = price_field(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=2)
    price_from = models.DateTimeField(help_text="the part of the month this price covered")
    price_until = models.DateTimeField()

    class Meta:
        ordering = ["month", "tenant_name", "resource", "gpu_type", "price_from"]
        indexes = [models.Index(fields=["month", "tenant"])]

    def __str__(self) -> str:
        return f"{self.tenant_name} {self.resource} {self.gpu_type}: {self.cost}"
