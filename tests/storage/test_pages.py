"""The volumes page and the launch form's volumes: a member makes a volume there and sees its
state; a reader sees the project's and no form; a launch from the form mounts a volume by its
name, and the workload's claim is made and mounted in its pod (kubesim, the tasks inline)."""

from __future__ import annotations

import pytest
from django.test import TestCase

from kube.client import Kube
from storage.models import StorageClass, Volume
from tests.support.pages import launch_form
from tests.support.waiting import eventually
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def offered(db):
    StorageClass.objects.create(name="standard", description="fast SSD", expandable=True,
                                is_default=True)


def test_a_member_makes_a_volume_on_the_page_and_sees_it(researcher, vision_lab):
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = researcher.post("/volumes/new/", {"name": "datasets", "size_gib": "20",
                                                      "scope": "user", "storage_class": ""})
    assert response.status_code == 302 and response.url == "/volumes/"
    volume = Volume.objects.get(tenant=vision_lab)
    page = researcher.get("/volumes/").content.decode()
    assert f'<tr id="volume-{volume.pk}">' in page and "datasets" in page
    assert '<span class="state state-pending">pending</span>' in page
    assert "20 of 500 GiB and 1 of 10 volumes" in page
    assert 'action="/volumes/new/"' in page and "fast SSD" in page
    # a project volume is the managers': refused with the reason, nothing made
    refused = researcher.post("/volumes/new/", {"name": "shared", "size_gib": "1",
                                                "scope": "project"})
    assert refused.status_code == 403
    assert "Only the project&#x27;s managers make project volumes." in refused.content.decode()
    assert Volume.objects.count() == 1


def test_a_reader_sees_the_projects_volumes_and_no_form(vision_lab, as_user, researcher):
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert as_user("lead").post("/volumes/new/", {
            "name": "shared", "size_gib": "5", "scope": "project"}).status_code == 302
    page = as_user("viewer").get("/volumes/").content.decode()
    assert "shared" in page and 'action="/volumes/new/"' not in page
    assert "/grow/" not in page  # nothing of it is the reader's to change


def test_a_launch_from_the_form_mounts_a_volume_by_name_in_its_pod(researcher, vision_lab,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        researcher.post("/volumes/new/", {"name": "datasets", "size_gib": "5", "scope": "user"})
        response = researcher.post("/workloads/new/", launch_form(
            name="with data", mounts="datasets:/data:ro\n"))
    assert response.status_code == 302, response.content.decode()[:3000]
    workload = Workload.objects.get(name="with data")
    volume = Volume.objects.get(name="datasets")
    deployment = Kube().get("Deployment", workload.object_name, vision_lab.namespace)
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "mount-0", "mountPath": "/data", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    assert {"name": "mount-0", "persistentVolumeClaim": {"claimName": volume.claim_name,
                                                         "readOnly": True}} in pod["volumes"]
    eventually(lambda: Kube().get("PersistentVolumeClaim", volume.claim_name,
                                  vision_lab.namespace)["status"]["phase"] == "Bound",
               message="the claim is not bound")
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert "/data" in page and "datasets" in page
    bad = researcher.post("/workloads/new/", launch_form(name="bad", mounts="datasets:/etc"))
    assert bad.status_code == 400 and "system path" in bad.content.decode()


def test_an_admin_offers_the_clusters_classes_on_the_storage_page(admin):
    StorageClass.objects.all().delete()
    page = admin.get("/admin/storage-classes/").content.decode()
    assert '<option value="standard"' in page  # kubesim's, read from the cluster
    response = admin.post("/admin/storage-classes/", {
        "name": "standard", "description": "fast SSD", "expandable": "on", "is_default": "on"})
    assert response.status_code == 302
    offered = StorageClass.objects.get()
    assert (offered.name, offered.description, offered.expandable, offered.is_default) == \
        ("standard", "fast SSD", True, True)
    refused = admin.post("/admin/storage-classes/", {"name": "nope"})
    assert refused.status_code == 400 and "no StorageClass" in refused.content.decode()
    assert admin.post("/admin/storage-classes/", {"name": "standard", "withdraw": "1"}
                      ).status_code == 302
    assert not StorageClass.objects.exists()
