"""The request bodies the client builds from its callers' arguments: an enqueue's item (its
options checked, its time formatted, an idempotency key ensured) and a claim's fields."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from queuelog_client.models import format_time

ENQUEUE_OPTIONS = frozenset(
    {
        "priority",
        "max_retries",
        "idempotency_key",
        "run_at",
        "delay_seconds",
        "unique_key",
        "unique_for",
        "secrets",
        "depends_on",
        "on_dependency_failure",
        "group",
        "partition",
    }
)


def new_idempotency_key() -> str:
    """A random idempotency key, so that resending an enqueue can never create a second job."""
    return f"auto-{uuid.uuid4().hex}"


def enqueue_body(item: Mapping[str, Any]) -> dict[str, Any]:
    """A ``POST /jobs`` body from ``item``: ``run_at`` formatted, an idempotency key ensured."""
    body = dict(item)
    if isinstance(body.get("run_at"), datetime):
        body["run_at"] = format_time(body["run_at"])
    if body.get("idempotency_key") is None:
        body["idempotency_key"] = new_idempotency_key()
    return body


def enqueue_item(job_type: str, payload: dict[str, Any] | None, options: Any) -> dict[str, Any]:
    """A ``POST /jobs`` item from ``enqueue``'s arguments; unknown options raise TypeError."""
    unknown = set(options) - ENQUEUE_OPTIONS
    if unknown:
        raise TypeError(f"unknown enqueue option(s): {', '.join(sorted(unknown))}")
    return {"type": job_type, "payload": payload or {}, **options}


def claim_body(
    max_jobs: int, types: list[str] | None, wait_seconds: float, lease_seconds: int | None
) -> dict[str, Any]:
    """The fields of a claim (``POST /jobs/claim`` with ``max_jobs``, or a finish's ``claim``)."""
    body: dict[str, Any] = {"max_jobs": max_jobs, "wait_seconds": wait_seconds}
    if types is not None:
        body["types"] = types
    if lease_seconds is not None:
        body["lease_seconds"] = lease_seconds
    return body
