"""A token's last use is recorded about once a minute, by one request: the others that find it
stale at the same moment neither wait for that one nor write it again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask
from sqlalchemy import Connection, select

from app.accounts import service as accounts
from app.accounts.models import ApiToken
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import api_tokens
from tests.backends import every_backend  # noqa: F401 (the fixture runs each test per engine)
from tests.builders import make_token, make_user


def _token(app: Flask) -> ApiToken:
    make_user(app, "w", "worker")
    raw = make_token(app, "w")
    with app.app_context(), db.read() as conn:
        found = accounts.resolve_token(conn, raw, now=utcnow())
    assert found is not None
    return found[0]


def _last_used(conn: Connection) -> object:
    return conn.execute(select(api_tokens.c.last_used_at)).scalar_one()


def test_a_touch_writes_only_a_last_use_still_stale(app: Flask, backend: str) -> None:
    token = _token(app)  # as two requests read it: never used
    first = utcnow()
    with app.app_context(), db.transaction() as conn:
        assert accounts.touch_token(conn, token, first)
    with app.app_context(), db.transaction() as conn:  # the other request, a moment later
        assert not accounts.touch_token(conn, token, first + timedelta(seconds=10))
        assert _last_used(conn) == first
    with app.app_context(), db.transaction() as conn:  # a minute on, it is stale again
        later = first + accounts.TOUCH_INTERVAL
        assert accounts.touch_token(conn, token, later)
        assert _last_used(conn) == later


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_touch_never_waits_for_another_requests_touch(app: Flask, backend: str) -> None:
    token = _token(app)
    now = utcnow()
    engine = db.engine(app)
    with engine.connect() as first, engine.connect() as second, first.begin():
        assert accounts.touch_token(first, token, now)  # a request recorded the use, goes on...
        with second.begin():  # ...while another, in another process, finds it stale too
            # a wait on the first one's row lock would fail here instead of hanging
            second.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
            assert not accounts.touch_token(second, token, now)
    with engine.connect() as conn:
        assert _last_used(conn) == now
