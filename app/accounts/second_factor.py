"""The optional second factor: TOTP (RFC 6238) enrolment, checks and turning it off, and
single-use recovery codes. Secrets are stored encrypted (``app.infra.secretbox``); the one an
enrolment shows waits, encrypted too, in the user's row, never in the session cookie."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from enum import StrEnum

import pyotp
from sqlalchemy import Connection

from app.accounts import store as accounts_store
from app.accounts.errors import AccountConflict, InvalidAccountInput
from app.accounts.models import User
from app.infra.secretbox import SecretBox, SecretsKeyMissing

ISSUER = "queuelog"
RECOVERY_CODES = 10
DRIFT_STEPS = 1  # a code of the previous or next 30-second step is accepted (clock drift)


class Method(StrEnum):
    """How a code was accepted (the audit log tells them apart)."""

    TOTP = "totp"
    RECOVERY_CODE = "recovery_code"


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


def _new_recovery_codes(conn: Connection, user: User) -> list[str]:
    """Replace the user's recovery codes by ten new ones, returned to be shown once (only
    their hashes are kept)."""
    codes = [f"{secrets.token_hex(4)}-{secrets.token_hex(4)}" for _ in range(RECOVERY_CODES)]
    accounts_store.replace_recovery_codes(conn, user.id, [_hash_code(c) for c in codes])
    return codes


def is_enrolled(conn: Connection, user: User) -> bool:
    """Whether the user signs in with a second factor."""
    state = accounts_store.totp_state(conn, user.id)
    return state.sealed is not None or state.plain is not None


def pending_secret(conn: Connection, user: User, box: SecretBox) -> str:
    """The secret an enrolment shows: the one already waiting, else a new one kept (encrypted)
    server-side until a code confirms it."""
    sealed = accounts_store.pending_totp(conn, user.id)
    if sealed is not None:
        return box.open(sealed)
    secret = new_secret()
    accounts_store.set_pending_totp(conn, user.id, box.seal(secret))
    return secret


def enrol(conn: Connection, user: User, box: SecretBox, code: str, *, now: datetime) -> list[str]:
    """Turn the second factor on once ``code`` proves the user's app holds the pending
    secret; returns the recovery codes, to be shown once."""
    if is_enrolled(conn, user):
        raise AccountConflict("the second factor is already on")
    sealed = accounts_store.pending_totp(conn, user.id)
    if sealed is None:
        raise AccountConflict("no enrolment in progress: open the page again")
    step = _matching_step(box.open(sealed), code, now)
    if step is None:
        raise InvalidAccountInput({"code": "does not match; check the time on your device"})
    accounts_store.set_totp(conn, user.id, sealed, step)
    return _new_recovery_codes(conn, user)


def verify(
    conn: Connection, user: User, box: SecretBox | None, code: str, *, now: datetime
) -> Method | None:
    """How ``code`` was accepted: a TOTP code of a step later than any used before (so a code
    cannot be replayed within its window), or an unused recovery code (then spent); None when
    it is neither. A plain-text secret from before encryption is encrypted on its first use."""
    state = accounts_store.totp_state(conn, user.id)
    if state.sealed is not None:
        if box is None:
            raise SecretsKeyMissing()
        secret = box.open(state.sealed)
    elif state.plain is not None:
        secret = state.plain
    else:
        return None
    step = _matching_step(secret, code, now)
    if step is not None:
        if not accounts_store.advance_totp_step(conn, user.id, step):
            return None
        if state.sealed is None and box is not None:
            accounts_store.seal_plain_totp(conn, user.id, box.seal(secret))
        return Method.TOTP
    if accounts_store.spend_recovery_code(conn, user.id, _hash_code(code), now):
        return Method.RECOVERY_CODE
    return None


def disable(conn: Connection, user: User) -> None:
    """Turn the second factor off (the caller has checked the password and a code)."""
    accounts_store.clear_totp(conn, user.id)


def regenerate_recovery_codes(conn: Connection, user: User) -> list[str]:
    """New recovery codes in place of all the old ones (the caller has checked the password
    and a code); returned to be shown once."""
    if not is_enrolled(conn, user):
        raise AccountConflict("the second factor is off")
    return _new_recovery_codes(conn, user)


def unused_recovery_codes(conn: Connection, user: User) -> int:
    """How many recovery codes the user has left."""
    return accounts_store.count_recovery_codes(conn, user.id)
