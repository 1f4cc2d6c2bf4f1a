"""A link to a workload of another of the signed-in user's projects answers a page that offers
to switch to that project; the API keeps its 404 for another tenant, and a workload of a project
the user is not in stays a 404 that tells nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from tenants.models import Tenant
from tests.fixtures.factories import make_workload
from workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def nlp_notebook(login, gpu_types) -> Workload:
    login("researcher")  # records vision-lab and nlp-lab
    login("student")
    return make_workload(Tenant.objects.get(name="nlp-lab"), "student", name="bert notebook",
                         image="x:1", state=Workload.State.PENDING,
                         object_name="wl-{pk}-bert-notebook")


def test_a_link_to_another_of_my_projects_offers_to_switch(nlp_notebook, as_user, keystone):
    researcher = as_user("researcher", "vision-lab")
    path = f"/workloads/{nlp_notebook.pk}/"

    page = researcher.get(path)

    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="other-project"' in text and "nlp-lab" in text
    assert f'name="project_id" value="{keystone.project_ids["nlp-lab"]}"' in text
    assert f'name="next" value="{path}"' in text
    # the switch lands on the workload
    switched = researcher.post("/switch-project/", {"project_id": keystone.project_ids["nlp-lab"],
                                                    "next": path})
    assert switched.status_code == 302 and switched.url == path
    opened = researcher.get(path)
    assert opened.status_code == 200 and "bert notebook" in opened.content.decode()
    assert 'id="other-project"' not in opened.content.decode()


def test_the_api_keeps_its_404_for_another_tenant(nlp_notebook, project_token):
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    assert Client().get(f"/api/v1/workloads/{nlp_notebook.pk}/", **headers).status_code == 404


def test_a_workload_of_a_project_i_am_not_in_stays_404(nlp_notebook, as_user):
    viewer = as_user("viewer", "vision-lab")  # not in nlp-lab
    missing = viewer.get("/workloads/999999/")
    other = viewer.get(f"/workloads/{nlp_notebook.pk}/")
    assert other.status_code == missing.status_code == 404
    assert "nlp-lab" not in other.content.decode()
    assert "bert notebook" not in other.content.decode()


def test_a_deleted_workload_of_my_other_project_is_404(nlp_notebook, as_user):
    from django.utils import timezone

    Workload.objects.filter(pk=nlp_notebook.pk).update(deleted_at=timezone.now())
    researcher = as_user("researcher", "vision-lab")
    assert researcher.get(f"/workloads/{nlp_notebook.pk}/").status_code == 404
