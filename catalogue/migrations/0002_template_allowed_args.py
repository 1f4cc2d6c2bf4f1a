"""The options a launch may append to a template's arguments (catalogue/options.py). Until now a
launch's `args` replaced a template's program; from now on a template declares what a launch may
add, and the seeded TensorBoard (where an admin has not changed its command) lets researchers
choose their logs and how often they are read."""

from django.db import migrations, models

TENSORBOARD_OPTIONS = ["--logdir", "--reload_interval"]


def declare(apps, schema_editor):
    Template = apps.get_model("catalogue", "Template")
    Template.objects.filter(slug="tensorboard", custom=False, command=["tensorboard"]).update(
        allowed_args=TENSORBOARD_OPTIONS)


class Migration(migrations.Migration):

    dependencies = [
        ('catalogue', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='template',
            name='allowed_args',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(declare, migrations.RunPython.noop),
    ]
