from django.apps import AppConfig


class KeystoneConfig(AppConfig):
    name = "identity"
    label = "keystone"
    verbose_name = "Keystone identity"
