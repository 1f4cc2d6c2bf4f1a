"""Workloads: what was launched, what happened to it, and where the tracker left off; and the
records of who reaches each one (its OAuth client, its proxy's sessions, its SSH certificates
and sessions), which the tenant's rule in access/ governs.

- `WorkloadAccess`: a service workload's OAuth client (a django-oauth-toolkit Application whose
  client id is the audience of the workload's tokens) and whether it is public.
- `ProxySession`: one browser session admitted by a workload's proxy, tied to the portal
  session it came from; each refresh re-checks both (workloads/oidc.py).
- `SSHCertificate`: an SSH certificate the portal signed for a user's key and one workload
  (access/ssh.py); `SSHSession`: one SSH connection to a workload's server, as the server
  reported it (start, checks, end).

These four were the access app's until they moved here, where their keys point: their tables
keep the names they were made with (access_*).
"""

from django.conf import settings
from django.db import models
from django.urls import reverse

from access.proxy import PROXY_PORT
from catalogue.models import GpuType, Template, open_url
from clusters.models import home_cluster_name

from .querysets import (
    SSHCertificateQuerySet,
    SSHSessionQuerySet,
    WorkloadAccessQuerySet,
    WorkloadEventQuerySet,
    WorkloadQuerySet,
)


def objects_cluster(kind: str, cluster: str) -> str:
    """The cluster holding a workload's objects (of `kind`, on `cluster`): where they are made,
    stopped and deleted, and whose tracker judges it. A service's own; the home cluster for
    batch and distributed work, whose objects are made there and dispatched by MultiKueue to
    the worker its `cluster` names (the worker's copy is MultiKueue's)."""
    if kind == Template.Kind.BATCH:
        return home_cluster_name()
    return cluster or home_cluster_name()


