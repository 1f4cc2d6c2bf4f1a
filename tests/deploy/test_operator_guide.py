"""The operator guide's site overlay, copied as it stands, renders into valid objects that carry
the site's values: the guide's example is what an operator starts from."""

from __future__ import annotations

import re
import subprocess

import kubernetes_validate
import yaml

from tests.deploy.manifests import KUBECTL, REPO

GUIDE = REPO / "docs" / "operator-guide.md"


def site_overlay() -> str:
    (block,) = re.findall(r"```yaml\n(# site/kustomization\.yaml\n.*?)```", GUIDE.read_text(),
                          flags=re.DOTALL)
    return block


def test_the_guides_site_overlay_renders_with_the_sites_values(tmp_path):
    (tmp_path / "gpu-portal").symlink_to(REPO)  # the repository checked out beside site/
    site = tmp_path / "site"
    site.mkdir()
    (site / "kustomization.yaml").write_text(site_overlay())
    result = subprocess.run([str(KUBECTL), "kustomize", str(site)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    version = kubernetes_validate.utils.latest_version()
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "DaemonSet", "HorizontalPodAutoscaler", "Ingress"} <= kinds
    images = {c["image"] for o in objects if o["kind"] in ("Deployment", "DaemonSet", "Job")
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.org/gpu-portal/portal:0.1.0",
                      "registry.example.org/gpu-portal/gpuagent:0.1.0"}
    ingress = next(o for o in objects if o["kind"] == "Ingress")["spec"]
    assert ingress["rules"][0]["host"] == ingress["tls"][0]["hosts"][0] == "gpu.example.org"


def test_every_path_the_guide_names_exists():
    paths = set(re.findall(r"`((?:deploy|docs|tests)/[\w./-]+)`", GUIDE.read_text()))
    assert paths
    for path in paths:
        assert (REPO / path.rstrip("/")).exists(), path
