"""The admin's calendar pages, mounted under /admin/; their URL names are in the calendars
namespace (urls.py includes these: one namespace for the app)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("calendar/", admin_views.calendar_admin, name="admin"),
    path("calendar/windows/", admin_views.window_announce, name="admin-announce"),
    path("calendar/windows/<int:pk>/cancel/", admin_views.window_remove,
         name="admin-window-cancel"),
    path("calendar/allowances/<int:pk>/", admin_views.allowance_edit, name="admin-allowance"),
]
