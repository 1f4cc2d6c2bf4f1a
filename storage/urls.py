"""The volumes and datasets pages (the API: api/urls.py)."""

from django.urls import include, path

from . import views

app_name = "storage"

urlpatterns = [
    path("volumes/", views.volumes_page, name="volumes"),
    path("volumes/new/", views.create, name="create"),
    path("volumes/<int:pk>/grow/", views.grow, name="grow"),
    path("volumes/<int:pk>/delete/", views.delete, name="delete"),
    path("datasets/", views.datasets_page, name="datasets"),
    path("admin/", include("storage.admin_urls")),
]