class Workload(models.Model):
    """One launch: a Job (batch) or a Deployment + Service (service) in the tenant's namespace."""

    class State(models.TextChoices):
        SUBMITTED = "submitted", "submitted"
        CREATING = "creating", "creating"
        QUEUED = "queued", "queued"  # waiting in its tenant's Kueue queue (tenants/kueue.py, workloads/queue.py)
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        STOPPING = "stopping", "stopping"
        STOPPED = "stopped", "stopped"

    ACTIVE_STATES = (State.SUBMITTED, State.CREATING, State.QUEUED, State.PENDING, State.RUNNING,
                     State.STOPPING)
    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.STOPPED)
    LIVE_STATES = (State.QUEUED, State.PENDING, State.RUNNING)  # their objects must exist

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="workloads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="workloads")
    name = models.CharField(max_length=100)
    object_name = models.CharField(max_length=63, blank=True, default="", db_index=True)
    template = models.ForeignKey(Template, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=8, choices=Template.Kind.choices)
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="+")
    # the cluster it runs on, by name (clusters.Cluster.name, which never changes; a removed
    # cluster's workloads keep it): the home cluster for every workload made before there
    # were several
    cluster = models.CharField(max_length=40, default=home_cluster_name, db_index=True)
    gpu_count = models.PositiveIntegerField()  # per node
    # how many nodes it spans (distributed templates): `gpu_count` GPUs on each
    nodes = models.PositiveIntegerField(default=1)
    image = models.CharField(max_length=512)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    cpu = models.PositiveIntegerField()
    memory_gb = models.PositiveIntegerField()
    max_runtime_minutes = models.PositiveIntegerField(null=True, blank=True)
    retries = models.PositiveIntegerField(default=0)
    use_home = models.BooleanField(default=False)
    # the portal's SSH server runs beside the program (its template offers it)
    ssh = models.BooleanField(default=False)
    # where it runs and how to reach it
    state = models.CharField(max_length=12, choices=State.choices, default=State.SUBMITTED,
                             db_index=True)
    reason = models.TextField(blank=True, default="")
    address = models.CharField(max_length=64, blank=True, default="")
    node = models.CharField(max_length=253, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    # a distributed workload's pods as the tracker last saw them, one entry per rank (and the
    # MPI launcher): {rank, role, pod, node, state, reason, exit_code}; [] for one pod
    ranks = models.JSONField(default=list, blank=True)
    # the access token of templates that have one (also in the workload's Secret)
    access_token = models.CharField(max_length=128, blank=True, default="")
    # NULL, not "": the unique constraint must ignore launches without a key
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    # SHA-256 of the launch request that came with the key: the same key with another request
    # is refused (422), not answered with the first workload; "" for launches without a key
    idempotency_fingerprint = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    launch_attempts = models.PositiveIntegerField(default=0)
    # what it was admitted to run, resolved from its template and GPU type at admission
    # (launch_spec.py): its objects are built from this, so an admin's later edit of the
    # template or GPU type never changes a launch that was already admitted. No secrets.
    launch_spec = models.JSONField(default=dict, blank=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "owner", "idempotency_key"],
                                    name="one_workload_per_idempotency_key",
                                    condition=models.Q(idempotency_key__isnull=False)),
        ]
        indexes = [models.Index(fields=["tenant", "state"]),
                   # a tenant's runs that end after a moment, or run still: what a launch's
                   # budget check adds to the period's settled GPU-hours (budgets.selectors)
                   models.Index(fields=["tenant", "finished_at"], name="workloads_tenant_finished")]

    def __str__(self) -> str:
        return f"{self.name} ({self.object_name or self.pk})"

    def get_absolute_url(self) -> str:
        """Its page: the one link to a workload, in pages, redirects and notifications."""
        return reverse("workloads:detail", kwargs={"pk": self.pk})

    @property
    def gpu_total(self) -> int:
        """Every GPU it holds: `gpu_count` on each of its nodes (GPU_TOTAL in queries)."""
        return self.gpu_count * self.nodes

    @property
    def gpus_text(self) -> str:
        """How every page, event and notice writes its GPUs: "1× a100", and for a distributed
        workload (a group of nodes) "2 nodes × 4× a100 (8 GPUs)"."""
        each = f"{self.gpu_count}× {self.gpu_type.slug}"
        if self.nodes <= 1:
            return each
        return f"{self.nodes} nodes × {each} ({self.gpu_total} GPUs)"

    @property
    def distributed(self) -> bool:
        return bool((self.launch_spec or {}).get("engine"))

    # the state shown while its cluster does not answer (never stored: the tracker's figures
    # stand, and are shown again once the cluster answers)
    UNKNOWN = "unknown"
    # why its cluster does not answer, where the pages and the API looked
    # (workloads.selectors.annotate_clusters); None while it answers, or where none looked
    cluster_outage: str | None = None

    @property
    def shown_state(self) -> str:
        """Its state as the pages and the API show it: `unknown` while its cluster (another
        than the home one) does not answer and it was not over (never `failed` for that)."""
        if self.cluster_outage is None or self.state in (*self.FINAL_STATES,
                                                         self.State.SUBMITTED):
            return str(self.state)
        return self.UNKNOWN

    @property
    def shown_reason(self) -> str:
        if self.shown_state != self.UNKNOWN:
            return str(self.reason)
        return (f"The cluster {self.cluster} does not answer"
                f"{f' ({self.cluster_outage})' if self.cluster_outage else ''}: its state is "
                f"unknown until it does (last seen {self.state}).")

    @property
    def shown_state_display(self) -> str:
        return self.UNKNOWN if self.shown_state == self.UNKNOWN else str(
            self.get_state_display())

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def url(self) -> str:
        """What users open, once the tracker saw it reachable (its address recorded); a batch
        job has nothing to open (its address, with SSH, is for SSH only)."""
        if self.kind != Template.Kind.SERVICE:
            return ""
        base = self.base_url
        return open_url(self.template.url_format or "{base}/", base) \
            if base and self.address else ""

    @property
    def base_url(self) -> str:
        """scheme://host[:port] its proxy answers at. Behind the shared gateway: its own host
        name (frozen at admission) on the gateway's scheme and port (PORTAL_SERVICE_SCHEME,
        PORTAL_SERVICE_PORT), known before it runs. With an address of its own: the address of
        its Service ("" until it has one), HTTPS where the site gives the workloads' proxies a
        certificate (PORTAL_AUTH_PROXY_TLS_SECRET)."""
        host = (self.launch_spec or {}).get("host") or ""
        if host:
            scheme = settings.PORTAL_SERVICE_SCHEME
            port = settings.PORTAL_SERVICE_PORT
            default = {"http": 80, "https": 443}.get(scheme)
            return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")
        port = self.service_port
        if not self.address or not port:
            return ""
        scheme = "https" if settings.PORTAL_AUTH_PROXY_TLS_SECRET else "http"
        return f"{scheme}://{self.address}:{port}"

    @property
    def service_port(self) -> int | None:
        """The port of its Service: the application's, or, for a batch job with SSH, its
        proxy's (access/proxy.py)."""
        if self.port:
            return self.port
        return PROXY_PORT if self.ssh and self.kind == Template.Kind.BATCH else None


