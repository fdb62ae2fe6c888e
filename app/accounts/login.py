"""Flask-Login glue: the session stores ``id:nonce``, so rotating the nonce ends sessions."""

from __future__ import annotations

from flask import Flask, current_app, session

from app import db
from app.accounts import service
from app.accounts.models import User
from app.extensions import login_manager
from app.timeutil import utcnow

LOGIN_AT = "login_at"  # session key: when the password was last checked (POSIX seconds)


class SessionUser:
    """The Flask-Login view of a user."""

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def __init__(self, user: User) -> None:
        self.user = user

    def get_id(self) -> str:
        return service.session_id(self.user)


def login_expired() -> bool:
    """Whether the session's login is older than PERMANENT_SESSION_LIFETIME (an absolute limit:
    activity does not extend it)."""
    at = session.get(LOGIN_AT)
    if not isinstance(at, int | float):
        return True
    age = utcnow().timestamp() - at
    return not 0 <= age <= current_app.permanent_session_lifetime.total_seconds()


def load_user(value: str) -> SessionUser | None:
    """Flask-Login's user loader: the login must be recent and the session id still current."""
    if login_expired():
        return None
    with db.read() as conn:
        user = service.user_for_session(conn, value)
    return SessionUser(user) if user else None


def init_app(app: Flask) -> None:
    """Bind Flask-Login to the app."""
    login_manager.init_app(app)
    login_manager.user_loader(load_user)
    login_manager.session_protection = "strong"
