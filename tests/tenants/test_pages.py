"""The admin's tenant pages: table, inline quota edit (htmx), detail (the audit page:
tests/audit/test_pages.py)."""

import re

import pytest

from audit.models import AuditRecord
from tenants.models import Quota, Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(login, gpu_types, cluster):
    login("researcher")  # records vision-lab and nlp-lab as tenants
    return login("admin")


def test_non_admins_cannot_open_the_admin_pages(login, gpu_types, cluster):
    client = login("lead")
    assert client.get("/admin/tenants/").status_code == 403
    tenant = Tenant.objects.get(name="vision-lab")
    assert client.get(f"/admin/tenants/{tenant.pk}/").status_code == 403
    assert client.post(f"/admin/tenants/{tenant.pk}/row/", {"gpus_total": "9"},
                       HTTP_HX_REQUEST="true").status_code == 403
    assert Quota.objects.get(tenant=tenant).gpus_total == 2


def test_the_table_shows_quota_and_use_per_gpu_type(admin_client):
    page = admin_client.get("/admin/tenants/").content.decode()
    assert "vision-lab" in page and "nlp-lab" in page
    row = re.search(r'<tr id="tenant-\d+">\s*<th scope="row"><a [^>]*>vision-lab</a>.*?</tr>',
                    page, re.S).group(0)
    assert re.search(r'data-gpu-type="a100">0 / 1<', row)
    assert re.search(r'data-total>0 / 2<', row)
    # the project id beside the name: names can look alike
    project_id = Tenant.objects.get(name="vision-lab").keystone_project_id
    assert f'title="Keystone project {project_id}">{project_id[:8]}</code>' in row


def test_search_and_sort(admin_client):
    page = admin_client.get("/admin/tenants/?q=nlp").content.decode()
    assert "nlp-lab" in page and "vision-lab" not in page
    page = admin_client.get("/admin/tenants/?ordering=-name").content.decode()
    assert page.index("vision-lab") < page.index("nlp-lab")


def test_inline_edit_saves_and_returns_the_row(admin_client):
    tenant = Tenant.objects.get(name="nlp-lab")
    form = admin_client.get(f"/admin/tenants/{tenant.pk}/row/?edit=1", HTTP_HX_REQUEST="true")
    assert 'name="gpus_total"' in form.content.decode()
    saved = admin_client.post(f"/admin/tenants/{tenant.pk}/row/",
                              {"gpus_total": "6", "gpu_a100": "2", "gpu_t4": "4",
                               "allow_over_capacity_present": "1"}, HTTP_HX_REQUEST="true")
    body = saved.content.decode()
    assert saved.status_code == 200
    assert 'data-total>0 / 6<' in body and 'data-gpu-type="t4">0 / 4<' in body
    quota = Quota.objects.get(tenant=tenant)
    assert quota.gpus_total == 6 and quota.gpus_by_type()["t4"] == 4
    assert AuditRecord.objects.filter(tenant=tenant, action="quota.update",
                                      actor_name="admin").count() == 1


