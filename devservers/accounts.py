"""Users and API tokens made straight through the account service: for the databases that
server processes start on, and for the tests' builders."""

from __future__ import annotations

from flask import Flask

from app.accounts import service as accounts
from app.accounts.models import User
from app.audit.actions import Origin
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow

# The scripts that make users and tokens act as the operator (an admin), as the CLI does.
AS_OPERATOR = Origin(accounts.OPERATOR.name)


def make_user(
    app: Flask,
    name: str = "producer",
    role: str = "producer",
    *,
    max_priority: str = "medium",
    password: str | None = None,
) -> User:
    """Create a user straight through the account service."""
    with app.app_context(), db.transaction() as conn:
        return accounts.create_user(
            conn,
            accounts.OPERATOR,
            name,
            role,
            now=utcnow(),
            password=password,
            max_priority=max_priority,
            origin=AS_OPERATOR,
        )


def make_token(app: Flask, name: str, label: str = "") -> str:
    """Issue an API token for ``name`` and return the raw token."""
    with app.app_context(), db.transaction() as conn:
        _, raw = accounts.create_token(
            conn,
            accounts.OPERATOR,
            name,
            now=utcnow(),
            label=label,
            origin=AS_OPERATOR,
        )
    return raw
