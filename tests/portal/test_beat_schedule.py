"""Every periodic task the beat sends is one a worker knows: a name in the schedule that no module
registers is refused by the workers ("Received unregistered task"), and the work it stands for
never runs (seen: a decorator that slid onto a helper above the task it belonged to)."""

from __future__ import annotations

from portal.celery import app


def test_every_beat_entry_names_a_registered_task():
    app.loader.import_default_modules()  # what a worker imports at its start
    scheduled = {name: entry["task"] for name, entry in app.conf.beat_schedule.items()}
    assert scheduled, "the beat has no schedule"
    unknown = {name: task for name, task in scheduled.items() if task not in app.tasks}
    assert unknown == {}


def test_no_private_helper_is_registered_as_a_task():
    app.loader.import_default_modules()
    private = sorted(name for name in app.tasks
                     if not name.startswith("celery.") and name.rsplit(".", 1)[-1].startswith("_"))
    assert private == []
