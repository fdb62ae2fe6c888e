"""The screen before the sanitizer's passes (``sanitize_screen``): what it reads from a pattern,
that no text holding a match of any rule's pattern gets past it, that every pattern of the rules
is one it reads or one read only after those, and that plain log lines do get past it."""

from __future__ import annotations

import re

import pytest
from detect_secrets.plugins.keyword import DENYLIST
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.queue.rules import (
    sanitize,
    sanitize_detectors,
    sanitize_fold,
    sanitize_names,
    sanitize_notations,
    sanitize_shapes,
)
from app.queue.rules.sanitize import SCREEN
from app.queue.rules.sanitize_screen import AllOf, Literal, Stretch, need_of
from tests.queue.rules.sanitize_corpus import CORPUS
from tests.queue.rules.test_sanitize import EARLIER, FOURTH_PASS, SECRETS, THIRD_PASS

ON_TEXT = (*sanitize_shapes.TRIGGERS, *sanitize_detectors.TRIGGERS)
# Read on the lower case: HINTS by the screen, the keyword detector's keywords as HINTS hold them.
ON_LOWERED = (sanitize_names.HINTS, sanitize_detectors._KEYWORD)
# The rules' other patterns, and why the screen need not read them: each is read only on what
# a screened pattern found, or finds no secret.
READ_AFTER = {
    "sanitize_shapes._ARMOUR_END": "sought only after a block's BEGIN",
    "sanitize_shapes._TOKEN_LIKE": "reads a bearer token found",
    "sanitize_detectors._TOKEN_TAIL": "extends a plugin's match",
    "sanitize_names._STRONG": "reads a name found on a line with a hint",
    "sanitize_names._WORDS": "reads a name found on a line with a hint",
    "sanitize_names._PLACEHOLDER": "reads a value found on a line with a hint",
    "sanitize_names._CLOSING": "reads a value found on a line with a hint",
    "sanitize_fold._NON_ASCII": "folds characters, finds nothing",
    "sanitize._ANSI": "cleans every text, screened or not, finds nothing",
    **{
        f"sanitize_notations.{name}": "read only on the lines holding one of HINTS"
        for name, value in vars(sanitize_notations).items()
        if isinstance(value, re.Pattern)
    },
}
PLAIN = [
    "step 3: order 4711 row 51 processed, 3 rows updated",
    "Sent 12 emails in 0.4 s (2 bounced)",
    "retrying in 30 seconds, attempt 2 of 5",
    "step 1: order 42 processed\n\ndone in 3 s",
]


def _patterns(module: object) -> dict[str, re.Pattern[str]]:
    """Every compiled pattern a module holds, alone or in a tuple, by qualified name."""
    found: dict[str, re.Pattern[str]] = {}
    for name, value in vars(module).items():
        values = value if isinstance(value, tuple) else (value,)
        for index, item in enumerate(values):
            if isinstance(item, re.Pattern):
                found[f"{module.__name__.rsplit('.', 1)[1]}.{name}"] = item
                if len(values) > 1:
                    found[f"{module.__name__.rsplit('.', 1)[1]}.{name}[{index}]"] = item
    return found


def test_every_pattern_of_the_rules_is_screened_or_read_only_after_one() -> None:
    modules = (
        sanitize,
        sanitize_shapes,
        sanitize_detectors,
        sanitize_notations,
        sanitize_names,
        sanitize_fold,
    )
    screened = {id(pattern) for pattern in (*ON_TEXT, *ON_LOWERED)}  # the keywords: below
    for module in modules:
        for name, pattern in _patterns(module).items():
            if id(pattern) not in screened and not name.endswith("]"):
                assert name in READ_AFTER, f"{name}: a new pattern, screen it or say why not"


def test_the_screen_reads_the_rules_patterns() -> None:
    assert SCREEN.on_text == tuple(need_of(pattern) for pattern in ON_TEXT)
    assert SCREEN.on_lowered == (need_of(sanitize_names.HINTS),)


def test_every_keyword_of_the_keyword_detector_holds_a_hint() -> None:
    # Each keyword is letters with optional underscores ("api_?key"): every spelling is listed.
    for keyword in DENYLIST:
        assert re.fullmatch(r"(?:[a-zñ]|_\?)+", keyword), keyword
        spellings = {""}
        for piece in re.findall(r"_\?|[a-zñ]", keyword):
            endings = ("", "_") if piece == "_?" else (piece,)
            spellings = {start + end for start in spellings for end in endings}
        for spelling in spellings:
            assert sanitize_names.HINTS.search(spelling), spelling


def test_a_pattern_needs_its_literals_and_its_unspaced_stretch() -> None:
    assert need_of(re.compile(r"(?<![\w-])ghp_[A-Za-z0-9]{36}")) == AllOf(
        (Stretch(40), Literal("ghp_", folded=False))
    )
    assert need_of(re.compile(r"(?i:bearer) x")) == AllOf(
        (Stretch(6), Literal("bearer", folded=True), Literal(" x", folded=False))
    )
    assert need_of(re.compile(r"[A-Za-z0-9/+]{40}")) == Stretch(40)


@pytest.mark.parametrize("text", PLAIN)
def test_plain_log_lines_are_screened(text: str) -> None:
    assert SCREEN.finds_nothing(text)


@pytest.mark.parametrize("text", ["ordre n° 4711 traité", "step 3 done in 2 ms", "ok"])
def test_text_that_is_not_ascii_is_never_screened_and_short_text_may_be(text: str) -> None:
    assert SCREEN.finds_nothing(text) == text.isascii()


SECRET_TEXTS = [
    *(text for text, _ in [*EARLIER, *THIRD_PASS, *FOURTH_PASS]),
    *SECRETS.values(),
    *(case.text for case in CORPUS),
]


@pytest.mark.parametrize("text", [text for text in SECRET_TEXTS if text.isascii()])
def test_no_text_of_the_sanitizer_tests_is_screened(text: str) -> None:
    assert not SCREEN.finds_nothing(text)


def _matching(patterns: tuple[re.Pattern[str], ...]) -> st.SearchStrategy[tuple[int, str]]:
    """A pattern's index and an ASCII text that holds a match of it."""
    return st.integers(0, len(patterns) - 1).flatmap(
        lambda index: st.tuples(
            st.just(index),
            st.from_regex(patterns[index], alphabet=st.characters(codec="ascii")),
        )
    )


# Each pattern on its own, so each is tried as often (one draw among all of them left some
# patterns with a handful of texts in a thousand).
@pytest.mark.parametrize("pattern", ON_TEXT, ids=range(len(ON_TEXT)))
@settings(max_examples=25, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_no_text_holding_a_match_gets_past_the_screen(
    pattern: re.Pattern[str], data: st.DataObject
) -> None:
    text = data.draw(st.from_regex(pattern, alphabet=st.characters(codec="ascii")))
    assume(pattern.search(text))
    assert not SCREEN.finds_nothing(text), pattern.pattern


@settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(_matching(ON_LOWERED))
def test_no_text_whose_lower_case_holds_a_hint_gets_past_the_screen(
    found: tuple[int, str],
) -> None:
    index, text = found
    assume(ON_LOWERED[index].search(text.lower()))
    assert not SCREEN.finds_nothing(text), ON_LOWERED[index].pattern
