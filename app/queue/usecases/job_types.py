"""The job types as admins manage them (``/types``, ``/ui/types``): jobs per status and the
effective limits of each configured type, and the change request that overrides them.

Like every use case: the caller owns the transaction (a change's audit row is written in it, as
``origin`` at ``now``) and the clock is the ``now`` argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator
from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.queue.contract.fields import Flag
from app.queue.contract.request_model import RequestModel, refuse, says
from app.queue.rules import type_limits
from app.queue.rules.settings import QueueSettings
from app.queue.rules.type_limits import (
    FLOW_KEYS,
    MAX_RUN_SECONDS_LIMIT,
    MAX_RUN_SECONDS_RULE,
    MAX_RUNNING_LIMIT,
    MAX_RUNNING_RULE,
    RATE_LIMIT_PATTERN,
    RATE_LIMIT_RULE,
    TypeLimits,
)
from app.queue.sql import counts as counts_sql
from app.queue.sql import type_limits as type_limits_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed, Effects
from app.queue.vocabulary.errors import NotFound
from app.queue.vocabulary.limits import Override
from app.queue.vocabulary.states import JobStatus

MaxRunning = Annotated[
    int,
    Field(ge=1, le=MAX_RUNNING_LIMIT),
    says(MAX_RUNNING_RULE),
    Field(description="At most this many jobs of the type run at once; null: the configuration."),
]
RateLimitText = Annotated[
    str,
    Field(pattern=RATE_LIMIT_PATTERN),
    says(RATE_LIMIT_RULE),
    Field(description='At most N claims per fixed window ("10/minute"); null: the configuration.'),
]

MaxRunSeconds = Annotated[
    int,
    Field(ge=1, le=MAX_RUN_SECONDS_LIMIT),
    says(MAX_RUN_SECONDS_RULE),
    Field(
        description="Seconds an attempt may run before the server fails it (from attempts "
        "claimed after the change on); null: the configuration."
    ),
]

# The per-type rules, described for each partition (the last description is the one shown).
PartitionMaxRunning = Annotated[
    MaxRunning,
    Field(
        description="At most this many jobs of the type run at once in each partition (the "
        "jobs without a partition are one partition); null: the configuration."
    ),
]
PartitionRateLimit = Annotated[
    RateLimitText,
    Field(
        description="At most N claims per fixed window in each partition; null: the configuration."
    ),
]


class TypeChange(RequestModel):
    """``PATCH /types/{type}``: the overrides to set; ``null`` clears one, so the configured
    value (``JOB_TYPE_SETTINGS``) applies again. Fields left out keep their override."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    max_running: MaxRunning | None = None
    rate_limit: RateLimitText | None = None
    paused: Annotated[Flag | None, Field(description="Claims skip a paused type.")] = None
    max_run_seconds: MaxRunSeconds | None = None
    partition_max_running: PartitionMaxRunning | None = None
    partition_rate_limit: PartitionRateLimit | None = None

    @model_validator(mode="after")
    def _something(self) -> TypeChange:
        if not self.model_fields_set:
            raise refuse(f"give at least one of {', '.join(FLOW_KEYS)}", field="body")
        return self

    def overrides(self) -> dict[str, Any]:
        """The override columns to write (None clears)."""
        return {name: getattr(self, name) for name in sorted(self.model_fields_set)}


@dataclass(frozen=True)
class TypeView:
    """One job type: its jobs per status, its limits, and where they come from."""

    type: str
    counts: dict[str, int]
    limits: TypeLimits  # what claims obey: the configuration merged with the override
    configured: TypeLimits
    override: Override | None


def _views(conn: Connection, settings: QueueSettings, names: tuple[str, ...]) -> list[TypeView]:
    counts = counts_sql.counts_of_types(conn, names)
    overrides = type_limits_sql.overrides(conn)
    views = []
    for name in names:
        configured = settings.flow.get(name, TypeLimits())
        override = overrides.get(name)
        views.append(
            TypeView(
                type=name,
                counts={status: counts[name].get(status, 0) for status in JobStatus},
                limits=type_limits.effective(configured, override),
                configured=configured,
                override=override,
            )
        )
    return views


def list_types(conn: Connection, actor: Actor, settings: QueueSettings) -> list[TypeView]:
    """Every configured job type (``JOB_TYPES``), in configuration order."""
    return _views(conn, settings, settings.job_types)


def get_type(conn: Connection, actor: Actor, settings: QueueSettings, name: str) -> TypeView:
    """One configured job type; NotFound for any other name."""
    if name not in settings.job_types:
        raise NotFound(f"{name!r} is not a configured job type (JOB_TYPES)")
    return _views(conn, settings, (name,))[0]


def change(
    conn: Connection,
    actor: Actor,
    settings: QueueSettings,
    name: str,
    request: TypeChange,
    *,
    now: datetime,
    origin: Origin,
) -> Changed[TypeView]:
    """Set or clear the type's overrides (audited); claims obey them from the commit on. Waiting
    claims are to be woken: a resumed type or a raised limit may have made jobs claimable."""
    get_type(conn, actor, settings, name)
    type_limits_sql.save_override(conn, name, request.overrides(), actor=actor.name, now=now)
    audit_store.record(
        conn, origin, AuditAction.TYPE_CHANGE, f"type:{name}", at=now, **request.overrides()
    )
    return Changed(_views(conn, settings, (name,))[0], Effects(any_due=True))


def paused(conn: Connection, settings: QueueSettings) -> list[str]:
    """The types whose jobs no claim hands out now (configuration merged with overrides)."""
    overrides, _ = type_limits_sql.claim_overrides(conn)
    limits = type_limits.effective_all(settings.flow, overrides)
    return sorted(name for name, found in limits.items() if found.paused)
