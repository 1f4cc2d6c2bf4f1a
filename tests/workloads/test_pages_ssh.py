"""The pages for SSH into workloads: the launch page's SSH box (for templates that
offer SSH, ticked where it can hold), a launch from the page with the box ticked or not, its
refusal shown under the box, and the workload page's SSH panel with the command to paste, for
those the project's rule lets in. Real Keystone logins, PostgreSQL and kubesim over HTTP."""

import re

import pytest

from access.services import service_access_update
from tests.support.pages import field_error, launch_form, make_workload
from workloads.models import Workload

pytestmark = pytest.mark.django_db


HINT = ("Reach this workload with ssh, scp, VS Code Remote-SSH or JetBrains Gateway through the "
        "portal's login (<code>gpuctl ssh ID</code>).")
CUSTOM_SERVICE = {"template": "custom", "shown_template": "custom", "kind": "service",
                  "port": "8080", "image": "docker.io/library/python:3.12",
                  "command": "python\n-m\nhttp.server\n8080"}


def ssh_box(page: str) -> str | None:
    """The SSH checkbox's tag, None where the page has none."""
    match = re.search(r'<input type="checkbox" id="id_ssh" name="ssh"[^>]*>', page)
    return match.group(0) if match else None


def ssh_panel(page: str) -> str | None:
    match = re.search(r'<section class="card" id="workload-ssh">(.*?)</section>', page, re.S)
    return match.group(1) if match else None


def test_the_ssh_box_is_there_for_the_templates_that_offer_ssh(researcher):
    for slug, ticked in (("jupyter", True), ("code-server", True), ("custom", False)):
        page = researcher.get(f"/workloads/new/?template={slug}").content.decode()
        box = ssh_box(page)
        assert box is not None, slug
        # ticked where SSH can hold: a service (the custom template starts as a batch job)
        assert (" checked" in box) is ticked, (slug, box)
        assert 'aria-describedby="hint-ssh"' in box and " disabled" not in box
        assert '<label class="inline-check" for="id_ssh">' in page
        assert HINT in page
        assert ("Needs a command; a batch job with SSH" in page) is (slug == "custom")
    for slug in ("digits", "tensorboard"):
        page = researcher.get(f"/workloads/new/?template={slug}").content.decode()
        assert ssh_box(page) is None and 'name="ssh"' not in page, slug


def test_changing_the_template_brings_the_ssh_box_ticked_or_takes_it_away(researcher):
    """htmx: the template's fields come with the box in the new template's default."""
    fields = launch_form(template="code-server", shown_template="digits")
    partial = researcher.post("/workloads/new/fields/", fields,
                              HTTP_HX_REQUEST="true").content.decode()
    assert " checked" in ssh_box(partial)
    partial = researcher.post("/workloads/new/fields/", launch_form(template="tensorboard",
                                                                    shown_template="jupyter",
                                                                    ssh="on"),
                              HTTP_HX_REQUEST="true").content.decode()
    assert ssh_box(partial) is None
    # the same template again: what was chosen stays (unticked)
    partial = researcher.post("/workloads/new/fields/", launch_form(),
                              HTTP_HX_REQUEST="true").content.decode()
    assert " checked" not in ssh_box(partial)


def test_a_launch_from_the_page_has_ssh_as_the_box_says(researcher, vision_lab):
    ticked = researcher.post("/workloads/new/", launch_form(name="with ssh", ssh="on"))
    assert ticked.status_code == 302, ticked.content.decode()[:3000]
    unticked = researcher.post("/workloads/new/", launch_form(name="without ssh"))
    assert unticked.status_code == 302, unticked.content.decode()[:3000]
    with_ssh = Workload.objects.get(tenant=vision_lab, name="with ssh")
    without = Workload.objects.get(tenant=vision_lab, name="without ssh")
    assert with_ssh.ssh is True and with_ssh.launch_spec["ssh"] is True
    assert without.ssh is False and without.launch_spec["ssh"] is False
    # a custom service with a command may have it too
    custom = researcher.post("/workloads/new/", launch_form(name="my server", ssh="on",
                                                            **CUSTOM_SERVICE))
    assert custom.status_code == 302, custom.content.decode()[:3000]
    assert Workload.objects.get(tenant=vision_lab, name="my server").ssh is True


def test_a_refused_ssh_is_shown_under_the_box_with_the_box_kept(researcher, vision_lab):
    # a batch job without a command: the program SSH would wrap is not known
    batch = {**CUSTOM_SERVICE, "kind": "batch", "port": "", "command": ""}
    response = researcher.post("/workloads/new/", launch_form(name="job", ssh="on", **batch))
    assert response.status_code == 400
    page = response.content.decode()
    assert "give the command" in field_error(page, "ssh")
    box = ssh_box(page)
    assert " checked" in box and 'aria-invalid="true"' in box and "err-ssh" in box
    assert '<a href="#id_ssh">SSH</a>:' in page  # in the summary at the top, linked to the box
    # a custom service without a command: the program SSH wraps is not known
    no_command = {**CUSTOM_SERVICE, "command": ""}
    page = researcher.post("/workloads/new/", launch_form(name="srv", ssh="on", **no_command)
                           ).content.decode()
    assert "give the command" in field_error(page, "ssh")
    assert not Workload.objects.filter(tenant=vision_lab).exists()


