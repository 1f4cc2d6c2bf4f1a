"""The researcher's, the viewer's and the admin's journeys in a real browser (Chromium), against
the live portal with the real Keystone, PostgreSQL, Redis, Celery workers and kubesim."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from storage.models import Volume
from storage.services import dataset_create
from tenants.models import Tenant
from tests.support.waiting import eventually
from workloads.models import Workload

from .conftest import STATE_TIMEOUT_MS, switch_project

# serialized_rollback: the templates the migrations seed are there in every journey
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_researcher_launches_jupyter_watches_it_run_opens_and_stops_it(page, log_in,
                                                                       vision_lab):
    log_in(page, "researcher")
    switch_project(page, "nlp-lab")
    switch_project(page, "vision-lab")
    page.get_by_role("navigation", name="Project pages").get_by_role("link", name="Launch").click()
    page.get_by_label("Name").fill("My notebook")
    page.get_by_role("radio", name=re.compile("^Jupyter")).check()
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_label("GPUs", exact=True).fill("1")
    page.get_by_role("button", name="Launch", exact=True).click()

    expect(page.get_by_role("status").filter(has_text="was submitted")).to_contain_text(
        "My notebook was submitted: 1× a100, Jupyter.")
    page.evaluate("window.stillThisPage = true")  # gone if the page were reloaded
    state = page.locator("#workload-state .state")
    expect(state).to_have_text("running", timeout=STATE_TIMEOUT_MS)
    assert page.evaluate("window.stillThisPage") is True

    workload = Workload.objects.get(tenant=vision_lab, name="My notebook")
    open_link = page.get_by_role("link", name=re.compile("^Open"))
    expect(open_link).to_have_attribute("href", workload.url)
    # the address is kubesim's (no notebook listens there): the browser's request is the proof
    page.context.route(f"http://{workload.address}*/**", lambda route: route.abort())
    with page.context.expect_event("request", lambda r: r.url.startswith(
            f"http://{workload.address}")) as request:
        open_link.click()
    assert request.value.url == workload.url

    page.locator("summary", has_text="Stop").click()  # the confirmation
    page.get_by_role("button", name="Stop My notebook").click()
    expect(page.get_by_role("status").filter(has_text="is stopping")).to_be_visible()
    expect(state).to_have_text("stopped", timeout=STATE_TIMEOUT_MS)
    expect(open_link).to_have_count(0)


def test_a_refused_launch_shows_why_and_keeps_the_fields(page, log_in, vision_lab):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("Too big")
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_label("GPUs", exact=True).fill("5")
    expect(page.locator("#launch-check")).to_contain_text("Beyond the quota")
    # while the server decides, the button says so and cannot be pressed twice: seen on a
    # submission the page itself holds back (a listener after the portal's own)
    page.evaluate("""document.getElementById('launch-form').addEventListener(
        'submit', (event) => event.preventDefault(), {once: true})""")
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page.get_by_role("button", name="Launching…")).to_be_disabled()
    page.evaluate("document.getElementById('launch-form').requestSubmit()")

    expect(page.get_by_role("alert")).to_contain_text("Not launched:")
    expect(page.get_by_role("alert")).to_contain_text("a100")
    expect(page.get_by_label("Name")).to_have_value("Too big")
    expect(page.get_by_label("GPUs", exact=True)).to_have_value("5")
    expect(page.get_by_label("GPU type")).to_have_value("a100")
    assert not Workload.objects.filter(name="Too big").exists()


def test_a_check_that_answers_while_launch_is_pressed_does_not_swallow_the_click(
        page, log_in, vision_lab):
    """The fit check runs when the GPU count loses focus, that is on the press of Launch; its
    answer grows the check above the button. Pressed near its top edge, the button moved down
    would leave the release above it and the launch would silently not be sent."""
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("Pressed")
    check = page.locator("#launch-check")
    expect(check).to_contain_text("of 16 a100")
    expect(check).not_to_contain_text("Beyond the quota")
    launch = page.get_by_role("button", name="Launch", exact=True)
    launch.scroll_into_view_if_needed()
    box = launch.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 2)
    page.mouse.down()
    # the GPU count changes as the press begins; its check has answered before the release
    page.evaluate("""() => new Promise((answered) => {
        const check = document.getElementById('launch-check');
        check.addEventListener('htmx:afterRequest', () => answered(), {once: true});
        const count = document.getElementById('id_gpu_count');
        count.value = '5';
        count.dispatchEvent(new Event('change', {bubbles: true}));
    })""")
    page.mouse.up()
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("Not launched:")
    expect(refusal).to_contain_text("4 a100 GPUs")
    expect(check).to_contain_text("Beyond the quota")
    assert not Workload.objects.filter(name="Pressed").exists()


def test_a_check_held_during_a_press_is_shown_when_the_press_ends_without_a_click(
        page, log_in, vision_lab):
    """Pressed on Launch, then dragged away and released beside it: no click, and the check
    that answered meanwhile is shown then, the count marked as the check judges it."""
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    check = page.locator("#launch-check")
    expect(check).to_contain_text("of 16 a100")
    launch = page.get_by_role("button", name="Launch", exact=True)
    launch.scroll_into_view_if_needed()
    box = launch.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.evaluate("""() => new Promise((answered) => {
        document.getElementById('launch-check').addEventListener(
            'htmx:afterRequest', () => answered(), {once: true});
        const count = document.getElementById('id_gpu_count');
        count.value = '9';
        count.dispatchEvent(new Event('change', {bubbles: true}));
    })""")
    expect(check).not_to_contain_text("Can never run")  # held while pressed
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] - 200)
    page.mouse.up()
    expect(check).to_contain_text(
        "Can never run: No a100 node has 9 GPUs (the largest has 8); this request can never run.")
    expect(page.get_by_label("GPUs", exact=True)).to_have_attribute("aria-invalid", "true")
    assert page.url.endswith("/workloads/new/") and not Workload.objects.exists()


def test_a_request_that_can_never_fit_is_flagged_before_submitting(page, log_in, vision_lab):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    launch_url = page.url
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_label("GPUs", exact=True).fill("9")  # the largest a100 node has 8
    check = page.locator("#launch-check")
    expect(check).to_contain_text(
        "Can never run: No a100 node has 9 GPUs (the largest has 8); this request can never run.")
    expect(page.get_by_label("GPUs", exact=True)).to_have_attribute("aria-invalid", "true")
    # back to a request that fits: the flag goes
    page.get_by_label("GPUs", exact=True).fill("1")
    expect(check).not_to_contain_text("Can never run")
    expect(page.get_by_label("GPUs", exact=True)).not_to_have_attribute("aria-invalid", "true")
    assert page.url == launch_url and not Workload.objects.exists()


def test_a_batch_job_runs_to_succeeded_and_its_logs_are_visible(page, log_in, vision_lab):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("train")
    page.get_by_role("radio", name=re.compile("^Custom")).check()
    # htmx swaps in the custom image's fields
    image = page.get_by_role("textbox", name="Image")
    expect(image).to_be_visible()
    page.get_by_label("Kind").select_option("batch")
    image.fill("python:3.12-slim")
    page.get_by_role("textbox", name="Command").fill("python\ntrain.py")
    page.get_by_role("textbox", name="Environment").fill("KUBESIM_RUN_SECONDS=2")
    page.get_by_label("GPU type").select_option("v100")
    page.get_by_role("button", name="Launch", exact=True).click()

    state = page.locator("#workload-state .state")
    expect(state).to_have_text("succeeded", timeout=STATE_TIMEOUT_MS)
    logs = page.locator("#workload-logs")
    expect(logs).to_be_visible()
    expect(logs).to_contain_text("loss=")


def test_a_viewer_sees_the_workloads_but_no_launch_or_stop_controls(page, log_in, vision_lab,
                                                                    project_token):
    from tests.workloads.api_calls import launch

    response = launch({"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")},
                      {"name": "shared notebook", "template": "jupyter", "gpu_type": "a100",
                       "gpu_count": 1})
    assert response.status_code == 201, response.json()
    log_in(page, "viewer")
    expect(page.get_by_role("heading", level=1)).to_have_text("vision-lab")
    page.get_by_role("navigation", name="Project pages").get_by_role(
        "link", name="Workloads").click()
    row = page.locator("#workloads-table tbody tr", has_text="shared notebook")
    expect(row.locator(".state")).to_have_text("running", timeout=STATE_TIMEOUT_MS)
    expect(row).to_contain_text("researcher")
    expect(page.get_by_text("Your role lets you see this project's workloads")).to_be_visible()
    for name in ("Launch", "Launch a workload"):
        expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
    expect(page.locator("summary", has_text="Stop")).to_have_count(0)
    expect(page.locator("summary", has_text="Delete")).to_have_count(0)
    row.get_by_role("link", name="shared notebook", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("shared notebook")
    expect(page.locator("#workload-state .state")).to_have_text("running")
    expect(page.locator("summary", has_text="Stop")).to_have_count(0)


def test_the_admin_changes_a_quota_inline_and_the_researcher_sees_what_is_left(
        browser, browser_context_args, page, log_in, vision_lab):
    log_in(page, "admin")
    page.get_by_role("navigation", name="Administration").get_by_role(
        "link", name="Tenants").click()
    row = page.locator(f"#tenant-{vision_lab.pk}")
    expect(row.locator('[data-gpu-type="a100"]')).to_have_text("0 / 4")
    row.get_by_role("link", name="Edit").click()
    page.get_by_label("a100 quota").fill("2")
    page.locator(f"#tenant-{vision_lab.pk}").get_by_role("button", name="Save").click()
    expect(row.locator('[data-gpu-type="a100"]')).to_have_text("0 / 2")
    expect(row.get_by_role("link", name="Edit")).to_be_visible()

    researcher = browser.new_context(**browser_context_args).new_page()
    log_in(researcher, "researcher")
    switch_project(researcher, "vision-lab")
    researcher.get_by_role("link", name="Launch a workload").click()
    expect(researcher.get_by_label("GPU type").locator("option[value=a100]")).to_contain_text(
        "quota: 2 more")
    researcher.get_by_label("GPU type").select_option("a100")
    expect(researcher.locator("#launch-check")).to_contain_text(
        "your project may use 2 more")
    researcher.context.close()


def test_the_gpu_usage_chart_draws(page, log_in, vision_lab):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("charted")
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page.locator("#workload-state .state")).to_have_text("running",
                                                                timeout=STATE_TIMEOUT_MS)
    chart = page.locator("#gpu-chart")
    # samples come with the scrapes (every 3 s here); the chart asks again until it has them
    expect(page.locator("[data-chart-summary]")).to_contain_text("mean utilisation",
                                                                 timeout=STATE_TIMEOUT_MS)
    expect(chart.locator("canvas")).to_be_visible()
    points = page.evaluate("document.querySelector('#gpu-chart').gpuChart.plot.data[0].length")
    assert points >= 1
    box = chart.locator("canvas").bounding_box()
    assert box["width"] > 300 and box["height"] > 150


@pytest.fixture
def volume_files(settings, tmp_path):
    """The project's file server, the real gpu-portal-files on loopback (tests/support/files.py)
    with a folder for each claim a journey makes (`mount(claim)`: what the pod's mount of it
    would be); the portal made to reach it there."""
    from files.server import file_server_forget, token_for
    from tests.support.files import FileServerProcess

    tenant = Tenant.objects.get(name="vision-lab")
    root = tmp_path / "volumes"
    root.mkdir()
    server = FileServerProcess(root, token_for(tenant.namespace), tmp_path)
    try:
        settings.PORTAL_FILES_URL = server.url
        settings.PORTAL_FILES_START_SECONDS = 30
        file_server_forget(tenant.namespace)  # what an earlier test left in Redis
        yield root
    finally:
        status = server.stop()
    assert status == 0, server.log()


def test_researcher_makes_a_volume_uploads_a_file_and_launches_a_notebook_with_it_and_a_dataset(
        page, log_in, vision_lab, volume_files, tmp_path):
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("navigation", name="Project pages").get_by_role(
        "link", name="Volumes").click()
    page.get_by_label("Name").fill("data")
    page.get_by_label("Size (GiB)").fill("1")
    page.get_by_role("button", name="Make the volume").click()
    volume = Volume.objects.get(tenant=vision_lab, name="data")
    row = page.locator(f"#volume-{volume.pk}")
    # the page the form's redirect draws, before any reload: a reload while that navigation is
    # under way detaches the page ("Not attached to an active page")
    expect(row).to_be_visible()

    def bound() -> bool:  # the page shows the state it was drawn with: drawn again until bound
        page.reload()
        return row.locator(".state").inner_text() == "bound"

    eventually(bound, timeout=STATE_TIMEOUT_MS / 1000, message="the volume was not bound")
    (volume_files / Volume.objects.get(pk=volume.pk).claim_name).mkdir()  # the pod's mount

    row.get_by_role("link", name="Files of data").click()
    (tmp_path / "train.csv").write_text("epoch,loss\n1,0.9\n")
    page.get_by_label("Files", exact=True).set_input_files(tmp_path / "train.csv")
    page.get_by_role("button", name="Upload", exact=True).click()
    # the page reloads once the file is there
    expect(page.locator("#files-table")).to_contain_text("train.csv", timeout=STATE_TIMEOUT_MS)

    imagenet = dataset_create(user=None, name="imagenet", description="ILSVRC 2012",
                              size_gib=150, kind="nfs",
                              source={"server": "nfs.example.org", "path": "/exports/imagenet"},
                              open_to_all=False, tenants=[vision_lab])
    page.get_by_role("navigation", name="Project pages").get_by_role("link", name="Launch").click()
    page.get_by_label("Name").fill("With data")
    page.get_by_role("radio", name=re.compile("^Jupyter")).check()
    page.get_by_label("GPU type").select_option("a100")
    page.get_by_label("GPUs", exact=True).fill("1")
    page.get_by_role("textbox", name=re.compile("^Volumes")).fill("data:/data")
    # and a dataset an admin published to the project, read-only at /datasets/imagenet
    page.locator(f"#id_dataset_{imagenet.pk}").check()
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page.locator("#workload-state .state")).to_have_text("running",
                                                               timeout=STATE_TIMEOUT_MS)
    mounts = page.locator("#workload-mounts")
    expect(mounts).to_contain_text("data at /data")
    expect(mounts).to_contain_text("dataset imagenet at /datasets/imagenet (read-only)")
    # the mounted volume's files, from the workload's page
    mounts.get_by_role("link", name="data").click()
    expect(page.locator("#files-table")).to_contain_text("train.csv")
