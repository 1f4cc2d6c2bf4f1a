"""Launching through the REST API: validation, admission under quota, tasks, permissions."""

import pytest
from django.test import Client, TestCase
from kubernetes import client as k8s

from audit.models import AuditRecord
from kube.client import Kube
from storage.models import Volume
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.database import demo_shared_gpu_types
from tests.support.journeys import JUPYTER
from tests.support.waiting import eventually
from tests.workloads.api_calls import delete, launch, post
from workloads.models import Workload

pytestmark = pytest.mark.django_db


def test_launch_jupyter_creates_its_objects_in_the_tenant_namespace(vision, api_headers,
                                                                   eager_celery, cluster):
    response = launch(api_headers("researcher"), JUPYTER)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "submitted"  # accepted; the cluster work follows in a task
    assert body["tenant"] == "vision-lab" and body["owner"] == "researcher"
    assert body["template"] == "jupyter" and body["kind"] == "service" and body["port"] == 8888
    workload = Workload.objects.get(pk=body["id"])
    assert workload.state == "pending"
    api = cluster.api_client()
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(workload.object_name,
                                                                vision.namespace)
    pod = deployment.spec.template.spec
    assert pod.node_selector == {"gputype": "a100"}
    assert pod.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    # the authenticating proxy in front of it: the Service reaches the proxy only
    assert [c.name for c in pod.containers] == ["app", "auth-proxy"]
    assert [p.name for p in pod.containers[0].ports] == ["app"]
    assert [p.name for p in pod.containers[1].ports] == ["http"]
    service = k8s.CoreV1Api(api).read_namespaced_service(workload.object_name, vision.namespace)
    assert service.spec.type == "LoadBalancer"
    assert (service.spec.ports[0].port, service.spec.ports[0].target_port) == (8888, "http")
    secret = k8s.CoreV1Api(api).read_namespaced_secret(workload.object_name, vision.namespace)
    assert {"JUPYTER_TOKEN", "auth-proxy-client-secret", "auth-proxy-cookie-secret"} <= \
        set(secret.data)
    assert len(workload.access_token) >= 22  # ≥ 128 bits, URL-safe
    assert AuditRecord.objects.filter(action="workload.launch", tenant=vision).count() == 1


def test_a_launch_beyond_the_quota_is_403_naming_the_limit(vision, api_headers):
    headers = api_headers("researcher")
    assert launch(headers, {**JUPYTER, "gpu_count": 4}).status_code == 201
    refused = launch(headers, {**JUPYTER, "name": "one more"})
    assert refused.status_code == 403
    assert refused.json() == {"code": "quota_exceeded", "category": "admission", "fields": {},
                              "detail": "vision-lab uses 4 of 4 a100 GPUs; 1 more would exceed "
                                        "the quota."}
    assert Workload.objects.filter(tenant=vision).count() == 1


def test_the_total_and_workload_count_limits_hold(vision, api_headers):
    quota_update(tenant=vision, acting_user=None, changes={"gpus_total": 2, "max_workloads": 5})
    headers = api_headers("researcher")
    assert launch(headers, {**JUPYTER, "gpu_count": 2}).status_code == 201
    refused = launch(headers, {**JUPYTER, "gpu_type": "v100"})
    assert refused.status_code == 403
    assert "uses 2 of 2 GPUs in all" in refused.json()["detail"]


def test_a_request_that_can_never_fit_is_refused_at_once(vision, api_headers):
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"t4": 8}})
    response = launch(api_headers("researcher"), {**JUPYTER, "gpu_type": "t4", "gpu_count": 8})
    assert response.status_code == 400
    assert response.json()["fields"]["gpu_count"] == [
        "No t4 node has 8 GPUs (the largest has 4); this request can never run."]