def test_with_ssh_turned_off_for_the_project_the_box_says_so(researcher, vision_lab):
    service_access_update(tenant=vision_lab, actor=None, ssh_enabled=False)
    page = researcher.get("/workloads/new/?template=jupyter").content.decode()
    box = ssh_box(page)
    assert " disabled" in box and " checked" not in box
    assert "SSH is turned off for vision-lab; an admin can turn it on." in page
    # a disabled box is not sent: the launch goes ahead without SSH
    response = researcher.post("/workloads/new/", launch_form(name="plain"))
    assert response.status_code == 302
    assert Workload.objects.get(tenant=vision_lab, name="plain").ssh is False
    # sent anyway (an old page), the launch is refused under the box
    page = researcher.post("/workloads/new/", launch_form(name="forced", ssh="on")
                           ).content.decode()
    assert "SSH is turned off for vision-lab" in field_error(page, "ssh")


# --- the workload page ------------------------------------------------------------------------

def test_a_running_workload_with_ssh_shows_the_command_to_paste(researcher, vision_lab):
    workload = make_workload(vision_lab, "researcher", name="lab", ssh=True)
    n = workload.pk
    for url in (f"/workloads/{n}/", f"/workloads/{n}/live/"):
        panel = ssh_panel(researcher.get(url, HTTP_HX_REQUEST="true").content.decode())
        assert panel is not None, url
        assert f'<code id="ssh-command">gpuctl ssh {n}</code>' in panel
        assert '<button type="button" class="copy" data-copy="ssh-command"' in panel
        assert f"gpuctl ssh-config {n} --write ~/.ssh/config" in panel
        assert f"<code>ssh gpu-portal-{n}</code>" in panel
        assert f"<code>ssh -L 8888:localhost:8888 gpu-portal-{n}</code>" in panel
        assert "VS Code's Remote-SSH" in panel


def test_the_ssh_panel_waits_for_the_workload_and_is_absent_without_ssh(researcher, vision_lab,
                                                                        as_user):
    pending = make_workload(vision_lab, "researcher", name="soon", ssh=True,
                            state=Workload.State.PENDING)
    panel = ssh_panel(researcher.get(f"/workloads/{pending.pk}/").content.decode())
    assert "SSH opens once it runs" in panel and "gpuctl ssh" not in panel
    for workload in (make_workload(vision_lab, "researcher", name="plain"),
                     make_workload(vision_lab, "researcher", name="over", ssh=True,
                                   state=Workload.State.STOPPED)):
        page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
        assert ssh_panel(page) is None and "gpuctl ssh" not in page, workload.name
    # a reader, where the project's rule (members, the default) keeps readers out: no panel
    running = make_workload(vision_lab, "researcher", name="lab", ssh=True)
    page = as_user("viewer").get(f"/workloads/{running.pk}/").content.decode()
    assert "<h1>lab</h1>" in page and ssh_panel(page) is None
    # the rule lets readers open the workload, but a shell and forwarding stay members' rights:
    # the panel says so, without the commands
    service_access_update(tenant=vision_lab, actor=None, who="readers")
    panel = ssh_panel(as_user("viewer").get(f"/workloads/{running.pk}/").content.decode())
    assert "is for the project's members" in panel and "gpuctl ssh" not in panel
    # SSH turned off for the project: the panel says so instead of the commands
    service_access_update(tenant=vision_lab, actor=None, ssh_enabled=False)
    panel = ssh_panel(researcher.get(f"/workloads/{running.pk}/").content.decode())
    assert "SSH is turned off for vision-lab; an admin can turn it on." in panel
    assert "gpuctl ssh" not in panel


def test_a_batch_job_with_a_command_gets_ssh_when_the_box_is_ticked(researcher, vision_lab):
    batch = {**CUSTOM_SERVICE, "kind": "batch", "port": ""}
    response = researcher.post("/workloads/new/", launch_form(name="job", ssh="on", **batch))
    assert response.status_code == 302
    job = Workload.objects.get(tenant=vision_lab, name="job")
    assert job.kind == "batch" and job.ssh
    # left unticked, a batch job has none (its default: it would hold an address)
    response = researcher.post("/workloads/new/", launch_form(name="job2", **batch))
    assert response.status_code == 302
    assert Workload.objects.get(tenant=vision_lab, name="job2").ssh is False
