"""The request model base: strict JSON types, field paths for nested errors, the fingerprint."""

from __future__ import annotations

import hashlib
from typing import Annotated

import pytest
from pydantic import Field

from app.config import DEFAULTS
from app.queue.contract.fields import Attempt, JobType
from app.queue.contract.job_requests import EnqueueBody
from app.queue.contract.request_model import RequestModel, error_key
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.errors import InvalidInput

SETTINGS = QueueSettings.from_config(DEFAULTS | {"JOB_TYPES": ["email.send"]})


class Item(RequestModel):
    type: JobType
    attempt: Attempt | None = None


class Batch(RequestModel):
    jobs: Annotated[list[Item], Field(min_length=1)]


@pytest.mark.parametrize(
    ("loc", "key"),
    [
        (("type",), "type"),
        (("jobs", 3, "type"), "jobs[3].type"),
        (("jobs", 0), "jobs[0]"),
        (("a", "b", 1, 2, "c"), "a.b[1][2].c"),
        ((), ""),
    ],
)
def test_error_key_names_nested_paths(loc: tuple[str | int, ...], key: str) -> None:
    assert error_key(loc) == key


def test_nested_errors_are_keyed_by_path() -> None:
    jobs = [{"type": "email.send"}] * 3 + [{"type": "nope", "attempt": True, "extra": 1}]
    with pytest.raises(InvalidInput) as caught:
        Batch.parse({"jobs": jobs}, SETTINGS)
    assert caught.value.errors == {
        "jobs[3].type": "is not an allowed job type",
        "jobs[3].attempt": "must be a positive integer",
        "jobs[3].extra": "unknown field",
    }
    with pytest.raises(InvalidInput) as caught:
        Batch.parse({"jobs": "x"}, SETTINGS)
    assert set(caught.value.errors) == {"jobs"}


@pytest.mark.parametrize("value", [True, 1.0, "1"])
def test_json_booleans_and_numbers_are_not_integers(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        Item.parse({"type": "email.send", "attempt": value}, SETTINGS)
    assert caught.value.errors == {"attempt": "must be a positive integer"}


def test_fingerprint_covers_every_field_of_the_model() -> None:
    """No hand-kept field list: a field added to the model changes the fingerprint."""

    class WithTags(EnqueueBody):
        tags: list[str] = Field(default_factory=lambda: ["a"])

    body = {"type": "email.send", "idempotency_key": "k"}
    plain = EnqueueBody.parse(body, SETTINGS)
    tagged = WithTags.parse(body, SETTINGS)
    assert tagged.fingerprint() != plain.fingerprint()
    # ...while the key itself, which names the request, is not part of it.
    assert plain.fingerprint() == EnqueueBody.parse({"type": "email.send"}, SETTINGS).fingerprint()


def test_fingerprint_is_the_one_stored_before_models() -> None:
    """Rows enqueued by earlier versions keep matching their replays."""
    body = EnqueueBody.parse(
        {"type": "email.send", "payload": {"b": 1}, "delay_seconds": 5}, SETTINGS
    )
    legacy = (
        '{"delay_seconds":5.0,"max_retries":3,"payload":{"b":1},"priority":"low",'
        '"run_at":null,"type":"email.send"}'
    )
    assert body.fingerprint() == hashlib.sha256(legacy.encode()).hexdigest()
