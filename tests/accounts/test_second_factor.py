"""TOTP checks with real codes computed by pyotp, the clock passed in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pyotp
import pytest
from cryptography.fernet import Fernet
from flask import Flask
from sqlalchemy import Connection, select, update

from app.accounts import second_factor
from app.accounts import service as accounts
from app.accounts.errors import AccountConflict, InvalidAccountInput
from app.infra import db
from app.infra.secretbox import SecretBox, SecretUnreadable
from app.storage.schema import users
from devservers.accounts import AS_OPERATOR
from tests.conftest import TEST_SECRETS_KEY

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
STEP = timedelta(seconds=30)
BOX = SecretBox.from_setting(TEST_SECRETS_KEY)


@pytest.fixture
def conn(app: Flask) -> Iterator[Connection]:
    with app.app_context(), db.transaction() as connection:
        yield connection


def test_totp_codes_are_single_use_and_recovery_codes_work_once(conn: Connection) -> None:
    user = accounts.create_user(
        conn, accounts.OPERATOR, "ann", "producer", now=NOW, origin=AS_OPERATOR
    )
    secret = second_factor.pending_secret(conn, user, BOX)
    assert second_factor.pending_secret(conn, user, BOX) == secret  # kept until confirmed
    totp = pyotp.TOTP(secret)
    with pytest.raises(InvalidAccountInput):
        second_factor.enrol(conn, user, BOX, "000000" if totp.at(NOW) != "000000" else "1", now=NOW)
    codes = second_factor.enrol(conn, user, BOX, totp.at(NOW), now=NOW)
    assert len(codes) == second_factor.RECOVERY_CODES and len(set(codes)) == len(codes)
    assert second_factor.is_enrolled(conn, user)
    with pytest.raises(AccountConflict):
        second_factor.enrol(conn, user, BOX, totp.at(NOW), now=NOW)
    # The enrolment code, and any code of the same or an earlier step, cannot be used again.
    assert not second_factor.verify(conn, user, BOX, totp.at(NOW), now=NOW)
    assert not second_factor.verify(conn, user, BOX, totp.at(NOW - STEP), now=NOW)
    later = NOW + 4 * STEP
    assert second_factor.verify(conn, user, BOX, totp.at(later), now=later)
    assert not second_factor.verify(conn, user, BOX, totp.at(later), now=later)  # replay refused
    # One step of clock drift either way is accepted; more is not.
    assert second_factor.verify(conn, user, BOX, totp.at(later + STEP), now=later)
    assert not second_factor.verify(conn, user, BOX, totp.at(later + 4 * STEP), now=later)
    assert second_factor.verify(conn, user, BOX, codes[0].upper(), now=later)
    assert not second_factor.verify(conn, user, BOX, codes[0], now=later)  # spent
    assert not second_factor.verify(conn, user, BOX, "not-a-code", now=later)


def _row(conn: Connection, name: str) -> Any:
    return conn.execute(select(users).where(users.c.name == name)).mappings().one()


def test_the_secret_is_encrypted_at_rest_and_pending_server_side(conn: Connection) -> None:
    user = accounts.create_user(
        conn, accounts.OPERATOR, "ann", "producer", now=NOW, origin=AS_OPERATOR
    )
    secret = second_factor.pending_secret(conn, user, BOX)
    pending = _row(conn, "ann")["totp_pending"]
    assert secret not in pending and BOX.open(pending) == secret
    second_factor.enrol(conn, user, BOX, pyotp.TOTP(secret).at(NOW), now=NOW)
    row = _row(conn, "ann")
    assert row["totp_secret"] is None and row["totp_pending"] is None
    assert secret not in row["totp_sealed"] and BOX.open(row["totp_sealed"]) == secret
    other = SecretBox.from_setting(Fernet.generate_key().decode())
    with pytest.raises(SecretUnreadable):  # another key cannot read it
        second_factor.verify(conn, user, other, pyotp.TOTP(secret).at(NOW + STEP), now=NOW)
    # A new key first, the old one after it: still readable (rotation).
    rotated = SecretBox.from_setting(f"{Fernet.generate_key().decode()},{TEST_SECRETS_KEY}")
    code = pyotp.TOTP(secret).at(NOW + STEP)
    assert second_factor.verify(conn, user, rotated, code, now=NOW) is second_factor.Method.TOTP


def test_a_plain_text_secret_from_before_keeps_working_and_is_then_encrypted(
    conn: Connection,
) -> None:
    user = accounts.create_user(
        conn, accounts.OPERATOR, "ann", "producer", now=NOW, origin=AS_OPERATOR
    )
    secret = second_factor.new_secret()
    conn.execute(update(users).where(users.c.id == user.id).values(totp_secret=secret))
    assert second_factor.is_enrolled(conn, user)
    totp = pyotp.TOTP(secret)
    # Without a key the plain secret is still read; with one, its first use encrypts it.
    assert second_factor.verify(conn, user, None, totp.at(NOW), now=NOW) is not None
    assert _row(conn, "ann")["totp_secret"] == secret
    method = second_factor.verify(conn, user, BOX, totp.at(NOW + STEP), now=NOW + STEP)
    assert method is second_factor.Method.TOTP
    row = _row(conn, "ann")
    assert row["totp_secret"] is None and BOX.open(row["totp_sealed"]) == secret
    later = NOW + 2 * STEP
    assert second_factor.verify(conn, user, BOX, totp.at(later), now=later) is not None


def test_turning_off_and_new_recovery_codes(conn: Connection) -> None:
    user = accounts.create_user(
        conn, accounts.OPERATOR, "ann", "producer", now=NOW, origin=AS_OPERATOR
    )
    secret = second_factor.pending_secret(conn, user, BOX)
    old = second_factor.enrol(conn, user, BOX, pyotp.TOTP(secret).at(NOW), now=NOW)
    new = second_factor.regenerate_recovery_codes(conn, user)
    assert set(new).isdisjoint(old) and second_factor.unused_recovery_codes(conn, user) == 10
    assert second_factor.verify(conn, user, BOX, old[0], now=NOW) is None
    assert second_factor.verify(conn, user, BOX, new[0], now=NOW) is not None
    assert second_factor.unused_recovery_codes(conn, user) == 9
    second_factor.disable(conn, user)
    assert not second_factor.is_enrolled(conn, user)
    assert second_factor.unused_recovery_codes(conn, user) == 0
    assert _row(conn, "ann")["totp_sealed"] is None
    with pytest.raises(AccountConflict):
        second_factor.regenerate_recovery_codes(conn, user)
