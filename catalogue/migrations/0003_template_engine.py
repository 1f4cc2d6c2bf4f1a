"""Distributed training: a template's engine, and the two templates that use one.

- pytorch-ddp: NVIDIA's PyTorch image, one pod per node in a JobSet, the researcher's program
  under torchrun;
- mpi: the MPI operator's Open MPI image (an SSH server for its launcher, user mpiuser, uid
  1000, port 2222), one worker per node and a launcher running mpirun.
Both run the researcher's program (command and arguments) in an image researchers may replace.
"""

from django.db import migrations, models

TEMPLATES = [
    {
        "slug": "pytorch-ddp", "name": "PyTorch distributed (torchrun)", "kind": "batch",
        "engine": "jobset",
        "description": "Your training program under torchrun on every node (one process per "
                       "GPU): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, NODE_RANK and "
                       "NPROC_PER_NODE are set in each pod. A failed rank restarts the whole "
                       "group, up to the retries you allow.",
        "image": "nvcr.io/nvidia/pytorch:24.10-py3", "image_replaceable": True,
        "default_cpu": 8, "default_memory_gb": 64, "run_as_user": 1000,
    },
    {
        "slug": "mpi", "name": "MPI (mpirun)", "kind": "batch", "engine": "mpi",
        "description": "Your program under mpirun from a launcher, with one worker per node "
                       "and one slot per GPU; the workers run the image's SSH server.",
        "image": "docker.io/mpioperator/openmpi:v0.8.2", "image_replaceable": True,
        "default_cpu": 8, "default_memory_gb": 64, "run_as_user": 1000,
    },
]


def seed(apps, schema_editor):
    Template = apps.get_model("catalogue", "Template")
    for spec in TEMPLATES:
        Template.objects.get_or_create(slug=spec["slug"], defaults=spec)


def unseed(apps, schema_editor):
    apps.get_model("catalogue", "Template").objects.filter(
        slug__in=[t["slug"] for t in TEMPLATES]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("catalogue", "0002_template_allowed_args"),
    ]

    operations = [
        migrations.AddField(
            model_name="template",
            name="engine",
            field=models.CharField(blank=True, choices=[("", "one pod"),
                                                        ("jobset", "JobSet (torchrun on every node)"),
                                                        ("mpi", "MPIJob (mpirun from a launcher)")],
                                   default="", max_length=8),
        ),
        migrations.RunPython(seed, unseed),
    ]
