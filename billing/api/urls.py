from django.urls import path

from .views import MonthReopenView, MonthsView, PricesView, UsageReportView

urlpatterns = [
    path("prices/", PricesView.as_view(), name="prices"),
    path("reports/usage/", UsageReportView.as_view(), name="report-usage"),
    path("reports/months/", MonthsView.as_view(), name="report-months"),
    path("reports/months/reopen/", MonthReopenView.as_view(), name="report-month-reopen"),
]
