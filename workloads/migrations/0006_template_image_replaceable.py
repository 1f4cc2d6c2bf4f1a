"""Template.image_replaceable: one rule for every template. The seeded
templates keep their own image unless an admin lets researchers choose another."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0005_workload_idempotency_fingerprint'),
    ]

    operations = [
        migrations.AddField(
            model_name='template',
            name='image_replaceable',
            field=models.BooleanField(default=False),
        ),
    ]
