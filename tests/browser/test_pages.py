"""The pages themselves, in the browser: every page at a laptop's full and half screen, with a
screenshot of each under .test-output/browser/pages/; labels, headings and tables; the keyboard;
without JavaScript; and with the cluster unreachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from storage.models import Volume
from workloads.models import Workload

from .conftest import OUTPUT, STATE_TIMEOUT_MS, switch_project

# serialized_rollback: the templates the migrations seed are there in every journey
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

SIZES = {"full": {"width": 1280, "height": 800}, "half": {"width": 700, "height": 800}}

# what a page must be, checked in the browser: no sideways scrolling of the page (wide tables
# scroll in their own box), one h1 and no skipped heading level, every control labelled,
# every table named with its header cells scoped
PAGE_PROBLEMS = r"""() => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) problems.push(`scrolls sideways: ${root.scrollWidth} > ${root.clientWidth}`);
  const levels = [...document.querySelectorAll('h1, h2, h3, h4')].map(h => +h.tagName[1]);
  if (levels.filter(l => l === 1).length !== 1) problems.push(`h1 count ${levels.filter(l => l === 1).length}`);
  levels.forEach((l, i) => { if (i && l > levels[i - 1] + 1) problems.push(`heading h${levels[i - 1]} -> h${l}`); });
  for (const el of document.querySelectorAll('input:not([type=hidden]):not([type=submit]), select, textarea')) {
    const labelled = el.labels && el.labels.length || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!labelled) problems.push(`unlabelled ${el.tagName} ${el.name || el.id}`);
  }
  for (const table of document.querySelectorAll('table')) {
    if (!table.caption && !table.getAttribute('aria-labelledby') && !table.getAttribute('aria-label')) problems.push(`table without a name ${table.id}`);
    for (const th of table.querySelectorAll('thead th')) if (!th.getAttribute('scope')) problems.push(`th without scope in ${table.id}`);
  }
  for (const el of document.querySelectorAll('[aria-describedby], [aria-labelledby]')) {
    const ids = ((el.getAttribute('aria-describedby') || '') + ' ' + (el.getAttribute('aria-labelledby') || '')).split(/\s+/).filter(Boolean);
    for (const id of ids) if (!document.getElementById(id)) problems.push(`${el.name || el.id || el.tagName} refers to a missing #${id}`);
  }
  for (const id of [...document.querySelectorAll('[id]')].map(e => e.id)) {
    if (document.querySelectorAll('#' + CSS.escape(id)).length > 1) problems.push(`duplicate id ${id}`);
  }
  return [...new Set(problems)];
}"""


def review(page, url: str, name: str) -> None:
    """Open `url` at both sizes, save the screenshots, and check what every page must be."""
    folder = OUTPUT / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        response = page.goto(url)
        assert response.status == 200, f"{url}: {response.status}"
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(folder / f"{name}-{size}.png"), full_page=True)
        assert page.evaluate(PAGE_PROBLEMS) == [], f"{name} at {size} ({url})"


def launched(project_token, name: str, **body) -> Workload:
    from tests.workloads.api_calls import launch

    response = launch({"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")},
                      {"name": name, "template": "jupyter", "gpu_type": "a100",
                       "gpu_count": 1, **body})
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


def test_the_researchers_pages_at_full_and_half_screen(page, log_in, live_server, vision_lab,
                                                      project_token):
    from tests.support.secrets import secret_made

    secret = secret_made({"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")})
    workload = launched(project_token, "review notebook", secrets=[{"secret": secret}])
    # a volume the provisioner could not make: its state and its words on the volumes page
    Volume.objects.create(tenant=vision_lab, owner=workload.owner, scope=Volume.Scope.USER,
                          name="datasets", size_gib=20, storage_class="fast-ssd",
                          claim_name="vol-1-datasets", state=Volume.State.FAILED,
                          reason='ProvisioningFailed: storageclass.storage.k8s.io "fast-ssd" '
                                 "not found")
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.goto(f"{live_server.url}/workloads/{workload.pk}/")
    expect(page.locator("#workload-state .state")).to_have_text("running",
                                                                timeout=STATE_TIMEOUT_MS)
    for name, path in (("home", "/"), ("launch", "/workloads/new/"),
                       ("launch-custom", "/workloads/new/?template=custom"),
                       ("workloads", "/workloads/"), ("workload", f"/workloads/{workload.pk}/"),
                       ("usage", "/usage/"), ("budget", "/budget/"),
                       ("calendar", "/calendar/"), ("secrets", "/secrets/"),
                       ("secret", f"/secrets/{secret}/"), ("volumes", "/volumes/")):
        review(page, live_server.url + path, name)


def test_the_admins_pages_at_full_and_half_screen(page, log_in, live_server, vision_lab):
    log_in(page, "admin")
    for name, path in (("tenants", "/admin/tenants/"),
                       ("tenant", f"/admin/tenants/{vision_lab.pk}/"),
                       ("gpu-types", "/admin/gpu-types/"), ("templates", "/admin/templates/"),
                       ("usage-report", "/admin/usage/"), ("gpus", "/admin/gpus/"),
                       ("audit", "/admin/audit/"), ("budgets", "/admin/budgets/"),
                       ("budget-form", f"/admin/budgets/{vision_lab.pk}/"),
                       ("calendar-admin", "/admin/calendar/"), ("calendar-book", "/calendar/"),
                       ("storage-classes", "/admin/storage-classes/"),
                       ("prices", "/admin/prices/"), ("reports", "/reports/")):
        review(page, live_server.url + path, name)
    page.context.clear_cookies()
    review(page, live_server.url + "/login/", "login")
    page.get_by_role("button", name="Log in").click()  # empty: the errors are tied to fields
    expect(page.get_by_label("User name")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("User name")).to_have_accessible_description(
        "This field is required.")
    assert page.evaluate(PAGE_PROBLEMS) == []


def test_times_are_shown_in_the_readers_time_zone_and_locale(page, log_in, live_server,
                                                             vision_lab, project_token):
    workload = launched(project_token, "zoned")
    log_in(page, "researcher")  # the browser: en-GB, Europe/Berlin (conftest)
    switch_project(page, "vision-lab")
    page.goto(f"{live_server.url}/workloads/{workload.pk}/")
    created = page.locator("#workload-created time")
    expect(created).to_have_attribute("data-zone", "Europe/Berlin")
    berlin = page.evaluate("""(iso) => new Intl.DateTimeFormat('en-GB', {dateStyle: 'medium',
        timeStyle: 'medium', timeZone: 'Europe/Berlin'}).format(new Date(iso))""",
                           workload.created_at.isoformat())
    expect(created).to_have_text(berlin)
    assert created.get_attribute("title").endswith("UTC")  # the server's own rendering
    expect(page.locator("#workload-resources data")).to_have_text(
        re.compile(r"^16\sGiB$"))


def test_the_keyboard_reaches_the_content_first_and_the_focus_is_visible(page, log_in,
                                                                        vision_lab):
    log_in(page, "researcher")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to the content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")
    focused = page.locator(":focus")
    assert focused.evaluate("el => !!el.closest('main')")
    outline = focused.evaluate("el => getComputedStyle(el).outlineStyle")
    assert outline != "none"


def test_launch_and_stop_work_without_javascript(browser, browser_context_args, log_in,
                                                 vision_lab):
    context = browser.new_context(**browser_context_args, java_script_enabled=False)
    page = context.new_page()
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    page.get_by_role("link", name="Launch a workload").click()
    page.get_by_label("Name").fill("no script")
    page.get_by_role("radio", name=re.compile("^Custom")).check()
    # without htmx the custom fields come from the server, on request
    page.get_by_role("button", name="Show the fields of the chosen template").click()
    page.get_by_role("textbox", name="Image").fill("python:3.12-slim")
    page.get_by_label("Kind").select_option("service")
    page.get_by_label("Port (service)").fill("8080")
    page.get_by_label("GPU type").select_option("v100")
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="was submitted")).to_contain_text(
        "no script was submitted: 1× v100, Custom image.")
    workload = Workload.objects.get(name="no script")
    assert workload.kind == "service" and workload.port == 8080
    page.locator("summary", has_text="Stop").click()
    page.get_by_role("button", name="Stop no script").click()
    expect(page.get_by_role("status").filter(has_text="is stopping")).to_be_visible()
    expect(page.locator("#workload-state .state")).to_have_text(re.compile("stopping|stopped"))
    context.close()


def test_an_unreachable_cluster_shows_banners_not_errors(page, log_in, live_server, vision_lab,
                                                        project_token, cluster, settings,
                                                        tmp_path):
    workload = launched(project_token, "stranded")
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(cluster.url,
                                                                 "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)  # the portal's pages; the workers still see kubesim
    log_in(page, "researcher")
    switch_project(page, "vision-lab")
    for path, note in (("/workloads/new/", "free GPUs are not known"),
                       (f"/workloads/{workload.pk}/", "the logs cannot be read"),
                       ("/workloads/", None), ("/", None)):
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        if note:
            expect(page.locator("#cluster-note")).to_contain_text(
                f"The cluster is unreachable right now: {note}")
    page.goto(live_server.url + "/workloads/new/")
    expect(page.get_by_label("GPU type").locator("option[value=a100]")).to_contain_text(
        "free unknown")


def test_empty_states_say_what_to_do(page, log_in, live_server):
    """No project yet, no GPU types configured, no workloads, no usage: each page says so and
    what to do, instead of an empty table or an error."""
    log_in(page, "loner")  # in no Keystone project
    expect(page.get_by_role("heading", level=1)).to_have_text("You have no project yet")
    page.goto(live_server.url + "/workloads/")
    expect(page.get_by_role("heading", level=1)).to_have_text("You have no project yet")
    page.context.clear_cookies()

    log_in(page, "admin")  # the admin project, and no GPU type in the catalogue
    expect(page.locator("#quota-heading + p")).to_contain_text("No GPU types are configured yet")
    page.goto(live_server.url + "/workloads/new/")
    banner = page.locator("#no-gpu-types")
    expect(banner).to_contain_text("No GPU types are configured yet, so nothing can be launched.")
    banner.get_by_role("link", name="GPU type catalogue").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("GPU types")
    page.goto(live_server.url + "/workloads/new/")
    expect(page.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
    page.goto(live_server.url + "/workloads/")
    expect(page.locator("main .empty")).to_have_text("No workloads yet — Launch one.")
    page.goto(live_server.url + "/usage/")
    expect(page.locator("main .empty")).to_have_text("No GPU usage in this period.")


def test_the_api_docs_draw_under_the_content_security_policy(page, live_server):
    """Swagger UI starts from its own script address (no inline script) and draws the schema;
    the page fixture fails the test if the policy refused anything on the way."""
    response = page.goto(f"{live_server.url}/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU portal API",
                                                                     timeout=STATE_TIMEOUT_MS)
    expect(page.locator(".opblock").first).to_be_visible()
