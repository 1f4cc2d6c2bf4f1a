from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "files"
    label = "files"
    verbose_name = "Files of the volumes"
