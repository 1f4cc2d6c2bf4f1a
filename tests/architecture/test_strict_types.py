"""Every unit of the project is type-checked strictly (pyproject.toml, `[tool.mypy]`): each layer
in LAYERS and each package beside them (the CLI, the GPU agent, kubesim) is in the checked files
and under the override that turns on mypy's strict flags, and no other override turns one of
those flags off, or an error code, for a module of one. What may
be relaxed, and where, is listed here: a migration (written against the historical models), and
a class whose base comes from a library without types."""

from __future__ import annotations

import tomllib
from typing import Any

from tests.architecture.layers import LAYERS, ROOT

# mypy's --strict, flag by flag (`strict` itself is global-only)
STRICT_FLAGS = {"disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                "disallow_untyped_defs", "disallow_incomplete_defs",
                "disallow_untyped_decorators", "warn_return_any", "warn_unused_ignores",
                "no_implicit_reexport", "strict_equality", "extra_checks"}
# the relaxations allowed: pattern → flags it may turn off ("*": any module)
ALLOWED = {"*.migrations.*": {"disallow_untyped_defs", "disallow_incomplete_defs",
                              "disallow_untyped_calls"},
           "*": {"disallow_subclassing_any"}}


# the packages outside the layers: they import none of the portal's apps
STANDALONE = ("gpuctl", "gpuagent", "kubesim")
UNITS = (*LAYERS, *STANDALONE)


def _mypy() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def _modules(override: dict[str, Any]) -> list[str]:
    module = override["module"]
    return [module] if isinstance(module, str) else list(module)


def _reaches(pattern: str, layer: str) -> bool:
    """Whether a mypy module pattern names modules of `layer` ("*.x" reaches every one)."""
    return pattern.startswith("*.") or pattern.split(".")[0] == layer


def _strict_override() -> dict[str, Any]:
    strict = [o for o in _mypy()["overrides"] if STRICT_FLAGS <= o.keys()]
    assert len(strict) == 1, "one override sets every strict flag"
    return strict[0]


def test_every_layer_is_checked():
    files = set(_mypy()["files"])
    assert [unit for unit in UNITS if unit not in files] == []


def test_every_layer_is_strict():
    strict = _strict_override()
    assert {flag: strict[flag] for flag in STRICT_FLAGS} == dict.fromkeys(STRICT_FLAGS, True)
    assert [unit for unit in UNITS if f"{unit}.*" not in _modules(strict)] == []


def test_no_layer_is_relaxed_beyond_what_is_allowed():
    strict = _strict_override()
    relaxed = []
    for override in _mypy()["overrides"]:
        if override is strict:
            continue
        for pattern in _modules(override):
            allowed = ALLOWED["*"] | ALLOWED.get(pattern, set())
            for layer in UNITS:
                if not _reaches(pattern, layer):
                    continue
                off = {flag for flag in STRICT_FLAGS - allowed if override.get(flag) is False}
                if off or override.get("disable_error_code") or override.get("ignore_errors"):
                    relaxed.append((pattern, sorted(off), override.get("disable_error_code")))
    assert sorted(set(map(str, relaxed))) == []
