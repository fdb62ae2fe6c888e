"""Strict JSON: decoding the only JSON text the API accepts, and checking that decoded values
and texts can be stored on every backend."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class MalformedJSON(ValueError):
    """The text is not strict JSON: malformed, duplicate keys, NaN/Infinity, or too deep."""


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every backend (NUL, lone surrogates), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if _LONE_SURROGATE.search(value):
        return "must be valid Unicode (no lone surrogates)"
    return None


def mend_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate replaced by U+FFFD (other values as they are): for
    text that reports rather than names something, such as an exception's message about a
    file name that is not UTF-8."""
    return _LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MalformedJSON(f"duplicate key {key!r} in JSON object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise MalformedJSON(f"{name} is not valid JSON")


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def decode_json(text: str, max_depth: int) -> Any:
    """``json.loads`` that refuses what the API refuses; raises ``MalformedJSON`` saying why.

    The parser's own message (line, column, character) is not passed on: it would echo the
    caller's input back and says nothing a client can act on."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except RecursionError:
        raise MalformedJSON(f"JSON nests deeper than {max_depth} levels") from None
    except MalformedJSON:
        raise
    except ValueError:
        raise MalformedJSON("malformed JSON") from None
    if json_depth(value) > max_depth:
        raise MalformedJSON(f"JSON nests deeper than {max_depth} levels")
    return value


def json_value_problem(value: Any, max_depth: int) -> str | None:
    """Why a decoded JSON value cannot be stored (depth, NUL, surrogates), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nests deeper than {max_depth} levels"
        if isinstance(item, dict):
            for key, child in item.items():
                if problem := text_problem(key):
                    return f"keys {problem}"
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if problem := text_problem(item):
                return f"strings {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "numbers must be finite"
    return None


def compact_size(value: Any) -> int:
    """The size in bytes of ``value`` as compact UTF-8 JSON, the size the payload limit counts."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
