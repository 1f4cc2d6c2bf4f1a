"""The portal image's file tree starts the portal: the tree is built here from the Dockerfile's own
COPY lines (and .dockerignore) into a temporary folder, and the image's build step
(`collectstatic`) and `manage.py check --deploy` run there with the image's ENV, the settings the
manifests give a pod and the Secret's keys, with nothing of this repository on the path.

The image once left out two apps the settings install (catalogue, audit): its collectstatic step
failed and no process could have started. The tests beside the repository never saw it, because
they import the packages from the repository itself."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path, PurePosixPath

import pytest
from django.conf import settings
from setuptools import find_packages

from tests.deploy.manifests import REPO, container_environment, deployment, render

DOCKERFILE = REPO / "Dockerfile"
# The Python of the tests, with its dependencies but not this repository: the venv holds an
# editable install of the project (a finder that maps `portal` … to a checkout), which `-S` (no
# site, so no .pth files) leaves out; site-packages comes back through PYTHONPATH.
SITE_PACKAGES = sysconfig.get_paths()["purelib"]

# Runs manage.py as `python manage.py …` does, then fails if any module was loaded from outside
# the tree and the Python installation (a leak of the repository would hide a missing file).
ISOLATED_MANAGE = """
import json, runpy, sys, sysconfig
from pathlib import Path
tree = Path.cwd().resolve()
# the tree, the standard library (-S: this Python's own prefix), the dependencies
allowed = [tree, Path(sys.argv[1]).resolve()] + [
    Path(p).resolve() for p in sysconfig.get_paths().values()]
sys.argv = sys.argv[2:]
try:
    runpy.run_path("manage.py", run_name="__main__")
finally:
    outside = sorted(
        str(Path(m.__file__).resolve()) for m in list(sys.modules.values())
        if getattr(m, "__file__", None)
        and not any(Path(m.__file__).resolve().is_relative_to(a) for a in allowed))
    if outside:
        print("LOADED FROM OUTSIDE THE IMAGE TREE: " + json.dumps(outside), file=sys.stderr)
        sys.exit(3)
"""


def _instructions(stage: str) -> list[tuple[str, str]]:
    """(instruction, arguments) of a Dockerfile stage, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", stage)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions by its name (`FROM … AS name`); the last stage as "final"."""
    parts = re.split(r"^(?=FROM\s)", DOCKERFILE.read_text(), flags=re.MULTILINE)
    named = {}
    for part in parts:
        if part.startswith("FROM"):
            header = part.splitlines()[0].split()
            named[header[3] if len(header) > 3 and header[2].upper() == "AS" else "final"] = (
                _instructions(part))
    return named


def _pattern(rule: str) -> re.Pattern[str]:
    """A .dockerignore rule as a regular expression (Go's filepath.Match, plus `**`)."""
    out = ""
    for piece in re.split(r"(\*\*/?|\*|\?)", rule.strip("/")):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
            piece, re.escape(piece))
    return re.compile(out)


def dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rules.append((line.startswith("!"), _pattern(line.lstrip("!"))))
    return rules


