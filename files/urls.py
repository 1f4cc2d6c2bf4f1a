"""The file browser's page (the API: files/api/urls.py)."""

from django.urls import path

from . import views

app_name = "files"

urlpatterns = [
    path("volumes/<int:id>/files/", views.browser, name="browser"),
]
