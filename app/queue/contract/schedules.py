"""The strict request models of schedules, which validate the API's and the page's input the
same way (failing with ``InvalidInput`` per field)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from app.queue.contract.fields import (
    JOB_TYPES_MARK,
    Partition,
    PriorityLabel,
    json_object_problem,
)
from app.queue.rules import cron
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.job_fields import DEFAULT_PRIORITY
from app.queue.vocabulary.states import PRIORITIES

MAX_NAME_LENGTH = 50  # "schedule:" + name must fit the 64-character event actor
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._ -]{{0,{MAX_NAME_LENGTH - 1}}}")

CatchUp = Literal["skip", "one"]
# What the API document says of each field (the validators below enforce it, with their own
# messages; cron expressions and time zones are checked beyond what a schema can say).
Name = Annotated[
    str,
    WithJsonSchema(
        {"type": "string", "pattern": f"^{_NAME.pattern}$", "maxLength": MAX_NAME_LENGTH}
    ),
]
CronText = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": cron.MAX_CRON_LENGTH,
            "description": "Five fields: minute hour day-of-month month day-of-week.",
        }
    ),
]
TimeZone = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": cron.MAX_TIMEZONE_LENGTH,
            "description": "An IANA time zone name, e.g. Europe/Paris.",
        }
    ),
]
JobTypeName = Annotated[str, WithJsonSchema({"type": "string", JOB_TYPES_MARK: True})]


def _settings(info: ValidationInfo) -> QueueSettings:
    settings = (info.context or {}).get("settings")
    assert isinstance(settings, QueueSettings), "validate with context={'settings': ...}"
    return settings


class _ScheduleFields(BaseModel):
    """The checks every schedule field gets, whether it is created or changed."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @field_validator("name", check_fields=False)
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(
                f"must be 1-{MAX_NAME_LENGTH} characters: letters, digits, space, '.', '_' or "
                "'-', starting with a letter or digit"
            )
        return value

    @field_validator("cron", check_fields=False)
    @classmethod
    def _cron(cls, value: str) -> str:
        normalized = " ".join(value.split())
        if problem := cron.cron_problem(normalized):
            raise ValueError(problem)
        return normalized

    @field_validator("timezone", check_fields=False)
    @classmethod
    def _timezone(cls, value: str) -> str:
        cron.zone(value)  # raises ValueError saying why
        return value

    @field_validator("type", check_fields=False)
    @classmethod
    def _type(cls, value: str, info: ValidationInfo) -> str:
        if value not in _settings(info).job_types:
            raise ValueError("is not an allowed job type")
        return value

    @field_validator("payload", check_fields=False)
    @classmethod
    def _payload(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if problem := json_object_problem(value, _settings(info)):
            raise ValueError(problem)
        return value


class ScheduleCreate(_ScheduleFields):
    """``POST /schedules``: a new schedule."""

    name: Name
    cron: CronText
    timezone: TimeZone = "UTC"
    type: JobTypeName
    payload: dict[str, Any] = {}
    priority: PriorityLabel = DEFAULT_PRIORITY
    enabled: bool = True
    catch_up: CatchUp = "skip"
    partition: Partition | None = None

    def columns(self) -> dict[str, Any]:
        """The values as stored (priority as its number)."""
        return self.model_dump() | {"priority": PRIORITIES[self.priority]}


def without_null(schema: dict[str, Any]) -> None:
    """The change's document: a field is left out to keep its value, never sent as null."""
    for prop in schema["properties"].values():
        options = [option for option in prop.pop("anyOf", []) if option.get("type") != "null"]
        prop.pop("default", None)
        if options:
            prop.update(options[0])


class ScheduleUpdate(_ScheduleFields):
    """``PATCH /schedules/{id}``: only the fields given change; null is not a value."""

    model_config = ConfigDict(json_schema_extra=without_null)

    name: Name | None = None
    cron: CronText | None = None
    timezone: TimeZone | None = None
    type: JobTypeName | None = None
    payload: dict[str, Any] | None = None
    priority: PriorityLabel | None = None
    enabled: bool | None = None
    catch_up: CatchUp | None = None
    partition: Partition | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Defaults are not validated, so this only sees an explicit null.
        if value is None:
            raise ValueError("must not be null (leave the field out to keep its value)")
        return value

    def columns(self) -> dict[str, Any]:
        """The given values as stored."""
        changes = self.model_dump(exclude_unset=True)
        if "priority" in changes:
            changes["priority"] = PRIORITIES[changes["priority"]]
        return changes


Model = TypeVar("Model", bound=BaseModel)


def parse(model: type[Model], body: Mapping[str, Any], settings: QueueSettings) -> Model:
    """Validate ``body`` with ``model``; ``InvalidInput`` with one message per field."""
    try:
        return model.model_validate(dict(body), context={"settings": settings})
    except ValidationError as exc:
        raise InvalidInput(field_errors(exc)) from None


# pydantic's error types worded like the rest of the API.
_MESSAGES = {
    "extra_forbidden": "unknown field",
    "missing": "is required",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "dict_type": "must be a JSON object",
}


def field_errors(exc: ValidationError) -> dict[str, str]:
    """pydantic's errors as ``{field: message}``."""
    errors: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "body"
        if error["type"] == "value_error":
            message = str(error["ctx"]["error"])
        else:
            message = _MESSAGES.get(error["type"], error["msg"])
        errors.setdefault(field, message)
    return errors
