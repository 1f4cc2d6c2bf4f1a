"""Project names that look alike: `vision‐lab` (with U+2010, a hyphen) read as `vision-lab` on
every page. Two names are confusable when their skeletons are equal (Unicode's confusable
detection, UTS #39): each character is replaced by one chosen member of its set of look-alikes
(the confusables data of Unicode, as the confusable-homoglyphs package ships it), after
compatibility normalisation, case folded. The sets are joined where they overlap, so `l`, `1`,
`I` and `|` all meet: stricter than UTS #39's one-way mapping, which is what a refusal needs."""

from __future__ import annotations

import functools
import json
import unicodedata
from pathlib import Path

import confusable_homoglyphs


@functools.cache
def _representatives() -> dict[str, str]:
    """Every character that has look-alikes → the lowest code point of its joined set."""
    data = json.loads((Path(confusable_homoglyphs.__file__).parent / "confusables.json")
                      .read_text(encoding="utf-8"))
    parent: dict[str, str] = {}

    def find(char: str) -> str:
        while parent.setdefault(char, char) != char:
            parent[char] = parent[parent[char]]
            char = parent[char]
        return char

    for char, homoglyphs in data.items():
        for homoglyph in homoglyphs:
            # some look-alikes are written with bidirectional marks around them
            other = homoglyph["c"].strip("\u200e\u200f")
            if len(char) == 1 and len(other) == 1:
                first, second = find(char), find(other)
                if first != second:
                    parent[max(first, second)] = min(first, second)
    return {char: find(char) for char in parent}


def name_skeleton(name: str) -> str:
    """What `name` looks like, for comparison only (never shown)."""
    representatives = _representatives()
    folded = unicodedata.normalize("NFKD", name).casefold()
    mapped = "".join(representatives.get(char, char) for char in folded
                     if not unicodedata.combining(char) and unicodedata.category(char) != "Cf")
    return unicodedata.normalize("NFKD", mapped)