@pytest.mark.parametrize(("body", "field"), [
    ({"image": "ubuntu; rm -rf /"}, "image"),
    ({"image": "$(id)"}, "image"),
    ({"image": "library/UPPER:1"}, "image"),
    ({"template": "jupyter", "retries": 2}, "retries"),
    ({"template": "jupyter", "command": ["bash"]}, "command"),
    ({"template": "jupyter", "kind": "batch"}, "kind"),
    ({"template": "custom", "kind": "batch", "image": "busybox:1.36", "port": 80}, "port"),
    ({"template": "custom", "kind": "service", "image": "busybox:1.36"}, "port"),
    ({"template": "custom", "kind": "batch"}, "image"),
    ({"gpu_count": 0}, "gpu_count"),
    ({"gpu_count": "two"}, "gpu_count"),
    ({"gpu_type": "h100"}, "gpu_type"),
    ({"template": "nope"}, "template"),
    ({"name": "   "}, "name"),
    ({"env": {"BAD NAME": "x"}}, "env"),
    ({"env": {"JUPYTER_TOKEN": "mine"}}, "env"),
    ({"cpu": 100000}, "cpu"),
    ({"args": ["a\x00b"]}, "args"),
    ({"name": "invoice\u202eexe.pdf"}, "name"),
    ({"name": "zero\u200bwidth"}, "name"),
    ({"name": "nul\x00"}, "name"),
])
def test_bad_input_is_400_with_field_errors_and_creates_nothing(vision, api_headers, body, field):
    response = launch(api_headers("researcher"), {**JUPYTER, **body})
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert not Workload.objects.exists()


