"""The Go wrapper modules (stack/k8s/build.py) build with one version of each shared dependency.

Go's build cache keys a compiled package by its source and its dependencies' compiled outputs, so
a package is compiled once for the whole set only when every wrapper selects the same versions of
it and of everything below it. A fresh machine builds the set cold: each version a wrapper picks
apart from the others is compiled again (Kubernetes' client libraries hundreds of packages at a
time). These tests read each wrapper's go.mod, which lists every module of its build.
"""

from __future__ import annotations

from collections import defaultdict

from stack.k8s import build

# The control plane and our provisioner build on Kubernetes 1.37's libraries; the addons on 1.36's,
# the newest Kueue v0.19 compiles with (its scheduler library and the trainer API it imports do not
# compile against 1.37). MetalLB v0.15 builds with its own pins: no controller-runtime release
# both compiles it and works with client-go 1.36 or later.
CONTROL_PLANE_LINE = {"kubernetes", "provisioner"}
OWN_PINS = {"metallb"}
OUR_PROGRAMS = {"portal-sshd", "portal-files"}  # modules of our own, not wrappers
# OpenTelemetry's log API is not stable yet (v0.x): Traefik v3.6 compiles only with the v0.17
# it pins, CNCF Distribution needs v0.21 or later
OWN_VERSIONS = {"traefik": {"go.opentelemetry.io/otel/log", "go.opentelemetry.io/otel/sdk/log",
                            "go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc",
                            "go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"}}


def requirements(go_mod: str) -> dict[str, str]:
    """module → version a go.mod selects: its requires, with its replaces by a version applied (a
    fork under its own path: the fork is what is compiled)."""
    required: dict[str, str] = {}
    replaced: dict[str, tuple[str, str]] = {}
    block = ""
    for raw in go_mod.splitlines():
        line = raw.split("//")[0].strip()
        if not line:
            continue
        if line.endswith("(") and line.split()[0] in ("require", "replace", "exclude"):
            block = line.split()[0]
            continue
        if line == ")":
            block = ""
            continue
        words = line.split()
        kind = block
        if not block and words[0] in ("require", "replace"):
            kind, words = words[0], words[1:]
        if kind == "require" and len(words) >= 2:
            required[words[0]] = words[1]
        elif kind == "replace" and "=>" in words and len(words) == words.index("=>") + 3:
            target, version = words[words.index("=>") + 1:]
            replaced[words[0]] = (target, version)
    return dict(replaced.get(module, (module, version)) for module, version in required.items())


def is_kubernetes_library(module: str, version: str) -> bool:
    """A Kubernetes staging module (k8s.io/api, client-go, …), versioned v0.<minor>.<patch>."""
    return module.startswith("k8s.io/") and version.startswith("v0.3")


def wrappers() -> dict[str, dict[str, str]]:
    return {name: requirements((c.source / "go.mod").read_text())
            for name, c in build.COMPONENTS.items() if name not in OUR_PROGRAMS | OWN_PINS}


def disagreements(selected: dict[str, dict[str, str]]) -> list[str]:
    """Each module two wrappers of one line select at different versions."""
    versions: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, modules in selected.items():
        for module, version in modules.items():
            if module == "k8s.io/kubernetes" or module.startswith("gpu-portal.local/") \
                    or module in OWN_VERSIONS.get(name, ()):
                continue  # the control plane's own module, ours, and the exceptions above
            line = ""
            if is_kubernetes_library(module, version) or module == "sigs.k8s.io/controller-runtime":
                line = "1.37" if name in CONTROL_PLANE_LINE else "1.36"
            versions[(module, line)][version].append(name)
    return sorted(f"{module}: " + "; ".join(f"{v} in {', '.join(sorted(names))}"
                                            for v, names in sorted(by_version.items()))
                  for (module, _), by_version in versions.items() if len(by_version) > 1)


def test_the_wrappers_select_one_version_of_each_shared_module():
    assert disagreements(wrappers()) == []


def test_the_check_sees_two_versions_of_a_module():
    selected = wrappers()
    selected["kwok"] = {**selected["kwok"], "golang.org/x/net": "v0.1.0"}
    found = disagreements(selected)
    assert len(found) == 1 and found[0].startswith("golang.org/x/net: v0.1.0 in kwok; ")


def test_the_two_kubernetes_lines_are_each_one_version():
    selected = wrappers()
    assert {selected[n]["k8s.io/client-go"] for n in CONTROL_PLANE_LINE} == {"v0.37.2"}
    addons = {n for n, mods in selected.items() if "k8s.io/client-go" in mods} - CONTROL_PLANE_LINE
    assert addons >= {"kueue", "jobset", "kwok", "mpi-operator", "keystone-auth", "traefik"}
    assert {selected[n]["k8s.io/client-go"] for n in addons} == {"v0.36.6"}


def test_replaces_by_a_version_count_as_the_selected_version():
    go_mod = ("module m\n\nrequire (\n\tk8s.io/api v0.0.0\n\tgithub.com/a/b v1.0.0 // indirect\n)\n"
              "replace k8s.io/api => k8s.io/api v0.37.2\n"
              "replace (\n\tgithub.com/a/b => github.com/fork/b v1.2.0\n)\n")
    assert requirements(go_mod) == {"k8s.io/api": "v0.37.2", "github.com/fork/b": "v1.2.0"}
