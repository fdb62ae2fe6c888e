"""Flask-WTF forms of the pages. Field rules that the API shares live in the request models
(``app.queue.contract``) and the use cases; these forms only shape the browser's input into the
same requests, and show the limits a per-job field is declared with (``job_fields``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    HiddenField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import InputRequired, Length, Optional
from wtforms.widgets import NumberInput

from app.queue.contract.bulk import MAX_REASON_LENGTH
from app.queue.contract.schedules import MAX_NAME_LENGTH
from app.queue.contract.strictjson import MalformedJSON, decode_json
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.job_fields import (
    DEFAULT_PRIORITY,
    IDEMPOTENCY_KEY,
    MAX_RETRIES,
    PARTITION,
    TIMESTAMP_LENGTH,
)
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import PRIORITIES, Role

ROLE_CHOICES = [role.value for role in Role]
# The lifetimes offered on the tokens page (the CLI takes any duration).
TOKEN_LIFETIMES: dict[str, timedelta | None] = {
    "30 days": timedelta(days=30),
    "90 days": timedelta(days=90),
    "1 year": timedelta(days=365),
    "7 days": timedelta(days=7),
    "never (until revoked)": None,
}
PRIORITY_CHOICES = list(PRIORITIES)


def whole_or_text(text: str | None) -> int | str:
    """A number field as the API would get it: a whole number, or anything else as typed, for
    the request model to refuse in its own words."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else text


def payload_value(text: str | None, max_depth: int) -> Any:
    """A payload field decoded as the API decodes a body (empty: ``{}``); InvalidInput naming
    ``payload`` when it is not JSON."""
    try:
        return decode_json(text or "{}", max_depth)
    except MalformedJSON as exc:
        raise InvalidInput({"payload": f"is not valid JSON ({exc})"}) from None


