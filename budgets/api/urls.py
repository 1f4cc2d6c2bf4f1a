from django.urls import path

from .views import BudgetView

urlpatterns = [
    path("tenants/<int:pk>/budget/", BudgetView.as_view(), name="tenant-budget"),
]
