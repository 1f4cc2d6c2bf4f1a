"""Template.allow_root replaces run_as_non_root: the admin's question is
whether a template may run as root, which decides where it may run (a tenant's namespace that
enforces Pod Security "restricted" admits no root). Values carry over inverted, except the
seeded custom template: it ran as the image's user (root, for most images) and now runs as uid
1000 by default, so that custom images run under "restricted" like the other templates; an
admin who wants root for it ticks "May run as root" again."""

from django.db import migrations, models

CUSTOM_USER = 1000


def forwards(apps, schema_editor):
    Template = apps.get_model("workloads", "Template")
    for template in Template.objects.all():
        template.allow_root = not template.run_as_non_root
        if template.slug == "custom" and template.custom and template.allow_root:
            template.allow_root = False
            if template.run_as_user is None:
                template.run_as_user = CUSTOM_USER
        template.save(update_fields=["allow_root", "run_as_user"])


def backwards(apps, schema_editor):
    Template = apps.get_model("workloads", "Template")
    for template in Template.objects.all():
        template.run_as_non_root = not template.allow_root
        template.save(update_fields=["run_as_non_root"])


class Migration(migrations.Migration):
    dependencies = [("workloads", "0006_template_image_replaceable")]
    operations = [
        migrations.AddField(model_name="template", name="allow_root",
                            field=models.BooleanField(default=False)),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="template", name="run_as_non_root"),
    ]
