"""The records of each workload (its OAuth client, its proxy's sessions, its SSH certificates
and sessions) move to the workloads app, where their keys point. Only Django's state moves:
the tables keep their names (access_*) and their rows; workloads 0014 takes the models over."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("access", "0002_ssh"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="SSHSession"),
                migrations.DeleteModel(name="SSHCertificate"),
                migrations.DeleteModel(name="ProxySession"),
                migrations.DeleteModel(name="WorkloadAccess"),
            ],
            database_operations=[],
        ),
    ]