def ignored(relative: PurePosixPath, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the build context leaves out this path: the last rule that matches it or one of
    its parent folders decides."""
    verdict = False
    candidates = [str(relative), *(str(p) for p in relative.parents if str(p) != ".")]
    for negated, pattern in rules:
        if any(pattern.fullmatch(c) for c in candidates):
            verdict = not negated
    return verdict


def _copy(source: Path, target: Path, context: Path, rules) -> None:
    """COPY's rule: a folder's contents go into the target folder, a file to the target path
    (into it, when the target ends in /)."""
    if source.is_dir():
        for path in sorted(source.rglob("*")):
            relative = PurePosixPath(path.relative_to(context).as_posix())
            if path.is_file() and not ignored(relative, rules):
                destination = target / path.relative_to(source)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)
    else:
        relative = PurePosixPath(source.relative_to(context).as_posix())
        assert not ignored(relative, rules), f"COPY {relative}: .dockerignore leaves it out"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def build_tree(root: Path) -> tuple[Path, dict[str, str], list[str]]:
    """The final stage's WORKDIR as a folder under root, filled by its COPY lines; its ENV (the
    image's own paths mapped to the folder and to this Python), and its RUN commands."""
    named = stages()
    rules = dockerignore()
    (workdir,) = [args for keyword, args in named["final"] if keyword == "WORKDIR"]
    tree = root / workdir.strip("/")
    tree.mkdir(parents=True)
    env: dict[str, str] = {}
    runs = []
    for keyword, args in named["final"]:
        if keyword == "COPY":
            words = shlex.split(args)
            options = [w for w in words if w.startswith("--")]
            *sources, target = [w for w in words if not w.startswith("--")]
            stage = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
            if stage:  # another stage's files: the assets stage runs `npm ci` in its WORKDIR
                assert stage == "assets", f"COPY --from={stage}: unknown here"
                (stage_dir,) = [a for k, a in named[stage] if k == "WORKDIR"]
                assert any(k == "RUN" and a.startswith("npm ci") for k, a in named[stage])
                # this checkout's node_modules is `npm ci` of the same package-lock.json
                sources = [str(REPO / Path(s).relative_to(stage_dir)) for s in sources]
                context = REPO
                stage_rules: list = []
            else:
                context, stage_rules = REPO, rules
            destination = tree / target
            for source in sources:
                path = context / source
                assert path.exists(), f"COPY {source}: not in the repository"
                into = target.endswith("/") or len(sources) > 1
                _copy(path, destination / path.name if into and path.is_file() else destination,
                      context, stage_rules)
        elif keyword == "ENV":
            for word in shlex.split(args):
                name, _, value = word.partition("=")
                env[name] = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), value)
        elif keyword == "RUN":
            runs.append(args)
    # the image's paths, here: its WORKDIR is the tree, its virtualenv is this Python's
    venv = env.get("VIRTUAL_ENV")
    for name, value in env.items():
        value = value.replace(workdir.rstrip("/"), str(tree))
        if venv:
            value = value.replace(venv, sys.prefix)
        env[name] = value
    return tree, env, runs


def isolated_env(image_env: dict[str, str], tree: Path, **extra: str) -> dict[str, str]:
    """A process environment with only the image's ENV, the pod's and the given settings."""
    env = {"HOME": str(tree), "LANG": "C.UTF-8", "PATH": os.environ["PATH"]}
    env.update(image_env)
    env.update(extra)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["PYTHONPATH"] = f"{tree}:{SITE_PACKAGES}"
    return env


def manage(tree: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-S", "-s", "-c", ISOLATED_MANAGE, SITE_PACKAGES,
                           "manage.py", *argv],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def image_tree(tmp_path_factory):
    return build_tree(tmp_path_factory.mktemp("image"))


def test_the_tree_holds_only_what_the_dockerfile_copies(image_tree):
    tree, env, _ = image_tree
    assert (tree / "manage.py").is_file()
    assert (tree / "gunicorn.conf.py").is_file()
    assert not list(tree.rglob("__pycache__"))  # .dockerignore applies
    assert not (tree / "tests").exists() and not (tree / "stack").exists()
    assert env["DJANGO_SETTINGS_MODULE"] == "portal.settings"
    assert env["PORTAL_STATIC_ROOT"] == str(tree / "staticfiles")


