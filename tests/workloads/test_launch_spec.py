"""The launch spec frozen at admission (launch_spec.py): a launch whose create task runs after an
admin edited its template and GPU type creates what was admitted, in kubesim over HTTP."""

from __future__ import annotations

import pytest

from catalogue.models import Template
from kube.client import Kube
from tests.support.admission import admitted
from workloads.launch_spec import launch_spec_from_rows
from workloads.manifests import CONTAINER_NAME
from workloads.models import Workload
from workloads.services import workload_launch_spec_freeze
from workloads.tasks import workload_create_task

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def edit_everything(template: Template, gpu_type) -> None:
    """What an admin may change meanwhile: every field the objects are made from."""
    template.image = "registry.example.org/other/image:2"
    template.command = ["sh", "-c", "echo edited"]
    template.args = ["--edited"]
    template.env = {"EDITED": "yes", "TEMPLATE_VAR": "after"}
    template.token_env = "OTHER_TOKEN" if template.token_env else ""
    template.allow_root = not template.allow_root
    template.run_as_user = 4242
    template.save()
    gpu_type.node_selector = {"gputype": "t4"}
    gpu_type.resource_name = "nvidia.com/mig-1g.10gb"
    gpu_type.save()


def pod_spec(kind: str, workload: Workload) -> dict:
    obj = Kube().get(kind, workload.object_name, workload.tenant.namespace)
    assert obj is not None, f"no {kind} {workload.object_name}"
    return obj["spec"]["template"]["spec"]


def container(spec: dict, name: str = CONTAINER_NAME) -> dict:
    return next(c for c in spec["containers"] if c["name"] == name)


def plain_env(app: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in app.get("env") or [] if "value" in e}


def test_a_service_is_created_as_admitted_after_its_template_and_gpu_type_changed(
        tenants, owner, gpu_types, cluster):
    jupyter = Template.objects.get(slug="jupyter")
    jupyter.env = {"TEMPLATE_VAR": "before"}
    jupyter.save()
    original = {"image": jupyter.image, "args": list(jupyter.args),
                "run_as_user": jupyter.run_as_user}
    assert not jupyter.allow_root and original["run_as_user"] == 1000
    assert jupyter.token_env == "JUPYTER_TOKEN"
    a100 = gpu_types["a100"]
    workload = admitted(tenants(), owner, jupyter, a100, env={"MINE": "x"})
    assert workload.launch_spec["node_selector"] == {"gputype": "a100"}

    edit_everything(jupyter, a100)
    workload_create_task(workload.pk)

    workload.refresh_from_db()
    assert workload.state == Workload.State.PENDING, workload.reason
    spec = pod_spec("Deployment", workload)
    app = container(spec)
    assert app["image"] == original["image"]
    assert app["args"] == original["args"]
    assert not app.get("command")  # the template had none; the edit gave it one
    assert plain_env(app) == {"TEMPLATE_VAR": "before", "MINE": "x"}
    secret_vars = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
                   for e in app["env"] if "valueFrom" in e}
    assert secret_vars == {"JUPYTER_TOKEN": "JUPYTER_TOKEN"}
    security = {**(spec.get("securityContext") or {}), **(app.get("securityContext") or {})}
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 1000
    assert spec["nodeSelector"] == {"gputype": "a100"}
    assert app["resources"]["limits"]["nvidia.com/gpu"] in ("1", 1)
    assert "nvidia.com/mig-1g.10gb" not in app["resources"]["limits"]
    # the proxy in front of it hands the application the token of the variable it was
    # admitted with
    proxy_keys = {e["valueFrom"]["secretKeyRef"]["key"]
                  for c in spec["containers"] if c["name"] != CONTAINER_NAME
                  for e in c.get("env") or [] if "valueFrom" in e}
    assert "JUPYTER_TOKEN" in proxy_keys and "OTHER_TOKEN" not in proxy_keys
    secret = Kube().get("Secret", workload.object_name, workload.tenant.namespace)
    assert "JUPYTER_TOKEN" in secret["data"] and "OTHER_TOKEN" not in secret["data"]


