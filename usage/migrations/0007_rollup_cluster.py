from django.db import migrations, models


def clusters_from_workloads(apps, schema_editor):
    """The rollups made before: each its workload's cluster."""
    rollup = apps.get_model("usage", "GpuUsageRollup")
    workload = apps.get_model("workloads", "Workload")
    rollup.objects.update(cluster=models.Subquery(
        workload.objects.filter(pk=models.OuterRef("workload_id")).values("cluster")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('usage', '0006_device_every_holder'),
        ('workloads', '0018_cluster'),
    ]

    operations = [
        migrations.AddField(
            model_name='gpuusagerollup',
            name='cluster',
            field=models.CharField(blank=True, default='', max_length=40),
        ),
        migrations.RunPython(clusters_from_workloads, migrations.RunPython.noop),
    ]
