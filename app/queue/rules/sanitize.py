"""Redact secrets from worker texts (errors, progress messages) before they are stored.

The text is read after folding look-alike characters (``sanitize_fold``) by three kinds of
rule: secrets known by their shape (``sanitize_shapes``: armoured keys, provider tokens, URL
credentials), by detect-secrets' plugins and keyword detector (``sanitize_detectors``), and by
their name in any common notation (``sanitize_notations``). Each secret is cut whole from the
original text, whose other words stay. Every pattern is bounded, and only the first
``max_bytes`` plus ``LOOKAHEAD`` characters are read, so hostile text costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.queue.rules import sanitize_detectors, sanitize_shapes
from app.queue.rules.sanitize_detectors import keyword_spans, plugin_spans
from app.queue.rules.sanitize_fold import fold
from app.queue.rules.sanitize_names import HINTS
from app.queue.rules.sanitize_notations import named_values
from app.queue.rules.sanitize_screen import screen_of
from app.queue.rules.sanitize_shapes import (
    absolute_paths,
    armoured_blocks,
    provider_tokens,
    url_credentials,
)

MARKER = "[REDACTED]"
PATH_MARKER = "[PATH]"
TRUNCATED = "…[truncated]"
# Characters read beyond the byte cap: what a long secret's redaction may bring into the kept
# part. Text further on could reach the answer only after a longer secret; it is cut.
LOOKAHEAD = 16_384
# What the rules below need to find anything: the named notations and the keyword detector read
# only the lines whose lower case holds one of HINTS (every detect-secrets keyword holds one).
SCREEN = screen_of(
    on_text=(*sanitize_shapes.TRIGGERS, *sanitize_detectors.TRIGGERS), on_lowered=(HINTS,)
)


def sanitize_error(text: str, max_bytes: int = 4096) -> str:
    """Return ``text`` with secrets and absolute paths redacted, capped at ``max_bytes``."""
    text = _clean_characters(text)
    window = _window(text, max_bytes + LOOKAHEAD)
    clean = _redact(window)
    if len(window) < len(text) and not clean.endswith(TRUNCATED):
        clean = _truncate(clean + TRUNCATED, max_bytes)
    return _truncate(clean, max_bytes)


def sanitize_lines(lines: Sequence[str], max_bytes: int) -> list[str]:
    """Each of ``lines`` as ``sanitize_error`` leaves it, capped at ``max_bytes``, read as one
    text (the patterns' cost is mostly per call): a secret that spans lines is redacted in each
    line it touches, and no line is merged with another or lost. Lines that hold a newline, or
    are too long to be read whole, are sanitized one by one."""
    joined = "\n".join(lines)
    if lines and "\x1b" not in joined and not any("\n" in line for line in lines):
        # Cleaning keeps every newline, and only an escape sequence could span one: the lines
        # cleaned as one text are the lines cleaned one by one, at a tenth of the calls.
        cleaned = _clean_characters(joined).split("\n")
    else:
        cleaned = [_clean_characters(line) for line in lines]
    if any("\n" in line or len(line) > max_bytes + LOOKAHEAD for line in cleaned):
        return [sanitize_error(line, max_bytes) for line in lines]
    spans = _spans("\n".join(cleaned))
    out: list[str] = []
    start = 0
    for line in cleaned:
        end = start + len(line)
        own = [
            (max(a, start) - start, min(b, end) - start, m)
            for a, b, m in spans
            if a < end and b > start
        ]
        out.append(_truncate(_applied(line, own), max_bytes))
        start = end + 1
    return out


def _window(text: str, limit: int) -> str:
    """The first ``limit`` characters, less a word cut at the end (a token's first characters
    may be too few to be recognised, and a long secret's redaction may bring them in)."""
    if len(text) <= limit:
        return text
    window = text[:limit]
    cut = max(window.rfind(space, limit - 256) for space in " \t\n")
    return window[:cut] if cut > 0 else window


def _redact(text: str) -> str:
    """``text`` with each secret replaced by MARKER and each path by PATH_MARKER."""
    return _applied(text, _spans(text))


def _spans(text: str) -> list[tuple[int, int, str]]:
    """Where ``text``'s secrets and paths are (in ``text`` itself), each with its marker."""
    folded = fold(text)
    if SCREEN.finds_nothing(folded.text):
        return []  # proven: no rule's pattern could match
    secrets = _merged(
        [
            *armoured_blocks(folded.text),
            *provider_tokens(folded.text),
            *url_credentials(folded.text),
            *plugin_spans(folded.text),
            *named_values(folded.text),
        ]
    )
    secrets = _merged([*secrets, *keyword_spans(folded.text, secrets)])
    paths = _merged(absolute_paths(folded.text))
    return [(*folded.original(a, b), marker) for a, b, marker in _merged_marked(secrets, paths)]


def _applied(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """``text`` with each span (sorted, apart) replaced by its marker."""
    parts: list[str] = []
    position = 0
    for start, end, marker in spans:
        parts.append(text[position:start])
        parts.append(marker)
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif start < end:
            merged.append((start, end))
    return merged


def _merged_marked(
    secrets: list[tuple[int, int]], paths: list[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    """Secrets and paths with their markers; where they overlap, the secret's marker wins."""
    marked = [(start, end, MARKER) for start, end in secrets]
    marked += [(start, end, PATH_MARKER) for start, end in paths]
    result: list[tuple[int, int, str]] = []
    for start, end, marker in sorted(marked):
        if result and start < result[-1][1]:
            last_start, last_end, last_marker = result[-1]
            winner = MARKER if MARKER in (marker, last_marker) else PATH_MARKER
            result[-1] = (last_start, max(end, last_end), winner)
        else:
            result.append((start, end, marker))
    return result


# ANSI escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks) and 2-byte ones.
_ANSI = re.compile(
    r"\x1b\[[0-?]{0,64}+[ -/]{0,16}+[@-~]?"
    r"|\x1b\][^\x07\x1b]{0,4096}+(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
)
# C0 and C1 controls except tab and newline, and the bidi overrides, isolates and marks that
# make text display in another order than it is stored (Trojan Source, CVE-2021-42574).
_INVISIBLE = dict.fromkeys(
    [
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        # Direction marks (ALM, LRM, RLM) and zero-width characters, which also hide a token
        # from the patterns by splitting it.
        0x061C,
        *range(0x200B, 0x2010),
        *range(0x2060, 0x2065),
        0xFEFF,
    ]
)


def _clean_characters(text: str) -> str:
    """Drop terminal escapes, control and bidi characters, NUL and lone surrogates (a database
    may refuse NUL, browsers mangle surrogates, and a terminal would obey the escapes)."""
    text = text.replace("\x00", "\ufffd")
    text = _ANSI.sub("", text).translate(_INVISIBLE)
    return text.encode("utf-8", "replace").decode("utf-8")


def _truncate(text: str, max_bytes: int) -> str:
    """Cap ``text`` at ``max_bytes`` UTF-8 bytes, cutting on a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    room = max(max_bytes - len(TRUNCATED.encode("utf-8")), 0)
    return encoded[:room].decode("utf-8", "ignore") + TRUNCATED
