"""The admin's catalogue pages, mounted under /admin/ (next to the tenants' pages)."""

from django.urls import path

from . import admin_views

app_name = "catalogue"

urlpatterns = [
    path("gpu-types/", admin_views.gpu_type_list, name="gpu-types"),
    path("gpu-types/new/", admin_views.gpu_type_new, name="gpu-type-new"),
    path("gpu-types/<int:pk>/", admin_views.gpu_type_edit, name="gpu-type-edit"),
    path("gpu-types/<int:pk>/enabled/", admin_views.gpu_type_enabled, name="gpu-type-enabled"),
    path("templates/", admin_views.template_list, name="templates"),
    path("templates/new/", admin_views.template_new, name="template-new"),
    path("templates/<int:pk>/", admin_views.template_edit, name="template-edit"),
    path("templates/<int:pk>/enabled/", admin_views.template_enabled, name="template-enabled"),
]
