"""The configuration the queue's rules and use cases read, built once from the app's config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from app.queue.rules.retention import Retention
from app.queue.rules.type_limits import TypeLimits, config_limits


@dataclass(frozen=True)
class TypeSettings:
    """Lease and backoff for one job type (or the global defaults)."""

    lease_seconds: int
    backoff_base_seconds: float
    backoff_cap_seconds: float


@dataclass(frozen=True)
class QueueSettings:
    """The configuration the domain needs, read once from the app config."""

    job_types: tuple[str, ...]
    default: TypeSettings
    per_type: Mapping[str, TypeSettings]
    max_lease_seconds: int
    max_payload_bytes: int
    max_json_depth: int
    max_error_bytes: int
    recover_batch: int
    max_batch: int
    max_children: int  # children one job may spawn in all (MAX_CHILDREN_PER_JOB)
    # Flow control from JOB_TYPE_SETTINGS (max_running, rate_limit, paused): the defaults that
    # admins' overrides in the database replace (``type_limits.effective``).
    flow: Mapping[str, TypeLimits] = field(default_factory=dict)
    # How long finished jobs and audit rows are kept (RETENTION, AUDIT_RETENTION).
    retention: Retention = field(default_factory=Retention)
    prune_batch: int = 500  # jobs (and audit rows) per retention step

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> QueueSettings:
        """Build settings from a Flask-style config mapping."""
        default = TypeSettings(
            lease_seconds=int(config["LEASE_SECONDS"]),
            backoff_base_seconds=float(config["BACKOFF_BASE_SECONDS"]),
            backoff_cap_seconds=float(config["BACKOFF_CAP_SECONDS"]),
        )
        per_type = {
            name: TypeSettings(
                lease_seconds=int(over.get("lease_seconds", default.lease_seconds)),
                backoff_base_seconds=float(
                    over.get("backoff_base_seconds", default.backoff_base_seconds)
                ),
                backoff_cap_seconds=float(
                    over.get("backoff_cap_seconds", default.backoff_cap_seconds)
                ),
            )
            for name, over in dict(config.get("JOB_TYPE_SETTINGS") or {}).items()
        }
        return cls(
            job_types=tuple(config["JOB_TYPES"]),
            default=default,
            per_type=per_type,
            max_lease_seconds=int(config["MAX_LEASE_SECONDS"]),
            max_payload_bytes=int(config["MAX_PAYLOAD_BYTES"]),
            max_json_depth=int(config["MAX_JSON_DEPTH"]),
            max_error_bytes=int(config["MAX_ERROR_BYTES"]),
            recover_batch=int(config["RECOVER_BATCH"]),
            max_batch=int(config["MAX_BATCH"]),
            max_children=int(config["MAX_CHILDREN_PER_JOB"]),
            flow={
                name: limits
                for name, over in dict(config.get("JOB_TYPE_SETTINGS") or {}).items()
                if not (limits := config_limits(over)).free or limits.max_run_seconds
            },
            retention=Retention.from_config(config.get("RETENTION"), config.get("AUDIT_RETENTION")),
            prune_batch=int(config.get("PRUNE_BATCH_SIZE", 500)),
        )

    @cached_property
    def type_leases(self) -> tuple[tuple[str, int], ...]:
        """``(type, lease_seconds)`` for the types whose lease differs from the default."""
        return tuple(
            sorted(
                (name, s.lease_seconds)
                for name, s in self.per_type.items()
                if s.lease_seconds != self.default.lease_seconds
            )
        )

    def for_type(self, job_type: str) -> TypeSettings:
        """The lease and backoff that apply to ``job_type``."""
        return self.per_type.get(job_type, self.default)
