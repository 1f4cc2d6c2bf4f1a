from django.conf import settings
from django.db import migrations, models


def make_home(apps, schema_editor):
    """The cluster the portal runs beside, from the settings: a single-cluster site sees no
    change."""
    Cluster = apps.get_model("clusters", "Cluster")
    Cluster.objects.get_or_create(name=settings.PORTAL_CLUSTER_NAME,
                                  defaults={"home": True})


class Migration(migrations.Migration):
    initial = True

    dependencies = []  # the first of its app

    operations = [
        migrations.CreateModel(
            name="Cluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("name", models.SlugField(max_length=40, unique=True)),
                ("display_name", models.CharField(blank=True, max_length=100)),
                ("api_server", models.CharField(blank=True, max_length=255)),
                ("kubeconfig_path", models.CharField(blank=True, max_length=500)),
                ("kubeconfig_secret", models.CharField(blank=True, max_length=253)),
                ("gpu_types", models.JSONField(blank=True, default=list)),
                ("home", models.BooleanField(default=False)),
                ("enabled", models.BooleanField(default=True)),
                ("state", models.CharField(choices=[("ready", "Ready"),
                                                    ("unreachable", "Unreachable")],
                                           default="ready", max_length=16)),
                ("reason", models.CharField(blank=True, max_length=300)),
                ("state_since", models.DateTimeField(blank=True, null=True)),
                ("last_seen", models.DateTimeField(blank=True, null=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["-home", "name"]},
        ),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.UniqueConstraint(condition=models.Q(home=True), fields=("home",),
                                               name="clusters_one_home"),
        ),
        migrations.RunPython(make_home, migrations.RunPython.noop),
    ]
