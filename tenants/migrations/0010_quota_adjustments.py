"""A quota's adjustments as rows (QuotaAdjustment) instead of the columns the calendar and
budgets wrote into Quota: reserved_gpus and withheld_gpus ({GPU type slug: GPUs}) and
queue_held_reason. The rows are made from the columns, and the columns from the rows on the
way back; each writer replaces its own rows at its next run (its references then set)."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

BUDGET_HOLD_PREFIX = "GPU-hour budget: "  # how budgets began the reason of its hold


def columns_to_rows(apps, schema_editor):
    Quota = apps.get_model("tenants", "Quota")
    QuotaAdjustment = apps.get_model("tenants", "QuotaAdjustment")
    GpuType = apps.get_model("catalogue", "GpuType")
    types = {t.slug: t for t in GpuType.objects.all()}
    rows = []
    for quota in Quota.objects.all():
        for column, source, sign in (("reserved_gpus", "reservation", 1),
                                     ("withheld_gpus", "maintenance", -1)):
            for slug, gpus in sorted((getattr(quota, column) or {}).items()):
                if int(gpus) > 0 and slug in types:
                    rows.append(QuotaAdjustment(
                        quota=quota, source=source, kind="delta", gpu_type=types[slug],
                        gpus=sign * int(gpus), reason=f"{column} before the rows"))
        if quota.queue_held_reason:
            source = ("budget_hold" if quota.queue_held_reason.startswith(BUDGET_HOLD_PREFIX)
                      else "admin")
            rows.append(QuotaAdjustment(quota=quota, source=source, kind="hold",
                                        reason=quota.queue_held_reason))
    QuotaAdjustment.objects.bulk_create(rows)


def rows_to_columns(apps, schema_editor):
    Quota = apps.get_model("tenants", "Quota")
    QuotaAdjustment = apps.get_model("tenants", "QuotaAdjustment")
    columns: dict[int, dict[str, Any]] = {}
    for row in QuotaAdjustment.objects.select_related("gpu_type").order_by("pk"):
        quota = columns.setdefault(row.quota_id, {"reserved_gpus": {}, "withheld_gpus": {},
                                                  "queue_held_reason": []})
        if row.kind == "hold":
            quota["queue_held_reason"].append(row.reason or row.source)
        elif row.gpu_type is not None and row.gpus > 0:
            by_type = quota["reserved_gpus"]
            by_type[row.gpu_type.slug] = by_type.get(row.gpu_type.slug, 0) + row.gpus
        elif row.gpu_type is not None and row.gpus < 0:
            by_type = quota["withheld_gpus"]
            by_type[row.gpu_type.slug] = by_type.get(row.gpu_type.slug, 0) - row.gpus
    for quota_id, values in columns.items():
        Quota.objects.filter(pk=quota_id).update(
            reserved_gpus=values["reserved_gpus"], withheld_gpus=values["withheld_gpus"],
            queue_held_reason="; ".join(values["queue_held_reason"]))


class Migration(migrations.Migration):

    dependencies = [
        ('catalogue', '0004_template_ssh'),
        ('tenants', '0009_quota_withheld_gpus'),
    ]

    operations = [
        migrations.CreateModel(
            name='QuotaAdjustment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(choices=[('admin', 'an admin'), ('reservation', 'a reservation'), ('maintenance', 'maintenance'), ('budget_hold', 'the GPU-hour budget'), ('request', 'a quota request')], max_length=16)),
                ('ref', models.CharField(blank=True, default='', max_length=128)),
                ('kind', models.CharField(choices=[('delta', 'GPUs added or withheld'), ('hold', 'queue held')], default='delta', max_length=8)),
                ('gpus', models.IntegerField(default=0)),
                ('reason', models.TextField(blank=True, default='')),
                ('starts_at', models.DateTimeField(blank=True, null=True)),
                ('ends_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('gpu_type', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalogue.gputype')),
                ('quota', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='adjustments', to='tenants.quota')),
            ],
            options={
                'ordering': ['source', 'ref', 'pk'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('gpu_type__isnull', True), ('gpus', 0), ('kind', 'hold')), models.Q(('kind', 'delta'), models.Q(('gpus', 0), _negated=True)), _connector='OR'), name='quota_adjustment_delta_or_hold')],
            },
        ),
        migrations.RunPython(columns_to_rows, rows_to_columns),
        migrations.RemoveField(
            model_name='quota',
            name='queue_held_reason',
        ),
        migrations.RemoveField(
            model_name='quota',
            name='reserved_gpus',
        ),
        migrations.RemoveField(
            model_name='quota',
            name='withheld_gpus',
        ),
    ]
