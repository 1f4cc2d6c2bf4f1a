"""Budget caps are kept by Keystone user id, not by name: each cap's key (the user's `username`
as it was: `name`, or `name@domain` outside the default domain) becomes the id of the user who
had that name. A cap under a name nobody had matched no one and never can again: dropped. The
settled figures (by name) are cleared; the next check settles them again, by id."""

from django.db import migrations


def _old_username(user) -> str:
    return user.name if user.domain_id == "default" else f"{user.name}@{user.domain_name}"


def caps_by_id(apps, schema_editor):
    Budget = apps.get_model("budgets", "Budget")
    User = apps.get_model("keystone", "User")
    ids = {_old_username(user): user.username
           for user in User.objects.exclude(keystone_user_id=None).exclude(name="")}
    for budget in Budget.objects.all():
        caps = {ids[key]: hours for key, hours in (budget.user_caps or {}).items() if key in ids}
        budget.user_caps = caps
        budget.settled_start = budget.settled_until = None
        budget.settled_used, budget.settled_by_user = 0.0, {}
        budget.save(update_fields=["user_caps", "settled_start", "settled_until",
                                   "settled_used", "settled_by_user"])


def caps_by_name(apps, schema_editor):
    Budget = apps.get_model("budgets", "Budget")
    User = apps.get_model("keystone", "User")
    names = {user.username: _old_username(user)
             for user in User.objects.exclude(keystone_user_id=None).exclude(name="")}
    for budget in Budget.objects.all():
        budget.user_caps = {names.get(key, key): hours
                            for key, hours in (budget.user_caps or {}).items()}
        budget.settled_start = budget.settled_until = None
        budget.settled_used, budget.settled_by_user = 0.0, {}
        budget.save(update_fields=["user_caps", "settled_start", "settled_until",
                                   "settled_used", "settled_by_user"])


class Migration(migrations.Migration):

    dependencies = [
        ("budgets", "0001_initial"),
        ("keystone", "0002_user_keyed_by_keystone_id"),
    ]

    operations = [
        migrations.RunPython(caps_by_id, caps_by_name),
    ]
