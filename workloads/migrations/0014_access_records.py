"""The records of each workload (its OAuth client, its proxy's sessions, its SSH certificates
and sessions) are this app's now, where their keys point: the models as access 0001/0002 made
them, on the same tables (access_*), so only Django's state changes. The content types follow,
so that anything keyed by them (permissions) keeps its rows."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("workloadaccess", "proxysession", "sshcertificate", "sshsession")


def content_types_follow(apps, schema_editor, source="access", target="workloads"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=target, model=model).exists():
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def content_types_back(apps, schema_editor):
    content_types_follow(apps, schema_editor, source="workloads", target="access")


class Migration(migrations.Migration):

    dependencies = [
        ("workloads", "0013_workload_tenant_finished_index"),
        ("access", "0003_workload_records_to_workloads"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='SSHCertificate',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('serial', models.BigIntegerField(unique=True)),
                        ('principal', models.CharField(max_length=255)),
                        ('key_id', models.CharField(max_length=512)),
                        ('key_fingerprint', models.CharField(max_length=80)),
                        ('valid_after', models.DateTimeField()),
                        ('valid_before', models.DateTimeField()),
                        ('issued_at', models.DateTimeField(auto_now_add=True)),
                        ('from_address', models.CharField(blank=True, default='', max_length=64)),
                        ('as_admin', models.BooleanField(default=False)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('workload', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='ssh_certificates', to='workloads.workload')),
                    ],
                    options={
                        'db_table': 'access_sshcertificate',
                    },
                ),
                migrations.CreateModel(
                    name='WorkloadAccess',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('public', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('application', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='workload_access', to=settings.OAUTH2_PROVIDER_APPLICATION_MODEL)),
                        ('workload', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='access', to='workloads.workload')),
                    ],
                    options={
                        'db_table': 'access_workloadaccess',
                    },
                ),
                migrations.CreateModel(
                    name='ProxySession',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('portal_session_key', models.CharField(max_length=64)),
                        ('code', models.CharField(blank=True, max_length=255, null=True, unique=True)),
                        ('token_family', models.UUIDField(blank=True, db_index=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('checked_at', models.DateTimeField(auto_now=True)),
                        ('ended_at', models.DateTimeField(blank=True, null=True)),
                        ('ended_reason', models.CharField(blank=True, default='', max_length=255)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('workload', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='proxy_sessions', to='workloads.workload')),
                    ],
                    options={
                        'db_table': 'access_proxysession',
                        'indexes': [models.Index(fields=['portal_session_key'], name='access_prox_portal__95654c_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='SSHSession',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('session', models.UUIDField()),
                        ('principal', models.CharField(max_length=255)),
                        ('from_address', models.CharField(blank=True, default='', max_length=64)),
                        ('started_at', models.DateTimeField(auto_now_add=True)),
                        ('last_checked_at', models.DateTimeField(blank=True, null=True)),
                        ('ended_at', models.DateTimeField(blank=True, null=True)),
                        ('end_reason', models.CharField(blank=True, default='', max_length=255)),
                        ('certificate', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='sessions', to='workloads.sshcertificate')),
                        ('user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('workload', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='ssh_sessions', to='workloads.workload')),
                    ],
                    options={
                        'db_table': 'access_sshsession',
                        'constraints': [models.UniqueConstraint(fields=('workload', 'session'), name='ssh_session_once_per_workload')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_back),
    ]
