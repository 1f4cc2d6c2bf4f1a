from django.apps import AppConfig


class CredentialsConfig(AppConfig):
    name = "credentials"
    label = "credentials"
    verbose_name = "Secrets"
