from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "catalogue"
    label = "catalogue"
    verbose_name = "GPU types and templates"
