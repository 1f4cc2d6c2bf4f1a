import contextlib
import os

from django.core.wsgi import get_wsgi_application
from django.urls import NoReverseMatch, URLResolver, get_resolver, reverse

from portal.celery import app as celery_app

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()


def _reverse_index(resolver: URLResolver, namespaces: tuple[str, ...] = ()) -> None:
    """Build `resolver`'s index of names, and each namespace's below it: one reverse() of a
    name of each namespace builds the resolver Django keeps for it (a NoReverseMatch for the
    arguments left out comes after)."""
    for namespace, (_, below) in resolver.namespace_dict.items():
        path = (*namespaces, namespace)
        name = next((name for name in below.reverse_dict if isinstance(name, str)), None)
        if name is not None:
            with contextlib.suppress(NoReverseMatch):
                reverse(":".join((*path, name)))
        _reverse_index(below, path)


def _prepare() -> None:
    """A web process's one-time work, done as it starts rather than by its first requests,
    all at once in the threads of a burst:

    - Celery's registry of tasks: core/tasks.py finds a task by name, and the first name a
      process does not know imports every app's `tasks` module (the cluster client, the HTTP
      clients, …), then Celery builds its registry. On the demo that took about a second, inside
      the first webhook test's transaction: SQLite's write lock was held meanwhile, and a burst
      of 24 tests answered in 1.7–4.4 s instead of 0.2–0.6 s.
    - The URLs' indexes for reverse(), the root's and each namespace's: every request thread
      that needs one before it exists builds its own (Django takes no lock for them), about
      50 ms of CPU each.
    """
    celery_app.loader.import_default_modules()
    celery_app.finalize(auto=True)
    _reverse_index(get_resolver())


_prepare()
