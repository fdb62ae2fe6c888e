"""Look-alike characters are read as ASCII, and the original text is what is kept."""

from __future__ import annotations

import pytest

from app.queue.rules.sanitize_fold import fold, fold_character


@pytest.mark.parametrize(
    ("char", "ascii"),
    [
        ("\uff1d", "="),  # full-width equals (NFKC)
        ("\uff1a", ":"),  # full-width colon (NFKC)
        ("\ua789", ":"),  # modifier letter colon (confusables)
        ("\u1400", "="),  # Canadian syllabics hyphen (confusables)
        ("\u0430", "a"),  # Cyrillic a (confusables)
        ("\u201c", '"'),  # left double quotation mark (confusables: two apostrophes)
        ("\U0001d429", "p"),  # mathematical bold p (NFKC)
        ("\ufb01", "fi"),  # ligature (NFKC, two characters)
        ("\u00e9", "\u00e9"),  # a letter with no ASCII look-alike stays
    ],
)
def test_characters_fold_to_their_ascii_look_alike(char: str, ascii: str) -> None:
    assert fold_character(char) == ascii


def test_spans_of_the_folded_text_map_back_to_the_original() -> None:
    text = "\ufb01le p\u0430ss\uff1dv\u00e9ry"
    folded = fold(text)
    assert folded.text == "file pass=v\u00e9ry"
    start = folded.text.index("v")
    assert text[slice(*folded.original(start, len(folded.text)))] == "v\u00e9ry"
    # A span that starts or ends inside one character's folding takes the whole character.
    assert folded.original(1, 2) == (0, 1)
    assert folded.original(0, 3) == (0, 2)


def test_ascii_text_is_its_own_folding() -> None:
    folded = fold("password=x")
    assert folded.text == "password=x" and folded.original(3, 7) == (3, 7)
