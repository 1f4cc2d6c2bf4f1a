"""Names of a workload: the free display name a researcher types, and the Kubernetes name.

The Kubernetes name is derived, never typed: `wl-<id>-<slug of the display name>`. The id makes
it unique (two workloads never share an id, and `wl-<digits>` followed by `-` or the end reads
back to exactly one id), the slug makes it recognisable in `kubectl get`. It is a DNS-1123 label
that also starts with a letter (so it is a valid Service name, a DNS-1035 label), and at most
52 characters: a Deployment's pods are named `<name>-<replicaset hash>-<5 chars>` and a Job's
pods carry the Job name in a label, and both must stay within 63 characters.

What a name may hold is one rule, `invisible_characters`, for workload names and the admin's
template and GPU type names alike: no control characters (NUL included), no surrogates, and no
format characters (Unicode category Cf: bidirectional overrides and isolates, zero-width spaces,
the byte-order mark, tag characters), which are invisible and can make a name read differently
from what it is ("Trojan Source"). Such a name is refused, not silently changed. The zero-width
(non-)joiners are the exception where they join two visible non-ASCII characters: emoji
sequences and Persian or Indic words need them.
"""

from __future__ import annotations

import re
import unicodedata

from tenants.naming import slug

MAX_OBJECT_NAME = 52
MAX_DISPLAY_NAME = 100
PREFIX = "wl"

# refused in names: control (Cc), format (Cf) and surrogate (Cs) characters
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
# ZERO WIDTH NON-JOINER and ZERO WIDTH JOINER: kept between two visible non-ASCII characters
_JOINERS = frozenset("\u200c\u200d")


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


def _visible_non_ascii(ch: str) -> bool:
    return ord(ch) > 0x7F and not ch.isspace() and \
        unicodedata.category(ch) not in _INVISIBLE_CATEGORIES


def invisible_characters(text: str) -> list[str]:
    """The characters of `text` a name may not hold, each once, as "U+202E RIGHT-TO-LEFT
    OVERRIDE"; [] when there are none. Whitespace (tabs and line breaks included) is not among
    them: names make each run of it one space, and descriptions keep their lines."""
    found: list[str] = []
    for index, ch in enumerate(text):
        if ch.isspace() or unicodedata.category(ch) not in _INVISIBLE_CATEGORIES:
            continue
        if ch in _JOINERS and 0 < index < len(text) - 1 and \
                _visible_non_ascii(text[index - 1]) and _visible_non_ascii(text[index + 1]):
            continue
        fallback = "lone surrogate" if unicodedata.category(ch) == "Cs" else "control character"
        label = f"U+{ord(ch):04X} {unicodedata.name(ch, fallback)}"
        if label not in found:
            found.append(label)
    return found


def invisible_characters_refusal(text: str, what: str = "The name") -> str | None:
    """The message that refuses `text`, or None when it holds nothing invisible."""
    found = invisible_characters(text)
    if not found:
        return None
    return (f"{what} holds {'an invisible character' if len(found) == 1 else 'invisible characters'}"
            f" ({', '.join(found[:3])}): control and formatting characters such as "
            "bidirectional overrides and zero-width spaces are not allowed.")


def display_name_clean(text: str) -> str:
    """A display name as stored: NFC, trimmed, whitespace runs made one space, at most 100
    characters. Raises ValueError when it holds an invisible character (`invisible_characters`)
    or when nothing is left."""
    text = unicodedata.normalize("NFC", text)
    refusal = invisible_characters_refusal(text)
    if refusal:
        raise ValueError(refusal)
    text = re.sub(r"\s+", " ", text).strip()[:MAX_DISPLAY_NAME].rstrip()
    if not text:
        raise ValueError("Give the workload a name.")
    return text
