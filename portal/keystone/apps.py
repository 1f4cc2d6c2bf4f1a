from django.apps import AppConfig


class KeystoneConfig(AppConfig):
    name = "portal.keystone"
    label = "keystone"
    verbose_name = "Keystone identity"
