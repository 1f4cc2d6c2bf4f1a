from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    label = "billing"
    verbose_name = "Prices, monthly reports and statements"
