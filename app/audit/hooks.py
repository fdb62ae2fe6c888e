"""One-line audit calls for the front ends: who (the request's user, or the CLI's operator)
and from where (the client address, after ProxyFix when TRUSTED_PROXIES is set)."""

from __future__ import annotations

import getpass
from typing import Any

from flask import g, has_request_context, request
from flask_login import current_user
from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction
from app.queue.vocabulary.timeutil import utcnow

ANONYMOUS = "anonymous"


def cli_actor() -> str:
    """The CLI acts as ``cli:<OS user>`` (``cli`` when the OS cannot name the user)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):
        return "cli"


def _actor() -> str:
    if not has_request_context():
        return cli_actor()
    if "actor" in g:  # the API's bearer token
        return str(g.actor.name)
    if current_user.is_authenticated:
        return str(current_user.user.name)
    return ANONYMOUS


def record(
    conn: Connection,
    action: AuditAction,
    target: str | None = None,
    *,
    actor: str | None = None,
    **details: Any,
) -> int:
    """Append ``action`` on ``target`` to the audit log in the caller's transaction; returns
    the event's id."""
    return audit_store.append(
        conn,
        at=utcnow(),
        actor=actor or _actor(),
        action=action,
        target=target,
        details=details or None,
        client_address=request.remote_addr if has_request_context() else None,
    )


def record_alone(action: AuditAction, target: str | None = None, **details: Any) -> None:
    """Record an action that writes nothing else (signing in), in a transaction of its own."""
    from app.infra import (
        db,  # here: app.infra.db imports Flask's app context machinery at call time
    )

    with db.transaction() as conn:
        record(conn, action, target, **details)
