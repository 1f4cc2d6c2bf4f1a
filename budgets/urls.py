"""The budget pages (the API: api/urls.py): the project's, and the admin's (admin_urls.py)
under /admin/ in the same namespace."""

from django.urls import include, path

from . import views

app_name = "budgets"

urlpatterns = [
    path("budget/", views.budget_page, name="mine"),
    path("budget/chart/", views.budget_chart, name="chart"),
    path("admin/", include("budgets.admin_urls")),
]
