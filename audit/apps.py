from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    label = "audit"
    verbose_name = "Audit trail"
