"""The audit trail, moved here from tenants: state only, the table stays tenants_auditrecord."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tenants', '0006_catalogue_and_audit_apps'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='AuditRecord',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                    ('actor_name', models.CharField(help_text="user name, or 'system'", max_length=255)),
                    ('action', models.CharField(db_index=True, max_length=64)),
                    ('target', models.CharField(blank=True, default='', max_length=255)),
                    ('before', models.JSONField(blank=True, null=True)),
                    ('after', models.JSONField(blank=True, null=True)),
                    ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_records', to='tenants.tenant')),
                ],
                options={
                    'db_table': 'tenants_auditrecord',
                    'ordering': ['-at', '-id'],
                    'indexes': [models.Index(fields=['tenant', '-at'], name='tenants_aud_tenant__05eae7_idx')],
                },
            ),
        ]),
    ]
