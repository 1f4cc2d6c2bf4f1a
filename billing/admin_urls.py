"""The admin's prices and months page, mounted under /admin/; its URL names are in the billing
namespace (urls.py includes these: one namespace for the app)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("prices/", admin_views.prices_page, name="admin-prices"),
    path("prices/save/", admin_views.prices_save, name="admin-prices-save"),
    path("prices/close-month/", admin_views.month_close_view, name="admin-month-close"),
    path("prices/reopen-month/", admin_views.month_reopen_view, name="admin-month-reopen"),
]
