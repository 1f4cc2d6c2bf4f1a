from django.urls import path

from .views import MonthsView, PricesView, UsageReportView

urlpatterns = [
    path("prices/", PricesView.as_view(), name="prices"),
    path("reports/usage/", UsageReportView.as_view(), name="report-usage"),
    path("reports/months/", MonthsView.as_view(), name="report-months"),
]
