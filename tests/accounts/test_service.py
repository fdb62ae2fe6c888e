"""Account service: argon2id passwords, random tokens stored as SHA-256, revocation,
disabling, last use."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Connection, text

from app.accounts import service as accounts
from app.accounts.errors import AccountConflict as Conflict
from app.accounts.errors import AccountForbidden as Forbidden
from app.accounts.errors import AccountNotFound as NotFound
from app.accounts.errors import InvalidAccountInput as InvalidInput
from app.accounts.models import User
from app.audit.actions import Origin
from app.infra import db
from app.queue.rules.policy import priority_cap
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.builders import PASSWORD, Api, make_token, make_user


@pytest.fixture
def conn(app: Flask) -> Iterator[Connection]:
    """A write transaction on the test database, committed at the end of the test."""
    with app.app_context(), db.transaction() as connection:
        yield connection


def _row(app: Flask, sql: str, **params: object) -> dict[str, object]:
    with app.app_context(), db.read() as c:
        return dict(c.execute(text(sql), params).one()._mapping)


def test_passwords_are_hashed_with_argon2id(app: Flask) -> None:
    user = make_user(app, "alice", "admin", password=PASSWORD)
    stored = _row(app, "SELECT password_hash FROM users WHERE id = :id", id=user.id)
    hashed = str(stored["password_hash"])
    assert hashed.startswith("$argon2id$")
    assert PASSWORD not in hashed
    other = make_user(app, "bob", "admin", password=PASSWORD)
    other_hash = _row(app, "SELECT password_hash FROM users WHERE id = :id", id=other.id)
    assert other_hash["password_hash"] != hashed  # salted


def _create(conn: Connection, name: str, role: str, password: str | None = None) -> User:
    return accounts.create_user(
        conn,
        accounts.OPERATOR,
        name,
        role,
        now=utcnow(),
        password=password,
        origin=AS_OPERATOR,
    )


def test_authenticate_password(app: Flask, conn: Connection) -> None:
    _create(conn, "alice", "producer", PASSWORD)
    _create(conn, "tokenonly", "worker")
    user = accounts.authenticate_password(conn, "alice", PASSWORD)
    assert user is not None and user.name == "alice"
    assert accounts.authenticate_password(conn, "alice", PASSWORD + "x") is None
    assert accounts.authenticate_password(conn, "nobody", PASSWORD) is None
    assert accounts.authenticate_password(conn, "tokenonly", PASSWORD) is None
    assert accounts.authenticate_password(conn, "bad name!", PASSWORD) is None
    accounts.set_disabled(
        conn,
        accounts.OPERATOR,
        "alice",
        disabled=True,
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    assert accounts.authenticate_password(conn, "alice", PASSWORD) is None


def test_set_password_rehashes_and_ends_sessions(app: Flask, conn: Connection) -> None:
    user = _create(conn, "alice", "producer", PASSWORD)
    changed = accounts.set_password(
        conn,
        accounts.OPERATOR,
        "alice",
        "another long password",
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    assert changed.session_nonce != user.session_nonce
    assert accounts.user_for_session(conn, accounts.session_id(user)) is None
    assert accounts.user_for_session(conn, accounts.session_id(changed)) is not None
    assert accounts.authenticate_password(conn, "alice", PASSWORD) is None
    assert accounts.authenticate_password(conn, "alice", "another long password") is not None


@pytest.mark.parametrize("password", ["short", "x" * 11, "x" * 1025])
def test_password_length_rules(app: Flask, conn: Connection, password: str) -> None:
    with pytest.raises(InvalidInput):
        accounts.create_user(
            conn,
            accounts.OPERATOR,
            "alice",
            "producer",
            now=utcnow(),
            password=password,
            origin=AS_OPERATOR,
        )


def test_user_rules(app: Flask, conn: Connection) -> None:
    user = accounts.create_user(
        conn,
        accounts.OPERATOR,
        "alice",
        "producer",
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    assert user.max_priority == 10 and user.role == "producer" and not user.disabled
    with pytest.raises(Conflict):
        accounts.create_user(
            conn,
            accounts.OPERATOR,
            "alice",
            "worker",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    for bad_name in ("", "has space", "-dash-first", "x" * 65, "semi;colon", "null\x00"):
        with pytest.raises(InvalidInput):
            accounts.create_user(
                conn,
                accounts.OPERATOR,
                bad_name,
                "worker",
                now=utcnow(),
                origin=AS_OPERATOR,
            )
    with pytest.raises(InvalidInput):
        accounts.create_user(
            conn,
            accounts.OPERATOR,
            "carol",
            "superuser",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    with pytest.raises(InvalidInput):
        accounts.create_user(
            conn,
            accounts.OPERATOR,
            "carol",
            "producer",
            now=utcnow(),
            max_priority="urgent",
            origin=AS_OPERATOR,
        )
    producer = Actor(id=user.id, name="alice", role=Role.PRODUCER)
    with pytest.raises(Forbidden):
        accounts.create_user(
            conn, producer, "mallory", "admin", now=utcnow(), origin=Origin(producer.name)
        )
    with pytest.raises(Forbidden):
        accounts.create_token(conn, producer, "alice", now=utcnow(), origin=Origin(producer.name))
    with pytest.raises(Forbidden):
        accounts.list_users(conn, producer)
    with pytest.raises(NotFound):
        accounts.create_token(conn, accounts.OPERATOR, "nobody", now=utcnow(), origin=AS_OPERATOR)


def test_tokens_are_32_random_bytes_shown_once_and_stored_as_sha256(
    app: Flask, conn: Connection
) -> None:
    accounts.create_user(conn, accounts.OPERATOR, "w", "worker", now=utcnow(), origin=AS_OPERATOR)
    raws = set()
    for _ in range(5):
        token, raw = accounts.create_token(
            conn,
            accounts.OPERATOR,
            "w",
            now=utcnow(),
            label="ci",
            origin=AS_OPERATOR,
        )
        assert raw.startswith(accounts.TOKEN_PREFIX)
        secret = raw.removeprefix(accounts.TOKEN_PREFIX)
        assert len(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))) >= 32
        row = dict(
            conn.execute(text("SELECT * FROM api_tokens WHERE id = :id"), {"id": token.id})
            .one()
            ._mapping
        )
        assert row["token_hash"] == hashlib.sha256(raw.encode()).hexdigest()
        assert all(raw not in str(value) for value in row.values())
        assert secret[10:] not in str(row)  # at most a short display prefix is kept
        assert row["label"] == "ci"
        raws.add(raw)
    assert len(raws) == 5
    listed = accounts.list_tokens(conn, accounts.OPERATOR, "w")
    assert len(listed) == 5 and all(owner == "w" for _, owner in listed)


def test_token_resolves_until_revoked(app: Flask, conn: Connection) -> None:
    accounts.create_user(conn, accounts.OPERATOR, "w", "worker", now=utcnow(), origin=AS_OPERATOR)
    token, raw = accounts.create_token(
        conn, accounts.OPERATOR, "w", now=utcnow(), origin=AS_OPERATOR
    )
    found = accounts.resolve_token(conn, raw, now=utcnow())
    assert found is not None and found[1].name == "w"
    assert accounts.resolve_token(conn, raw + "x", now=utcnow()) is None
    assert accounts.resolve_token(conn, raw[len(accounts.TOKEN_PREFIX) :], now=utcnow()) is None
    assert (
        accounts.resolve_token(conn, hashlib.sha256(raw.encode()).hexdigest(), now=utcnow()) is None
    )
    revoked = accounts.revoke_token(
        conn, accounts.OPERATOR, token.id, now=utcnow(), origin=AS_OPERATOR
    )
    assert revoked.revoked_at is not None
    assert accounts.resolve_token(conn, raw, now=utcnow()) is None
    with pytest.raises(Conflict):
        accounts.revoke_token(conn, accounts.OPERATOR, token.id, now=utcnow(), origin=AS_OPERATOR)
    with pytest.raises(NotFound):
        accounts.revoke_token(conn, accounts.OPERATOR, 9999, now=utcnow(), origin=AS_OPERATOR)


def test_disabled_users_tokens_stop_on_the_next_request(app: Flask, client: FlaskClient) -> None:
    make_user(app, "w", "worker")
    caller = Api(client, make_token(app, "w"))
    assert caller.get("/jobs").status_code == 200
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn,
            accounts.OPERATOR,
            "w",
            disabled=True,
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    response = caller.get("/jobs")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert caller.post("/jobs/claim").status_code == 401
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn,
            accounts.OPERATOR,
            "w",
            disabled=False,
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    assert caller.get("/jobs").status_code == 200


def test_disabling_ends_sessions_and_admins_cannot_disable_themselves(
    app: Flask, conn: Connection
) -> None:
    admin = accounts.create_user(
        conn,
        accounts.OPERATOR,
        "root",
        "admin",
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    with pytest.raises(Conflict):
        accounts.set_disabled(
            conn,
            admin.actor(),
            "root",
            disabled=True,
            now=utcnow(),
            origin=Origin(admin.actor().name),
        )
    user = accounts.create_user(
        conn, accounts.OPERATOR, "w", "worker", now=utcnow(), origin=AS_OPERATOR
    )
    assert accounts.user_for_session(conn, accounts.session_id(user)) is not None
    accounts.set_disabled(
        conn, admin.actor(), "w", disabled=True, now=utcnow(), origin=Origin(admin.actor().name)
    )
    assert accounts.user_for_session(conn, accounts.session_id(user)) is None


def test_last_used_at_is_kept(app: Flask, client: FlaskClient) -> None:
    make_user(app, "w", "worker")
    raw = make_token(app, "w")

    def last_used() -> object:
        return _row(app, "SELECT last_used_at FROM api_tokens")["last_used_at"]

    assert last_used() is None
    before = utcnow()
    assert Api(client, raw).get("/jobs").status_code == 200
    first = last_used()
    assert first is not None
    with app.app_context(), db.read() as conn:
        found = accounts.resolve_token(conn, raw, now=utcnow())
    assert found is not None
    token = found[0]
    assert token.last_used_at is not None and token.last_used_at >= before - timedelta(seconds=1)
    # Written about once a minute, not on every request.
    assert Api(client, raw).get("/jobs").status_code == 200
    assert last_used() == first
    assert not accounts.needs_touch(token, token.last_used_at + timedelta(seconds=59))
    assert accounts.needs_touch(token, token.last_used_at + accounts.TOUCH_INTERVAL)
    # A failed request (bad token) touches nothing.
    assert Api(client, raw + "x").get("/jobs").status_code == 401
    assert last_used() == first


def test_update_user_changes_role_and_cap(app: Flask, conn: Connection) -> None:
    user = accounts.create_user(
        conn,
        accounts.OPERATOR,
        "p",
        "producer",
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    updated = accounts.update_user(
        conn,
        accounts.OPERATOR,
        "p",
        role="producer",
        max_priority="high",
        now=utcnow(),
        origin=AS_OPERATOR,
    )
    assert updated.max_priority == 20
    assert updated.session_nonce != user.session_nonce
    assert priority_cap(updated.actor()) == 20
    with pytest.raises(NotFound):
        accounts.update_user(
            conn,
            accounts.OPERATOR,
            "ghost",
            role="worker",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )
