"""The Secrets pages (the API: api/urls.py)."""

from django.urls import path

from . import views

app_name = "credentials"

urlpatterns = [
    path("secrets/", views.secret_list, name="list"),
    path("secrets/<int:pk>/", views.secret_detail, name="detail"),
    path("secrets/<int:pk>/delete/", views.secret_remove, name="delete"),
]
