"""The optional second factor: TOTP (RFC 6238) enrolment and checks, single-use recovery codes."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

import pyotp
from sqlalchemy import Connection

from app.accounts import store
from app.accounts.errors import AccountConflict, InvalidAccountInput
from app.accounts.models import User

ISSUER = "queuelog"
RECOVERY_CODES = 10
DRIFT_STEPS = 1  # a code of the previous or next 30-second step is accepted (clock drift)


def new_secret() -> str:
    """A fresh random TOTP secret (base32, 160 bits)."""
    return pyotp.random_base32(32)


def provisioning_uri(secret: str, name: str) -> str:
    """The ``otpauth://`` URI an authenticator app reads from the QR code."""
    return pyotp.TOTP(secret).provisioning_uri(name=name, issuer_name=ISSUER)


def _matching_step(secret: str, code: str, now: datetime) -> int | None:
    """The time step whose code ``code`` is, within the allowed drift, else None."""
    code = code.strip().replace(" ", "")
    if len(code) != 6 or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret)
    for offset in range(-DRIFT_STEPS, DRIFT_STEPS + 1):
        at = now + timedelta(seconds=totp.interval * offset)
        if secrets.compare_digest(totp.at(at), code):
            return int(totp.timecode(at))
    return None


def _hash_code(code: str) -> str:
    return hashlib.sha256(code.strip().lower().replace("-", "").encode()).hexdigest()


def is_enrolled(conn: Connection, user: User) -> bool:
    """Whether the user signs in with a second factor."""
    return store.totp_state(conn, user.id)[0] is not None


def enrol(conn: Connection, user: User, secret: str, code: str, *, now: datetime) -> list[str]:
    """Turn the second factor on once ``code`` proves the user's app holds ``secret``; returns
    the recovery codes, to be shown once (only their hashes are kept)."""
    if is_enrolled(conn, user):
        raise AccountConflict("the second factor is already on")
    step = _matching_step(secret, code, now)
    if step is None:
        raise InvalidAccountInput({"code": "does not match; check the time on your device"})
    codes = [f"{secrets.token_hex(4)}-{secrets.token_hex(4)}" for _ in range(RECOVERY_CODES)]
    store.set_totp(conn, user.id, secret, step)
    store.replace_recovery_codes(conn, user.id, [_hash_code(c) for c in codes])
    return codes


def verify(conn: Connection, user: User, code: str, *, now: datetime) -> bool:
    """Whether ``code`` is a TOTP code of a step later than any used before (so a code cannot
    be replayed within its window), or an unused recovery code (which is then spent)."""
    secret, _ = store.totp_state(conn, user.id)
    if secret is None:
        return False
    step = _matching_step(secret, code, now)
    if step is not None:
        return store.advance_totp_step(conn, user.id, step)
    return store.spend_recovery_code(conn, user.id, _hash_code(code), now)
