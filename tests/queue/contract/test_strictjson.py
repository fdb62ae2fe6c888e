"""Strict JSON decoding: the rules the API applies before any model sees a body."""

from __future__ import annotations

import pytest

from app.queue.contract.strictjson import MalformedJSON, decode_json, json_depth, text_problem


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a' in JSON object"),
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('{"a": -Infinity}', "-Infinity is not valid JSON"),
        ("[" * 40 + "]" * 40, "JSON nests deeper than 32 levels"),
        ('{"a": ', "malformed JSON"),
        ("{'a': 1}", "malformed JSON"),
    ],
)
def test_decode_refuses_what_the_api_refuses(text: str, reason: str) -> None:
    with pytest.raises(MalformedJSON) as caught:
        decode_json(text, 32)
    assert str(caught.value) == reason


def test_parse_errors_do_not_echo_positions() -> None:
    """A parser message says where it stopped (line, column, char): none of it is passed on."""
    for text in ('{"secret": "abc"', '{"a": 1,}', "\n\n  {x}", '{"a": tru}'):
        with pytest.raises(MalformedJSON) as caught:
            decode_json(text, 32)
        assert str(caught.value) == "malformed JSON"


def test_depth_and_text_rules() -> None:
    assert decode_json('{"a": [1, {"b": 2}]}', 4) == {"a": [1, {"b": 2}]}
    assert json_depth({"a": [1, {"b": 2}]}) == 4
    assert text_problem("fine") is None
    assert text_problem("a\x00") is not None
    assert text_problem("\udfff") is not None
