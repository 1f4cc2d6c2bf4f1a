"""Workload.launch_spec: what a workload was admitted to run, frozen at admission
(workloads/launch_spec.py). Workloads that are not finished get theirs now, from their
template and GPU type as they are when the migration runs, so that an upgrade with launches
waiting or running keeps creating (and re-creating) what they were."""

from django.db import migrations, models

NOT_FINISHED = ("submitted", "creating", "queued", "pending", "running", "stopping")


def resolve(workload, template, gpu_type):
    """launch_spec.launch_spec_resolve as it was at this migration (version 1)."""
    merged = {**(template.env or {}), **(workload.env or {})}
    return {
        "version": 1,
        "template": template.slug,
        "kind": workload.kind,
        "image": workload.image,
        "command": list(workload.command or template.command or []),
        "args": list(workload.args or template.args or []),
        "env": [[name, value] for name, value in merged.items()],
        "token_env": template.token_env or "",
        "run_as_non_root": not template.allow_root,
        "run_as_user": template.run_as_user,
        "port": workload.port,
        "gpu_type": gpu_type.slug,
        "gpu_resource": gpu_type.resource_name,
        "gpu_count": workload.gpu_count,
        "node_selector": dict(gpu_type.node_selector or {}),
        "cpu": workload.cpu,
        "memory_gb": workload.memory_gb,
        "max_runtime_minutes": workload.max_runtime_minutes,
        "backoff_limit": workload.retries,
        "use_home": workload.use_home,
    }


def backfill(apps, schema_editor):
    Workload = apps.get_model("workloads", "Workload")
    live = (Workload.objects.filter(state__in=NOT_FINISHED, launch_spec={})
            .select_related("template", "gpu_type"))
    for workload in live.iterator(chunk_size=500):
        workload.launch_spec = resolve(workload, workload.template, workload.gpu_type)
        workload.save(update_fields=["launch_spec"])


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0009_catalogue_app'),
    ]

    operations = [
        migrations.AddField(
            model_name='workload',
            name='launch_spec',
            field=models.JSONField(blank=True, default=dict),
        ),
        # backwards: the column goes with the field; nothing to undo
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
