"""Rate-limit counters: a ``limits`` storage in queuelog's own database (the sign-in throttle
uses it, so its limits hold across gunicorn workers and app servers), and the optional
per-token API limit served by Flask-Limiter.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from flask import Flask, current_app, request
from limits.storage import Storage
from sqlalchemy import Engine, case, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import limiter
from app.queue.sql import dialects
from app.storage.schema import rate_limits

SCHEME = "queuelog-database"
STALE_SECONDS = 3600  # expired counters older than this are deleted on the next hit


class DatabaseStorage(Storage):
    """Fixed-window counters in the ``rate_limits`` table (one upsert per hit)."""

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: Any):
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self.engine: Engine = options["engine"]

    @property
    def base_exceptions(self) -> type[Exception]:
        return SQLAlchemyError

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add ``amount`` to the key's window, starting a new window if the old one ended."""
        now = time.time()
        ended = rate_limits.c.expires_at <= now
        statement = (
            dialects.of(self.engine)
            .insert(rate_limits)
            .values(key=key, count=amount, expires_at=now + expiry)
            .on_conflict_do_update(
                index_elements=[rate_limits.c.key],
                set_={
                    "count": case((ended, amount), else_=rate_limits.c.count + amount),
                    "expires_at": case((ended, now + expiry), else_=rate_limits.c.expires_at),
                },
            )
            .returning(rate_limits.c.count)
        )
        with self.engine.begin() as conn:
            count = int(conn.execute(statement).scalar_one())
            conn.execute(delete(rate_limits).where(rate_limits.c.expires_at < now - STALE_SECONDS))
        return count

    def get(self, key: str) -> int:
        """The key's count in its current window (0 once the window ended)."""
        query = select(rate_limits.c.count).where(
            rate_limits.c.key == key, rate_limits.c.expires_at > time.time()
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def get_expiry(self, key: str) -> float:
        """When the key's window ends (now, if it has none)."""
        query = select(rate_limits.c.expires_at).where(rate_limits.c.key == key)
        with self.engine.connect() as conn:
            return float(conn.execute(query).scalar() or time.time())

    def check(self) -> bool:
        """Whether the database answers."""
        try:
            with self.engine.connect() as conn:
                conn.execute(select(func.count()).select_from(rate_limits))
        except SQLAlchemyError:
            return False
        return True

    def reset(self) -> int | None:
        """Forget every counter."""
        with self.engine.begin() as conn:
            return conn.execute(delete(rate_limits)).rowcount

    def clear(self, key: str) -> None:
        """Forget one key's counter."""
        with self.engine.begin() as conn:
            conn.execute(delete(rate_limits).where(rate_limits.c.key == key))


def _api_limit() -> str:
    return str(current_app.config["API_RATE_LIMIT"])


def _token_key() -> str:
    """The bucket of a request: its bearer credential (hashed: keys may be logged or stored)."""
    credential = request.headers.get("Authorization", "").encode("utf-8", "replace")
    return "api:" + hashlib.sha256(credential).hexdigest()[:32]


# One bucket per token across every API route (the API blueprint applies it to itself); the
# limit is read from the app config.
api_limit = limiter.shared_limit(_api_limit, scope="api", key_func=_token_key)


def init_app(app: Flask) -> None:
    """Flask-Limiter serves only API_RATE_LIMIT: without it the limiter is switched off, so no
    request pays for it (the sign-in throttle does not use Flask-Limiter)."""
    app.config.setdefault("RATELIMIT_ENABLED", bool(app.config["API_RATE_LIMIT"]))
