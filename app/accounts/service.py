"""Account use cases: users, roles, passwords, sessions and API tokens.

Management functions take the acting user and refuse non-admins, so the pages and the CLI
share one rule. The CLI acts as ``OPERATOR``. Each change appends its audit row here, in its
transaction, so every front end records it alike: as the ``origin`` (who and from where) the
front end gives, at ``now``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta

from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from app.accounts import passwords
from app.accounts import store as accounts_store
from app.accounts.errors import (
    AccountConflict,
    AccountForbidden,
    AccountNotFound,
    FreshLoginRequired,
    InvalidAccountInput,
)
from app.accounts.models import ApiToken, User
from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.queue.contract.strictjson import text_problem
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import PRIORITIES, Role

OPERATOR = Actor(id=0, name="operator", role=Role.ADMIN)
TOKEN_PREFIX = "ql_"  # noqa: S105 (a prefix, not a secret)
TOKEN_BYTES = 32
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024
MAX_LABEL_LENGTH = 100
TOUCH_INTERVAL = timedelta(seconds=60)  # last_used_at is kept to the minute, not per request
MAX_TOKEN_LIFETIME = timedelta(days=3650)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def _require_admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise AccountForbidden("only admins manage users and tokens")


def check_password(password: str) -> None:
    """Refuse passwords too short or too long to be sensible."""
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidAccountInput(
            {"password": f"must be {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters"}
        )


def _role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise InvalidAccountInput({"role": f"must be one of {', '.join(Role)}"}) from None


def _priority(label: str) -> int:
    if label not in PRIORITIES:
        raise InvalidAccountInput({"max_priority": f"must be one of {', '.join(PRIORITIES)}"})
    return PRIORITIES[label]


def create_user(
    conn: Connection,
    actor: Actor,
    name: str,
    role: str,
    *,
    now: datetime,
    origin: Origin,
    password: str | None = None,
    max_priority: str = "medium",
) -> User:
    """Create a user; ``password`` None makes a token-only user. Names are unique regardless of
    case: ``Admin`` cannot exist next to ``admin``."""
    _require_admin(actor)
    if not _NAME.fullmatch(name):
        raise InvalidAccountInput({"name": "must be 1-64 letters, digits, '.', '_', '@' or '-'"})
    values = {
        "name": name,
        "name_lower": name.lower(),
        "role": _role(role).value,
        "max_priority": _priority(max_priority),
        "password_hash": None,
        "session_nonce": secrets.token_urlsafe(24),
        "created_at": now,
    }
    if password is not None:
        check_password(password)
        values["password_hash"] = passwords.hasher().hash(password)
    if (existing := accounts_store.user_by_name(conn, name)) is not None:
        raise AccountConflict(f"a user named {existing.name!r} already exists")
    try:
        with conn.begin_nested():
            user = accounts_store.insert_user(conn, values)
    except IntegrityError:
        raise AccountConflict(f"a user named {name!r} already exists") from None
    audit_store.record(
        conn, origin, AuditAction.USER_CREATE, f"user:{user.name}", at=now, role=user.role
    )
    return user


def has_users(conn: Connection) -> bool:
    """True once any user exists (the first run creates the admin only before that)."""
    return accounts_store.count_users(conn) > 0


def list_users(conn: Connection, actor: Actor) -> list[User]:
    """All users, for admins."""
    _require_admin(actor)
    return accounts_store.list_users(conn)


def get_user(conn: Connection, actor: Actor, name: str) -> User:
    """A user by name (in any case), for admins."""
    _require_admin(actor)
    user = accounts_store.user_by_name(conn, name) if _NAME.fullmatch(name) else None
    if user is None:
        raise AccountNotFound(f"no user named {name!r}")
    return user


def _update(conn: Connection, user: User, **values: object) -> User:
    updated = accounts_store.update_user(conn, user.id, values)
    if updated is None:
        raise AccountNotFound(f"no user named {user.name!r}")
    return updated


def _guard_admin_loss(conn: Connection, actor: Actor, user: User, *, fresh: bool) -> None:
    """Taking admin rights away (disable, demote): never from the last enabled admin, and from
    another admin only after a recent password check (like granting them)."""
    if user.role != Role.ADMIN or user.disabled:
        return
    if accounts_store.count_enabled_admins(conn, excluding=user.id) == 0:
        raise AccountConflict(f"{user.name} is the last enabled admin; make another admin first")
    if user.id != actor.id and not fresh and actor != OPERATOR:
        raise FreshLoginRequired("confirm your password to disable or demote another admin")


def update_user(
    conn: Connection,
    actor: Actor,
    name: str,
    *,
    role: str,
    max_priority: str,
    now: datetime,
    origin: Origin,
    fresh: bool = False,
) -> User:
    """Change a user's role and priority cap; the user's sessions end. ``fresh`` says whether
    the actor's password was checked recently (demoting an admin needs it)."""
    user = get_user(conn, actor, name)
    if _role(role) != Role.ADMIN:
        _guard_admin_loss(conn, actor, user, fresh=fresh)
    changed = _update(
        conn,
        user,
        role=_role(role).value,
        max_priority=_priority(max_priority),
        session_nonce=secrets.token_urlsafe(24),
    )
    target = f"user:{name}"
    details = {"role": role, "max_priority": max_priority}
    audit_store.record(conn, origin, AuditAction.USER_UPDATE, target, at=now, **details)
    return changed


