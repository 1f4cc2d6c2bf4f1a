from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    label = "calendars"
    verbose_name = "The cluster's calendar: reservations and maintenance windows"

    def ready(self) -> None:
        from catalogue.selectors import register_capacity_outlook
        from workloads.queue import register_capacity_blocks
        from workloads.selectors import register_launch_advisor
        from workloads.services import register_admission_check

        from .admission import maintenance_admission_check, maintenance_launch_advice
        from .capacity_plan import capacity_advice, queue_blocks, type_upcoming
        from .reservations import reservation_launch_advice

        # workloads cannot import this app: it calls these at every launch and launch check,
        # and plays the queue estimate around the blocks (maintenance windows, other tenants'
        # reservations)
        register_admission_check("maintenance", maintenance_admission_check)
        register_launch_advisor("maintenance", maintenance_launch_advice)
        register_launch_advisor("reservation", reservation_launch_advice)
        register_launch_advisor("calendar-capacity", capacity_advice)
        register_capacity_blocks("calendar", queue_blocks)
        register_capacity_outlook("calendar", type_upcoming)
