"""Prove, before the sanitizer's passes, that a text holds nothing any of its patterns could find.

Most log lines are plain prose, and the rules' patterns cost a pass over the text each. What a
match of a pattern needs is read from the pattern itself (its parse tree, as ``re`` compiles
it): the literals it cannot match without (``ghp_``, ``://``, ``BEGIN``), and the length of the
stretch without whitespace that any match fills (40 characters for a bare AWS secret). A text
that lacks what every pattern needs cannot hold a match, so the passes are skipped; any other
text gets all of them. Only ASCII text is screened: there a case-insensitive literal is exactly
its lower case, and every character class is read whole (each of the 128 characters tried).
"""

from __future__ import annotations

import re

# re's own parser and compiler: the public names (sre_parse, sre_compile) are deprecated aliases.
import re._compiler as _compiler
import re._parser as _parser
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_ASCII = tuple(chr(code) for code in range(128))
_SPACES = frozenset(char for char in _ASCII if char.isspace())
# A class of at most this many characters is needed as "one of them"; a wider one (a letter, a
# digit) is in nearly every text and is needed only as part of a stretch.
_FEW = 12


class Need:
    """Something every match of a pattern needs in the text it is found in."""

    def expression(self, text: str) -> str:
        """A Python expression true when the text named ``text`` (its lower case ``lowered``,
        its longest stretch without whitespace ``longest``) has it: this base need, always."""
        return "True"


ANYTHING = Need()  # the need of a pattern about which nothing is proven


@dataclass(frozen=True, slots=True)
class Literal(Need):
    """A string the match contains (in any case, when ``folded``: the string is lower case)."""

    string: str
    folded: bool

    def expression(self, text: str) -> str:
        return f"{self.string!r} in {'lowered' if self.folded else text}"


@dataclass(frozen=True, slots=True)
class Stretch(Need):
    """A stretch of at least ``length`` characters without whitespace."""

    length: int

    def expression(self, text: str) -> str:
        return f"longest >= {self.length}"


@dataclass(frozen=True, slots=True)
class AllOf(Need):
    """Every one of ``needs``."""

    needs: tuple[Need, ...]

    def expression(self, text: str) -> str:
        return "(" + " and ".join(need.expression(text) for need in self.needs) + ")"


@dataclass(frozen=True, slots=True)
class OneOf(Need):
    """At least one of ``needs``."""

    needs: tuple[Need, ...]

    def expression(self, text: str) -> str:
        return "(" + " or ".join(need.expression(text) for need in self.needs) + ")"


def all_of(needs: Iterable[Need]) -> Need:
    """Every one of ``needs``: nested ones flattened, the longest stretch standing for the
    shorter ones and read first (it costs a comparison), ``ANYTHING`` adding nothing."""
    flat: list[Need] = []
    for need in needs:
        flat.extend(need.needs if isinstance(need, AllOf) else (need,))
    stretches = [need.length for need in flat if isinstance(need, Stretch)]
    rest = [need for need in flat if not isinstance(need, Stretch) and need is not ANYTHING]
    kept = tuple(dict.fromkeys([*([Stretch(max(stretches))] if stretches else []), *rest]))
    return kept[0] if len(kept) == 1 else AllOf(kept) if kept else ANYTHING


def one_of(needs: Iterable[Need]) -> Need:
    """One of ``needs``: nested ones flattened; with ``ANYTHING`` among them, nothing is
    needed."""
    flat: list[Need] = []
    for need in needs:
        flat.extend(need.needs if isinstance(need, OneOf) else (need,))
    kept = tuple(dict.fromkeys(flat))
    return ANYTHING if not kept or ANYTHING in kept else kept[0] if len(kept) == 1 else OneOf(kept)


@dataclass(frozen=True, slots=True)
class _Reading:
    """What a piece of a pattern needs, the fewest characters it consumes, whether it may
    consume whitespace, whether it consumes nothing at all (an assertion), and (for a single
    character) the characters it matches."""

    need: Need
    width: int
    spaced: bool
    empty: bool = False
    chars: frozenset[str] | None = None


def need_of(pattern: re.Pattern[str]) -> Need:
    """What every match of ``pattern`` needs in an ASCII text."""
    parsed = _parser.parse(pattern.pattern, pattern.flags)
    return _whole(_sequence(list(parsed), pattern.flags | parsed.state.flags))


def _whole(reading: _Reading) -> Need:
    """A reading's need, with the unspaced stretch the whole of it fills."""
    stretch = Stretch(reading.width) if not reading.spaced and reading.width else ANYTHING
    return all_of((reading.need, stretch))


