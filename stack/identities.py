"""The demo's Keystone identities (README.md's demo accounts), created through Keystone's own API. Idempotent."""

from __future__ import annotations

import dataclasses

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client as ks_client
from keystoneclient.v3.projects import Project
from keystoneclient.v3.users import User

from .keystone import ADMIN_PASSWORD, SERVICE_PASSWORD, SERVICE_PROJECT, SERVICE_USER


@dataclasses.dataclass(frozen=True)
class DemoUser:
    name: str
    password: str
    roles: tuple[tuple[str, str], ...]  # (project, role)
    description: str = ""


PROJECTS = {
    "vision-lab": "Computer vision research group",
    "nlp-lab": "Natural language processing research group",
    SERVICE_PROJECT: "Service accounts of OpenStack-side services",
}

USERS = (
    DemoUser("researcher", "researcher-demo-pass", (("vision-lab", "member"), ("nlp-lab", "member")),
             "member of vision-lab and nlp-lab"),
    DemoUser("lead", "lead-demo-pass", (("vision-lab", "manager"),), "manager of vision-lab"),
    DemoUser("student", "student-demo-pass", (("nlp-lab", "member"),), "member of nlp-lab"),
    DemoUser("viewer", "viewer-demo-pass", (("vision-lab", "reader"),), "reader of vision-lab"),
    DemoUser(SERVICE_USER, SERVICE_PASSWORD, ((SERVICE_PROJECT, "service"),),
             "the portal's own service identity (validates API tokens)"),
)


def admin_client(url: str, password: str = ADMIN_PASSWORD) -> ks_client.Client:
    auth = v3.Password(auth_url=url, username="admin", password=password,
                       user_domain_id="default", project_name="admin",
                       project_domain_id="default")
    sess = ks_session.Session(auth=auth, timeout=10)
    return ks_client.Client(session=sess, endpoint_override=url, interface="public")


def _find_or_create_project(ks: ks_client.Client, name: str, description: str) -> Project:
    found = ks.projects.list(name=name, domain="default")
    return found[0] if found else ks.projects.create(name=name, domain="default",
                                                     description=description)


def _find_or_create_user(ks: ks_client.Client, name: str, password: str, description: str
                         ) -> User:
    # the portal's own identity is never locked out by Keystone's lockout: wrong passwords
    # sent in its name by anyone would otherwise stop every token validation of the portal
    options = {"ignore_lockout_failure_attempts": True} if name == SERVICE_USER else {}
    found = ks.users.list(name=name, domain="default")
    if found:
        if options and not all(getattr(found[0], "options", {}).get(k) == v for k, v in options.items()):
            ks.users.update(found[0], options=options)
        return found[0]
    return ks.users.create(name=name, domain="default", password=password,
                           description=description, enabled=True, options=options)


def seed_identities(url: str, admin_password: str = ADMIN_PASSWORD,
                    extra_users: tuple[DemoUser, ...] = ()) -> dict[str, str]:
    """Create the demo projects, users and role assignments; returns project name → id."""
    ks = admin_client(url, admin_password)
    roles = {role.name: role for role in ks.roles.list()}
    project_ids = {}
    for name, description in PROJECTS.items():
        project_ids[name] = _find_or_create_project(ks, name, description).id
    for spec in (*USERS, *extra_users):
        user = _find_or_create_user(ks, spec.name, spec.password, spec.description)
        for project, role in spec.roles:
            if project not in project_ids:
                project_ids[project] = _find_or_create_project(ks, project, "").id
            ks.roles.grant(roles[role], user=user, project=project_ids[project])
        if spec.name == SERVICE_USER:
            # lists projects and their members (tenant sync, admin pages): read-only, system-wide
            ks.roles.grant(roles["reader"], user=user, system="all")
    return project_ids
