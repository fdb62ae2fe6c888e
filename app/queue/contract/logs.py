"""The wire contract of attempt logs: the body a worker sends (``POST /jobs/{id}/logs``), the
answers of that route and of ``GET /jobs/{id}/logs``, and the functions that build them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, WrapValidator

from app.queue.contract.fields import Attempt
from app.queue.contract.job_responses import Instant, ResponseModel
from app.queue.contract.request_model import RequestModel, refuse, says
from app.queue.contract.strictjson import mend_surrogates
from app.queue.usecases.attempt_logs import (
    MAX_ATTEMPT_BYTES,
    MAX_LINE_BYTES,
    MAX_LINES,
    Appended,
    AttemptLog,
    LogLine,
)
from app.queue.vocabulary.timeutil import iso

_LINE_RULE = f"must be a string of at most {MAX_LINE_BYTES} bytes in UTF-8"


def _within_line_limit(value: str) -> str:
    if len(value.encode()) > MAX_LINE_BYTES:
        raise refuse(_LINE_RULE)
    return value


LogText = Annotated[
    str,
    # What a program printed, lone surrogates included (a file name that is not UTF-8): mended,
    # as errors are, not refused with the rest of the request.
    BeforeValidator(mend_surrogates),
    AfterValidator(_within_line_limit),
    says(_LINE_RULE),
    Field(max_length=MAX_LINE_BYTES),
]


def _lines_rule(rule: str) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """A list's own failures say ``rule``; a line's keep their place (``lines[3]``)."""

    def validate(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            if all(error["loc"] for error in exc.errors()):
                raise
            raise refuse(rule) from None

    return validate


CarriedLines = Annotated[
    list[LogText],
    Field(
        max_length=MAX_LINES,
        description=f"Up to {MAX_LINES} lines for the log of the item's attempt, as "
        "`POST /jobs/{id}/logs` takes them; stored with the item in its transaction, and only "
        "when the item lands (a refused item stores none).",
    ),
    WrapValidator(_lines_rule(f"must be a list of at most {MAX_LINES} strings")),
]


class LogsBody(RequestModel):
    """``POST /jobs/{id}/logs``: lines from the worker holding the attempt."""

    attempt: Attempt
    lines: Annotated[
        list[LogText],
        Field(
            min_length=1,
            max_length=MAX_LINES,
            description=f"1 to {MAX_LINES} lines, each at most {MAX_LINE_BYTES} bytes in UTF-8; "
            "sanitized of credentials before they are stored. An attempt keeps at most "
            f"{MAX_ATTEMPT_BYTES // 1024} KiB: past it the oldest lines are dropped, and a "
            "marker line says how many.",
        ),
        WrapValidator(_lines_rule(f"must be a list of 1 to {MAX_LINES} strings")),
    ]


class LogsAppended(ResponseModel):
    """What an append stored: its lines, and the older lines of the attempt it dropped."""

    accepted: Annotated[int, Field(ge=1, le=MAX_LINES)]
    dropped: Annotated[
        int,
        Field(ge=0, description="Older lines of the attempt dropped to keep it within its cap."),
    ]


class LogLineOut(ResponseModel):
    """One stored line: when the server received it, and its sanitized text."""

    at: Instant
    text: str


class AttemptLogOut(ResponseModel):
    """The lines one attempt kept, oldest first."""

    attempt: Annotated[int, Field(ge=1)]
    lines: list[LogLineOut]


class JobLogs(ResponseModel):
    """A job's attempt logs, by attempt (admins only)."""

    attempts: list[AttemptLogOut]


def appended_out(appended: Appended) -> LogsAppended:
    """An append's answer."""
    return LogsAppended.built({"accepted": appended.accepted, "dropped": appended.dropped})


def logs_out(attempts: Sequence[AttemptLog]) -> JobLogs:
    """A job's logs, attempt by attempt, each line with its time."""
    out = [
        AttemptLogOut.built({"attempt": log.attempt, "lines": [_line_out(x) for x in log.lines]})
        for log in attempts
    ]
    return JobLogs.built({"attempts": out})


def _line_out(line: LogLine) -> LogLineOut:
    return LogLineOut.built({"at": iso(line.at), "text": line.text})
