"""The GPU type catalogue and the templates researchers launch from.

Below tenants and workloads: both refer to these rows, neither is referred to from here.
The tables keep their first names (workloads_gputype, workloads_template): the models moved
here from workloads without moving data (migrations 0001 here, workloads 0009).
"""

import re
from fractions import Fraction

from django.core.validators import RegexValidator
from django.db import models

from catalogue.sharing import (
    DRA,
    DRA_GPU_CLASS,
    DRA_MIG_CLASS,
    EXCLUSIVE,
    MIG,
    TIME_SLICED,
    device_class_quota,
    dra_mig_profile,
    dra_type_class,
)

# a Kubernetes extended resource name: nvidia.com/gpu, nvidia.com/mig-1g.10gb, amd.com/gpu …
RESOURCE_NAME = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?$",
    "Use a Kubernetes extended resource name such as nvidia.com/gpu.",
)


# a query parameter whose value is the access token, as an older url_format wrote it
TOKEN_PARAMETER = re.compile(r"[?&][-\w.]*=\{token\}")


def open_url(url_format: str, base: str) -> str:
    """The address a user opens, never with the access token in it: a URL ends up in browser
    history, server logs and Referer headers, and the authenticating proxy in front of every
    service replaces the token (it sends the token upstream itself). A format that still asks
    for the token loses that parameter."""
    return TOKEN_PARAMETER.sub("", url_format).replace("{token}", "").format(base=base)


SHARING_CHOICES = [(EXCLUSIVE, "exclusive (a whole GPU)"),
                   (TIME_SLICED, "time-sliced (replicas of a GPU)"),
                   (MIG, "MIG (a hardware slice of a GPU)"),
                   (DRA, "DRA (a device claimed through resource.k8s.io)")]
DEVICE_CLASS_CHOICES = [("", "none (an extended resource)"),
                        (DRA_GPU_CLASS, f"{DRA_GPU_CLASS} (a whole GPU)"),
                        (DRA_MIG_CLASS, f"{DRA_MIG_CLASS} (a MIG instance)")]


class GpuType(models.Model):
    """A kind of GPU researchers can ask for, placed by node selector labels."""

    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=120)
    resource_name = models.CharField(max_length=120, default="nvidia.com/gpu",
                                     validators=[RESOURCE_NAME])
    node_selector = models.JSONField(default=dict, blank=True,
                                     help_text="Node labels a node must carry, e.g. {\"gputype\": \"a100\"}")
    memory_gb = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # how a unit shares its physical GPU (catalogue/sharing.py: what the nodes' labels say,
    # which the admin's page checks these against). The part of a GPU one unit is, exactly:
    # numerator and denominator (1/7 is not a decimal), read as `gpu_fraction`
    sharing = models.CharField(max_length=16, default=EXCLUSIVE, choices=SHARING_CHOICES)
    fraction_numerator = models.PositiveSmallIntegerField(default=1)
    fraction_denominator = models.PositiveSmallIntegerField(default=1)
    # the exclusive type whose GPUs this one's units are carved from (None: exclusive, or not
    # in the catalogue)
    physical = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="shared_types")
    # a DRA type's claims (catalogue/sharing.py): the device class of NVIDIA's DRA driver they
    # ask in, and the product name its devices must carry ("" any); memory_gb is the least
    # memory they must have. Blank for every other sharing
    device_class = models.CharField(max_length=40, blank=True, default="",
                                    choices=DEVICE_CLASS_CHOICES)
    product = models.CharField(max_length=80, blank=True, default="")

    class Meta:
        db_table = "workloads_gputype"
        ordering = ["slug"]
        constraints = [models.CheckConstraint(
            name="gputype_fraction_at_most_one",
            condition=models.Q(fraction_numerator__gte=1,
                               fraction_numerator__lte=models.F("fraction_denominator")))]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_fraction(self) -> Fraction:
        """The part of one physical GPU a unit of this type is (1 for an exclusive type)."""
        return Fraction(self.fraction_numerator, self.fraction_denominator)

    @property
    def physical_slug(self) -> str | None:
        physical = self.physical if self.physical_id is not None else None
        return physical.slug if physical is not None else None

    @property
    def claim_class(self) -> str:
        """A DRA type's own DeviceClass, which its claims name ("" for every other type)."""
        return dra_type_class(self.slug) if self.sharing == DRA else ""

    @property
    def dra_profile(self) -> str:
        """A DRA type of MIG instances: the profile its devices carry ("1g.10gb"), else ""."""
        if self.sharing != DRA:
            return ""
        return dra_mig_profile(device_class=self.device_class, fraction=self.gpu_fraction,
                               memory_gb=self.memory_gb, product=self.product)

    @property
    def quota_resource(self) -> str:
        """The name its units are counted under in a namespace's ResourceQuota and Kueue's
        ClusterQueues: its extended resource, or a DRA type's own class's devices."""
        return device_class_quota(self.claim_class) if self.claim_class else self.resource_name


