"""gunicorn's settings for the portal image (copied to /app/gunicorn.conf.py, which gunicorn
reads from its working directory). Each can be changed from the environment:

    PORTAL_WEB_BIND      address:port to listen on (default 0.0.0.0:8000)
    WEB_CONCURRENCY      worker processes (gunicorn's own variable; default 3)
    PORTAL_WEB_THREADS   request threads per worker (default 4; /healthz has one of its own)
    PORTAL_WEB_TIMEOUT   seconds a worker may take to start, and a request to be answered: past
                         it with none answered, /healthz says 503 (default 60)
    PORTAL_WEB_KEEPALIVE seconds an idle keep-alive connection is kept open (default 75)

With PROMETHEUS_MULTIPROC_DIR set, /metrics sums every worker process: the folder is emptied
when gunicorn starts and a dead worker's files are marked, as prometheus_client requires.
"""

import os
from pathlib import Path

bind = os.environ.get("PORTAL_WEB_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
threads = int(os.environ.get("PORTAL_WEB_THREADS", "4"))
timeout = int(os.environ.get("PORTAL_WEB_TIMEOUT", "60"))
graceful_timeout = 30
# gthread's threads, with /healthz answered on a thread of its own: a burst that fills the
# threads does not hold the probe (portal/webserver.py says why and how)
worker_class = "portal.webserver.HealthLaneWorker"
# An idle connection must be closed by the client, not by the server: a server that closes one
# at the moment the client sends its next request on it fails that request (the client reads
# a closed socket). So the server waits longer than the clients' own expiry: the ingress in
# front of it (nginx keeps upstream connections 60 s), httpx (5 s), aiohttp (15 s). With
# gunicorn's default of 5 s, 1 of 200 parallel GETs of the demo's burst test failed so.
keepalive = int(os.environ.get("PORTAL_WEB_KEEPALIVE", "75"))
# the heartbeat files on memory, not on the (read-only) root filesystem
worker_tmp_dir = "/dev/shm" if Path("/dev/shm").is_dir() else None
accesslog = "-"
errorlog = "-"
# X-Forwarded-For / -Proto from the ingress controller in front of the pods
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "*")


def on_starting(server):
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
