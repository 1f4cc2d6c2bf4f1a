"""The layers of the project, top to bottom (tests/architecture/test_import_layers.py checks
every import against them; test_app_shape.py walks the apps among them)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# top to bottom: a unit may import the ones after it, never one before it; stack (the embedded
# stack and the real control plane) runs all of them, and takes the proxy's configuration
LAYERS = ("stack", "portal", "usage", "calendars", "budgets", "workloads", "access", "notifications",
          "tenants", "catalogue", "audit", "api",
          "identity", "cluster", "kube", "core")