def _sequence(items: list[tuple[Any, Any]], flags: int) -> _Reading:
    """Items matched one after the other: each one's need, consecutive single characters as
    one literal (in lower case when one of them matches either case), and each run of items
    that consume no whitespace as one stretch."""
    needs: list[Need] = []
    literal: list[frozenset[str]] = []
    width = run = 0
    spaced = False
    for op, av in items:
        reading = _item(op, av, flags)
        width += reading.width
        if reading.spaced:
            spaced = True
            needs.append(Stretch(run) if run else ANYTHING)
            run = 0
        else:
            run += reading.width
        if reading.empty:
            continue  # an assertion consumes nothing: the characters around it are adjacent
        if reading.chars is not None and len({char.lower() for char in reading.chars}) == 1:
            literal.append(reading.chars)
            continue
        needs.append(_literal(literal))
        literal.clear()
        needs.append(reading.need)
    needs.append(_literal(literal))
    needs.append(Stretch(run) if run else ANYTHING)
    return _Reading(all_of(needs), width, spaced)


def _literal(chars: list[frozenset[str]]) -> Need:
    """The string that consecutive single characters spell (each given as the set of the one
    or two cases it matches), in lower case when one of them matches either case."""
    if not chars:
        return ANYTHING
    if all(len(char) == 1 for char in chars):
        return Literal("".join(min(char) for char in chars), folded=False)
    return Literal("".join(min(char).lower() for char in chars), folded=True)


def _item(op: Any, av: Any, flags: int) -> _Reading:
    """What one item of a parsed pattern needs and consumes."""
    if op in (_parser.LITERAL, _parser.NOT_LITERAL, _parser.ANY, _parser.IN):
        chars = _chars(op, tuple(av) if isinstance(av, list) else av, flags)
        few = 0 < len(chars) <= _FEW
        need = one_of(Literal(char, False) for char in sorted(chars)) if few else ANYTHING
        return _Reading(need, 1, bool(chars & _SPACES), chars=chars)
    if op is _parser.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        return _sequence(list(sub), (flags | add_flags) & ~del_flags)
    if op is _parser.ATOMIC_GROUP:
        return _sequence(list(av), flags)
    if op is _parser.BRANCH:
        readings = [_sequence(list(branch), flags) for branch in av[1]]
        return _Reading(
            one_of(_whole(reading) for reading in readings),
            min(reading.width for reading in readings),
            any(reading.spaced for reading in readings),
        )
    if op in (_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT):
        low, _, sub = av
        body = _sequence(list(sub), flags)
        return _Reading(_whole(body) if low else ANYTHING, low * body.width, body.spaced)
    if op in (_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT):
        return _Reading(ANYTHING, 0, spaced=False, empty=True)
    return _Reading(ANYTHING, 0, spaced=True)  # a back-reference, a conditional: nothing proven


@lru_cache(maxsize=1024)
def _chars(op: Any, av: Any, flags: int) -> frozenset[str]:
    """The ASCII characters one single-character item matches, tried one by one with the
    item compiled alone (so classes, categories and case folding are ``re``'s own)."""
    item = (op, list(av) if isinstance(av, tuple) and op is _parser.IN else av)
    alone = _compiler.compile(_parser.SubPattern(_parser.State(), [item]), flags)
    return frozenset(char for char in _ASCII if alone.fullmatch(char))


class Screen:
    """What the sanitizer's patterns need: those read on the text, and those read on its
    lower case (the gates of the rules that read only the lines holding a hint)."""

    def __init__(self, on_text: tuple[Need, ...], on_lowered: tuple[Need, ...]) -> None:
        self.on_text = on_text
        self.on_lowered = on_lowered
        # The needs as one expression, compiled once: read as a tree, each text would cost
        # hundreds of calls, more than the passes it spares.
        needs = [need.expression("text") for need in on_text]
        needs += [need.expression("lowered") for need in on_lowered]
        source = "lambda text, lowered, longest: " + (" or ".join(needs) or "False")
        self._met: Callable[[str, str, int], bool] = eval(source, {})  # noqa: S307

    def finds_nothing(self, text: str) -> bool:
        """Whether no pattern could match in ``text`` (False for text that is not ASCII)."""
        if not text.isascii():
            return False
        longest = max(map(len, text.split()), default=0)
        return not self._met(text, text.lower(), longest)


def screen_of(on_text: Iterable[re.Pattern[str]], on_lowered: Iterable[re.Pattern[str]]) -> Screen:
    """The screen of patterns read on a text and of patterns read on its lower case."""
    return Screen(
        tuple(need_of(pattern) for pattern in on_text),
        tuple(need_of(pattern) for pattern in on_lowered),
    )
