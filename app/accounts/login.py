"""Flask-Login glue: the session stores ``id:nonce``, so rotating the nonce ends sessions."""

from __future__ import annotations

from flask import Flask

from app import db
from app.accounts import service
from app.accounts.models import User
from app.extensions import login_manager


class SessionUser:
    """The Flask-Login view of a user."""

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def __init__(self, user: User) -> None:
        self.user = user

    def get_id(self) -> str:
        return service.session_id(self.user)


def load_user(value: str) -> SessionUser | None:
    """Flask-Login's user loader: the session id must still be current."""
    with db.read() as conn:
        user = service.user_for_session(conn, value)
    return SessionUser(user) if user else None


def init_app(app: Flask) -> None:
    """Bind Flask-Login to the app."""
    login_manager.init_app(app)
    login_manager.user_loader(load_user)
    login_manager.session_protection = "strong"
