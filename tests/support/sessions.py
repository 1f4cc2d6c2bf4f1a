"""Browsers signed in as real Keystone users without the login form, for the tests that probe
every page by every role (the form itself: tests/identity/test_login.py). The identities come
from the real Keystone once (tokens are Keystone's state, not the database's); each browser's
session is a row of the test's own, so what a request changes in it is rolled back with the
test."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from identity.identity import Identity


def keystone_identities(people: dict[str, tuple[str, str]]) -> dict[str, Identity]:
    """Each person's (`who`: (Keystone user, project)) identity as the login form and the project
    switch leave it: unscoped, their projects, a token scoped to the project, admin or not. The
    password is the demo's (`<user>-demo-pass`)."""
    from identity.client import KeystoneClient
    from identity.roles import is_portal_admin

    client = KeystoneClient()
    out = {}
    for who, (user, project) in people.items():
        unscoped = client.authenticate(user, f"{user}-demo-pass", "Default")
        projects = client.user_projects(unscoped.id)
        wanted = next(p for p in projects if p.name == project)
        scoped = client.scope_to_project(unscoped.id, wanted.id)
        admin = is_portal_admin(project_name=scoped.project_name, role_names=scoped.roles,
                                system_scoped=False)
        out[who] = Identity(unscoped=unscoped, projects=projects, scoped=scoped, is_admin=admin,
                            validated_at=dt.datetime.now(dt.UTC))
    return out


def signed_in(identity: Identity) -> Any:
    """A Django test Client whose server-side session holds `identity`, validated now, as the
    login form leaves it; the first sight of each of its projects records the tenant, as there."""
    from django.test import Client

    from identity import identity as identity_store
    from identity.services import user_sync
    from tenants.services import tenant_ensure

    identity = dataclasses.replace(identity, validated_at=dt.datetime.now(dt.UTC))
    for project in identity.projects:
        tenant_ensure(keystone_project_id=project.id, name=project.name,
                      domain_id=project.domain_id)
    client = Client()
    client.force_login(user_sync(token=identity.unscoped, is_admin=identity.is_admin),
                       backend="identity.backend.KeystoneBackend")
    session = client.session
    identity_store.store(session, identity)
    session.save()
    return client
