"""Budget caps are kept by Keystone user id, not by name: each cap's key (a user's `username` as
it was: `name`, or `name@domain` outside the default domain) becomes the Keystone id of the row
that held that name. It runs before the users' own move (keystone 0002), while the names are
still in `username`. A cap under a name nobody had matched no one and never can again: dropped.
The settled figures (by name) are cleared; the next check settles them again, by id."""

from django.db import migrations

SETTLED = ["user_caps", "settled_start", "settled_until", "settled_used", "settled_by_user"]


def _recaps(apps, key_of) -> None:
    Budget = apps.get_model("budgets", "Budget")
    for budget in Budget.objects.all():
        budget.user_caps = {key_of[key]: hours for key, hours in (budget.user_caps or {}).items()
                            if key in key_of}
        budget.settled_start = budget.settled_until = None
        budget.settled_used, budget.settled_by_user = 0.0, {}
        budget.save(update_fields=SETTLED)


def caps_by_id(apps, schema_editor):
    User = apps.get_model("keystone", "User")
    _recaps(apps, dict(User.objects.exclude(keystone_user_id=None)
                       .values_list("username", "keystone_user_id")))


def caps_by_name(apps, schema_editor):
    User = apps.get_model("keystone", "User")
    _recaps(apps, dict(User.objects.exclude(keystone_user_id=None)
                       .values_list("keystone_user_id", "username")))


class Migration(migrations.Migration):

    dependencies = [
        ("budgets", "0001_initial"),
        ("keystone", "0001_initial"),
    ]
    run_before = [
        ("keystone", "0002_user_keyed_by_keystone_id"),
    ]

    operations = [
        migrations.RunPython(caps_by_id, caps_by_name),
    ]
