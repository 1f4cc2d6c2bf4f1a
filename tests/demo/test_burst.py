"""The embedded demo serves a script's burst, run against the demo's OWN
configuration: stack/demo.py's environment (SQLite, DEBUG), its Keystone (token cache, one
thread), its web server, its Celery worker, tracker and beat, its kubesim — started by
stack/demo_stack.py on a temporary folder and free ports instead of .demo/ and 8000/5000/8001.

A newcomer's script: the admin raises vision-lab's quota to 12 A100s through the API; then, with
a Keystone token the portal has never seen, 50 Jupyter launches and 4 batch jobs at once, and
200 parallel GETs of the workload list (stack/burst.py). Before the fix 13 of 16 such launches
answered 503 (database_unavailable, identity_unavailable).
"""

from __future__ import annotations

import pytest

from stack.burst import locked_lines, run_burst, tracker_log_report
from tests.support.waiting import eventually

LAUNCHES, QUOTA, JOBS, GETS = 50, 12, 4, 200

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def burst(demo):
    figures = run_burst(demo.url, demo.keystone.url, demo.kubeconfig, launches=LAUNCHES,
                        quota=QUOTA, batch=JOBS, gets=GETS, log=lambda _: None)
    # the tracker reports once more after the burst (every 15 s while it leads), and at least
    # twice in all: a burst that ends before its first report must not leave one report only
    wanted = max(tracker_log_report(demo.log("tracker"))["reports"] + 1, 2)
    eventually(lambda: tracker_log_report(demo.log("tracker"))["reports"] >= wanted,
               timeout=60, message=f"the tracker's report number {wanted}, after the burst")
    return figures


def test_every_launch_is_admitted_or_refused_by_quota_none_fails(burst):
    assert burst["launch_answers"] == {"201": QUOTA, "403 quota_exceeded": LAUNCHES - QUOTA}
    assert burst["job_answers"] == {"201": JOBS}


def test_admitted_exactly_up_to_the_quota_and_all_running(burst):
    assert burst["admitted"] == QUOTA
    assert burst["all_running"], burst["states"]
    assert burst["a100_gpus_in_running_pods"] == QUOTA  # the cluster holds no more than that
    assert burst["jobs_succeeded"], burst["states"]
    assert burst["seconds_to_all_running"] is not None


def test_two_hundred_parallel_lists_answer(burst):
    assert burst["get_answers"] == {"200": GETS}


def test_cluster_changes_reach_the_portal(burst):
    """Every change is seen. How fast (the goal: p95 within 2 s; measured 29-101 ms) is the
    benchmark's to say (bench/demo_burst_bench.py): here the other test process may hold the
    CPU for a while, so this only bounds it loosely."""
    lag = burst["state_lag_seconds"]
    assert burst["lags_measured"] == burst["changes_expected"] == QUOTA + JOBS
    assert lag["p95"] <= 10.0, lag


def test_no_lost_tracker_cycle_and_no_lock_error_anywhere(burst, demo):
    report = tracker_log_report(demo.log("tracker"))
    assert report["reports"] >= 2 and report["lost"] == []
    assert locked_lines({name: demo.log(name) for name in demo.procs}) == {}
    assert all(demo.running().values()), demo.running()


def test_the_demo_uses_its_own_configuration(demo):
    """What is measured here is `make demo`'s configuration, not the tests' PostgreSQL."""
    assert demo.env["DATABASE_URL"].startswith("sqlite:///")
    assert demo.env["DATABASE_URL"].endswith("/portal.sqlite3")
    assert (demo.layout.root / "portal.sqlite3-wal").exists()  # WAL, as settings.py makes it
    web = demo.procs["web"].args
    assert "gunicorn" in web[0] and "deploy/image/gunicorn.conf.py" in " ".join(web)


def test_the_demo_runs_as_a_careful_site(demo):
    """DEBUG off: an anonymous caller's unknown URL gets the portal's own 404, not Django's
    debug page listing every URL pattern; the static files are served all the same (WhiteNoise,
    hashed names); images come only from the demo's registries, matched on whole hosts."""
    import re

    import httpx

    from stack.burst import PASSWORD, PROJECT, USER, keystone_token

    assert demo.env["PORTAL_DEBUG"] == "0"
    with httpx.Client(base_url=demo.url, timeout=60) as http:
        missing = http.get("/no-such-page/")
        assert missing.status_code == 404
        assert "URLconf" not in missing.text and "urlpatterns" not in missing.text
        assert "Page not found" in missing.text
        login = http.get("/login/")
        assert login.status_code == 200
        assert "script-src 'self'" in login.headers["content-security-policy"]
        assert "no-store" in login.headers["cache-control"]
        styles = re.findall(r'href="(/static/[^"]+\.css)"', login.text)
        assert styles and all(re.search(r"\.[0-9a-f]{12}\.css$", href) for href in styles)
        for href in styles:
            assert http.get(href).status_code == 200, href
        token = keystone_token(demo.keystone.url, USER, PASSWORD, PROJECT)
        for image in ("localhost:5000/library/python:3.12", "docker.io.evil.com/library/python:3",
                      "ghcr.io/someone/miner:1", "quay.io/jupyterx/notebook:1"):
            refused = http.post("/api/v1/workloads/", headers={"X-Auth-Token": token}, json={
                "name": "x", "template": "custom", "kind": "batch", "image": image,
                "gpu_type": "t4", "gpu_count": 1})
            assert refused.status_code == 400, (image, refused.text)
            assert "site's registries" in refused.json()["fields"]["image"][0], image