def set_disabled(
    conn: Connection,
    actor: Actor,
    name: str,
    *,
    disabled: bool,
    now: datetime,
    origin: Origin,
    fresh: bool = False,
) -> User:
    """Disable (or enable) a user: sessions and API tokens stop working at once. ``fresh`` as
    for ``update_user`` (disabling an admin needs it)."""
    user = get_user(conn, actor, name)
    if disabled and user.id == actor.id:
        raise AccountConflict("you cannot disable yourself")
    if disabled:
        _guard_admin_loss(conn, actor, user, fresh=fresh)
    changed = _update(conn, user, disabled=disabled, session_nonce=secrets.token_urlsafe(24))
    action = AuditAction.USER_DISABLE if disabled else AuditAction.USER_ENABLE
    audit_store.record(conn, origin, action, f"user:{name}", at=now)
    return changed


def _with_password(conn: Connection, user: User, password: str) -> User:
    """Store a new hash of ``password``; the user's sessions end."""
    new_hash = passwords.hasher().hash(password)
    return _update(conn, user, password_hash=new_hash, session_nonce=secrets.token_urlsafe(24))


def set_password(
    conn: Connection, actor: Actor, name: str, password: str, *, now: datetime, origin: Origin
) -> User:
    """Set a user's password; the user's sessions end."""
    user = get_user(conn, actor, name)
    check_password(password)
    changed = _with_password(conn, user, password)
    audit_store.record(conn, origin, AuditAction.USER_PASSWORD, f"user:{name}", at=now)
    return changed


def change_own_password(
    conn: Connection, user: User, current: str, new: str, *, now: datetime, origin: Origin
) -> User:
    """A user changes their own password: the current one must match; every session of the
    user ends (the caller re-issues the current one with the returned user's nonce)."""
    stored = accounts_store.password_hash(conn, user.id)
    try:
        passwords.hasher().verify(stored or passwords.dummy_hash(), current[:MAX_PASSWORD_LENGTH])
    except (VerificationError, InvalidHashError):
        raise InvalidAccountInput({"current_password": "is not your password"}) from None
    if stored is None:
        raise InvalidAccountInput({"current_password": "is not your password"})
    try:
        check_password(new)
    except InvalidAccountInput as exc:
        raise InvalidAccountInput({"new_password": exc.errors["password"]}) from None
    changed = _with_password(conn, user, new)
    target = f"user:{user.name}"
    audit_store.record(conn, origin, AuditAction.USER_PASSWORD, target, at=now, own=True)
    return changed


def authenticate_password(conn: Connection, name: str, password: str) -> User | None:
    """The enabled user with this name (in any case) and password, else None (same cost either
    way)."""
    user = accounts_store.user_by_name(conn, name) if _NAME.fullmatch(name) else None
    stored = accounts_store.password_hash(conn, user.id) if user else None
    try:
        passwords.hasher().verify(stored or passwords.dummy_hash(), password[:MAX_PASSWORD_LENGTH])
    except (VerificationError, InvalidHashError):
        return None
    if user is None or stored is None or user.disabled:
        return None
    return user


def session_id(user: User) -> str:
    """What the session cookie stores: the id and the current nonce."""
    return f"{user.id}:{user.session_nonce}"


