"""The admin's storage classes page, mounted under /admin/; its URL names are in the storage
namespace (urls.py includes these: one namespace for the app)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("storage-classes/", admin_views.storage_classes, name="admin-classes"),
]
