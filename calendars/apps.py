from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    label = "calendars"
    verbose_name = "The cluster's calendar: reservations and maintenance windows"
