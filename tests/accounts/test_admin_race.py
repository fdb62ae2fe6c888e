"""The last-admin rule under a race: two admins demoting (or disabling) each other at the same
moment must leave one admin, on PostgreSQL (concurrent transactions) as on SQLite."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from flask import Flask
from sqlalchemy import Connection, func, select

from app.accounts import service as accounts
from app.accounts.errors import AccountError
from app.audit.actions import Origin
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import users
from devservers.accounts import AS_OPERATOR
from tests.backends import every_backend  # noqa: F401 (the fixture runs each test per engine)

Change = Callable[[Connection, str, str], object]


def _demote(conn: Connection, actor: str, name: str) -> object:
    who = accounts.get_user(conn, accounts.OPERATOR, actor).actor()
    return accounts.update_user(
        conn,
        who,
        name,
        role="producer",
        max_priority="low",
        fresh=True,
        now=utcnow(),
        origin=Origin(who.name),
    )


def _disable(conn: Connection, actor: str, name: str) -> object:
    who = accounts.get_user(conn, accounts.OPERATOR, actor).actor()
    return accounts.set_disabled(
        conn, who, name, disabled=True, fresh=True, now=utcnow(), origin=Origin(who.name)
    )


@pytest.mark.parametrize("change", [_demote, _disable], ids=["demote", "disable"])
def test_two_admins_taking_each_others_rights_at_once_leave_one_admin(
    app: Flask, change: Change
) -> None:
    with app.app_context(), db.transaction() as conn:
        for name in ("ann", "bob"):
            accounts.create_user(
                conn,
                accounts.OPERATOR,
                name,
                "admin",
                now=utcnow(),
                origin=AS_OPERATOR,
            )
    outcome: list[BaseException | None] = []

    def bob_acts() -> None:
        with app.app_context():
            try:
                with db.transaction() as conn:
                    change(conn, "bob", "ann")
            except AccountError as exc:  # the last admin, or no longer an admin at all
                outcome.append(exc)
            else:
                outcome.append(None)

    other = threading.Thread(target=bob_acts)
    with app.app_context(), db.transaction() as conn:
        change(conn, "ann", "bob")  # ann's change is made, not yet committed...
        other.start()
        other.join(timeout=1.0)  # ...and bob's, meanwhile, must wait for it
        assert other.is_alive(), "bob's change did not wait for ann's"
    other.join(timeout=30)
    assert not other.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], AccountError)
    with db.read(app) as conn:
        admins = select(func.count()).where(users.c.role == "admin", users.c.disabled.is_(False))
        assert conn.execute(admins).scalar_one() == 1