class LoginForm(FlaskForm):
    """User name and password."""

    username = StringField("User name", validators=[InputRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[InputRequired(), Length(max=1024)])


class CodeForm(FlaskForm):
    """A code from the authenticator app, or a recovery code."""

    code = StringField("Code", validators=[InputRequired(), Length(max=32)])


class SecondFactorChangeForm(FlaskForm):
    """The password and a current code, to turn the second factor off or renew its recovery
    codes (a stolen session alone can do neither)."""

    password = PasswordField("Password", validators=[InputRequired(), Length(max=1024)])
    code = StringField("Code", validators=[InputRequired(), Length(max=32)])


class PasswordChangeForm(FlaskForm):
    """The user's current password and the new one."""

    current_password = PasswordField(
        "Current password", validators=[InputRequired(), Length(max=1024)]
    )
    new_password = PasswordField("New password", validators=[InputRequired(), Length(max=1024)])


class ConfirmForm(FlaskForm):
    """No fields: a POST button that carries only the CSRF token (cancel, retry, logout...)."""


class EnqueueForm(FlaskForm):
    """A new job. No field validates here: the page turns the form into the body the API would
    get, and ``EnqueueBody`` refuses what it refuses, in the API's words, once."""

    type = SelectField("Type", validate_choice=False)  # JOB_TYPES: EnqueueBody checks it
    payload = TextAreaField("Payload (JSON object)", default="{}")
    # The options shown stop at the user's cap, but a forged value must reach
    # enqueueing.enqueue, which refuses it with the same 403 the API gives.
    priority = SelectField("Priority", default=DEFAULT_PRIORITY, validate_choice=False)
    max_retries = StringField(
        "Max retries",
        default=str(MAX_RETRIES.default),
        description=MAX_RETRIES.hint,
        widget=NumberInput(min=MAX_RETRIES.low, max=MAX_RETRIES.high),
    )
    idempotency_key = StringField(
        "Idempotency key (optional)", render_kw={"maxlength": IDEMPOTENCY_KEY.length}
    )
    run_at = StringField("Run at (UTC, optional)", render_kw={"maxlength": TIMESTAMP_LENGTH})
    depends_on = StringField("Parent jobs (ids, optional)")
    partition = StringField("Partition (optional)", render_kw={"maxlength": PARTITION.length})


class EditRetryForm(FlaskForm):
    """An admin's retry with the job's fields changed, prefilled with them (``for_job``). As
    for ``EnqueueForm``, ``RetryBody`` refuses what it refuses, in the API's words."""

    payload = TextAreaField("Payload (JSON object)")
    priority = SelectField("Priority", choices=PRIORITY_CHOICES, validate_choice=False)
    max_retries = StringField(
        "Max retries",
        description=MAX_RETRIES.hint,
        widget=NumberInput(min=MAX_RETRIES.low, max=MAX_RETRIES.high),
    )
    reason = StringField(
        "Reason (optional)",
        description="Recorded in the job's events and the audit log.",
        render_kw={"maxlength": MAX_REASON_LENGTH},
    )

    @classmethod
    def for_job(cls, job: Job, payload: str) -> EditRetryForm:
        """The form as the job is: its payload (``payload``, as the page shows it), priority
        and retry budget."""
        return cls(
            formdata=None,
            payload=payload,
            priority=job.priority_label,
            max_retries=str(job.max_retries),
        )


class CreateUserForm(FlaskForm):
    """A new account."""

    name = StringField("User name", validators=[InputRequired(), Length(max=64)])
    role = SelectField("Role", choices=ROLE_CHOICES, default="producer")
    max_priority = SelectField("Priority cap", choices=PRIORITY_CHOICES, default="medium")
    password = PasswordField(
        "Password (optional: leave empty for a token-only user)",
        validators=[Optional(), Length(max=1024)],
    )


class UpdateUserForm(FlaskForm):
    """A user's role and priority cap."""

    role = SelectField("Role", choices=ROLE_CHOICES)
    max_priority = SelectField("Priority cap", choices=PRIORITY_CHOICES)


class TokenForm(FlaskForm):
    """A new API token for a user."""

    user = SelectField("User", validators=[InputRequired()])
    label = StringField("Label (optional)", validators=[Optional(), Length(max=100)])
    expires_in = SelectField("Expires after", choices=list(TOKEN_LIFETIMES), default="90 days")


class ScheduleForm(FlaskForm):
    """A new schedule; every rule is the request model's, so the page and the API agree."""

    name = StringField("Name", validators=[Length(max=MAX_NAME_LENGTH)])
    cron = StringField("Cron expression", default="0 * * * *", validators=[Length(max=100)])
    timezone = StringField("Time zone", default="UTC", validators=[Length(max=64)])
    type = SelectField("Job type", validate_choice=False)
    priority = SelectField("Priority", choices=list(PRIORITIES), default=DEFAULT_PRIORITY)
    payload = TextAreaField(
        "Payload (JSON object)", default="{}", validators=[Length(max=1_048_576)]
    )
    catch_up = SelectField(
        "After downtime",
        choices=[SelectChoice("skip", "skip missed runs"), SelectChoice("one", "run once")],
    )
    enabled = BooleanField("Enabled", default=True)
    partition = StringField("Partition (optional)", render_kw={"maxlength": PARTITION.length})


class BulkForm(FlaskForm):
    """The confirmation of a bulk operation: the previewed action, filter and count travel in
    hidden fields; every rule is the request model's (``BulkBody``), as in the API."""

    action = HiddenField()
    status = HiddenField()
    type = HiddenField()
    priority = HiddenField()
    q = HiddenField()
    payload = HiddenField()
    expect_count = HiddenField()
    reason = StringField(f"Reason (required, at most {MAX_REASON_LENGTH} characters)")


class TypeLimitsForm(FlaskForm):
    """A job type's limit overrides; an empty field clears its override, so the configured
    value applies. The rules are ``TypeChange``'s, so the page and the API agree."""

    class Meta:
        # One form per type on the page, each with its own field prefix; the app-wide
        # CSRFProtect checks the page's token on every POST, so the form need not carry one.
        csrf = False

    max_running = StringField("Max running", validators=[Length(max=20)])
    rate_limit = StringField("Rate limit", validators=[Length(max=32)])
    max_run_seconds = StringField("Max run time (seconds)", validators=[Length(max=20)])
    partition_max_running = StringField("Max running per partition", validators=[Length(max=20)])
    partition_rate_limit = StringField("Rate limit per partition", validators=[Length(max=32)])
