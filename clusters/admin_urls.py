"""The admin's cluster pages, mounted under /admin/."""

from django.urls import path

from . import admin_views

app_name = "clusters"

urlpatterns = [
    path("clusters/", admin_views.cluster_list, name="list"),
    path("clusters/new/", admin_views.cluster_new, name="new"),
    path("clusters/<int:pk>/", admin_views.cluster_detail, name="detail"),
]
