"""Workload points at catalogue.GpuType and catalogue.Template, which moved to the catalogue app. State only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalogue', '0001_initial'),
        ('tenants', '0006_catalogue_and_audit_apps'),
        ('usage', '0003_catalogue_app'),
        ('workloads', '0008_queueing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='workload',
                name='gpu_type',
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='catalogue.gputype'),
            ),
            migrations.AlterField(
                model_name='workload',
                name='template',
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='catalogue.template'),
            ),
            migrations.DeleteModel(
                name='GpuType',
            ),
            migrations.DeleteModel(
                name='Template',
            ),
        ]),
    ]
