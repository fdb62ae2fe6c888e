"""Answers built as response models: what ``model_construct`` would build, valid, in field
order, with the fields that have defaults present only where an answer promises them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from app.queue.contract import response_builders
from app.queue.contract.bulk import BulkPreview
from app.queue.contract.job_responses import (
    BeatResults,
    ClaimedJobs,
    CreatedJobs,
    EventList,
    FinishResults,
    JobList,
    JobOut,
    ResponseModel,
    hidden_from_others,
)
from app.queue.vocabulary.errors import NotFound
from app.queue.vocabulary.jobs import Beat, Event, Outcome, ParentResult
from tests.builders import job_value

AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
RUNNING = job_value(
    status="running",
    attempts=2,
    claimed_at=AT,
    lease_expires_at=AT,
    worker_id="w",
    secret_names="api_key",
    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    error="boom",
)


def _sent(answer: BaseModel) -> dict[str, Any]:
    return answer.model_dump(mode="json", exclude_unset=True)


def _fits(answer: ResponseModel) -> None:
    """``answer`` validates as its model, and its fields stand in the model's order."""
    again = type(answer).model_validate(_sent(answer))
    assert again.model_dump_json(exclude_unset=True) == answer.model_dump_json(exclude_unset=True)
    for value in answer.__dict__.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ResponseModel):
                _fits(item)


def test_built_is_what_model_construct_builds() -> None:
    job = response_builders.job_out(RUNNING)
    values = {name: value for name, value in job if name in job.model_fields_set}
    built = JobOut.built(dict(values))
    constructed = JobOut.model_construct(**values)
    assert built.model_fields_set == constructed.model_fields_set == set(values)
    assert built.__dict__ == constructed.__dict__
    assert list(built.__dict__) == list(JobOut.model_fields)
    assert built.secrets is built.duplicate is None  # defaults, not sent
    assert built.model_dump_json(exclude_unset=True) == job.model_dump_json(exclude_unset=True)


@pytest.mark.parametrize(
    ("options", "extra"),
    [
        ({}, ["error"]),
        ({"secrets": {"api_key": "k"}}, ["error", "secrets"]),
        ({"duplicate": True}, ["error", "duplicate"]),
    ],
)
def test_a_job_sends_its_optional_fields_only_when_promised(
    options: dict[str, Any], extra: list[str]
) -> None:
    answer = response_builders.job_out(RUNNING, **options)
    required = [name for name, field in JobOut.model_fields.items() if field.is_required()]
    assert list(_sent(answer)) == required + extra
    _fits(answer)


def test_every_answer_fits_its_model_in_field_order() -> None:
    event = Event(1, 1, AT, None, "pending", "producer", None, "enqueued", "x", None)
    refused = NotFound("job 9 does not exist")
    built: list[ResponseModel] = [
        response_builders.claimed_out(
            [RUNNING],
            {1: {"api_key": "k"}},
            {1: [ParentResult(7, "email.send", "completed", {"sent": True})]},
            many=True,
        ),
        response_builders.finish_out(
            [Outcome(1, 2, True), Outcome(9, 1, True)], [RUNNING, refused]
        ),
        response_builders.beats_out([Beat(1, 2), Beat(9, 1)], [RUNNING, refused]),
        response_builders.events_out([event]),
        response_builders.bulk_applied_out(3, 2),
    ]
    for answer in built:
        _fits(answer)
    finish = _sent(built[1])["results"]
    assert [list(item) for item in finish] == [["id", "status", "job"], ["id", "status", "detail"]]
    assert list(_sent(built[2])["results"][0]) == ["id", "status", "lease_expires_at"]


def test_what_only_admins_see_is_found_in_every_answer_that_holds_it() -> None:
    """``app.api.respond`` leaves these out of every answer to a caller who may not read
    error texts, whichever route built it."""
    assert hidden_from_others(JobOut) == {"error": True}
    assert hidden_from_others(JobList) == {"jobs": {"__all__": {"error": True}}}
    assert hidden_from_others(ClaimedJobs) == {"jobs": {"__all__": {"error": True}}}
    assert hidden_from_others(CreatedJobs) == {"jobs": {"__all__": {"error": True}}}
    assert hidden_from_others(FinishResults) == {
        "results": {"__all__": {"job": {"error": True}}},
        "jobs": {"__all__": {"error": True}},  # the jobs a finish-and-claim claimed
    }
    assert hidden_from_others(EventList) == {"events": {"__all__": {"error": True}}}
    assert hidden_from_others(BulkPreview) == {"sample": {"__all__": {"error": True}}}
    assert hidden_from_others(BeatResults) is None
    failed = replace(RUNNING, error="x")
    answer = response_builders.finish_out(
        [Outcome(1, 2, True)], [failed], claimed=([failed], {}, {})
    )
    hidden = hidden_from_others(FinishResults)
    sent = json.loads(answer.__pydantic_serializer__.to_json(answer, exclude=hidden))
    assert "error" not in sent["results"][0]["job"] and "error" not in sent["jobs"][0]