class Template(models.Model):
    """What researchers launch: Jupyter, DIGITS, TensorBoard, or their own image (custom)."""

    class Kind(models.TextChoices):
        SERVICE = "service", "service (Deployment + LoadBalancer Service)"
        BATCH = "batch", "batch (Job)"

    class Engine(models.TextChoices):
        SINGLE = "", "one pod"
        JOBSET = "jobset", "JobSet (torchrun on every node)"
        MPI = "mpi", "MPIJob (mpirun from a launcher)"

    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SERVICE)
    # custom: the researcher picks the kind and gives image, command, args, env and port
    custom = models.BooleanField(default=False)
    image = models.CharField(max_length=512, blank=True, default="")
    # whether researchers may run another image in place of `image` (a custom template always
    # takes theirs); the image must be inside the site's and the tenant's registries alike
    image_replaceable = models.BooleanField(default=False)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    # the options a launch may append to `args` (exact names such as "--logdir", given as NAME
    # or NAME=value); none: a launch adds nothing. The custom template takes any (options.py)
    allowed_args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    default_cpu = models.PositiveIntegerField(default=4)
    default_memory_gb = models.PositiveIntegerField(default=16)
    # whether the container may run as root (the image's user, whatever it is): such a template
    # runs only where the tenant's namespace admits root, which Pod Security "restricted" does
    # not (tenants.pod_security); otherwise runAsNonRoot, as "restricted" requires
    allow_root = models.BooleanField(default=False)
    run_as_user = models.PositiveIntegerField(null=True, blank=True)
    # a generated access token (≥ 128 bits) passed in this env var, kept in a Secret
    token_env = models.CharField(max_length=64, blank=True, default="")
    # how to open it: "{base}" is http://<address>:<port>. No token: the proxy's login stands in
    # front of every service and hands the application its token itself (Workload.url)
    url_format = models.CharField(max_length=255, blank=True, default="{base}/")
    # how a launch runs on many nodes: "" one pod (a Job or a Deployment), "jobset"
    # a JobSet of indexed pods under torchrun, "mpi" an MPIJob (a launcher and its workers).
    # Such a template runs the researcher's program (command and args), as the custom one does
    engine = models.CharField(max_length=8, choices=Engine.choices, blank=True, default="")
    # SSH into a running workload: the portal's SSH server starts beside the
    # application, reached through the workload's authenticating proxy. It wraps the program the
    # container runs: the launch's command, else `entrypoint` (what the image's ENTRYPOINT
    # runs; the wrapper replaces it, and it reaps orphans as tini would). A template with
    # neither offers SSH only to launches that give a command.
    ssh = models.BooleanField(default=False)
    entrypoint = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "workloads_template"
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name

    @property
    def distributed(self) -> bool:
        """Whether it runs on several nodes at once (a JobSet or an MPIJob)."""
        return bool(self.engine)

    @property
    def takes_program(self) -> bool:
        """Whether a launch gives the program (command, any args): the custom template's, and
        a distributed one's, which runs the researcher's training under torchrun or mpirun."""
        return self.custom or self.distributed

    @property
    def ssh_program(self) -> list[str]:
        """What SSH's wrapper runs when a launch gives no command: the template's command, else
        the image's entrypoint as the template names it (empty: unknown)."""
        return list(self.command or self.entrypoint)

    @property
    def takes_image(self) -> bool:
        """Whether a launch may give an image of its own: the custom template needs one, a
        template an admin made replaceable accepts one, every other runs `image`."""
        return self.custom or self.image_replaceable
