from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import AllowanceView, CalendarView, MaintenanceWindowViewSet, ReservationViewSet

router = SimpleRouter()
router.register("reservations", ReservationViewSet, basename="reservation")
router.register("maintenance-windows", MaintenanceWindowViewSet, basename="maintenance-window")

urlpatterns = [
    path("tenants/<int:pk>/reservation-allowance/", AllowanceView.as_view(),
         name="tenant-reservation-allowance"),
    path("calendar/", CalendarView.as_view(), name="calendar"),
    *router.urls,
]
