"""Log lines sanitized together (``sanitize_lines``): every case of the sanitizer's tests, fed as
lines among others, comes back line for line as ``sanitize_error`` leaves it, and a secret that
spans lines is redacted in each line it touches."""

from __future__ import annotations

import pytest

from app.queue.rules.sanitize import MARKER, sanitize_error, sanitize_lines
from tests.queue.rules.sanitize_corpus import CORPUS, PEM_BODY, Case
from tests.queue.rules.test_sanitize import EARLIER, FOURTH_PASS, PGP_BLOCK, SECRETS, THIRD_PASS
from tests.queue.rules.test_sanitize_corpus import ORDINARY, surviving_pieces

LINE = 2048
CASES = [
    *(text for text, _ in [*EARLIER, *THIRD_PASS, *FOURTH_PASS]),
    *SECRETS.values(),
    *(case.text for case in CORPUS),
    *ORDINARY,
    "",
    "\x1b[31mred\x1b[0m \u202eevil\x00",
    "é" * 1024,
]
ONE_LINE = [text for text in CASES if "\n" not in text]
NEIGHBOURS = ["step 1: order 42 processed", "", "done in 3 s"]


@pytest.mark.parametrize("text", ONE_LINE)
def test_each_line_comes_back_as_sanitize_error_leaves_it(text: str) -> None:
    lines = [NEIGHBOURS[0], text, NEIGHBOURS[1], text, NEIGHBOURS[2]]
    assert sanitize_lines(lines, LINE) == [sanitize_error(line, LINE) for line in lines]


@pytest.mark.parametrize("case", CORPUS, ids=[case.notation for case in CORPUS])
def test_no_piece_of_a_secret_survives_when_its_text_comes_as_lines(case: Case) -> None:
    lines = [*NEIGHBOURS, *case.text.split("\n"), *NEIGHBOURS]
    clean = sanitize_lines(lines, LINE)
    assert len(clean) == len(lines)
    joined = "\n".join(clean)
    assert surviving_pieces(case.secret, case.text, joined) == [], joined
    assert clean[:3] == NEIGHBOURS  # (lines after a key block left open go with it)


@pytest.mark.parametrize(
    "block",
    [PGP_BLOCK, f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"],
)
def test_a_secret_spanning_lines_goes_from_each_line_it_touches(block: str) -> None:
    body = [line for line in block.split("\n") if line and "-----" not in line]
    lines = ["before", *block.split("\n"), "after"]
    clean = sanitize_lines(lines, LINE)
    assert len(clean) == len(lines) and clean[0] == "before" and clean[-1] == "after"
    assert MARKER in clean[1]
    for secret_line in body:
        assert not any(secret_line in line for line in clean), clean


def test_a_line_with_a_newline_or_too_long_is_sanitized_alone() -> None:
    lines = ["password=hunter22\nnext", "ok", "x" * 40_000 + " password=hunter22"]
    assert sanitize_lines(lines, LINE) == [sanitize_error(line, LINE) for line in lines]


@pytest.mark.parametrize(
    "lines",
    [
        ["nul \x00 here", "bidi \u202eevil\u2066", "c1 \x85\x9b and \x7f", "lone \ud800 half"],
        ["zero\u200bwidth", "", "tab\tkept", "\ufeffbom"],
    ],
)
def test_lines_are_cleaned_each_as_if_alone(lines: list[str]) -> None:
    assert sanitize_lines(lines, LINE) == [sanitize_error(line, LINE) for line in lines]


def test_an_escape_sequence_left_open_ends_with_its_line() -> None:
    lines = ["title \x1b]0;evil", "kept words", "colour \x1b[31", "kept too"]
    assert sanitize_lines(lines, LINE) == ["title ", "kept words", "colour ", "kept too"]
