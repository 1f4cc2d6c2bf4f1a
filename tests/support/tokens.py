"""Keystone tokens of the demo's people, scoped to one of their projects each, fetched once for a
module's matrix (Keystone state, not database)."""

from __future__ import annotations

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3


def project_tokens(keystone_url: str, wanted: dict[str, tuple[str, str]]) -> dict[str, str]:
    """{key: token} for each key's (user, project); a demo user's password is
    `<user>-demo-pass`."""
    out = {}
    for key, (user, project) in wanted.items():
        auth = v3.Password(auth_url=keystone_url, username=user, password=f"{user}-demo-pass",
                           user_domain_id="default", project_name=project,
                           project_domain_id="default")
        out[key] = auth.get_access(ks_session.Session(auth=auth)).auth_token
    return out
