from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    label = "storage"
    verbose_name = "Volumes and storage classes"
