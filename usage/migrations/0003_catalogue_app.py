"""GpuUsageRollup points at catalogue.GpuType. State only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalogue', '0001_initial'),
        ('usage', '0002_workload_idle'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='gpuusagerollup',
                name='gpu_type',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalogue.gputype'),
            ),
        ]),
    ]
