"""The admin's budget pages, mounted under /admin/; their URL names are in the budgets
namespace (urls.py includes these: one namespace for the app)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("budgets/", admin_views.budgets_overview, name="admin"),
    path("budgets/<int:pk>/", admin_views.budget_edit, name="admin-edit"),
    path("budgets/<int:pk>/remove/", admin_views.budget_remove, name="admin-remove"),
]
