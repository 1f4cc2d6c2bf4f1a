"""gpuctl against the live portal and the real Keystone: its environment as `source openrc`
leaves it, a run in this process, and vision-lab ready to launch."""

from __future__ import annotations

import io

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client as ks_client

from gpuctl import cli
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update

live = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def run(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, env=env, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def openrc(keystone, live_server, user: str = "researcher", project: str = "vision-lab",
           password: str | None = None) -> dict[str, str]:
    """What `source openrc` puts in the environment."""
    return {"OS_AUTH_URL": keystone.url, "OS_USERNAME": user,
            "OS_PASSWORD": password or f"{user}-demo-pass", "OS_PROJECT_NAME": project,
            "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default",
            "OS_IDENTITY_API_VERSION": "3", "GPU_PORTAL_URL": live_server.url,
            "HOME": "/nonexistent"}


@pytest.fixture
def portal(live_server, keystone, gpu_types, cluster, eager_celery):
    """vision-lab ready to launch: recorded, the demo quota, its namespace in kubesim."""
    env = openrc(keystone, live_server)
    code, _, err = run(["whoami"], env)  # first contact records the user and the tenant
    assert code == 0, err
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0}})
    tenant_reconcile(tenant_id=tenant.pk)
    return env


def user_client(keystone, username: str, project: str) -> ks_client.Client:
    """python-keystoneclient as the user themselves: Keystone lets only the owner create one."""
    auth = v3.Password(auth_url=keystone.url, username=username,
                       password=f"{username}-demo-pass", user_domain_id="default",
                       project_name=project, project_domain_id="default")
    sess = ks_session.Session(auth=auth, timeout=10)
    return ks_client.Client(session=sess, endpoint_override=keystone.url, interface="public")
