from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "budgets"
    label = "budgets"
    verbose_name = "GPU-hour budgets"

    def ready(self) -> None:
        from workloads.selectors import register_launch_advisor
        from workloads.services import register_admission_check

        from .admission import budget_admission_check, budget_launch_advice

        # workloads cannot import this app: it calls these at every launch and launch check
        register_admission_check("budget", budget_admission_check)
        register_launch_advisor("budget", budget_launch_advice)
