"""The datasets' pages: an admin publishes one on /admin/datasets/ (a bad source is the form
again with the reason, nothing made), changes who it is open to and withdraws it; a project's
people see those open to it on /datasets/; the launch form offers them, a launch from it mounts
the ticked one read-only in its pod (kubesim, the tasks inline) and the workload page lists
it."""

from __future__ import annotations

import pytest

from kube.client import Kube
from storage.models import Dataset
from tests.support.pages import launch_form
from tests.support.waiting import eventually
from workloads.models import Workload

pytestmark = pytest.mark.django_db

NFS = {"name": "imagenet", "description": "ILSVRC 2012", "kind": "nfs", "size_gib": "150",
       "server": "nfs.example.org", "path": "/exports/imagenet"}


def test_an_admin_publishes_changes_and_withdraws_a_dataset(admin, vision_lab,
                                                            django_capture_on_commit_callbacks):
    refused = admin.post("/admin/datasets/", {**NFS, "server": "", "projects": [vision_lab.pk]})
    assert refused.status_code == 400 and "server" in refused.content.decode()
    assert not Dataset.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post("/admin/datasets/", {**NFS, "projects": [vision_lab.pk]})
    assert response.status_code == 302, response.content.decode()[:2000]
    dataset = Dataset.objects.get()
    assert (dataset.kind, dataset.source, list(dataset.tenants.all())) == (
        "nfs", {"server": "nfs.example.org", "path": "/exports/imagenet"}, [vision_lab])
    listing = admin.get("/admin/datasets/").content.decode()
    assert f'<tr id="dataset-{dataset.pk}">' in listing and "vision-lab" in listing
    edit = admin.get(f"/admin/datasets/{dataset.pk}/").content.decode()
    assert "nfs.example.org" in edit
    with django_capture_on_commit_callbacks(execute=True):
        changed = admin.post(f"/admin/datasets/{dataset.pk}/", {
            "name": "imagenet", "description": "ILSVRC", "size_gib": "160",
            "open_to_all": "on"})
    assert changed.status_code == 302, changed.content.decode()[:2000]
    dataset.refresh_from_db()
    assert (dataset.description, dataset.size_gib, dataset.open_to_all) == ("ILSVRC", 160, True)
    with django_capture_on_commit_callbacks(execute=True):
        assert admin.post(f"/admin/datasets/{dataset.pk}/delete/").status_code == 302
    assert not Dataset.objects.exists()


def test_a_project_sees_its_datasets_and_launches_with_one(admin, researcher, vision_lab,
                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        admin.post("/admin/datasets/", {**NFS, "projects": [vision_lab.pk]})
        admin.post("/admin/datasets/", {**NFS, "name": "elsewhere", "projects": []})
    dataset = Dataset.objects.get(name="imagenet")
    page = researcher.get("/datasets/").content.decode()
    assert f'<tr id="dataset-{dataset.pk}">' in page and "/datasets/imagenet" in page
    assert "elsewhere" not in page
    form = researcher.get("/workloads/new/").content.decode()
    assert f'name="datasets" value="{dataset.pk}"' in form and "elsewhere" not in form
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher.post("/workloads/new/", launch_form(
            name="with imagenet", datasets=[str(dataset.pk)]))
    assert response.status_code == 302, response.content.decode()[:3000]
    workload = Workload.objects.get(name="with imagenet")
    claim = f"gpu-portal-dataset-{dataset.pk}"
    deployment = eventually(lambda: Kube().get("Deployment", workload.object_name,
                                               vision_lab.namespace),
                            message="the notebook's Deployment was not made")
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "mount-0", "mountPath": "/datasets/imagenet", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    assert {"name": "mount-0", "persistentVolumeClaim": {"claimName": claim,
                                                         "readOnly": True}} in pod["volumes"]
    eventually(lambda: Kube().get("PersistentVolumeClaim", claim,
                                  vision_lab.namespace)["status"]["phase"] == "Bound",
               message="the dataset's claim is not bound")
    shown = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert "dataset" in shown and "imagenet" in shown and "/datasets/imagenet" in shown
