"""The seeded Jupyter template opens at /lab without its token in the URL: the
authenticating proxy in front of the workload sends the token to Jupyter itself."""

from django.db import migrations

OLD = "{base}/lab?token={token}"
NEW = "{base}/lab"


def forward(apps, schema_editor):
    apps.get_model("workloads", "Template").objects.filter(url_format=OLD).update(url_format=NEW)


def backward(apps, schema_editor):
    apps.get_model("workloads", "Template").objects.filter(
        slug="jupyter", url_format=NEW).update(url_format=OLD)


class Migration(migrations.Migration):
    dependencies = [("workloads", "0003_seed_templates")]
    operations = [migrations.RunPython(forward, backward)]
