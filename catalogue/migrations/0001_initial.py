"""The GPU types and templates, moved here from workloads: state only, the tables stay workloads_gputype and workloads_template."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('workloads', '0008_queueing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='GpuType',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('slug', models.SlugField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=120)),
                    ('resource_name', models.CharField(default='nvidia.com/gpu', max_length=120, validators=[django.core.validators.RegexValidator('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?$', 'Use a Kubernetes extended resource name such as nvidia.com/gpu.')])),
                    ('node_selector', models.JSONField(blank=True, default=dict, help_text='Node labels a node must carry, e.g. {"gputype": "a100"}')),
                    ('memory_gb', models.PositiveIntegerField(default=0)),
                    ('enabled', models.BooleanField(default=True)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                ],
                options={
                    'db_table': 'workloads_gputype',
                    'ordering': ['slug'],
                },
            ),
            migrations.CreateModel(
                name='Template',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('slug', models.SlugField(max_length=40, unique=True)),
                    ('name', models.CharField(max_length=120)),
                    ('description', models.TextField(blank=True, default='')),
                    ('kind', models.CharField(choices=[('service', 'service (Deployment + LoadBalancer Service)'), ('batch', 'batch (Job)')], default='service', max_length=8)),
                    ('custom', models.BooleanField(default=False)),
                    ('image', models.CharField(blank=True, default='', max_length=512)),
                    ('image_replaceable', models.BooleanField(default=False)),
                    ('command', models.JSONField(blank=True, default=list)),
                    ('args', models.JSONField(blank=True, default=list)),
                    ('env', models.JSONField(blank=True, default=dict)),
                    ('port', models.PositiveIntegerField(blank=True, null=True)),
                    ('default_cpu', models.PositiveIntegerField(default=4)),
                    ('default_memory_gb', models.PositiveIntegerField(default=16)),
                    ('allow_root', models.BooleanField(default=False)),
                    ('run_as_user', models.PositiveIntegerField(blank=True, null=True)),
                    ('token_env', models.CharField(blank=True, default='', max_length=64)),
                    ('url_format', models.CharField(blank=True, default='{base}/', max_length=255)),
                    ('enabled', models.BooleanField(default=True)),
                ],
                options={
                    'db_table': 'workloads_template',
                    'ordering': ['pk'],
                },
            ),
        ]),
    ]