@pytest.mark.parametrize(("template", "env", "refused"), [
    ("custom", {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "all"},
     ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"]),
    ("jupyter", {"NVIDIA_MIG_CONFIG_DEVICES": "all"}, ["NVIDIA_MIG_CONFIG_DEVICES"]),
    ("custom", {"NVIDIA_DISABLE_REQUIRE": "1", "CUDA_VERSION": "12.4"},
     ["NVIDIA_DISABLE_REQUIRE", "CUDA_VERSION"]),
    ("jupyter", {"LD_PRELOAD": "/tmp/x.so"}, ["LD_PRELOAD"]),
])
def test_the_gpu_stacks_variables_are_refused_naming_them(vision, api_headers, template, env,
                                                          refused):
    body = {**JUPYTER, "template": template, "env": env}
    if template == "custom":
        body.update(kind="batch", image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    response = launch(api_headers("researcher"), body)
    assert response.status_code == 400, response.json()
    messages = response.json()["fields"]["env"]
    assert [message.split(" ")[0] for message in messages] == refused
    assert all(" is refused" in message for message in messages)
    assert not Workload.objects.exists()


def test_what_stays_inside_the_container_is_passed_on(vision, api_headers, eager_celery, cluster):
    """CUDA_VISIBLE_DEVICES only hides GPUs the container has; the loader's variables are the
    custom template's own business."""
    env = {"CUDA_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": "/opt/lib", "KUBESIM_RUN_SECONDS": "1"}
    response = launch(api_headers("researcher"), {
        **JUPYTER, "template": "custom", "kind": "batch", "image": "python:3.12-slim",
        "env": env})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    job = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(workload.object_name,
                                                                    vision.namespace)
    passed = {var.name: var.value for var in job.spec.template.spec.containers[0].env}
    assert {key: passed[key] for key in env} == env
    assert not any(name.startswith("NVIDIA_") for name in passed)


def test_a_template_that_still_sets_one_is_refused_at_launch(vision, api_headers):
    from catalogue.models import Template

    Template.objects.filter(slug="jupyter").update(env={"NVIDIA_VISIBLE_DEVICES": "all"})
    response = launch(api_headers("researcher"), JUPYTER)
    assert response.status_code == 400
    assert "NVIDIA_VISIBLE_DEVICES is refused" in response.json()["fields"]["template"][0]


def test_a_name_with_a_bidi_override_is_refused_naming_the_character(vision, api_headers):
    response = launch(api_headers("researcher"), {**JUPYTER, "name": "report\u202efdp.exe"})
    assert response.status_code == 400
    (message,) = response.json()["fields"]["name"]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in message
    assert not Workload.objects.exists()


def test_a_template_runs_its_own_image_unless_an_admin_lets_researchers_choose(vision, api_headers):
    """One rule for every template. Jupyter used to take another image
    while refusing a command; now a template runs its own image unless it takes one."""
    from catalogue.models import Template

    headers = api_headers("researcher")
    own = "quay.io/jupyter/pytorch-notebook:cuda12-python-3.12"
    other = "quay.io/jupyter/scipy-notebook:2024-05-27"
    refused = launch(headers, {**JUPYTER, "image": other})
    assert refused.status_code == 400
    assert refused.json()["fields"]["image"] == [
        f"The Jupyter template runs its own image ({own}); an admin can let researchers "
        "choose another."]
    assert launch(headers, {**JUPYTER, "name": "own", "image": own}).status_code == 201
    takes = {t["slug"]: t["image_replaceable"]
             for t in Client().get("/api/v1/templates/", **headers).json()}
    assert takes == {"jupyter": False, "digits": False, "tensorboard": False, "custom": True,
                     "pytorch-ddp": True, "mpi": True, "code-server": False}
    Template.objects.filter(slug="jupyter").update(image_replaceable=True)
    accepted = launch(headers, {**JUPYTER, "name": "scipy", "image": other})
    assert accepted.status_code == 201, accepted.json()
    assert accepted.json()["image"] == other
    # the command stays the template's either way
    refused = launch(headers, {**JUPYTER, "name": "cmd", "image": other, "command": ["sh"]})
    assert refused.status_code == 400 and list(refused.json()["fields"]) == ["command"]


def test_the_sites_registries_bind_every_image(vision, api_headers, settings):
    """PORTAL_IMAGE_REGISTRIES beside the tenant's own prefixes: an image must be inside
    both, the templates' own images included."""
    settings.PORTAL_IMAGE_REGISTRIES = ["quay.io/jupyter", "nvcr.io/nvidia"]
    headers = api_headers("researcher")
    assert launch(headers, JUPYTER).status_code == 201  # its image is inside
    site_refusal = ["Images must come from the site's registries: quay.io/jupyter, "
                    "nvcr.io/nvidia."]
    tensorboard = launch(headers, {**JUPYTER, "name": "tb", "template": "tensorboard"})
    assert tensorboard.status_code == 400
    assert tensorboard.json()["fields"]["image"] == site_refusal
    custom = {**JUPYTER, "name": "job", "template": "custom", "kind": "batch",
              "command": ["python", "train.py"]}
    refused = launch(headers, {**custom, "image": "docker.io/library/python:3.12"})
    assert refused.status_code == 400 and refused.json()["fields"]["image"] == site_refusal
    pytorch = "nvcr.io/nvidia/pytorch:24.01-py3"
    assert launch(headers, {**custom, "image": pytorch}).status_code == 201
    # the tenant's list narrows the site's further
    vision.image_prefixes = ["docker.io/pytorch"]
    vision.save(update_fields=["image_prefixes"])
    refused = launch(headers, {**custom, "name": "job2", "image": pytorch})
    assert refused.json()["fields"]["image"] == [
        "vision-lab may only use images from: docker.io/pytorch."]
    refused = launch(headers, {**custom, "name": "job3", "image": "pytorch/pytorch:2.3.0"})
    assert refused.json()["fields"]["image"] == site_refusal


def test_a_template_that_may_run_as_root_runs_only_where_the_project_allows_root(
        vision, api_headers, eager_celery, cluster):
    """Tenant namespaces enforce Pod Security "restricted", which admits no
    container that may run as root. DIGITS may (its image runs as root): it is refused with
    the reason until an admin lets the project run such templates. The other templates run
    as a non-root user, the custom one included."""
    from tenants.services import tenant_root_templates_update

    headers = api_headers("researcher")
    digits = {**JUPYTER, "name": "digits", "template": "digits", "gpu_type": "v100"}
    refused = launch(headers, digits)
    assert refused.status_code == 400
    assert refused.json()["fields"]["template"] == [
        "The NVIDIA DIGITS template may run as root, which vision-lab's namespace does not "
        "admit (Pod Security “restricted”); an admin can allow root for the project."]
    custom = launch(headers, {**JUPYTER, "name": "job", "template": "custom", "kind": "batch",
                              "image": "python:3.12-slim", "command": ["python", "-V"]})
    assert custom.status_code == 201, custom.json()
    job = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(
        Workload.objects.get(pk=custom.json()["id"]).object_name, vision.namespace)
    context = job.spec.template.spec.security_context
    assert (context.run_as_non_root, context.run_as_user, context.seccomp_profile.type) == \
        (True, 1000, "RuntimeDefault")
    with TestCase.captureOnCommitCallbacks(execute=True):
        tenant_root_templates_update(tenant=vision, acting_user=None, allow=True)
    accepted = launch(headers, digits)
    assert accepted.status_code == 201, accepted.json()
    deployment = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        Workload.objects.get(pk=accepted.json()["id"]).object_name, vision.namespace)
    assert deployment.spec.template.spec.security_context.run_as_non_root is None


def test_disabled_template_and_gpu_type_are_refused(vision, api_headers, gpu_types):
    from catalogue.models import Template

    Template.objects.filter(slug="digits").update(enabled=False)
    gpu_types["v100"].enabled = False
    gpu_types["v100"].save()
    r1 = launch(api_headers("researcher"), {**JUPYTER, "template": "digits"})
    r2 = launch(api_headers("researcher"), {**JUPYTER, "gpu_type": "v100"})
    assert "disabled" in r1.json()["fields"]["template"][0]
    assert "disabled" in r2.json()["fields"]["gpu_type"][0]


def test_unicode_names_and_commands_are_kept_as_argv(vision, api_headers, eager_celery, cluster):
    body = {"name": "Modèle 日本 \"quoted\"", "template": "custom", "kind": "batch",
            "image": "python:3.12-slim", "gpu_type": "v100", "gpu_count": 1,
            "command": ["python", "-c", "print('héllo \"world\"; $(id)')"],
            "env": {"KUBESIM_RUN_SECONDS": "1"}}
    response = launch(api_headers("researcher"), body)
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    assert workload.name == "Modèle 日本 \"quoted\""
    job = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(workload.object_name,
                                                                    vision.namespace)
    assert job.spec.template.spec.containers[0].command == body["command"]


def test_the_same_idempotency_key_returns_the_same_workload(vision, api_headers):
    headers = api_headers("researcher")
    first = launch(headers, JUPYTER, HTTP_IDEMPOTENCY_KEY="run-42")
    second = launch(headers, JUPYTER, HTTP_IDEMPOTENCY_KEY="run-42")
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert Workload.objects.count() == 1
    other = launch(headers, JUPYTER, HTTP_IDEMPOTENCY_KEY="run-43")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def test_an_idempotency_key_reused_with_another_body_is_422(vision, api_headers):
    headers = api_headers("researcher")
    first = launch(headers, JUPYTER, HTTP_IDEMPOTENCY_KEY="run-7")
    assert first.status_code == 201
    # the same body, keys in another order: the same request
    again = launch(headers, dict(reversed(list(JUPYTER.items()))), HTTP_IDEMPOTENCY_KEY="run-7")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    reused = launch(headers, {**JUPYTER, "gpu_count": 2}, HTTP_IDEMPOTENCY_KEY="run-7")
    assert reused.status_code == 422
    body = reused.json()
    assert body["code"] == "idempotency_key_reused" and body["fields"] == {}
    assert "run-7" in body["detail"] and str(first.json()["id"]) in body["detail"]
    assert Workload.objects.count() == 1
    assert Workload.objects.get().gpu_count == 1


def test_stop_deletes_the_objects_and_keeps_the_record(vision, api_headers, eager_celery, cluster):
    headers = api_headers("researcher")
    workload_id = launch(headers, JUPYTER).json()["id"]
    stopped = post(f"/api/v1/workloads/{workload_id}/stop/", headers)
    assert stopped.status_code == 202
    workload = Workload.objects.get(pk=workload_id)
    assert workload.state == "stopped" and workload.finished_at is not None
    with pytest.raises(k8s.ApiException) as exc:
        k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(workload.object_name,
                                                                       vision.namespace)
    assert exc.value.status == 404
    events = Client().get(f"/api/v1/workloads/{workload_id}/events/", **headers).json()
    assert [e["reason"] for e in events][:1] == ["Submitted"] and events[-1]["reason"] == "Stopped"


def test_delete_hides_it_and_frees_the_quota(vision, api_headers, eager_celery):
    headers = api_headers("researcher")
    workload_id = launch(headers, {**JUPYTER, "gpu_count": 4}).json()["id"]
    assert delete(f"/api/v1/workloads/{workload_id}/", headers).status_code == 204
    assert Client().get(f"/api/v1/workloads/{workload_id}/", **headers).status_code == 404
    assert launch(headers, {**JUPYTER, "gpu_count": 4}).status_code == 201


def test_deleting_a_finished_batch_job_deletes_its_job_and_pod_at_once(vision, api_headers,
                                                                       eager_celery, cluster):
    headers = api_headers("researcher")
    response = launch(headers, {**JUPYTER, "template": "custom", "kind": "batch",
                                "image": "python:3.12-slim",
                                "env": {"KUBESIM_RUN_SECONDS": "0", "API_KEY": "s3cret"}})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    kube = Kube(cluster.api_client())
    selector = f"gpu-portal.io/workload-id={workload.pk}"
    eventually(lambda: kube.list("Pod", vision.namespace, label_selector=selector)["items"],
               timeout=20, message="the Job's pod never came")
    # finished, as the tracker records it (the Job stays until its TTL, a day)
    Workload.objects.filter(pk=workload.pk).update(state=Workload.State.SUCCEEDED)
    assert delete(f"/api/v1/workloads/{workload.pk}/", headers).status_code == 204
    assert kube.get("Job", workload.object_name, vision.namespace) is None
    eventually(lambda: not kube.list("Pod", vision.namespace, label_selector=selector)["items"],
               timeout=20, message="the Job's pod (and its environment) stayed")
    assert Workload.objects.get(pk=workload.pk).events.filter(reason="Removed").exists()


def test_roles_reader_member_manager(vision, api_headers):
    researcher, lead, viewer = api_headers("researcher"), api_headers("lead"), api_headers("viewer")
    refused = launch(viewer, JUPYTER)
    assert refused.status_code == 403
    workload_id = launch(researcher, JUPYTER).json()["id"]
    # everyone in the project sees it
    assert Client().get(f"/api/v1/workloads/{workload_id}/", **viewer).status_code == 200
    assert Client().post(f"/api/v1/workloads/{workload_id}/stop/", **viewer).status_code == 403
    # a manager may stop a member's workload
    assert Client().post(f"/api/v1/workloads/{workload_id}/stop/", **lead).status_code == 202


def test_another_tenant_is_404(vision, api_headers):
    workload_id = launch(api_headers("researcher"), JUPYTER).json()["id"]
    student = api_headers("student", "nlp-lab")
    for method, path in (("get", ""), ("post", "stop/"), ("delete", ""), ("get", "events/"),
                         ("get", "logs/")):
        response = getattr(Client(), method)(f"/api/v1/workloads/{workload_id}/{path}", **student)
        assert response.status_code == 404, (method, path)


def test_the_same_user_in_another_project_token_cannot_see_it(vision, api_headers):
    workload_id = launch(api_headers("researcher"), JUPYTER).json()["id"]
    nlp = api_headers("researcher", "nlp-lab")
    assert Client().get(f"/api/v1/workloads/{workload_id}/", **nlp).status_code == 404


def test_list_filters(vision, api_headers):
    headers = api_headers("researcher")
    launch(headers, JUPYTER)
    launch(headers, {**JUPYTER, "name": "tb", "template": "tensorboard", "gpu_type": "v100"})
    body = Client().get("/api/v1/workloads/?gpu_type=v100", **headers).json()
    assert body["count"] == 1 and body["results"][0]["template"] == "tensorboard"
    assert Client().get("/api/v1/workloads/?state=submitted&template=jupyter",
                        **headers).json()["count"] == 1
    assert Client().get("/api/v1/workloads/?owner=lead", **headers).json()["count"] == 0


def test_deleting_the_tenant_stops_its_workloads(vision, api_headers, eager_celery):
    from tenants.services import tenant_mark_deleting

    workload_id = launch(api_headers("researcher"), JUPYTER).json()["id"]
    with TestCase.captureOnCommitCallbacks(execute=True):
        tenant_mark_deleting(tenant=vision, acting_user=None, reason="project gone")
    workload = Workload.objects.get(pk=workload_id)
    assert workload.state == "stopped"
    assert "tenant is being deleted" in workload.reason
    refused = launch(api_headers("researcher"), JUPYTER)
    assert refused.status_code == 403 and "being deleted" in refused.json()["detail"]


def test_logs_come_from_the_pod(vision, api_headers, eager_celery, cluster):
    headers = api_headers("researcher")
    workload_id = launch(headers, JUPYTER).json()["id"]
    lines = eventually(lambda: Client().get(f"/api/v1/workloads/{workload_id}/logs/?tail=5",
                                            **headers).json()["lines"],
                       timeout=20, interval=0.3, message="the pod wrote no log lines")
    assert 0 < len(lines) <= 5
    bad = Client().get(f"/api/v1/workloads/{workload_id}/logs/?tail=abc", **headers)
    assert bad.status_code == 400


def logs_once_written(headers: dict, workload_id: int, marker: str = "lab?token=") -> list[str]:
    """The workload's log lines once the notebook has printed the URL that opens it."""
    def written() -> list[str] | None:
        lines = Client().get(f"/api/v1/workloads/{workload_id}/logs/", **headers).json()["lines"]
        return lines if any(marker in line for line in lines) else None

    return eventually(written, timeout=20, interval=0.3, message=f"no {marker!r} in the logs")


def test_only_those_who_may_manage_it_see_its_access_token(vision, api_headers, eager_celery,
                                                           cluster):
    """The notebook prints the URL with its token; with that token anyone
    who reaches the application's port is in. The owner and the project's managers read it;
    a reader and another member see that it runs, not how to get in: anywhere."""
    nlp = Tenant.objects.get(name="nlp-lab")  # researcher and student are both members there
    quota_update(tenant=nlp, acting_user=None,
                 changes={"gpus_total": 6, "gpus_by_type": {"a100": 2, "t4": 4}})
    tenant_reconcile(tenant_id=nlp.pk)
    owner, lead = api_headers("researcher"), api_headers("lead")
    viewer, student = api_headers("viewer"), api_headers("student", "nlp-lab")
    mine = launch(owner, JUPYTER).json()["id"]
    theirs = launch(api_headers("researcher", "nlp-lab"), JUPYTER).json()["id"]
    for workload_id, may_manage, may_not in ((mine, (owner, lead), viewer),
                                             (theirs, (), student)):
        token = Workload.objects.get(pk=workload_id).access_token
        for headers in may_manage:
            assert f"lab?token={token}" in "\n".join(logs_once_written(headers, workload_id))
        lines = "\n".join(logs_once_written(may_not, workload_id, "lab?token=[redacted]"))
        assert "lab?token=[redacted]" in lines and token not in lines
        for path in ("", "events/", "logs/?tail=1000"):
            body = Client().get(f"/api/v1/workloads/{workload_id}/{path}", **may_not)
            assert body.status_code == 200 and token not in body.content.decode(), path
        listed = Client().get("/api/v1/workloads/", **may_not).content.decode()
        assert str(workload_id) in listed and token not in listed
    # a token passed as an argument is not shown to a reader either (a custom notebook)
    Workload.objects.filter(pk=mine).update(args=["start-notebook.py",
                                                  "--ServerApp.token=s3cret-arg"])
    shown = Client().get(f"/api/v1/workloads/{mine}/", **viewer).json()["args"]
    assert shown == ["start-notebook.py", "--ServerApp.token=[redacted]"]
    assert Client().get(f"/api/v1/workloads/{mine}/", **owner).json()["args"][1] == \
        "--ServerApp.token=s3cret-arg"


def test_the_home_volume_is_created_once_and_mounted(vision, api_headers, eager_celery, cluster):
    headers = api_headers("researcher")
    first = launch(headers, {**JUPYTER, "use_home": True}).json()["id"]
    second = launch(headers, {**JUPYTER, "name": "second", "use_home": True}).json()["id"]
    api = cluster.api_client()
    claim = k8s.CoreV1Api(api).read_namespaced_persistent_volume_claim("gpu-portal-home",
                                                                       vision.namespace)
    assert claim.spec.access_modes == ["ReadWriteMany"]
    assert claim.spec.resources.requests["storage"] == "100Gi"
    for workload_id in (first, second):
        workload = Workload.objects.get(pk=workload_id)
        pod = k8s.AppsV1Api(api).read_namespaced_deployment(workload.object_name,
                                                             vision.namespace).spec.template.spec
        assert any(v.persistent_volume_claim and v.persistent_volume_claim.claim_name ==
                   "gpu-portal-home" for v in pod.volumes)
        assert any(m.mount_path == "/home/portal" for m in pod.containers[0].volume_mounts)
    # the project's volume "home", made once (its own task made the claim: the launches'
    # creates found it there), and mounted by both
    home = Volume.objects.get(tenant=vision)
    assert (home.name, home.scope, home.claim_name) == ("home", "project", "gpu-portal-home")
    assert claim.metadata.labels["gpu-portal.io/volume-id"] == str(home.pk)
    for workload_id in (first, second):
        assert [(m.volume_id, m.path) for m in Workload.objects.get(pk=workload_id).mounts.all()] \
            == [(home.pk, "/home/portal")]
    # the volume outlives a stopped workload
    post(f"/api/v1/workloads/{first}/stop/", headers)
    assert k8s.CoreV1Api(api).read_namespaced_persistent_volume_claim("gpu-portal-home",
                                                                      vision.namespace)


def test_lowering_a_quota_below_use_blocks_launches_but_stops_nothing(vision, api_headers,
                                                                      eager_celery):
    headers = api_headers("researcher")
    running = launch(headers, {**JUPYTER, "gpu_count": 3}).json()["id"]
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100": 1}})
    assert Workload.objects.get(pk=running).state == "pending"  # untouched, still live
    refused = launch(headers, JUPYTER)
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("vision-lab uses 3 of 1 a100 GPUs")


def test_a_quarter_t4_and_a_mig_slice_run_on_their_shared_nodes(vision, gpu_types, api_headers,
                                                               eager_celery, cluster):
    # the demo's time-sliced T4 node (16 × nvidia.com/gpu.shared) and MIG A100 node
    # (14 × nvidia.com/mig-1g.10gb): a launch asks for the type's resource on its nodes, the
    # scheduler binds it there, and the GPU types' API counts units
    demo_shared_gpu_types(gpu_types)
    with TestCase.captureOnCommitCallbacks(execute=True):
        quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {
            "t4-shared": 4, "a100-1g-10gb": 7}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    quarter = launch(headers, {**JUPYTER, "name": "quarter", "gpu_type": "t4-shared",
                               "gpu_count": 2})
    sliced = launch(headers, {**JUPYTER, "name": "slice", "gpu_type": "a100-1g-10gb"})
    assert (quarter.status_code, sliced.status_code) == (201, 201), (quarter.json(),
                                                                    sliced.json())
    api = cluster.api_client()
    for body, resource, units, selector, node in (
            (quarter.json(), "nvidia.com/gpu.shared", "2", "t4-shared", "gpu-t4-shared-1"),
            (sliced.json(), "nvidia.com/mig-1g.10gb", "1", "a100-mig", "gpu-a100-mig-1")):
        workload = Workload.objects.get(pk=body["id"])
        spec = k8s.AppsV1Api(api).read_namespaced_deployment(
            workload.object_name, vision.namespace).spec.template.spec
        assert spec.node_selector == {"gputype": selector}
        assert spec.containers[0].resources.limits[resource] == units

        def bound(pk: int = workload.pk) -> str | None:
            pods = k8s.CoreV1Api(api).list_namespaced_pod(
                vision.namespace, label_selector=f"gpu-portal.io/workload-id={pk}").items
            return pods[0].spec.node_name if pods else None

        assert eventually(bound, timeout=30, message=f"{workload.name} bound") == node
    rows: dict = {}

    def counted() -> bool:
        rows.update({r["slug"]: r for r in Client().get("/api/v1/gpu-types/", **headers).json()})
        shared, mig = rows["t4-shared"], rows["a100-1g-10gb"]
        return ((shared["capacity"], shared["allocated"], shared["free"]) == (16, 2, 14)
                and (mig["capacity"], mig["allocated"], mig["free"]) == (14, 1, 13))

    eventually(counted, timeout=20, interval=0.2, message=lambda: f"units counted: {rows}")
    assert (rows["t4-shared"]["sharing"], rows["t4-shared"]["gpu_fraction_text"],
            rows["t4-shared"]["physical"]) == ("time-sliced", "1/4", "t4")
    assert (rows["a100-1g-10gb"]["sharing"], rows["a100-1g-10gb"]["gpu_fraction"],
            rows["a100-1g-10gb"]["physical"]) == ("mig", 1 / 7, "a100")
    assert rows["a100"]["sharing"] == "exclusive" and rows["a100"]["gpu_fraction"] == 1
