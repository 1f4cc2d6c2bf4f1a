"""Kubernetes namespace names for Keystone projects.

A namespace name is a DNS-1123 label: at most 63 characters of [a-z0-9-], starting and ending
with an alphanumeric. Project names are free text (spaces, capitals, any script), and two
projects can normalise to the same text ("ML Lab" and "ml-lab"), so every name carries a short
digest of the Keystone project id: the same project always gets the same name, and different
projects differ even when their names normalise alike.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

MAX_LABEL = 63
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def slug(text: str) -> str:
    """Lower-case ASCII letters, digits and single dashes; accents folded, other scripts dropped."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")


def project_digest(project_id: str, length: int) -> str:
    return hashlib.sha256(project_id.encode("utf-8")).hexdigest()[:length]


def namespace_name(*, project_name: str, project_id: str, prefix: str = "gpu-",
                   digest_length: int = 6) -> str:
    """`<prefix><slug of the project name>-<digest of the project id>`, a valid DNS-1123 label.

    A name with nothing left after folding (e.g. all CJK) becomes `<prefix>project-<digest>`.
    """
    digest = project_digest(project_id, digest_length)
    base = slug(project_name) or "project"
    room = MAX_LABEL - len(prefix) - len(digest) - 1
    base = base[:room].rstrip("-") or "project"
    return f"{prefix}{base}-{digest}"


PREFIX = re.compile(r"^([a-z0-9][-a-z0-9]{0,19})?$")


def is_valid_prefix(prefix: str) -> bool:
    """A prefix keeps every name a DNS-1123 label: empty, or ≤ 20 of [a-z0-9-] not starting with -."""
    return bool(PREFIX.match(prefix))


def is_valid_namespace(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(DNS1123_LABEL.match(name))
