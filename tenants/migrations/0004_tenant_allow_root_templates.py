"""Tenant.allow_root_templates: an admin lets a tenant run templates that may
run as root; its namespace then enforces Pod Security "baseline" instead of "restricted"."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0003_tenant_image_prefixes'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='allow_root_templates',
            field=models.BooleanField(default=False),
        ),
    ]