def test_the_image_build_step_and_the_deployment_checks_pass_in_the_tree(image_tree):
    tree, image_env, runs = image_tree
    # the build's collectstatic, as the Dockerfile's RUN runs it (its `pip install -e .` is the
    # PYTHONPATH here)
    steps = [step.strip() for run in runs for step in run.split("&&") if "manage.py" in step]
    assert steps, "the Dockerfile runs no manage.py step"
    for step in steps:
        words = shlex.split(step)
        assignments = dict(w.split("=", 1) for w in words if re.fullmatch(r"\w+=.*", w))
        argv = [w for w in words if not re.fullmatch(r"\w+=.*", w)]
        assert argv[:2] == ["python", "manage.py"], step
        result = manage(tree, isolated_env(image_env, tree, **assignments), *argv[2:])
        assert result.returncode == 0, f"{step}:\n{result.stdout}{result.stderr}"[-4000:]
    assert (tree / "staticfiles" / "vendor" / "htmx").is_dir()

    # the web pod: the image's ENV, the manifests' settings, the Secret's keys (operator guide)
    objects = render("deploy/overlays/production")
    (container,) = deployment(objects, "web")["spec"]["template"]["spec"]["containers"]
    pod_env = container_environment(objects, container, {"status.podIP": "10.0.0.7"})
    secrets = {
        "PORTAL_SECRET_KEY": "image-tree-test-" + "k" * 50,
        "KEYSTONE_SERVICE_PASSWORD": "not-used-by-the-checks",
        "PORTAL_OIDC_PRIVATE_KEY": os.environ["PORTAL_OIDC_PRIVATE_KEY"],
        "DATABASE_URL": "postgres://portal:DB-PASSWORD@db.example.org:5432/portal",
        "PORTAL_AUTH_PROXY_TLS_SECRET": "gpu-portal-workloads-tls",
    }
    pod_env = {k: v for k, v in pod_env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    result = manage(tree, isolated_env(image_env, tree, **pod_env, **secrets),
                    "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "System check identified no issues" in result.stdout


def test_the_isolation_would_see_a_missing_package(tmp_path):
    """The check above is not fooled by the repository: a tree without one of the apps fails."""
    tree, image_env, _ = build_tree(tmp_path)
    shutil.rmtree(tree / "tenants")
    result = manage(tree, isolated_env(image_env, tree, PORTAL_SECRET_KEY="x" * 60), "check")
    assert result.returncode != 0
    assert "No module named 'tenants'" in result.stderr


def _project_modules(value, found: set[str]) -> None:
    """The top-level modules of every dotted path in a setting that is one of this repo's."""
    if type(value) is str:
        top = value.split(".")[0]
        if top != "tests" and re.fullmatch(r"[\w.]+", value) and ((REPO / top / "__init__.py").exists()
                                              or (REPO / f"{top}.py").exists()):
            found.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _project_modules(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _project_modules(item, found)


def test_pyproject_packages_every_app_and_class_the_settings_name():
    """`pip install .` (not only an editable install beside the sources) holds every app in
    INSTALLED_APPS and every module the settings name by dotted path."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    find = pyproject["tool"]["setuptools"]["packages"]["find"]
    packaged = set(find_packages(where=str(REPO), include=find["include"],
                                 exclude=find.get("exclude", ())))
    named: set[str] = set()
    for name in dir(settings):
        if name.isupper() and not name.startswith("TEST"):
            _project_modules(getattr(settings, name), named)
    assert {app for app in settings.INSTALLED_APPS if app.split(".")[0] in {
        "portal", "api", "tenants", "catalogue", "audit"}} <= named
    missing = set()
    for dotted in named:
        parts = dotted.split(".")
        # the package that holds the module or the class: the longest prefix that is a package
        packages = [".".join(parts[:i]) for i in range(len(parts), 0, -1)
                    if (REPO.joinpath(*parts[:i]) / "__init__.py").exists()]
        if packages and packages[0] not in packaged:
            missing.add(packages[0])
    assert not missing, f"pyproject.toml's package list leaves out {sorted(missing)}"
    # and the image copies every top-level package that pyproject packages
    copied = {line.split()[1].strip("/") for line in DOCKERFILE.read_text().splitlines()
              if line.startswith("COPY ") and not line.startswith("COPY --")}
    assert {p.split(".")[0] for p in packaged} <= copied, json.dumps(sorted(packaged))
