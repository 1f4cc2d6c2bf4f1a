# The two commands: `make demo` runs the portal with its embedded stack; `make test` installs
# what the tests need and runs them. Both work from a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean-demo help go-builds

help:
	@echo "make demo   - run the portal with Keystone, Redis, kubesim and Celery on 127.0.0.1"
	@echo "              (CLUSTER=kube: on a real Kubernetes 1.37 control plane with KWOK GPU nodes)"
	@echo "make test   - install what the tests need and run the whole suite"
	@echo "make lint   - ruff, mypy and go vet (CI runs it before the tests)"
	@echo "make bench  - the quick benchmarks (bench/)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demo]'
	touch $(STAMP)

# front-end assets come from npm at setup (package-lock.json pins them), never from a CDN
ASSETS := node_modules/.installed
$(ASSETS): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(ASSETS)

# CLUSTER=kube: the demo on a real Kubernetes control plane built from source (stack/k8s/)
CLUSTER ?= kubesim
# the suite runs in this many processes (pytest-xdist; 0: in this one); each starts its own stack
# (whole files each; the tests of each real control plane, and the browser journeys, each in one:
# tests/fixtures/scheduling.py). Four on a two-core machine: most tests wait on servers and
# controllers; with three the cores stood idle 17-19 % of a warm run and pytest took 890-942 s,
# with four 8 % and 857 s (bench/results/test_time.md)
PYTEST_WORKERS ?= 4
demo: $(STAMP) $(ASSETS)
	$(PY) -m stack.demo --cluster $(CLUSTER)

# The Go components of the real control planes (stack/k8s/build.py): on a fresh machine they take
# longer to build than the tests that need none of them take to run, so they build in a niced
# background process from the start, while pip, npm, apt and those tests run (with the system's
# Python: the venv may not be there yet); the tests that need them run last and wait for what is
# not built yet (tests/fixtures/builds.py). CI runs `make lint` first on the same machine, so lint
# starts them too. Nothing is started when they are all built.
go-builds:
	$(PYTHON) -m stack.k8s.build --background

test: go-builds $(STAMP) $(ASSETS)
	$(PY) -m stack.system_deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# go vet: gpu-portal-sshd (sshd/), gpu-portal-files (filesd/) and gpu-portal-provisioner
# (stack/k8s/provisioner/), the Go modules of ours with code; their tests run in `make test`
# (tests/sshd/test_go.py, tests/files/test_go.py, tests/realcluster/test_provisioner_go.py). The
# other wrapper modules under stack/k8s hold only imports of upstream commands, and vetting them
# would compile those whole. Each is vetted in the environment and with the compile flags of its
# build (stack/k8s/build.py: go_env, compile_flags; tests/test_lint.py holds them alike), so that
# vet and the tests reuse the packages the build compiled instead of compiling them again.
# mypy's cache lives beside the Go builds, outside the checkout: a fresh clone checks only the
# modules whose contents differ from the last check's (mypy compares hashes where paths and
# times differ), some 2 s instead of 20-30
MYPY_CACHE = $(or $(GPU_PORTAL_CACHE),$(HOME)/.cache/gpu-portal)/mypy
lint: export CGO_ENABLED = 0
lint: export GOFLAGS = -mod=readonly
lint: export GOTOOLCHAIN = local
lint: go-builds $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --cache-dir "$(MYPY_CACHE)"
	go -C sshd vet -trimpath ./...
	go -C filesd vet -trimpath ./...
	go -C stack/k8s/provisioner vet -trimpath -tags notest ./...

# the benchmarks of the real control plane need it built before they start (make test's tests
# wait for it one by one)
bench: $(STAMP)
	$(PY) -m stack.system_deps
	$(PY) -m stack.k8s.build > /dev/null
	$(PY) bench/run.py

clean-demo:
	rm -rf .demo/portal.sqlite3 .demo/kubesim-state.json .demo/celerybeat-schedule* .demo/logs .demo/kube