class WorkloadEvent(models.Model):
    """What happened to a workload: Kubernetes events and the portal's own."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    type = models.CharField(max_length=16, default="Normal")  # Normal | Warning
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True, default="")
    source = models.CharField(max_length=64, default="portal")
    count = models.PositiveIntegerField(default=1)
    # the Kubernetes event's uid: the same event seen twice (relist, retried task) is one row
    uid = models.CharField(max_length=64, null=True, blank=True, unique=True)  # noqa: DJ001

    objects = WorkloadEventQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.reason}: {self.message}"


class WorkloadMount(models.Model):
    """A volume or a dataset a workload mounts, as it was admitted: the volume or dataset (None
    once it is deleted, which no live workload's mount allows), its name and claim as they
    were, and where."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="mounts")
    volume = models.ForeignKey("storage.Volume", on_delete=models.SET_NULL, null=True,
                               related_name="mounts")
    dataset = models.ForeignKey("storage.Dataset", on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="mounts")
    volume_name = models.CharField(max_length=63)
    claim_name = models.CharField(max_length=63)
    path = models.CharField(max_length=1024)
    read_only = models.BooleanField(default=False)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["workload", "path"],
                                               name="one_mount_per_path")]

    def __str__(self) -> str:
        return f"{self.volume_name} at {self.path}"


class TrackerCursor(models.Model):
    """Where the lifecycle tracker's watch of one resource kind left off (resourceVersion)."""

    resource = models.CharField(max_length=64, unique=True)
    resource_version = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.resource}@{self.resource_version}"


class WorkloadAccess(models.Model):
    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="access")
    application = models.OneToOneField("oauth2_provider.Application",
                                       on_delete=models.CASCADE, related_name="workload_access")
    public = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkloadAccessQuerySet.as_manager()

    class Meta:
        db_table = "access_workloadaccess"

    def __str__(self) -> str:
        return f"access to {self.workload}"

    @property
    def client_id(self) -> str:
        return str(self.application.client_id)  # django-oauth-toolkit ships no types


class ProxySession(models.Model):
    """A proxy session: created with the authorization code, then tied to the family of
    refresh tokens the proxy holds (one family across rotations, so two requests refreshing at
    once with the same token find the same session)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE,
                                 related_name="proxy_sessions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    # the portal session the user signed in with: when it ends (logout, expiry, revoked
    # Keystone token) the proxy session ends at its next refresh
    portal_session_key = models.CharField(max_length=64)
    code = models.CharField(max_length=255, null=True, blank=True, unique=True)  # noqa: DJ001
    # the refresh tokens the proxy holds, one family across rotations
    token_family = models.UUIDField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    checked_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_reason = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        db_table = "access_proxysession"
        indexes = [models.Index(fields=["portal_session_key"])]

    def __str__(self) -> str:
        return f"{self.user} on {self.workload}"


class SSHCertificate(models.Model):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE,
                                 related_name="ssh_certificates")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    serial = models.BigIntegerField(unique=True)
    principal = models.CharField(max_length=255)
    key_id = models.CharField(max_length=512)
    key_fingerprint = models.CharField(max_length=80)  # SHA256:…, never the key itself
    valid_after = models.DateTimeField()
    valid_before = models.DateTimeField()
    issued_at = models.DateTimeField(auto_now_add=True)
    from_address = models.CharField(max_length=64, blank=True, default="")
    # issued to a portal admin (who may open any workload): the sessions' checks apply the rule
    # as they did at issue
    as_admin = models.BooleanField(default=False)

    objects = SSHCertificateQuerySet.as_manager()

    class Meta:
        db_table = "access_sshcertificate"

    def __str__(self) -> str:
        return f"SSH certificate {self.serial} of {self.principal}"


class SSHSession(models.Model):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE,
                                 related_name="ssh_sessions")
    session = models.UUIDField()  # the server's id for the connection
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             related_name="+")
    certificate = models.ForeignKey(SSHCertificate, on_delete=models.SET_NULL, null=True,
                                    related_name="sessions")
    principal = models.CharField(max_length=255)
    from_address = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=255, blank=True, default="")

    objects = SSHSessionQuerySet.as_manager()

    class Meta:
        db_table = "access_sshsession"
        constraints = [models.UniqueConstraint(fields=["workload", "session"],
                                               name="ssh_session_once_per_workload")]

    def __str__(self) -> str:
        return f"SSH session of {self.principal} on {self.workload_id}"
