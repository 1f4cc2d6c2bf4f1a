"""What a template's and a launch's text fields may hold, and how the pages' text areas read.

One rule for an admin's template (catalogue/forms.py) and a researcher's launch (the launch
validation in workloads), so the two never disagree.
"""

from __future__ import annotations

import unicodedata

# a command or its arguments: at most this many items, each at most this long
MAX_ARGV_ITEMS = 256
MAX_ARG_LENGTH = 4096

# refused in names: control (Cc), format (Cf) and surrogate (Cs) characters
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
# ZERO WIDTH NON-JOINER and ZERO WIDTH JOINER: kept between two visible non-ASCII characters
_JOINERS = frozenset("\u200c\u200d")


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


def argv_lines(text: str) -> list[str]:
    """One argv item per line; blank lines are dropped, everything else is kept as typed."""
    return [line.rstrip("\r") for line in text.split("\n") if line.rstrip("\r") != ""]


def env_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """KEY=value lines → ({KEY: value}, errors). The value is everything after the first '='."""
    env: dict[str, str] = {}
    errors: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            errors.append(f"Line {number} is not KEY=value.")
        elif key in env:
            errors.append(f"Line {number} sets {key} a second time.")
        else:
            env[key] = value
    return env, errors
