"""Names of a workload: the free display name a researcher types, and the Kubernetes name.

The Kubernetes name is derived, never typed: `wl-<id>-<slug of the display name>`. The id makes
it unique (two workloads never share an id, and `wl-<digits>` followed by `-` or the end reads
back to exactly one id), the slug makes it recognisable in `kubectl get`. It is a DNS-1123 label
that also starts with a letter (so it is a valid Service name, a DNS-1035 label), and at most
52 characters: a Deployment's pods are named `<name>-<replicaset hash>-<5 chars>` and a Job's
pods carry the Job name in a label, and both must stay within 63 characters.
"""

from __future__ import annotations

import re
import unicodedata

from tenants.naming import slug

MAX_OBJECT_NAME = 52
MAX_DISPLAY_NAME = 100
PREFIX = "wl"

# Unicode bidirectional overrides and isolates: invisible, and they can make a name read
# differently from what it is ("Trojan Source"). Other format characters (such as the zero-width
# joiner inside emoji) are harmless and kept.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def workload_object_name(workload_id: int, display_name: str) -> str:
    """`wl-42-my-notebook`: the base name of every Kubernetes object of workload 42.

    Deterministic (a retried launch finds what an earlier try created) and always valid, whatever
    the display name holds: one with nothing ASCII left after folding gives `wl-42`.
    """
    if isinstance(workload_id, bool) or not isinstance(workload_id, int) or workload_id < 0:
        raise ValueError(f"a workload id is a non-negative integer, not {workload_id!r}")
    head = f"{PREFIX}-{workload_id}"
    if len(head) > MAX_OBJECT_NAME:
        raise ValueError(f"workload id {workload_id} is too large for a Kubernetes name")
    room = MAX_OBJECT_NAME - len(head) - 1
    tail = slug(display_name)[:room].strip("-") if room > 0 else ""
    return f"{head}-{tail}" if tail else head


def display_name_clean(text: str) -> str:
    """A display name as stored: trimmed, whitespace runs made one space, control and bidi
    characters removed, at most 100 characters. Raises ValueError when nothing is left.

    Lone surrogates go too: they cannot be encoded as UTF-8, so PostgreSQL would refuse them.
    """
    text = unicodedata.normalize("NFC", text)
    # whitespace first (tabs and newlines are control characters too, but they separate words)
    text = re.sub(r"\s+", " ", text)
    text = "".join(
        ch for ch in text
        if unicodedata.category(ch) not in ("Cc", "Cs") and ch not in _BIDI_CONTROLS
    )
    text = re.sub(r" {2,}", " ", text).strip()[:MAX_DISPLAY_NAME].rstrip()
    if not text:
        raise ValueError("Give the workload a name.")
    return text
