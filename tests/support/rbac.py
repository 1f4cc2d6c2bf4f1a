"""The portal's role rules read as the API server admits them."""

from __future__ import annotations

# requests the API server admits as CONNECT whatever their HTTP verb
CONNECT_SUBRESOURCES = {"pods/exec", "pods/portforward", "pods/attach", "pods/proxy"}
READ = {"get", "list", "watch"}


def unadmitted(role_rules: list[dict]) -> list[dict]:
    """The rules that grant a request admission never sees: a read of anything but a
    subresource the API server admits as CONNECT."""
    return [rule for rule in role_rules
            if any(resource not in CONNECT_SUBRESOURCES for resource in rule["resources"])
            and set(rule["verbs"]) & READ]
