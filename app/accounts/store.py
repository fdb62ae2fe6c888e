"""All SQL on users and API tokens."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, delete, func, insert, or_, select, update

from app.accounts.models import ApiToken, User
from app.queue.sql.prepared import Prepared
from app.storage.schema import api_tokens, recovery_codes, users
from app.storage.sqltypes import UTCDateTime

_USER_COLUMNS = [users.c[name] for name in User.__dataclass_fields__]
_TOKEN_COLUMNS = [api_tokens.c[name] for name in ApiToken.__dataclass_fields__]
# Every API request looks its token up and, about once a minute, records its use.
_TOKEN_OWNER = Prepared(
    select(*_TOKEN_COLUMNS, *_USER_COLUMNS)
    .join(users, users.c.id == api_tokens.c.user_id)
    .where(
        api_tokens.c.token_hash == bindparam("token_hash"),
        api_tokens.c.revoked_at.is_(None),
        or_(
            api_tokens.c.expires_at.is_(None),
            api_tokens.c.expires_at > bindparam("now", type_=UTCDateTime()),
        ),
        users.c.disabled.is_(False),
    )
)
# The token's row only if it is still stale and no other transaction holds it: concurrent
# requests of one token (in other server processes) each find it stale at the minute's turn, and
# where writers run at once the later ones would otherwise wait for the first to commit its
# whole request. One of them records the use; the others go on (where writers take turns, they
# never meet here).
_STALE = api_tokens.alias("stale")
_STALE_TOKEN = (
    select(_STALE.c.id)
    .where(
        _STALE.c.id == bindparam("token_id"),
        or_(
            _STALE.c.last_used_at.is_(None),
            _STALE.c.last_used_at <= bindparam("stale_before", type_=UTCDateTime()),
        ),
    )
    .with_for_update(skip_locked=True)
)
_TOUCH_TOKEN = Prepared(
    update(api_tokens)
    .where(api_tokens.c.id == _STALE_TOKEN.scalar_subquery())
    .values(last_used_at=bindparam("now", type_=UTCDateTime()))
)


def count_users(conn: Connection) -> int:
    """How many users exist (disabled ones included)."""
    return int(conn.execute(select(func.count()).select_from(users)).scalar_one())


def insert_user(conn: Connection, values: Mapping[str, Any]) -> User:
    """Insert a user and return it."""
    row = conn.execute(insert(users).values(**values).returning(*_USER_COLUMNS)).one()
    return User.from_row(row._mapping)


def user_by_name(conn: Connection, name: str) -> User | None:
    """A user by name in any case (names are unique regardless of case)."""
    row = conn.execute(select(*_USER_COLUMNS).where(users.c.name_lower == name.lower())).first()
    return User.from_row(row._mapping) if row else None


def user_by_id(conn: Connection, user_id: int) -> User | None:
    """A user by id."""
    row = conn.execute(select(*_USER_COLUMNS).where(users.c.id == user_id)).first()
    return User.from_row(row._mapping) if row else None


def count_enabled_admins(conn: Connection, *, excluding: int) -> int:
    """How many enabled admins there are besides user ``excluding``. The admins' rows stay
    locked until the caller's transaction ends (FOR UPDATE, where writers run at once; else
    the transaction writes alone anyway), so two admins demoting each other at once take
    turns: the second one counts after the first commits, and the last-admin rule holds."""
    query = (
        select(users.c.id)
        .where(users.c.role == "admin", users.c.disabled.is_(False))
        .with_for_update()
    )
    return sum(1 for user_id in conn.execute(query).scalars() if user_id != excluding)


def password_hash(conn: Connection, user_id: int) -> str | None:
    """The stored password hash of a user (None for token-only users)."""
    return conn.execute(select(users.c.password_hash).where(users.c.id == user_id)).scalar()


def list_users(conn: Connection) -> list[User]:
    """All users by name."""
    return [
        User.from_row(r._mapping)
        for r in conn.execute(select(*_USER_COLUMNS).order_by(users.c.name))
    ]


def update_user(conn: Connection, user_id: int, values: Mapping[str, Any]) -> User | None:
    """Update a user's columns and return the new row."""
    row = conn.execute(
        update(users).where(users.c.id == user_id).values(**values).returning(*_USER_COLUMNS)
    ).first()
    return User.from_row(row._mapping) if row else None


def insert_token(conn: Connection, values: Mapping[str, Any]) -> ApiToken:
    """Insert a token record and return it."""
    row = conn.execute(insert(api_tokens).values(**values).returning(*_TOKEN_COLUMNS)).one()
    return ApiToken.from_row(row._mapping)


def token_owner(conn: Connection, token_hash: str, now: datetime) -> tuple[ApiToken, User] | None:
    """The live (unrevoked, unexpired) token with this hash and its enabled owner."""
    row = _TOKEN_OWNER.row(conn, {"token_hash": token_hash, "now": now})
    if row is None:
        return None
    split = len(_TOKEN_COLUMNS)
    return ApiToken(*row[:split]), User(*row[split:])


