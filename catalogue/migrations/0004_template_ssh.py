"""SSH into running workloads: which templates offer it, the program it wraps, and
the code-server template (VS Code in the browser, behind the workload's proxy).

- jupyter: on; the image's ENTRYPOINT is `tini -g -- start.sh`: the wrapper takes tini's place
  and runs start.sh, which starts the template's arguments;
- custom: on, for launches that give a command (the portal cannot know an image's entrypoint);
- code-server: on; Coder's image runs code-server as user coder (uid 1000); its own login is
  off (`--auth none`): the portal's proxy signs users in.
DIGITS and TensorBoard are applications, not places to work in: off.
"""

from django.db import migrations, models

CODE_SERVER = {
    "slug": "code-server", "name": "VS Code (code-server)", "kind": "service",
    "description": "VS Code in the browser, with a terminal on the workload's GPUs. Your files "
                   "live in /home/portal when the project's home volume is mounted.",
    "image": "docker.io/codercom/code-server:4.96.4",
    "command": ["/usr/bin/code-server"],
    "args": ["--bind-addr", "0.0.0.0:8080", "--auth", "none", "--disable-telemetry",
             "--disable-update-check"],
    "port": 8080, "default_cpu": 4, "default_memory_gb": 16, "run_as_user": 1000,
    "url_format": "{base}/", "ssh": True,
}
SSH_ON = {"jupyter": ["start.sh"], "custom": []}


def seed(apps, schema_editor):
    Template = apps.get_model("catalogue", "Template")
    for slug, entrypoint in SSH_ON.items():
        Template.objects.filter(slug=slug).update(ssh=True, entrypoint=entrypoint)
    Template.objects.get_or_create(slug=CODE_SERVER["slug"], defaults=CODE_SERVER)


def unseed(apps, schema_editor):
    apps.get_model("catalogue", "Template").objects.filter(slug=CODE_SERVER["slug"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("catalogue", "0003_template_engine"),
    ]

    operations = [
        migrations.AddField(model_name="template", name="ssh",
                            field=models.BooleanField(default=False)),
        migrations.AddField(model_name="template", name="entrypoint",
                            field=models.JSONField(blank=True, default=list)),
        migrations.RunPython(seed, unseed),
    ]
