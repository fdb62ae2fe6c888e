"""Bearer-token authentication for the JSON API. The session cookie is never read here."""

from __future__ import annotations

from flask import g, request

from app import db
from app.accounts import service as accounts
from app.queue.models import Actor
from app.timeutil import utcnow


class Unauthorized(Exception):
    """Missing or invalid bearer token."""


def authenticate() -> Actor:
    """The actor behind the request's bearer token; records its use about once a minute."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Unauthorized("send Authorization: Bearer <token>")
    now = utcnow()
    with db.read() as conn:
        found = accounts.resolve_token(conn, raw.strip(), now=now)
    if found is None:
        raise Unauthorized("the token is invalid, expired, revoked, or its user is disabled")
    token, user = found
    if accounts.needs_touch(token, now):
        with db.transaction() as conn:
            accounts.touch_token(conn, token, now)
    g.actor = user.actor()
    return g.actor  # type: ignore[no-any-return]