def touch_token(conn: Connection, token_id: int, now: datetime, stale_before: datetime) -> bool:
    """Record that a token was used at ``now``, if its last use is still before
    ``stale_before`` and no other transaction is recording one (it never waits): whether it
    wrote."""
    params = {"token_id": token_id, "now": now, "stale_before": stale_before}
    return _TOUCH_TOKEN.run(conn, params) == 1


def list_tokens(conn: Connection, user_id: int | None = None) -> list[tuple[ApiToken, str]]:
    """Tokens with their owner's name, newest first, optionally for one user."""
    query = (
        select(*_TOKEN_COLUMNS, users.c.name)
        .join(users, users.c.id == api_tokens.c.user_id)
        .order_by(api_tokens.c.id.desc())
    )
    if user_id is not None:
        query = query.where(api_tokens.c.user_id == user_id)
    return [(ApiToken.from_row(r._mapping), r.name) for r in conn.execute(query)]


def revoke_token(conn: Connection, token_id: int, now: datetime) -> ApiToken | None:
    """Revoke a live token; None when it does not exist or was already revoked."""
    row = conn.execute(
        update(api_tokens)
        .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
        .returning(*_TOKEN_COLUMNS)
    ).first()
    return ApiToken.from_row(row._mapping) if row else None


def token_by_id(conn: Connection, token_id: int) -> ApiToken | None:
    """A token record by id."""
    row = conn.execute(select(*_TOKEN_COLUMNS).where(api_tokens.c.id == token_id)).first()
    return ApiToken.from_row(row._mapping) if row else None


class TotpState(NamedTuple):
    """A user's second factor as stored: the secret encrypted (``sealed``) or, if stored before
    secrets were encrypted, in plain text (``plain``); the last step accepted."""

    plain: str | None
    sealed: str | None
    last_step: int | None


def totp_state(conn: Connection, user_id: int) -> TotpState:
    """A user's stored second factor (all None when not enrolled)."""
    row = conn.execute(
        select(users.c.totp_secret, users.c.totp_sealed, users.c.totp_last_step).where(
            users.c.id == user_id
        )
    ).first()
    return TotpState(*row) if row else TotpState(None, None, None)


def set_totp(conn: Connection, user_id: int, sealed: str, step: int | None) -> None:
    """Store a user's encrypted TOTP secret (dropping any plain-text one and the pending one)
    and the step of the code that confirmed it."""
    conn.execute(
        update(users)
        .where(users.c.id == user_id)
        .values(totp_sealed=sealed, totp_secret=None, totp_pending=None, totp_last_step=step)
    )


def seal_plain_totp(conn: Connection, user_id: int, sealed: str) -> None:
    """Replace a plain-text TOTP secret by its encrypted form (the last step stays)."""
    conn.execute(
        update(users).where(users.c.id == user_id).values(totp_sealed=sealed, totp_secret=None)
    )


def clear_totp(conn: Connection, user_id: int) -> None:
    """Turn a user's second factor off: no secret, no step, no recovery codes."""
    conn.execute(
        update(users)
        .where(users.c.id == user_id)
        .values(totp_secret=None, totp_sealed=None, totp_pending=None, totp_last_step=None)
    )
    conn.execute(delete(recovery_codes).where(recovery_codes.c.user_id == user_id))


def pending_totp(conn: Connection, user_id: int) -> str | None:
    """The encrypted secret of an enrolment in progress."""
    return conn.execute(select(users.c.totp_pending).where(users.c.id == user_id)).scalar()


def set_pending_totp(conn: Connection, user_id: int, sealed: str) -> None:
    """Keep the encrypted secret an enrolment shows until a code confirms it."""
    conn.execute(update(users).where(users.c.id == user_id).values(totp_pending=sealed))


def advance_totp_step(conn: Connection, user_id: int, step: int) -> bool:
    """Record ``step`` as used if it is later than the last one (compare-and-set: two requests
    with the same code cannot both pass)."""
    result = conn.execute(
        update(users)
        .where(
            users.c.id == user_id,
            or_(users.c.totp_last_step.is_(None), users.c.totp_last_step < step),
        )
        .values(totp_last_step=step)
    )
    return result.rowcount == 1


def replace_recovery_codes(conn: Connection, user_id: int, code_hashes: list[str]) -> None:
    """Replace a user's recovery codes."""
    conn.execute(delete(recovery_codes).where(recovery_codes.c.user_id == user_id))
    conn.execute(
        insert(recovery_codes), [{"user_id": user_id, "code_hash": h} for h in code_hashes]
    )


def count_recovery_codes(conn: Connection, user_id: int) -> int:
    """How many of a user's recovery codes are still unused."""
    query = select(func.count()).where(
        recovery_codes.c.user_id == user_id, recovery_codes.c.used_at.is_(None)
    )
    return int(conn.execute(query).scalar_one())


def spend_recovery_code(conn: Connection, user_id: int, code_hash: str, now: datetime) -> bool:
    """Mark an unused recovery code as used; False when there is none with this hash."""
    result = conn.execute(
        update(recovery_codes)
        .where(
            recovery_codes.c.user_id == user_id,
            recovery_codes.c.code_hash == code_hash,
            recovery_codes.c.used_at.is_(None),
        )
        .values(used_at=now)
    )
    return result.rowcount == 1
