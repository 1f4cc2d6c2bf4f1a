from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    label = "calendars"
    verbose_name = "The cluster's calendar: reservations and maintenance windows"

    def ready(self) -> None:
        from workloads.selectors import register_launch_advisor

        from .reservations import reservation_launch_advice

        # workloads cannot import this app: it asks this at every launch check
        register_launch_advisor("reservation", reservation_launch_advice)
