"""The audited actions and the audit record as the rest of the app sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class AuditAction(StrEnum):
    """Everything the audit log records (the value is what is stored)."""

    SIGN_IN = "sign_in"
    SIGN_IN_FAILED = "sign_in_failed"
    SIGN_OUT = "sign_out"
    USER_CREATE = "user_create"
    USER_UPDATE = "user_update"  # role and priority cap, set together
    USER_PASSWORD = "user_password"  # noqa: S105 (an action name)
    PASSWORD_CHANGE_FAILED = "password_change_failed"  # noqa: S105 (wrong current password)
    SECOND_FACTOR_ON = "second_factor_on"
    SECOND_FACTOR_OFF = "second_factor_off"
    RECOVERY_CODES_NEW = "recovery_codes_new"  # all recovery codes replaced
    RECOVERY_CODE_USED = "recovery_code_used"  # a sign-in spent one (details: how many remain)
    SECOND_FACTOR_CHANGE_FAILED = "second_factor_change_failed"  # wrong password or code
    USER_ENABLE = "user_enable"
    USER_DISABLE = "user_disable"
    TOKEN_ISSUE = "token_issue"  # noqa: S105
    TOKEN_REVOKE = "token_revoke"  # noqa: S105
    JOB_CANCEL = "job_cancel"
    JOB_RETRY = "job_retry"  # details: the fields an edit changed, and why
    JOB_RUN_NOW = "job_run_now"  # a waiting job made due at once
    JOB_BULK = "job_bulk"  # bulk cancel / retry / delete
    TYPE_CHANGE = "type_change"  # runtime overrides of a job type
    SCHEDULE_CHANGE = "schedule_change"  # schedules created, changed or deleted
    # A group finished but its callback was not enqueued: its producer may no longer enqueue
    # (disabled, or no longer a producer) or the callback is above the producer's cap now.
    GROUP_CALLBACK_REFUSED = "group_callback_refused"


# The actor of a group's decisions, made in the transaction of whatever ended the group (often
# a worker's finish): the group's rules acted, not that worker. No user is named so (user names
# have no colon).
GROUPS_ACTOR = "system:groups"


@dataclass(frozen=True)
class Origin:
    """Who acts and from where, as the audit log records them. Each front end says it once per
    request: the API and the pages name the signed-in user (``anonymous`` before signing in)
    and the client's address (after ProxyFix when TRUSTED_PROXIES is set), the command line
    ``cli:<OS user>`` and no address."""

    actor: str
    address: str | None = None


@dataclass(frozen=True)
class AuditEvent:
    """One row of the audit log."""

    id: int
    at: datetime
    actor: str
    action: str
    target: str | None
    details: Any
    client_address: str | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> AuditEvent:
        """Build an event from a row mapping."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class AuditFilters:
    """A validated audit query: filters, page size, keyset cursor (older than ``before_id``)."""

    actor: str | None = None
    action: AuditAction | None = None
    since: datetime | None = None
    until: datetime | None = None
    before_id: int | None = None
    limit: int = 50
