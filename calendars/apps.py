from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    label = "calendars"
    verbose_name = "The cluster's calendar: reservations and maintenance windows"

    def ready(self) -> None:
        from workloads.queue import register_capacity_blocks
        from workloads.selectors import register_launch_advisor

        from .capacity_plan import capacity_advice, queue_blocks

        # workloads cannot import this app: the launch check's capacity text, and the blocks
        # the queue estimate plays around (maintenance windows, other tenants' reservations)
        register_launch_advisor("calendar-capacity", capacity_advice)
        register_capacity_blocks("calendar", queue_blocks)
