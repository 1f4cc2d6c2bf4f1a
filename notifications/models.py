"""What the portal tells people, and how it reaches them.

- Notification: one message to one user about one event (a workload queued, started, finished,
  failed, stopped; an idle warning, a reclaim, a runtime limit near; a budget threshold). Its
  `key` names the event: one row per user and key, so an event told twice (a retried task, two
  workers) is one notification.
- NotificationPreference: a user's choice for one kind on one channel (no row: DEFAULTS).
- Webhook: an outgoing JSON POST (Slack- and Mattermost-compatible), a user's own or a
  project's, signed with its secret. Its state says whether deliveries go out: `active`,
  `disabled` (it failed PORTAL_WEBHOOK_DISABLE_AFTER deliveries in a row) or
  `needs_confirmation` (a project's, whose creator is no longer one of its managers).
- Delivery: one attempt record per notification and outside channel (e-mail, a webhook), or
  one test POST of a webhook: retried with back-off on the workers of the `notifications`
  queue, never in a launch's way.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .querysets import (
    DeliveryQuerySet,
    NotificationQuerySet,
    PreferenceQuerySet,
    WebhookQuerySet,
)


class Kind(models.TextChoices):
    QUEUED = "queued", "queued"
    STARTED = "started", "started"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"
    STOPPED = "stopped", "stopped by the portal"
    IDLE_WARNING = "idle_warning", "idle warning"
    RECLAIM = "reclaim", "GPUs reclaimed"
    RUNTIME_NEAR = "runtime_near", "maximum runtime near"
    BUDGET_THRESHOLD = "budget_threshold", "budget threshold"
    BUDGET_EXHAUSTED = "budget_exhausted", "budget exhausted"
    RESERVATION = "reservation", "reservations"
    MAINTENANCE = "maintenance", "maintenance windows"
    WEBHOOK = "webhook", "a webhook disabled or waiting"
    SECRET = "secret", "a secret's value lost"
    ALLOCATION = "allocation", "a project's allocation ending or ended"
    REQUEST = "request", "a request asked, decided or ended"


class Channel(models.TextChoices):
    PORTAL = "portal", "in the portal"
    EMAIL = "email", "e-mail"
    WEBHOOK = "webhook", "webhook"


# kind → the channels on by default. In the portal: everything. E-mail: what a user is not
# watching happen on the page (no mail for a queued or started workload). Webhooks: everything
# (a user or project that set one up wants to hear).
EXTERNAL_QUIET = frozenset({Kind.QUEUED, Kind.STARTED})
DEFAULTS: dict[str, frozenset[str]] = {
    kind: frozenset({Channel.PORTAL, Channel.WEBHOOK}
                    | (set() if kind in EXTERNAL_QUIET else {Channel.EMAIL}))
    for kind in Kind.values
}


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notifications")
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="+")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    title = models.CharField(max_length=255)
    text = models.TextField(blank=True, default="")
    link = models.CharField(max_length=500, blank=True, default="",
                            help_text="the portal path it is about (a workload's page …)")
    # the workload it is about, if any: an id, not a key (workloads sit above this app)
    workload_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    key = models.CharField(max_length=200, help_text="the event: one notification per user")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    # set once when the outside channels were handed out (the claim of the dispatch task)
    dispatched_at = models.DateTimeField(null=True, blank=True)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["user", "key"],
                                               name="notifications_one_per_user_and_event")]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="notifications_user_recent"),
            models.Index(fields=["user"], condition=Q(read_at__isnull=True),
                         name="notifications_user_unread"),
            models.Index(fields=["created_at"], condition=Q(dispatched_at__isnull=True),
                         name="notifications_undispatched"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.user_id}: {self.title}"


class NotificationPreference(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notification_preferences")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    channel = models.CharField(max_length=16, choices=Channel.choices)
    enabled = models.BooleanField()

    objects = PreferenceQuerySet.as_manager()

    class Meta:
        ordering = ["kind", "channel"]
        constraints = [models.UniqueConstraint(fields=["user", "kind", "channel"],
                                               name="notifications_one_preference")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}/{self.channel}: {'on' if self.enabled else 'off'}"


class Webhook(models.Model):
    """Where a user's (user set) or a project's (tenant set) notifications are POSTed."""

    class State(models.TextChoices):
        ACTIVE = "active", "active"
        DISABLED = "disabled", "disabled: its deliveries kept failing"
        NEEDS_CONFIRMATION = "needs_confirmation", "waiting for a manager's confirmation"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="webhooks")
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True,
                               on_delete=models.CASCADE, related_name="+")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=64, help_text="the HMAC-SHA256 signing key")
    kinds = models.JSONField(default=list, blank=True, help_text="[] = every kind")
    state = models.CharField(max_length=24, choices=State.choices, default=State.ACTIVE)
    failures = models.PositiveIntegerField(default=0, help_text="deliveries failed in a row")
    state_changed_at = models.DateTimeField(null=True, blank=True)
    # a project's webhook posts while its creator (or the manager who confirmed it last) is one
    # of the project's managers
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WebhookQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [models.CheckConstraint(
            condition=Q(user__isnull=True) ^ Q(tenant__isnull=True),
            name="notifications_webhook_of_a_user_or_a_project")]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"

    @property
    def active(self) -> bool:
        return self.state == self.State.ACTIVE


class Delivery(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "not sent: the webhook is disabled or waits for a confirmation"

    DONE = frozenset({State.SENT, State.FAILED, State.SKIPPED})

    # none for a test POST (the "test" button)
    notification = models.ForeignKey(Notification, null=True, blank=True,
                                     on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    webhook = models.ForeignKey(Webhook, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="deliveries")
    test = models.BooleanField(default=False, help_text="a test POST someone asked for")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    last_status = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(notification__isnull=False) | Q(test=True, webhook__isnull=False),
                name="notifications_delivery_of_a_notification_or_a_test"),
            models.UniqueConstraint(fields=["notification", "channel"],
                                    condition=Q(webhook__isnull=True),
                                    name="notifications_one_mail_per_notification"),
            models.UniqueConstraint(fields=["notification", "webhook"],
                                    condition=Q(webhook__isnull=False),
                                    name="notifications_one_post_per_webhook"),
        ]

    def __str__(self) -> str:
        about = f"test of webhook {self.webhook_id}" if self.test else self.notification_id
        return f"{self.channel} of {about}: {self.state}"

    @property
    def done(self) -> bool:
        return self.state in self.DONE
