from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "budgets"
    label = "budgets"
    verbose_name = "GPU-hour budgets"

    def ready(self) -> None:
        from workloads.hooks import ADMISSION_CHECKS, LAUNCH_ADVISORS

        from .admission import budget_admission_check, budget_launch_advice

        # workloads cannot import this app: it calls these at every launch and launch check
        ADMISSION_CHECKS.register("budget", budget_admission_check)
        LAUNCH_ADVISORS.register("budget", budget_launch_advice)
