"""Flask-Login glue: the session stores ``id:nonce``, so rotating the nonce ends sessions."""

from __future__ import annotations

from flask import Flask, current_app, session

from app.accounts import service as accounts
from app.accounts.models import User
from app.extensions import login_manager
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow

LOGIN_AT = "login_at"  # session key: when the password was last checked (POSIX seconds)


class SessionUser:
    """The Flask-Login view of a user."""

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def __init__(self, user: User) -> None:
        self.user = user

    def get_id(self) -> str:
        return accounts.session_id(self.user)


def _login_younger_than(seconds: float) -> bool:
    """Whether the session's password check happened within the last ``seconds`` (a session
    without one, or with a time in the future, is not)."""
    at = session.get(LOGIN_AT)
    if not isinstance(at, int | float):
        return False
    return 0 <= utcnow().timestamp() - at <= seconds


def login_expired() -> bool:
    """Whether the session's login is older than PERMANENT_SESSION_LIFETIME (an absolute limit:
    activity does not extend it)."""
    return not _login_younger_than(current_app.permanent_session_lifetime.total_seconds())


def is_fresh_login() -> bool:
    """Whether the password was checked recently enough for sensitive changes (granting or
    taking away power, issuing tokens)."""
    return _login_younger_than(float(current_app.config["FRESH_LOGIN_SECONDS"]))


def load_user(value: str) -> SessionUser | None:
    """Flask-Login's user loader: the login must be recent and the session id still current."""
    if login_expired():
        return None
    with db.read() as conn:
        user = accounts.user_for_session(conn, value)
    return SessionUser(user) if user else None


def init_app(app: Flask) -> None:
    """Bind Flask-Login to the app."""
    login_manager.init_app(app)
    login_manager.user_loader(load_user)
    login_manager.session_protection = "strong"
