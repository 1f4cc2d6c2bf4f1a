# The portal's image: one image for every process of the portal.
#   web      gunicorn portal.wsgi            (reads /app/gunicorn.conf.py)
#   worker   celery -A portal worker -Q celery
#   launches celery -A portal worker -Q launches -P threads -c 16
#   notices  celery -A portal worker -Q notifications -P threads -c 16
#   tracker  python manage.py track_workloads                                 (one leads)
#   beat     celery -A portal beat                                            (exactly one)
#   migrate  python manage.py migrate --noinput                               (a Job)
# Build from the repository root:  docker build -t gpu-portal/portal:0.1.0 .
# docs/operator-guide.md explains how the manifests in deploy/ run it.

# --- front-end assets: npm, pinned by package-lock.json (never a CDN) ---------------------
FROM node:22-bookworm-slim AS assets
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error

# --- the portal ------------------------------------------------------------------------------
FROM python:3.12-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/portal \
    PATH=/opt/portal/bin:$PATH \
    DJANGO_SETTINGS_MODULE=portal.settings \
    PORTAL_STATIC_ROOT=/app/staticfiles
# uid/gid 10001: the manifests' runAsUser/runAsGroup (tests/deploy checks they agree)
RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin portal \
    && python -m venv /opt/portal
WORKDIR /app
# The settings find templates/, static/ and node_modules/ beside the packages (BASE_DIR), so the
# project is installed in place (editable) and runs from /app.
COPY pyproject.toml README.md manage.py ./
COPY portal/ portal/
COPY core/ core/
COPY kube/ kube/
COPY cluster/ cluster/
COPY identity/ identity/
COPY access/ access/
COPY notifications/ notifications/
COPY workloads/ workloads/
COPY credentials/ credentials/
COPY usage/ usage/
COPY budgets/ budgets/
COPY calendars/ calendars/
COPY files/ files/
COPY allocations/ allocations/
COPY billing/ billing/
COPY api/ api/
COPY tenants/ tenants/
COPY storage/ storage/
COPY catalogue/ catalogue/
COPY clusters/ clusters/
COPY audit/ audit/
COPY kubesim/ kubesim/
COPY gpuagent/ gpuagent/
COPY gpuctl/ gpuctl/
COPY templates/ templates/
COPY static/ static/
COPY --from=assets /build/node_modules/ node_modules/
COPY deploy/image/gunicorn.conf.py gunicorn.conf.py
# collectstatic needs settings to load, and settings need a secret key outside debug mode: a
# throwaway one for this step only (the pods get theirs from a Secret).
RUN pip install -e . \
    && PORTAL_SECRET_KEY=collectstatic-at-build-time-only python manage.py collectstatic \
       --noinput -v 0
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi"]
