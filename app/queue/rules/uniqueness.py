"""Uniqueness while active: an enqueue with a ``unique_key`` answers its producer's pending or
running job of the same type and key (enqueued within ``unique_for`` seconds, when given)
instead of adding another. A child's key lives in its parent's namespace: it answers only
another child of the same parent, and a producer's key never answers a child.

Exact under concurrent enqueues: an enqueue first holds a transaction-level lock on its (producer,
type, key) (``uniqueness_sql.take_turns``: an advisory lock where writers run at once, nothing where
they write one at a time), so the second of two concurrent enqueues looks only after the first
committed its job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection

from app.queue.sql import uniqueness as uniqueness_sql
from app.queue.vocabulary.jobs import EnqueueRequest, Job

_EVER = datetime(1970, 1, 1, tzinfo=UTC)  # without unique_for, any active job counts


def _lock_key(owner_id: int, request: EnqueueRequest) -> int:
    """A signed 64-bit advisory lock key for (producer, type, key, parent); a collision only
    makes two unrelated enqueues take turns."""
    name = f"unique\0{owner_id}\0{request.type}\0{request.unique_key}"
    if request.parent_id is not None:
        name += f"\0{request.parent_id}"
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def wait_for_turns(conn: Connection, owner_id: int, requests: Iterable[EnqueueRequest]) -> None:
    """Wait until no other transaction is enqueuing with the same (producer, type, unique key)
    as one of ``requests``, and hold that until this one ends. The locks are taken in key
    order, so two batches never wait on each other in a circle; taking one again is free."""
    keys = {_lock_key(owner_id, request) for request in requests if request.unique_key is not None}
    uniqueness_sql.take_turns(conn, keys)


def active_job(
    conn: Connection, owner_id: int, request: EnqueueRequest, *, now: datetime
) -> Job | None:
    """The producer's newest pending or running job of the request's type and unique key
    (enqueued within ``unique_for`` seconds, when given) in the request's namespace, if any."""
    assert request.unique_key is not None
    since = now - timedelta(seconds=request.unique_for) if request.unique_for else _EVER
    return uniqueness_sql.newest_active(
        conn, owner_id, request.type, request.unique_key, since, request.parent_id
    )


def is_duplicate(request: EnqueueRequest, job: Job, created: bool) -> bool:
    """Whether ``enqueueing.enqueue`` answered ``request`` with another active job of the same
    unique key, rather than a new job or the job its idempotency key made."""
    if created or request.unique_key is None:
        return False
    return request.idempotency_key is None or job.idempotency_key != request.idempotency_key
