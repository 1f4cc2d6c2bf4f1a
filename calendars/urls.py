"""The calendar pages (the API: api/urls.py): the GPU types' calendar and its booking form, and
the admin's (admin_urls.py) under /admin/ in the same namespace."""

from django.urls import include, path

from . import views

app_name = "calendars"

urlpatterns = [
    path("calendar/", views.calendar_page, name="calendar"),
    path("calendar/book/", views.book, name="book"),
    path("calendar/reservations/<int:pk>/cancel/", views.cancel, name="cancel"),
    path("admin/", include("calendars.admin_urls")),
]
