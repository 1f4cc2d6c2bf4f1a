"""GpuQuota points at catalogue.GpuType; AuditRecord moved to the audit app. State only: no table changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalogue', '0001_initial'),
        ('tenants', '0005_queueing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='gpuquota',
                name='gpu_type',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalogue.gputype'),
            ),
            migrations.DeleteModel(
                name='AuditRecord',
            ),
        ]),
    ]
