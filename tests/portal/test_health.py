import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from portal import health
from portal.webserver import RequestThreads
from stack.procs import REPO


def test_healthz_answers_without_any_dependency():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_answers_503_while_the_request_threads_have_stalled(monkeypatch):
    """Under gunicorn the worker tells REQUEST_THREADS what its threads do (portal/webserver.py):
    requests in hand and none done for the worker's timeout is a process to restart."""
    now = [0.0]
    threads = RequestThreads(clock=lambda: now[0])
    threads.watch(limit_seconds=60)
    monkeypatch.setattr(health, "REQUEST_THREADS", threads)
    threads.submitted()
    threads.submitted()
    now[0] = 59.0
    assert Client().get("/healthz").status_code == 200
    now[0] = 75.0
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "stalled", "detail": "2 requests in the request "
                               "threads' hands, none done for 75 s"}
    threads.finished()
    assert Client().get("/healthz").status_code == 200


@pytest.mark.django_db
def test_readyz_checks_database_redis_keystone_and_the_cluster(keystone, cluster):
    response = Client().get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "redis": "ok", "keystone": "ok",
                                         "cluster": "ok"}


@pytest.mark.django_db
def test_readyz_reports_an_unreachable_cluster(keystone, cluster, settings, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"  # the same cluster entry, at a port nothing serves
    text = Path(cluster.kubeconfig).read_text()
    assert cluster.url in text
    kubeconfig.write_text(text.replace(cluster.url, "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(kubeconfig)
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["cluster"].startswith("failed")
    assert response.json()["checks"]["keystone"] == "ok"
    # the web pods' readiness probe asks only for what a pod cannot serve without
    local = Client().get("/readyz?checks=database,redis")
    assert local.status_code == 200
    assert local.json()["checks"] == {"database": "ok", "redis": "ok"}


@pytest.mark.django_db
def test_readyz_refuses_a_check_it_does_not_know():
    response = Client().get("/readyz?checks=database,disk")
    assert response.status_code == 400
    assert "disk" in response.json()["detail"]


@pytest.mark.django_db
def test_readyz_reports_an_unreachable_keystone(keystone, cluster, settings):
    settings.KEYSTONE_URL = "http://127.0.0.1:9/v3"
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["keystone"].startswith("failed")
    assert body["checks"]["database"] == "ok"


def test_production_settings_pass_the_deploy_check():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTAL_", "DJANGO_"))}
    env.update(PORTAL_SECRET_KEY="p" * 64 + "Q7!x", PORTAL_ALLOWED_HOSTS="gpu.example.org",
               DATABASE_URL="postgres://portal@db.example.org/portal",
               DJANGO_SETTINGS_MODULE="portal.settings",
               # the workloads' proxies: the login's signing key, and HTTPS with a certificate
               PORTAL_OIDC_PRIVATE_KEY=os.environ["PORTAL_OIDC_PRIVATE_KEY"],
               PORTAL_AUTH_PROXY_TLS_SECRET="workloads-tls")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                             "WARNING"], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_deploy_check_wants_the_login_signing_key_and_https_for_workloads():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTAL_", "DJANGO_"))}
    env.update(PORTAL_SECRET_KEY="p" * 64 + "Q7!x", PORTAL_ALLOWED_HOSTS="gpu.example.org",
               DATABASE_URL="postgres://portal@db.example.org/portal",
               DJANGO_SETTINGS_MODULE="portal.settings")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                             "WARNING"], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "access.E001" in result.stderr and "oauth2_provider.W008" in result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTAL_", "DJANGO_"))}
    env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "PORTAL_SECRET_KEY must be set" in result.stderr
