"""The portal's user is keyed by the Keystone user id: `username` takes the id, and the Keystone
user name (until now in `username`, as `name@domain` outside the default domain) moves to
`name`, for display only."""

from django.db import migrations, models

STALE = "~stale-"  # what the earlier user mirror appended to a deleted Keystone user's name


def _name_of(username: str, domain_id: str, domain_name: str) -> str:
    """The Keystone name inside an earlier `username`: `name`, `name@domain`, either with the
    stale suffix."""
    name = username.split(STALE, 1)[0]
    if domain_id != "default" and name.endswith(f"@{domain_name}"):
        name = name[: -len(domain_name) - 1]
    return name


def keyed_by_id(apps, schema_editor):
    User = apps.get_model("keystone", "User")
    for user in User.objects.filter(keystone_user_id=None, name=""):  # local rows: as they were
        user.name = user.username
        user.save(update_fields=["name"])
    for user in User.objects.exclude(keystone_user_id=None).order_by("pk"):
        user.name = _name_of(user.username, user.domain_id, user.domain_name)
        # a local row (no Keystone id) that happens to hold this id as its name steps aside
        for other in User.objects.filter(username=user.keystone_user_id).exclude(pk=user.pk):
            other.username = f"{other.username}~local-{other.pk}"
            other.save(update_fields=["username"])
        user.username = user.keystone_user_id
        user.save(update_fields=["name", "username"])


def keyed_by_name(apps, schema_editor):
    """Back to names in `username` (`name@domain` outside the default domain); a name that
    two rows would share keeps it on the first, the others marked stale as before."""
    User = apps.get_model("keystone", "User")
    taken: set[str] = set()
    rows = list(User.objects.exclude(keystone_user_id=None).order_by("pk"))
    for user in rows:  # free every name first: ids and names never meet mid-way
        user.username = f"~migrating-{user.pk}"
        user.save(update_fields=["username"])
    for user in rows:
        name = user.name or user.keystone_user_id
        if user.domain_id != "default":
            name = f"{name}@{user.domain_name}"
        if name in taken or User.objects.filter(username=name).exists():
            name = f"{name}{STALE}{user.pk}"
        taken.add(name)
        user.username = name
        user.save(update_fields=["username"])


class Migration(migrations.Migration):

    dependencies = [
        ("keystone", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="name",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.RunPython(keyed_by_id, keyed_by_name),
    ]
