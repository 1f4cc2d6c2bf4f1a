from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    label = "calendars"
    verbose_name = "The cluster's calendar: reservations and maintenance windows"

    def ready(self) -> None:
        from catalogue.hooks import CAPACITY_OUTLOOKS
        from workloads.hooks import ADMISSION_CHECKS, CAPACITY_BLOCKS, LAUNCH_ADVISORS

        from .admission import maintenance_admission_check, maintenance_launch_advice
        from .capacity_plan import calendar_taken, queue_blocks
        from .reservations import reservation_launch_advice

        # workloads cannot import this app: it calls these at every launch and launch check,
        # and plays the queue estimate around the blocks (maintenance windows, other tenants'
        # reservations); the catalogue's capacity outlook takes out what the calendar takes
        ADMISSION_CHECKS.register("maintenance", maintenance_admission_check)
        LAUNCH_ADVISORS.register("maintenance", maintenance_launch_advice)
        LAUNCH_ADVISORS.register("reservation", reservation_launch_advice)
        CAPACITY_BLOCKS.register("calendars", queue_blocks)
        CAPACITY_OUTLOOKS.register("calendars", calendar_taken)