def test_inline_edit_errors_keep_what_was_typed(admin_client):
    tenant = Tenant.objects.get(name="nlp-lab")
    response = admin_client.post(f"/admin/tenants/{tenant.pk}/row/",
                                 {"gpus_total": "-3", "gpu_t4": "2",
                                  "allow_over_capacity_present": "1"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "gpus_total:" in body and 'role="alert"' in body
    assert 'name="gpus_total" type="number" min="0" value="-3"' in body
    assert 'name="gpu_t4" type="number" min="0" inputmode="numeric" value="2"' in body
    assert Quota.objects.get(tenant=tenant).gpus_total == 2  # nothing changed


def test_the_detail_page_shows_status_members_and_audit(admin_client):
    tenant = Tenant.objects.get(name="vision-lab")
    page = admin_client.get(f"/admin/tenants/{tenant.pk}/").content.decode()
    assert tenant.namespace in page
    assert 'id="tenant-state"' in page
    # members and roles as Keystone reports them (effective, implied roles included)
    for user, role in (("researcher", "member"), ("lead", "manager"), ("viewer", "reader")):
        assert re.search(rf"<td>{user}</td><td>{role}</td>", page), (user, role)
    assert "tenant.create" in page


def test_the_detail_form_refuses_above_capacity_unless_intended(admin_client):
    tenant = Tenant.objects.get(name="vision-lab")
    page = admin_client.post(f"/admin/tenants/{tenant.pk}/", {
        "gpus_total": "100", "allow_over_capacity_present": "1"}).content.decode()
    assert "The cluster has 28 GPUs in all" in page
    assert 'value="100"' in page
    assert Quota.objects.get(tenant=tenant).gpus_total == 2
    response = admin_client.post(f"/admin/tenants/{tenant.pk}/", {
        "gpus_total": "100", "allow_over_capacity_present": "1", "allow_over_capacity": "on"})
    assert response.status_code == 302
    assert Quota.objects.get(tenant=tenant).gpus_total == 100


def test_the_detail_form_sets_the_queue_limits_and_says_queueing_is_off(admin_client):
    tenant = Tenant.objects.get(name="vision-lab")
    page = admin_client.get(f"/admin/tenants/{tenant.pk}/").content.decode()
    assert 'id="queueing"' in page and "off: the cluster runs no Kueue" in page  # kubesim
    assert 'name="gpu_borrowing_limit"' in page and 'value=""' in page  # no limit: empty
    response = admin_client.post(f"/admin/tenants/{tenant.pk}/", {
        "gpu_borrowing_limit": "3", "gpu_lending_limit": "", "fair_share_weight": "2"})
    assert response.status_code == 302, re.findall(r'<p>(.*?)</p>', response.content.decode())
    quota = Quota.objects.get(tenant=tenant)
    assert (quota.gpu_borrowing_limit, quota.gpu_lending_limit, str(quota.fair_share_weight)) \
        == (3, None, "2.00")
    refused = admin_client.post(f"/admin/tenants/{tenant.pk}/", {"fair_share_weight": "0"})
    assert refused.status_code == 200 and 'aria-invalid="true"' in refused.content.decode()
    assert str(Quota.objects.get(tenant=tenant).fair_share_weight) == "2.00"


def test_delete_needs_the_name_and_can_be_undone(admin_client):
    tenant = Tenant.objects.get(name="nlp-lab")
    admin_client.post(f"/admin/tenants/{tenant.pk}/delete/", {"confirm": "wrong"})
    assert Tenant.objects.get(pk=tenant.pk).state != Tenant.State.DELETING
    admin_client.post(f"/admin/tenants/{tenant.pk}/delete/", {"confirm": "nlp-lab"})
    assert Tenant.objects.get(pk=tenant.pk).state == Tenant.State.DELETING
    admin_client.post(f"/admin/tenants/{tenant.pk}/restore/")
    assert Tenant.objects.get(pk=tenant.pk).state == Tenant.State.NEW
    actions = list(AuditRecord.objects.filter(tenant=tenant).values_list("action", flat=True))
    assert {"tenant.delete", "tenant.restore"} <= set(actions)


def test_every_admin_page_that_names_a_project_shows_its_id_beside_it(admin_client):
    """Names can look alike (vision-lab, vision‐lab: a tenant recorded before such names were
    refused): the budgets, the calendar's allowances and the audit trail show the Keystone
    project id beside each project's name, as the tenants table does."""
    from audit.services import audit_record

    vision = Tenant.objects.get(name="vision-lab")
    audit_record(actor=None, action="tenant.probe", tenant=vision, target=vision.namespace)
    shown = (f'title="Keystone project {vision.keystone_project_id}">'
             f'{vision.keystone_project_id[:8]}</code>')
    for url in ("/admin/budgets/", "/admin/calendar/", "/admin/audit/",
                f"/admin/tenants/{vision.pk}/"):
        page = admin_client.get(url).content.decode()
        assert "vision-lab" in page and shown in page, url
