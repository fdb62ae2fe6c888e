"""Fold look-alike characters to ASCII, so one set of rules reads a full-width equals as `=`.

Each character goes through NFKC (full-width forms, mathematical letters, ligatures) and then
Unicode's confusables table (Cyrillic a, the modifier letter colon, curly quotes), as
shipped by confusable-homoglyphs. Folding works character by character and remembers where each
folded character came from, so a secret found in the folded text is cut from the original one.
"""

from __future__ import annotations

import bisect
import json
import re
import string
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# Unicode's prototype of the double quote and its look-alikes is two apostrophes.
_PROTOTYPES = {ch: ch for ch in string.printable if not ch.isspace()} | {"''": '"'}


def _confusables() -> dict[str, str]:
    """Non-ASCII character -> the ASCII character it looks like.

    Only the entries of printable ASCII characters are decoded from the package's table (about
    a hundred of its 9,600): decoding all of it would leave megabytes of freed objects in every
    server process."""
    table = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    decoder = json.JSONDecoder()
    folded: dict[str, str] = {}
    for prototype, ascii_char in _PROTOTYPES.items():
        at = table.find(json.dumps(prototype) + ": [")
        if at == -1:
            continue
        entries, _ = decoder.raw_decode(table, table.index("[", at))
        for entry in entries:
            look_alike = entry["c"]
            if len(look_alike) == 1 and not look_alike.isascii():
                folded.setdefault(look_alike, ascii_char)
    return folded


_CONFUSABLE = _confusables()


@lru_cache(maxsize=4096)
def fold_character(char: str) -> str:
    """``char`` as NFKC and then its ASCII look-alike (unchanged when it has neither)."""
    return "".join(_CONFUSABLE.get(c, c) for c in unicodedata.normalize("NFKC", char))


@dataclass(frozen=True, slots=True)
class Folded:
    """A folded text and the way back to the positions of the original one."""

    text: str
    # For each non-ASCII original character: where its folding starts in ``text``, where the
    # character is in the original, and how many folded characters it became.
    starts: tuple[int, ...] = ()
    origins: tuple[int, ...] = ()
    widths: tuple[int, ...] = ()

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original span that the folded span ``[start, end)`` came from."""
        return self._position(start, rounding_up=False), self._position(end, rounding_up=True)

    def _position(self, folded: int, rounding_up: bool) -> int:
        index = bisect.bisect_right(self.starts, folded) - 1
        if index < 0:
            return folded
        start, origin, width = self.starts[index], self.origins[index], self.widths[index]
        if folded >= start + width:
            return origin + 1 + folded - (start + width)
        # Inside one character's folding: the whole character belongs to the span.
        return origin + 1 if rounding_up and folded > start else origin


def fold(text: str) -> Folded:
    """``text`` with every character folded, and the map back to ``text``'s positions."""
    if text.isascii():
        return Folded(text)
    pieces: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    widths: list[int] = []
    position = 0  # in the original
    length = 0  # of the folded text so far
    for run in _NON_ASCII.finditer(text):
        pieces.append(text[position : run.start()])
        length += run.start() - position
        for offset, char in enumerate(run.group()):
            folded = fold_character(char)
            starts.append(length)
            origins.append(run.start() + offset)
            widths.append(len(folded))
            pieces.append(folded)
            length += len(folded)
        position = run.end()
    pieces.append(text[position:])
    return Folded("".join(pieces), tuple(starts), tuple(origins), tuple(widths))
