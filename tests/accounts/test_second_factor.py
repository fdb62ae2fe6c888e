"""TOTP checks with real codes computed by pyotp, the clock passed in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pyotp
import pytest
from flask import Flask
from sqlalchemy import Connection

from app import db
from app.accounts import second_factor
from app.accounts import service as accounts
from app.accounts.errors import AccountConflict, InvalidAccountInput

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
STEP = timedelta(seconds=30)


@pytest.fixture
def conn(app: Flask) -> Iterator[Connection]:
    with app.app_context(), db.transaction() as connection:
        yield connection


def test_totp_codes_are_single_use_and_recovery_codes_work_once(conn: Connection) -> None:
    user = accounts.create_user(conn, accounts.OPERATOR, "ann", "producer", now=NOW)
    secret = second_factor.new_secret()
    totp = pyotp.TOTP(secret)
    with pytest.raises(InvalidAccountInput):
        second_factor.enrol(
            conn, user, secret, "000000" if totp.at(NOW) != "000000" else "1", now=NOW
        )
    codes = second_factor.enrol(conn, user, secret, totp.at(NOW), now=NOW)
    assert len(codes) == second_factor.RECOVERY_CODES and len(set(codes)) == len(codes)
    assert second_factor.is_enrolled(conn, user)
    with pytest.raises(AccountConflict):
        second_factor.enrol(conn, user, secret, totp.at(NOW), now=NOW)
    # The enrolment code, and any code of the same or an earlier step, cannot be used again.
    assert not second_factor.verify(conn, user, totp.at(NOW), now=NOW)
    assert not second_factor.verify(conn, user, totp.at(NOW - STEP), now=NOW)
    later = NOW + 4 * STEP
    assert second_factor.verify(conn, user, totp.at(later), now=later)
    assert not second_factor.verify(conn, user, totp.at(later), now=later)  # replay refused
    # One step of clock drift either way is accepted; more is not.
    assert second_factor.verify(conn, user, totp.at(later + STEP), now=later)
    assert not second_factor.verify(conn, user, totp.at(later + 4 * STEP), now=later)
    assert second_factor.verify(conn, user, codes[0].upper(), now=later)
    assert not second_factor.verify(conn, user, codes[0], now=later)  # spent
    assert not second_factor.verify(conn, user, "not-a-code", now=later)
