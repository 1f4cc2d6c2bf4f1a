"""The calendar's version (models.CalendarVersion) and the triggers that change its token.

Every write of what the launch check holds of the calendar in the process (calendars/cache.py)
replaces the token in the writing transaction: a reservation or a maintenance window written,
an occurrence released (or a released one moved or removed), a tenant renamed (a reservation's
text names its tenant), a GPU type written (a window over every node of a type matches nodes by
the type's selector). Triggers rather than calls in the services: the beat's conditional
updates, an admin's shell and the tests' `.update()` write those rows too, and a check in any
process must see each write. Row triggers, fired by rows actually written (a conditional update
that matches nothing changes nothing). The token is random (a PostgreSQL UUID, 16 random bytes
on SQLite, the demo's database): one never comes back after a rollback.
"""

from django.db import migrations, models

# (table, the events, a condition on the row or ""): what changes the token
WATCHED = (
    ("calendars_reservation", ("INSERT", "UPDATE", "DELETE"), ""),
    ("calendars_maintenancewindow", ("INSERT", "UPDATE", "DELETE"), ""),
    ("calendars_reservationoccurrence", ("INSERT",), "NEW.released_at IS NOT NULL"),
    # released or unreleased, or a released one moved; not the beat's other steps (claimed in
    # transactions that go on to notify and to stop workloads: no lock on the version then)
    ("calendars_reservationoccurrence", ("UPDATE",),
     "OLD.released_at IS DISTINCT FROM NEW.released_at OR (NEW.released_at IS NOT NULL AND "
     "(OLD.start IS DISTINCT FROM NEW.start "
     "OR OLD.reservation_id IS DISTINCT FROM NEW.reservation_id))"),
    ("calendars_reservationoccurrence", ("DELETE",), "OLD.released_at IS NOT NULL"),
    ("tenants_tenant", ("UPDATE",), "OLD.name IS DISTINCT FROM NEW.name"),
    ("workloads_gputype", ("INSERT", "UPDATE", "DELETE"), ""),
)
TRUNCATED = ("calendars_reservation", "calendars_maintenancewindow",
             "calendars_reservationoccurrence")

POSTGRES_BUMP = """
CREATE OR REPLACE FUNCTION calendars_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO calendars_calendarversion (id, token)
    VALUES (1, replace(gen_random_uuid()::text, '-', ''))
    ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token;
    RETURN NULL;
END
$$"""
SQLITE_BUMP = ("INSERT OR REPLACE INTO calendars_calendarversion (id, token) "
               "VALUES (1, lower(hex(randomblob(16))))")


def _name(table: str, event: str) -> str:
    return f"calendars_version_{table}_{event.lower()}"


def postgres_statements() -> list[str]:
    statements = [POSTGRES_BUMP]
    for table, events, condition in WATCHED:
        for event in events:
            when = f" WHEN ({condition})" if condition else ""
            statements.append(f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} "
                              f"FOR EACH ROW{when} EXECUTE FUNCTION calendars_version_bump()")
    statements += [f"CREATE TRIGGER {_name(table, 'truncate')} AFTER TRUNCATE ON {table} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION calendars_version_bump()"
                   for table in TRUNCATED]
    return statements


def sqlite_statements() -> list[str]:
    statements = []
    for table, events, condition in WATCHED:
        for event in events:
            # SQLite spells IS DISTINCT FROM as IS NOT
            when = f" WHEN {condition.replace('IS DISTINCT FROM', 'IS NOT')}" if condition \
                else ""
            statements.append(f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} "
                              f"FOR EACH ROW{when} BEGIN {SQLITE_BUMP}; END")
    return statements


def triggers_create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": postgres_statements, "sqlite": sqlite_statements}[vendor]()
    for statement in statements:
        schema_editor.execute(statement)
    version = apps.get_model("calendars", "CalendarVersion")
    version.objects.create(pk=1, token="0" * 32)


def triggers_drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    names = {(table, _name(table, event)) for table, events, _ in WATCHED for event in events}
    if vendor == "postgresql":
        names |= {(table, _name(table, "truncate")) for table in TRUNCATED}
    for table, name in sorted(names):
        on = f" ON {table}" if vendor == "postgresql" else ""
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}{on}")
    if vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS calendars_version_bump()")


class Migration(migrations.Migration):

    dependencies = [
        ('calendars', '0003_occurrence_end_enforced'),
        ('catalogue', '0004_template_ssh'),
        ('tenants', '0007_quota_queue_held_reason'),
    ]

    operations = [
        migrations.CreateModel(
            name='CalendarVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name='ID')),
                ('token', models.CharField(max_length=32)),
            ],
        ),
        migrations.RunPython(triggers_create, triggers_drop),
    ]
