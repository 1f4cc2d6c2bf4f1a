"""The admin's storage pages, mounted under /admin/: the storage classes offered and the
datasets published; their URL names are in the storage namespace (urls.py includes these: one
namespace for the app)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("storage-classes/", admin_views.storage_classes, name="admin-classes"),
    path("datasets/", admin_views.datasets, name="admin-datasets"),
    path("datasets/<int:pk>/", admin_views.dataset_edit, name="admin-dataset"),
    path("datasets/<int:pk>/delete/", admin_views.dataset_remove, name="admin-dataset-delete"),
]
