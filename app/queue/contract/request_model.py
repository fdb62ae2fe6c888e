"""The base of every request model: strict, unknown fields refused, and one way to fail
(a pydantic ``ValidationError`` becomes ``InvalidInput`` keyed by field path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, WrapValidator
from pydantic_core import PydanticCustomError

from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.errors import InvalidInput

# The error type of every message written here; pydantic's own errors get the field's rule.
RULE = "queuelog_rule"
_MESSAGES = {"extra_forbidden": "unknown field", "missing": "is required"}


def refuse(message: str, field: str | None = None) -> PydanticCustomError:
    """An error saying ``message``; ``field`` names the field when a model-wide check raises it."""
    return PydanticCustomError(RULE, message, {"field": field} if field else None)


def says(message: str) -> WrapValidator:
    """Annotated metadata: any failure of the field it wraps is reported as ``message``, so a
    field answers with its rule (e.g. "must be an integer from 0 to 25") whatever broke it."""

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            own = [e for e in exc.errors() if e["type"] == RULE]
            raise PydanticCustomError(RULE, own[0]["msg"] if own else message) from None

    return WrapValidator(check)


def settings_of(info: ValidationInfo) -> QueueSettings:
    """The queue settings a model is validated against (passed as validation context)."""
    context = info.context or {}
    return context["settings"]  # type: ignore[no-any-return]


def error_key(loc: tuple[str | int, ...]) -> str:
    """A pydantic location as the API names fields: ``("jobs", 3, "type")`` -> ``jobs[3].type``."""
    key = ""
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            key += f".{part}" if key else part
    return key


def as_invalid_input(exc: ValidationError) -> InvalidInput:
    """Every error of ``exc`` as one ``InvalidInput``, first message per field."""
    errors: dict[str, str] = {}
    for error in exc.errors():
        loc = tuple(error["loc"])
        field = (error.get("ctx") or {}).get("field")
        if field:
            loc = (*loc, field)
        if error["type"] == RULE:
            message = error["msg"]
        else:
            message = _MESSAGES.get(error["type"], error["msg"])
        errors.setdefault(error_key(loc) or "body", message)
    return InvalidInput(errors)


class RequestModel(BaseModel):
    """A request body or query that validates itself: JSON types only (``true`` is not 1),
    unknown fields refused. Subclasses declare fields; ``parse`` is the one way in."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @classmethod
    def parse(cls, data: Mapping[str, Any], settings: QueueSettings, **context: Any) -> Self:
        """Validate ``data`` (a decoded JSON object or a query) or raise ``InvalidInput``."""
        try:
            return cls.model_validate(data, context={"settings": settings, **context})
        except ValidationError as exc:
            raise as_invalid_input(exc) from None


Query = TypeVar("Query", bound=RequestModel)


def parse_query(
    model: type[Query], args: Mapping[str, str], settings: QueueSettings | None = None
) -> Query:
    """Validate a query string as ``model``: an empty value means "not given", and a name
    given twice (in a multi-dict with ``getlist``, like Flask's ``request.args``) is refused,
    since two values of one filter would be ambiguous."""
    data: dict[str, Any] = {name: args[name] or None for name in args}
    repeated: dict[str, str] = {}
    if getlist := getattr(args, "getlist", None):
        repeated = {name: "must be given at most once" for name in args if len(getlist(name)) > 1}
    try:
        query = model.model_validate(data, context={"settings": settings})
    except ValidationError as exc:
        raise InvalidInput(as_invalid_input(exc).errors | repeated) from None
    if repeated:
        raise InvalidInput(repeated)
    return query