def user_for_session(conn: Connection, value: str) -> User | None:
    """The enabled user whose session id this is, if the nonce is still current."""
    user_id, _, nonce = value.partition(":")
    if not user_id.isdigit() or len(user_id) > 18 or not nonce:
        return None
    user = accounts_store.user_by_id(conn, int(user_id))
    if user is None or user.disabled or not secrets.compare_digest(user.session_nonce, nonce):
        return None
    return user


def end_sessions(conn: Connection, user: User) -> None:
    """Invalidate every session cookie issued to ``user`` (logout)."""
    accounts_store.update_user(conn, user.id, {"session_nonce": secrets.token_urlsafe(24)})


def hash_token(raw: str) -> str:
    """The SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def create_token(
    conn: Connection,
    actor: Actor,
    name: str,
    *,
    now: datetime,
    origin: Origin,
    label: str = "",
    expires_in: timedelta | None = None,
) -> tuple[ApiToken, str]:
    """Issue a token for user ``name``; the raw token is returned once and never stored.
    ``expires_in`` None: it lives until revoked."""
    user = get_user(conn, actor, name)
    if len(label) > MAX_LABEL_LENGTH:
        raise InvalidAccountInput({"label": f"must be at most {MAX_LABEL_LENGTH} characters"})
    if problem := text_problem(label):
        raise InvalidAccountInput({"label": problem})
    if expires_in is not None and not timedelta(0) < expires_in <= MAX_TOKEN_LIFETIME:
        raise InvalidAccountInput({"expires_in": "must be from 1 second to 3650 days"})
    raw = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    token = accounts_store.insert_token(
        conn,
        {
            "user_id": user.id,
            "label": label,
            "token_hash": hash_token(raw),
            "prefix": raw[:10],
            "created_at": now,
            "expires_at": now + expires_in if expires_in is not None else None,
        },
    )
    audit_store.record(
        conn, origin, AuditAction.TOKEN_ISSUE, f"token:{token.id}", at=now, user=name
    )
    return token, raw


def bearer_hash(raw: str) -> str | None:
    """The stored hash of a raw bearer token; None when the text cannot be a token at all."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    return hash_token(raw)


def token_owner(
    conn: Connection, token_hash: str, *, now: datetime
) -> tuple[ApiToken, User] | None:
    """The live (unrevoked, unexpired) token with this hash (``bearer_hash``) and its enabled
    user."""
    return accounts_store.token_owner(conn, token_hash, now)


def resolve_token(conn: Connection, raw: str, *, now: datetime) -> tuple[ApiToken, User] | None:
    """The live (unrevoked, unexpired) token and enabled user behind a raw bearer token."""
    token_hash = bearer_hash(raw)
    return None if token_hash is None else token_owner(conn, token_hash, now=now)


def needs_touch(token: ApiToken, now: datetime) -> bool:
    """Whether ``last_used_at`` is stale enough to be written again."""
    return token.last_used_at is None or now - token.last_used_at >= TOUCH_INTERVAL


def touch_token(conn: Connection, token: ApiToken, now: datetime) -> bool:
    """Record a use of the token, unless another request recorded one since it went stale or
    is recording one now (that request's use stands for this one): whether it wrote."""
    return accounts_store.touch_token(conn, token.id, now, now - TOUCH_INTERVAL)


def list_tokens(
    conn: Connection, actor: Actor, name: str | None = None
) -> list[tuple[ApiToken, str]]:
    """Tokens (with owner names), all or one user's, for admins."""
    _require_admin(actor)
    user_id = get_user(conn, actor, name).id if name else None
    return accounts_store.list_tokens(conn, user_id)


def revoke_token(
    conn: Connection, actor: Actor, token_id: int, *, now: datetime, origin: Origin
) -> ApiToken:
    """Revoke a token by id; it stops working on the next request."""
    _require_admin(actor)
    token = accounts_store.revoke_token(conn, token_id, now)
    if token is None:
        if accounts_store.token_by_id(conn, token_id) is None:
            raise AccountNotFound(f"no token with id {token_id}")
        raise AccountConflict(f"token {token_id} is already revoked")
    audit_store.record(conn, origin, AuditAction.TOKEN_REVOKE, f"token:{token_id}", at=now)
    return token