def test_a_batch_job_is_created_as_admitted_after_its_template_and_gpu_type_changed(
        tenants, owner, gpu_types, cluster):
    custom = Template.objects.get(slug="custom")
    custom.command = ["echo", "before"]  # a launch without a command of its own runs this
    custom.env = {"TEMPLATE_VAR": "before"}
    custom.save()
    assert not custom.allow_root
    v100 = gpu_types["v100"]
    workload = admitted(tenants(), owner, custom, v100, image="busybox:1.36",
                        args=["one", "two"], max_runtime_minutes=30)

    edit_everything(custom, v100)
    workload_create_task(workload.pk)

    workload.refresh_from_db()
    assert workload.state == Workload.State.PENDING, workload.reason
    job = Kube().get("Job", workload.object_name, workload.tenant.namespace)
    assert job["spec"]["activeDeadlineSeconds"] == 30 * 60
    spec = job["spec"]["template"]["spec"]
    app = container(spec)
    assert app["image"] == "busybox:1.36"
    assert app["command"] == ["echo", "before"]
    assert app["args"] == ["one", "two"]
    assert plain_env(app) == {"TEMPLATE_VAR": "before"}
    security = {**(spec.get("securityContext") or {}), **(app.get("securityContext") or {})}
    assert security["runAsNonRoot"] is True and security.get("runAsUser") != 4242
    assert spec["nodeSelector"] == {"gputype": "v100"}
    assert set(app["resources"]["limits"]) >= {"nvidia.com/gpu"}
    assert "nvidia.com/mig-1g.10gb" not in app["resources"]["limits"]


def test_the_frozen_spec_holds_no_secret(tenants, owner, gpu_types, cluster):
    jupyter = Template.objects.get(slug="jupyter")
    workload = admitted(tenants(), owner, jupyter, gpu_types["a100"])
    assert workload.access_token and workload.launch_spec["token_env"] == "JUPYTER_TOKEN"
    assert workload.access_token not in repr(workload.launch_spec)


def test_a_workload_admitted_without_a_spec_is_frozen_once(tenants, owner, gpu_types):
    """A launch admitted by an older portal during an upgrade: frozen from the rows as they
    are when its create task first claims it, and not again after."""
    custom = Template.objects.get(slug="custom")
    workload = admitted(tenants(), owner, custom, gpu_types["a100"], image="busybox:1.36")
    Workload.objects.filter(pk=workload.pk).update(launch_spec={})
    workload.refresh_from_db()
    custom.env = {"SEEN": "at the first claim"}
    custom.save()
    workload_launch_spec_freeze(workload=workload)
    assert workload.launch_spec["env"] == [["SEEN", "at the first claim"]]
    custom.env = {"SEEN": "later"}
    custom.save()
    again = Workload.objects.get(pk=workload.pk)
    workload_launch_spec_freeze(workload=again)
    assert again.launch_spec["env"] == [["SEEN", "at the first claim"]]
    assert launch_spec_from_rows(again)["env"] == [["SEEN", "later"]]


def test_the_migration_backfills_what_is_not_finished(tenants, owner, gpu_types):
    """Migration 0010's backfill (its own frozen copy of the resolver) agrees with
    launch_spec_from_rows, and leaves finished workloads alone."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("workloads.migrations.0010_workload_launch_spec")
    jupyter = Template.objects.get(slug="jupyter")
    tenant = tenants()
    live = admitted(tenant, owner, jupyter, gpu_types["a100"], env={"MINE": "x"})
    done = admitted(tenant, owner, jupyter, gpu_types["a100"], name="done")
    Workload.objects.filter(pk__in=[live.pk, done.pk]).update(launch_spec={})
    Workload.objects.filter(pk=done.pk).update(state=Workload.State.SUCCEEDED)

    migration.backfill(apps, None)

    live.refresh_from_db()
    done.refresh_from_db()
    # version 1's keys (2 added how a service is reached, 3 the nodes and the engine, 4 SSH,
    # 5 the nodes to avoid, 6 the secrets)
    later = ("exposure", "host", "nodes", "engine", "ssh", "entrypoint", "avoid_nodes",
             "secrets")
    now = {k: v for k, v in launch_spec_from_rows(live).items() if k not in later}
    assert live.launch_spec == {**now, "version": 1}
    assert live.launch_spec["env"] == [["MINE", "x"]]
    assert done.launch_spec == {}
