"""Bearer-token authentication for the JSON API, inside the transaction of the request's work.
The session cookie is never read here.

Before any route, the ``Authorization`` header alone settles a missing or malformed credential
(401 without asking the database). Every transaction the request then opens authenticates the
token first, on its own connection: the lookup, the route's policy check, the work and (about
once a minute) the token's last-use time are one transaction, so a token revoked or a user
disabled before it began is refused, and a role changed before it began is the role checked.
A route parses its body before it opens its transaction, so a database's write lock is not
held while a large body is decoded; the route guard makes sure that whatever the route answers, a
caller who is not authenticated or not allowed gets 401 or 403 instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from flask import g, request
from sqlalchemy import Connection

from app.accounts import service as accounts
from app.audit.actions import Origin
from app.infra import db
from app.queue.rules.policy import Action, require
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.timeutil import utcnow

View = TypeVar("View", bound=Callable[..., Any])
_CALLER = "queuelog_caller"
INVALID = "the token is invalid, expired, revoked, or its user is disabled"


class Unauthorized(Exception):
    """Missing or invalid bearer token."""


@dataclass
class _Caller:
    """This request's credential and what its transactions learned about it."""

    token_hash: str
    action: Action | None = None  # the route's, set by ``requires``
    authenticated: bool = False
    touch_due: bool = False  # a read-only transaction could not record the token's use

    def authenticate(self, conn: Connection, writable: bool) -> None:
        """The transaction gate: the token's actor in ``g.actor``, once the policy allowed it the
        route's action (the one time the request asks; the use cases do not)."""
        now = utcnow()
        found = accounts.token_owner(conn, self.token_hash, now=now)
        if found is None:
            raise Unauthorized(INVALID)
        token, user = found
        actor = user.actor()
        if not self.authenticated or actor != g.actor:  # a changed role or cap is checked anew
            if self.action is not None:
                require(actor, self.action)
            g.actor = actor
            self.authenticated = True
        due = accounts.needs_touch(token, now)
        if due and writable:
            accounts.touch_token(conn, token, now)
        self.touch_due = due and not writable


def read_credential() -> None:
    """Take the bearer token from the header, and authenticate every transaction of this
    request with it; a header that holds no token is refused at once."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Unauthorized("send Authorization: Bearer <token>")
    token_hash = accounts.bearer_hash(raw.strip())
    if token_hash is None:
        raise Unauthorized(INVALID)
    caller = _Caller(token_hash)
    setattr(g, _CALLER, caller)
    db.gate_transactions(caller.authenticate)


def _ensure_authenticated(caller: _Caller) -> None:
    """Authenticate now if the route has not (it ran no transaction, or refused first)."""
    if not caller.authenticated:
        with db.read():
            pass  # the gate authenticates, or raises 401 / 403


def caller_key() -> str:
    """The hash of this request's bearer token: the key of per-token bounds such as
    long-poll admission (never the token itself)."""
    caller: _Caller = getattr(g, _CALLER)
    return caller.token_hash


def current_actor() -> Actor:
    """The caller, for a route that hands it to work running its own transactions: each of
    them authenticates again, and this one first if none has yet."""
    _ensure_authenticated(getattr(g, _CALLER))
    return g.actor  # type: ignore[no-any-return]


def origin() -> Origin:
    """Who acts (the token's user) and from where (the client's address), as the audit log
    records them."""
    return Origin(current_actor().name, request.remote_addr)


def requires(action: Action) -> Callable[[View], View]:
    """Declare the policy action of an API route (checked with the token's actor in the
    route's first transaction). No answer leaves the route before its caller passed: a route
    that refused its input first, or ran no transaction at all, authenticates then."""

    def decorate(view: View) -> View:
        @wraps(view)
        def checked(*args: Any, **kwargs: Any) -> Any:
            caller: _Caller = getattr(g, _CALLER)
            caller.action = action
            try:
                response = view(*args, **kwargs)
            except Unauthorized:
                raise
            except Exception:
                _ensure_authenticated(caller)
                raise
            _ensure_authenticated(caller)
            if caller.touch_due:
                with db.transaction():
                    pass  # the gate, writable now, records the token's use
            return response

        checked.required_action = str(action)  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    return decorate
