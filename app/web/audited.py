"""Who acts on the pages and from where, as the audit log records them, and the rows the pages
write on their own (signing in and out, the second factor)."""

from __future__ import annotations

from typing import Any

from flask import request
from flask_login import current_user

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow

ANONYMOUS = "anonymous"


def origin() -> Origin:
    """The signed-in user (``anonymous`` before signing in) and the client's address."""
    name = current_user.user.name if current_user.is_authenticated else ANONYMOUS
    return Origin(name, request.remote_addr)


def record_alone(action: AuditAction, target: str | None = None, **details: Any) -> None:
    """Record an action that writes nothing else (signing in), in a transaction of its own."""
    with db.transaction() as conn:
        audit_store.record(conn, origin(), action, target, at=utcnow(), **details)
