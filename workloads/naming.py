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

from catalogue.fields import invisible_characters_refusal

MAX_DISPLAY_NAME = 100

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
