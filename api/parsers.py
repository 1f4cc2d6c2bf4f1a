"""The API's JSON parser: DRF's, with the nesting depth of a body bounded.

Python's json module parses nested arrays and objects recursively: a body of a few thousand
`[` raised RecursionError, a 500 with an HTML page. No request of this API nests deeper than
a few levels (a launch's `env`, a quota's `gpus_by_type`), so a body nested deeper than
MAX_JSON_DEPTH is refused before it is parsed: 400 `too_deeply_nested`. Its size is bounded
before that by DATA_UPLOAD_MAX_MEMORY_SIZE (413 `request_too_large`, api/errors.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import IO, Any, NoReturn

from django.conf import settings
from rest_framework import exceptions, parsers
from rest_framework.settings import api_settings

MAX_JSON_DEPTH = 32

# a JSON string, its escapes included (unterminated: to the end); brackets inside one nest nothing
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_ONE_KIND = str.maketrans("{}", "[]")


class TooDeeplyNested(exceptions.ParseError):
    default_code = "too_deeply_nested"
    default_detail = f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep."


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the arrays and objects of the JSON text `text` nest deeper than `limit`.

    Linear and in C: the strings go, then everything but brackets; each pass then removes the
    innermost pairs, one level at a time, at most `limit` passes. Malformed text is left to the
    parser to refuse."""
    if "[" not in text and "{" not in text:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_ONE_KIND)
    for _ in range(limit):
        inner_removed = brackets.replace("[]", "")
        if inner_removed == brackets:
            return False
        brackets = inner_removed
    return "[]" in brackets


class BoundedJSONParser(parsers.JSONParser):
    """application/json, refused past MAX_JSON_DEPTH levels of nesting (TooDeeplyNested)."""

    def parse(self, stream: IO[Any], media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:  # any JSON value
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc
        if json_depth_exceeds(text):
            raise TooDeeplyNested()
        try:
            return json.loads(text, parse_constant=_refuse_constant
                              if api_settings.STRICT_JSON else None)
        except RecursionError as exc:  # not reached within the limit; kept as a guard
            raise TooDeeplyNested() from exc
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc


def _refuse_constant(value: str) -> NoReturn:
    raise ValueError(f"{value} is not valid JSON")
